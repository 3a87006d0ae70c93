//! `token-limiter`, as the reference's TokenLimiterProcessor: as an input processor it trims
//! each model call's prompt to the newest messages that fit (a tool call and its results stay
//! together; memory keeps everything); as an output processor it withholds or aborts the
//! streamed text past the limit, and truncates or aborts the final response.

use serde_json::{Map, Value, json};

use super::{StreamOut, StreamState, Tripwire, tokens};
use crate::agent::message::{Message, Part, Role};
use crate::config::{TokenCountMode, TokenLimitStrategy, TokenLimiterSpec, TokenTrimMode};

/// The processor's id.
const ID: &str = "token-limiter";
/// Per-message overhead.
const TOKENS_PER_MESSAGE: f64 = 3.8;
/// Per-conversation overhead.
const TOKENS_PER_CONVERSATION: f64 = 24.0;
/// Saved for a structured (JSON) tool argument or result.
const JSON_DISCOUNT: f64 = 12.0;
/// An image, whatever its size.
const TOKENS_PER_IMAGE: f64 = 765.0;
/// A file whose size is unknown (by URL).
const TOKENS_PER_MEDIA_FALLBACK: f64 = 258.0;

const NO_MESSAGES: &str =
    "TokenLimiterProcessor: No messages to process. Cannot send LLM a request with no messages.";
const SYSTEM_TOO_BIG: &str = "TokenLimiterProcessor: System messages alone exceed token limit. Requests cannot be completed by removing system messages.";
const NOTHING_FITS: &str = "TokenLimiterProcessor: No messages fit within the remaining token budget. Cannot send LLM a request with no messages.";

fn tripwire(reason: &str, metadata: Option<Map<String, Value>>) -> Tripwire {
    Tripwire {
        metadata: metadata.map(Box::new),
        ..Tripwire::block(ID, reason)
    }
}

/// Which of `prompt` (the conversation after the system messages) one model call keeps:
/// `None` when all of it fits.
pub fn trim_prompt(
    spec: &TokenLimiterSpec,
    system: &[String],
    prompt: &[&Message],
) -> Result<Option<Vec<bool>>, Tripwire> {
    if prompt.is_empty() {
        return Err(tripwire(NO_MESSAGES, None));
    }
    let limit = f64::from(spec.limit);
    let system_tokens: f64 = system
        .iter()
        .map(|s| tokens::estimate(&format!("system{s}")) as f64 + TOKENS_PER_MESSAGE)
        .sum();
    if system_tokens + TOKENS_PER_CONVERSATION >= limit {
        return Err(tripwire(
            SYSTEM_TOO_BIG,
            Some(object(
                json!({"systemTokens": num(system_tokens), "limit": spec.limit}),
            )),
        ));
    }
    let budget = limit - system_tokens - TOKENS_PER_CONVERSATION;
    let groups = groups(prompt);
    let mut keep = vec![false; prompt.len()];
    let mut used = 0.0;
    let mut kept_any = false;
    for group in groups.iter().rev() {
        let cost: f64 = group.clone().map(|i| message_tokens(prompt[i])).sum();
        if used + cost <= budget {
            for i in group.clone() {
                keep[i] = true;
            }
            used += cost;
            kept_any = true;
        } else if spec.trim_mode == TokenTrimMode::Contiguous {
            break;
        }
    }
    if !kept_any {
        return Err(tripwire(
            NOTHING_FITS,
            Some(object(json!({
                "systemTokens": num(system_tokens),
                "limit": spec.limit,
                "remainingBudget": num(budget),
                "messageCount": prompt.len(),
            }))),
        ));
    }
    Ok(keep.contains(&false).then_some(keep))
}

/// A number as JavaScript prints it: whole numbers without a fraction.
fn num(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Index ranges of the prompt: an assistant message with tool calls together with the tool
/// messages right after it that answer them; every other message alone.
fn groups(prompt: &[&Message]) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let mut i = 0;
    while i < prompt.len() {
        let start = i;
        let calls: Vec<&str> = prompt[i]
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::ToolCall { tool_call_id, .. } if prompt[i].role == Role::Assistant => {
                    Some(tool_call_id.as_str())
                }
                _ => None,
            })
            .collect();
        while !calls.is_empty()
            && prompt.get(i + 1).is_some_and(|next| {
                next.role == Role::Tool
                    && next.parts.iter().any(|p| {
                        matches!(p, Part::ToolResult { tool_call_id, .. } if calls.contains(&tool_call_id.as_str()))
                    })
            })
        {
            i += 1;
        }
        i += 1;
        groups.push(start..i);
    }
    groups
}

/// A prompt message's estimate: its role and content as one string, plus the overheads.
fn message_tokens(message: &Message) -> f64 {
    let mut text = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
    .to_owned();
    let mut overhead = TOKENS_PER_MESSAGE;
    let mut media = 0.0;
    for part in &message.parts {
        match part {
            Part::Text { text: t } | Part::Reasoning { text: t } => text.push_str(t),
            Part::ToolCall {
                tool_name, args, ..
            } => {
                text.push_str(tool_name);
                match args {
                    Value::String(raw) => text.push_str(raw),
                    other => {
                        text.push_str(&other.to_string());
                        overhead -= JSON_DISCOUNT;
                    }
                }
            }
            Part::ToolResult { result, .. } => match result {
                Value::String(value) => text.push_str(value),
                other => {
                    text.push_str(&other.to_string());
                    overhead -= JSON_DISCOUNT;
                }
            },
            Part::Image { .. } => media += TOKENS_PER_IMAGE,
            Part::File {
                data, mime_type, ..
            } => {
                media += match data {
                    _ if mime_type.starts_with("image/") => TOKENS_PER_IMAGE,
                    Some(bytes) => (bytes.len() / 4).max(1) as f64,
                    None => TOKENS_PER_MEDIA_FALLBACK,
                }
            }
        }
    }
    tokens::estimate(&text) as f64 + overhead + media
}

/// One streamed text delta: passed on, withheld past the limit (reported once), or a tripwire.
pub(super) fn stream(
    spec: &TokenLimiterSpec,
    state: &mut StreamState,
    text: String,
    out: &mut StreamOut,
) -> Result<Option<String>, Tripwire> {
    let limit = f64::from(spec.limit);
    let count = tokens::estimate(&text) as f64;
    let current = match spec.count_mode {
        TokenCountMode::Cumulative => state.tokens + count,
        TokenCountMode::Part => count,
    };
    state.tokens = match spec.count_mode {
        TokenCountMode::Cumulative => current,
        TokenCountMode::Part => 0.0,
    };
    if current <= limit {
        return Ok(Some(text));
    }
    match spec.strategy {
        TokenLimitStrategy::Abort => Err(tripwire(
            &format!(
                "Token limit of {} exceeded (current: {current})",
                spec.limit
            ),
            None,
        )),
        TokenLimitStrategy::Truncate => {
            if !state.notified {
                state.notified = true;
                out.data.push((
                    "data-token-limit-reached",
                    json!({"processorId": ID, "limit": spec.limit, "tokens": num(current)}),
                ));
            }
            Ok(None)
        }
    }
}

/// The final response: assistant text within the limit, the first part past it truncated
/// (or a tripwire), later parts emptied.
pub fn result(spec: &TokenLimiterSpec, messages: &mut [Message]) -> Result<(), Tripwire> {
    let limit = u64::from(spec.limit);
    let mut used = 0u64;
    for message in messages.iter_mut().filter(|m| m.role == Role::Assistant) {
        for part in &mut message.parts {
            let Part::Text { text } = part else {
                continue;
            };
            let count = tokens::estimate(text);
            if used + count <= limit {
                used += count;
                continue;
            }
            if spec.strategy == TokenLimitStrategy::Abort {
                return Err(tripwire(
                    &format!(
                        "Token limit of {} exceeded (current: {})",
                        spec.limit,
                        used + count
                    ),
                    None,
                ));
            }
            let remaining = limit.saturating_sub(used);
            let cut = if remaining > 0 {
                tokens::slice_to(text, remaining)
            } else {
                String::new()
            };
            used += tokens::estimate(&cut);
            *text = cut;
        }
    }
    Ok(())
}
