//! The input schemas of the four tools, checked the way the reference's zod v4 schemas
//! check them: same issues, same messages, same order.
//!
//! zod semantics reproduced here:
//! - object fields are checked in schema order (`id`, `content`, `status`, `activeForm`),
//!   array items in index order; unknown keys are ignored;
//! - a value of the wrong type yields one `invalid_type` issue; the `min(1)` length check
//!   still runs on values that have a length (so `[]` for a string also gets `too_small`);
//! - `invalid_type` / `invalid_value` issues abort the object's refinement, `too_small`
//!   issues do not (zod marks them `continue`), so `{"id": ""}` for `task_update` reports
//!   both the empty id and the missing fields.

use serde_json::{Map, Value};

use super::model::{CompleteInput, TaskDraft, TaskStatus, UpdateInput, WriteInput};

/// One step of an issue path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Segment {
    Key(&'static str),
    Index(usize),
}

impl std::fmt::Display for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Key(key) => f.write_str(key),
            Self::Index(index) => write!(f, "{index}"),
        }
    }
}

/// A validation issue as zod reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RawIssue {
    pub path: Vec<Segment>,
    pub message: String,
    /// zod's `continue !== true`: the issue stops later refinements of enclosing objects.
    pub aborts: bool,
}

/// Collects issues while walking the input.
#[derive(Debug, Default)]
pub(super) struct Issues(pub Vec<RawIssue>);

impl Issues {
    fn push(&mut self, path: &[Segment], message: String, aborts: bool) {
        self.0.push(RawIssue {
            path: path.to_vec(),
            message,
            aborts,
        });
    }

    fn aborted(&self) -> bool {
        self.0.iter().any(|issue| issue.aborts)
    }
}

/// Message of the `task_update` refinement.
const NO_FIELD_MESSAGE: &str = "Provide at least one field to update.";

/// Fields of `task_update` of which at least one must be given.
const UPDATE_FIELDS: [&str; 3] = ["content", "status", "activeForm"];

/// `task_write`: `{tasks: [{id?, content, status, activeForm}]}`.
pub(super) fn write(input: Option<&Value>, issues: &mut Issues) -> Option<WriteInput> {
    let root = object(input, &[], issues)?;
    let path = [Segment::Key("tasks")];
    let items = array(root.get("tasks"), &path, issues)?;
    let drafts: Vec<Option<TaskDraft>> = items
        .iter()
        .enumerate()
        .map(|(index, item)| draft(item, &[path[0].clone(), Segment::Index(index)], issues))
        .collect();
    let tasks = drafts.into_iter().collect::<Option<Vec<_>>>()?;
    Some(WriteInput { tasks })
}

/// `task_update`: `{id, content?, status?, activeForm?}` with at least one optional field.
pub(super) fn update(input: Option<&Value>, issues: &mut Issues) -> Option<UpdateInput> {
    let root = object(input, &[], issues)?;
    let id = string_min1(root.get("id"), &[Segment::Key("id")], issues);
    let content = optional(root.get("content"), |v| {
        string_min1(Some(v), &[Segment::Key("content")], issues)
    });
    let status = optional(root.get("status"), |v| {
        status_enum(Some(v), &[Segment::Key("status")], issues)
    });
    let active_form = optional(root.get("activeForm"), |v| {
        string_min1(Some(v), &[Segment::Key("activeForm")], issues)
    });
    // The refinement sees the parsed object; a field present with a bad type has already
    // aborted it, so "given" is simply "present".
    if !issues.aborted() && !UPDATE_FIELDS.iter().any(|key| root.contains_key(*key)) {
        issues.push(&[], NO_FIELD_MESSAGE.to_owned(), false);
    }
    Some(UpdateInput {
        id: id?,
        content: content?,
        status: status?,
        active_form: active_form?,
    })
}

/// `task_complete`: `{id}`.
pub(super) fn complete(input: Option<&Value>, issues: &mut Issues) -> Option<CompleteInput> {
    let root = object(input, &[], issues)?;
    let id = string_min1(root.get("id"), &[Segment::Key("id")], issues)?;
    Some(CompleteInput { id })
}

/// `task_check`: `{}` (any object; extra keys ignored).
pub(super) fn check(input: Option<&Value>, issues: &mut Issues) -> Option<()> {
    object(input, &[], issues).map(|_| ())
}

fn draft(item: &Value, path: &[Segment], issues: &mut Issues) -> Option<TaskDraft> {
    let root = object(Some(item), path, issues)?;
    let at = |key| [path, &[Segment::Key(key)]].concat();
    let id = optional(root.get("id"), |v| string_min1(Some(v), &at("id"), issues));
    let content = string_min1(root.get("content"), &at("content"), issues);
    let status = status_enum(root.get("status"), &at("status"), issues);
    let active_form = string_min1(root.get("activeForm"), &at("activeForm"), issues);
    Some(TaskDraft {
        id: id?,
        content: content?,
        status: status?,
        active_form: active_form?,
    })
}

/// An optional field: absent is valid (`Some(None)`), present must pass `check`.
fn optional<T>(
    value: Option<&Value>,
    check: impl FnOnce(&Value) -> Option<T>,
) -> Option<Option<T>> {
    match value {
        None => Some(None),
        Some(v) => check(v).map(Some),
    }
}

fn object<'v>(
    value: Option<&'v Value>,
    path: &[Segment],
    issues: &mut Issues,
) -> Option<&'v Map<String, Value>> {
    match value {
        Some(Value::Object(map)) => Some(map),
        other => {
            issues.push(path, invalid_type("object", other), true);
            None
        }
    }
}

fn array<'v>(
    value: Option<&'v Value>,
    path: &[Segment],
    issues: &mut Issues,
) -> Option<&'v [Value]> {
    match value {
        Some(Value::Array(items)) => Some(items),
        other => {
            issues.push(path, invalid_type("array", other), true);
            None
        }
    }
}

/// `z.string().min(1)`.
fn string_min1(value: Option<&Value>, path: &[Segment], issues: &mut Issues) -> Option<String> {
    match value {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(Value::String(_)) => {
            issues.push(path, too_small("string", "characters"), false);
            None
        }
        other => {
            issues.push(path, invalid_type("string", other), true);
            // zod runs the length check on anything with a length, whatever its type. Of
            // JSON values only arrays have one (objects with a `length` key are not
            // emulated).
            if let Some(Value::Array(items)) = other
                && items.is_empty()
            {
                issues.push(path, too_small("array", "items"), false);
            }
            None
        }
    }
}

/// `z.enum(["pending", "in_progress", "completed"])`: anything else, of any type, is an
/// `invalid_value`.
fn status_enum(value: Option<&Value>, path: &[Segment], issues: &mut Issues) -> Option<TaskStatus> {
    let status = value.and_then(Value::as_str).and_then(TaskStatus::parse);
    if status.is_none() {
        let options: Vec<String> = TaskStatus::ALL
            .iter()
            .map(|s| format!("\"{}\"", s.as_str()))
            .collect();
        issues.push(
            path,
            format!("Invalid option: expected one of {}", options.join("|")),
            true,
        );
    }
    status
}

fn invalid_type(expected: &str, received: Option<&Value>) -> String {
    format!(
        "Invalid input: expected {expected}, received {}",
        type_name(received)
    )
}

fn too_small(origin: &str, unit: &str) -> String {
    format!("Too small: expected {origin} to have >=1 {unit}")
}

/// zod's name for the type of a value (`undefined` for a missing field).
fn type_name(value: Option<&Value>) -> &'static str {
    match value {
        None => "undefined",
        Some(Value::Null) => "null",
        Some(Value::Bool(_)) => "boolean",
        Some(Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Array(_)) => "array",
        Some(Value::Object(_)) => "object",
    }
}
