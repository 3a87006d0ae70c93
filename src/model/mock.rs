//! A scripted, OpenAI-compatible HTTP server for tests, demos and benchmarks.
//!
//! It speaks real HTTP on 127.0.0.1, answers `POST /v1/chat/completions` (streamed or not,
//! as the request's `stream` asks) and `GET /v1/models`, records every request, and replays
//! scripted replies in FIFO order. With an empty script it echoes the last user message, with
//! no artificial delay, so it can back a demo or a benchmark.
//!
//! Usage numbers are deterministic: input tokens = 10 × the request's message count, output
//! tokens = the number of streamed deltas (text pieces or tool-argument fragments).

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
            shutdown: CancellationToken::new(),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
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
pub fn planner_reply(request: &Value) -> MockReply {
    let messages = request["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    // Task-list signals are user messages too, but not the user speaking.
    let is_prompt = |m: &Value| {
        let text = message_text(m);
        m["role"] == "user"
            && !text.starts_with("<current-task-list")
            && !text.starts_with("<task-list-update")
    };
    let Some(turn) = messages.iter().rposition(is_prompt) else {
        return MockReply::Text("Nothing to plan.".to_owned());
    };
    let prompt = message_text(&messages[turn]);
    let answered = messages[turn + 1..].iter().any(|m| m["role"] == "tool");
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

    let plan = match reply {
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
    };

    let ctx = ReplyContext::new(&request, n);
    if request.get("stream") == Some(&Value::Bool(true)) {
        let include_usage =
            request.pointer("/stream_options/include_usage") == Some(&Value::Bool(true));
        // A slow reply also lingers before ending its body, as a slow network would.
        let tail = plan.delay;
        let frames = plan.sse_frames(&ctx, include_usage);
        sse_response(&state, n, frames, tail)
    } else {
        json_response(StatusCode::OK, &plan.completion(&ctx))
    }
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
fn message_text(message: &Value) -> String {
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

    fn usage(&self, output_tokens: u64) -> Value {
        json!({
            "prompt_tokens": self.input_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": self.input_tokens + output_tokens,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        })
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
        }
    }

    fn sse_frames(self, ctx: &ReplyContext, include_usage: bool) -> Vec<(Duration, String)> {
        let frame = |v: Value| format!("data: {v}\n\n");
        let mut frames = vec![(
            Duration::ZERO,
            frame(ctx.chunk(json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]))),
        )];
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
            chunk["usage"] = ctx.usage(self.output_tokens);
            frames.push((Duration::ZERO, frame(chunk)));
        }
        frames.push((Duration::ZERO, "data: [DONE]\n\n".to_owned()));
        frames
    }

    fn completion(self, ctx: &ReplyContext) -> Value {
        json!({
            "id": ctx.id,
            "object": "chat.completion",
            "created": CREATED,
            "model": ctx.model,
            "choices": [{"index": 0, "message": self.message, "finish_reason": self.finish_reason}],
            "usage": ctx.usage(self.output_tokens),
        })
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
