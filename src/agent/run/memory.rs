//! What a run keeps in its thread: the task-list signal the model reads between steps, saving
//! messages (at the end, per step, before suspending), and the generated thread title.

use futures::StreamExt;
use serde_json::json;

use super::Runner;
use crate::agent::emit::Emitter;
use crate::agent::error::RunFailure;
use crate::agent::event::Event;
use crate::agent::message::{self, Message, Part, Role, SignalMeta, now_ms};
use crate::agent::tools::ToolKind;
use crate::model::{ChatMessage, ModelError, ModelEvent, ModelRequest};
use crate::store::{StoreError, ThreadKey};
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

    /// Titles a thread this run created (one extra model call, reading the run's transcript as
    /// the reference does), stores the title with the thread and emits it as a `data-title`
    /// chunk. A failure is a warning.
    pub(super) async fn generate_title(&mut self, em: &mut Emitter) {
        self.state.title_pending = false;
        let Some(memory) = self.state.request.memory.clone() else {
            return;
        };
        let transcript = transcript(self.state.request.input.iter().chain(&self.state.response));
        let request = ModelRequest {
            model: self.agent.model.clone(),
            messages: vec![
                ChatMessage::system(TITLE_INSTRUCTIONS),
                ChatMessage::user(transcript),
            ],
            ..ModelRequest::default()
        };
        let title = match self.collect_text(request).await {
            Ok(text) => strip_think(&text).trim().to_owned(),
            Err(e) => {
                self.state
                    .warnings
                    .push(format!("The thread title could not be generated: {e}"));
                return;
            }
        };
        if title.is_empty() {
            return;
        }
        let meta = json!({
            "title": title,
            "metadata": memory.metadata,
            "createdAtMs": now_ms(),
        });
        let key = ThreadKey {
            thread_id: memory.thread_id.clone(),
            resource_id: memory.resource_id.clone(),
        };
        if let Err(e) = self
            .deps
            .store
            .append_messages(&key, Some(bytes::Bytes::from(meta.to_string())), Vec::new())
            .await
        {
            self.state
                .warnings
                .push(format!("The thread title could not be saved: {e}"));
            return;
        }
        em.emit(Event::Data {
            kind: "data-title",
            data: json!({ "title": title }),
        })
        .await;
    }

    /// The text of one model call, without streaming it to the client.
    async fn collect_text(&self, request: ModelRequest) -> Result<String, ModelError> {
        let mut stream = self
            .agent
            .provider
            .stream(request, self.cancel.child_token())
            .await?;
        let mut text = String::new();
        while let Some(event) = stream.next().await {
            if let ModelEvent::TextDelta(delta) = event? {
                text.push_str(&delta);
            }
        }
        Ok(text)
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
        let request = &self.state.request;
        let Some(memory) = &request.memory else {
            return Ok(());
        };
        if memory.read_only {
            return Ok(());
        }
        let all: Vec<&Message> = request.input.iter().chain(&self.state.response).collect();
        if self.state.saved >= all.len() {
            return Ok(());
        }
        let mut encoded = Vec::with_capacity(all.len() - self.state.saved);
        for m in &all[self.state.saved..] {
            let bytes =
                serde_json::to_vec(m).map_err(|e| StoreError::Corrupt(format!("message: {e}")))?;
            encoded.push(bytes::Bytes::from(bytes));
        }
        let meta = (!self.state.thread_existed).then(|| {
            let meta = json!({
                "title": memory.title,
                "metadata": memory.metadata,
                "createdAtMs": now_ms(),
            });
            bytes::Bytes::from(meta.to_string())
        });
        let key = ThreadKey {
            thread_id: memory.thread_id.clone(),
            resource_id: memory.resource_id.clone(),
        };
        let count = all.len();
        let vectors = self.embed_for_save(&all[self.state.saved..]).await?;
        let first = self.deps.store.append_messages(&key, meta, encoded).await?;
        self.store_vectors(&key, first, vectors).await?;
        self.state.saved = count;
        self.state.thread_existed = true;
        Ok(())
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
