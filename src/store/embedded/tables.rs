//! The tables of one write transaction, each opened on its first use and kept open for every
//! job of the batch: opening and closing a redb table costs about as much as inserting a row
//! (a lookup and an update in redb's table of tables), and a task write used to open three.
//!
//! A table is handed out as a `RefMut`, so a job holding it and asking for it again (which redb
//! would refuse as well) gets an error, never a second handle.

use std::cell::{RefCell, RefMut};

use redb::{Key, Table, TableDefinition, Value, WriteTransaction};

use super::schema::{
    CLAIMS, DOCS, DocKey, DocRow, EXPIRY, ExpiryKey, INDEX, LEASE_OF, LEASES, LOG_BATCHES,
    LOG_ENTRIES, LOG_HEADS, LogKey, MESSAGES, RUNS, RunRow, THREADS, ThreadRow,
};
use super::scores::SCORES;
use super::threads::{RESOURCE_DOCS, THREAD_DELETED, THREAD_LIST, ThreadListKey};
use super::vectors::{VECTOR_HEADS, VECTOR_THREADS, VECTORS, VectorRow, VectorThreadKey};
use crate::store::{StoreError, StoreResult};

/// One table of the transaction, opened on demand.
struct Slot<'tx, K: Key + 'static, V: Value + 'static> {
    definition: TableDefinition<'static, K, V>,
    table: RefCell<Option<Table<'tx, K, V>>>,
}

impl<'tx, K: Key + 'static, V: Value + 'static> Slot<'tx, K, V> {
    fn new(definition: TableDefinition<'static, K, V>) -> Self {
        Self {
            definition,
            table: RefCell::new(None),
        }
    }

    /// The open table (opened now if this is its first use in the transaction).
    fn open(&self, tx: &'tx WriteTransaction) -> StoreResult<RefMut<'_, Table<'tx, K, V>>> {
        let twice = || {
            StoreError::Unavailable(format!(
                "table {} is already open in this job",
                self.definition
            ))
        };
        let mut slot = self.table.try_borrow_mut().map_err(|_| twice())?;
        if slot.is_none() {
            *slot = Some(tx.open_table(self.definition)?);
        }
        RefMut::filter_map(slot, Option::as_mut).map_err(|_| twice())
    }
}

/// Declares [`Tables`] with one slot and one accessor per table.
macro_rules! tables {
    ($($name:ident: $definition:expr => $key:ty, $value:ty;)*) => {
        /// The tables of one write transaction, each opened once for all the jobs of a batch;
        /// closed when dropped, before the commit.
        pub(super) struct Tables<'tx> {
            tx: &'tx WriteTransaction,
            $($name: Slot<'tx, $key, $value>,)*
        }

        impl<'tx> Tables<'tx> {
            /// The tables of `tx`, none open yet.
            pub(super) fn new(tx: &'tx WriteTransaction) -> Self {
                Self {
                    tx,
                    $($name: Slot::new($definition),)*
                }
            }

            /// Opens every table, creating those the file does not have yet (so that read
            /// transactions never meet a missing one).
            pub(super) fn create_all(&self) -> StoreResult<()> {
                $(self.$name()?;)*
                Ok(())
            }

            $(
                #[doc = concat!("The `", stringify!($name), "` table.")]
                pub(super) fn $name(&self) -> StoreResult<RefMut<'_, Table<'tx, $key, $value>>> {
                    self.$name.open(self.tx)
                }
            )*
        }
    };
}

tables! {
    threads: THREADS => &'static str, ThreadRow;
    docs: DOCS => DocKey, DocRow;
    messages: MESSAGES => (&'static str, u64), &'static [u8];
    runs: RUNS => &'static str, RunRow;
    log_heads: LOG_HEADS => &'static str, (u64, u64, u64);
    log_entries: LOG_ENTRIES => LogKey, (u64, &'static [u8]);
    log_batches: LOG_BATCHES => LogKey, (u64, &'static [u8]);
    claims: CLAIMS => &'static str, (u64, &'static [u8]);
    leases: LEASES => (u64, &'static str), ();
    lease_of: LEASE_OF => &'static str, u64;
    index: INDEX => (&'static str, &'static str), ();
    expiry: EXPIRY => ExpiryKey, ();
    thread_list: THREAD_LIST => ThreadListKey, ();
    thread_deleted: THREAD_DELETED => &'static str, u64;
    resource_docs: RESOURCE_DOCS => DocKey, DocRow;
    vector_heads: VECTOR_HEADS => &'static str, (u64, u64);
    vectors: VECTORS => (&'static str, u64), VectorRow;
    vector_threads: VECTOR_THREADS => VectorThreadKey, u64;
    scores: SCORES => (&'static str, u64), &'static [u8];
}
