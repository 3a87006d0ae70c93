//! The four task operations on a previously stored list. Pure: the caller loads the list,
//! calls one of these, and persists `Outcome::tasks` when `Outcome::store` is set.

use super::ids::assign_ids;
use super::model::{
    CheckOutcome, CompleteInput, ErrorCode, Outcome, Summary, Task, TaskStatus, UpdateInput,
    WriteInput,
};
use super::text;

/// Replaces the whole list (`task_write`).
pub fn write(prev: &[Task], input: &WriteInput) -> Outcome {
    let tasks = assign_ids(&input.tasks, prev);
    if count(&tasks, TaskStatus::InProgress) > 1 {
        return Outcome::error(
            ErrorCode::MultipleInProgress,
            text::MULTIPLE_IN_PROGRESS_MESSAGE.to_owned(),
            prev.to_vec(),
        );
    }
    Outcome::stored(text::list_result(&tasks), tasks)
}

/// Patches one task by id (`task_update`).
pub fn update(prev: &[Task], input: &UpdateInput) -> Outcome {
    let Some(index) = position(prev, &input.id) else {
        return not_found(prev, &input.id);
    };
    let mut tasks = prev.to_vec();
    let task = &mut tasks[index];
    if let Some(content) = &input.content {
        task.content.clone_from(content);
    }
    if let Some(status) = input.status {
        task.status = status;
    }
    if let Some(active_form) = &input.active_form {
        task.active_form.clone_from(active_form);
    }
    demote_extra_in_progress(&mut tasks, index);
    Outcome::stored(text::list_result(&tasks), tasks)
}

/// Marks one task completed by id (`task_complete`); nothing else changes.
pub fn complete(prev: &[Task], input: &CompleteInput) -> Outcome {
    let Some(index) = position(prev, &input.id) else {
        return not_found(prev, &input.id);
    };
    let mut tasks = prev.to_vec();
    tasks[index].status = TaskStatus::Completed;
    Outcome::stored(text::list_result(&tasks), tasks)
}

/// Reports progress on the list (`task_check`).
pub fn check(list: &[Task]) -> CheckOutcome {
    let in_progress = with_status(list, TaskStatus::InProgress);
    let pending = with_status(list, TaskStatus::Pending);
    let summary = summarize(list);
    CheckOutcome {
        content: text::check_result(&summary, &in_progress, &pending),
        tasks: list.to_vec(),
        is_error: false,
        error_code: ErrorCode::None,
        summary,
        incomplete_tasks: in_progress.into_iter().chain(pending).cloned().collect(),
    }
}

/// The answer of write / update / complete without a memory-backed thread.
pub fn memory_required() -> Outcome {
    Outcome::error(
        ErrorCode::MemoryRequired,
        text::MEMORY_REQUIRED_MESSAGE.to_owned(),
        Vec::new(),
    )
}

/// The answer of check without a memory-backed thread (all-zero summary).
pub fn memory_required_check() -> CheckOutcome {
    CheckOutcome {
        content: text::MEMORY_REQUIRED_MESSAGE.to_owned(),
        tasks: Vec::new(),
        is_error: true,
        error_code: ErrorCode::MemoryRequired,
        summary: summarize(&[]),
        incomplete_tasks: Vec::new(),
    }
}

/// Counts of the list.
pub fn summarize(list: &[Task]) -> Summary {
    let in_progress = count(list, TaskStatus::InProgress);
    let pending = count(list, TaskStatus::Pending);
    let total = to_u32(list.len());
    let incomplete = in_progress + pending;
    Summary {
        total,
        completed: count(list, TaskStatus::Completed),
        in_progress,
        pending,
        incomplete,
        has_tasks: total > 0,
        all_completed: total > 0 && incomplete == 0,
    }
}

fn not_found(prev: &[Task], id: &str) -> Outcome {
    Outcome::error(
        ErrorCode::TaskNotFound,
        text::task_not_found(id, prev),
        prev.to_vec(),
    )
}

fn position(tasks: &[Task], id: &str) -> Option<usize> {
    tasks.iter().position(|t| t.id == id)
}

fn with_status(list: &[Task], status: TaskStatus) -> Vec<&Task> {
    list.iter().filter(|t| t.status == status).collect()
}

fn count(list: &[Task], status: TaskStatus) -> u32 {
    to_u32(list.iter().filter(|t| t.status == status).count())
}

/// Saturating: a list of four billion tasks is not a case worth an error path.
fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Leaves at most one task in progress: the preferred one if it is in progress, otherwise
/// the last one; the others go back to pending. An update never fails for this.
fn demote_extra_in_progress(tasks: &mut [Task], preferred: usize) {
    let in_progress: Vec<usize> = (0..tasks.len())
        .filter(|&i| tasks[i].status == TaskStatus::InProgress)
        .collect();
    let Some(&last) = in_progress.last() else {
        return;
    };
    let keep = if in_progress.contains(&preferred) {
        preferred
    } else {
        last
    };
    for i in in_progress.into_iter().filter(|&i| i != keep) {
        tasks[i].status = TaskStatus::Pending;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, status: TaskStatus) -> Task {
        Task {
            id: id.to_owned(),
            content: id.to_uppercase(),
            status,
            active_form: format!("doing {id}"),
        }
    }

    fn statuses(tasks: &[Task]) -> Vec<TaskStatus> {
        tasks.iter().map(|t| t.status).collect()
    }

    #[test]
    fn update_of_a_non_in_progress_task_keeps_the_last_in_progress() {
        use TaskStatus::*;
        // Stored lists never hold two in-progress tasks via write, but a list handed in from
        // elsewhere might; the rule still picks the last one.
        let prev = [
            task("a", InProgress),
            task("b", InProgress),
            task("c", Pending),
        ];
        let out = update(
            &prev,
            &UpdateInput {
                id: "c".into(),
                content: Some("C2".into()),
                status: None,
                active_form: None,
            },
        );
        assert_eq!(statuses(&out.tasks), [Pending, InProgress, Pending]);
        assert!(out.store && !out.is_error);
    }

    #[test]
    fn update_patches_only_given_fields() {
        let prev = [task("a", TaskStatus::Pending)];
        let out = update(
            &prev,
            &UpdateInput {
                id: "a".into(),
                content: None,
                status: None,
                active_form: Some("Now doing".into()),
            },
        );
        assert_eq!(out.tasks[0].content, "A");
        assert_eq!(out.tasks[0].active_form, "Now doing");
    }

    #[test]
    fn write_error_keeps_previous_list_and_stores_nothing() {
        let prev = [task("a", TaskStatus::Pending)];
        let draft = |c: &str| crate::tasks::model::TaskDraft {
            id: None,
            content: c.into(),
            status: TaskStatus::InProgress,
            active_form: c.into(),
        };
        let out = write(
            &prev,
            &WriteInput {
                tasks: vec![draft("x"), draft("y")],
            },
        );
        assert_eq!(out.error_code, ErrorCode::MultipleInProgress);
        assert_eq!(out.tasks, prev);
        assert!(!out.store);
    }

    #[test]
    fn check_all_completed() {
        let list = [task("a", TaskStatus::Completed)];
        let out = check(&list);
        assert!(out.summary.all_completed);
        assert_eq!(
            out.content,
            "Task Status: [1/1 completed]\n- Completed: 1\n- In Progress: 0\n- Pending: 0\n\nAll tasks completed: YES"
        );
    }
}
