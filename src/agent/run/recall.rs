//! Semantic recall in the loop, through `crate::memory::recall`: once before the first step the
//! run's recall puts similar earlier messages into the history (same thread) and one system
//! message (other threads); when messages are saved their embeddings are stored with them.
//! A run without recall makes no extra call of any kind.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use tracing::warn;

use super::Runner;
use crate::agent::error::RunFailure;
use crate::agent::message::{self, Message, Part, Role};
use crate::config::RecallOptions;
use crate::memory::recall::{RecallDeps, RecallError, RecallQuery, recall};
use crate::memory::{effective_recall, embed_texts, to_bytes};
use crate::model::Embedder;
use crate::store::{StoreError, ThreadKey, VectorEntry};

/// Embeddings of messages about to be saved: (index among them, vector bytes).
pub(super) type Pending = Vec<(usize, Bytes)>;

impl Runner {
    /// The run's recall options and embedder, when recall is on.
    pub(super) fn recall_setup(&self) -> Option<(RecallOptions, Arc<dyn Embedder>)> {
        let memory = self.state.request.memory.as_ref()?;
        let agent = self.agent.config.memory.recall();
        let options = effective_recall(agent, memory.semantic_recall.as_ref())?;
        Some((options, self.agent.embedder.clone()?))
    }

    /// Recalls similar earlier messages into the prompt (before the first step).
    pub(super) async fn recall(&mut self) -> Result<(), RunFailure> {
        let Some((options, embedder)) = self.recall_setup() else {
            return Ok(());
        };
        let Some(memory) = self.state.request.memory.as_ref() else {
            return Ok(());
        };
        let filter_incomplete = memory.filter_incomplete_tool_calls;
        let key = ThreadKey {
            thread_id: memory.thread_id.clone(),
            resource_id: memory.resource_id.clone(),
        };
        let prompt: Vec<&Message> = self.state.prompt_messages().collect();
        let Some(text) = query_text(prompt.iter().copied()) else {
            return Ok(());
        };
        let known: HashSet<&str> = prompt.iter().map(|m| m.id.as_str()).collect();
        let deps = RecallDeps {
            store: self.deps.store.as_ref(),
            index: &self.deps.vectors,
            embedder: embedder.as_ref(),
        };
        let query = RecallQuery {
            key: &key,
            text,
            options: &options,
            known_ids: &known,
        };
        let recalled = recall(deps, query, self.cancel.child_token())
            .await
            .map_err(|e| match e {
                RecallError::Embedding(e) => {
                    RunFailure::Embedding(format!("embedder {}: {e}", embedder.name()))
                }
                RecallError::Store(e) => RunFailure::from(&e),
            })?;
        let mut same = Vec::with_capacity(recalled.same_thread.len());
        for raw in &recalled.same_thread {
            match serde_json::from_slice::<Message>(raw) {
                Ok(m) => same.push(m),
                Err(e) => {
                    warn!(thread = %key.thread_id, error = %e, "skipping an unreadable recalled message")
                }
            }
        }
        // Older than the history window (else they would be in it): they go first.
        let same = message::sanitize_history(same, filter_incomplete);
        if !same.is_empty() {
            let history = std::mem::take(&mut self.state.history);
            self.state.history = same.into_iter().chain(history).collect();
        }
        self.state.recalled_system = recalled.system;
        Ok(())
    }

    /// Embeds the user and assistant texts among `messages` (about to be saved) in one call,
    /// before anything is saved: a failure saves nothing. Empty when recall is off.
    pub(super) async fn embed_for_save(
        &self,
        messages: &[&Message],
    ) -> Result<Pending, RunFailure> {
        let Some((_, embedder)) = self.recall_setup() else {
            return Ok(Vec::new());
        };
        let (at, texts): (Vec<usize>, Vec<String>) = messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m.signal.is_none() && m.role != Role::System)
            .map(|(i, m)| (i, saved_text(m)))
            .filter(|(_, text)| !text.is_empty())
            .unzip();
        let vectors = embed_texts(embedder.as_ref(), texts, self.cancel.child_token())
            .await
            .map_err(|e| RunFailure::Embedding(format!("embedder {}: {e}", embedder.name())))?;
        Ok(at
            .into_iter()
            .zip(vectors)
            .map(|(i, v)| (i, to_bytes(&v)))
            .collect())
    }

    /// Stores the embeddings of the messages just saved from position `first` on.
    pub(super) async fn store_vectors(
        &self,
        key: &ThreadKey,
        first: u64,
        pending: Pending,
    ) -> Result<(), StoreError> {
        if pending.is_empty() {
            return Ok(());
        }
        let entries = pending
            .into_iter()
            .map(|(i, vector)| VectorEntry {
                thread_id: key.thread_id.clone(),
                position: first + i as u64,
                vector,
            })
            .collect();
        self.deps
            .store
            .append_vectors(&key.resource_id, entries)
            .await
    }
}

/// The recall query, as the reference takes it: the text of the last user message that has
/// text (parts joined by spaces); task-list signals are not the user's.
fn query_text<'a>(messages: impl DoubleEndedIterator<Item = &'a Message>) -> Option<String> {
    messages
        .rev()
        .filter(|m| m.role == Role::User && m.signal.is_none())
        .map(|m| texts(m).join(" "))
        .find(|text| !text.is_empty())
}

/// What the reference embeds of a saved message: its text parts joined by newlines.
fn saved_text(m: &Message) -> String {
    texts(m).join("\n")
}

fn texts(m: &Message) -> Vec<&str> {
    m.parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } if !text.is_empty() => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(role: Role, parts: &[&str]) -> Message {
        let parts = parts
            .iter()
            .map(|t| Part::Text {
                text: (*t).to_owned(),
            })
            .collect();
        Message::new(role, parts)
    }

    #[test]
    fn the_query_is_the_last_user_text() {
        let mut signal = text(Role::User, &["[task list]"]);
        signal.signal = Some(message::SignalMeta {
            kind: message::SignalMetaKind::Snapshot,
            tasks: Vec::new(),
        });
        let messages = [
            text(Role::User, &["first"]),
            text(Role::User, &["bake", "bread"]),
            text(Role::User, &[]),
            signal,
            text(Role::Assistant, &["ok"]),
        ];
        assert_eq!(query_text(messages.iter()).as_deref(), Some("bake bread"));
        assert_eq!(saved_text(&messages[1]), "bake\nbread");
        assert_eq!(query_text(messages[4..].iter()), None);
    }
}
