//! The response body's way to the caller: the consumer reads it in place (no task in between,
//! so each network read costs no extra wake-up), a keeper task drops it on cancellation or
//! drains its tail once the answer is complete, and the [`ChunkDecoder`] turns the bytes into
//! events, from SSE or from a plain JSON completion.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::Body as _;
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
/// How long the consumer itself waits for the body's end after `[DONE]` (normally just the
/// chunked-encoding terminator, sent with it) before leaving the rest to the keeper: reading
/// it here puts the connection back in the pool before the next call looks for one.
const TAIL_WAIT: Duration = Duration::from_millis(10);

/// The response body, shared by the consumer and the keeper; `None` once read to its end or
/// dropped. Locked only for one poll, never across an await.
#[derive(Clone)]
pub(super) struct BodySlot(Arc<Mutex<Option<reqwest::Body>>>);

impl BodySlot {
    pub(super) fn new(response: reqwest::Response) -> Self {
        Self(Arc::new(Mutex::new(Some(response.into()))))
    }

    /// Takes the body out: dropping it closes the connection (HTTP/1) or resets the stream
    /// (HTTP/2), so the provider stops generating and billing.
    fn take(&self) -> Option<reqwest::Body> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    /// The next data frame; `None` at the end of the body or once the keeper took it.
    fn poll_chunk(&self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, reqwest::Error>>> {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(body) = slot.as_mut() else {
            return Poll::Ready(None);
        };
        loop {
            match Pin::new(&mut *body).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    // Read to its end: dropping it keeps the connection (nothing to poll again).
                    *slot = None;
                    return Poll::Ready(None);
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(frame))) => {
                    // Trailers carry nothing for the answer.
                    if let Ok(data) = frame.into_data() {
                        return Poll::Ready(Some(Ok(data)));
                    }
                }
            }
        }
    }

    /// Reads and discards the rest of the body, up to its end (which puts the connection back
    /// in the pool) or an error, for at most `limit` and unless `cancel` fires first.
    async fn skip_rest(&self, cancel: &CancellationToken, limit: Duration) {
        let rest = async { while let Some(Ok(_)) = poll_fn(|cx| self.poll_chunk(cx)).await {} };
        tokio::select! {
            biased;
            () = cancel.cancelled() => {}
            () = rest => {}
            () = tokio::time::sleep(limit) => {}
        }
    }
}

/// Keeps the body's connection in order while the consumer reads: drops the body when the
/// consumer leaves or the run is cancelled (`gone`: a child of `cancel` the consumer cancels
/// when it fails or is dropped), even if nobody polls it then; and once the consumer saw the
/// end of the answer (`finished`: `[DONE]`), drains what is left (normally just the
/// chunked-encoding terminator) so the connection is reused.
pub(super) async fn keep_body(
    body: BodySlot,
    (cancel, gone): (CancellationToken, CancellationToken),
    finished: CancellationToken,
) {
    tokio::select! {
        biased;
        // First: a consumer that saw the end and left still lets the tail be drained.
        () = finished.cancelled() => {}
        () = gone.cancelled() => {
            body.take();
            return;
        }
    }
    body.skip_rest(&cancel, DRAIN_TIMEOUT).await;
    // Whatever is left unread closes the connection.
    body.take();
}

/// The consumer side: reads the body and turns it into [`ModelEvent`]s.
pub(super) struct EventStream {
    pub(super) body: BodySlot,
    /// How long the provider may stay silent before the answer fails.
    pub(super) idle_timeout: Duration,
    pub(super) cancel: CancellationToken,
    /// Makes the keeper drop the body (its `gone`) when this stream fails or is dropped.
    pub(super) stop_body: DropGuard,
    /// Tells the keeper the answer is complete (see [`keep_body`]).
    pub(super) finished: CancellationToken,
    pub(super) parser: SseParser,
    pub(super) decoder: ChunkDecoder,
    pub(super) include_raw: bool,
    /// `Some(buffer)` when the server answered with a plain JSON completion instead of SSE.
    pub(super) json_body: Option<Vec<u8>>,
    pub(super) pending: VecDeque<Result<ModelEvent, ModelError>>,
    /// Set at `[DONE]`: the body's end is read (see [`TAIL_WAIT`]) before the answer finishes.
    pub(super) tail: bool,
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
            if self.tail {
                self.body.skip_rest(&self.cancel, TAIL_WAIT).await;
                self.finish();
                continue;
            }
            let read = tokio::select! {
                biased;
                () = self.cancel.cancelled() => Some(Err(ModelError::Cancelled)),
                read = self.read() => read,
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

    /// The next read of the body, failing after [`EventStream::idle_timeout`] of silence.
    async fn read(&self) -> Option<Result<Bytes, ModelError>> {
        let read = poll_fn(|cx| self.body.poll_chunk(cx));
        match tokio::time::timeout(self.idle_timeout, read).await {
            Err(_) => Some(Err(ModelError::Timeout(format!(
                "no data from provider for {:?}",
                self.idle_timeout
            )))),
            Ok(read) => read.map(|read| {
                read.map_err(|e| {
                    ModelError::Protocol(format!(
                        "response stream interrupted: {}",
                        describe(&e.without_url())
                    ))
                })
            }),
        }
    }

    fn fail(&mut self, error: ModelError) {
        self.pending.push_back(Err(error));
        self.done = true;
        // The keeper drops the connection.
        self.stop_body.token().cancel();
    }

    fn finish(&mut self) {
        let mut events = Vec::new();
        self.decoder.finish(&mut events);
        self.pending.extend(events.into_iter().map(Ok));
        self.done = true;
        // The keeper drains the body's tail so the connection is reused.
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
                self.tail = true;
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
