//! The executions running on this replica, by run id: what Abort, a disconnecting client and
//! shutdown stop, and what lease takeover leaves alone. An execution is listed from its spawn
//! until its [`Registered`] guard goes: at its end, or when its task unwinds (a panicking run
//! must not stay listed, or Abort would cancel nothing and its lease would never be taken
//! over here).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio_util::sync::CancellationToken;
use tracing::error;

/// How to stop one execution of a run, and why it was stopped.
pub(super) struct LiveRun {
    pub(super) cancel: CancellationToken,
    pub(super) reason: Arc<Mutex<Option<String>>>,
}

impl LiveRun {
    /// Stops the execution, giving `why` unless it was already stopped for a reason.
    pub(super) fn stop(&self, why: &str) {
        if let Ok(mut reason) = self.reason.lock() {
            reason.get_or_insert_with(|| why.to_owned());
        }
        self.cancel.cancel();
    }
}

/// The executions running here.
#[derive(Default)]
pub(super) struct LiveRuns {
    runs: Mutex<HashMap<String, LiveRun>>,
}

/// Lists an execution while it lives; dropping it delists the execution unless a later one of
/// the same run (a suspended run's continuation) replaced it meanwhile.
pub(super) struct Registered {
    runs: Arc<LiveRuns>,
    run_id: String,
    reason: Arc<Mutex<Option<String>>>,
}

impl LiveRuns {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, LiveRun>> {
        // Entries are whole or absent: a poisoned lock holds nothing half-changed.
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Lists a new execution of `run_id` (replacing an earlier one's entry), stopped through
    /// `cancel`; its guard keeps the reason it is stopped for.
    pub(super) fn register(
        self: &Arc<Self>,
        run_id: &str,
        cancel: CancellationToken,
    ) -> Registered {
        let reason: Arc<Mutex<Option<String>>> = Arc::default();
        let entry = LiveRun {
            cancel,
            reason: reason.clone(),
        };
        self.lock().insert(run_id.to_owned(), entry);
        Registered {
            runs: self.clone(),
            run_id: run_id.to_owned(),
            reason,
        }
    }

    /// Whether an execution of `run_id` runs here.
    pub(super) fn contains(&self, run_id: &str) -> bool {
        self.lock().contains_key(run_id)
    }

    /// Stops the execution of `run_id` with `why`; false when it does not run here.
    pub(super) fn stop(&self, run_id: &str, why: &str) -> bool {
        let runs = self.lock();
        let Some(run) = runs.get(run_id) else {
            return false;
        };
        run.stop(why);
        true
    }

    /// The ids of every run executing here.
    pub(super) fn ids(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }
}

impl Registered {
    /// Where the execution's stop reason is kept.
    pub(super) fn reason(&self) -> &Arc<Mutex<Option<String>>> {
        &self.reason
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        if std::thread::panicking() {
            error!(
                run_id = %self.run_id,
                "the run's execution panicked; its lease lapses and the run is taken over"
            );
        }
        let mut runs = self.runs.lock();
        if runs
            .get(&self.run_id)
            .is_some_and(|entry| Arc::ptr_eq(&entry.reason, &self.reason))
        {
            runs.remove(&self.run_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::panic::{AssertUnwindSafe, catch_unwind};

    use super::*;

    fn execution(runs: &Arc<LiveRuns>, run_id: &str) -> (Registered, CancellationToken) {
        let cancel = CancellationToken::new();
        let registered = runs.register(run_id, cancel.clone());
        (registered, cancel)
    }

    #[test]
    fn an_execution_is_listed_until_its_guard_goes() {
        let runs = Arc::new(LiveRuns::default());
        let (registered, cancel) = execution(&runs, "run-1");
        assert!(runs.contains("run-1"));
        assert_eq!(runs.ids(), vec!["run-1".to_owned()]);
        assert!(runs.stop("run-1", "Aborted by a test"));
        assert!(cancel.is_cancelled());
        assert_eq!(
            registered.reason().lock().ok().and_then(|r| r.clone()),
            Some("Aborted by a test".to_owned())
        );
        drop(registered);
        assert!(!runs.contains("run-1"));
        assert!(!runs.stop("run-1", "Aborted by a test"));
        assert!(runs.ids().is_empty());
    }

    #[test]
    fn the_first_reason_to_stop_is_kept() {
        let runs = Arc::new(LiveRuns::default());
        let (registered, _cancel) = execution(&runs, "run-1");
        assert!(runs.stop("run-1", "first"));
        assert!(runs.stop("run-1", "second"));
        assert_eq!(
            registered.reason().lock().ok().and_then(|r| r.clone()),
            Some("first".to_owned())
        );
    }

    #[test]
    fn a_panicking_execution_is_delisted_as_it_unwinds() {
        let runs = Arc::new(LiveRuns::default());
        let unwound = catch_unwind(AssertUnwindSafe(|| {
            let (_registered, _cancel) = execution(&runs, "run-1");
            assert!(runs.contains("run-1"));
            panic!("a bug in a run");
        }));
        assert!(unwound.is_err());
        assert!(!runs.contains("run-1"));
        assert!(!runs.stop("run-1", "Aborted by a test"));
    }

    #[test]
    fn an_ended_execution_leaves_its_continuation_listed() {
        let runs = Arc::new(LiveRuns::default());
        let (first, first_cancel) = execution(&runs, "run-1");
        let (continuation, cancel) = execution(&runs, "run-1");
        drop(first);
        assert!(runs.contains("run-1"));
        assert!(runs.stop("run-1", "Aborted by a test"));
        assert!(cancel.is_cancelled());
        assert!(!first_cancel.is_cancelled());
        drop(continuation);
        assert!(!runs.contains("run-1"));
    }
}
