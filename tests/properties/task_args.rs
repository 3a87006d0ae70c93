//! The task tools' JSON arguments as a model sends them (well-formed, with nulls, wrong types,
//! stringified arrays, extra keys, or anything at all) through the validators and on into the
//! rules: never a panic, a validated input says what the JSON said, a failure names paths.

use agentd::tasks::{self, Task, TaskStatus, ValidationError};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

use crate::strings::{colliding_text, odd_string};

/// Any JSON value, nested a few levels.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        odd_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((field_name(), inner), 0..4)
                .prop_map(|fields| Value::Object(fields.into_iter().collect())),
        ]
    })
}

/// Keys the schemas know, and others.
fn field_name() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec!["id", "content", "status", "activeForm", "tasks"])
            .prop_map(str::to_owned),
        1 => "[a-zA-Z_]{1,8}",
    ]
}

/// A field value as a model might send it: usually right, sometimes null, empty, the wrong
/// type, or missing (`None`).
fn text_value() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        6 => colliding_text().prop_map(|s| Some(Value::String(s))),
        1 => Just(None),
        1 => Just(Some(Value::Null)),
        1 => Just(Some(json!(""))),
        1 => any_json().prop_map(Some),
    ]
}

fn status_value() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        6 => prop::sample::select(vec!["pending", "in_progress", "completed"])
            .prop_map(|s| Some(json!(s))),
        1 => Just(None),
        1 => Just(Some(Value::Null)),
        1 => prop::sample::select(vec!["done", "PENDING", "in-progress", ""])
            .prop_map(|s| Some(json!(s))),
        1 => any_json().prop_map(Some),
    ]
}

fn object(fields: Vec<(&str, Option<Value>)>, extra: Option<(String, Value)>) -> Value {
    let mut map: Map<String, Value> = fields
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_owned(), v?)))
        .collect();
    if let Some((k, v)) = extra {
        map.entry(k).or_insert(v);
    }
    Value::Object(map)
}

fn task_value() -> impl Strategy<Value = Value> {
    (
        prop_oneof![3 => Just(None), 1 => text_value()],
        text_value(),
        status_value(),
        text_value(),
        prop::option::weighted(0.1, (field_name(), any_json())),
    )
        .prop_map(|(id, content, status, active_form, extra)| {
            object(
                vec![
                    ("id", id),
                    ("content", content),
                    ("status", status),
                    ("activeForm", active_form),
                ],
                extra,
            )
        })
}

/// task_write arguments: `{"tasks": [...]}`, sometimes with the array as a JSON string,
/// sometimes something else entirely.
fn write_args() -> impl Strategy<Value = Value> {
    let tasks = || prop::collection::vec(task_value(), 0..6).prop_map(Value::Array);
    prop_oneof![
        6 => tasks().prop_map(|t| json!({ "tasks": t })),
        1 => tasks().prop_map(|t| json!({ "tasks": t.to_string() })),
        1 => any_json(),
    ]
}

fn update_args() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => (
            text_value(),
            prop_oneof![1 => Just(None), 1 => text_value()],
            prop_oneof![1 => Just(None), 1 => status_value()],
            prop_oneof![1 => Just(None), 1 => text_value()],
            prop::option::weighted(0.1, (field_name(), any_json())),
        )
            .prop_map(|(id, content, status, active_form, extra)| {
                object(
                    vec![
                        ("id", id),
                        ("content", content),
                        ("status", status),
                        ("activeForm", active_form),
                    ],
                    extra,
                )
            }),
        1 => any_json(),
    ]
}

fn complete_args() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => text_value().prop_map(|id| object(vec![("id", id)], None)),
        1 => any_json(),
    ]
}

/// A failure reads like the reference's: the tool, one line per issue, the arguments.
fn check_failure(err: &ValidationError, tool: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(err.tool, tool);
    prop_assert!(!err.issues.is_empty());
    let message = err.message();
    let head = format!(
        "Tool input validation failed for {tool}. Please fix the following errors and try again:\n"
    );
    prop_assert!(message.starts_with(&head), "{}", message);
    prop_assert!(message.contains("\n\nProvided arguments: "));
    for issue in &err.issues {
        prop_assert!(!issue.path.is_empty() && !issue.message.is_empty());
        let line = format!("- {}: {}", issue.path, issue.message);
        prop_assert!(message.contains(&line));
    }
    // The other renderings never panic either.
    let _ = err.to_tool_result_json();
    Ok(())
}

/// The string at `key` of `value`, if it is one.
fn text_at<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

fn prev_list() -> impl Strategy<Value = Vec<Task>> {
    prop::collection::vec((colliding_text(), colliding_text()), 0..5).prop_map(|items| {
        let drafts = items
            .into_iter()
            .map(|(content, active_form)| tasks::TaskDraft {
                id: None,
                content,
                status: TaskStatus::Pending,
                active_form,
            })
            .collect();
        tasks::write(&[], &tasks::WriteInput { tasks: drafts }).tasks
    })
}

proptest! {
    #![proptest_config(crate::config(160))]

    #[test]
    fn write_arguments(args in write_args(), prev in prev_list()) {
        match tasks::validate_write(&args) {
            Err(err) => check_failure(&err, "task_write")?,
            Ok(input) => {
                // Validated tasks are the JSON's own, in order.
                let listed = match &args["tasks"] {
                    Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
                    other => other.clone(),
                };
                let listed = listed.as_array().cloned().unwrap_or_default();
                prop_assert_eq!(listed.len(), input.tasks.len());
                for (raw, task) in listed.iter().zip(&input.tasks) {
                    prop_assert_eq!(text_at(raw, "content"), Some(task.content.as_str()));
                    prop_assert_eq!(text_at(raw, "activeForm"), Some(task.active_form.as_str()));
                    prop_assert_eq!(text_at(raw, "status"), Some(task.status.as_str()));
                    prop_assert!(!task.content.is_empty() && !task.active_form.is_empty());
                }
                let out = tasks::write(&prev, &input);
                if out.store {
                    prop_assert!(
                        out.tasks.iter().filter(|t| t.status == TaskStatus::InProgress).count() <= 1
                    );
                }
            }
        }
    }

    #[test]
    fn update_arguments(args in update_args(), prev in prev_list()) {
        match tasks::validate_update(&args) {
            Err(err) => check_failure(&err, "task_update")?,
            Ok(input) => {
                prop_assert_eq!(text_at(&args, "id"), Some(input.id.as_str()));
                prop_assert!(
                    input.content.is_some() || input.status.is_some() || input.active_form.is_some()
                );
                prop_assert!(input.content.as_deref() != Some(""));
                prop_assert!(input.active_form.as_deref() != Some(""));
                let out = tasks::update(&prev, &input);
                if !prev.iter().any(|t| t.id == input.id) {
                    prop_assert!(out.is_error && !out.store);
                    prop_assert_eq!(&out.tasks, &prev);
                }
            }
        }
    }

    #[test]
    fn complete_arguments(args in complete_args(), prev in prev_list()) {
        match tasks::validate_complete(&args) {
            Err(err) => check_failure(&err, "task_complete")?,
            Ok(input) => {
                prop_assert_eq!(text_at(&args, "id"), Some(input.id.as_str()));
                prop_assert!(!input.id.is_empty());
                let out = tasks::complete(&prev, &input);
                if !prev.iter().any(|t| t.id == input.id) {
                    prop_assert!(out.is_error && !out.store);
                    prop_assert_eq!(&out.tasks, &prev);
                }
            }
        }
    }

    #[test]
    fn check_arguments_accept_any_object(args in any_json()) {
        match tasks::validate_check(&args) {
            Ok(()) => prop_assert!(args.is_object() || args.is_null()),
            Err(err) => {
                prop_assert!(!args.is_object() && !args.is_null());
                check_failure(&err, "task_check")?;
            }
        }
    }
}
