//! The task list: pure rules of the built-in task tools (`task_write`, `task_update`,
//! `task_complete`, `task_check`) and of the task-list state signal, matching the reference
//! (Mastra `@mastra/core` 1.71.0) byte for byte. No I/O.
//!
//! A caller (TaskService or a tool call inside an agent run):
//! 1. validates the raw arguments (`validate_*`); a failure is `INVALID_ARGUMENT` over gRPC,
//!    or [`ValidationError::to_tool_result_json`] as the tool result inside a run;
//! 2. without a memory-backed thread answers [`memory_required`] / [`memory_required_check`];
//! 3. otherwise loads the stored list, calls the operation, and stores `Outcome::tasks`
//!    when `Outcome::store` is set.

mod ids;
pub(crate) mod jsjson;
mod model;
mod ops;
mod schema;
pub mod signal;
mod text;
mod tools;
mod validate;

pub use ids::{assign_ids, slugify};
pub use model::{
    CheckOutcome, CompleteInput, ErrorCode, Outcome, Summary, Task, TaskDraft, TaskStatus,
    UpdateInput, WriteInput,
};
pub use ops::{check, complete, memory_required, memory_required_check, summarize, update, write};
pub use text::{MEMORY_REQUIRED_MESSAGE, MULTIPLE_IN_PROGRESS_MESSAGE, NO_TASKS_MESSAGE};
pub use tools::{TOOL_NAMES, tool_definitions};
pub use validate::{
    Issue, ValidationError, validate_check, validate_complete, validate_update, validate_write,
};
