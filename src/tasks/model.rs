//! Task data and the outcome types of the task operations.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Lifecycle state of one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Not started yet.
    Pending,
    /// Being worked on (at most one per list).
    InProgress,
    /// Finished.
    Completed,
}

impl TaskStatus {
    /// All statuses in the order the reference lists them.
    pub const ALL: [TaskStatus; 3] = [Self::Pending, Self::InProgress, Self::Completed];

    /// The wire name: `pending`, `in_progress` or `completed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::InProgress => "in_progress",
            Self::Completed => "completed",
        }
    }

    /// Parses a wire name; `None` for anything else (case-sensitive, like the reference).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_str() == name)
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One stored task. Field order matches the reference's JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// Stable identifier, unique within the list.
    pub id: String,
    /// Imperative description ("Fix the bug").
    pub content: String,
    /// Current status.
    pub status: TaskStatus,
    /// Present-continuous form shown while in progress ("Fixing the bug").
    pub active_form: String,
}

/// One task of a `task_write` input; the id is optional and assigned by [`super::write`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskDraft {
    /// Requested id; `None` (or empty) lets the id be assigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Imperative description.
    pub content: String,
    /// Requested status.
    pub status: TaskStatus,
    /// Present-continuous form.
    pub active_form: String,
}

/// Validated input of `task_write`: the complete new list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WriteInput {
    /// The new list, in order.
    pub tasks: Vec<TaskDraft>,
}

/// Validated input of `task_update`: the fields to patch on one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateInput {
    /// Id of the task to patch.
    pub id: String,
    /// New content, if given.
    pub content: Option<String>,
    /// New status, if given.
    pub status: Option<TaskStatus>,
    /// New active form, if given.
    pub active_form: Option<String>,
}

/// Validated input of `task_complete`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompleteInput {
    /// Id of the task to mark completed.
    pub id: String,
}

/// Machine-readable reason of an `is_error` outcome (agentd's own, beyond the reference).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ErrorCode {
    /// Not an error.
    #[default]
    None,
    /// The caller has no thread/resource (no memory).
    MemoryRequired,
    /// update/complete named an unknown id.
    TaskNotFound,
    /// write would leave more than one task in progress.
    MultipleInProgress,
    /// The tool arguments failed validation.
    InvalidArguments,
}

/// Result of write / update / complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The text the model reads.
    pub content: String,
    /// The list after the operation (the unchanged list on errors).
    pub tasks: Vec<Task>,
    /// Whether the reference reports an error.
    pub is_error: bool,
    /// Why, when `is_error`.
    pub error_code: ErrorCode,
    /// True when `tasks` must be persisted as the thread's new list.
    pub store: bool,
}

impl Outcome {
    /// A successful mutation whose list must be stored.
    pub(super) fn stored(content: String, tasks: Vec<Task>) -> Self {
        Self {
            content,
            tasks,
            is_error: false,
            error_code: ErrorCode::None,
            store: true,
        }
    }

    /// A domain error: nothing is stored.
    pub(super) fn error(code: ErrorCode, content: String, tasks: Vec<Task>) -> Self {
        Self {
            content,
            tasks,
            is_error: true,
            error_code: code,
            store: false,
        }
    }

    /// The tool result object the model sees: `{"content", "tasks", "isError"}`.
    pub fn to_tool_result_json(&self) -> Value {
        json!({
            "content": self.content,
            "tasks": self.tasks,
            "isError": self.is_error,
        })
    }
}

/// Counts reported by `task_check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Number of tasks.
    pub total: u32,
    /// Completed tasks.
    pub completed: u32,
    /// In-progress tasks.
    pub in_progress: u32,
    /// Pending tasks.
    pub pending: u32,
    /// `in_progress + pending`.
    pub incomplete: u32,
    /// `total > 0`.
    pub has_tasks: bool,
    /// `total > 0 && incomplete == 0`.
    pub all_completed: bool,
}

/// Result of `task_check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckOutcome {
    /// The text the model reads.
    pub content: String,
    /// The whole list.
    pub tasks: Vec<Task>,
    /// Whether the reference reports an error (only without memory).
    pub is_error: bool,
    /// Why, when `is_error`.
    pub error_code: ErrorCode,
    /// Counts.
    pub summary: Summary,
    /// In-progress tasks, then pending ones, each in list order.
    pub incomplete_tasks: Vec<Task>,
}

impl CheckOutcome {
    /// The tool result object: `{"content", "tasks", "isError", "summary", "incompleteTasks"}`.
    pub fn to_tool_result_json(&self) -> Value {
        json!({
            "content": self.content,
            "tasks": self.tasks,
            "isError": self.is_error,
            "summary": self.summary,
            "incompleteTasks": self.incomplete_tasks,
        })
    }
}
