//! A second scripted model for the mock server, one that works through its list: it writes the
//! prompt's comma-separated items as tasks (as the planner does), completes them one per step
//! with `task_complete`, then answers. A turn of it shows a list filling and ticking, which is
//! what a client's task view (the CLI's checklist, an example's progress) must follow.

use std::time::Duration;

use serde_json::{Value, json};

use super::mock::{MockReply, last_prompt, message_text, planner_reply};

/// How long `slow-worker` waits before each word of its answer: long enough that a client
/// can be seen (or re-attach) mid-answer, short enough for a test.
pub const SLOW_WORD_DELAY: Duration = Duration::from_millis(150);

/// How long `silent` waits before its only word: the stream stays open, and says nothing, for
/// longer than any benchmark of idle streams.
const SILENT_DELAY: Duration = Duration::from_secs(24 * 60 * 60);

/// The mock server's reply by model name: `worker` works through its list, `slow-worker` does
/// the same with its answer streamed a word per [`SLOW_WORD_DELAY`], every other name plans
/// ([`planner_reply`]); `silent` opens its stream and says nothing (idle runs, for benchmarks).
/// Whatever the model, a prompt `/call <tool> <json>` calls that tool
/// ([`call_reply`]).
pub fn scripted_reply(request: &Value) -> MockReply {
    if let Some(reply) = call_reply(request) {
        return reply;
    }
    match request["model"].as_str() {
        Some("worker") => worker_reply(request),
        Some("slow-worker") => match worker_reply(request) {
            MockReply::Text(text) => MockReply::Slow {
                text,
                delay_per_delta: SLOW_WORD_DELAY,
            },
            other => other,
        },
        Some("silent") => MockReply::Slow {
            text: "…".to_owned(),
            delay_per_delta: SILENT_DELAY,
        },
        _ => planner_reply(request),
    }
}

/// The prefix of a prompt that names a tool to call.
const CALL_PREFIX: &str = "/call ";

/// For a prompt `/call <tool> <json arguments>`: calls the tool once, then answers
/// `Got: <result>`. Lets a demo or a test reach any tool (a client tool, one that needs
/// approval) without a real model. `None` for every other prompt.
pub fn call_reply(request: &Value) -> Option<MockReply> {
    let (prompt, turn) = last_prompt(request)?;
    let command = prompt.strip_prefix(CALL_PREFIX)?.trim();
    if let Some(result) = turn.iter().rev().find(|m| m["role"] == "tool") {
        return Some(MockReply::Text(format!("Got: {}", message_text(result))));
    }
    let (tool, arguments) = command.split_once(' ').unwrap_or((command, "{}"));
    let arguments = serde_json::from_str(arguments).unwrap_or_else(|_| json!({}));
    Some(MockReply::ToolCalls(vec![(tool.to_owned(), arguments)]))
}

/// Writes the list, then one `task_complete` per step for the first unfinished task, then
/// `Done: <prompt>`. A tool result that is not a task list (a declined call's reason) ends
/// the turn with `Stopped: <that text>`, so a decline shows in the answer.
pub fn worker_reply(request: &Value) -> MockReply {
    let Some((prompt, turn)) = last_prompt(request) else {
        return MockReply::Text("Nothing to do.".to_owned());
    };
    let Some(last_result) = turn.iter().rev().find(|m| m["role"] == "tool") else {
        // Nothing done yet this turn: plan, exactly as the planner does.
        return planner_reply(request);
    };
    let text = message_text(last_result);
    let Some(tasks) = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|result| result["tasks"].as_array().cloned())
    else {
        return MockReply::Text(format!("Stopped: {text}"));
    };
    let next = tasks
        .iter()
        .find(|t| t["status"] != "completed")
        .and_then(|t| t["id"].as_str());
    match next {
        Some(id) => MockReply::ToolCalls(vec![("task_complete".to_owned(), json!({ "id": id }))]),
        None => MockReply::Text(format!("Done: {prompt}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(model: &str, messages: Value) -> Value {
        json!({"model": model, "messages": messages,
               "tools": [{"type": "function", "function": {"name": "task_write"}}]})
    }

    fn tool(result: Value) -> Value {
        json!({"role": "tool", "content": result.to_string()})
    }

    #[test]
    fn the_worker_writes_then_completes_one_task_per_step_then_answers() {
        let prompt = json!({"role": "user", "content": "a, b"});
        let first = request("worker", json!([prompt]));
        assert!(
            matches!(scripted_reply(&first), MockReply::ToolCalls(c) if c[0].0 == "task_write")
        );

        let written = json!({"tasks": [
            {"id": "task_a", "status": "in_progress"}, {"id": "task_b", "status": "pending"}]});
        let second = request("worker", json!([prompt, tool(written)]));
        assert_eq!(
            worker_reply(&second),
            MockReply::ToolCalls(vec![("task_complete".into(), json!({"id": "task_a"}))])
        );

        let all = json!({"tasks": [
            {"id": "task_a", "status": "completed"}, {"id": "task_b", "status": "completed"}]});
        let last = request("worker", json!([prompt, tool(all)]));
        assert_eq!(worker_reply(&last), MockReply::Text("Done: a, b".into()));
    }

    #[test]
    fn a_declined_call_ends_the_turn_with_its_reason() {
        let prompt = json!({"role": "user", "content": "a"});
        let declined = json!({"role": "tool", "content": "not today"});
        let reply = worker_reply(&request("worker", json!([prompt, declined])));
        assert_eq!(reply, MockReply::Text("Stopped: not today".into()));
    }

    #[test]
    fn the_slow_worker_streams_its_answer_slowly() {
        let prompt = json!({"role": "user", "content": "a"});
        let done = tool(json!({"tasks": [{"id": "task_a", "status": "completed"}]}));
        let reply = scripted_reply(&request("slow-worker", json!([prompt, done])));
        assert_eq!(
            reply,
            MockReply::Slow {
                text: "Done: a".into(),
                delay_per_delta: SLOW_WORD_DELAY
            }
        );
    }

    #[test]
    fn a_call_prompt_calls_the_named_tool_then_reports_its_result() {
        let prompt =
            json!({"role": "user", "content": "/call ask_user {\"question\": \"Colour?\"}"});
        for model in ["planner", "worker", "slow-worker"] {
            assert_eq!(
                scripted_reply(&request(model, json!([prompt]))),
                MockReply::ToolCalls(vec![("ask_user".into(), json!({"question": "Colour?"}))])
            );
        }
        let answered = json!([prompt, tool(json!({"answer": "blue"}))]);
        assert_eq!(
            scripted_reply(&request("worker", answered)),
            MockReply::Text("Got: {\"answer\":\"blue\"}".into())
        );
        let bare = json!({"role": "user", "content": "/call ping"});
        assert_eq!(
            call_reply(&request("planner", json!([bare]))),
            Some(MockReply::ToolCalls(vec![("ping".into(), json!({}))]))
        );
    }

    #[test]
    fn other_models_plan() {
        let prompt = json!({"role": "user", "content": "a"});
        let reply = scripted_reply(&request("planner", json!([prompt])));
        assert_eq!(reply, planner_reply(&request("planner", json!([prompt]))));
    }
}
