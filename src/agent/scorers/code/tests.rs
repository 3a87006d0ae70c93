//! Every variant of every rule-based scorer on every case of the reference recording
//! (`tests/reference/scorers.json`, `code`), configured from TOML as a user writes it.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::CodeScorer;
use crate::agent::scorers::{Scored, ScorerRun};

const RECORDING: &str = include_str!("../../../../tests/reference/scorers.json");

pub(super) fn recording() -> Value {
    serde_json::from_str(RECORDING).expect("the recording is JSON")
}

/// The recorded runs by case name (`textCases` or `toolCases`).
pub(super) fn runs(recording: &Value, table: &str) -> HashMap<String, ScorerRun> {
    recording[table]
        .as_array()
        .expect("a case table")
        .iter()
        .map(|case| {
            let name = case["name"].as_str().expect("a case name").to_owned();
            let run =
                serde_json::from_value(json!({ "input": case["input"], "output": case["output"] }))
                    .unwrap_or_else(|e| panic!("case {name}: {e}"));
            (name, run)
        })
        .collect()
}

/// The scorer a variant names, written as a configuration writes it and parsed from TOML.
fn scorer(group: &str, options: &Value) -> CodeScorer {
    let kind = match group {
        "completeness" => "completeness",
        "contentSimilarity" => "content_similarity",
        "keywordCoverage" => "keyword_coverage",
        "textualDifference" => "textual_difference",
        "tone" => "tone",
        "toolCallAccuracy" => "tool_call_accuracy",
        other => panic!("a scorer group this port does not know: {other}"),
    };
    let mut table = Map::new();
    table.insert("type".into(), json!(kind));
    match options {
        Value::Object(options) => {
            for (key, value) in options {
                table.insert(snake_case(key), value.clone());
            }
        }
        // The reference's `createContentSimilarityScorer({})` leaves both options undefined
        // (false); here leaving both out means the defaults, so the variant writes them.
        Value::String(text) if text.starts_with("{}") => {
            assert_eq!(group, "contentSimilarity", "{text}");
            table.insert("ignore_case".into(), json!(false));
            table.insert("ignore_whitespace".into(), json!(false));
        }
        // Omitted options: the factory's defaults.
        Value::String(text) => assert!(text.starts_with("omitted"), "{text}"),
        Value::Null => {}
        other => panic!("options {other}"),
    }
    let text = toml::to_string(&Value::Object(table)).expect("TOML");
    toml::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn snake_case(key: &str) -> String {
    let mut out = String::new();
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The recorded value with a JavaScript `Set` (`{ "Set": [...] }`) as the array our JSON
/// writes.
fn sets_as_arrays(value: &Value) -> Value {
    match value {
        Value::Object(map) if map.len() == 1 && map.contains_key("Set") => {
            sets_as_arrays(&map["Set"])
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), sets_as_arrays(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(sets_as_arrays).collect()),
        other => other.clone(),
    }
}

/// Asserts two step results equal, numbers as the same f64 (`1` and `1.0` alike).
pub(super) fn assert_same(actual: &Value, expected: &Value, at: &str) {
    match (actual, expected) {
        (Value::Number(a), Value::Number(e)) => {
            assert_eq!(a.as_f64(), e.as_f64(), "{at}: {a} != {e}");
        }
        (Value::Object(a), Value::Object(e)) => {
            let mut a_keys: Vec<&String> = a.keys().collect();
            let mut e_keys: Vec<&String> = e.keys().collect();
            a_keys.sort();
            e_keys.sort();
            assert_eq!(a_keys, e_keys, "{at}: keys");
            for (key, value) in e {
                assert_same(&a[key], value, &format!("{at}.{key}"));
            }
        }
        (Value::Array(a), Value::Array(e)) => {
            assert_eq!(a.len(), e.len(), "{at}: length of {actual} vs {expected}");
            for (i, (a, e)) in a.iter().zip(e).enumerate() {
                assert_same(a, e, &format!("{at}[{i}]"));
            }
        }
        _ => assert_eq!(actual, expected, "{at}"),
    }
}

/// Compares a result with the recorded one: score, reason and both step results.
fn assert_result(scored: &Scored, recorded: &Value, at: &str) {
    let recorded = sets_as_arrays(recorded);
    assert_eq!(
        Some(scored.score),
        recorded["score"].as_f64(),
        "{at}: score"
    );
    assert_eq!(
        scored.reason.as_deref(),
        recorded.get("reason").and_then(Value::as_str),
        "{at}: reason"
    );
    for (ours, key) in [
        (&scored.preprocess_step_result, "preprocessStepResult"),
        (&scored.analyze_step_result, "analyzeStepResult"),
    ] {
        match (ours, recorded.get(key)) {
            (Some(ours), Some(theirs)) => assert_same(ours, theirs, &format!("{at}: {key}")),
            (None, None) => {}
            (ours, theirs) => panic!("{at}: {key}: ours {ours:?}, recorded {theirs:?}"),
        }
    }
    assert!(
        scored.prompts.is_empty(),
        "{at}: a rule-based scorer sends no prompt"
    );
}

#[test]
fn every_variant_scores_every_recorded_case_as_the_reference() {
    let recording = recording();
    let text_runs = runs(&recording, "textCases");
    let tool_runs = runs(&recording, "toolCases");
    let groups = recording["code"].as_object().expect("code");
    assert_eq!(groups.len(), 6, "one group per scorer");
    let (mut checked, mut recorded_cases) = (0, 0);
    for (group, entry) in groups {
        let runs = if group == "toolCallAccuracy" {
            &tool_runs
        } else {
            &text_runs
        };
        for (v, variant) in entry["variants"]
            .as_array()
            .expect("variants")
            .iter()
            .enumerate()
        {
            let at = format!("{group}[{v}] {}", variant["options"]);
            let scorer = scorer(group, &variant["options"]);
            if let Some(error) = variant.get("constructionError") {
                let message = error["message"].as_str().expect("a message");
                assert_eq!(scorer.validate(), Err(message.to_owned()), "{at}");
                // Scoring anyway fails the same way.
                for run in runs.values() {
                    assert_eq!(scorer.score(run), Err(message.to_owned()), "{at}");
                }
                assert!(
                    variant.get("cases").is_none(),
                    "{at}: a factory that throws has no cases"
                );
                continue;
            }
            assert_eq!(scorer.validate(), Ok(()), "{at}");
            let about = &variant["scorer"];
            assert_eq!(scorer.id(), about["id"], "{at}: id");
            assert_eq!(scorer.name(), about["name"], "{at}: name");
            assert_eq!(
                scorer.description(),
                about["description"],
                "{at}: description"
            );
            for case in variant["cases"].as_array().expect("cases") {
                recorded_cases += 1;
                let name = case["case"].as_str().expect("a case name");
                let at = format!("{at} on {name:?}");
                let run = runs
                    .get(name)
                    .unwrap_or_else(|| panic!("{at}: no such case"));
                match (case.get("result"), case.get("error")) {
                    (Some(result), None) => {
                        let scored = scorer.score(run).unwrap_or_else(|e| panic!("{at}: {e}"));
                        if group == "completeness" {
                            super::completeness::tests::assert_recorded(name, &scored, result);
                        } else {
                            assert_result(&scored, result, &at);
                        }
                    }
                    (None, Some(error)) => {
                        // The reference wraps the thrown error in a ScorerRunError; ours is the
                        // thrown message.
                        let message = error["cause"]["message"].as_str().expect("a cause");
                        assert_eq!(scorer.score(run), Err(message.to_owned()), "{at}");
                    }
                    _ => panic!("{at}: neither result nor error"),
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, recorded_cases);
    assert_eq!(
        checked,
        40 + 40 + 3 * 8 + 40 + 40 + 40 + 3 * 8 + 4 * 24 + 2 * 6,
        "every recorded case"
    );
}

#[test]
fn options_deserialize_from_toml_with_snake_case_names_and_reject_unknown_ones() {
    let scorer: CodeScorer = toml::from_str(
        "type = \"tool_call_accuracy\"\nexpected_tool = \"weather\"\nstrict_mode = true\n",
    )
    .expect("TOML");
    assert_eq!(scorer.id(), "code-tool-call-accuracy-scorer");
    assert_eq!(
        scorer.description(),
        "Evaluates whether the LLM selected the correct tool (weather) from the available tools"
    );
    for bad in [
        "type = \"tool_call_accuracy\"\nexpectedTool = \"weather\"\n",
        "type = \"completeness\"\nstrict_mode = true\n",
        "type = \"tone\"\nreference = \"happy\"\n",
        "type = \"content_similarity\"\nignore_case = \"yes\"\n",
        "type = \"bleu\"\n",
    ] {
        assert!(toml::from_str::<CodeScorer>(bad).is_err(), "{bad}");
    }
    let scorer: CodeScorer = toml::from_str("type = \"tool_call_accuracy\"\n").expect("TOML");
    assert_eq!(
        scorer.validate(),
        Err("Either expectedTool or expectedToolOrder must be provided".to_owned())
    );
}

#[test]
fn content_similarity_resolves_options_as_the_reference_factory() {
    use super::ContentSimilarityOptions as O;
    let o = |c, w| {
        O {
            ignore_case: c,
            ignore_whitespace: w,
        }
        .effective()
    };
    assert_eq!(o(None, None), (true, true));
    assert_eq!(o(Some(false), None), (false, false));
    assert_eq!(o(None, Some(true)), (false, true));
    assert_eq!(o(Some(true), Some(true)), (true, true));
}
