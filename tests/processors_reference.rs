//! The built-in processors against outputs recorded from the reference (`@mastra/core` 1.71.0)
//! for the same inputs: `tests/reference/processors.json`, written by
//! `tests/reference/record/processors.mjs`.

use std::sync::Arc;

use agentd::agent::Agents;
use agentd::agent::message::{Message, Part, Role};
use agentd::agent::processors::{Chain, Processor, StreamCtx, Tripwire, tokens};
use agentd::config::{ProcessorSpec, RegexFilterSpec, RegexRuleSpec};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/reference/processors.json"
    );
    let text = std::fs::read_to_string(path).expect("the recorded fixture is in the repository");
    serde_json::from_str(&text).expect("the fixture is JSON")
}

fn text_message(id: &str, role: Role, texts: &[&str]) -> Message {
    let mut m = Message::new(
        role,
        texts
            .iter()
            .map(|t| Part::Text {
                text: (*t).to_owned(),
            })
            .collect(),
    );
    m.id = id.to_owned();
    m
}

fn role(name: &str) -> Role {
    match name {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "system" => Role::System,
        _ => Role::Tool,
    }
}

/// A recorded `{id, role, parts}` message (parts other than text are left out: agentd has no
/// step-start parts); a plain string content (`contentString`) is one text part.
fn recorded(m: &Value) -> Message {
    let texts = recorded_texts(m);
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    text_message(
        m["id"].as_str().unwrap_or("m"),
        role(m["role"].as_str().unwrap_or("user")),
        &texts,
    )
}

fn texts(m: &Message) -> Vec<String> {
    m.parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

fn recorded_texts(m: &Value) -> Vec<String> {
    if let Some(text) = m["contentString"].as_str() {
        return vec![text.to_owned()];
    }
    m["parts"]
        .as_array()
        .map(|p| {
            p.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// A processor from its recorded options: the reference's camelCase names, and custom rules as
/// a JavaScript pattern with flags (`i` becomes `(?i)`; the rules recorded use only syntax the
/// two engines share).
fn spec(kind: &str, options: &Value) -> ProcessorSpec {
    // `new TokenLimiterProcessor(4)` is `{limit: 4}`.
    if let Some(limit) = options.as_u64() {
        return spec(kind, &json!({ "limit": limit }));
    }
    let mut o = serde_json::Map::new();
    o.insert("type".into(), json!(kind));
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
        match snake.as_str() {
            "include_redacted_values" => {}
            "rules" => {
                let rules: Vec<RegexRuleSpec> = value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|r| {
                        let flags = r["flags"].as_str().unwrap_or("");
                        let pattern = r["pattern"].as_str().unwrap_or("");
                        RegexRuleSpec {
                            name: r["name"].as_str().unwrap_or("").to_owned(),
                            pattern: if flags.contains('i') {
                                format!("(?i){pattern}")
                            } else {
                                pattern.to_owned()
                            },
                            replacement: r["replacement"].as_str().map(str::to_owned),
                        }
                    })
                    .collect();
                o.insert("rules".into(), json!(rules));
            }
            "trim_mode" | "strategy" | "count_mode" | "phase" => {
                o.insert(snake, json!(value.as_str().unwrap_or("").replace('-', "_")));
            }
            _ => {
                o.insert(snake, value.clone());
            }
        }
    }
    if kind == "token-limiter"
        && let Some(mode) = o.get_mut("trim_mode")
    {
        *mode = json!(mode.as_str().unwrap_or("").replace('_', "-"));
    }
    serde_json::from_value(Value::Object(o)).expect("recorded options are valid processor options")
}

fn build(kind: &str, options: &Value) -> Processor {
    Processor::build(&spec(kind, options)).expect("recorded options compile")
}

fn assert_tripwire(got: &Tripwire, want: &Value, case: &str) {
    assert_eq!(got.reason, want["message"].as_str().unwrap_or(""), "{case}");
    assert_eq!(
        got.retry,
        want["retry"].as_bool().unwrap_or(false),
        "{case}"
    );
    let metadata = got
        .metadata
        .clone()
        .map_or(Value::Null, |m| Value::Object(*m));
    let expected = want.get("metadata").cloned().unwrap_or(Value::Null);
    assert_eq!(metadata, expected, "{case}");
}

/// A stage's outcome against the recording: the same tripwire, or the same texts per message.
fn check_outcome(outcome: Result<(), Tripwire>, messages: &[Message], want: &Value, label: &str) {
    match (outcome, want.get("tripwire")) {
        (Err(trip), Some(tripwire)) => assert_tripwire(&trip, tripwire, label),
        (Ok(()), None) => {
            let outputs = want["output"].as_array().expect("output");
            assert_eq!(messages.len(), outputs.len(), "{label}");
            for (m, out) in messages.iter().zip(outputs) {
                assert_eq!(texts(m), recorded_texts(out), "{label}");
            }
        }
        (got, tripwire) => panic!("{label}: got {got:?}, want {tripwire:?}"),
    }
}

#[test]
fn token_estimates_match_tokenx() {
    let f = fixture();
    let cases = f["tokenx"]["cases"].as_array().expect("cases");
    assert!(cases.len() > 50);
    for case in cases {
        let text = case["text"].as_str().unwrap_or("");
        assert_eq!(
            tokens::estimate(text),
            case["tokens"].as_u64().unwrap_or(u64::MAX),
            "{text:?}"
        );
    }
}

#[test]
fn unicode_normalizer_matches_every_recorded_output() {
    let f = fixture();
    let u = &f["unicodeNormalizer"];
    let inputs = u["inputs"].as_array().expect("inputs");
    for config in u["configs"].as_array().expect("configs") {
        let processor = build("unicode-normalizer", &config["options"]);
        let outputs = config["outputs"].as_array().expect("outputs");
        assert_eq!(inputs.len(), outputs.len());
        for (input, output) in inputs.iter().zip(outputs) {
            let case = format!("{} / {}", config["name"], input["name"]);
            let mut messages = vec![text_message(
                "m1",
                Role::User,
                &[input["text"].as_str().unwrap_or("")],
            )];
            processor.input(&mut messages).expect("never aborts");
            assert_eq!(
                texts(&messages[0]),
                [output.as_str().unwrap_or("")],
                "{case}"
            );
        }
    }
}

#[test]
fn regex_filter_input_matches_the_reference() {
    let f = fixture();
    let r = &f["regexFilter"];
    let named: Vec<&Value> = ["regexInputs", "customInputs"]
        .iter()
        .flat_map(|k| r[*k].as_array().into_iter().flatten())
        .collect();
    let text_of = |name: &Value| {
        named
            .iter()
            .find(|i| i["name"] == *name)
            .and_then(|i| i["text"].as_str())
            .expect("a named input")
    };
    let mut checked = 0;
    for case in r["processInput"].as_array().expect("cases") {
        let name = case["name"].as_str().unwrap_or("");
        // agentd's rules always match every occurrence (JavaScript's without `g` stop at one).
        if name.starts_with("non-global") {
            continue;
        }
        let processor = build("regex-filter", &case["options"]);
        let inputs = case["inputs"].as_array().expect("inputs");
        for (input, result) in inputs
            .iter()
            .zip(case["results"].as_array().expect("results"))
        {
            let label = format!("{name} / {input}");
            let mut messages = vec![text_message("m1", Role::User, &[text_of(input)])];
            let outcome = processor.input(&mut messages);
            check_outcome(outcome, &messages, result, &label);
            checked += 1;
        }
    }
    assert!(checked > 300, "{checked}");
    for case in r["multiMessage"].as_array().expect("cases") {
        let processor = build("regex-filter", &case["options"]);
        let mut messages: Vec<Message> = case["input"]
            .as_array()
            .into_iter()
            .flatten()
            .map(recorded)
            .collect();
        let outcome = processor.input(&mut messages);
        check_outcome(outcome, &messages, case, "multi");
    }
}

#[test]
fn regex_filter_result_matches_the_reference() {
    let f = fixture();
    for case in f["regexFilter"]["processOutputResult"]
        .as_array()
        .expect("cases")
    {
        let processor = build("regex-filter", &case["options"]);
        let mut messages: Vec<Message> = case["input"]
            .as_array()
            .into_iter()
            .flatten()
            .map(recorded)
            .collect();
        let label = case["options"].to_string();
        let outcome = processor.result(&mut messages);
        check_outcome(outcome, &messages, case, &label);
    }
}

/// Drives recorded stream chunks through an output chain: text deltas go in, any other chunk
/// flushes what is held back. Returns the text deltas let out (and the data chunks) before
/// the first tripwire, and that tripwire.
fn drive(chain: Chain, chunks: &[Value]) -> (Vec<Value>, Option<Tripwire>) {
    let chain = Arc::new(chain);
    let mut stream = chain.stream();
    let agents = Agents::default();
    let cancel = CancellationToken::new();
    let ctx = StreamCtx {
        agents: &agents,
        cancel: &cancel,
    };
    let mut out = Vec::new();
    for chunk in chunks {
        let step = futures::executor::block_on(async {
            match chunk["type"].as_str() {
                Some("text-delta") => {
                    let text = chunk["text"].as_str().unwrap_or("").to_owned();
                    stream.delta(text, &ctx).await
                }
                _ => stream.flush(&ctx).await,
            }
        });
        match step {
            Ok(step) => {
                out.extend(
                    step.data
                        .into_iter()
                        .map(|(kind, data)| json!({"type": kind, "data": data})),
                );
                out.extend(
                    step.texts
                        .into_iter()
                        .map(|t| json!({"type": "text-delta", "text": t})),
                );
            }
            Err(trip) => return (out, Some(trip)),
        }
    }
    (out, None)
}

/// The recorded emitted text deltas and data chunks before the first tripwire, and that one.
fn recorded_stream(emitted: &[Value]) -> (Vec<Value>, Option<&Value>) {
    let mut out = Vec::new();
    for e in emitted {
        if let Some(trip) = e.get("tripwire") {
            return (out, Some(trip));
        }
        if let Some(custom) = e.get("custom") {
            out.push(json!({"type": custom["type"], "data": custom["data"]}));
        } else if e["part"]["type"] == "text-delta" {
            out.push(e["part"].clone());
        }
    }
    (out, None)
}

fn output_chain(spec: ProcessorSpec) -> Chain {
    Chain::build(&[], &[spec], None).expect("compiles")
}

#[test]
fn regex_filter_stream_matches_the_reference() {
    let f = fixture();
    let cases = f["regexFilter"]["processOutputStream"]
        .as_array()
        .expect("cases");
    assert!(cases.len() >= 50);
    for case in cases {
        let label = format!("{} {}", case["name"], case["options"]);
        let chain = output_chain(spec("regex-filter", &case["options"]));
        let (got, trip) = drive(chain, case["input"].as_array().expect("input"));
        let (want, want_trip) = recorded_stream(case["emitted"].as_array().expect("emitted"));
        assert_eq!(got, want, "{label}");
        match (trip, want_trip) {
            (Some(got), Some(want)) => {
                assert_eq!(got.reason, want["reason"].as_str().unwrap_or(""), "{label}");
                assert_eq!(
                    got.metadata.map(|m| Value::Object(*m)),
                    Some(want["metadata"].clone()),
                    "{label}"
                );
            }
            (None, None) => {}
            (got, want) => panic!("{label}: got {got:?}, want {want:?}"),
        }
    }
}

/// The recorded travel conversation as agentd messages (the system messages apart).
fn travel_prompt() -> Vec<Message> {
    let user = |id: &str, t: &str| text_message(id, Role::User, &[t]);
    let assistant = |id: &str, t: &str| text_message(id, Role::Assistant, &[t]);
    let call = |id: &str, call: &str, args: Value| {
        let mut m = Message::new(
            Role::Assistant,
            vec![Part::ToolCall {
                tool_call_id: call.into(),
                tool_name: "weather".into(),
                args,
            }],
        );
        m.id = id.into();
        m
    };
    let result = |id: &str, call: &str, result: Value| {
        let mut m = Message::new(
            Role::Tool,
            vec![Part::ToolResult {
                tool_call_id: call.into(),
                tool_name: "weather".into(),
                args: json!({}),
                result,
                is_error: false,
                model_output: None,
            }],
        );
        m.id = id.into();
        m
    };
    vec![
        user(
            "p2",
            "Hi, I want to plan a trip to Lisbon next spring. What should I know?",
        ),
        assistant(
            "p3",
            "Lisbon in spring is lovely: mild weather, fewer crowds, and long evenings. Pack layers.",
        ),
        user("p4", "What is the weather there right now?"),
        call("p5", "call-1", json!({"city": "Lisbon"})),
        result(
            "p6",
            "call-1",
            json!({"tempC": 18, "sky": "partly cloudy", "wind": "12 km/h"}),
        ),
        assistant("p7", "It is 18°C and partly cloudy."),
        user("p8", "Great. And in Porto?"),
        call("p9", "call-2", json!("{\"city\":\"Porto\"}")),
        result("p10", "call-2", json!("Rainy, 14°C")),
        user("p11", "Thanks! Summarize both in one sentence."),
    ]
}

/// A prompt message as the fixture shows it.
fn prompt_view(m: &Message) -> Value {
    let role = match m.role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
        Role::System => "system",
    };
    let parts: Vec<Value> = m
        .parts
        .iter()
        .map(|p| match p {
            Part::Text { text } => json!(text),
            Part::ToolCall { tool_call_id, .. } => json!({"toolCall": tool_call_id}),
            Part::ToolResult { tool_call_id, .. } => json!({"toolResult": tool_call_id}),
            _ => json!({}),
        })
        .collect();
    json!({"role": role, "parts": parts})
}

#[test]
fn token_limiter_trims_prompts_as_the_reference() {
    let f = fixture();
    let t = &f["tokenLimiter"];
    let system: Vec<String> = t["systems"]
        .as_array()
        .expect("systems")
        .iter()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect();
    let prompt = travel_prompt();
    let mut checked = 0;
    for case in t["processLLMRequest"].as_array().expect("cases") {
        // Only the travel conversation's cases (the named ones use other prompts), and not
        // `memory-only`, which agentd does not offer.
        if case.get("name").is_some() || case["options"]["trimMode"] == "memory-only" {
            continue;
        }
        let label = case["options"].to_string();
        let limiter = spec("token-limiter", &case["options"]);
        let chain = Chain::build(&[limiter], &[], None).expect("compiles");
        let got = chain.trim_prompt(&system, prompt.iter().collect());
        match (got, case.get("tripwire")) {
            (Err(trip), Some(want)) => assert_tripwire(&trip, want, &label),
            (Ok(kept), None) => {
                let kept: Vec<Value> = kept.into_iter().map(prompt_view).collect();
                let want: Vec<Value> = match case.get("kept") {
                    Some(list) => list
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|m| m["role"] != "system")
                        .cloned()
                        .collect(),
                    None => prompt.iter().map(prompt_view).collect(),
                };
                assert_eq!(kept, want, "{label}");
            }
            (got, want) => panic!("{label}: got {got:?}, want {want:?}"),
        }
        checked += 1;
    }
    assert!(checked >= 30, "{checked}");
}

#[test]
fn token_limiter_stream_matches_the_reference() {
    let f = fixture();
    let t = &f["tokenLimiter"];
    let input = t["outputStreamInput"].as_array().expect("input");
    for case in t["processOutputStream"].as_array().expect("cases") {
        // agentd's output processors see text deltas; its partial objects are parsed from
        // that text, so they are not counted twice.
        if case["name"] == "object chunks" {
            continue;
        }
        let label = case["options"].to_string();
        let chain = output_chain(spec("token-limiter", &case["options"]));
        let chunks = case.get("input").and_then(Value::as_array).unwrap_or(input);
        let (got, trip) = drive(chain, chunks);
        let (want, want_trip) = recorded_stream(case["emitted"].as_array().expect("emitted"));
        assert_eq!(got, want, "{label}");
        match (trip, want_trip) {
            (Some(got), Some(want)) => {
                assert_eq!(got.reason, want["reason"].as_str().unwrap_or(""), "{label}");
            }
            (None, None) => {}
            (got, want) => panic!("{label}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn token_limiter_result_matches_the_reference() {
    let f = fixture();
    let t = &f["tokenLimiter"];
    let input: Vec<Message> = t["processOutputResultInput"]
        .as_array()
        .into_iter()
        .flatten()
        .map(recorded)
        .collect();
    for case in t["processOutputResult"].as_array().expect("cases") {
        let label = case["options"].to_string();
        let processor = build("token-limiter", &case["options"]);
        let mut messages = input.clone();
        let outcome = processor.result(&mut messages);
        check_outcome(outcome, &messages, case, &label);
    }
}

#[test]
fn regex_rules_compile_as_config_checks_them() {
    let bad = ProcessorSpec::RegexFilter(RegexFilterSpec {
        rules: vec![RegexRuleSpec {
            name: "x".into(),
            pattern: "(".into(),
            replacement: None,
        }],
        ..RegexFilterSpec::default()
    });
    assert!(Processor::build(&bad).is_err());
}
