//! Task lists in the store: runs the pure rules of [`crate::tasks`] against a thread's stored
//! list atomically. Shared by `TaskService` and the agent's task tools, so both doors behave the
//! same.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;

use crate::store::{Cas, DocEdit, Store, StoreError, StoreResult, ThreadKey, Versioned};
use crate::tasks::{self, Task};

/// Document kind under which a thread's task list is stored.
pub const TASKS_DOC: &str = "tasks";

/// A task list and its store version (0 = never written).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskList {
    /// Store version of the list.
    pub version: u64,
    /// The tasks, in order.
    pub tasks: Vec<Task>,
}

impl TaskList {
    /// Decodes a stored list; an absent document is the empty list.
    pub fn decode(doc: Option<&Versioned>) -> StoreResult<Self> {
        let Some(doc) = doc else {
            return Ok(Self::default());
        };
        let tasks = serde_json::from_slice(&doc.value)
            .map_err(|e| StoreError::Corrupt(format!("task list: {e}")))?;
        Ok(Self {
            version: doc.version,
            tasks,
        })
    }

    fn encode(tasks: &[Task]) -> StoreResult<Bytes> {
        serde_json::to_vec(tasks)
            .map(Bytes::from)
            .map_err(|e| StoreError::Corrupt(format!("task list: {e}")))
    }
}

/// Reads and mutates task lists.
#[derive(Clone)]
pub struct TaskLists {
    store: Arc<dyn Store>,
}

impl TaskLists {
    /// Task lists kept in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// Reads a thread's list (ownership checked).
    pub async fn load(&self, key: &ThreadKey) -> StoreResult<TaskList> {
        let doc = self.store.get_doc(key, TASKS_DOC).await?;
        TaskList::decode(doc.as_ref())
    }

    /// Applies `op` to the stored list atomically, in the store's own write step (Redis
    /// compares-and-sets from its last sight of the list, or a read, recomputing on a
    /// concurrent change), so no update is lost.
    pub async fn apply<F>(&self, key: &ThreadKey, op: F) -> StoreResult<tasks::Outcome>
    where
        F: Fn(&[Task]) -> tasks::Outcome + Send + 'static,
    {
        // The outcome of the edit's last run (a store may run it more than once).
        let last = Arc::new(Mutex::new(None));
        let slot = Arc::clone(&last);
        let edit: DocEdit = Box::new(move |doc| {
            let outcome = op(&TaskList::decode(doc)?.tasks);
            let value = if outcome.store {
                Some(TaskList::encode(&outcome.tasks)?)
            } else {
                None
            };
            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(outcome);
            Ok(value)
        });
        self.store.update_doc(key, TASKS_DOC, edit).await?;
        last.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .ok_or_else(|| StoreError::Unavailable("the task list edit did not run".into()))
    }

    /// [`TaskLists::apply`] from a recent copy of the list the caller holds (the agent loop
    /// does), with compare-and-set: no read unless the copy is stale, recomputed on a
    /// concurrent change. Returns the list as stored afterwards, the caller's next copy.
    pub async fn apply_from<F>(
        &self,
        key: &ThreadKey,
        mut current: TaskList,
        op: F,
    ) -> StoreResult<(tasks::Outcome, TaskList)>
    where
        F: Fn(&[Task]) -> tasks::Outcome,
    {
        loop {
            let outcome = op(&current.tasks);
            if !outcome.store {
                return Ok((outcome, current));
            }
            let value = TaskList::encode(&outcome.tasks)?;
            match self
                .store
                .cas_doc(key, TASKS_DOC, current.version, value)
                .await?
            {
                Cas::Written(version) => {
                    let list = TaskList {
                        version,
                        tasks: outcome.tasks.clone(),
                    };
                    return Ok((outcome, list));
                }
                Cas::Conflict(now) => current = TaskList::decode(now.as_ref())?,
            }
        }
    }

    /// Streams the list now and after every change (from any replica), skipping versions
    /// already sent.
    pub async fn watch(
        &self,
        key: &ThreadKey,
    ) -> StoreResult<BoxStream<'static, StoreResult<TaskList>>> {
        // Subscribe before reading so that no change between the two is missed.
        let updates = self.store.watch_doc(key, TASKS_DOC).await?;
        let first = self.load(key).await?;
        let mut last_version = first.version;
        let later = updates.filter_map(move |update| {
            let item = match update {
                Ok(doc) if doc.version <= last_version => None,
                Ok(doc) => {
                    last_version = doc.version;
                    Some(TaskList::decode(Some(&doc)))
                }
                Err(e) => Some(Err(e)),
            };
            futures::future::ready(item)
        });
        Ok(futures::stream::once(futures::future::ready(Ok(first)))
            .chain(later)
            .boxed())
    }
}
