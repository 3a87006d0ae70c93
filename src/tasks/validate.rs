//! Validation of raw tool arguments, reproducing the reference's validation pipeline:
//!
//! 1. a top-level `null` counts as `{}`;
//! 2. validate;
//! 3. on failure, retry with JSON-string values parsed where the schema wants an array
//!    (`"tasks": "[…]"`, as some models send);
//! 4. on failure, retry with the `null`s that caused issues removed (models send `null` for
//!    optional fields), or with every `null` property removed when none did;
//! 5. still failing: report the issues of the FIRST attempt with the original arguments.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::jsjson;
use super::model::{CompleteInput, ErrorCode, UpdateInput, WriteInput};
use super::schema::{self, Issues, RawIssue, Segment};

/// How many UTF-16 units of the pretty arguments the message quotes before truncating.
const ARGS_QUOTE_LIMIT: usize = 200;

/// One validation issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// Dotted path as the reference prints it (`tasks.0.status`, `id`), `root` for the input
    /// itself.
    pub path: String,
    /// zod's message.
    pub message: String,
}

impl From<RawIssue> for Issue {
    fn from(raw: RawIssue) -> Self {
        let path = if raw.path.is_empty() {
            "root".to_owned()
        } else {
            join_path(&raw.path)
        };
        Self {
            path,
            message: raw.message,
        }
    }
}

/// Arguments that failed a tool's input schema.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidationError {
    /// Tool name (`task_write`, …).
    pub tool: &'static str,
    /// The issues, in the reference's order.
    pub issues: Vec<Issue>,
    /// The arguments as received.
    pub args: Value,
}

impl ValidationError {
    /// The reference's full text, which an agent run returns to the model.
    pub fn message(&self) -> String {
        let lines: Vec<String> = self
            .issues
            .iter()
            .map(|issue| format!("- {}: {}", issue.path, issue.message))
            .collect();
        let args = jsjson::truncate_utf16(&jsjson::stringify_pretty(&self.args), ARGS_QUOTE_LIMIT);
        format!(
            "Tool input validation failed for {}. Please fix the following errors and try again:\n{}\n\nProvided arguments: {args}",
            self.tool,
            lines.join("\n")
        )
    }

    /// The machine-readable code for this outcome.
    pub fn error_code(&self) -> ErrorCode {
        ErrorCode::InvalidArguments
    }

    /// The reference's issue tree: `{"errors": [root messages], "fields": {key: subtree}}`.
    pub fn validation_errors(&self) -> Value {
        let mut root = ErrorNode::default();
        for issue in &self.issues {
            let mut node = &mut root;
            if issue.path != "root" {
                for key in issue.path.split('.') {
                    node = node.child(key);
                }
            }
            node.errors.push(issue.message.clone());
        }
        root.to_json()
    }

    /// The reference's validation result object: `{"error": true, "message", "validationErrors"}`.
    pub fn to_tool_result_json(&self) -> Value {
        json!({
            "error": true,
            "message": self.message(),
            "validationErrors": self.validation_errors(),
        })
    }
}

impl std::fmt::Display for ValidationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for ValidationError {}

/// Validates `task_write` arguments.
pub fn validate_write(args: &Value) -> Result<WriteInput, ValidationError> {
    validate("task_write", args, &["tasks"], schema::write)
}

/// Validates `task_update` arguments.
pub fn validate_update(args: &Value) -> Result<UpdateInput, ValidationError> {
    validate("task_update", args, &[], schema::update)
}

/// Validates `task_complete` arguments.
pub fn validate_complete(args: &Value) -> Result<CompleteInput, ValidationError> {
    validate("task_complete", args, &[], schema::complete)
}

/// Validates `task_check` arguments (any object).
pub fn validate_check(args: &Value) -> Result<(), ValidationError> {
    validate("task_check", args, &[], schema::check)
}

type Parser<T> = fn(Option<&Value>, &mut Issues) -> Option<T>;

/// Runs one schema over the input; the parsed value only when there is no issue at all.
fn attempt<T>(parse: Parser<T>, input: &Value) -> Result<T, Vec<RawIssue>> {
    let mut issues = Issues::default();
    match parse(Some(input), &mut issues) {
        Some(value) if issues.0.is_empty() => Ok(value),
        _ => Err(issues.0),
    }
}

fn validate<T>(
    tool: &'static str,
    args: &Value,
    array_fields: &[&str],
    parse: Parser<T>,
) -> Result<T, ValidationError> {
    let normalized = normalize(Some(args.clone()));
    let first_issues = match attempt(parse, &normalized) {
        Ok(value) => return Ok(value),
        Err(issues) => issues,
    };
    if let Some(coerced) = parse_stringified_arrays(&normalized, array_fields)
        && let Ok(value) = attempt(parse, &coerced)
    {
        return Ok(value);
    }
    let null_paths = failing_null_paths(&first_issues, &normalized);
    let stripped = if null_paths.is_empty() {
        strip_all_nulls(args)
    } else {
        strip_nulls_at(args, &null_paths, "")
    };
    if let Ok(value) = attempt(parse, &normalize(stripped)) {
        return Ok(value);
    }
    Err(ValidationError {
        tool,
        issues: first_issues.into_iter().map(Issue::from).collect(),
        args: args.clone(),
    })
}

/// The input schemas are all objects: a missing or `null` input means `{}`.
fn normalize(input: Option<Value>) -> Value {
    match input {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(value) => value,
    }
}

/// Top-level string fields, declared as arrays, that hold a JSON array: parsed. `None`
/// when nothing changed.
fn parse_stringified_arrays(input: &Value, array_fields: &[&str]) -> Option<Value> {
    let Value::Object(map) = input else {
        return None;
    };
    let mut coerced = map.clone();
    let mut changed = false;
    for field in array_fields {
        let Some(Value::String(text)) = map.get(*field) else {
            continue;
        };
        if !text.trim().starts_with('[') {
            continue;
        }
        if let Ok(parsed @ Value::Array(_)) = serde_json::from_str::<Value>(text) {
            coerced.insert((*field).to_owned(), parsed);
            changed = true;
        }
    }
    changed.then_some(Value::Object(coerced))
}

/// Dotted paths of the issues whose value is `null` or missing.
fn failing_null_paths(issues: &[RawIssue], input: &Value) -> HashSet<String> {
    issues
        .iter()
        .filter(|issue| !issue.path.is_empty())
        .filter(|issue| is_nullish_at(input, &issue.path))
        .map(|issue| join_path(&issue.path))
        .collect()
}

/// Whether the value at `path` is `null` or missing. Like the reference, a path through a
/// non-container (or a missing one) is "not found", which is not nullish.
fn is_nullish_at(input: &Value, path: &[Segment]) -> bool {
    let mut current = Some(input);
    for segment in path {
        current = match current {
            Some(Value::Object(map)) => map.get(&segment.to_string()),
            Some(Value::Array(items)) => match segment {
                Segment::Index(index) => items.get(*index),
                Segment::Key(_) => None,
            },
            _ => return false,
        };
    }
    matches!(current, None | Some(Value::Null))
}

/// Removes `null` object properties at the given paths. `None` stands for `undefined`.
fn strip_nulls_at(value: &Value, paths: &HashSet<String>, path: &str) -> Option<Value> {
    let at = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    match value {
        Value::Null if paths.contains(path) => None,
        // An array element that turned `undefined` fails validation just as `null` does, so
        // it can stay `null`.
        Value::Array(items) => Some(Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    strip_nulls_at(item, paths, &at(&i.to_string())).unwrap_or(Value::Null)
                })
                .collect(),
        )),
        Value::Object(map) => Some(Value::Object(
            map.iter()
                .filter(|(key, v)| !(v.is_null() && paths.contains(&at(key))))
                .filter_map(|(key, v)| Some((key.clone(), strip_nulls_at(v, paths, &at(key))?)))
                .collect(),
        )),
        other => Some(other.clone()),
    }
}

/// Removes every `null` object property, recursively (array elements are kept).
fn strip_all_nulls(value: &Value) -> Option<Value> {
    match value {
        Value::Null => None,
        Value::Array(items) => Some(Value::Array(
            items
                .iter()
                .map(|item| strip_all_nulls(item).unwrap_or(Value::Null))
                .collect(),
        )),
        Value::Object(map) => Some(Value::Object(
            map.iter()
                .filter_map(|(key, v)| Some((key.clone(), strip_all_nulls(v)?)))
                .collect(),
        )),
        other => Some(other.clone()),
    }
}

fn join_path(path: &[Segment]) -> String {
    path.iter()
        .map(Segment::to_string)
        .collect::<Vec<_>>()
        .join(".")
}

/// A node of the issue tree, fields in insertion order.
#[derive(Default)]
struct ErrorNode {
    errors: Vec<String>,
    fields: Vec<(String, ErrorNode)>,
}

impl ErrorNode {
    /// The subtree for `key`, created when missing.
    fn child(&mut self, key: &str) -> &mut ErrorNode {
        let index = match self.fields.iter().position(|(k, _)| k == key) {
            Some(index) => index,
            None => {
                self.fields.push((key.to_owned(), ErrorNode::default()));
                self.fields.len() - 1
            }
        };
        &mut self.fields[index].1
    }

    fn to_json(&self) -> Value {
        let fields: Map<String, Value> = self
            .fields
            .iter()
            .map(|(key, node)| (key.clone(), node.to_json()))
            .collect();
        json!({ "errors": self.errors, "fields": fields })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::model::TaskStatus;

    fn write_err(args: Value) -> String {
        validate_write(&args).unwrap_err().message()
    }

    fn update_err(args: Value) -> String {
        validate_update(&args).unwrap_err().message()
    }

    fn body(message: &str) -> &str {
        let start = message.find('\n').unwrap() + 1;
        let end = message.find("\n\nProvided arguments: ").unwrap();
        &message[start..end]
    }

    #[test]
    fn update_without_fields_matches_reference_text() {
        assert_eq!(
            update_err(json!({"id": "task_fix_bug"})),
            "Tool input validation failed for task_update. Please fix the following errors and try again:\n- root: Provide at least one field to update.\n\nProvided arguments: {\n  \"id\": \"task_fix_bug\"\n}"
        );
    }

    #[test]
    fn non_object_arguments() {
        let message = write_err(json!("tasks"));
        assert_eq!(
            body(&message),
            "- root: Invalid input: expected object, received string"
        );
        assert!(message.ends_with("Provided arguments: \"tasks\""));
        assert_eq!(
            body(&update_err(json!([1]))),
            "- root: Invalid input: expected object, received array"
        );
        let err = validate_check(&json!(5)).unwrap_err();
        assert_eq!(err.tool, "task_check");
        assert_eq!(
            err.issues[0].message,
            "Invalid input: expected object, received number"
        );
    }

    #[test]
    fn null_arguments_count_as_empty_object() {
        let message = write_err(Value::Null);
        assert_eq!(
            body(&message),
            "- tasks: Invalid input: expected array, received undefined"
        );
        assert!(message.ends_with("Provided arguments: null"));
        assert!(validate_check(&Value::Null).is_ok());
    }

    #[test]
    fn wrong_types_are_reported_per_field_in_schema_order() {
        let message = write_err(json!({"tasks": [
            {"activeForm": 1, "status": 5, "content": 3, "id": ""},
            "x",
            {"content": [], "status": "done", "activeForm": "ok"}
        ]}));
        assert_eq!(
            body(&message),
            "- tasks.0.id: Too small: expected string to have >=1 characters\n\
             - tasks.0.content: Invalid input: expected string, received number\n\
             - tasks.0.status: Invalid option: expected one of \"pending\"|\"in_progress\"|\"completed\"\n\
             - tasks.0.activeForm: Invalid input: expected string, received number\n\
             - tasks.1: Invalid input: expected object, received string\n\
             - tasks.2.content: Invalid input: expected string, received array\n\
             - tasks.2.content: Too small: expected array to have >=1 items\n\
             - tasks.2.status: Invalid option: expected one of \"pending\"|\"in_progress\"|\"completed\""
        );
    }

    #[test]
    fn missing_fields_are_undefined() {
        assert_eq!(
            body(&write_err(json!({"tasks": [{}]}))),
            "- tasks.0.content: Invalid input: expected string, received undefined\n\
             - tasks.0.status: Invalid option: expected one of \"pending\"|\"in_progress\"|\"completed\"\n\
             - tasks.0.activeForm: Invalid input: expected string, received undefined"
        );
        assert_eq!(
            body(&update_err(json!({}))),
            "- id: Invalid input: expected string, received undefined"
        );
        assert_eq!(
            body(&validate_complete(&json!({"id": 7})).unwrap_err().message()),
            "- id: Invalid input: expected string, received number"
        );
    }

    #[test]
    fn update_refinement_runs_after_non_aborting_issues_only() {
        assert_eq!(
            body(&update_err(json!({"id": ""}))),
            "- id: Too small: expected string to have >=1 characters\n- root: Provide at least one field to update."
        );
        assert_eq!(
            body(&update_err(json!({"id": 1}))),
            "- id: Invalid input: expected string, received number"
        );
        assert_eq!(
            body(&update_err(json!({"id": "a", "content": ""}))),
            "- content: Too small: expected string to have >=1 characters"
        );
    }

    #[test]
    fn nulls_for_optional_fields_are_accepted() {
        let input =
            validate_update(&json!({"id": "a", "content": null, "status": "completed"})).unwrap();
        assert_eq!(input.content, None);
        assert_eq!(input.status, Some(TaskStatus::Completed));
        let write = validate_write(&json!({"tasks": [
            {"id": null, "content": "a", "status": "pending", "activeForm": "b"}
        ]}))
        .unwrap();
        assert_eq!(write.tasks[0].id, None);
    }

    #[test]
    fn null_only_field_still_reports_the_first_issue() {
        // Stripping the null leaves no field to update: still an error, with the first
        // attempt's issue.
        assert_eq!(
            body(&update_err(json!({"id": "a", "content": null}))),
            "- content: Invalid input: expected string, received null"
        );
    }

    #[test]
    fn stringified_task_array_is_parsed() {
        let args =
            json!({"tasks": " [{\"content\":\"a\",\"status\":\"pending\",\"activeForm\":\"b\"}]"});
        let input = validate_write(&args).unwrap();
        assert_eq!(input.tasks[0].content, "a");
        assert_eq!(
            body(&write_err(json!({"tasks": "not json"}))),
            "- tasks: Invalid input: expected array, received string"
        );
    }

    #[test]
    fn extra_fields_are_ignored() {
        let input = validate_complete(&json!({"id": "a", "note": 1})).unwrap();
        assert_eq!(input.id, "a");
    }

    #[test]
    fn long_arguments_are_truncated() {
        let args = json!({"id": "x".repeat(300)});
        let message = validate_update(&args).unwrap_err().message();
        let quoted = message.split("Provided arguments: ").nth(1).unwrap();
        assert_eq!(
            quoted,
            format!("{{\n  \"id\": \"{}... (truncated)", "x".repeat(189))
        );
    }

    #[test]
    fn validation_errors_tree() {
        let err = validate_update(&json!({"id": ""})).unwrap_err();
        assert_eq!(
            err.validation_errors(),
            json!({
                "errors": ["Provide at least one field to update."],
                "fields": {"id": {"errors": ["Too small: expected string to have >=1 characters"], "fields": {}}}
            })
        );
        assert_eq!(err.error_code(), ErrorCode::InvalidArguments);
    }
}
