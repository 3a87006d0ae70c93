//! Replays every recorded judged-scorer case of `tests/reference/scorers.json`: the scripted
//! judge answers what the reference's mock model answered, doing the structured-output
//! mechanics the reference's judge agent does (schema inline after the prompt, or native;
//! one retry with the schema in the system message), and every model call, step result,
//! prompt, score and reason must equal the recording. The options tests are in `options.rs`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Map, Value, json};

mod judge;
mod options;

use self::judge::{ModelCall, ScriptedJudge, call_schema, recorded_call};
use super::*;
use crate::agent::scorers::ScorerRun;

/// The recording, read once.
fn recording() -> &'static Value {
    static RECORDING: OnceLock<Value> = OnceLock::new();
    RECORDING.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/reference/scorers.json");
        let text = std::fs::read_to_string(path).expect("the scorers recording");
        serde_json::from_str(&text).expect("the recording is JSON")
    })
}

/// The recorded result with each `<prompt of calls[i]>` replaced by that call's prompt.
fn resolve_prompts(value: &Value, calls: &[ModelCall]) -> Value {
    match value {
        Value::String(s) => s
            .strip_prefix("<prompt of calls[")
            .and_then(|rest| rest.strip_suffix("]>"))
            .and_then(|i| i.parse::<usize>().ok())
            .map_or_else(|| value.clone(), |i| json!(calls[i].user[0])),
        Value::Array(items) => items.iter().map(|v| resolve_prompts(v, calls)).collect(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| (k.clone(), resolve_prompts(v, calls)))
            .collect::<Map<_, _>>()
            .into(),
        _ => value.clone(),
    }
}

/// A recorded JS options object in the snake_case names agentd's options use.
fn snake_case_keys(value: &Value) -> Value {
    match value {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| {
                let mut key = String::new();
                for c in k.chars() {
                    if c.is_ascii_uppercase() {
                        key.push('_');
                        key.push(c.to_ascii_lowercase());
                    } else {
                        key.push(c);
                    }
                }
                (key, snake_case_keys(v))
            })
            .collect::<Map<_, _>>()
            .into(),
        _ => value.clone(),
    }
}

/// What a hallucination `getContext` was called with, as the recording lists it.
type ContextCalls = Arc<Mutex<Vec<Value>>>;

/// The scorer a case builds: its options object read as TOML-style options, or the Rust
/// equivalent of the function-valued options the recording describes in words.
fn scorer_for(
    group: &str,
    case: &Value,
    context_calls: &ContextCalls,
) -> Result<JudgedScorer, String> {
    let id = recording()["judged"][group]["scorer"]["id"]
        .as_str()
        .expect("id");
    let name = case["name"].as_str().unwrap_or_default();
    let options = match case.get("options") {
        None => json!({}),
        Some(Value::Object(_)) => snake_case_keys(&case["options"]),
        Some(Value::String(described)) => {
            return Ok(described_options(group, described, context_calls));
        }
        Some(other) => panic!("{group}/{name}: options {other}"),
    };
    JudgedScorer::from_options(id, options)
}

/// The recording's function-valued options, by their description.
fn described_options(group: &str, described: &str, context_calls: &ContextCalls) -> JudgedScorer {
    match (group, described) {
        ("hallucination", d)
            if d.starts_with("getContext: ({ step, score }) => [`tool result for ${step}`]") =>
        {
            let calls = context_calls.clone();
            JudgedScorer::Hallucination(HallucinationOptions {
                get_context: Some(GetContext::new(move |p| {
                    let r = p.results;
                    let keys: Vec<&str> = [
                        r.preprocess.map(|_| "preprocessStepResult"),
                        r.analyze.map(|_| "analyzeStepResult"),
                        r.generate_score.map(|_| "generateScoreStepResult"),
                    ]
                    .into_iter()
                    .flatten()
                    .collect();
                    let step = match p.step {
                        ContextStep::Analyze => "analyze",
                        ContextStep::GenerateReason => "generateReason",
                    };
                    calls
                        .lock()
                        .unwrap()
                        .push(json!({"step": step, "score": p.score, "resultKeys": keys}));
                    vec![format!("tool result for {step}")]
                })),
                ..HallucinationOptions::default()
            })
        }
        (
            "toolCallAccuracy",
            r#"availableTools: [weather ("Get the current weather for a city."), search ("Search the web.")]"#,
        ) => JudgedScorer::ToolCallAccuracy(ToolCallAccuracyOptions {
            available_tools: vec![
                AvailableTool {
                    id: "weather".into(),
                    description: "Get the current weather for a city.".into(),
                },
                AvailableTool {
                    id: "search".into(),
                    description: "Search the web.".into(),
                },
            ],
        }),
        ("contextRelevance", "contextExtractor: () => [], scale: 3") => {
            JudgedScorer::ContextRelevance(ContextRelevanceOptions {
                context_extractor: Some(ContextExtractor::new(|_, _| Vec::new())),
                scale: 3.0,
                ..ContextRelevanceOptions::default()
            })
        }
        (
            "contextRelevance",
            "contextExtractor: (input, output) => tool results of the output as JSON",
        ) => {
            // output.flatMap(m => m.content.toolInvocations ?? []).map(t => JSON.stringify(t.result))
            JudgedScorer::ContextRelevance(ContextRelevanceOptions {
                context_extractor: Some(ContextExtractor::new(|_, output| {
                    output
                        .iter()
                        .flat_map(|m| m.content.tool_invocations.iter().flatten())
                        .map(|t| js::stringify(&t["result"]))
                        .collect()
                })),
                ..ContextRelevanceOptions::default()
            })
        }
        (
            "contextPrecision",
            r#"contextExtractor: () => ["Context A.", "Context B."], scale: 10"#,
        ) => JudgedScorer::ContextPrecision(ContextPrecisionOptions {
            context_extractor: Some(ContextExtractor::new(|_, _| {
                vec!["Context A.".to_owned(), "Context B.".to_owned()]
            })),
            scale: 10.0,
            ..ContextPrecisionOptions::default()
        }),
        ("contextPrecision", "contextExtractor: () => []") => {
            JudgedScorer::ContextPrecision(ContextPrecisionOptions {
                context_extractor: Some(ContextExtractor::new(|_, _| Vec::new())),
                ..ContextPrecisionOptions::default()
            })
        }
        _ => panic!("{group}: no Rust equivalent for options {described:?}"),
    }
}

/// Replays one case against its recorded calls and result (or error).
async fn replay_case(group: &str, case: &Value, native: bool) {
    let recorded = &recording()["judged"];
    let instructions = recorded[if native { "toxicity" } else { group }]["instructions"]
        .as_str()
        .expect("instructions");
    let name = case["name"].as_str().expect("name");
    let what = format!("{group}/{name}");
    let context_calls = ContextCalls::default();
    let scorer = scorer_for(group, case, &context_calls);
    if let Some(error) = case.get("constructionError") {
        let message = scorer.expect_err(&what);
        let want = error["message"].as_str().expect("message");
        assert!(message.contains(want), "{what}: {message}");
        return;
    }
    let scorer = scorer.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(scorer.instructions(), instructions, "{what}: instructions");

    let run = ScorerRun {
        input: serde_json::from_value(case["input"].clone()).expect("input"),
        output: serde_json::from_value(case["output"].clone()).expect("output"),
    };
    let answers = case["answers"].as_array().expect("answers");
    let judge = ScriptedJudge::new(answers, native);
    let outcome = scorer.score(&run, &judge).await;

    let calls = judge.calls();
    let expected: Vec<ModelCall> = case["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .enumerate()
        .map(|(i, c)| recorded_call(c, instructions, &format!("{what}: calls[{i}]")))
        .collect();
    assert_eq!(calls.len(), expected.len(), "{what}: number of judge calls");
    for (i, (call, want)) in calls.iter().zip(&expected).enumerate() {
        assert_eq!(
            call.system, want.system,
            "{what}: calls[{i}] system message"
        );
        assert_eq!(call.user, want.user, "{what}: calls[{i}] user message");
        let (got, want) = (call_schema(call), call_schema(want));
        assert_eq!(
            got.map(|s| s.to_string()),
            want.map(|s| s.to_string()),
            "{what}: calls[{i}] schema"
        );
    }
    assert!(judge.all_answered(), "{what}: answers left over");

    if let Some(error) = case.get("error") {
        let message = outcome.expect_err(&what);
        let step = error["failedStep"].as_str().expect("failedStep");
        assert!(message.contains(scorer.id()), "{what}: {message}");
        assert!(
            message.contains(&format!("the {step} step failed")),
            "{what}: {message}"
        );
        let cause = error["cause"]["message"].as_str().expect("cause");
        if cause.starts_with("Structured output validation failed") {
            assert!(
                message.contains("Structured output validation failed"),
                "{what}: {message}"
            );
        } else {
            assert!(message.contains(cause), "{what}: {message}");
        }
        return;
    }

    let scored = outcome.unwrap_or_else(|e| panic!("{what}: {e}"));
    let result = resolve_prompts(&case["result"], &expected);
    let known = [
        "score",
        "reason",
        "preprocessStepResult",
        "analyzeStepResult",
        "preprocessPrompt",
        "analyzePrompt",
        "generateReasonPrompt",
        "judge",
    ];
    for key in result.as_object().expect("result").keys() {
        assert!(
            known.contains(&key.as_str()),
            "{what}: unchecked result field {key}"
        );
    }
    assert_eq!(
        Some(scored.score),
        result["score"].as_f64(),
        "{what}: score"
    );
    assert_eq!(
        scored.reason.as_deref(),
        result["reason"].as_str(),
        "{what}: reason"
    );
    let text = |v: Option<&Value>| v.map(Value::to_string);
    assert_eq!(
        text(scored.preprocess_step_result.as_ref()),
        text(result.get("preprocessStepResult")),
        "{what}: preprocessStepResult"
    );
    assert_eq!(
        text(scored.analyze_step_result.as_ref()),
        text(result.get("analyzeStepResult")),
        "{what}: analyzeStepResult"
    );
    let prompts: BTreeMap<String, String> =
        ["preprocessPrompt", "analyzePrompt", "generateReasonPrompt"]
            .into_iter()
            .filter_map(|k| Some((k.to_owned(), result.get(k)?.as_str()?.to_owned())))
            .collect();
    assert_eq!(scored.prompts, prompts, "{what}: prompts");

    if group == "hallucination" && case["options"].is_string() {
        let want = &recorded["hallucination"]["getContextCalls"];
        let got = json!(*context_calls.lock().unwrap());
        assert_eq!(
            js::stringify(&got),
            js::stringify(want),
            "{what}: getContext calls"
        );
    }
}

/// Replays every case of a group; the count must be the recording's.
async fn replay(group: &str) -> usize {
    let recorded = &recording()["judged"][group];
    let scorer = &recorded["scorer"];
    let cases = recorded["cases"].as_array().expect("cases");
    let mut replayed = 0;
    for case in cases {
        replay_case(group, case, false).await;
        replayed += 1;
    }
    // Every built scorer names itself as the reference's does.
    let options = cases
        .iter()
        .find(|c| c.get("constructionError").is_none())
        .expect("a buildable case");
    let built = scorer_for(group, options, &ContextCalls::default()).expect("built");
    assert_eq!(built.id(), scorer["id"], "{group}: id");
    assert_eq!(built.name(), scorer["name"], "{group}: name");
    assert_eq!(
        built.description(),
        scorer["description"],
        "{group}: description"
    );
    assert_eq!(replayed, cases.len());
    replayed
}

#[tokio::test]
async fn answer_relevancy_replays_the_reference() {
    assert_eq!(replay("answerRelevancy").await, 6);
}

#[tokio::test]
async fn faithfulness_replays_the_reference() {
    assert_eq!(replay("faithfulness").await, 5);
}

#[tokio::test]
async fn hallucination_replays_the_reference() {
    assert_eq!(replay("hallucination").await, 5);
}

#[tokio::test]
async fn toxicity_replays_the_reference() {
    assert_eq!(replay("toxicity").await, 5);
}

#[tokio::test]
async fn toxicity_replays_the_native_structured_output_cases() {
    // The same scorer with a judge whose provider takes the schema natively: the prompts
    // are unchanged and the schema travels as the response format.
    let cases = recording()["judged"]["nativeStructuredOutput"]["cases"]
        .as_array()
        .expect("cases");
    assert_eq!(cases.len(), 2);
    for case in cases {
        replay_case("toxicity", case, true).await;
    }
}

#[tokio::test]
async fn bias_replays_the_reference() {
    assert_eq!(replay("bias").await, 4);
}

#[tokio::test]
async fn tool_call_accuracy_replays_the_reference() {
    assert_eq!(replay("toolCallAccuracy").await, 6);
}

#[tokio::test]
async fn context_relevance_replays_the_reference() {
    assert_eq!(replay("contextRelevance").await, 8);
}

#[tokio::test]
async fn context_precision_replays_the_reference() {
    assert_eq!(replay("contextPrecision").await, 6);
}

#[tokio::test]
async fn prompt_alignment_replays_the_reference() {
    assert_eq!(replay("promptAlignment").await, 7);
}

#[test]
fn scoring_can_run_on_another_task() {
    // A scorer runs after the agent's response, typically spawned: its future must be Send.
    fn send<T: Send>(_: T) {}
    fn check(scorer: &JudgedScorer, run: &ScorerRun, judge: &dyn crate::agent::scorers::Judge) {
        send(scorer.score(run, judge));
    }
    let _ = check;
}

#[test]
fn every_recorded_scorer_is_replayed() {
    // The groups the tests above replay (nativeStructuredOutput with toxicity's): a group
    // added to the recording fails here until it has a test.
    let replayed = [
        "answerRelevancy",
        "faithfulness",
        "hallucination",
        "toxicity",
        "bias",
        "toolCallAccuracy",
        "contextRelevance",
        "contextPrecision",
        "promptAlignment",
        "nativeStructuredOutput",
    ];
    let recorded: Vec<&String> = recording()["judged"]
        .as_object()
        .expect("judged")
        .keys()
        .collect();
    assert_eq!(recorded, replayed);
    let ids: Vec<&Value> = replayed[..9]
        .iter()
        .map(|g| &recording()["judged"][*g]["scorer"]["id"])
        .collect();
    assert_eq!(ids, IDS);
}
