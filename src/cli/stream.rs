//! Following a run's chunk stream (Generate, Observe, Approve, Decline, Resume): text as it
//! arrives, tool calls and results one line each, the task list whenever a task tool changed
//! it, and the result it ended with.

use std::io::Write;

use tonic::Streaming;

use super::client::CliError;
use super::render::{self, Glyph, Style, TaskLine};
use crate::json::from_proto_value;
use crate::pb::{self, FinishReason, chunk::Payload};

/// Prints chunks; keeps what it needs across streams of one conversation.
pub struct Follower {
    style: Style,
    /// In chat the approval prompt shows a waiting call; elsewhere a line says it waits.
    interactive: bool,
    /// A text (or reasoning) block is open on the current line.
    line_open: bool,
    /// The list last shown, so an unchanged list is not printed again.
    tasks: Option<Vec<TaskLine>>,
}

impl Follower {
    /// A follower printing to stdout in `style`.
    pub fn new(style: Style, interactive: bool) -> Self {
        Self {
            style,
            interactive,
            line_open: false,
            tasks: None,
        }
    }

    /// Prints the stream to its end and returns the last `finish` result. A replayed run that
    /// suspended and went on has several; a stream that ends without any is an error (the
    /// server went away mid-run).
    pub async fn follow(
        &mut self,
        mut stream: Streaming<pb::Chunk>,
        server: &str,
    ) -> Result<pb::GenerateResult, CliError> {
        let mut last = None;
        loop {
            match stream.message().await {
                Ok(Some(chunk)) => {
                    if let Some(result) = self.show(chunk) {
                        last = Some(result);
                    }
                }
                Ok(None) => {
                    self.end_line();
                    return last.ok_or_else(|| {
                        CliError::Interrupted(
                            "the stream ended before the run finished or suspended".to_owned(),
                        )
                    });
                }
                Err(status) => {
                    self.end_line();
                    return Err(CliError::from_status(status, server));
                }
            }
        }
    }

    /// Prints one chunk; returns the result when it is the `finish` chunk.
    fn show(&mut self, chunk: pb::Chunk) -> Option<pb::GenerateResult> {
        let style = self.style;
        let payload = chunk.payload?;
        match payload {
            Payload::Start(start) => {
                let mut line = format!("run {}", chunk.run_id);
                if !self.interactive && !start.agent_id.is_empty() {
                    line.push_str(&format!(" · agent {}", start.agent_id));
                }
                if !self.interactive && !start.thread_id.is_empty() {
                    line.push_str(&format!(" · thread {}", start.thread_id));
                }
                self.say(&style.dim(&line));
            }
            Payload::TextDelta(delta) => self.write_inline(&delta.text, false),
            Payload::ReasoningDelta(delta) => self.write_inline(&delta.text, true),
            Payload::TextEnd(_) | Payload::ReasoningEnd(_) => self.end_line(),
            Payload::ToolCall(call) => {
                let text = render::call(&call.tool_name, call.args.as_ref());
                self.say(&format!(
                    "{} {}",
                    style.cyan(style.glyph(Glyph::Call)),
                    text
                ));
            }
            Payload::ToolResult(result) => self.tool_result(&result),
            Payload::ToolError(error) => self.say(&style.red(&format!(
                "{} {} failed: {}",
                style.glyph(Glyph::Failed),
                error.tool_name,
                render::truncate(&error.error, 200)
            ))),
            Payload::ToolOutputDenied(denied) => self.say(&style.yellow(&format!(
                "{} {} declined: {}",
                style.glyph(Glyph::Failed),
                denied.tool_name,
                denied.reason
            ))),
            Payload::ToolCallApproval(wait) if !self.interactive => self.waiting(&wait, "approval"),
            Payload::ToolCallSuspended(wait) if !self.interactive => {
                self.waiting(&wait, "a result")
            }
            Payload::Error(error) => {
                let error = error.error.unwrap_or_default();
                self.say(&style.red(&format!("error {}: {}", error.id, error.message)));
            }
            Payload::Abort(abort) => self.say(&style.yellow(&format!("aborted: {}", abort.reason))),
            Payload::Tripwire(tripwire) => {
                self.say(&style.yellow(&format!("stopped by a guardrail: {}", tripwire.reason)))
            }
            Payload::ToolOutput(output) => self.sub_agent(&output),
            Payload::HookError(error) => self.say(&style.yellow(&format!(
                "hook {:?} failed: {}",
                error.kind(),
                error.message
            ))),
            Payload::Finish(result) => {
                self.end_line();
                // In chat the question about the waiting call follows at once; the summary of
                // a half-run would only be noise before it.
                if !(self.interactive && result.finish_reason() == FinishReason::Suspended) {
                    self.say(&style.dim(&summary(&result)));
                }
                return Some(result);
            }
            _ => {}
        }
        None
    }

    /// A sub-agent's chunk inside its supervisor's stream: its text and tool traffic as the
    /// supervisor's own, its start and end as one line each (its result is not the run's).
    fn sub_agent(&mut self, output: &pb::ToolOutputChunk) {
        let style = self.style;
        let Some(chunk) = output.chunk.as_deref() else {
            return;
        };
        match &chunk.payload {
            Some(Payload::Start(_)) => self.say(&style.dim(&format!(
                "{} sub-agent {} · run {}",
                style.glyph(Glyph::Call),
                output.agent_id,
                chunk.run_id
            ))),
            Some(Payload::Finish(result)) => {
                self.end_line();
                self.say(&style.dim(&format!(
                    "sub-agent {}: {}",
                    output.agent_id,
                    summary(result)
                )));
            }
            _ => {
                let _ = self.show(chunk.clone());
            }
        }
    }

    fn tool_result(&mut self, result: &pb::ToolResult) {
        let style = self.style;
        let value = result
            .result
            .as_ref()
            .map(from_proto_value)
            .unwrap_or_default();
        if result.is_error {
            self.say(&style.red(&format!(
                "{} {}: {}",
                style.glyph(Glyph::Failed),
                result.tool_name,
                render::short(&value, 200)
            )));
            return;
        }
        // A task tool answers with the whole list: show the checklist instead of its JSON.
        if result.tool_name.starts_with("task_")
            && let Some(tasks) = TaskLine::from_tool_result(&value)
        {
            self.say(&format!(
                "{} {}",
                style.green(style.glyph(Glyph::Result)),
                result.tool_name
            ));
            if self.tasks.as_ref() != Some(&tasks) {
                for line in render::checklist(style, "Tasks", &tasks) {
                    self.say(&line);
                }
                self.tasks = Some(tasks);
            }
            return;
        }
        self.say(&format!(
            "{} {}: {}",
            style.green(style.glyph(Glyph::Result)),
            result.tool_name,
            render::short(&value, 200)
        ));
    }

    fn waiting(&mut self, wait: &pb::ToolSuspension, what: &str) {
        let style = self.style;
        self.say(&style.yellow(&format!(
            "{} {} waits for {what} (tool call {})",
            style.glyph(Glyph::Waiting),
            render::call(&wait.tool_name, wait.args.as_ref()),
            wait.tool_call_id
        )));
    }

    /// Streams text onto the current line, flushing at once (that is the point of streaming).
    fn write_inline(&mut self, text: &str, reasoning: bool) {
        self.line_open = true;
        let text = if reasoning {
            self.style.dim(text)
        } else {
            text.to_owned()
        };
        let mut out = std::io::stdout().lock();
        // A closed stdout (a pipe to `head`) is not worth failing the run over.
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }

    fn end_line(&mut self) {
        if self.line_open {
            self.line_open = false;
            render::out("");
        }
    }

    /// Prints a whole line, closing any open text first.
    fn say(&mut self, line: &str) {
        self.end_line();
        render::out(line);
    }
}

/// "stop · 2 steps · 130 tokens".
fn summary(result: &pb::GenerateResult) -> String {
    let reason = match result.finish_reason() {
        FinishReason::Unspecified => "unknown",
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ContentFilter => "content filter",
        FinishReason::ToolCalls => "tool calls (step limit)",
        FinishReason::Error => "error",
        FinishReason::Other => "other",
        FinishReason::Suspended => "suspended",
        FinishReason::Tripwire => "tripwire",
        FinishReason::Aborted => "aborted",
        FinishReason::Retry => "retry",
    };
    let tokens = result.usage.as_ref().map_or(0, |u| u.total_tokens);
    let steps = result.steps.len();
    format!(
        "[{reason} · {steps} step{} · {tokens} tokens]",
        if steps == 1 { "" } else { "s" }
    )
}
