//! What a run keeps in its thread: the task-list signal the model reads between steps, saving
//! messages (at the end, per step, before suspending), and the generated thread title (in the
//! background, or before `finish` when the request asks for the title event).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::Runner;
use crate::agent::emit::Emitter;
use crate::agent::error::RunFailure;
use crate::agent::event::Event;
use crate::agent::message::{self, Message, Part, Role, SignalMeta, now_ms};
use crate::agent::tools::ToolKind;
use crate::memory::threads::Threads;
use crate::memory::working;
use crate::model::{ChatMessage, ModelError, ModelEvent, ModelProvider, ModelRequest};
use crate::store::{MessageAppend, StoreError, ThreadKey};
use crate::tasks::signal::{SignalKind, next_signal};

/// The reference's default instructions for the title model (`generateTitle`), byte for byte.
const TITLE_INSTRUCTIONS: &str = "\n      - you will generate a short title based on a conversation transcript between a user and an assistant\n      - the transcript lines are prefixed with \"User:\" and \"Assistant:\" — never reply to, answer, or continue the transcript\n      - always produce a title, even when the transcript is only a greeting or trivial exchange\n      - ensure it is not more than 80 characters long\n      - the title should be a summary of the user's message\n      - do not use quotes or colons\n      - the entire text you return will be used as the title";

impl Runner {
    /// Adds the task-list snapshot or delta the model has not seen yet, before a model call.
    pub(super) async fn signal(&mut self, em: &mut Emitter) {
        if !self.signals_enabled() {
            return;
        }
        let current = self.env.tasks.lock().await.tasks.clone();
        let shown =
            message::shown_state(self.state.history.iter().chain(self.state.response.iter()));
        let Some(signal) = next_signal(&shown, &current) else {
            return;
        };
        let after = shown.after(&signal);
        let mut msg = Message::new(
            Role::User,
            vec![Part::Text {
                text: signal.text.clone(),
            }],
        );
        msg.signal = Some(SignalMeta {
            kind: signal.kind.into(),
            tasks: after.tasks.unwrap_or_default(),
        });
        self.state.response.push(msg);
        let kind = match signal.kind {
            SignalKind::Snapshot => "snapshot",
            SignalKind::Delta => "delta",
        };
        em.emit(Event::Data {
            kind: "data-signal",
            data: json!({"kind": kind, "text": signal.text, "tasks": signal.tasks}),
        })
        .await;
    }

    fn signals_enabled(&self) -> bool {
        self.state.request.memory.is_some()
            && self
                .offered
                .iter()
                .any(|t| matches!(t.kind, ToolKind::Task(_)))
    }

    /// Titles a thread this run created, as the reference does: in the background after the
    /// run (its `finish` does not wait), or, with `emit_title_event`, before `finish` with a
    /// `data-thread-title` chunk. A title the caller set meanwhile is never overwritten.
    pub(super) async fn generate_title(&mut self, em: &mut Emitter) {
        self.state.title_pending = false;
        let Some(memory) = self.state.request.memory.as_ref() else {
            return;
        };
        let job = TitleJob {
            provider: self.agent.provider.clone(),
            model: self.agent.model.clone(),
            transcript: transcript(self.state.request.input.iter().chain(&self.state.response)),
            threads: Threads::new(self.deps.store.clone()),
            key: ThreadKey {
                thread_id: memory.thread_id.clone(),
                resource_id: memory.resource_id.clone(),
            },
        };
        if !memory.emit_title_event {
            let thread = job.key.thread_id.clone();
            tokio::spawn(async move {
                if let Err(e) = job.run(CancellationToken::new()).await {
                    warn!(%thread, error = %e, "the thread title could not be generated");
                }
            });
            return;
        }
        let thread_id = job.key.thread_id.clone();
        match job.run(self.cancel.child_token()).await {
            Ok(Some(title)) => {
                em.emit(Event::Data {
                    kind: "data-thread-title",
                    data: json!({ "threadId": thread_id, "title": title }),
                })
                .await;
            }
            Ok(None) => {}
            Err(e) => self.state.warnings.push(e),
        }
    }

    /// An assistant message of an unfinished step would leave tool calls without results.
    pub(super) fn drop_dangling_calls(&mut self) {
        let answered = self
            .state
            .response
            .last()
            .is_some_and(|m| m.role != Role::Assistant || !has_calls(m));
        if !answered {
            self.state.response.pop();
        }
    }

    /// Saves the messages not saved yet (input first), unless the run has no memory or is
    /// read-only.
    pub(super) async fn save(&mut self) -> Result<(), RunFailure> {
        let Some((append, count)) = self.unsaved()? else {
            return Ok(());
        };
        let vectors = {
            let request = &self.state.request;
            let all: Vec<&Message> = request.input.iter().chain(&self.state.response).collect();
            self.embed_for_save(&all[self.state.saved..]).await?
        };
        let MessageAppend {
            key,
            thread_meta,
            messages,
        } = append;
        let first = self
            .deps
            .store
            .append_messages(&key, thread_meta, messages)
            .await?;
        self.store_vectors(&key, first, vectors).await?;
        self.mark_saved(count);
        Ok(())
    }

    /// The messages not saved yet (input first), encoded for their thread, and how many of the
    /// run's messages are saved once they are; `None` when nothing is to be saved (no memory,
    /// read-only, all saved).
    pub(super) fn unsaved(&self) -> Result<Option<(MessageAppend, usize)>, RunFailure> {
        let request = &self.state.request;
        let Some(memory) = &request.memory else {
            return Ok(None);
        };
        if memory.read_only {
            return Ok(None);
        }
        let all: Vec<&Message> = request.input.iter().chain(&self.state.response).collect();
        if self.state.saved >= all.len() {
            return Ok(None);
        }
        let strip = self.state.working_memory.is_some();
        let mut encoded = Vec::with_capacity(all.len() - self.state.saved);
        for m in &all[self.state.saved..] {
            let stripped;
            let m = if strip {
                match without_working_memory(m) {
                    Some(kept) => {
                        stripped = kept;
                        &stripped
                    }
                    None => continue,
                }
            } else {
                m
            };
            let bytes =
                serde_json::to_vec(m).map_err(|e| StoreError::Corrupt(format!("message: {e}")))?;
            encoded.push(bytes::Bytes::from(bytes));
        }
        let thread_meta = (!self.state.thread_existed).then(|| {
            let meta = json!({
                "title": memory.title,
                "metadata": memory.metadata,
                "createdAtMs": now_ms(),
            });
            bytes::Bytes::from(meta.to_string())
        });
        let append = MessageAppend {
            key: ThreadKey {
                thread_id: memory.thread_id.clone(),
                resource_id: memory.resource_id.clone(),
            },
            thread_meta,
            messages: encoded,
        };
        Ok(Some((append, all.len())))
    }

    /// Notes that the run's first `count` messages are saved (its thread exists now).
    pub(super) fn mark_saved(&mut self, count: usize) {
        self.state.saved = count;
        self.state.thread_existed = true;
    }
}

/// Everything a title needs, detached from the run so that it can outlive it.
struct TitleJob {
    provider: Arc<dyn ModelProvider>,
    model: String,
    transcript: String,
    threads: Threads,
    key: ThreadKey,
}

/// Longest a title call may take (the reference has no bound; a background task needs one).
const TITLE_TIMEOUT: Duration = Duration::from_secs(60);

impl TitleJob {
    /// Generates the title and stores it unless the thread has one; `Ok(Some)` when stored.
    async fn run(self, cancel: CancellationToken) -> Result<Option<String>, String> {
        let request = ModelRequest {
            model: self.model.clone(),
            messages: vec![
                ChatMessage::system(TITLE_INSTRUCTIONS),
                ChatMessage::user(self.transcript.clone()),
            ],
            ..ModelRequest::default()
        };
        let text = tokio::time::timeout(TITLE_TIMEOUT, self.collect_text(request, cancel))
            .await
            .map_err(|_| "The thread title could not be generated: timed out".to_owned())?
            .map_err(|e| format!("The thread title could not be generated: {e}"))?;
        let title = strip_think(&text).trim().to_owned();
        if title.is_empty() {
            return Ok(None);
        }
        let set = self
            .threads
            .set_title_if_absent(&self.key, &title)
            .await
            .map_err(|e| format!("The thread title could not be saved: {e}"))?;
        Ok(set.then_some(title))
    }

    /// The text of one model call.
    async fn collect_text(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> Result<String, ModelError> {
        let mut stream = self.provider.stream(request, cancel).await?;
        let mut text = String::new();
        while let Some(event) = stream.next().await {
            if let ModelEvent::TextDelta(delta) = event? {
                text.push_str(&delta);
            }
        }
        Ok(text)
    }
}

/// The conversation as the title model reads it: `User: …` and `Assistant: …` lines (task-list
/// signals and tool traffic left out).
fn transcript<'a>(messages: impl Iterator<Item = &'a Message>) -> String {
    messages
        .filter(|m| m.signal.is_none())
        .filter_map(|m| {
            let who = match m.role {
                Role::User => "User",
                Role::Assistant => "Assistant",
                Role::System | Role::Tool => return None,
            };
            let text = m.text();
            (!text.is_empty()).then(|| format!("{who}: {text}"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A title without the `<think>…</think>` blocks reasoning models put before it.
fn strip_think(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<think>") {
        out.push_str(&rest[..start]);
        match rest[start..].find("</think>") {
            Some(end) => rest = &rest[start + end + "</think>".len()..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// A message as saved when the run has working memory: without the `updateWorkingMemory` calls
/// and results and `<working_memory>` tags (the reference saves neither); `None` when nothing
/// is left of it.
fn without_working_memory(m: &Message) -> Option<Message> {
    let mut m = m.clone();
    m.parts.retain(|p| match p {
        Part::ToolCall { tool_name, .. } | Part::ToolResult { tool_name, .. } => {
            tool_name != working::TOOL_NAME
        }
        _ => true,
    });
    for part in &mut m.parts {
        if let Part::Text { text } = part
            && text.contains("<working_memory>")
        {
            *text = working::strip_tags(text);
        }
    }
    (!m.parts.is_empty()).then_some(m)
}

fn has_calls(m: &Message) -> bool {
    m.parts.iter().any(|p| matches!(p, Part::ToolCall { .. }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_read_a_transcript_and_lose_their_thinking() {
        let user = Message::new(
            Role::User,
            vec![Part::Text {
                text: "Bake bread".into(),
            }],
        );
        let mut signal = user.clone();
        signal.signal = Some(SignalMeta {
            kind: message::SignalMetaKind::Snapshot,
            tasks: Vec::new(),
        });
        let answer = Message::new(
            Role::Assistant,
            vec![Part::Text {
                text: "Sure.".into(),
            }],
        );
        assert_eq!(
            transcript([&user, &signal, &answer].into_iter()),
            "User: Bake bread\nAssistant: Sure."
        );
        assert_eq!(
            strip_think("<think>hmm</think> Baking Bread"),
            " Baking Bread"
        );
        assert_eq!(strip_think("a<think>open"), "a");
    }
}
