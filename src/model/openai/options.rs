//! `provider_options` as @ai-sdk/openai reads them: which entries count for this provider, and
//! the table mapping the known camelCase keys to body fields (other keys are copied verbatim).

use serde_json::{Map, Value};

/// What the request's provider options contribute.
#[derive(Debug, Default, PartialEq)]
pub(super) struct OptionFields {
    /// Top-level body fields.
    pub(super) body: Map<String, Value>,
    /// Overrides the schema's own `strict` when a `json_schema` response format is sent.
    pub(super) strict_json_schema: Option<bool>,
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
pub(super) fn provider_option_fields(
    options: &Map<String, Value>,
    provider_name: &str,
) -> OptionFields {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
}
