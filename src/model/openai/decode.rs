//! Turns `chat.completion.chunk` payloads into [`ModelEvent`]s: the response metadata and the
//! warnings, text and reasoning deltas, tool calls assembled from their fragments, sources and
//! generated files, and the final `Finish` with usage and provider metadata. Pure: no I/O.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::metadata::{decode_data_url, usage_metadata};
use super::preview;
use crate::model::{FinishReason, ModelEvent, Usage};

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
pub(super) struct ChunkDecoder {
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
    pub(super) finish_reason: Option<String>,
    usage: Option<Usage>,
    /// `{"openai": {...}}` from the latest usage report.
    provider_metadata: Option<Value>,
}

impl ChunkDecoder {
    pub(super) fn new(headers: BTreeMap<String, String>, request_warnings: Vec<String>) -> Self {
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

    pub(super) fn on_chunk(&mut self, chunk: &Value, out: &mut Vec<ModelEvent>) {
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
    pub(super) fn finish(&mut self, out: &mut Vec<ModelEvent>) {
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
/// A unique id (`call_…`, `source_…`) for an item the server sent without one.
fn generated_id(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}_{nanos:x}{n:x}")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

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
