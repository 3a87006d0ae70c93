//! The task-list rules (shared/spec/tasks.md) over generated sequences of write / update /
//! complete on one list: ids stay unique, a successful write leaves at most one task in
//! progress, an unknown id changes nothing, and no input panics.

use std::collections::HashSet;

use agentd::tasks::{
    self, CompleteInput, ErrorCode, Outcome, Task, TaskDraft, TaskStatus, UpdateInput, WriteInput,
};
use proptest::prelude::*;

use crate::strings::{colliding_text, draft_id};

/// Which task an update or complete names.
#[derive(Debug, Clone)]
enum Target {
    /// The task at this index of the current list (modulo its length), when it has any.
    Existing(usize),
    /// Any id, most likely unknown.
    Any(String),
}

/// One operation on the list.
#[derive(Debug, Clone)]
enum Op {
    Write(Vec<TaskDraft>),
    Update {
        target: Target,
        content: Option<String>,
        status: Option<TaskStatus>,
        active_form: Option<String>,
    },
    Complete(Target),
}

fn status() -> impl Strategy<Value = TaskStatus> {
    prop::sample::select(TaskStatus::ALL.to_vec())
}

fn draft() -> impl Strategy<Value = TaskDraft> {
    (draft_id(), colliding_text(), status(), colliding_text()).prop_map(
        |(id, content, status, active_form)| TaskDraft {
            id,
            content,
            status,
            active_form,
        },
    )
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        3 => any::<usize>().prop_map(Target::Existing),
        1 => colliding_text().prop_map(Target::Any),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => prop::collection::vec(draft(), 0..7).prop_map(Op::Write),
        2 => (
            target(),
            prop::option::of(colliding_text()),
            prop::option::of(status()),
            prop::option::of(colliding_text()),
        )
            .prop_map(|(target, content, status, active_form)| Op::Update {
                target,
                content,
                status,
                active_form,
            }),
        1 => target().prop_map(Op::Complete),
    ]
}

/// The id a target names on `list`.
fn resolve(target: &Target, list: &[Task]) -> String {
    match target {
        Target::Existing(i) if !list.is_empty() => list[i % list.len()].id.clone(),
        Target::Existing(_) => "task_nothing_here".to_owned(),
        Target::Any(id) => id.clone(),
    }
}

fn in_progress(list: &[Task]) -> usize {
    list.iter()
        .filter(|t| t.status == TaskStatus::InProgress)
        .count()
}

fn assert_unique_ids(list: &[Task]) -> Result<(), TestCaseError> {
    let ids: HashSet<&str> = list.iter().map(|t| t.id.as_str()).collect();
    prop_assert_eq!(ids.len(), list.len(), "duplicate ids in {:?}", list);
    prop_assert!(
        list.iter().all(|t| !t.id.is_empty()),
        "empty id in {:?}",
        list
    );
    Ok(())
}

/// An update or complete that named an unknown id: an error that changed nothing.
fn assert_not_found(out: &Outcome, prev: &[Task], id: &str) -> Result<(), TestCaseError> {
    prop_assert!(out.is_error && !out.store);
    prop_assert_eq!(out.error_code, ErrorCode::TaskNotFound);
    prop_assert_eq!(&out.tasks, prev);
    let expected_head = format!("Task not found: {id}\n\n");
    prop_assert!(out.content.starts_with(&expected_head));
    Ok(())
}

fn check_write(prev: &[Task], drafts: &[TaskDraft], out: &Outcome) -> Result<(), TestCaseError> {
    let wanted_in_progress = drafts
        .iter()
        .filter(|d| d.status == TaskStatus::InProgress)
        .count();
    if wanted_in_progress > 1 {
        prop_assert!(out.is_error && !out.store);
        prop_assert_eq!(out.error_code, ErrorCode::MultipleInProgress);
        prop_assert_eq!(&out.tasks, prev);
        return Ok(());
    }
    prop_assert!(!out.is_error && out.store);
    assert_unique_ids(&out.tasks)?;
    prop_assert!(in_progress(&out.tasks) <= 1);
    // The list is the input in order; only ids are assigned.
    prop_assert_eq!(out.tasks.len(), drafts.len());
    let mut explicit_seen = HashSet::new();
    for (task, draft) in out.tasks.iter().zip(drafts) {
        prop_assert_eq!(&task.content, &draft.content);
        prop_assert_eq!(task.status, draft.status);
        prop_assert_eq!(&task.active_form, &draft.active_form);
        // The first task asking for a (non-empty) id gets it: generated ids avoid them.
        if let Some(id) = draft.id.as_deref().filter(|id| !id.is_empty())
            && explicit_seen.insert(id)
        {
            prop_assert_eq!(&task.id, id);
        }
    }
    let completed = out
        .tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Completed)
        .count();
    let expected_head = format!("Tasks updated: [{completed}/{} completed]", drafts.len());
    prop_assert!(out.content.starts_with(&expected_head));
    Ok(())
}

fn check_update(
    prev: &[Task],
    id: &str,
    patch: &UpdateInput,
    out: &Outcome,
) -> Result<(), TestCaseError> {
    let Some(index) = prev.iter().position(|t| t.id == id) else {
        return assert_not_found(out, prev, id);
    };
    prop_assert!(!out.is_error && out.store);
    // Same tasks, same order, same ids: only fields and statuses change.
    let ids = |list: &[Task]| list.iter().map(|t| t.id.clone()).collect::<Vec<_>>();
    prop_assert_eq!(ids(&out.tasks), ids(prev));
    assert_unique_ids(&out.tasks)?;
    prop_assert!(in_progress(&out.tasks) <= 1);
    let updated = &out.tasks[index];
    if let Some(content) = &patch.content {
        prop_assert_eq!(&updated.content, content);
    }
    if let Some(active_form) = &patch.active_form {
        prop_assert_eq!(&updated.active_form, active_form);
    }
    if let Some(status) = patch.status {
        prop_assert_eq!(updated.status, status);
    }
    for (i, (before, after)) in prev.iter().zip(&out.tasks).enumerate() {
        if i == index {
            continue;
        }
        prop_assert_eq!(&before.content, &after.content);
        prop_assert_eq!(&before.active_form, &after.active_form);
        // Others only ever go back from in progress to pending.
        prop_assert!(
            before.status == after.status
                || (before.status == TaskStatus::InProgress && after.status == TaskStatus::Pending)
        );
    }
    Ok(())
}

fn check_complete(prev: &[Task], id: &str, out: &Outcome) -> Result<(), TestCaseError> {
    let Some(index) = prev.iter().position(|t| t.id == id) else {
        return assert_not_found(out, prev, id);
    };
    prop_assert!(!out.is_error && out.store);
    let mut expected = prev.to_vec();
    expected[index].status = TaskStatus::Completed;
    prop_assert_eq!(&out.tasks, &expected);
    Ok(())
}

/// The summary and incomplete tasks of task_check agree with the list.
fn check_check(list: &[Task]) -> Result<(), TestCaseError> {
    let out = tasks::check(list);
    let s = out.summary;
    prop_assert_eq!(s.total as usize, list.len());
    prop_assert_eq!(s.completed + s.in_progress + s.pending, s.total);
    prop_assert_eq!(s.incomplete, s.in_progress + s.pending);
    prop_assert_eq!(s.all_completed, s.total > 0 && s.incomplete == 0);
    prop_assert_eq!(out.incomplete_tasks.len(), s.incomplete as usize);
    prop_assert!(!out.is_error);
    Ok(())
}

proptest! {
    #![proptest_config(crate::config(96))]

    #[test]
    fn sequences_of_operations_keep_the_rules(ops in prop::collection::vec(op(), 1..12)) {
        let mut list: Vec<Task> = Vec::new();
        for op in ops {
            let out = match &op {
                Op::Write(drafts) => {
                    let input = WriteInput { tasks: drafts.clone() };
                    let out = tasks::write(&list, &input);
                    check_write(&list, drafts, &out)?;
                    out
                }
                Op::Update { target, content, status, active_form } => {
                    let patch = UpdateInput {
                        id: resolve(target, &list),
                        content: content.clone(),
                        status: *status,
                        active_form: active_form.clone(),
                    };
                    let out = tasks::update(&list, &patch);
                    check_update(&list, &patch.id, &patch, &out)?;
                    out
                }
                Op::Complete(target) => {
                    let id = resolve(target, &list);
                    let out = tasks::complete(&list, &CompleteInput { id: id.clone() });
                    check_complete(&list, &id, &out)?;
                    out
                }
            };
            if out.store {
                list = out.tasks;
            }
            check_check(&list)?;
        }
    }

    /// A write with no ids over any previous list: ids come from the content's slug, and an
    /// unchanged list written again keeps its ids (the reuse rule).
    #[test]
    fn rewriting_the_same_contents_keeps_the_ids(
        drafts in prop::collection::vec(draft(), 0..7),
    ) {
        // At most one in progress, so the first write succeeds.
        let mut seen_in_progress = false;
        let drafts = drafts
            .into_iter()
            .map(|mut d| {
                if d.status == TaskStatus::InProgress {
                    if seen_in_progress {
                        d.status = TaskStatus::Pending;
                    }
                    seen_in_progress = true;
                }
                d
            })
            .collect();
        let first = tasks::write(&[], &WriteInput { tasks: drafts });
        prop_assert!(first.store);
        let again = WriteInput {
            tasks: first
                .tasks
                .iter()
                .map(|t| TaskDraft {
                    id: None,
                    content: t.content.clone(),
                    status: t.status,
                    active_form: t.active_form.clone(),
                })
                .collect(),
        };
        let second = tasks::write(&first.tasks, &again);
        prop_assert!(second.store);
        assert_unique_ids(&second.tasks)?;
        // Contents written once keep their id; repeated contents are not reused (ambiguous).
        for (before, after) in first.tasks.iter().zip(&second.tasks) {
            let copies = first.tasks.iter().filter(|t| t.content == before.content).count();
            if copies == 1 {
                prop_assert_eq!(&before.id, &after.id);
            }
        }
    }
}
