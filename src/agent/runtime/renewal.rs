//! Lease renewal for every run this replica executes, by one task: a run enters its record
//! handle when it starts and is renewed every third of the lease until its [`Renewing`] guard
//! goes (at its end, or when its task unwinds). One timer for the replica instead of a task, a
//! timer and two wake-ups per run, which a short run paid for nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::lease::{Own, RecordHandle};
use super::{LiveRun, Runtime, millis};
use crate::agent::message::now_ms;

/// Renewals in flight at once: a replica with thousands of waiting runs renews them in waves
/// rather than all at once.
const CONCURRENT_RENEWALS: usize = 64;

/// The runs whose lease this replica renews.
#[derive(Default)]
pub(super) struct Leases {
    runs: Mutex<HashMap<u64, Leased>>,
    next_key: AtomicU64,
}

/// One run's entry.
struct Leased {
    run_id: String,
    handle: Arc<RecordHandle>,
    /// This execution (not the run id's latest): stopped when another replica took it over.
    execution: LiveRun,
    /// When its lease was last written (or the run started).
    renewed: Instant,
}

/// Keeps a run's lease renewed while it lives; dropping it stops the renewals (a renewal
/// already under way finds the end recorded and writes nothing).
pub(super) struct Renewing {
    leases: Arc<Leases>,
    key: u64,
}

impl Drop for Renewing {
    fn drop(&mut self) {
        self.leases.ended(self.key);
    }
}

impl Leases {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Leased>> {
        // Entries are whole or absent: a poisoned lock holds nothing half-changed.
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Renews `handle`'s lease from now on; when another replica takes the run over, the run
    /// is cancelled with that reason.
    pub(super) fn enter(
        self: &Arc<Self>,
        run_id: &str,
        handle: Arc<RecordHandle>,
        cancel: CancellationToken,
        reason: Arc<Mutex<Option<String>>>,
    ) -> Renewing {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let entry = Leased {
            run_id: run_id.to_owned(),
            handle,
            execution: LiveRun { cancel, reason },
            renewed: Instant::now(),
        };
        self.lock().insert(key, entry);
        Renewing {
            leases: self.clone(),
            key,
        }
    }

    /// The entries whose lease is due for renewal at `now`, with their run ids (marked
    /// renewed, so that a slow store does not get them twice).
    fn due(&self, now: Instant, every: Duration) -> Vec<(u64, String, Arc<RecordHandle>)> {
        let mut runs = self.lock();
        runs.iter_mut()
            .filter(|(_, run)| now.duration_since(run.renewed) >= every)
            .map(|(key, run)| {
                run.renewed = now;
                (*key, run.run_id.clone(), run.handle.clone())
            })
            .collect()
    }

    /// Stops renewing the entry `key` and, when it is still there, cancels its run: another
    /// replica owns it now.
    fn lost(&self, key: u64) {
        let Some(run) = self.lock().remove(&key) else {
            return;
        };
        warn!(run_id = %run.run_id, "another replica took the run over; stopping it here");
        run.execution.stop("Taken over by another server");
    }

    /// Stops renewing the entry `key`: its end is recorded, or its run is gone.
    fn ended(&self, key: u64) {
        self.lock().remove(&key);
    }
}

impl Runtime {
    /// Renews the lease of every run executing here every third of its length, until
    /// `shutdown`. Looks every sixth, so a lease has at least half its length left when
    /// renewed.
    pub async fn renew_leases(self: Arc<Self>, shutdown: CancellationToken) {
        let every = self.limits.lease / 3;
        let mut tick = tokio::time::interval((every / 2).max(Duration::from_millis(1)));
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            let now = tokio::select! {
                () = shutdown.cancelled() => return,
                now = tick.tick() => now,
            };
            let due = self.leases.due(now, every);
            if due.is_empty() {
                continue;
            }
            // A wave of its own task: a slow store delays these runs, not the next look.
            let this = self.clone();
            tokio::spawn(async move {
                futures::stream::iter(due)
                    .for_each_concurrent(CONCURRENT_RENEWALS, |(key, run_id, handle)| {
                        let this = this.clone();
                        async move { this.renew(key, &run_id, &handle).await }
                    })
                    .await;
            });
        }
    }

    /// Writes one run's lease a full length from now.
    async fn renew(&self, key: u64, run_id: &str, handle: &RecordHandle) {
        let lease = millis(self.limits.lease);
        let now = now_ms();
        let written = self
            .write_own(handle, |r| {
                r.lease_until_ms = Some(now.saturating_add(lease));
                r.updated_at_ms = now;
            })
            .await;
        match written {
            Own::Written => {}
            Own::Ended => self.leases.ended(key),
            Own::Lost => self.leases.lost(key),
            // The lease may lapse: then another replica takes over and the next renewal finds
            // out.
            Own::Failed(e) => warn!(run_id, error = %e, "could not renew the run's lease"),
        }
    }
}
