//! Replays the reference's recorded task-tool sessions (tests/conformance/tasks.json) through
//! the public API and compares every answer exactly, field order included.

use agentd::tasks::{self, Task};
use serde_json::Value;

const CASES: &str = include_str!("conformance/tasks.json");

/// Runs one recorded op against `list` the way TaskService / the tool executor does:
/// validate first, then the memory check, then the operation. Returns the tool result.
fn run_op(op: &str, input: &Value, memory: bool, list: &mut Vec<Task>) -> Value {
    let validated = match op {
        "write" => tasks::validate_write(input).map(|i| Op::Write(Box::new(i))),
        "update" => tasks::validate_update(input).map(|i| Op::Update(Box::new(i))),
        "complete" => tasks::validate_complete(input).map(Op::Complete),
        "check" => tasks::validate_check(input).map(|()| Op::Check),
        other => panic!("unknown op {other}"),
    };
    let op = match validated {
        Ok(op) => op,
        Err(err) => return err.to_tool_result_json(),
    };
    if !memory {
        return match op {
            Op::Check => tasks::memory_required_check().to_tool_result_json(),
            _ => tasks::memory_required().to_tool_result_json(),
        };
    }
    let outcome = match op {
        Op::Write(input) => tasks::write(list, &input),
        Op::Update(input) => tasks::update(list, &input),
        Op::Complete(input) => tasks::complete(list, &input),
        Op::Check => return tasks::check(list).to_tool_result_json(),
    };
    if outcome.store {
        list.clone_from(&outcome.tasks);
    }
    outcome.to_tool_result_json()
}

enum Op {
    Write(Box<tasks::WriteInput>),
    Update(Box<tasks::UpdateInput>),
    Complete(tasks::CompleteInput),
    Check,
}

#[test]
fn every_recorded_case_matches_the_reference() {
    let cases: Vec<Value> = serde_json::from_str(CASES).expect("conformance file is JSON");
    assert_eq!(cases.len(), 14);
    let mut compared = 0;
    for case in &cases {
        let name = case["name"].as_str().expect("case name");
        let memory = case["memory"].as_bool().expect("memory flag");
        let ops = case["ops"].as_array().expect("ops");
        let results = case["results"].as_array().expect("results");
        assert_eq!(ops.len(), results.len(), "{name}");
        let mut list = Vec::new();
        for (index, (op, expected)) in ops.iter().zip(results).enumerate() {
            let kind = op["op"].as_str().expect("op kind");
            let actual = run_op(kind, &op["input"], memory, &mut list);
            // Compare the serialized text: Value equality would ignore key order.
            assert_eq!(
                serde_json::to_string_pretty(&actual).unwrap(),
                serde_json::to_string_pretty(expected).unwrap(),
                "case {name}, op #{index} ({kind})"
            );
            compared += 1;
        }
    }
    assert_eq!(compared, 37);
}

#[test]
fn validation_failure_messages_match_exactly() {
    let cases: Vec<Value> = serde_json::from_str(CASES).unwrap();
    let mut seen = 0;
    for case in &cases {
        let ops = case["ops"].as_array().unwrap();
        for (op, expected) in ops.iter().zip(case["results"].as_array().unwrap()) {
            let Some(message) = expected.get("message").and_then(Value::as_str) else {
                continue;
            };
            let err = match op["op"].as_str().unwrap() {
                "write" => tasks::validate_write(&op["input"]).unwrap_err(),
                "update" => tasks::validate_update(&op["input"]).unwrap_err(),
                "complete" => tasks::validate_complete(&op["input"]).unwrap_err(),
                other => panic!("no recorded validation failure for {other}"),
            };
            assert_eq!(err.message(), message);
            assert_eq!(err.error_code(), tasks::ErrorCode::InvalidArguments);
            seen += 1;
        }
    }
    assert_eq!(seen, 3);
}
