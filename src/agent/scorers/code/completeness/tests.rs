//! The completeness scorer against the recordings: the score and the element lists of every
//! recorded case (`scorers.json`), and the elements compromise finds in 206 more English texts
//! (`completeness.json`), all exactly.

use serde_json::{Value, json};

use super::elements;
use crate::agent::scorers::Scored;

/// Asserts our result for a case of `scorers.json` (called by the code scorers' test).
pub(crate) fn assert_recorded(case: &str, scored: &Scored, recorded: &Value) {
    let at = format!("completeness on {case:?}");
    assert_eq!(
        Some(scored.score),
        recorded["score"].as_f64(),
        "{at}: score"
    );
    let ours = scored
        .preprocess_step_result
        .as_ref()
        .expect("a preprocess result");
    let theirs = &recorded["preprocessStepResult"];
    for key in ["inputElements", "outputElements", "missingElements"] {
        assert_eq!(ours[key], theirs[key], "{at}: {key}");
    }
    let counts = &theirs["elementCounts"];
    assert_eq!(
        ours["elementCounts"],
        json!({ "input": counts["input"], "output": counts["output"] }),
        "{at}"
    );
    assert!(
        scored.analyze_step_result.is_none() && scored.reason.is_none(),
        "{at}"
    );
}

#[test]
fn compromise_is_matched_on_english_texts_beyond_the_recorded_cases() {
    let recording: Value = serde_json::from_str(include_str!(
        "../../../../../tests/reference/completeness.json"
    ))
    .expect("the recording is JSON");
    let cases = recording["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 206);
    for case in cases {
        let text = case["text"].as_str().expect("a text");
        let expected: Vec<&str> = case["elements"]
            .as_array()
            .expect("elements")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let ours = elements(text);
        if ours != expected {
            let tagged = super::document::Document::parse(text).describe();
            panic!("{text:?}\n  ours     {ours:?}\n  expected {expected:?}\n  tagged   {tagged}");
        }
    }
}

#[test]
fn verbs_are_put_in_the_infinitive_as_compromise_does() {
    // compromise's own elements for these (quirks included: 'has done' keeps 'done').
    let cases: [(&str, &[&str]); 4] = [
        (
            "They went home and ate dinner.",
            &["they", "home", "dinner", "go", "eat", "and"],
        ),
        (
            "He has done it and is having fun.",
            &["he", "it", "have", "done", "and", "fun"],
        ),
        ("I don't know.", &["i", "do", "not", "know"]),
        (
            "The files were deleted by the job.",
            &["the", "files", "job", "delete", "by"],
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(elements(text), expected, "{text:?}");
    }
}

#[test]
fn odd_input_is_handled_without_panicking() {
    let long = "the agent runs tools and returns results ".repeat(40);
    for text in [
        "",
        " ",
        "...",
        "😀😃",
        "東京は日本の首都です",
        "'",
        "-",
        "a-",
        "--x",
        "3-",
        "(",
        "it's",
        "'s",
        "n't",
        "don't'",
        &long,
    ] {
        let _ = elements(text);
    }
    assert!(elements("").is_empty());
}
