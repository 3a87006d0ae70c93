//! The detectors that ask a model (`moderation`, `prompt-injection-detector`,
//! `language-detector`, `system-prompt-scrubber`, `pii-detector`) against outputs
//! recorded from the reference (`@mastra/core` 1.71.0) for the same inputs and the same
//! detector answers: `tests/reference/detectors.json`, written by
//! `tests/reference/record/detectors.mjs`. The detector model is the scripted
//! OpenAI-compatible server, so the real client carries every call; each case checks what the
//! detector was asked and what became of the messages.

use std::sync::Arc;

use agentd::agent::Agents;
use agentd::agent::message::{Message, Part, Role};
use agentd::agent::processors::{Chain, Processor, Stage, StreamCtx, Tripwire};
use agentd::config::{Config, ProcessorSpec};
use agentd::model::{MockOpenAi, MockReply};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/reference/detectors.json"
    );
    let text = std::fs::read_to_string(path).expect("the recorded fixture is in the repository");
    serde_json::from_str(&text).expect("the fixture is JSON")
}

/// A message's content as text: a string, or its text parts joined.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        parts => parts
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["text"].as_str())
            .collect(),
    }
}

/// A detector model on a scripted server, and the agents that resolve `mock/detector`.
struct Bench {
    mock: MockOpenAi,
    agents: Agents,
}

async fn bench() -> Bench {
    let mock = MockOpenAi::start().await.expect("mock");
    let text = format!(
        "[[providers]]\nname = \"mock\"\nbase_url = \"{}\"\nmax_retries = 0\n",
        mock.base_url()
    );
    let config = Config::from_toml(&text).expect("config");
    let agents = Agents::from_config(&config).expect("agents");
    Bench { mock, agents }
}

impl Bench {
    fn script(&self, answers: &[Value]) {
        for a in answers {
            let reply = if let Some(json) = a.get("json") {
                MockReply::Text(json.to_string())
            } else if let Some(text) = a["text"].as_str() {
                MockReply::Text(text.to_owned())
            } else {
                MockReply::Error {
                    status: 500,
                    body: a["throws"].as_str().unwrap_or("error").to_owned(),
                    retry_after: None,
                }
            };
            self.mock.push(reply);
        }
    }

    /// The user messages of the detector calls made since `from`.
    fn asked(&self, from: usize) -> Vec<String> {
        self.mock.requests()[from..]
            .iter()
            .map(|r| {
                // A blank prompt sends no user message at all.
                let last = r["messages"]
                    .as_array()
                    .and_then(|m| m.last())
                    .filter(|m| m["role"] == "user")
                    .cloned()
                    .unwrap_or(Value::Null);
                content_text(&last["content"])
            })
            .collect()
    }
}

/// The processor from recorded options (camelCase names) with the detector model.
fn processor(kind: &str, options: &Value) -> Processor {
    Processor::build(&spec(kind, options)).expect("builds")
}

/// The spec from recorded options.
fn spec(kind: &str, options: &Value) -> ProcessorSpec {
    let mut o = serde_json::Map::new();
    o.insert("type".into(), json!(kind));
    o.insert("model".into(), json!("mock/detector"));
    for (key, value) in options.as_object().into_iter().flatten() {
        let snake: String = key
            .chars()
            .flat_map(|c| {
                if c.is_ascii_uppercase() {
                    vec!['_', c.to_ascii_lowercase()]
                } else {
                    vec![c]
                }
            })
            .collect();
        // Callbacks and provider options are the reference's JavaScript-only knobs;
        // `preserveOriginal` only shapes the message metadata agentd does not keep.
        if matches!(
            snake.as_str(),
            "on_detection" | "provider_options" | "preserve_original"
        ) {
            continue;
        }
        // `structuredOutputOptions.jsonPromptInjection` is agentd's `json_prompt_injection`.
        // (The language detector has no such option: the reference ignores it there.)
        if snake == "structured_output_options" {
            if let Some(inject) = value
                .get("jsonPromptInjection")
                .filter(|_| kind != "language-detector")
            {
                o.insert("json_prompt_injection".into(), inject.clone());
            }
            continue;
        }
        // The reference treats any error strategy but `strict` as `warn`; agentd's config
        // accepts only the two it documents.
        if snake == "error_strategy" && value != "strict" {
            continue;
        }
        o.insert(snake, value.clone());
    }
    serde_json::from_value(Value::Object(o)).expect("recorded options are processor options")
}

/// A recorded message (`parts` strings are text parts; a bare `content` string is one).
fn message(m: &Value) -> Message {
    let mut texts: Vec<String> = m["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.as_str().map(str::to_owned))
        .collect();
    if texts.is_empty()
        && let Some(content) = m["content"].as_str()
    {
        texts.push(content.to_owned());
    }
    let role = match m["role"].as_str() {
        Some("assistant") => Role::Assistant,
        Some("system") => Role::System,
        _ => Role::User,
    };
    let mut out = Message::new(
        role,
        texts.into_iter().map(|text| Part::Text { text }).collect(),
    );
    out.id = m["id"].as_str().unwrap_or("m").to_owned();
    out
}

fn view(m: &Message) -> (String, Vec<String>) {
    let texts = m
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.clone()),
            _ => None,
        })
        .collect();
    (m.id.clone(), texts)
}

fn check_tripwire(got: &Tripwire, want: &Value, label: &str) {
    let reason = want
        .get("message")
        .or_else(|| want.get("reason"))
        .and_then(Value::as_str)
        .unwrap_or("");
    assert_eq!(got.reason, reason, "{label}");
    assert_eq!(
        got.processor_id,
        want["processorId"].as_str().unwrap_or(""),
        "{label}"
    );
}

/// What the detector was asked in a recorded case (no user message: an empty prompt).
fn recorded_calls(case: &Value) -> Vec<String> {
    case["detectorCalls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["user"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// Runs the message cases of one section (`processInput`, `processOutputResult`, …).
async fn message_cases(b: &Bench, kind: &str, stage: Stage, cases: &[Value]) -> usize {
    let mut ran = 0;
    for case in cases {
        let label = case["name"].as_str().unwrap_or("").to_owned();
        // A message without parts is a JavaScript type error, and one whose text is only in
        // `content.content` has no equivalent: agentd messages are their parts.
        if label == "malformed message" || label.contains("only content.content") {
            continue;
        }
        let p = processor(kind, &case["options"]);
        let detector = p.detector().expect("a detector");
        let input: Vec<Message> = case["input"]
            .as_array()
            .into_iter()
            .flatten()
            .map(message)
            .collect();
        b.script(case["answers"].as_array().map_or(&[][..], Vec::as_slice));
        let before = b.mock.requests().len();
        let mut messages = input.clone();
        let outcome = detector
            .messages(stage, &b.agents, &mut messages, &CancellationToken::new())
            .await;
        assert_eq!(
            b.asked(before),
            recorded_calls(case),
            "{label}: what the detector was asked"
        );
        let result = &case["result"];
        match (outcome, result.get("tripwire")) {
            (Err(trip), Some(want)) => check_tripwire(&trip, want, &label),
            (Ok(()), None) if result["unchanged"] == true => {
                assert_eq!(messages, input, "{label}");
            }
            (Ok(()), None) => {
                let want: Vec<(String, Vec<String>)> = result["messages"]
                    .as_array()
                    .expect("messages")
                    .iter()
                    .map(|m| view(&message(m)))
                    .collect();
                let got: Vec<(String, Vec<String>)> = messages.iter().map(view).collect();
                assert_eq!(got, want, "{label}");
            }
            (got, want) => panic!("{label}: got {got:?}, want {want:?}"),
        }
        ran += 1;
    }
    ran
}

/// Replays the recorded sections of detector `name` (processor type `kind`), each at its
/// stage; returns how many cases ran.
async fn replay(name: &str, kind: &str, sections: &[(&str, Stage)]) -> usize {
    let f = fixture();
    let b = bench().await;
    let mut ran = 0;
    for (section, stage) in sections {
        let cases = f["detectors"][name][section].as_array().expect(section);
        ran += message_cases(&b, kind, *stage, cases).await;
    }
    ran
}

#[tokio::test]
async fn moderation_judges_messages_as_the_reference() {
    let sections = [
        ("processInput", Stage::Input),
        ("processOutputResult", Stage::Result),
        ("errors", Stage::Input),
        ("errorsOutputResult", Stage::Result),
    ];
    let ran = replay("ModerationProcessor", "moderation", &sections).await;
    assert!(ran >= 35, "{ran}");
}

#[tokio::test]
async fn prompt_injection_judges_messages_as_the_reference() {
    let sections = [
        ("processInput", Stage::Input),
        ("errors", Stage::Input),
        ("errorsRewrite", Stage::Input),
    ];
    let ran = replay(
        "PromptInjectionDetector",
        "prompt-injection-detector",
        &sections,
    )
    .await;
    assert!(ran >= 30, "{ran}");
}

#[tokio::test]
async fn language_detection_judges_messages_as_the_reference() {
    let sections = [
        ("processInput", Stage::Input),
        ("errors", Stage::Input),
        ("errorsTranslate", Stage::Input),
    ];
    let ran = replay("LanguageDetector", "language-detector", &sections).await;
    assert!(ran >= 35, "{ran}");
}

#[tokio::test]
async fn the_system_prompt_scrubber_judges_responses_as_the_reference() {
    let sections = [
        ("processOutputResult", Stage::Result),
        ("errors", Stage::Result),
        ("errorsBlock", Stage::Result),
    ];
    let ran = replay("SystemPromptScrubber", "system-prompt-scrubber", &sections).await;
    assert!(ran >= 25, "{ran}");
}

#[tokio::test]
async fn detector_calls_carry_the_reference_prompt_and_schema() {
    let f = fixture();
    let b = bench().await;
    let mut ran = 0;
    for (name, kind) in [
        ("ModerationProcessor", "moderation"),
        ("PromptInjectionDetector", "prompt-injection-detector"),
        ("LanguageDetector", "language-detector"),
        ("SystemPromptScrubber", "system-prompt-scrubber"),
        ("PIIDetector", "pii-detector"),
    ] {
        for case in f["detectors"][name]["calls"].as_array().expect("calls") {
            let label = format!("{name}: {}", case["name"]);
            let (stage, role) = match case["hook"].as_str() {
                Some("processInput") => (Stage::Input, "user"),
                Some("processOutputResult") => (Stage::Result, "assistant"),
                _ => continue,
            };
            let p = processor(kind, &case["options"]);
            b.script(std::slice::from_ref(&case["answer"]));
            let before = b.mock.requests().len();
            let mut messages = vec![message(&json!({
                "id": "m1", "role": role, "parts": [case["text"].clone()]
            }))];
            let outcome = p
                .detector()
                .expect("a detector")
                .messages(stage, &b.agents, &mut messages, &CancellationToken::new())
                .await;
            assert!(outcome.is_ok(), "{label}");
            let sent = &b.mock.requests()[before];
            let want = &case["calls"][0]["options"];
            let roles: Vec<(&str, String)> = sent["messages"]
                .as_array()
                .expect("messages")
                .iter()
                .map(|m| {
                    (
                        m["role"].as_str().unwrap_or(""),
                        content_text(&m["content"]),
                    )
                })
                .collect();
            let want_roles: Vec<(&str, String)> = want["prompt"]
                .as_array()
                .expect("prompt")
                .iter()
                .map(|m| {
                    // A text recorded once is referenced by its key.
                    let text = match m["content"]["sameAs"].as_str() {
                        Some(key) => f["detectors"][name][key].as_str().unwrap_or("").to_owned(),
                        None => content_text(&m["content"]),
                    };
                    (m["role"].as_str().unwrap_or(""), text)
                })
                .collect();
            assert_eq!(roles, want_roles, "{label}");
            let temperature = want.get("temperature").map(|t| json!(t.as_f64()));
            assert_eq!(sent.get("temperature").cloned(), temperature, "{label}");
            match want.get("responseFormat") {
                Some(format) => {
                    // A schema recorded once is referenced by the case that sent it first.
                    let schema = match format["schema"]["sameAs"].as_str() {
                        Some(first) => cases_schema(&f["detectors"][name]["calls"], first),
                        None => format["schema"].clone(),
                    };
                    assert_eq!(
                        sent["response_format"]["json_schema"]["schema"], schema,
                        "{label}"
                    );
                }
                None => assert!(sent.get("response_format").is_none(), "{label}"),
            }
            ran += 1;
        }
    }
    assert!(ran >= 20, "{ran}");
}

/// The schema the recorded case `name` sent.
fn cases_schema(calls: &Value, name: &str) -> Value {
    calls
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == name)
        .map(|c| c["calls"][0]["options"]["responseFormat"]["schema"].clone())
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn detectors_judge_a_stream_as_the_reference() {
    let f = fixture();
    let b = bench().await;
    for (name, kind) in [
        ("ModerationProcessor", "moderation"),
        ("SystemPromptScrubber", "system-prompt-scrubber"),
    ] {
        let cases = f["detectors"][name]["processOutputStream"]
            .as_array()
            .expect("cases");
        stream_cases(&b, kind, cases).await;
    }
}

async fn stream_cases(b: &Bench, kind: &str, cases: &[Value]) {
    for case in cases {
        let label = format!("{kind}: {}", case["name"]);
        let spec = spec(kind, &case["options"]);
        let chain = Arc::new(Chain::build(&[], &[spec], None).expect("chain"));
        let mut stream = chain.stream();
        b.script(case["answers"].as_array().map_or(&[][..], Vec::as_slice));
        let before = b.mock.requests().len();
        let cancel = CancellationToken::new();
        let ctx = StreamCtx {
            agents: &b.agents,
            cancel: &cancel,
        };
        // The recorded chunks: text-start, the deltas, text-end, finish.
        let mut emitted: Vec<Value> = Vec::new();
        let mut parts: Vec<Option<String>> = vec![None];
        parts.extend(
            case["deltas"]
                .as_array()
                .expect("deltas")
                .iter()
                .map(|d| d.as_str().map(str::to_owned)),
        );
        parts.extend([None, None]);
        for (i, part) in parts.into_iter().enumerate() {
            let step = match part {
                Some(text) => stream.delta(text, &ctx).await,
                None => stream.flush(&ctx).await,
            };
            match step {
                Ok(out) => {
                    emitted.extend(out.texts.into_iter().map(|t| json!({"from": i, "text": t})))
                }
                Err(trip) => emitted.push(json!({"from": i, "tripwire": trip.reason})),
            }
        }
        let want: Vec<Value> = case["emitted"]
            .as_array()
            .expect("emitted")
            .iter()
            .filter_map(|e| {
                if let Some(text) = e.get("text") {
                    Some(json!({"from": e["from"], "text": text}))
                } else {
                    e.get("tripwire")
                        .map(|t| json!({"from": e["from"], "tripwire": t["reason"]}))
                }
            })
            .collect();
        assert_eq!(emitted, want, "{label}");
        assert_eq!(b.asked(before), recorded_calls(case), "{label}");
    }
}

#[tokio::test]
async fn pii_detection_judges_messages_as_the_reference() {
    let sections = [
        ("processInput", Stage::Input),
        ("processOutputResult", Stage::Result),
        ("errors", Stage::Input),
        ("errorsBlock", Stage::Input),
    ];
    let ran = replay("PIIDetector", "pii-detector", &sections).await;
    assert!(ran >= 40, "{ran}");
}

#[tokio::test]
async fn pii_redaction_masks_hashes_and_replaces_as_the_reference() {
    let f = fixture();
    let b = bench().await;
    let d = &f["detectors"]["PIIDetector"];
    // Each value alone, detected whole: the computed redaction is the value's redaction.
    for row in d["maskTable"].as_array().expect("mask table") {
        let value = row["value"].as_str().expect("value");
        let units = value.encode_utf16().count();
        for (options, want) in [
            (json!({}), &row["mask"]),
            (json!({"preserveFormat": false}), &row["maskNoFormat"]),
            (json!({"redactionMethod": "hash"}), &row["hash"]),
            (
                json!({"redactionMethod": "placeholder"}),
                &row["placeholder"],
            ),
        ] {
            let label = format!("{} {options}", row["name"]);
            b.script(&[json!({"json": {
                "categories": null,
                "detections": [{
                    "type": row["type"], "value": value, "confidence": 0.9,
                    "start": 0, "end": units, "redacted_value": null,
                }],
                "redacted_content": null,
            }})]);
            let p = processor("pii-detector", &options);
            let mut messages = vec![message(
                &json!({"id": "m1", "role": "user", "parts": [value]}),
            )];
            p.detector()
                .expect("a detector")
                .messages(
                    Stage::Input,
                    &b.agents,
                    &mut messages,
                    &CancellationToken::new(),
                )
                .await
                .expect("redacts");
            assert_eq!(
                view(&messages[0]).1,
                [want.as_str().unwrap_or("")],
                "{label}"
            );
        }
    }
    // The whole sample text, every type detected where the recorder found it, under each
    // method.
    let text = d["piiText"].as_str().expect("text");
    let units: Vec<u16> = text.encode_utf16().collect();
    let at = |value: &str| {
        let needle: Vec<u16> = value.encode_utf16().collect();
        units
            .windows(needle.len())
            .position(|w| w == needle.as_slice())
            .expect("the value is in the text")
    };
    let found = [
        ("email", "john.doe@example.com"),
        ("phone", "(555) 123-4567"),
        ("credit-card", "4111-1111-1111-1111"),
        ("name", "John Smith"),
        ("ssn", "123-45-6789"),
        ("uuid", "123e4567-e89b-12d3-a456-426614174000"),
        (
            "crypto-wallet",
            "0x52908400098527886E0F7030069857D2E4169EE7",
        ),
        ("iban", "DE89370400440532013000"),
        ("ip-address", "192.168.1.1"),
        ("api-key", "sk-live-abcdefghijklmnop1234"),
        ("url", "https://example.com/u/42"),
        ("address", "221B Baker Street"),
        ("date-of-birth", "1990-01-31"),
    ];
    let detections: Vec<Value> = found
        .iter()
        .map(|(kind, value)| {
            let start = at(value);
            json!({
                "redacted_value": null, "type": kind, "value": value, "confidence": 0.95,
                "start": start, "end": start + value.encode_utf16().count(),
            })
        })
        .collect();
    let categories: Vec<Value> = found
        .iter()
        .map(|(kind, _)| json!({"type": kind, "score": 0.95}))
        .collect();
    let answer = json!({"json": {
        "categories": categories, "detections": detections, "redacted_content": null,
    }});
    for case in d["redactionMatrix"].as_array().expect("matrix") {
        let label = case["name"].as_str().unwrap_or("").to_owned();
        b.script(std::slice::from_ref(&answer));
        let p = processor("pii-detector", &case["options"]);
        let mut messages = vec![message(
            &json!({"id": "m1", "role": "user", "parts": [text]}),
        )];
        p.detector()
            .expect("a detector")
            .messages(
                Stage::Input,
                &b.agents,
                &mut messages,
                &CancellationToken::new(),
            )
            .await
            .expect("redacts");
        assert_eq!(
            view(&messages[0]).1,
            [case["redacted"].as_str().unwrap_or("")],
            "{label}"
        );
    }
}
