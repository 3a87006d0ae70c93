//! The exact texts the reference produces (tool result `content`).

use super::model::{Summary, Task, TaskStatus};

/// Content of every operation when the caller has no memory-backed thread.
pub const MEMORY_REQUIRED_MESSAGE: &str = "Task tools require agent memory (a memory-backed thread). No task was recorded. Configure the agent with Memory to use the task list.";

/// Content of a write that would leave several tasks in progress.
pub const MULTIPLE_IN_PROGRESS_MESSAGE: &str = "Only one task can be in_progress at a time.";

/// Content of `task_check` on an empty list.
pub const NO_TASKS_MESSAGE: &str =
    "No tasks found. Consider using task_write to create a task list for complex work.";

/// `- {id}: {content} ({status})` lines joined by `\n`.
fn id_lines(tasks: &[Task]) -> String {
    tasks
        .iter()
        .map(|t| format!("- {}: {} ({})", t.id, t.content, t.status))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Content of a successful write / update / complete.
pub fn list_result(tasks: &[Task]) -> String {
    let completed = tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Completed)
        .count();
    let mut text = format!("Tasks updated: [{completed}/{} completed]", tasks.len());
    // Only the first in-progress task is named, as in the reference.
    if let Some(current) = tasks.iter().find(|t| t.status == TaskStatus::InProgress) {
        text.push_str(&format!(
            "\nCurrently: {} ({})",
            current.active_form, current.id
        ));
    }
    if !tasks.is_empty() {
        text.push_str("\nTask IDs:\n");
        text.push_str(&id_lines(tasks));
    }
    text
}

/// Content of update / complete with an unknown id.
pub fn task_not_found(id: &str, tasks: &[Task]) -> String {
    let available = if tasks.is_empty() {
        "No tasks are currently tracked.".to_owned()
    } else {
        format!("Available task IDs:\n{}", id_lines(tasks))
    };
    format!("Task not found: {id}\n\n{available}")
}

/// Content of `task_check`.
pub fn check_result(summary: &Summary, in_progress: &[&Task], pending: &[&Task]) -> String {
    if !summary.has_tasks {
        return NO_TASKS_MESSAGE.to_owned();
    }
    let mut text = format!(
        "Task Status: [{c}/{t} completed]\n- Completed: {c}\n- In Progress: {ip}\n- Pending: {p}\n\nAll tasks completed: {all}",
        c = summary.completed,
        t = summary.total,
        ip = summary.in_progress,
        p = summary.pending,
        all = if summary.all_completed { "YES" } else { "NO" },
    );
    if summary.all_completed {
        return text;
    }
    text.push_str("\n\nIncomplete tasks:");
    for (heading, group) in [("In Progress", in_progress), ("Pending", pending)] {
        if group.is_empty() {
            continue;
        }
        text.push_str(&format!("\n\n{heading}:"));
        for task in group {
            text.push_str(&format!("\n- {}: {}", task.id, task.content));
        }
    }
    text.push_str("\n\nContinue working on these tasks before ending.");
    text
}
