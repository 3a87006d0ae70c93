//! OpenAI-compatible Chat Completions client (OpenAI, vLLM, Ollama, llama.cpp server, LiteLLM…).
//!
//! Wire choices worth knowing:
//! - `max_output_tokens` is sent as `max_tokens`, which every compatible server understands.
//!   OpenAI's reasoning models want `max_completion_tokens` instead: pass it through
//!   `extra_body` (`{"max_completion_tokens": N, "max_tokens": null}`).
//! - `tools`/`tool_choice` are omitted when no tool is offered (OpenAI rejects a lone
//!   `tool_choice`); `top_k` is only sent when set.
//! - With `structured_output = false`, a JSON-schema response format degrades to `json_object`
//!   (with a [`ModelEvent::Warning`]); the caller is expected to describe the schema in the
//!   prompt.
//! - `provider_options` are read as the reference reads them (see `provider_option_fields`):
//!   the entries under `openai`, `openaiCompatible`, `openai-compatible` and the provider's own
//!   name; other providers' entries are ignored. They go after agentd's own fields and before
//!   `extra_body`, which wins.
//! - A server that ignores `stream: true` and answers with one JSON completion is accepted too.
//!
//! Warnings ([`ModelEvent::Warning`]) about the request come right after the metadata, and only
//! for settings that are really not sent: a JSON schema degraded to `json_object`, and a
//! `Required` or named tool choice without tools. Every sampling setting that is set is sent as
//! is (`top_k` and `seed` included), so none of them warns. Also reported as warnings, as they
//! arrive: the provider's own top-level `warnings` (strings, or objects with a `message`; each
//! distinct text once), and generated images that cannot be decoded (nothing is downloaded).
//!
//! Response extras: `url_citation` annotations become [`ModelEvent::Source`]s (once each),
//! `images` on the delta (OpenRouter) become [`ModelEvent::File`]s, and the usage details
//! become `Finish.provider_metadata` as `{"openai": {"cachedPromptTokens", "reasoningTokens",
//! "acceptedPredictionTokens", "rejectedPredictionTokens"}}` (those present).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::error::Error as _;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::sse::{SseEvent, SseParser};
use super::{
    ChatMessage, ContentPart, FinishReason, ModelError, ModelEvent, ModelProvider, ModelRequest,
    ModelStream, ProviderConfig, ResponseFormat, ToolChoice, Usage,
};

/// How much of an error body is kept in [`ModelError::Http`].
const ERROR_BODY_LIMIT: usize = 2048;
/// Upper bound for a non-streamed JSON answer, so a broken server cannot exhaust memory.
const JSON_BODY_LIMIT: usize = 16 * 1024 * 1024;
/// First retry delay; doubled on each further attempt.
const BACKOFF_BASE: Duration = Duration::from_millis(200);
/// Longest computed backoff between two attempts.
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Longest wait a provider's `Retry-After` may impose.
const RETRY_AFTER_MAX: Duration = Duration::from_secs(30);
/// How long a finished response may take to deliver its last bytes before the connection is
/// dropped instead of being reused.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);
/// Network reads buffered ahead of the consumer.
const CHANNEL_CAPACITY: usize = 16;

/// A provider speaking the OpenAI Chat Completions streaming protocol.
pub struct OpenAiProvider {
    name: String,
    endpoint: String,
    include_usage: bool,
    structured_output: bool,
    idle_timeout: Duration,
    max_retries: u32,
    /// Carries the API key in its default headers (marked sensitive).
    client: reqwest::Client,
}

impl fmt::Debug for OpenAiProvider {
    // Hand-written so that no future field can leak the key through `{:?}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("name", &self.name)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl OpenAiProvider {
    /// Builds the client; reads the API key from `cfg.api_key_env` now.
    pub fn new(cfg: ProviderConfig) -> Result<Self, ModelError> {
        let base = cfg.base_url.trim().trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ModelError::Config(format!(
                "provider {:?}: base_url must start with http:// or https://",
                cfg.name
            )));
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &cfg.headers {
            let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                ModelError::Config(format!(
                    "provider {:?}: invalid header name {name:?}",
                    cfg.name
                ))
            })?;
            // The value may be a secret, so it never appears in the error.
            let mut header_value = HeaderValue::from_str(value).map_err(|_| {
                ModelError::Config(format!(
                    "provider {:?}: invalid value for header {name:?}",
                    cfg.name
                ))
            })?;
            header_value.set_sensitive(true);
            headers.insert(header_name, header_value);
        }
        if let Some(var) = &cfg.api_key_env {
            let key = std::env::var(var)
                .ok()
                .filter(|k| !k.trim().is_empty())
                .ok_or_else(|| {
                    ModelError::Config(format!(
                        "provider {:?}: environment variable {var} (the API key) is not set",
                        cfg.name
                    ))
                })?;
            let mut value =
                HeaderValue::from_str(&format!("Bearer {}", key.trim())).map_err(|_| {
                    ModelError::Config(format!(
                        "provider {:?}: the API key in {var} contains invalid characters",
                        cfg.name
                    ))
                })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let client = reqwest::Client::builder()
            .connect_timeout(cfg.connect_timeout)
            .tcp_nodelay(true)
            .user_agent(concat!("agentd/", env!("CARGO_PKG_VERSION")))
            .default_headers(headers)
            .build()
            .map_err(|e| {
                ModelError::Config(format!("provider {:?}: {}", cfg.name, describe(&e)))
            })?;
        Ok(Self {
            endpoint: format!("{base}/chat/completions"),
            name: cfg.name,
            include_usage: cfg.include_usage,
            structured_output: cfg.structured_output,
            idle_timeout: cfg.idle_timeout,
            max_retries: cfg.max_retries,
            client,
        })
    }

    /// The JSON body of a Chat Completions request, and warnings about what it leaves out.
    fn request_body(&self, req: &ModelRequest) -> (Map<String, Value>, Vec<String>) {
        let mut warnings = Vec::new();
        let options = provider_option_fields(&req.provider_options, &self.name);
        let mut body = Map::new();
        body.insert("model".into(), req.model.clone().into());
        body.insert(
            "messages".into(),
            req.messages.iter().map(message_json).collect(),
        );
        if !req.tools.is_empty() {
            let tools = req
                .tools
                .iter()
                .map(|tool| {
                    let mut function = Map::new();
                    function.insert("name".into(), tool.name.clone().into());
                    if !tool.description.is_empty() {
                        function.insert("description".into(), tool.description.clone().into());
                    }
                    let parameters = match &tool.parameters {
                        // OpenAI insists on an object schema even for argument-less tools.
                        Value::Null => json!({"type": "object", "properties": {}}),
                        schema => schema.clone(),
                    };
                    function.insert("parameters".into(), parameters);
                    json!({"type": "function", "function": function})
                })
                .collect();
            body.insert("tools".into(), tools);
            if let Some(choice) = &req.tool_choice {
                let choice = match choice {
                    ToolChoice::Auto => json!("auto"),
                    ToolChoice::None => json!("none"),
                    ToolChoice::Required => json!("required"),
                    ToolChoice::Tool(name) => {
                        json!({"type": "function", "function": {"name": name}})
                    }
                };
                body.insert("tool_choice".into(), choice);
            }
        } else if let Some(choice @ (ToolChoice::Required | ToolChoice::Tool(_))) = &req.tool_choice
        {
            // `Auto` and `None` hold trivially without tools; these two cannot.
            let choice = match choice {
                ToolChoice::Tool(name) => format!("tool {name:?}"),
                _ => "required".to_owned(),
            };
            warnings.push(format!(
                "toolChoice {choice} is not sent: no tools are offered"
            ));
        }
        let s = &req.settings;
        let optional = [
            ("temperature", s.temperature.map(Value::from)),
            ("max_tokens", s.max_output_tokens.map(Value::from)),
            ("top_p", s.top_p.map(Value::from)),
            ("top_k", s.top_k.map(Value::from)),
            ("presence_penalty", s.presence_penalty.map(Value::from)),
            ("frequency_penalty", s.frequency_penalty.map(Value::from)),
            ("seed", s.seed.map(Value::from)),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                body.insert(key.into(), value);
            }
        }
        if !s.stop_sequences.is_empty() {
            body.insert("stop".into(), s.stop_sequences.clone().into());
        }
        match &req.response_format {
            Some(ResponseFormat::JsonSchema {
                name,
                schema,
                strict,
            }) if self.structured_output => {
                let strict = options.strict_json_schema.unwrap_or(*strict);
                body.insert(
                    "response_format".into(),
                    json!({"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": strict}}),
                );
            }
            Some(format) => {
                if matches!(format, ResponseFormat::JsonSchema { .. }) {
                    warnings.push(
                        "responseFormat: a JSON schema is only supported with structured outputs; \
                         sent json_object without the schema"
                            .to_owned(),
                    );
                }
                body.insert("response_format".into(), json!({"type": "json_object"}));
            }
            None => {}
        }
        body.insert("stream".into(), true.into());
        if self.include_usage {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        for (key, value) in options.body.into_iter().chain(req.extra_body.clone()) {
            body.insert(key, value);
        }
        (body, warnings)
    }

    /// Sends the request, retrying connect errors, 429 and 5xx with backoff.
    async fn send_with_retries(
        &self,
        body: Bytes,
        max_retries: u32,
        cancel: &CancellationToken,
    ) -> Result<reqwest::Response, ModelError> {
        let mut attempt = 0u32;
        loop {
            let (error, retry_after) = match self.send_once(body.clone(), cancel).await {
                Ok(response) => return Ok(response),
                Err(failure) => failure,
            };
            let retryable = match &error {
                ModelError::Http { retryable, .. } => *retryable,
                ModelError::Connect(_) => true,
                _ => false,
            };
            if !retryable || attempt >= max_retries {
                return Err(error);
            }
            let delay = retry_after.unwrap_or_else(|| backoff(attempt));
            tracing::warn!(
                provider = %self.name,
                attempt = attempt + 1,
                max_retries,
                delay_ms = delay.as_millis() as u64,
                error = %error,
                "model request failed, retrying"
            );
            tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(ModelError::Cancelled),
                _ = tokio::time::sleep(delay) => {}
            }
            attempt += 1;
        }
    }

    /// One attempt; on failure also returns the provider's `Retry-After`, if any.
    async fn send_once(
        &self,
        body: Bytes,
        cancel: &CancellationToken,
    ) -> Result<reqwest::Response, (ModelError, Option<Duration>)> {
        let send = self
            .client
            .post(&self.endpoint)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream, application/json")
            .body(body)
            .send();
        let response = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err((ModelError::Cancelled, None)),
            result = tokio::time::timeout(self.idle_timeout, send) => match result {
                Err(_) => {
                    let msg = format!("no response within {:?}", self.idle_timeout);
                    return Err((ModelError::Timeout(msg), None));
                }
                Ok(Err(e)) => return Err((send_error(e), None)),
                Ok(Ok(response)) => response,
            },
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = retry_after(response.headers(), SystemTime::now());
        let body = self.read_error_body(response, cancel).await;
        let error = ModelError::Http {
            status: status.as_u16(),
            body,
            retryable: status.as_u16() == 429 || status.is_server_error(),
        };
        Err((error, retry_after))
    }

    /// Reads at most [`ERROR_BODY_LIMIT`] bytes of an error body; never fails.
    async fn read_error_body(
        &self,
        mut response: reqwest::Response,
        cancel: &CancellationToken,
    ) -> String {
        let mut buf = Vec::new();
        let mut truncated = false;
        loop {
            let chunk = tokio::select! {
                biased;
                _ = cancel.cancelled() => break,
                chunk = tokio::time::timeout(self.idle_timeout, response.chunk()) => chunk,
            };
            match chunk {
                Ok(Ok(Some(bytes))) => {
                    buf.extend_from_slice(&bytes);
                    if buf.len() > ERROR_BODY_LIMIT {
                        truncated = true;
                        break;
                    }
                }
                // The status already tells the story; a broken body just stays short.
                _ => break,
            }
        }
        let mut text = String::from_utf8_lossy(&buf).into_owned();
        if truncated {
            let mut end = ERROR_BODY_LIMIT;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            text.push_str("… (truncated)");
        }
        text
    }
}

#[async_trait]
impl ModelProvider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn supports_structured_output(&self) -> bool {
        self.structured_output
    }

    async fn stream(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> Result<ModelStream, ModelError> {
        let max_retries = request.settings.max_retries.unwrap_or(self.max_retries);
        let (body, warnings) = self.request_body(&request);
        let body = serde_json::to_vec(&body)
            .map_err(|e| ModelError::Protocol(format!("cannot encode request: {e}")))?;
        tracing::debug!(provider = %self.name, model = %request.model, "model request");
        let response = self
            .send_with_retries(Bytes::from(body), max_retries, &cancel)
            .await?;

        let headers = kept_headers(response.headers());
        let json_body = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.trim_start().starts_with("application/json"));

        // The body is read by its own task so that cancellation drops the connection at once,
        // even while the consumer is busy elsewhere and not polling the stream.
        let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
        let finished = CancellationToken::new();
        tokio::spawn(pump_body(
            response,
            tx,
            cancel.clone(),
            finished.clone(),
            self.idle_timeout,
        ));

        let state = EventStream {
            rx,
            cancel,
            finished,
            parser: SseParser::new(),
            decoder: ChunkDecoder::new(headers, warnings),
            include_raw: request.include_raw,
            json_body: json_body.then(Vec::new),
            pending: VecDeque::new(),
            done: false,
        };
        Ok(futures::stream::unfold(state, |mut state| async move {
            let item = state.next_event().await?;
            Some((item, state))
        })
        .boxed())
    }
}

/// Copies the response body into `tx` until EOF, an error, cancellation, or the consumer leaves.
///
/// `finished` means the consumer saw the end of the answer (`[DONE]`): what is left of the body
/// (normally just the chunked-encoding terminator) is drained so the connection can be reused.
async fn pump_body(
    mut response: reqwest::Response,
    tx: mpsc::Sender<Result<Bytes, ModelError>>,
    cancel: CancellationToken,
    finished: CancellationToken,
    idle_timeout: Duration,
) {
    loop {
        let read = tokio::select! {
            biased;
            // Returning drops `response`, which closes the connection (HTTP/1) or resets the
            // stream (HTTP/2): the provider stops generating and billing.
            _ = cancel.cancelled() => return,
            _ = finished.cancelled() => break,
            _ = tx.closed() => return,
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
            _ = cancel.cancelled() => return,
            _ = finished.cancelled() => break,
            sent = tx.send(item) => if sent.is_err() { return },
        }
        if is_err {
            return;
        }
    }
    let drain = async { while let Ok(Some(_)) = response.chunk().await {} };
    tokio::select! {
        _ = cancel.cancelled() => {}
        _ = tokio::time::timeout(DRAIN_TIMEOUT, drain) => {}
    }
}

/// The consumer side: turns body bytes into [`ModelEvent`]s.
struct EventStream {
    rx: mpsc::Receiver<Result<Bytes, ModelError>>,
    cancel: CancellationToken,
    /// Tells the pump the answer is complete (see [`pump_body`]).
    finished: CancellationToken,
    parser: SseParser,
    decoder: ChunkDecoder,
    include_raw: bool,
    /// `Some(buffer)` when the server answered with a plain JSON completion instead of SSE.
    json_body: Option<Vec<u8>>,
    pending: VecDeque<Result<ModelEvent, ModelError>>,
    done: bool,
}

impl EventStream {
    async fn next_event(&mut self) -> Option<Result<ModelEvent, ModelError>> {
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
                read = self.rx.recv() => read,
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
        // Dropping the receiver stops the pump and with it the connection.
        self.rx.close();
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

/// A tool call being assembled from deltas.
#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
    started: bool,
}

/// Turns `chat.completion.chunk` payloads into events; pure, no I/O.
#[derive(Debug)]
struct ChunkDecoder {
    /// Headers for the metadata event; `None` once it was emitted.
    headers: Option<BTreeMap<String, String>>,
    /// Warnings about the request, emitted right after the metadata.
    request_warnings: Vec<String>,
    /// Warning texts already emitted: gateways may repeat theirs on every chunk.
    warned: HashSet<String>,
    /// Annotations already turned into sources, for servers that repeat them.
    cited: HashSet<String>,
    calls: BTreeMap<u32, PartialCall>,
    /// Index of the call that received the last fragment, for servers that omit `index`.
    last_call: Option<u32>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    /// `{"openai": {...}}` from the latest usage report.
    provider_metadata: Option<Value>,
}

impl ChunkDecoder {
    fn new(headers: BTreeMap<String, String>, request_warnings: Vec<String>) -> Self {
        Self {
            headers: Some(headers),
            request_warnings,
            warned: HashSet::new(),
            cited: HashSet::new(),
            calls: BTreeMap::new(),
            last_call: None,
            finish_reason: None,
            usage: None,
            provider_metadata: None,
        }
    }

    fn emit_metadata(&mut self, chunk: Option<&Value>, out: &mut Vec<ModelEvent>) {
        if let Some(headers) = self.headers.take() {
            let field = |name: &str| chunk.and_then(|c| c.get(name));
            out.push(ModelEvent::ResponseMetadata {
                id: field("id").and_then(Value::as_str).map(str::to_owned),
                model: field("model").and_then(Value::as_str).map(str::to_owned),
                created: field("created").and_then(Value::as_i64),
                headers,
            });
            for warning in std::mem::take(&mut self.request_warnings) {
                self.warn(warning, out);
            }
        }
    }

    fn warn(&mut self, warning: String, out: &mut Vec<ModelEvent>) {
        if self.warned.insert(warning.clone()) {
            out.push(ModelEvent::Warning(warning));
        }
    }

    fn on_chunk(&mut self, chunk: &Value, out: &mut Vec<ModelEvent>) {
        self.emit_metadata(Some(chunk), out);
        if let Some(warnings) = chunk.get("warnings").and_then(Value::as_array) {
            for warning in warnings {
                let text = match warning {
                    Value::String(text) => text.clone(),
                    Value::Null => continue,
                    other => match other.get("message").and_then(Value::as_str) {
                        Some(message) => message.to_owned(),
                        // Better shown as JSON than lost.
                        None => preview(&other.to_string()),
                    },
                };
                if !text.trim().is_empty() {
                    self.warn(text, out);
                }
            }
        }
        // Usage may come on every chunk (vLLM's continuous stats are cumulative) or only on the
        // last one; the latest report wins.
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(parse_usage(usage));
            self.provider_metadata = usage_metadata(usage);
        }
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else {
            return;
        };
        // We never ask for `n > 1`; other choices would only interleave text.
        for choice in choices
            .iter()
            .filter(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        {
            if let Some(delta) = choice.get("delta").filter(|d| d.is_object()) {
                self.on_delta(delta, out);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str)
                && !reason.is_empty()
            {
                self.finish_reason = Some(reason.to_owned());
            }
        }
    }

    fn on_delta(&mut self, delta: &Value, out: &mut Vec<ModelEvent>) {
        let text = |name: &str| {
            delta
                .get(name)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        // Recent vLLM sends the same text as both `reasoning_content` and `reasoning`.
        if let Some(reasoning) = text("reasoning_content").or_else(|| text("reasoning")) {
            out.push(ModelEvent::ReasoningDelta(reasoning.to_owned()));
        }
        if let Some(content) = text("content") {
            out.push(ModelEvent::TextDelta(content.to_owned()));
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                self.on_tool_call_delta(call, out);
            }
        }
        if let Some(annotations) = delta.get("annotations").and_then(Value::as_array) {
            for annotation in annotations {
                self.on_annotation(annotation, out);
            }
        }
        if let Some(images) = delta.get("images").and_then(Value::as_array) {
            for image in images {
                self.on_image(image, out);
            }
        }
    }

    /// A `url_citation` annotation becomes a `url` source, once.
    fn on_annotation(&mut self, annotation: &Value, out: &mut Vec<ModelEvent>) {
        if annotation.get("type").and_then(Value::as_str) != Some("url_citation") {
            return;
        }
        // Some gateways put the citation's fields on the annotation itself.
        let citation = annotation
            .get("url_citation")
            .filter(|c| c.is_object())
            .unwrap_or(annotation);
        let text = |name: &str| citation.get(name).and_then(Value::as_str);
        let Some(url) = text("url").filter(|u| !u.is_empty()) else {
            return;
        };
        if !self.cited.insert(annotation.to_string()) {
            return;
        }
        out.push(ModelEvent::Source {
            id: text("id")
                .or_else(|| annotation.get("id").and_then(Value::as_str))
                .map_or_else(|| generated_id("source"), str::to_owned),
            source_type: "url".to_owned(),
            url: url.to_owned(),
            title: text("title").unwrap_or_default().to_owned(),
        });
    }

    /// A generated image (`{"type": "image_url", "image_url": {"url": "data:…"}}`) becomes a
    /// file; one that cannot be decoded becomes a warning, since nothing is fetched.
    fn on_image(&mut self, image: &Value, out: &mut Vec<ModelEvent>) {
        // OpenRouter's shape first, then the flatter ones some servers use.
        let url = [
            image.pointer("/image_url/url"),
            image.get("image_url"),
            image.get("url"),
        ]
        .into_iter()
        .flatten()
        .find_map(Value::as_str);
        match url.map(|url| (url, decode_data_url(url))) {
            Some((_, Some((data, mime_type)))) => out.push(ModelEvent::File { data, mime_type }),
            Some((url, None)) => self.warn(
                format!(
                    "skipped a generated image that is not a decodable data: URL: {}",
                    preview(url)
                ),
                out,
            ),
            None => self.warn(
                format!(
                    "skipped a generated image without a URL: {}",
                    preview(&image.to_string())
                ),
                out,
            ),
        }
    }

    fn on_tool_call_delta(&mut self, delta: &Value, out: &mut Vec<ModelEvent>) {
        let id = delta
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let function = delta.get("function");
        let name = function
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let args = match function.and_then(|f| f.get("arguments")) {
            Some(Value::String(s)) => s.clone(),
            // Some servers send the arguments as an object rather than JSON text.
            Some(v @ Value::Object(_)) => v.to_string(),
            _ => String::new(),
        };
        let index = match delta
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|i| u32::try_from(i).ok())
        {
            Some(index) => index,
            // Without an index (Gemini's compatibility layer) a new id means a new call, and
            // anything else continues the previous one.
            None => match id {
                Some(id) => self
                    .calls
                    .iter()
                    .find(|(_, c)| c.id == id)
                    .map(|(i, _)| *i)
                    .unwrap_or_else(|| self.calls.keys().next_back().map_or(0, |i| i + 1)),
                None => self.last_call.unwrap_or(0),
            },
        };
        self.last_call = Some(index);
        let call = self.calls.entry(index).or_default();
        if call.id.is_empty()
            && let Some(id) = id
        {
            call.id = id.to_owned();
        }
        // Set once: some servers repeat the full name on every fragment.
        if call.name.is_empty()
            && let Some(name) = name
        {
            call.name = name.to_owned();
        }
        if !call.started && !call.name.is_empty() {
            if call.id.is_empty() {
                call.id = generated_id("call");
            }
            call.started = true;
            out.push(ModelEvent::ToolCallStart {
                index,
                id: call.id.clone(),
                name: call.name.clone(),
            });
            // Fragments that came before the name are released now.
            if !call.arguments.is_empty() {
                out.push(ModelEvent::ToolCallDelta {
                    index,
                    id: call.id.clone(),
                    args_delta: call.arguments.clone(),
                });
            }
        }
        if !args.is_empty() {
            call.arguments.push_str(&args);
            if call.started {
                out.push(ModelEvent::ToolCallDelta {
                    index,
                    id: call.id.clone(),
                    args_delta: args,
                });
            }
        }
    }

    /// Ends every tool call (index order), then `Finish`.
    fn finish(&mut self, out: &mut Vec<ModelEvent>) {
        self.emit_metadata(None, out);
        let had_calls = !self.calls.is_empty();
        for (index, call) in std::mem::take(&mut self.calls) {
            let PartialCall {
                mut id,
                name,
                arguments,
                started,
            } = call;
            if !started {
                // A call without a name is still reported, so the loop can tell the model.
                if id.is_empty() {
                    id = generated_id("call");
                }
                out.push(ModelEvent::ToolCallStart {
                    index,
                    id: id.clone(),
                    name: name.clone(),
                });
            }
            let arguments = if arguments.trim().is_empty() {
                "{}".to_owned()
            } else {
                arguments
            };
            out.push(ModelEvent::ToolCallEnd {
                index,
                id,
                name,
                arguments,
            });
        }
        out.push(ModelEvent::Finish {
            reason: map_finish_reason(self.finish_reason.as_deref(), had_calls),
            usage: self.usage.unwrap_or_default(),
            provider_metadata: self.provider_metadata.take(),
        });
    }
}

/// Maps OpenAI's finish reasons, plus a few common aliases of other servers.
fn map_finish_reason(reason: Option<&str>, had_tool_calls: bool) -> FinishReason {
    match reason.map(str::trim) {
        None | Some("") if had_tool_calls => FinishReason::ToolCalls,
        None | Some("") => FinishReason::Stop,
        Some("stop" | "eos" | "eos_token" | "end_turn" | "stop_sequence") => FinishReason::Stop,
        Some("length" | "max_tokens") => FinishReason::Length,
        Some("content_filter") => FinishReason::ContentFilter,
        Some("tool_calls" | "function_call" | "tool_use") => FinishReason::ToolCalls,
        Some("error") => FinishReason::Error,
        Some(_) => FinishReason::Other,
    }
}

/// Reads OpenAI's usage object; absent fields count as zero.
fn parse_usage(usage: &Value) -> Usage {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let input_tokens = n(usage.get("prompt_tokens"));
    let output_tokens = n(usage.get("completion_tokens"));
    let total_tokens = usage
        .get("total_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(input_tokens.saturating_add(output_tokens));
    Usage {
        input_tokens,
        output_tokens,
        total_tokens,
        reasoning_tokens: n(usage.pointer("/completion_tokens_details/reasoning_tokens")),
        cached_input_tokens: n(usage.pointer("/prompt_tokens_details/cached_tokens")),
    }
}

/// What the request's provider options contribute.
#[derive(Debug, Default, PartialEq)]
struct OptionFields {
    /// Top-level body fields.
    body: Map<String, Value>,
    /// Overrides the schema's own `strict` when a `json_schema` response format is sent.
    strict_json_schema: Option<bool>,
}

/// How a known option key of @ai-sdk/openai's chat model reaches the request.
#[derive(Debug, Clone, Copy)]
enum OptionField {
    /// Sent as this body field.
    Body(&'static str),
    /// `true` → `logprobs` (and `top_logprobs: 0`, as the reference), `n` → `top_logprobs: n`.
    Logprobs,
    /// Not a body field: sets `response_format.json_schema.strict`.
    StrictJsonSchema,
}

/// The known option keys; any other key is copied into the body verbatim.
const OPTION_FIELDS: &[(&str, OptionField)] = &[
    ("logitBias", OptionField::Body("logit_bias")),
    ("logprobs", OptionField::Logprobs),
    ("user", OptionField::Body("user")),
    (
        "parallelToolCalls",
        OptionField::Body("parallel_tool_calls"),
    ),
    ("reasoningEffort", OptionField::Body("reasoning_effort")),
    (
        "maxCompletionTokens",
        OptionField::Body("max_completion_tokens"),
    ),
    ("store", OptionField::Body("store")),
    ("metadata", OptionField::Body("metadata")),
    ("prediction", OptionField::Body("prediction")),
    ("serviceTier", OptionField::Body("service_tier")),
    ("textVerbosity", OptionField::Body("verbosity")),
    ("promptCacheKey", OptionField::Body("prompt_cache_key")),
    (
        "promptCacheOptions",
        OptionField::Body("prompt_cache_options"),
    ),
    (
        "promptCacheRetention",
        OptionField::Body("prompt_cache_retention"),
    ),
    ("safetyIdentifier", OptionField::Body("safety_identifier")),
    ("strictJsonSchema", OptionField::StrictJsonSchema),
];

/// Reads the reference's per-provider options (`{"openai": {...}, "anthropic": {...}}`) the way
/// @ai-sdk/openai and @ai-sdk/openai-compatible do: the entries under `openai`,
/// `openaiCompatible`, `openai-compatible`, the provider's name and its camelCase form are
/// merged in that order (later wins); other providers' entries are ignored.
fn provider_option_fields(options: &Map<String, Value>, provider_name: &str) -> OptionFields {
    let camel = camel_case(provider_name);
    let keys = [
        "openai",
        "openaiCompatible",
        "openai-compatible",
        provider_name,
        camel.as_str(),
    ];
    let mut merged = Map::new();
    for key in keys {
        if let Some(Value::Object(entry)) = options.get(key) {
            merged.extend(entry.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let mut fields = OptionFields::default();
    let mut known = Vec::new();
    for (key, value) in merged {
        match OPTION_FIELDS.iter().find(|(name, _)| *name == key) {
            Some((_, field)) => known.push((*field, value)),
            None => {
                fields.body.insert(key, value);
            }
        }
    }
    // Known keys last, so that `reasoningEffort` wins over a verbatim `reasoning_effort`.
    for (field, value) in known {
        match (field, value) {
            // Null means unset (the reference rejects it): it can still clear an earlier entry.
            (_, Value::Null) => {}
            (OptionField::Body(name), value) => {
                fields.body.insert(name.into(), value);
            }
            (OptionField::Logprobs, Value::Bool(false)) => {}
            (OptionField::Logprobs, Value::Bool(true)) => {
                fields.body.insert("logprobs".into(), true.into());
                fields.body.insert("top_logprobs".into(), 0.into());
            }
            (OptionField::Logprobs, n @ Value::Number(_)) => {
                fields.body.insert("logprobs".into(), true.into());
                fields.body.insert("top_logprobs".into(), n);
            }
            // Neither form: let the provider judge it.
            (OptionField::Logprobs, other) => {
                fields.body.insert("logprobs".into(), other);
            }
            (OptionField::StrictJsonSchema, Value::Bool(strict)) => {
                fields.strict_json_schema = Some(strict);
            }
            (OptionField::StrictJsonSchema, _) => {}
        }
    }
    fields
}

/// `my-provider` / `my_provider` → `myProvider`, as the reference derives the camelCase key.
fn camel_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match chars.peek() {
            Some(next) if matches!(c, '-' | '_') && next.is_ascii_lowercase() => {
                out.push(next.to_ascii_uppercase());
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// Usage details as @ai-sdk/openai names them in its provider metadata, and where they are.
const USAGE_METADATA: &[(&str, &str)] = &[
    ("cachedPromptTokens", "/prompt_tokens_details/cached_tokens"),
    (
        "reasoningTokens",
        "/completion_tokens_details/reasoning_tokens",
    ),
    (
        "acceptedPredictionTokens",
        "/completion_tokens_details/accepted_prediction_tokens",
    ),
    (
        "rejectedPredictionTokens",
        "/completion_tokens_details/rejected_prediction_tokens",
    ),
];

/// `{"openai": {...}}` with the usage details present in `usage`; `None` when there are none.
fn usage_metadata(usage: &Value) -> Option<Value> {
    let details: Map<String, Value> = USAGE_METADATA
        .iter()
        .filter_map(|(name, pointer)| {
            let count = usage.pointer(pointer).filter(|v| v.is_number())?;
            Some(((*name).to_owned(), count.clone()))
        })
        .collect();
    (!details.is_empty()).then(|| json!({ "openai": details }))
}

/// Decodes an RFC 2397 `data:` URL into its bytes and media type.
fn decode_data_url(url: &str) -> Option<(Vec<u8>, String)> {
    let url = url.trim();
    let scheme = url.get(..5)?;
    if !scheme.eq_ignore_ascii_case("data:") {
        return None;
    }
    let (meta, payload) = url.get(5..)?.split_once(',')?;
    let mut params = meta.split(';').map(str::trim);
    let mime_type = match params.next() {
        Some(mime) if !mime.is_empty() => mime.to_ascii_lowercase(),
        _ => "text/plain".to_owned(),
    };
    let is_base64 = params.any(|p| p.eq_ignore_ascii_case("base64"));
    let data = percent_decode(payload);
    let data = if is_base64 {
        decode_base64(&data)?
    } else {
        data
    };
    Some((data, mime_type))
}

/// `%XX` escapes to bytes; anything else, a malformed escape included, is kept as is.
fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let hex = |i: usize| bytes.get(i).and_then(|&b| (b as char).to_digit(16));
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(high), Some(low)) = (hex(i + 1), hex(i + 2))
        {
            // Two hex digits: always below 256.
            out.push((high * 16 + low) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// Base64 as servers really send it: padded or not, standard or URL-safe alphabet, with line
/// breaks.
fn decode_base64(text: &[u8]) -> Option<Vec<u8>> {
    use base64::Engine;
    use base64::alphabet::{STANDARD, URL_SAFE};
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    let text: Vec<u8> = text
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    let config = GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true);
    let alphabet = if text.iter().any(|b| matches!(b, b'-' | b'_')) {
        &URL_SAFE
    } else {
        &STANDARD
    };
    GeneralPurpose::new(alphabet, config).decode(text).ok()
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

fn preview(text: &str) -> String {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// A unique id (`call_…`, `source_…`) for an item the server sent without one.
fn generated_id(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}_{nanos:x}{n:x}")
}

fn message_json(message: &ChatMessage) -> Value {
    match message {
        ChatMessage::System { content } => json!({"role": "system", "content": content}),
        ChatMessage::User { content } => {
            // A lone text part goes as a plain string: older local servers accept nothing else.
            let content = match content.as_slice() {
                [ContentPart::Text(text)] => Value::from(text.clone()),
                parts => parts.iter().map(content_part_json).collect(),
            };
            json!({"role": "user", "content": content})
        }
        ChatMessage::Assistant {
            content,
            tool_calls,
        } => {
            // An empty string rather than null: several compatible servers reject null content.
            let mut msg =
                json!({"role": "assistant", "content": content.clone().unwrap_or_default()});
            if !tool_calls.is_empty() {
                msg["tool_calls"] = tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        })
                    })
                    .collect();
            }
            msg
        }
        ChatMessage::Tool {
            tool_call_id,
            content,
        } => json!({"role": "tool", "tool_call_id": tool_call_id, "content": content}),
    }
}

fn content_part_json(part: &ContentPart) -> Value {
    match part {
        ContentPart::Text(text) => json!({"type": "text", "text": text}),
        ContentPart::ImageUrl { url, detail } => {
            let mut image = json!({"url": url});
            if let Some(detail) = detail {
                image["detail"] = detail.clone().into();
            }
            json!({"type": "image_url", "image_url": image})
        }
        ContentPart::ImageData { data, mime_type } => {
            json!({"type": "image_url", "image_url": {"url": data_url(mime_type, data)}})
        }
        ContentPart::File {
            data,
            mime_type,
            filename,
        } => match mime_type.as_str() {
            m if m.starts_with("image/") => {
                json!({"type": "image_url", "image_url": {"url": data_url(m, data)}})
            }
            "audio/wav" | "audio/x-wav" | "audio/wave" => {
                json!({"type": "input_audio", "input_audio": {"data": base64(data), "format": "wav"}})
            }
            "audio/mpeg" | "audio/mp3" => {
                json!({"type": "input_audio", "input_audio": {"data": base64(data), "format": "mp3"}})
            }
            m => json!({
                "type": "file",
                "file": {
                    "filename": filename.as_deref().unwrap_or("file"),
                    "file_data": data_url(m, data),
                },
            }),
        },
    }
}

fn data_url(mime_type: &str, data: &[u8]) -> String {
    format!("data:{mime_type};base64,{}", base64(data))
}

/// Standard base64 with padding (RFC 4648 §4).
fn base64(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// Response headers that describe the connection rather than the answer (RFC 9110 §7.6.1).
const HOP_BY_HOP_HEADERS: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "trailers",
    "transfer-encoding",
    "upgrade",
];
/// Cookies may carry session secrets and mean nothing to the caller.
const COOKIE_HEADERS: &[&str] = &["set-cookie", "set-cookie2", "cookie"];

/// The response headers for the metadata: all of them (provider rate limits, request ids…)
/// except hop-by-hop and cookie headers; repeated headers are joined with `, ` as `fetch` does.
fn kept_headers(headers: &HeaderMap) -> BTreeMap<String, String> {
    let mut kept: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let name = name.as_str(); // already lower-case
        if HOP_BY_HOP_HEADERS.contains(&name) || COOKIE_HEADERS.contains(&name) {
            continue;
        }
        // A value that is not text cannot be passed on faithfully, so it is left out.
        let Ok(value) = std::str::from_utf8(value.as_bytes()) else {
            continue;
        };
        kept.entry(name.to_owned())
            .and_modify(|joined| {
                joined.push_str(", ");
                joined.push_str(value);
            })
            .or_insert_with(|| value.to_owned());
    }
    kept
}

/// Exponential backoff: 200 ms, 400 ms, 800 ms, … capped at [`BACKOFF_MAX`].
fn backoff(attempt: u32) -> Duration {
    BACKOFF_BASE
        .saturating_mul(1u32.checked_shl(attempt).unwrap_or(u32::MAX))
        .min(BACKOFF_MAX)
}

/// The provider's requested delay (`retry-after-ms`, `Retry-After` seconds or HTTP date), capped.
fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let delay = if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        Duration::try_from_secs_f64(ms / 1000.0).ok()?
    } else {
        let value = header("retry-after")?;
        match value.parse::<f64>() {
            Ok(secs) => Duration::try_from_secs_f64(secs).ok()?,
            Err(_) => parse_http_date(value)?
                .duration_since(now)
                .unwrap_or(Duration::ZERO),
        }
    };
    Some(delay.min(RETRY_AFTER_MAX))
}

/// Parses an HTTP date in any of RFC 9110's three formats (§5.6.7): IMF-fixdate, RFC 850 and
/// asctime.
fn parse_http_date(value: &str) -> Option<SystemTime> {
    httpdate::parse_http_date(value).ok()
}

/// Maps a failed `send()`; every such failure happened before any response byte.
fn send_error(error: reqwest::Error) -> ModelError {
    let error = error.without_url();
    let text = describe(&error);
    if error.is_timeout() {
        ModelError::Timeout(text)
    } else {
        ModelError::Connect(text)
    }
}

/// A reqwest error with its causes (the useful part, e.g. "connection refused", is a source).
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        // hyper and reqwest often repeat their source's message in their own.
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(chunks: &[Value]) -> Vec<ModelEvent> {
        let mut decoder = ChunkDecoder::new(BTreeMap::new(), Vec::new());
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.on_chunk(chunk, &mut out);
        }
        decoder.finish(&mut out);
        out
    }

    #[test]
    fn finish_reasons_map() {
        assert_eq!(map_finish_reason(Some("stop"), false), FinishReason::Stop);
        assert_eq!(
            map_finish_reason(Some("length"), false),
            FinishReason::Length
        );
        assert_eq!(
            map_finish_reason(Some("content_filter"), false),
            FinishReason::ContentFilter
        );
        assert_eq!(
            map_finish_reason(Some("function_call"), false),
            FinishReason::ToolCalls
        );
        assert_eq!(map_finish_reason(None, true), FinishReason::ToolCalls);
        assert_eq!(map_finish_reason(Some(""), false), FinishReason::Stop);
        assert_eq!(
            map_finish_reason(Some("banana"), false),
            FinishReason::Other
        );
    }

    #[test]
    fn base64_matches_rfc4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (input, expected) in cases {
            assert_eq!(base64(input.as_bytes()), expected);
        }
    }

    #[test]
    fn http_dates_parse_in_all_three_formats() {
        let expected = UNIX_EPOCH + Duration::from_secs(784_111_777);
        for value in [
            "Sun, 06 Nov 1994 08:49:37 GMT",  // IMF-fixdate
            "Sunday, 06-Nov-94 08:49:37 GMT", // RFC 850
            "Sun Nov  6 08:49:37 1994",       // asctime
        ] {
            assert_eq!(parse_http_date(value), Some(expected), "{value}");
        }
        assert!(parse_http_date("garbage").is_none());
        assert!(parse_http_date("Sun, 06 Nov 1994 25:49:37 GMT").is_none());
    }

    #[test]
    fn retry_after_forms_and_cap() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_770);
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h, now), None);
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(2)));
        h.insert(
            "retry-after",
            HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT"),
        );
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(7)));
        h.insert(
            "retry-after",
            HeaderValue::from_static("Sun Nov  6 08:49:37 1994"),
        );
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(7)));
        h.insert("retry-after", HeaderValue::from_static("86400"));
        assert_eq!(retry_after(&h, now), Some(RETRY_AFTER_MAX));
        h.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_millis(150)));
    }

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff(0), Duration::from_millis(200));
        assert_eq!(backoff(2), Duration::from_millis(800));
        assert_eq!(backoff(40), BACKOFF_MAX);
    }

    #[test]
    fn tool_calls_without_index_are_told_apart_by_id() {
        let events = decode(&[
            json!({"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"x","arguments":"{\"q\":"}}]}}]}),
            json!({"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"1}"}}]}}]}),
            json!({"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"y","arguments":{"r":2}}}]}}]}),
        ]);
        let ends: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::ToolCallEnd {
                    index,
                    id,
                    arguments,
                    ..
                } => Some((*index, id.as_str(), arguments.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(ends, [(0, "a", "{\"q\":1}"), (1, "b", "{\"r\":2}")]);
        assert!(matches!(
            events.last(),
            Some(ModelEvent::Finish {
                reason: FinishReason::ToolCalls,
                ..
            })
        ));
    }

    #[test]
    fn missing_tool_call_id_is_generated_and_empty_args_become_object() {
        let events = decode(&[
            json!({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"now"}}]},"finish_reason":"tool_calls"}]}),
        ]);
        let Some(ModelEvent::ToolCallEnd { id, arguments, .. }) = events
            .iter()
            .find(|e| matches!(e, ModelEvent::ToolCallEnd { .. }))
        else {
            panic!("no end event in {events:?}");
        };
        assert!(id.starts_with("call_"));
        assert_eq!(arguments, "{}");
    }

    #[test]
    fn reasoning_is_not_duplicated() {
        let events =
            decode(&[json!({"choices":[{"delta":{"reasoning_content":"hm","reasoning":"hm"}}]})]);
        let reasoning: Vec<_> = events
            .iter()
            .filter(|e| matches!(e, ModelEvent::ReasoningDelta(_)))
            .collect();
        assert_eq!(reasoning, [&ModelEvent::ReasoningDelta("hm".into())]);
    }

    fn options(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn provider_options_map_known_keys_and_copy_the_rest() {
        // (options under "openai", expected body fields)
        let cases = [
            (
                json!({"logitBias": {"50256": -100}}),
                json!({"logit_bias": {"50256": -100}}),
            ),
            (
                json!({"logprobs": true}),
                json!({"logprobs": true, "top_logprobs": 0}),
            ),
            (
                json!({"logprobs": 3}),
                json!({"logprobs": true, "top_logprobs": 3}),
            ),
            (json!({"logprobs": false}), json!({})),
            (json!({"user": "u-1"}), json!({"user": "u-1"})),
            (
                json!({"parallelToolCalls": false}),
                json!({"parallel_tool_calls": false}),
            ),
            (
                json!({"reasoningEffort": "low"}),
                json!({"reasoning_effort": "low"}),
            ),
            (
                json!({"maxCompletionTokens": 99}),
                json!({"max_completion_tokens": 99}),
            ),
            (json!({"store": true}), json!({"store": true})),
            (
                json!({"metadata": {"k": "v"}}),
                json!({"metadata": {"k": "v"}}),
            ),
            (
                json!({"prediction": {"type": "content", "content": "x"}}),
                json!({"prediction": {"type": "content", "content": "x"}}),
            ),
            (
                json!({"serviceTier": "flex"}),
                json!({"service_tier": "flex"}),
            ),
            (json!({"textVerbosity": "low"}), json!({"verbosity": "low"})),
            (
                json!({"promptCacheKey": "k"}),
                json!({"prompt_cache_key": "k"}),
            ),
            (
                json!({"promptCacheOptions": {"a": 1}}),
                json!({"prompt_cache_options": {"a": 1}}),
            ),
            (
                json!({"promptCacheRetention": "24h"}),
                json!({"prompt_cache_retention": "24h"}),
            ),
            (
                json!({"safetyIdentifier": "s"}),
                json!({"safety_identifier": "s"}),
            ),
            (json!({"strictJsonSchema": false}), json!({})),
            (json!({"user": null}), json!({})),
            (
                json!({"top_k": 5, "chat_template_kwargs": {"x": 1}}),
                json!({"top_k": 5, "chat_template_kwargs": {"x": 1}}),
            ),
            // The mapped key wins over a verbatim field of the same name.
            (
                json!({"reasoningEffort": "low", "reasoning_effort": "high"}),
                json!({"reasoning_effort": "low"}),
            ),
        ];
        for (entry, expected) in cases {
            let fields =
                provider_option_fields(&options(json!({ "openai": entry.clone() })), "mock");
            assert_eq!(Value::Object(fields.body), expected, "options {entry}");
        }
        let fields = provider_option_fields(
            &options(json!({"openai": {"strictJsonSchema": false}})),
            "x",
        );
        assert_eq!(fields.strict_json_schema, Some(false));
    }

    #[test]
    fn provider_options_are_merged_by_key_in_order() {
        let all = options(json!({
            "openai": {"user": "openai", "a": 1},
            "openaiCompatible": {"user": "compatible", "b": 1},
            "openai-compatible": {"user": "dashed", "c": 1},
            "my-gateway": {"user": "name", "d": 1},
            "myGateway": {"user": "camel", "e": 1},
            "anthropic": {"user": "other", "thinking": {"type": "enabled"}},
            "ignored": "not an object",
        }));
        let fields = provider_option_fields(&all, "my-gateway");
        assert_eq!(
            Value::Object(fields.body),
            json!({"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "user": "camel"})
        );
        // Without the provider's own entries, the last generic key wins.
        let fields = provider_option_fields(&all, "local");
        assert_eq!(fields.body["user"], json!("dashed"));
        assert!(
            provider_option_fields(&options(json!({"anthropic": {"x": 1}})), "mock")
                .body
                .is_empty()
        );
    }

    #[test]
    fn camel_case_follows_the_reference() {
        for (name, camel) in [
            ("openai", "openai"),
            ("my-gateway", "myGateway"),
            ("my_gateway", "myGateway"),
            ("a-b-c", "aBC"),
            ("trailing-", "trailing-"),
            ("x-1", "x-1"),
        ] {
            assert_eq!(camel_case(name), camel);
        }
    }

    #[test]
    fn headers_keep_all_but_hop_by_hop_and_cookies() {
        let mut h = HeaderMap::new();
        for (name, value) in [
            ("content-type", "text/event-stream"),
            ("x-request-id", "req_1"),
            ("anthropic-ratelimit-requests-remaining", "49"),
            ("set-cookie", "session=secret"),
            ("set-cookie2", "a=b"),
            ("cookie", "c=d"),
            ("connection", "keep-alive"),
            ("keep-alive", "timeout=5"),
            ("proxy-authenticate", "Basic"),
            ("proxy-authorization", "Basic x"),
            ("te", "trailers"),
            ("trailer", "x-checksum"),
            ("trailers", "x"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "h2c"),
        ] {
            h.append(name, HeaderValue::from_static(value));
        }
        h.append("vary", HeaderValue::from_static("origin"));
        h.append("vary", HeaderValue::from_static("accept"));
        let kept = kept_headers(&h);
        let expected: BTreeMap<String, String> = [
            ("anthropic-ratelimit-requests-remaining", "49"),
            ("content-type", "text/event-stream"),
            ("vary", "origin, accept"),
            ("x-request-id", "req_1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(kept, expected);
    }

    #[test]
    fn data_urls_decode() {
        let ok = [
            ("data:image/png;base64,Zm9v", b"foo".as_slice(), "image/png"),
            ("DATA:Image/PNG;BASE64,Zm9vYg", b"foob", "image/png"),
            ("data:image/webp;base64,Zm9v\nYmFy", b"foobar", "image/webp"),
            (
                "data:application/octet-stream;base64,-_8=",
                &[0xfb, 0xff],
                "application/octet-stream",
            ),
            ("data:,a%20b", b"a b", "text/plain"),
            ("data:text/plain;charset=utf-8,%zz", b"%zz", "text/plain"),
        ];
        for (url, data, mime) in ok {
            assert_eq!(
                decode_data_url(url),
                Some((data.to_vec(), mime.to_owned())),
                "{url}"
            );
        }
        for bad in [
            "https://example.com/a.png",
            "data:image/png;base64",
            "data:image/png;base64,@@@",
            "dat",
            "",
        ] {
            assert_eq!(decode_data_url(bad), None, "{bad}");
        }
    }

    #[test]
    fn usage_metadata_names_the_details_present() {
        assert_eq!(usage_metadata(&json!({"prompt_tokens": 1})), None);
        assert_eq!(
            usage_metadata(&json!({"prompt_tokens_details": {"cached_tokens": null}})),
            None
        );
        assert_eq!(
            usage_metadata(&json!({
                "prompt_tokens_details": {"cached_tokens": 5, "audio_tokens": 0},
                "completion_tokens_details": {
                    "reasoning_tokens": 2,
                    "accepted_prediction_tokens": 3,
                    "rejected_prediction_tokens": 4,
                },
            })),
            Some(json!({"openai": {
                "cachedPromptTokens": 5,
                "reasoningTokens": 2,
                "acceptedPredictionTokens": 3,
                "rejectedPredictionTokens": 4,
            }}))
        );
    }

    #[test]
    fn annotations_images_and_provider_warnings_are_decoded() {
        let citation = json!({"type": "url_citation", "url_citation": {
            "url": "https://a.example", "title": "A", "start_index": 0, "end_index": 3,
        }});
        let events = decode(&[
            json!({"warnings": ["w1", {"message": "w2"}, {"type": "other"}], "choices": []}),
            // Repeated warnings and annotations are reported once.
            json!({"warnings": ["w1"], "choices": [{"delta": {"annotations": [citation]}}]}),
            json!({"choices": [{"delta": {"annotations": [
                citation,
                {"type": "url_citation", "url_citation": {"url": "https://b.example"}},
                {"type": "file_citation", "file_citation": {"file_id": "f"}},
                {"type": "url_citation", "url_citation": {"title": "no url"}},
            ]}}]}),
            json!({"choices": [{"delta": {"images": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,Zm9v"}},
                {"type": "image_url", "image_url": {"url": "https://img.example/x.png"}},
                {"type": "image_url"},
            ]}}]}),
        ]);
        let warnings: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::Warning(w) => Some(w.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(warnings.len(), 5, "{warnings:?}");
        assert_eq!(&warnings[..3], ["w1", "w2", r#"{"type":"other"}"#]);
        assert!(
            warnings[3].contains("https://img.example/x.png"),
            "{warnings:?}"
        );
        assert!(warnings[4].contains("without a URL"), "{warnings:?}");
        let sources: Vec<(&str, &str, &str)> = events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::Source {
                    id,
                    source_type,
                    url,
                    title,
                } => {
                    assert!(id.starts_with("source_"), "{id}");
                    Some((source_type.as_str(), url.as_str(), title.as_str()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            sources,
            [
                ("url", "https://a.example", "A"),
                ("url", "https://b.example", "")
            ]
        );
        let files: Vec<_> = events
            .iter()
            .filter(|e| matches!(e, ModelEvent::File { .. }))
            .collect();
        assert_eq!(
            files,
            [&ModelEvent::File {
                data: b"foo".to_vec(),
                mime_type: "image/png".into()
            }]
        );
    }

    #[test]
    fn request_warnings_follow_the_metadata() {
        let mut decoder = ChunkDecoder::new(BTreeMap::new(), vec!["ignored".into()]);
        let mut out = Vec::new();
        decoder.finish(&mut out);
        assert!(matches!(out[0], ModelEvent::ResponseMetadata { .. }));
        assert_eq!(out[1], ModelEvent::Warning("ignored".into()));
    }

    #[test]
    fn metadata_comes_first_even_for_an_empty_stream() {
        let events = decode(&[]);
        assert!(matches!(
            events[0],
            ModelEvent::ResponseMetadata { id: None, .. }
        ));
        assert_eq!(
            events[1],
            ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage: Usage::default(),
                provider_metadata: None,
            }
        );
    }
}
