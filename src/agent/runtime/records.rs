//! Run records in the store: how this replica writes one (its bytes, how long it lives, its
//! lease while it runs) and reads one back.

use std::time::Duration;

use bytes::Bytes;

use super::{Runtime, millis};
use crate::agent::error::RunError;
use crate::agent::message::now_ms;
use crate::agent::record::{RunRecord, RunStatus};
use crate::store::{Cas, RunWrite, StoreError, Versioned};

impl Runtime {
    /// Writes `record` if the stored one is at version `expected` (0: absent).
    pub(super) async fn write_record(
        &self,
        run_id: &str,
        expected: u64,
        record: &RunRecord,
    ) -> Result<Cas, StoreError> {
        let RunWrite {
            value,
            ttl,
            lease_until_ms,
            ..
        } = self.run_write(expected, record)?;
        self.deps
            .store
            .cas_run(run_id, expected, value, ttl, lease_until_ms)
            .await
    }

    /// The store write of `record` over version `expected`: its bytes, how long it lives, and
    /// its lease while it runs.
    pub(super) fn run_write(
        &self,
        expected: u64,
        record: &RunRecord,
    ) -> Result<RunWrite, StoreError> {
        let bytes = serde_json::to_vec(record)
            .map_err(|e| StoreError::Corrupt(format!("run record: {e}")))?;
        // A running run stays on the store's lease list; the record's own lease when it has
        // one (a continuation gets its first at its first renewal).
        let lease_until_ms = (record.status == RunStatus::Running).then(|| {
            record
                .lease_until_ms
                .unwrap_or_else(|| now_ms().saturating_add(millis(self.limits.lease)))
        });
        let ttl = match record.expires_at_ms {
            Some(expires) => {
                Duration::from_millis(u64::try_from(expires - now_ms()).unwrap_or(0))
                    + self.limits.retention
            }
            None => self.limits.retention,
        };
        Ok(RunWrite {
            run_id: record.run_id.clone(),
            expected,
            value: Bytes::from(bytes),
            ttl,
            lease_until_ms,
        })
    }
}

/// Decodes a stored run record.
pub(in crate::agent) fn decode_record(doc: &Versioned) -> Result<RunRecord, RunError> {
    serde_json::from_slice(&doc.value)
        .map_err(|e| RunError::Store(StoreError::Corrupt(format!("run record: {e}"))))
}
