//! How the client commands look: colours and glyphs on a terminal, plain ASCII elsewhere, and
//! the pieces every command shows (a tool call, a task checklist, a short JSON value).

use std::io::{IsTerminal, Write};

use serde_json::Value;

use crate::pb;
use crate::tasks::TaskStatus;

/// Colours and glyphs for one output stream.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// ANSI colours (a terminal, and `NO_COLOR` unset).
    color: bool,
    /// Unicode glyphs and in-place redraws (a terminal).
    pub terminal: bool,
}

impl Style {
    /// The style of stdout: a terminal gets glyphs, and colours unless `NO_COLOR` is set
    /// (no-color.org: any non-empty value).
    pub fn stdout() -> Self {
        let terminal = std::io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Self {
            color: terminal && !no_color,
            terminal,
        }
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    /// Secondary information (ids, counts).
    pub fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }

    /// Headings and prompts.
    pub fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }

    /// Tool calls.
    pub fn cyan(self, text: &str) -> String {
        self.paint("36", text)
    }

    /// Successes.
    pub fn green(self, text: &str) -> String {
        self.paint("32", text)
    }

    /// Waits and declines.
    pub fn yellow(self, text: &str) -> String {
        self.paint("33", text)
    }

    /// Failures.
    pub fn red(self, text: &str) -> String {
        self.paint("31", text)
    }

    /// The glyph, or its ASCII stand-in when the output is not a terminal (logs, pipes, CI).
    pub fn glyph(self, glyph: Glyph) -> &'static str {
        let (unicode, ascii) = match glyph {
            Glyph::Call => ("→", "->"),
            Glyph::Result => ("←", "<-"),
            Glyph::Failed => ("✗", "x"),
            Glyph::Waiting => ("⏸", "||"),
            Glyph::Pending => ("☐", "[ ]"),
            Glyph::InProgress => ("◐", "[~]"),
            Glyph::Completed => ("☑", "[x]"),
        };
        if self.terminal { unicode } else { ascii }
    }
}

/// The symbols the commands print.
#[derive(Debug, Clone, Copy)]
pub enum Glyph {
    /// A tool call.
    Call,
    /// A tool result.
    Result,
    /// A failed or declined call.
    Failed,
    /// A call waiting for a decision.
    Waiting,
    /// A pending task.
    Pending,
    /// The task in progress.
    InProgress,
    /// A completed task.
    Completed,
}

/// One task as shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskLine {
    /// Imperative form ("Fix the bug").
    pub content: String,
    /// pending, in_progress or completed.
    pub status: String,
    /// Present-continuous form ("Fixing the bug"), shown while in progress.
    pub active_form: String,
}

impl From<&pb::Task> for TaskLine {
    fn from(task: &pb::Task) -> Self {
        Self {
            content: task.content.clone(),
            status: task
                .status()
                .to_task_status()
                .map_or("", TaskStatus::as_str)
                .to_owned(),
            active_form: task.active_form.clone(),
        }
    }
}

impl TaskLine {
    /// The list a task tool returned (`{"tasks": [...]}` in its result), if it holds one.
    pub fn from_tool_result(result: &Value) -> Option<Vec<Self>> {
        let tasks = result.get("tasks")?.as_array()?;
        let text = |task: &Value, key: &str| {
            task.get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Some(
            tasks
                .iter()
                .map(|task| Self {
                    content: text(task, "content"),
                    status: text(task, "status"),
                    active_form: text(task, "activeForm"),
                })
                .collect(),
        )
    }

    fn done(&self) -> bool {
        self.status == "completed"
    }
}

/// The checklist of a task list: a progress line, then one line per task (the task in
/// progress by its active form).
pub fn checklist(style: Style, title: &str, tasks: &[TaskLine]) -> Vec<String> {
    let done = tasks.iter().filter(|t| t.done()).count();
    let progress = if tasks.is_empty() {
        "no tasks yet".to_owned()
    } else if done == tasks.len() {
        style.green(&format!("{done}/{} done", tasks.len()))
    } else {
        format!("{done}/{} done", tasks.len())
    };
    let mut lines = vec![format!("{} {progress}", style.bold(title))];
    for task in tasks {
        let line = match task.status.as_str() {
            "completed" => format!(
                "  {} {}",
                style.green(style.glyph(Glyph::Completed)),
                style.dim(&task.content)
            ),
            "in_progress" => {
                let text = if task.active_form.is_empty() {
                    &task.content
                } else {
                    &task.active_form
                };
                format!(
                    "  {} {}",
                    style.yellow(style.glyph(Glyph::InProgress)),
                    style.bold(text)
                )
            }
            _ => format!("  {} {}", style.glyph(Glyph::Pending), task.content),
        };
        lines.push(line);
    }
    lines
}

/// Prints a line to stdout. A closed stdout (piped into `head`) only ends the output, where
/// `println!` would panic.
pub fn out(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

/// True when every task is completed and there is at least one.
pub fn all_done(tasks: &[TaskLine]) -> bool {
    !tasks.is_empty() && tasks.iter().all(TaskLine::done)
}

/// `name(args)` with the arguments as compact JSON, cut to a readable length.
pub fn call(name: &str, args: Option<&prost_types::Value>) -> String {
    call_within(name, args, 120)
}

/// [`call`] with room for the whole arguments, as shown when asking for a decision: a human
/// approves what the tool will get, not a prefix of it.
pub fn call_in_full(name: &str, args: Option<&prost_types::Value>) -> String {
    call_within(name, args, 4000)
}

fn call_within(name: &str, args: Option<&prost_types::Value>, max: usize) -> String {
    let args = args
        .map(crate::json::from_proto_value)
        .unwrap_or(Value::Null);
    let args = match &args {
        Value::Null => String::new(),
        other => short(other, max),
    };
    format!("{name}({args})")
}

/// A JSON value (a string as its text) in at most `max` characters.
pub fn short(value: &Value, max: usize) -> String {
    let text = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    truncate(&text, max)
}

/// Cuts text to `max` characters on one line, marking the cut.
pub fn truncate(text: &str, max: usize) -> String {
    let one_line = text.replace('\n', " ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PLAIN: Style = Style {
        color: false,
        terminal: false,
    };

    fn task(content: &str, status: &str) -> TaskLine {
        TaskLine {
            content: content.into(),
            status: status.into(),
            active_form: format!("Doing {content}"),
        }
    }

    #[test]
    fn a_checklist_shows_progress_and_the_active_form() {
        let tasks = [
            task("a", "completed"),
            task("b", "in_progress"),
            task("c", "pending"),
        ];
        assert_eq!(
            checklist(PLAIN, "Tasks", &tasks),
            ["Tasks 1/3 done", "  [x] a", "  [~] Doing b", "  [ ] c"]
        );
        assert!(!all_done(&tasks));
        assert!(all_done(&[task("a", "completed")]));
        assert!(!all_done(&[]));
    }

    #[test]
    fn a_task_tool_result_carries_the_list() {
        let result = json!({"content": "…", "tasks": [
            {"id": "task_a", "content": "a", "status": "in_progress", "activeForm": "Doing a"}
        ]});
        let tasks = TaskLine::from_tool_result(&result);
        assert_eq!(tasks, Some(vec![task("a", "in_progress")]));
        assert_eq!(TaskLine::from_tool_result(&json!("text")), None);
    }

    #[test]
    fn long_values_are_cut_on_one_line() {
        assert_eq!(truncate("ab\ncd", 10), "ab cd");
        assert_eq!(truncate("abcdef", 4), "abc…");
        let args = crate::json::to_proto_value(&json!({"id": "task_a"}));
        assert_eq!(
            call("task_complete", Some(&args)),
            r#"task_complete({"id":"task_a"})"#
        );
    }
}
