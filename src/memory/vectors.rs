//! The in-process vector index of semantic recall: per resource, every stored message embedding
//! in one flat `f32` array, loaded from the store's vector log once and then kept current by
//! reading only the entries appended since (one small store round trip per search). A deletion
//! bumps the log's epoch, which makes every replica reload that resource. Searches are exact:
//! cosine similarity of pre-normalized vectors, i.e. a dot product over every vector of the
//! scope, split across cores for large indexes.
//!
//! Memory is bounded by [`VectorIndex::with_budget`]: past it, the least recently searched
//! resources are dropped (and reloaded from the store when searched again).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio::sync::{OwnedRwLockReadGuard, RwLock};

use super::scan::{Candidate, scan};
use crate::store::{Store, StoreError, StoreResult, VectorEntry};

/// Entries read from the store per round trip while loading.
const PAGE: usize = 2000;
/// Default memory budget of all resident indexes.
const DEFAULT_BUDGET_BYTES: usize = 2 << 30;

/// One search result.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// The thread holding the message.
    pub thread_id: String,
    /// The message's position in its thread.
    pub position: u64,
    /// Cosine similarity to the query.
    pub score: f32,
}

/// The resident indexes of this process, by resource.
pub struct VectorIndex {
    store: Arc<dyn Store>,
    resources: Mutex<HashMap<String, Arc<RwLock<Resident>>>>,
    budget_bytes: usize,
}

impl std::fmt::Debug for VectorIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorIndex")
            .field("budget_bytes", &self.budget_bytes)
            .finish_non_exhaustive()
    }
}

/// Where a vector of the index points.
#[derive(Clone, Copy, Debug)]
pub(super) struct Row {
    /// Index into [`Resident::threads`].
    pub(super) thread: u32,
    pub(super) position: u64,
}

/// One resource's index.
#[derive(Default)]
pub(super) struct Resident {
    /// The store log's epoch these entries belong to.
    epoch: u64,
    /// The highest sequence number read.
    cursor: u64,
    /// The dimension of every vector (0: none yet). Entries of another dimension (another
    /// embedder) are left out.
    pub(super) dim: usize,
    /// `rows.len() × dim` floats, row-major.
    pub(super) data: Vec<f32>,
    pub(super) rows: Vec<Row>,
    threads: Vec<String>,
    thread_ids: HashMap<String, u32>,
    /// Where each (thread, position) is in `rows`, to replace re-saved messages.
    slots: HashMap<(u32, u64), usize>,
    last_used: Option<Instant>,
}

impl Resident {
    /// Bytes held (the vectors, the rows and the lookup tables).
    fn bytes(&self) -> usize {
        self.data.capacity() * 4
            + self.rows.capacity() * std::mem::size_of::<Row>()
            + self.slots.capacity() * (std::mem::size_of::<((u32, u64), usize)>() + 8)
            + self.threads.iter().map(|t| t.len() * 2 + 56).sum::<usize>()
    }

    fn thread_index(&mut self, thread_id: &str) -> u32 {
        if let Some(&i) = self.thread_ids.get(thread_id) {
            return i;
        }
        let i = u32::try_from(self.threads.len()).unwrap_or(u32::MAX);
        self.threads.push(thread_id.to_owned());
        self.thread_ids.insert(thread_id.to_owned(), i);
        i
    }

    fn add(&mut self, entry: &VectorEntry) {
        if !entry.vector.len().is_multiple_of(4) || entry.vector.is_empty() {
            tracing::warn!(thread = %entry.thread_id, "skipping a malformed stored vector");
            return;
        }
        let dim = entry.vector.len() / 4;
        if self.dim == 0 {
            self.dim = dim;
        } else if dim != self.dim {
            return;
        }
        let thread = self.thread_index(&entry.thread_id);
        let values = entry
            .vector
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        match self.slots.get(&(thread, entry.position)) {
            Some(&slot) => {
                for (stored, value) in self.data[slot * dim..(slot + 1) * dim]
                    .iter_mut()
                    .zip(values)
                {
                    *stored = value;
                }
            }
            None => {
                self.slots.insert((thread, entry.position), self.rows.len());
                self.rows.push(Row {
                    thread,
                    position: entry.position,
                });
                self.data.extend(values);
            }
        }
    }
}

impl VectorIndex {
    /// An index over `store` with the default memory budget (2 GiB).
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self::with_budget(store, DEFAULT_BUDGET_BYTES)
    }

    /// An index over `store` keeping at most about `budget_bytes` resident.
    pub fn with_budget(store: Arc<dyn Store>, budget_bytes: usize) -> Self {
        Self {
            store,
            resources: Mutex::new(HashMap::new()),
            budget_bytes,
        }
    }

    /// The `top_k` most similar vectors of the resource (of one thread when `thread` is set) to
    /// `query` (normalized), best first; the index is brought up to date first.
    pub async fn search(
        &self,
        resource_id: &str,
        query: Vec<f32>,
        top_k: usize,
        thread: Option<&str>,
    ) -> StoreResult<Vec<Hit>> {
        let resident = self.refreshed(resource_id).await?;
        let thread = thread.map(str::to_owned);
        let hits = tokio::task::spawn_blocking(move || {
            let filter = match &thread {
                Some(t) => match resident.thread_ids.get(t) {
                    Some(&i) => Some(i),
                    None => return Vec::new(),
                },
                None => None,
            };
            if resident.dim != query.len() || top_k == 0 {
                return Vec::new();
            }
            scan(&resident, &query, top_k, filter)
                .into_iter()
                .map(|Candidate { score, row }| {
                    let row = resident.rows[row];
                    Hit {
                        thread_id: resident.threads[row.thread as usize].clone(),
                        position: row.position,
                        score,
                    }
                })
                .collect()
        })
        .await
        .map_err(|e| StoreError::Unavailable(format!("vector search failed: {e}")))?;
        Ok(hits)
    }

    /// Bytes held by the resident indexes (for the benchmark and metrics).
    pub async fn resident_bytes(&self) -> usize {
        let all: Vec<_> = self.lock().values().cloned().collect();
        let mut total = 0;
        for resident in all {
            total += resident.read().await.bytes();
        }
        total
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<RwLock<Resident>>>> {
        // The map stays consistent even if a holder panicked: every update is one call.
        self.resources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The resource's index, caught up with the store: entries appended since the last
    /// search are read; a new epoch (a deletion anywhere in the log) reloads it whole.
    async fn refreshed(&self, resource_id: &str) -> StoreResult<OwnedRwLockReadGuard<Resident>> {
        let cell = self
            .lock()
            .entry(resource_id.to_owned())
            .or_default()
            .clone();
        let mut resident = cell.write_owned().await;
        let mut first = true;
        loop {
            let batch = self
                .store
                .read_vectors(resource_id, resident.cursor, PAGE)
                .await?;
            if batch.epoch != resident.epoch && (resident.cursor > 0 || !first) {
                // Rows were deleted: start over (the new epoch's log is read from its start).
                *resident = Resident {
                    epoch: batch.epoch,
                    ..Resident::default()
                };
                first = false;
                continue;
            }
            resident.epoch = batch.epoch;
            first = false;
            let full = batch.entries.len() >= PAGE;
            for (seq, entry) in &batch.entries {
                resident.add(entry);
                resident.cursor = resident.cursor.max(*seq);
            }
            if !full {
                break;
            }
        }
        resident.last_used = Some(Instant::now());
        let held = resident.bytes();
        let resident = resident.downgrade();
        self.evict(resource_id, held);
        Ok(resident)
    }

    /// Drops the least recently searched resources (never `keep`) while over budget; a
    /// resource being searched or refreshed is skipped.
    fn evict(&self, keep: &str, keep_bytes: usize) {
        let mut map = self.lock();
        let mut sizes: Vec<(Option<Instant>, String, usize)> = map
            .iter()
            .filter(|(id, _)| id.as_str() != keep)
            .filter_map(|(id, cell)| {
                let resident = cell.try_read().ok()?;
                Some((resident.last_used, id.clone(), resident.bytes()))
            })
            .collect();
        let mut total = keep_bytes + sizes.iter().map(|(_, _, b)| b).sum::<usize>();
        sizes.sort();
        for (_, id, bytes) in sizes {
            if total <= self.budget_bytes {
                break;
            }
            map.remove(&id);
            total -= bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{normalize, to_bytes};
    use crate::store::embedded::EmbeddedStore;

    fn unit(dim: usize, hot: &[(usize, f32)]) -> Vec<f32> {
        let mut v = vec![0.0; dim];
        for &(i, x) in hot {
            v[i] = x;
        }
        normalize(&mut v);
        v
    }

    fn entry(thread: &str, position: u64, v: &[f32]) -> VectorEntry {
        VectorEntry {
            thread_id: thread.into(),
            position,
            vector: to_bytes(v),
        }
    }

    fn found(hits: &[Hit]) -> Vec<(&str, u64)> {
        hits.iter()
            .map(|h| (h.thread_id.as_str(), h.position))
            .collect()
    }

    #[tokio::test]
    async fn top_k_is_exact_follows_appends_and_reloads_after_deletes() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
        let entries = vec![
            entry("a", 0, &unit(4, &[(0, 1.0)])),
            entry("a", 1, &unit(4, &[(0, 1.0), (1, 1.0)])),
            entry("b", 0, &unit(4, &[(1, 1.0)])),
            entry("b", 1, &unit(4, &[(2, 1.0)])),
        ];
        store.append_vectors("r", entries).await.unwrap();
        let index = VectorIndex::new(store.clone());
        let replica = VectorIndex::new(store.clone());
        let query = unit(4, &[(0, 1.0), (1, 0.2)]);
        let hits = index.search("r", query.clone(), 3, None).await.unwrap();
        assert_eq!(found(&hits), [("a", 0), ("a", 1), ("b", 0)]);
        assert!(hits[0].score > hits[1].score && hits[1].score > hits[2].score);
        let hits = index
            .search("r", query.clone(), 5, Some("b"))
            .await
            .unwrap();
        assert_eq!(found(&hits), [("b", 0), ("b", 1)]);
        assert!(
            index
                .search("r", query.clone(), 5, Some("zz"))
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            index
                .search("other", query.clone(), 5, None)
                .await
                .unwrap()
                .is_empty()
        );
        // Another replica appends; this one reads only what is new.
        store
            .append_vectors("r", vec![entry("c", 0, &query)])
            .await
            .unwrap();
        let hits = index.search("r", query.clone(), 1, None).await.unwrap();
        assert_eq!(found(&hits), [("c", 0)]);
        assert!((hits[0].score - 1.0).abs() < 1e-6);
        store.delete_vectors("r", "c", None).await.unwrap();
        store.delete_vectors("r", "a", Some(&[0])).await.unwrap();
        for idx in [&index, &replica] {
            let hits = idx.search("r", query.clone(), 2, None).await.unwrap();
            assert_eq!(found(&hits), [("a", 1), ("b", 0)]);
        }
        let wrong_dim = unit(3, &[(0, 1.0)]);
        assert!(
            index
                .search("r", wrong_dim, 2, None)
                .await
                .unwrap()
                .is_empty()
        );
        assert!(index.resident_bytes().await > 0);
    }

    #[tokio::test]
    async fn large_indexes_split_the_scan_and_agree_with_a_plain_sort() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
        let (dim, rows) = (256, 4500); // over the split threshold
        let mut seed = 7u32;
        let (mut vectors, mut batch) = (Vec::new(), Vec::new());
        for position in 0..rows {
            let mut v: Vec<f32> = (0..dim)
                .map(|_| {
                    seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (seed >> 8) as f32 / 16_777_216.0 - 0.5
                })
                .collect();
            normalize(&mut v);
            vectors.push(v.clone());
            let thread = if position % 2 == 0 { "even" } else { "odd" };
            batch.push(entry(thread, position as u64, &v));
        }
        store.append_vectors("r", batch).await.unwrap();
        let query = vectors[123].clone();
        let mut expected: Vec<(f32, u64)> = vectors
            .iter()
            .enumerate()
            .map(|(i, v)| (crate::memory::scan::dot(&query, v), i as u64))
            .collect();
        expected.sort_by(|a, b| b.0.total_cmp(&a.0));
        let index = VectorIndex::new(store);
        let hits = index.search("r", query, 10, None).await.unwrap();
        let positions: Vec<u64> = hits.iter().map(|h| h.position).collect();
        let want: Vec<u64> = expected.iter().take(10).map(|e| e.1).collect();
        assert_eq!(positions, want);
        assert_eq!(positions[0], 123);
    }
}
