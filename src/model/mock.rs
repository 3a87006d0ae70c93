//! A scripted, OpenAI-compatible HTTP server for tests, demos and benchmarks.
//!
//! It speaks real HTTP on 127.0.0.1, answers `POST /v1/chat/completions` (streamed or not,
//! as the request's `stream` asks), `POST /v1/embeddings` (deterministic vectors, see
//! `mock/embeddings.rs`) and `GET /v1/models`, records every request, and replays
//! scripted replies in FIFO order. With an empty script it echoes the last user message, with
//! no artificial delay, so it can back a demo or a benchmark.
//!
//! Usage numbers are deterministic: input tokens = 10 × the request's message count, output
//! tokens = the number of streamed deltas (text pieces or tool-argument fragments).
//!
//! [`MockReply::Rich`] ([`MockRich`]) also scripts what a provider may attach to an answer:
//! response headers, `url_citation` annotations, generated images (OpenRouter's `images`),
//! usage details and top-level `warnings`.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use bytes::Bytes;
use http::{HeaderMap, StatusCode, header};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

mod embeddings;

pub use embeddings::{DEFAULT_DIMENSIONS as MOCK_EMBEDDING_DIMENSIONS, mock_embedding};

/// The `created` timestamp of every mock response (fixed, so outputs are reproducible).
const CREATED: i64 = 1_700_000_000;

/// One scripted answer of [`MockOpenAi`].
#[derive(Debug, Clone, PartialEq)]
pub enum MockReply {
    /// Text streamed one word per delta, finish `stop`, with usage.
    Text(String),
    /// Tool calls (name, arguments) with arguments streamed in interleaved fragments, finish `tool_calls`.
    ToolCalls(Vec<(String, Value)>),
    /// An HTTP error with this status and body, and a `Retry-After` header (seconds) when set.
    Error {
        /// The HTTP status code.
        status: u16,
        /// The response body, sent as is.
        body: String,
        /// `Retry-After` in seconds.
        retry_after: Option<u64>,
    },
    /// Like `Text`, waiting `delay_per_delta` before each delta and before ending the body.
    Slow {
        /// The text to stream.
        text: String,
        /// Pause before each delta.
        delay_per_delta: Duration,
    },
    /// Exact SSE data payloads, each sent as `data: …` + blank line; nothing is added.
    Raw(Vec<String>),
    /// Text and/or tool calls with extras (headers, sources, images, usage details, warnings).
    Rich(Box<MockRich>),
}

impl From<MockRich> for MockReply {
    fn from(rich: MockRich) -> Self {
        Self::Rich(Box::new(rich))
    }
}

/// A scripted answer with the extras a provider may attach, built step by step:
///
/// ```
/// # use agentd::model::{MockReply, MockRich, MockUsageDetails};
/// let reply: MockReply = MockRich::text("See the docs")
///     .header("x-request-id", "req_42")
///     .source("https://example.com/docs", "Docs")
///     .image("image/png", b"\x89PNG")
///     .usage_details(MockUsageDetails { cached_tokens: Some(8), ..Default::default() })
///     .warning(serde_json::json!("model deprecated"))
///     .into();
/// ```
///
/// Streamed, in order: a first chunk carrying `warnings` at top level, the text one word per
/// delta, the tool calls as [`MockReply::ToolCalls`] streams them, one delta with every source
/// as `annotations`, one delta with every image as `images`, the finish (`tool_calls` when there
/// are calls, else `stop`), the usage chunk. Not streamed (`stream: false`): the same in one
/// `chat.completion`, extras on the message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MockRich {
    /// The answer text, streamed one word per delta; empty for none.
    pub text: String,
    /// Tool calls (name, arguments), after the text.
    pub tool_calls: Vec<(String, Value)>,
    /// Response headers (any case); each name replaces the mock's default header of that name,
    /// and a name given twice is sent twice.
    pub headers: Vec<(String, String)>,
    /// Sources (url, title), sent as `url_citation` annotations spanning the whole text.
    pub sources: Vec<(String, String)>,
    /// Image URLs as sent in `images[].image_url.url` (see [`MockRich::image`] for `data:`).
    pub images: Vec<String>,
    /// The usage details to report; `None`: the mock's usual zero cached and reasoning tokens.
    pub usage_details: Option<MockUsageDetails>,
    /// The top-level `warnings` array of the first chunk (strings or `{"message": …}`).
    pub warnings: Vec<Value>,
}

impl MockRich {
    /// An answer with this text.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// Adds a tool call.
    pub fn tool_call(mut self, name: impl Into<String>, arguments: Value) -> Self {
        self.tool_calls.push((name.into(), arguments));
        self
    }

    /// Adds a response header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Adds a `url_citation` source.
    pub fn source(mut self, url: impl Into<String>, title: impl Into<String>) -> Self {
        self.sources.push((url.into(), title.into()));
        self
    }

    /// Adds a generated image, sent as a base64 `data:` URL.
    pub fn image(mut self, mime_type: &str, data: &[u8]) -> Self {
        use base64::Engine;
        let data = base64::engine::general_purpose::STANDARD.encode(data);
        self.images.push(format!("data:{mime_type};base64,{data}"));
        self
    }

    /// Adds a generated image with this URL exactly (e.g. an undecodable one).
    pub fn image_url(mut self, url: impl Into<String>) -> Self {
        self.images.push(url.into());
        self
    }

    /// Sets the usage details; unset fields are left out of the usage object.
    pub fn usage_details(mut self, details: MockUsageDetails) -> Self {
        self.usage_details = Some(details);
        self
    }

    /// Adds a provider warning (a string, or an object with a `message`).
    pub fn warning(mut self, warning: Value) -> Self {
        self.warnings.push(warning);
        self
    }
}

/// Usage details of a [`MockRich`] answer; each set field is sent, each unset one left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MockUsageDetails {
    /// `prompt_tokens_details.cached_tokens`.
    pub cached_tokens: Option<u64>,
    /// `completion_tokens_details.reasoning_tokens`.
    pub reasoning_tokens: Option<u64>,
    /// `completion_tokens_details.accepted_prediction_tokens`.
    pub accepted_prediction_tokens: Option<u64>,
    /// `completion_tokens_details.rejected_prediction_tokens`.
    pub rejected_prediction_tokens: Option<u64>,
}

impl MockUsageDetails {
    /// The `*_tokens_details` fields of a usage object.
    fn fields(&self) -> serde_json::Map<String, Value> {
        let group = |fields: &[(&str, Option<u64>)]| {
            let group: serde_json::Map<String, Value> = fields
                .iter()
                .filter_map(|(name, n)| Some(((*name).to_owned(), Value::from((*n)?))))
                .collect();
            (!group.is_empty()).then_some(Value::Object(group))
        };
        let prompt = group(&[("cached_tokens", self.cached_tokens)]);
        let completion = group(&[
            ("reasoning_tokens", self.reasoning_tokens),
            (
                "accepted_prediction_tokens",
                self.accepted_prediction_tokens,
            ),
            (
                "rejected_prediction_tokens",
                self.rejected_prediction_tokens,
            ),
        ]);
        [
            ("prompt_tokens_details", prompt),
            ("completion_tokens_details", completion),
        ]
        .into_iter()
        .filter_map(|(name, group)| Some((name.to_owned(), group?)))
        .collect()
    }
}

/// A running mock server; dropped or [`shut down`](Self::shutdown) to stop it.
pub struct MockOpenAi {
    addr: SocketAddr,
    state: Arc<MockState>,
    task: Option<JoinHandle<()>>,
}

/// Computes the reply to a request when the script is empty.
pub type Fallback = Arc<dyn Fn(&Value) -> MockReply + Send + Sync>;

struct MockState {
    script: Mutex<VecDeque<MockReply>>,
    fallback: Mutex<Option<Fallback>>,
    recording: std::sync::atomic::AtomicBool,
    requests: Mutex<Vec<(Value, BTreeMap<String, String>)>>,
    disconnects: AtomicUsize,
    connections: AtomicUsize,
    served: AtomicU64,
    embeddings: Mutex<embeddings::EmbeddingsState>,
    /// Ends the server and any still-running slow stream.
    shutdown: CancellationToken,
}

impl MockState {
    fn script(&self) -> MutexGuard<'_, VecDeque<MockReply>> {
        // A test that panicked while holding the lock must not hide its own failure behind ours.
        self.script.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn requests(&self) -> MutexGuard<'_, Vec<(Value, BTreeMap<String, String>)>> {
        self.requests.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl MockOpenAi {
    /// Starts the server on an ephemeral port of 127.0.0.1.
    pub async fn start() -> std::io::Result<Self> {
        Self::start_on(SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Starts the server on `addr`.
    pub async fn start_on(addr: SocketAddr) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(MockState {
            script: Mutex::new(VecDeque::new()),
            fallback: Mutex::new(None),
            recording: std::sync::atomic::AtomicBool::new(true),
            requests: Mutex::new(Vec::new()),
            disconnects: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            served: AtomicU64::new(0),
            embeddings: Mutex::default(),
            shutdown: CancellationToken::new(),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .route("/v1/embeddings", post(embeddings::embeddings))
            .route("/v1/models", get(models))
            .fallback(not_found)
            .with_state(state.clone());
        let shutdown = state.shutdown.clone();
        let counter = state.clone();
        let listener = listener.tap_io(move |tcp| {
            counter.connections.fetch_add(1, Ordering::SeqCst);
            // Small SSE writes must not wait for delayed ACKs (40 ms each otherwise).
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            let server = axum::serve(listener, app)
                .with_graceful_shutdown(async move { shutdown.cancelled().await });
            if let Err(error) = server.await {
                tracing::warn!(%error, "mock OpenAI server stopped");
            }
        });
        Ok(Self {
            addr,
            state,
            task: Some(task),
        })
    }

    /// Replies computed from each request once the script is empty (instead of the echo).
    pub fn set_fallback(&self, fallback: Fallback) {
        *self
            .state
            .fallback
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(fallback);
    }

    /// Turns request recording off (long benchmarks) or on.
    pub fn set_recording(&self, on: bool) {
        self.state.recording.store(on, Ordering::SeqCst);
    }

    /// The API root to configure a provider with: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues a reply for a future request.
    pub fn push(&self, reply: MockReply) {
        self.state.script().push_back(reply);
    }

    /// Every chat request body received, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.state
            .requests()
            .iter()
            .map(|(body, _)| body.clone())
            .collect()
    }

    /// The headers of every chat request received (lower-case names), in order.
    pub fn request_headers(&self) -> Vec<BTreeMap<String, String>> {
        self.state
            .requests()
            .iter()
            .map(|(_, h)| h.clone())
            .collect()
    }

    /// How many streamed replies ended because the client went away.
    pub fn disconnects(&self) -> usize {
        self.state.disconnects.load(Ordering::SeqCst)
    }

    /// How many TCP connections the server accepted (to check connection reuse).
    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    /// Stops the server, ending any open stream.
    pub async fn shutdown(mut self) {
        self.state.shutdown.cancel();
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}

impl std::fmt::Debug for MockOpenAi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockOpenAi")
            .field("base_url", &self.base_url())
            .finish_non_exhaustive()
    }
}

impl Drop for MockOpenAi {
    fn drop(&mut self) {
        self.state.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// A planner that needs no model: with the task tools offered and no tool result yet, it writes
/// the comma-separated items of the last user message as a task list; afterwards it answers
/// with a summary. Two steps per run: the shape of a typical planning turn (and the benchmark).
/// Offered a sub-agent (`agent-{key}`) instead, it first hands the prompt to the first one.
pub fn planner_reply(request: &Value) -> MockReply {
    let Some((prompt, messages)) = last_prompt(request) else {
        return MockReply::Text("Nothing to plan.".to_owned());
    };
    let answered = messages.iter().any(|m| m["role"] == "tool");
    let sub_agent = request["tools"].as_array().and_then(|tools| {
        tools
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .find(|name| name.starts_with("agent-"))
    });
    if let (Some(name), false) = (sub_agent, answered) {
        return MockReply::ToolCalls(vec![(name.to_owned(), json!({ "prompt": prompt }))]);
    }
    let offers_tasks = request["tools"]
        .as_array()
        .is_some_and(|tools| tools.iter().any(|t| t["function"]["name"] == "task_write"));
    if !offers_tasks || answered {
        return MockReply::Text(format!("Planned: {prompt}"));
    }
    let tasks: Vec<Value> = prompt
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .enumerate()
        .map(|(i, item)| {
            json!({
                "content": item,
                "status": if i == 0 { "in_progress" } else { "pending" },
                "activeForm": format!("Working on {item}"),
            })
        })
        .collect();
    MockReply::ToolCalls(vec![("task_write".to_owned(), json!({ "tasks": tasks }))])
}

async fn models() -> Response {
    json_response(
        StatusCode::OK,
        &json!({"object": "list", "data": [{"id": "mock-model", "object": "model", "owned_by": "agentd"}]}),
    )
}

async fn not_found() -> Response {
    error_response(StatusCode::NOT_FOUND, "no such route on the mock server")
}

async fn chat_completions(
    State(state): State<Arc<MockState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error_response(StatusCode::BAD_REQUEST, &format!("invalid JSON body: {e}"));
        }
    };
    let header_map = headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    if state.recording.load(Ordering::SeqCst) {
        state.requests().push((request.clone(), header_map));
    }
    let n = state.served.fetch_add(1, Ordering::SeqCst) + 1;
    let scripted = state.script().pop_front();
    let reply = scripted.unwrap_or_else(|| {
        let fallback = state
            .fallback
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match fallback {
            Some(reply) => reply(&request),
            None => MockReply::Text(format!("echo: {}", last_user_text(&request))),
        }
    });

    let mut plan = match reply {
        MockReply::Error {
            status,
            body,
            retry_after,
        } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = Response::builder()
                .status(status)
                .header(header::CONTENT_TYPE, "application/json")
                .header("x-request-id", format!("req_mock_{n}"));
            if let Some(secs) = retry_after {
                response = response.header(header::RETRY_AFTER, secs.to_string());
            }
            return finish_response(response, Body::from(body));
        }
        MockReply::Raw(payloads) => {
            let frames = payloads
                .into_iter()
                .map(|p| (Duration::ZERO, format!("data: {p}\n\n")))
                .collect();
            return sse_response(&state, n, frames, Duration::ZERO);
        }
        MockReply::Text(text) => Plan::text(&text, Duration::ZERO),
        MockReply::Slow {
            text,
            delay_per_delta,
        } => Plan::text(&text, delay_per_delta),
        MockReply::ToolCalls(calls) => Plan::tool_calls(n, &calls),
        MockReply::Rich(rich) => Plan::rich(n, *rich),
    };

    let ctx = ReplyContext::new(&request, n);
    let headers = std::mem::take(&mut plan.headers);
    if request.get("stream") == Some(&Value::Bool(true)) {
        let include_usage =
            request.pointer("/stream_options/include_usage") == Some(&Value::Bool(true));
        // A slow reply also lingers before ending its body, as a slow network would.
        let tail = plan.delay;
        let frames = plan.sse_frames(&ctx, include_usage);
        with_headers(sse_response(&state, n, frames, tail), &headers)
    } else {
        with_headers(
            json_response(StatusCode::OK, &plan.completion(&ctx)),
            &headers,
        )
    }
}

/// Applies scripted headers: each name replaces the defaults of that name.
fn with_headers(mut response: Response, headers: &[(String, String)]) -> Response {
    let mut parsed = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        match (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_str(value),
        ) {
            (Ok(name), Ok(value)) => parsed.push((name, value)),
            // A broken script should fail its test loudly rather than be half-applied.
            _ => {
                return error_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!("invalid scripted header {name:?}: {value:?}"),
                );
            }
        }
    }
    let map = response.headers_mut();
    for (name, _) in &parsed {
        map.remove(name);
    }
    for (name, value) in parsed {
        map.append(name, value);
    }
    response
}

/// The text of the last user message (string content or text parts).
fn last_user_text(request: &Value) -> String {
    request
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| {
            m.iter()
                .rev()
                .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        })
        .map(message_text)
        .unwrap_or_default()
}

/// The text of a chat message: its string content, or its text parts joined by spaces.
/// The text of the request's last user message (task-list signals are user messages too, but
/// not the user speaking) and the messages after it: this turn so far.
pub(super) fn last_prompt(request: &Value) -> Option<(String, &[Value])> {
    let messages = request["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let is_prompt = |m: &Value| {
        let text = message_text(m);
        m["role"] == "user"
            && !text.starts_with("<current-task-list")
            && !text.starts_with("<task-list-update")
    };
    let turn = messages.iter().rposition(is_prompt)?;
    Some((message_text(&messages[turn]), &messages[turn + 1..]))
}

pub(super) fn message_text(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// Per-request values shared by every chunk of a reply.
struct ReplyContext {
    id: String,
    model: Value,
    input_tokens: u64,
}

impl ReplyContext {
    fn new(request: &Value, n: u64) -> Self {
        let messages = request
            .get("messages")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        Self {
            id: format!("chatcmpl-mock-{n}"),
            model: request
                .get("model")
                .cloned()
                .unwrap_or_else(|| "mock-model".into()),
            input_tokens: messages as u64 * 10,
        }
    }

    fn chunk(&self, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": self.model,
            "choices": choices,
        })
    }

    fn usage(&self, output_tokens: u64, details: Option<&MockUsageDetails>) -> Value {
        let mut usage = json!({
            "prompt_tokens": self.input_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": self.input_tokens + output_tokens,
        });
        let details = details.copied().unwrap_or(MockUsageDetails {
            cached_tokens: Some(0),
            reasoning_tokens: Some(0),
            ..MockUsageDetails::default()
        });
        if let Some(usage) = usage.as_object_mut() {
            usage.extend(details.fields());
        }
        usage
    }
}

/// What a text or tool-call reply streams, independent of the wire form.
struct Plan {
    /// `delta` objects, in order.
    deltas: Vec<Value>,
    /// Deltas that count as output tokens.
    output_tokens: u64,
    delay: Duration,
    finish_reason: &'static str,
    /// The whole message, for a non-streamed answer.
    message: Value,
    /// Scripted response headers.
    headers: Vec<(String, String)>,
    /// Top-level `warnings` of the first chunk (or of the completion).
    warnings: Vec<Value>,
    /// `None`: the default details.
    usage_details: Option<MockUsageDetails>,
}

impl Plan {
    fn text(text: &str, delay: Duration) -> Self {
        let deltas: Vec<Value> = text
            .split_inclusive(' ')
            .map(|word| json!({"content": word}))
            .collect();
        Self {
            output_tokens: deltas.len() as u64,
            deltas,
            delay,
            finish_reason: "stop",
            message: json!({"role": "assistant", "content": text}),
            headers: Vec::new(),
            warnings: Vec::new(),
            usage_details: None,
        }
    }

    /// First the header fragment of every call (id, name), then the arguments in three
    /// fragments per call, interleaved across calls, as parallel tool calls may arrive.
    fn tool_calls(n: u64, calls: &[(String, Value)]) -> Self {
        let ids: Vec<String> = (0..calls.len()).map(|i| format!("call_{n}_{i}")).collect();
        let mut deltas = Vec::new();
        let mut fragments = Vec::new();
        for (i, (name, args)) in calls.iter().enumerate() {
            deltas.push(json!({"tool_calls": [{
                "index": i, "id": ids[i], "type": "function",
                "function": {"name": name, "arguments": ""},
            }]}));
            fragments.push(split_in_three(&args.to_string()));
        }
        let mut output_tokens = 0;
        for round in 0..3 {
            for (i, pieces) in fragments.iter().enumerate() {
                if let Some(piece) = pieces.get(round) {
                    output_tokens += 1;
                    deltas.push(
                        json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                    );
                }
            }
        }
        let tool_calls: Vec<Value> = calls
            .iter()
            .zip(&ids)
            .map(|((name, args), id)| {
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}})
            })
            .collect();
        Self {
            deltas,
            output_tokens,
            delay: Duration::ZERO,
            finish_reason: "tool_calls",
            message: json!({"role": "assistant", "content": null, "tool_calls": tool_calls}),
            headers: Vec::new(),
            warnings: Vec::new(),
            usage_details: None,
        }
    }

    /// Text, then tool calls, then one delta of annotations and one of images.
    fn rich(n: u64, rich: MockRich) -> Self {
        let MockRich {
            text,
            tool_calls,
            headers,
            sources,
            images,
            usage_details,
            warnings,
        } = rich;
        let text_plan = Self::text(&text, Duration::ZERO);
        let mut calls_plan = Self::tool_calls(n, &tool_calls);
        let mut deltas = text_plan.deltas;
        deltas.append(&mut calls_plan.deltas);
        let content = if text.is_empty() {
            Value::Null
        } else {
            Value::from(text.as_str())
        };
        let mut message = json!({"role": "assistant", "content": content});
        if !tool_calls.is_empty() {
            message["tool_calls"] = calls_plan.message["tool_calls"].take();
        }
        let end_index = text.chars().count();
        let annotations: Vec<Value> = sources
            .iter()
            .map(|(url, title)| {
                json!({"type": "url_citation", "url_citation": {
                    "url": url, "title": title, "start_index": 0, "end_index": end_index,
                }})
            })
            .collect();
        let images: Vec<Value> = images
            .iter()
            .map(|url| json!({"type": "image_url", "image_url": {"url": url}}))
            .collect();
        for (name, extra) in [("annotations", annotations), ("images", images)] {
            if !extra.is_empty() {
                deltas.push(json!({ name: extra }));
                message[name] = extra.into();
            }
        }
        Self {
            deltas,
            output_tokens: text_plan.output_tokens + calls_plan.output_tokens,
            delay: Duration::ZERO,
            finish_reason: if tool_calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            },
            message,
            headers,
            warnings,
            usage_details,
        }
    }

    fn sse_frames(self, ctx: &ReplyContext, include_usage: bool) -> Vec<(Duration, String)> {
        let frame = |v: Value| format!("data: {v}\n\n");
        let mut first = ctx.chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]),
        );
        if !self.warnings.is_empty() {
            first["warnings"] = self.warnings.into();
        }
        let mut frames = vec![(Duration::ZERO, frame(first))];
        for delta in self.deltas {
            let chunk = ctx.chunk(json!([{"index": 0, "delta": delta, "finish_reason": null}]));
            frames.push((self.delay, frame(chunk)));
        }
        frames.push((
            Duration::ZERO,
            frame(
                ctx.chunk(json!([{"index": 0, "delta": {}, "finish_reason": self.finish_reason}])),
            ),
        ));
        if include_usage {
            let mut chunk = ctx.chunk(json!([]));
            chunk["usage"] = ctx.usage(self.output_tokens, self.usage_details.as_ref());
            frames.push((Duration::ZERO, frame(chunk)));
        }
        frames.push((Duration::ZERO, "data: [DONE]\n\n".to_owned()));
        frames
    }

    fn completion(self, ctx: &ReplyContext) -> Value {
        let mut completion = json!({
            "id": ctx.id,
            "object": "chat.completion",
            "created": CREATED,
            "model": ctx.model,
            "choices": [{"index": 0, "message": self.message, "finish_reason": self.finish_reason}],
            "usage": ctx.usage(self.output_tokens, self.usage_details.as_ref()),
        });
        if !self.warnings.is_empty() {
            completion["warnings"] = self.warnings.into();
        }
        completion
    }
}

/// Splits text into up to three non-empty pieces at character boundaries.
fn split_in_three(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(3).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// Counts a disconnect when a stream is dropped before its last frame was produced.
struct DisconnectGuard {
    state: Arc<MockState>,
    finished: bool,
}

impl DisconnectGuard {
    /// The stream ended on its own terms.
    fn disarm(&mut self) {
        self.finished = true;
    }
}

impl Drop for DisconnectGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.state.disconnects.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Streams `frames`, each after its delay; then waits `tail` before ending the body.
fn sse_response(
    state: &Arc<MockState>,
    n: u64,
    frames: Vec<(Duration, String)>,
    tail: Duration,
) -> Response {
    let guard = DisconnectGuard {
        state: state.clone(),
        finished: false,
    };
    let shutdown = state.shutdown.clone();
    let frames = frames.into_iter();
    let body = futures::stream::unfold(
        (frames, guard, shutdown),
        move |(mut frames, mut guard, shutdown)| async move {
            let next = frames.next();
            let delay = next.as_ref().map_or(tail, |(delay, _)| *delay);
            if !delay.is_zero() {
                tokio::select! {
                    _ = shutdown.cancelled() => {
                        // The server is stopping: not the client's doing.
                        guard.disarm();
                        return None;
                    }
                    _ = tokio::time::sleep(delay) => {}
                }
            }
            let Some((_, frame)) = next else {
                guard.disarm();
                return None;
            };
            if frames.len() == 0 {
                guard.disarm();
            }
            Some((
                Ok::<_, Infallible>(Bytes::from(frame)),
                (frames, guard, shutdown),
            ))
        },
    );
    let response = Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .header("x-request-id", format!("req_mock_{n}"))
        .header("x-ratelimit-limit-requests", "1000")
        .header("x-ratelimit-remaining-requests", "999")
        .header("openai-processing-ms", "1");
    finish_response(response, Body::from_stream(body))
}

fn json_response(status: StatusCode, value: &Value) -> Response {
    let response = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json");
    finish_response(response, Body::from(value.to_string()))
}

fn error_response(status: StatusCode, message: &str) -> Response {
    json_response(
        status,
        &json!({"error": {"message": message, "type": "invalid_request_error"}}),
    )
}

fn finish_response(builder: http::response::Builder, body: Body) -> Response {
    builder.body(body).unwrap_or_else(|e| {
        // Only reachable with a malformed header, which the values above never are.
        let mut response = Response::new(Body::from(e.to_string()));
        *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        response
    })
}
