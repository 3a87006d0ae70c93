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
//! - `provider_options` are read as the reference reads them (see
//!   `options::provider_option_fields`): the entries under `openai`, `openaiCompatible`,
//!   `openai-compatible` and the provider's own name; other providers' entries are ignored.
//!   They go after agentd's own fields and before `extra_body`, which wins.
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
//!
//! Layout: this file holds the provider (construction, sending with retries and timeouts, the
//! [`ModelProvider`] impl); `request` builds the body, `options` reads `provider_options`,
//! `stream` carries the response body to the caller, `decode` turns chunks into events,
//! `metadata` holds the response extras (headers, usage details, `data:` URLs), `retry` the
//! backoff and `Retry-After` rules, and `embeddings` the `/embeddings` client built on the same
//! connection, auth and retries.
//!
//! [`ModelEvent::Warning`]: super::ModelEvent::Warning
//! [`ModelEvent::Source`]: super::ModelEvent::Source
//! [`ModelEvent::File`]: super::ModelEvent::File

mod decode;
mod embeddings;
mod metadata;
mod options;
mod request;
mod retry;
mod stream;

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use tokio_util::sync::CancellationToken;

use super::sse::SseParser;
use super::{ModelError, ModelProvider, ModelRequest, ModelStream, ProviderConfig};
use decode::ChunkDecoder;
pub use embeddings::OpenAiEmbedder;
use metadata::kept_headers;
use retry::{backoff, retry_after};
use stream::{BodySlot, EventStream, keep_body};

/// How much of an error body is kept in [`ModelError::Http`].
const ERROR_BODY_LIMIT: usize = 2048;

/// A provider speaking the OpenAI Chat Completions streaming protocol.
pub struct OpenAiProvider {
    name: String,
    /// The API root (no trailing slash): the embeddings endpoint hangs off it too.
    base: String,
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
        let mut builder = reqwest::Client::builder()
            .connect_timeout(cfg.connect_timeout)
            .tcp_nodelay(true)
            .user_agent(concat!("agentd/", env!("CARGO_PKG_VERSION")))
            .default_headers(headers);
        if cfg.http2_prior_knowledge {
            builder = builder.http2_prior_knowledge();
        }
        let client = builder.build().map_err(|e| {
            ModelError::Config(format!("provider {:?}: {}", cfg.name, describe(&e)))
        })?;
        Ok(Self {
            endpoint: format!("{base}/chat/completions"),
            base: base.to_owned(),
            name: cfg.name,
            include_usage: cfg.include_usage,
            structured_output: cfg.structured_output,
            idle_timeout: cfg.idle_timeout,
            max_retries: cfg.max_retries,
            client,
        })
    }

    /// Sends the request to `endpoint`, retrying connect errors, 429 and 5xx with backoff.
    async fn send_with_retries(
        &self,
        endpoint: &str,
        body: Bytes,
        max_retries: u32,
        cancel: &CancellationToken,
    ) -> Result<reqwest::Response, ModelError> {
        let mut attempt = 0u32;
        loop {
            let (error, retry_after) = match self.send_once(endpoint, body.clone(), cancel).await {
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
        endpoint: &str,
        body: Bytes,
        cancel: &CancellationToken,
    ) -> Result<reqwest::Response, (ModelError, Option<Duration>)> {
        let send = self
            .client
            .post(endpoint)
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
        tracing::debug!(provider = %self.name, model = %request.model, "model request");
        let mut response = self
            .send_with_retries(&self.endpoint, Bytes::from(body), max_retries, &cancel)
            .await?;

        let headers = kept_headers(response.headers());
        let json_body = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.trim_start().starts_with("application/json"));
        // Header values point into the connection's first read buffer (8 KiB on HTTP/1), which
        // the body is not read into: dropping them frees it while the answer streams.
        *response.headers_mut() = HeaderMap::new();

        let body = BodySlot::new(response);
        let finished = CancellationToken::new();
        let gone = cancel.child_token();
        tokio::spawn(keep_body(
            body.clone(),
            (cancel.clone(), gone.clone()),
            finished.clone(),
        ));

        let state = EventStream {
            body,
            idle_timeout: self.idle_timeout,
            cancel,
            stop_body: gone.drop_guard(),
            finished,
            parser: SseParser::new(),
            decoder: ChunkDecoder::new(headers, warnings),
            include_raw: request.include_raw,
            json_body: json_body.then(Vec::new),
            pending: VecDeque::new(),
            tail: false,
            done: false,
        };
        Ok(futures::stream::unfold(state, |mut state| async move {
            let item = state.next_event().await?;
            Some((item, state))
        })
        .boxed())
    }
}

/// At most 200 characters of `text`, for error messages and warnings that quote the provider.
fn preview(text: &str) -> String {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
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
    crate::error_text::error_chain(error)
}
