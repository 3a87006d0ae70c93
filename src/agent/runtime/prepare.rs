//! The state a run starts from: its thread's history window (read once, more only when the
//! newest messages end inside a long response), task list, working memory and the waiting
//! client tools auto-resume offers. Also what a takeover before the first checkpoint uses.

use std::sync::Arc;

use super::{MAX_HISTORY_READ, Runtime};
use crate::agent::AgentDef;
use crate::agent::error::RunError;
use crate::agent::message::{self, Message};
use crate::agent::record::RunRecord;
use crate::agent::request::RunRequest;
use crate::agent::state::RunState;
use crate::memory::working;
use crate::store::{Cas, ThreadKey};
use crate::tasklist::{TASKS_DOC, TaskList};
use tracing::warn;

impl Runtime {
    /// The state a run starts from: its thread's history, task list and working memory, and
    /// the waiting client tools auto-resume offers (also what a takeover before the first
    /// checkpoint starts again from).
    pub(super) async fn fresh_state(
        &self,
        agent: &AgentDef,
        request: Arc<RunRequest>,
    ) -> Result<(RunState, TaskList), RunError> {
        let working = agent.run_working_memory(&request);
        let (history, tasks, thread_existed, working_data) =
            self.load_memory(&request, working.as_ref()).await?;
        let suspended_tools = self.waiting_client_tools(&request).await?;
        let read_only = request.memory.as_ref().is_some_and(|m| m.read_only);
        let mut state = RunState::new(request, history, thread_existed);
        state.working_memory = working.map(|settings| working::RunWorkingMemory {
            prompt: settings.system_message(working_data.as_deref(), read_only),
            settings,
        });
        state.suspended_tools = suspended_tools;
        Ok((state, tasks))
    }

    /// A new run's [`Runtime::fresh_state`] and the first write of its `record` (version 0),
    /// both in flight at once: the record does not depend on the thread, and a remote store
    /// serves them in one round trip instead of two. A record written for a run whose state
    /// could not be read is deleted again, so that no replica takes the run over.
    pub(super) async fn start_record(
        &self,
        agent: &AgentDef,
        request: Arc<RunRequest>,
        record: &RunRecord,
    ) -> Result<(RunState, TaskList, Cas), RunError> {
        let (loaded, written) = tokio::join!(
            self.fresh_state(agent, request),
            self.write_record(&record.run_id, 0, record)
        );
        match loaded {
            Ok((state, tasks)) => Ok((state, tasks, written?)),
            Err(e) => {
                // Should this fail, a takeover meets the same error and ends the run with it.
                if let Ok(Cas::Written(_)) = written
                    && let Err(e) = self.deps.store.delete_run(&record.run_id).await
                {
                    warn!(run_id = %record.run_id, error = %e, "could not delete the record of a run that did not start");
                }
                Err(e)
            }
        }
    }

    /// Reads the thread's history (its last `last_messages` rows, counted as the reference
    /// stores them) and task list, checking ownership: one round trip, unless the newest
    /// messages end inside a long tool-using response and more must be read.
    async fn load_memory(
        &self,
        request: &RunRequest,
        working: Option<&working::Settings>,
    ) -> Result<(Vec<Message>, TaskList, bool, Option<String>), RunError> {
        let Some(memory) = &request.memory else {
            return Ok((Vec::new(), TaskList::default(), false, None));
        };
        let key = ThreadKey {
            thread_id: memory.thread_id.clone(),
            resource_id: memory.resource_id.clone(),
        };
        let rows = memory.last_messages;
        // A row is one message or a run's response (two to four): read a little more than the
        // rows once, more only when the newest messages end inside a long response.
        let mut limit = rows.saturating_mul(2).saturating_add(2);
        // Thread-scoped working memory comes in the same round trip; a resource's costs one more.
        let thread_working = working.is_some_and(|w| w.scope == working::Scope::Thread);
        let docs: &[&str] = if thread_working {
            &[TASKS_DOC, working::DOC_KIND]
        } else {
            &[TASKS_DOC]
        };
        let resource_working = match working {
            Some(w) if w.scope == working::Scope::Resource => self
                .deps
                .store
                .get_resource_doc(&key.resource_id, working::DOC_KIND)
                .await?
                .map(|doc| String::from_utf8_lossy(&doc.value).into_owned()),
            _ => None,
        };
        loop {
            let view = self.deps.store.load_thread(&key, limit, docs).await?;
            // Rows are counted from each message's role alone; only the window is decoded.
            let (mut at, mut peeks) = (Vec::new(), Vec::new());
            for (i, raw) in view.messages.iter().enumerate() {
                if let Ok(peek) = serde_json::from_slice::<message::RowPeek>(raw) {
                    at.push(i);
                    peeks.push(peek);
                }
            }
            let whole = rows == 0 || view.messages.len() < limit || limit >= MAX_HISTORY_READ;
            let Some(start) = message::last_rows_start(&peeks, rows, whole) else {
                limit = limit.saturating_mul(4).min(MAX_HISTORY_READ);
                continue;
            };
            let start = at.get(start).copied().unwrap_or(view.messages.len());
            let mut history = Vec::with_capacity(view.messages.len() - start);
            for raw in &view.messages[start..] {
                match serde_json::from_slice::<Message>(raw) {
                    Ok(m) => history.push(m),
                    Err(e) => {
                        warn!(thread = %key.thread_id, error = %e, "skipping an unreadable stored message")
                    }
                }
            }
            let history = message::sanitize_history(history, memory.filter_incomplete_tool_calls);
            let tasks = TaskList::decode(view.docs.first().and_then(Option::as_ref))?;
            let working_data = match view.docs.get(1) {
                Some(Some(doc)) => Some(String::from_utf8_lossy(&doc.value).into_owned()),
                _ => resource_working,
            };
            return Ok((history, tasks, view.exists, working_data));
        }
    }
}
