//! An agent's webhook: each hook call is POSTed as JSON (`hooks/json.rs`); a 2xx JSON body is
//! the answer. Timeouts, other statuses and unreadable bodies are faults (the webhook's
//! `on_failure` policy applies).

use std::time::Duration;

use async_trait::async_trait;

use super::{HookFault, HookTransport, json};
use crate::config::WebhookConfig;
use crate::pb;

/// Longest response body read from a webhook.
const MAX_BODY: usize = 1024 * 1024;

/// One configured webhook.
pub struct Webhook {
    url: String,
    headers: reqwest::header::HeaderMap,
    http: reqwest::Client,
}

impl Webhook {
    /// Builds a webhook from config; `env:NAME` header values are read now.
    pub fn new(config: &WebhookConfig, http: reqwest::Client) -> Result<Self, String> {
        let mut headers = reqwest::header::HeaderMap::new();
        for (name, value) in &config.headers {
            let value = match value.strip_prefix("env:") {
                Some(var) => std::env::var(var)
                    .map_err(|_| format!("header {name}: environment variable {var} is not set"))?,
                None => value.clone(),
            };
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| format!("header {name:?}: {e}"))?;
            let value = reqwest::header::HeaderValue::from_str(&value)
                .map_err(|e| format!("header {name}: {e}"))?;
            headers.insert(name, value);
        }
        Ok(Self {
            url: config.url.clone(),
            headers,
            http,
        })
    }
}

#[async_trait]
impl HookTransport for Webhook {
    async fn call(
        &self,
        call: pb::HookCall,
        deadline: Duration,
    ) -> Result<pb::HookAnswer, HookFault> {
        let body = json::call_to_json(&call).map_err(HookFault::Failed)?;
        let send = self
            .http
            .post(&self.url)
            .headers(self.headers.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send();
        let exchange = async {
            let mut response = send.await.map_err(|e| HookFault::Failed(e.to_string()))?;
            let status = response.status();
            // Read at most MAX_BODY: a misbehaving webhook cannot make agentd buffer more.
            let mut bytes = Vec::new();
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|e| HookFault::Failed(e.to_string()))?
            {
                if bytes.len() + chunk.len() > MAX_BODY {
                    return Err(HookFault::Failed(format!(
                        "the answer is over {MAX_BODY} bytes"
                    )));
                }
                bytes.extend_from_slice(&chunk);
            }
            if !status.is_success() {
                let text = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
                return Err(HookFault::Failed(format!("HTTP {status}: {text}")));
            }
            if bytes.iter().all(u8::is_ascii_whitespace) {
                return Ok(pb::HookAnswer::default());
            }
            json::answer_from_json(&bytes)
                .map_err(|e| HookFault::Failed(format!("the answer is not a HookAnswer: {e}")))
        };
        let mut answer = tokio::time::timeout(deadline, exchange)
            .await
            .map_err(|_| HookFault::Timeout)??;
        if answer.id.is_empty() {
            answer.id = call.id;
        }
        Ok(answer)
    }
}
