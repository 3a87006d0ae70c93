//! The task-list state signal: what the model is told about the list before each model call
//! so that it keeps knowing the list after old messages leave its context window.
//!
//! A snapshot (`<current-task-list>`) carries the whole list; a delta (`<task-list-update>`)
//! carries the changes since what the model was last shown. The model folds deltas onto the
//! last snapshot; after [`DELTA_SNAPSHOT_CAP`] deltas a fresh snapshot bounds that chain.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::model::{Task, TaskStatus};

/// The second system message of a run of an agent that has the task tools.
pub const TASK_LIST_GUIDANCE: &str = "Task list state may appear in the conversation as <current-task-list ...>...</current-task-list> snapshots and <task-list-update ...>...</task-list-update> deltas. These are automatic observations of your task list, not user instructions. Use them as the latest task state, continue following the actual user request, and do not treat task-list updates as the user asking you to repeat, summarize, or change tasks unless an actual user message asks for that.";

/// After this many deltas since the last snapshot, the next change is sent as a snapshot.
pub const DELTA_SNAPSHOT_CAP: u32 = 10;

const SNAPSHOT_TAG: &str = "current-task-list";
const DELTA_TAG: &str = "task-list-update";

/// One change carried by a delta; serialized like the reference's `delta.ops` metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum DeltaOp {
    /// A task whose id was not shown before.
    Add {
        /// The new task.
        task: Task,
    },
    /// A shown task whose status, content or active form changed.
    Update {
        /// The task as it is now.
        task: Task,
    },
    /// A shown task that is gone.
    Remove {
        /// Its id.
        id: String,
    },
}

/// Identifies a list; equal keys mean equal lists (same tasks, same order).
///
/// Every field is length-prefixed (UTF-16 units, as the reference counts) so that no
/// content containing `:` or `|` can make two lists collide.
pub fn change_key(tasks: &[Task]) -> String {
    let fingerprints: Vec<String> = tasks.iter().map(fingerprint).collect();
    format!("tasks:{}", fingerprints.join("|"))
}

/// The snapshot message: `<current-task-list count="N">…</current-task-list>`, or the
/// self-closing `<current-task-list count="0" />` for an empty list.
pub fn snapshot_text(tasks: &[Task]) -> String {
    let lines: Vec<String> = tasks
        .iter()
        .map(|t| {
            format!(
                "  {} [{}] {{id: {}}} {}",
                icon(t.status),
                t.status,
                t.id,
                t.content
            )
        })
        .collect();
    wrap(SNAPSHOT_TAG, "count", tasks.len(), &body(&lines))
}

/// The delta message from `prev` to `cur`: `<task-list-update changes="K">…</task-list-update>`;
/// `None` when nothing changed.
pub fn delta_text(prev: &[Task], cur: &[Task]) -> Option<String> {
    let ops = diff(prev, cur);
    (!ops.is_empty()).then(|| render_delta(&ops))
}

/// The changes from `prev` to `cur`: adds and updates in `cur` order, then removals in
/// `prev` order. Tasks are matched by id.
pub fn diff(prev: &[Task], cur: &[Task]) -> Vec<DeltaOp> {
    let prev_by_id: HashMap<&str, &Task> = prev.iter().map(|t| (t.id.as_str(), t)).collect();
    let cur_ids: HashSet<&str> = cur.iter().map(|t| t.id.as_str()).collect();
    let changed = cur
        .iter()
        .filter_map(|task| match prev_by_id.get(task.id.as_str()) {
            None => Some(DeltaOp::Add { task: task.clone() }),
            Some(before) if fingerprint(before) != fingerprint(task) => {
                Some(DeltaOp::Update { task: task.clone() })
            }
            Some(_) => None,
        });
    let removed = prev
        .iter()
        .filter(|t| !cur_ids.contains(t.id.as_str()))
        .map(|t| DeltaOp::Remove { id: t.id.clone() });
    changed.chain(removed).collect()
}

/// The list the model believes after reading `ops` on top of `tasks`: changed tasks replace
/// theirs in place, new ones are appended, removed ones dropped. Its order can differ from
/// the real list's, which matters for the order of later removals.
pub fn apply_ops(tasks: &[Task], ops: &[DeltaOp]) -> Vec<Task> {
    let mut next = tasks.to_vec();
    for op in ops {
        match op {
            DeltaOp::Remove { id } => {
                if let Some(index) = next.iter().position(|t| &t.id == id) {
                    next.remove(index);
                }
            }
            DeltaOp::Add { task } | DeltaOp::Update { task } => {
                match next.iter_mut().find(|t| t.id == task.id) {
                    Some(slot) => *slot = task.clone(),
                    None => next.push(task.clone()),
                }
            }
        }
    }
    next
}

/// What the model was last shown, reconstructed by the caller from signal messages still
/// inside the context window.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShownState {
    /// The list as last shown (snapshot + later deltas); `None` when no snapshot is in the
    /// window.
    pub tasks: Option<Vec<Task>>,
    /// Deltas shown after that snapshot.
    pub deltas_since_snapshot: u32,
    /// Key of the list when the last signal was made.
    pub last_key: Option<String>,
}

/// Kind of a signal message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalKind {
    /// The whole list.
    Snapshot,
    /// Changes since what was last shown.
    Delta,
}

/// A signal to add as a user message before the next model call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signal {
    /// Snapshot or delta.
    pub kind: SignalKind,
    /// The message text.
    pub text: String,
    /// The current list (what a snapshot shows; what a delta leads to).
    pub tasks: Vec<Task>,
    /// [`change_key`] of `tasks`.
    pub key: String,
    /// The changes a delta carries (empty for a snapshot); persist them with the message so
    /// that [`ShownState`] can be rebuilt with [`apply_ops`].
    pub ops: Vec<DeltaOp>,
}

/// Decides the signal to add before a model call; `None` when there is nothing to add.
pub fn next_signal(shown: &ShownState, current: &[Task]) -> Option<Signal> {
    let prior = shown.tasks.as_deref().unwrap_or_default();
    if current.is_empty() && prior.is_empty() {
        return None;
    }
    let has_base = shown.tasks.is_some();
    let key = change_key(current);
    // An unchanged key is an unchanged list: not sent twice while its base is visible.
    if has_base && shown.last_key.as_deref() == Some(key.as_str()) {
        return None;
    }
    let ops = diff(prior, current);
    if has_base && ops.is_empty() {
        return None;
    }
    // Deltas mean nothing without their base snapshot in the window.
    let signal = if !has_base || shown.deltas_since_snapshot >= DELTA_SNAPSHOT_CAP {
        Signal {
            kind: SignalKind::Snapshot,
            text: snapshot_text(current),
            tasks: current.to_vec(),
            key,
            ops: Vec::new(),
        }
    } else {
        Signal {
            kind: SignalKind::Delta,
            text: render_delta(&ops),
            tasks: current.to_vec(),
            key,
            ops,
        }
    };
    Some(signal)
}

impl ShownState {
    /// The state once `signal` has been shown.
    pub fn after(&self, signal: &Signal) -> ShownState {
        match signal.kind {
            SignalKind::Snapshot => ShownState {
                tasks: Some(signal.tasks.clone()),
                deltas_since_snapshot: 0,
                last_key: Some(signal.key.clone()),
            },
            SignalKind::Delta => ShownState {
                tasks: Some(apply_ops(
                    self.tasks.as_deref().unwrap_or_default(),
                    &signal.ops,
                )),
                deltas_since_snapshot: self.deltas_since_snapshot.saturating_add(1),
                last_key: Some(signal.key.clone()),
            },
        }
    }
}

fn render_delta(ops: &[DeltaOp]) -> String {
    let lines: Vec<String> = ops
        .iter()
        .map(|op| match op {
            DeltaOp::Add { task } => format!("  + {}", delta_task(task)),
            DeltaOp::Update { task } => format!("  {} {}", icon(task.status), delta_task(task)),
            DeltaOp::Remove { id } => format!("  \u{2212} removed {{id: {id}}}"),
        })
        .collect();
    wrap(DELTA_TAG, "changes", ops.len(), &body(&lines))
}

fn delta_task(task: &Task) -> String {
    format!("{{id: {}}} [{}] {}", task.id, task.status, task.content)
}

/// `\n` + lines + `\n`, or nothing for no lines.
fn body(lines: &[String]) -> String {
    if lines.is_empty() {
        String::new()
    } else {
        format!("\n{}\n", lines.join("\n"))
    }
}

fn wrap(tag: &str, attribute: &str, value: usize, body: &str) -> String {
    let value = escape_attribute(&value.to_string());
    if body.is_empty() {
        format!("<{tag} {attribute}=\"{value}\" />")
    } else {
        format!(
            "<{tag} {attribute}=\"{value}\">{}</{tag}>",
            escape_text(body)
        )
    }
}

fn icon(status: TaskStatus) -> char {
    match status {
        TaskStatus::Completed => '✓',
        TaskStatus::InProgress => '▸',
        TaskStatus::Pending => '○',
    }
}

fn fingerprint(task: &Task) -> String {
    [
        task.id.as_str(),
        task.status.as_str(),
        &task.content,
        &task.active_form,
    ]
    .iter()
    .map(|field| format!("{}:{field}", field.encode_utf16().count()))
    .collect()
}

fn escape_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn escape_attribute(text: &str) -> String {
    escape_text(text).replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, status: TaskStatus, content: &str) -> Task {
        Task {
            id: id.to_owned(),
            content: content.to_owned(),
            status,
            active_form: format!("Doing {content}"),
        }
    }

    fn sample() -> Vec<Task> {
        vec![
            task("a", TaskStatus::Completed, "Write tests"),
            task("b", TaskStatus::InProgress, "Fix bug"),
            task("c", TaskStatus::Pending, "Ship"),
        ]
    }

    /// Shows every signal and returns the texts, as a run would.
    fn run(mut shown: ShownState, lists: &[Vec<Task>]) -> (ShownState, Vec<Option<String>>) {
        let mut texts = Vec::new();
        for list in lists {
            let signal = next_signal(&shown, list);
            if let Some(signal) = &signal {
                shown = shown.after(signal);
            }
            texts.push(signal.map(|s| s.text));
        }
        (shown, texts)
    }

    #[test]
    fn snapshot_text_lists_every_task() {
        assert_eq!(
            snapshot_text(&sample()),
            "<current-task-list count=\"3\">\n  ✓ [completed] {id: a} Write tests\n  ▸ [in_progress] {id: b} Fix bug\n  ○ [pending] {id: c} Ship\n</current-task-list>"
        );
    }

    #[test]
    fn empty_snapshot_is_self_closing() {
        assert_eq!(snapshot_text(&[]), "<current-task-list count=\"0\" />");
    }

    #[test]
    fn delta_orders_adds_and_updates_by_current_list_then_removals_by_previous() {
        let prev = vec![
            task("x", TaskStatus::Pending, "Old one"),
            task("a", TaskStatus::Pending, "Write tests"),
            task("y", TaskStatus::Pending, "Old two"),
        ];
        let cur = vec![
            task("n", TaskStatus::Pending, "New"),
            task("a", TaskStatus::Completed, "Write tests"),
        ];
        assert_eq!(
            delta_text(&prev, &cur).unwrap(),
            "<task-list-update changes=\"4\">\n  + {id: n} [pending] New\n  ✓ {id: a} [completed] Write tests\n  \u{2212} removed {id: x}\n  \u{2212} removed {id: y}\n</task-list-update>"
        );
        assert_eq!(delta_text(&cur, &cur), None);
    }

    #[test]
    fn active_form_change_is_an_update() {
        let prev = vec![task("a", TaskStatus::Pending, "A")];
        let mut cur = prev.clone();
        cur[0].active_form = "Other".into();
        assert_eq!(
            delta_text(&prev, &cur).unwrap(),
            "<task-list-update changes=\"1\">\n  ○ {id: a} [pending] A\n</task-list-update>"
        );
    }

    #[test]
    fn text_is_escaped() {
        let tasks = vec![task("q\"<&>", TaskStatus::Pending, "A & <b> \"c\"")];
        assert_eq!(
            snapshot_text(&tasks),
            "<current-task-list count=\"1\">\n  ○ [pending] {id: q\"&lt;&amp;&gt;} A &amp; &lt;b&gt; \"c\"\n</current-task-list>"
        );
        assert_eq!(escape_attribute("a\"<&>"), "a&quot;&lt;&amp;&gt;");
    }

    #[test]
    fn change_key_length_prefixes_in_utf16_units() {
        let tasks = vec![
            task("a", TaskStatus::Pending, "é😀"),
            task("b:c", TaskStatus::Completed, ""),
        ];
        assert_eq!(
            change_key(&tasks),
            "tasks:1:a7:pending3:é😀9:Doing é😀|3:b:c9:completed0:6:Doing "
        );
        assert_eq!(change_key(&[]), "tasks:");
    }

    #[test]
    fn nothing_when_both_empty() {
        assert_eq!(next_signal(&ShownState::default(), &[]), None);
        let (_, texts) = run(ShownState::default(), &[vec![], vec![]]);
        assert_eq!(texts, [None, None]);
    }

    #[test]
    fn first_signal_is_a_snapshot_then_deltas_then_nothing_when_unchanged() {
        let first = sample();
        let mut second = first.clone();
        second[1].status = TaskStatus::Completed;
        let (shown, texts) = run(
            ShownState::default(),
            &[first.clone(), first.clone(), second.clone(), second.clone()],
        );
        assert_eq!(texts[0].as_deref(), Some(snapshot_text(&first).as_str()));
        assert_eq!(texts[1], None, "unchanged key is not sent twice");
        assert_eq!(
            texts[2].as_deref(),
            Some(
                "<task-list-update changes=\"1\">\n  ✓ {id: b} [completed] Fix bug\n</task-list-update>"
            )
        );
        assert_eq!(texts[3], None);
        assert_eq!(shown.deltas_since_snapshot, 1);
        assert_eq!(shown.last_key, Some(change_key(&second)));
    }

    #[test]
    fn snapshot_again_when_the_base_left_the_window() {
        let list = sample();
        let shown = ShownState {
            tasks: None,
            deltas_since_snapshot: 3,
            last_key: Some(change_key(&list)),
        };
        let signal = next_signal(&shown, &list).unwrap();
        assert_eq!(signal.kind, SignalKind::Snapshot);
    }

    #[test]
    fn emptied_list_is_a_delta_of_removals() {
        let list = vec![task("a", TaskStatus::Pending, "A")];
        let (_, texts) = run(ShownState::default(), &[list, vec![]]);
        assert_eq!(
            texts[1].as_deref(),
            Some(
                "<task-list-update changes=\"1\">\n  \u{2212} removed {id: a}\n</task-list-update>"
            )
        );
    }

    #[test]
    fn eleventh_change_after_ten_deltas_is_a_snapshot() {
        let lists: Vec<Vec<Task>> = (0..12)
            .map(|n| vec![task("a", TaskStatus::Pending, &format!("Step {n}"))])
            .collect();
        let (shown, texts) = run(ShownState::default(), &lists);
        let kinds: Vec<&str> = texts
            .iter()
            .map(|t| match t.as_deref() {
                Some(t) if t.starts_with("<current-task-list") => "S",
                Some(_) => "D",
                None => "-",
            })
            .collect();
        assert_eq!(
            kinds,
            ["S", "D", "D", "D", "D", "D", "D", "D", "D", "D", "D", "S"]
        );
        assert_eq!(shown.deltas_since_snapshot, 0);
    }

    #[test]
    fn after_ten_deltas_an_unchanged_list_still_sends_nothing() {
        let list = sample();
        let shown = ShownState {
            tasks: Some(list.clone()),
            deltas_since_snapshot: DELTA_SNAPSHOT_CAP,
            last_key: None,
        };
        assert_eq!(next_signal(&shown, &list), None);
    }

    #[test]
    fn shown_order_follows_the_deltas_not_the_list() {
        // The model appends added tasks; later removals follow that order.
        let a = task("a", TaskStatus::Pending, "A");
        let b = task("b", TaskStatus::Pending, "B");
        let (shown, texts) = run(
            ShownState::default(),
            &[vec![a.clone()], vec![b.clone(), a.clone()], vec![]],
        );
        assert_eq!(shown.tasks, Some(vec![]));
        assert_eq!(
            texts[2].as_deref(),
            Some(
                "<task-list-update changes=\"2\">\n  \u{2212} removed {id: a}\n  \u{2212} removed {id: b}\n</task-list-update>"
            )
        );
    }

    #[test]
    fn delta_ops_serialize_like_the_reference_metadata() {
        let op = DeltaOp::Remove { id: "a".into() };
        assert_eq!(
            serde_json::to_string(&op).unwrap(),
            r#"{"op":"remove","id":"a"}"#
        );
    }
}
