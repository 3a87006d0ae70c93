//! The response body's way to the caller: a task copies body bytes into a channel (idle
//! timeout, cancellation, draining the tail so the connection is reused), and the consumer turns
//! them into events, from SSE or from a plain JSON completion, through the [`ChunkDecoder`].

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::decode::ChunkDecoder;
use super::{describe, preview};
use crate::model::sse::{SseEvent, SseParser};
use crate::model::{ModelError, ModelEvent};

/// Upper bound for a non-streamed JSON answer, so a broken server cannot exhaust memory.
const JSON_BODY_LIMIT: usize = 16 * 1024 * 1024;
/// How long a finished response may take to deliver its last bytes before the connection is
/// dropped instead of being reused.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);

/// Copies the response body into `tx` until EOF, an error, cancellation, or the consumer leaves
/// (`gone`: a child of `cancel` the consumer cancels when it fails or is dropped).
///
/// `finished` means the consumer saw the end of the answer (`[DONE]`): what is left of the body
/// (normally just the chunked-encoding terminator) is drained so the connection can be reused.
pub(super) async fn pump_body(
    mut response: reqwest::Response,
    mut tx: mpsc::Sender<Result<Bytes, ModelError>>,
    (cancel, gone): (CancellationToken, CancellationToken),
    finished: CancellationToken,
    idle_timeout: Duration,
) {
    loop {
        let read = tokio::select! {
            biased;
            // First: a consumer that saw the end and left still lets the tail be drained.
            _ = finished.cancelled() => break,
            // Returning drops `response`, which closes the connection (HTTP/1) or resets the
            // stream (HTTP/2): the provider stops generating and billing.
            _ = gone.cancelled() => return,
            read = tokio::time::timeout(idle_timeout, response.chunk()) => read,
        };
        let item = match read {
            Err(_) => Err(ModelError::Timeout(format!(
                "no data from provider for {idle_timeout:?}"
            ))),
            Ok(Ok(Some(bytes))) => Ok(bytes),
            Ok(Ok(None)) => return, // EOF: dropping `tx` tells the consumer
            Ok(Err(e)) => Err(ModelError::Protocol(format!(
                "response stream interrupted: {}",
                describe(&e.without_url())
            ))),
        };
        let is_err = item.is_err();
        tokio::select! {
            biased;
            _ = finished.cancelled() => break,
            _ = gone.cancelled() => return,
            sent = tx.send(item) => if sent.is_err() { return },
        }
        if is_err {
            return;
        }
    }
    // The consumer may leave now: only the run's cancellation stops the drain.
    let drain = async { while let Ok(Some(_)) = response.chunk().await {} };
    tokio::select! {
        _ = cancel.cancelled() => {}
        _ = tokio::time::timeout(DRAIN_TIMEOUT, drain) => {}
    }
}

/// The consumer side: turns body bytes into [`ModelEvent`]s.
pub(super) struct EventStream {
    /// Read from the pump: a futures channel, which holds a few hundred bytes while the model
    /// is silent where a tokio one reserves a block of 32 slots (an idle stream's memory).
    pub(super) rx: mpsc::Receiver<Result<Bytes, ModelError>>,
    pub(super) cancel: CancellationToken,
    /// Stops the pump (its `gone`) when this stream fails or is dropped.
    pub(super) stop_pump: DropGuard,
    /// Tells the pump the answer is complete (see [`pump_body`]).
    pub(super) finished: CancellationToken,
    pub(super) parser: SseParser,
    pub(super) decoder: ChunkDecoder,
    pub(super) include_raw: bool,
    /// `Some(buffer)` when the server answered with a plain JSON completion instead of SSE.
    pub(super) json_body: Option<Vec<u8>>,
    pub(super) pending: VecDeque<Result<ModelEvent, ModelError>>,
    pub(super) done: bool,
}

impl EventStream {
    pub(super) async fn next_event(&mut self) -> Option<Result<ModelEvent, ModelError>> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Some(item);
            }
            if self.done {
                return None;
            }
            let read = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => Some(Err(ModelError::Cancelled)),
                read = self.rx.next() => read,
            };
            match read {
                Some(Ok(bytes)) => self.on_bytes(&bytes),
                None => self.on_eof(),
                Some(Err(error)) => {
                    // A connection lost after the model said it was done is not worth failing
                    // the whole answer for.
                    if self.decoder.finish_reason.is_some()
                        && !matches!(error, ModelError::Cancelled)
                    {
                        tracing::debug!(%error, "stream ended abruptly after finish_reason");
                        self.finish();
                    } else {
                        self.fail(error);
                    }
                }
            }
        }
    }

    fn fail(&mut self, error: ModelError) {
        self.pending.push_back(Err(error));
        self.done = true;
        // Stopping the pump drops the connection.
        self.rx.close();
        self.stop_pump.token().cancel();
    }

    fn finish(&mut self) {
        let mut events = Vec::new();
        self.decoder.finish(&mut events);
        self.pending.extend(events.into_iter().map(Ok));
        self.done = true;
        // Not `rx.close()`: the pump drains the body's tail so the connection is reused.
        self.finished.cancel();
    }

    fn on_bytes(&mut self, bytes: &[u8]) {
        if let Some(buf) = &mut self.json_body {
            buf.extend_from_slice(bytes);
            if buf.len() > JSON_BODY_LIMIT {
                self.fail(ModelError::Protocol(format!(
                    "JSON response larger than {JSON_BODY_LIMIT} bytes"
                )));
            }
            return;
        }
        let mut events = Vec::new();
        self.parser.feed(bytes, &mut events);
        self.on_sse_events(events);
    }

    fn on_eof(&mut self) {
        if let Some(buf) = self.json_body.take() {
            match serde_json::from_slice::<Value>(&buf) {
                Ok(completion) => {
                    self.on_payload(completion_as_chunk(completion), None);
                }
                Err(e) => self.fail(ModelError::Protocol(format!(
                    "invalid JSON response: {e}: {}",
                    preview(&String::from_utf8_lossy(&buf))
                ))),
            }
        } else {
            let mut events = Vec::new();
            self.parser.finish(&mut events);
            self.on_sse_events(events);
        }
        if !self.done {
            self.finish();
        }
    }

    fn on_sse_events(&mut self, events: Vec<SseEvent>) {
        for event in events {
            if self.done {
                return;
            }
            let data = event.data.trim();
            if data.is_empty() {
                continue;
            }
            if data == "[DONE]" {
                self.finish();
                return;
            }
            match serde_json::from_str::<Value>(data) {
                Ok(payload) => self.on_payload(payload, event.event.as_deref()),
                Err(e) => {
                    // Some servers forget the blank line between events, which SSE reads as one
                    // multi-line event; accept it when every line is JSON on its own.
                    let lines: Option<Vec<Value>> = data
                        .lines()
                        .filter(|l| !l.trim().is_empty())
                        .map(|l| serde_json::from_str(l.trim_start_matches("data:").trim()).ok())
                        .collect();
                    match lines {
                        Some(payloads) if data.contains('\n') => {
                            for payload in payloads {
                                self.on_payload(payload, event.event.as_deref());
                            }
                        }
                        _ => self.fail(ModelError::Protocol(format!(
                            "invalid JSON in event stream: {e}: {}",
                            preview(data)
                        ))),
                    }
                }
            }
        }
    }

    fn on_payload(&mut self, payload: Value, event: Option<&str>) {
        if self.done {
            return;
        }
        if self.include_raw {
            self.pending.push_back(Ok(ModelEvent::Raw(payload.clone())));
        }
        let is_error = event == Some("error")
            || (payload.get("error").is_some_and(|e| !e.is_null())
                && payload.get("choices").is_none());
        if is_error {
            let message = error_message(&payload);
            self.fail(ModelError::Protocol(format!(
                "provider reported an error: {message}"
            )));
            return;
        }
        let mut events = Vec::new();
        self.decoder.on_chunk(&payload, &mut events);
        self.pending.extend(events.into_iter().map(Ok));
    }
}
/// Reshapes a non-streamed `chat.completion` so the chunk decoder can read it.
fn completion_as_chunk(mut completion: Value) -> Value {
    if let Some(choices) = completion.get_mut("choices").and_then(Value::as_array_mut) {
        for choice in choices.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(message) = choice.remove("message") {
                choice.insert("delta".into(), message);
            }
        }
    }
    completion
}

fn error_message(payload: &Value) -> String {
    let error = payload.get("error").unwrap_or(payload);
    match error {
        Value::String(s) => s.clone(),
        other => other
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| preview(&other.to_string())),
    }
}
