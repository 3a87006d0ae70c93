//! Run hooks on a real server: a gRPC client answering hook calls on GenerateWithHooks /
//! ContinueWithHooks, and an agent's webhook served by a real HTTP server. The scripted model
//! records every request, so each test checks what the model reads: the skipped call's output,
//! the replaced result, feedback placement, prepare_step's tool choice, the completion
//! feedback. Also deadlines and policies, bad answers, and continuations.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd::json::{from_proto_value, to_proto_struct, to_proto_value};
use agentd::model::{MockOpenAi, MockReply};
use agentd::pb;
use agentd::pb::approval_service_client::ApprovalServiceClient;
use agentd::pb::chunk::Payload;
use agentd::pb::hook_answer::Answer;
use agentd::pb::hook_call::Context;
use agentd::pb::hooked_run_event::Event;
use agentd::server::RunningServer;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic_types::StatusExt;

const AGENTS: &str = r#"
[[agents]]
id = "worker"
instructions = "You work."
model = "mock/test-model"
tools = ["tasks"]

[[agents]]
id = "guarded"
instructions = "Act carefully."
model = "mock/test-model"
tools = ["tasks"]
require_approval = ["task_check"]
"#;

/// What a hooked run produced.
#[derive(Default)]
struct Hooked {
    chunks: Vec<pb::Chunk>,
    calls: Vec<pb::HookCall>,
    rejected: Vec<pb::HookAnswerRejected>,
}

type Answerer = Box<dyn FnMut(&pb::HookCall) -> Vec<pb::HookAnswer> + Send>;

/// Drives a hooked stream to its end, answering each call with `answer` (which may answer
/// nothing, several times, or wrongly).
async fn drive(
    mut events: tonic::Streaming<pb::HookedRunEvent>,
    answers: mpsc::Sender<pb::HookAnswer>,
    mut answer: Answerer,
) -> Hooked {
    let mut out = Hooked::default();
    let read = async {
        while let Some(event) = events.next().await {
            match event.expect("event").event {
                Some(Event::Chunk(c)) => out.chunks.push(c),
                Some(Event::HookCall(call)) => {
                    for a in answer(&call) {
                        answers.send(a).await.expect("answer sent");
                    }
                    out.calls.push(call);
                }
                Some(Event::AnswerRejected(r)) => out.rejected.push(r),
                None => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("the hooked stream ends in time");
    out
}

fn hook_options(
    kinds: &[pb::HookKind],
    deadline_ms: Option<u32>,
    continue_on_failure: bool,
) -> pb::HookOptions {
    pb::HookOptions {
        kinds: kinds.iter().map(|k| *k as i32).collect(),
        deadline_ms,
        on_failure: if continue_on_failure {
            pb::HookFailurePolicy::Continue
        } else {
            pb::HookFailurePolicy::Fail
        } as i32,
    }
}

/// Runs `request` on GenerateWithHooks, the client answering `kinds` with `answer`.
async fn generate_hooked(
    server: &RunningServer,
    request: pb::GenerateRequest,
    options: pb::HookOptions,
    answer: Answerer,
) -> Hooked {
    use pb::generate_with_hooks_request::Message;
    let mut client = support::agents_client(server).await;
    let (tx, rx) = mpsc::channel(16);
    tx.send(pb::GenerateWithHooksRequest {
        message: Some(Message::Start(pb::HookedGenerate {
            request: Some(request),
            hooks: Some(options),
        })),
    })
    .await
    .expect("start sent");
    let (answers, mut answer_rx) = mpsc::channel::<pb::HookAnswer>(16);
    let forward = tx.clone();
    tokio::spawn(async move {
        while let Some(a) = answer_rx.recv().await {
            let message = pb::GenerateWithHooksRequest {
                message: Some(Message::Answer(a)),
            };
            if forward.send(message).await.is_err() {
                break;
            }
        }
    });
    // `tx` must stay open while the run goes on: the forwarder holds a clone.
    drop(tx);
    let events = client
        .generate_with_hooks(ReceiverStream::new(rx))
        .await
        .expect("hooked generate starts")
        .into_inner();
    drive(events, answers, answer).await
}

fn answer(call: &pb::HookCall, answer: Answer) -> Vec<pb::HookAnswer> {
    vec![pb::HookAnswer {
        id: call.id.clone(),
        answer: Some(answer),
    }]
}

/// The empty answer: no change.
fn unchanged(call: &pb::HookCall) -> Vec<pb::HookAnswer> {
    vec![pb::HookAnswer {
        id: call.id.clone(),
        answer: None,
    }]
}

fn ask(agent: &str, prompt: &str) -> pb::GenerateRequest {
    pb::GenerateRequest {
        agent_id: agent.into(),
        prompt: prompt.into(),
        ..Default::default()
    }
}

fn tool_call(name: &str, args: Value) -> MockReply {
    MockReply::ToolCalls(vec![(name.into(), args)])
}

fn messages(mock: &MockOpenAi, request: usize) -> Vec<Value> {
    mock.requests()[request]["messages"]
        .as_array()
        .expect("messages")
        .clone()
}

fn finish(h: &Hooked) -> pb::GenerateResult {
    support::finish(&h.chunks)
}

async fn server(mock: &MockOpenAi, dir: &std::path::Path, extra: &str) -> RunningServer {
    let agents = format!("{AGENTS}{extra}");
    support::start(support::agent_config(mock, &agents, "embedded", dir)).await
}

#[tokio::test]
async fn before_tool_call_skips_with_an_output_the_model_reads() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    mock.push(tool_call("task_check", json!({})));
    mock.push(MockReply::Text("done".into()));
    let kinds = [pb::HookKind::BeforeToolCall, pb::HookKind::AfterToolCall];
    let out = generate_hooked(
        &server,
        ask("worker", "check"),
        hook_options(&kinds, None, false),
        Box::new(|call| match &call.context {
            Some(Context::BeforeToolCall(c)) => {
                assert_eq!(c.tool_name, "task_check");
                answer(
                    call,
                    Answer::BeforeToolCall(pb::BeforeToolCallAnswer {
                        proceed: Some(false),
                        output: Some(to_proto_value(&json!({"skipped": true}))),
                    }),
                )
            }
            other => panic!("unexpected hook {other:?}"),
        }),
    )
    .await;
    assert_eq!(
        out.calls.len(),
        1,
        "after_tool_call is skipped with the tool"
    );
    let tool = messages(&mock, 1)
        .into_iter()
        .find(|m| m["role"] == "tool")
        .expect("tool message");
    assert_eq!(tool["content"], r#"{"skipped":true}"#);
    let result = finish(&out);
    assert_eq!(result.finish_reason(), pb::FinishReason::Stop);
    let output = from_proto_value(result.tool_results[0].result.as_ref().expect("result"));
    assert_eq!(output, json!({"skipped": true}));
}

#[tokio::test]
async fn after_tool_call_replaces_the_result_and_a_throwing_hook_is_a_tool_error() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    mock.push(MockReply::ToolCalls(vec![
        ("task_check".into(), json!({})),
        ("task_check".into(), json!({})),
    ]));
    mock.push(MockReply::Text("done".into()));
    let mut n = 0;
    let out = generate_hooked(
        &server,
        ask("worker", "check twice"),
        hook_options(&[pb::HookKind::AfterToolCall], None, false),
        Box::new(move |call| {
            let Some(Context::AfterToolCall(c)) = &call.context else {
                panic!("unexpected hook");
            };
            assert!(c.output.is_some() && c.error.is_none());
            n += 1;
            if n == 1 {
                answer(
                    call,
                    Answer::AfterToolCall(pb::AfterToolCallAnswer {
                        output: Some(to_proto_value(&json!("REPLACED"))),
                    }),
                )
            } else {
                answer(
                    call,
                    Answer::Error(pb::HookFailure {
                        message: "after hook failed".into(),
                    }),
                )
            }
        }),
    )
    .await;
    let tools: Vec<Value> = messages(&mock, 1)
        .into_iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].clone())
        .collect();
    assert_eq!(tools, [json!("REPLACED"), json!("after hook failed")]);
    assert!(support::kinds(&out.chunks).contains(&"tool-error"));
}

#[tokio::test]
async fn iteration_feedback_is_an_assistant_message_after_the_tool_results() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    mock.push(tool_call("task_check", json!({})));
    mock.push(MockReply::Text("done".into()));
    let out = generate_hooked(
        &server,
        ask("worker", "go"),
        hook_options(&[pb::HookKind::OnIterationComplete], None, false),
        Box::new(|call| {
            let Some(Context::OnIterationComplete(c)) = &call.context else {
                panic!("unexpected hook");
            };
            if c.iteration == 1 {
                assert!(!c.is_final);
                assert_eq!(c.tool_calls.len(), 1);
                answer(
                    call,
                    Answer::OnIterationComplete(pb::IterationAnswer {
                        continue_run: None,
                        feedback: Some("Check the list again".into()),
                    }),
                )
            } else {
                assert!(c.is_final);
                assert_eq!(c.text, "done");
                unchanged(call)
            }
        }),
    )
    .await;
    assert_eq!(out.calls.len(), 2);
    let second = messages(&mock, 1);
    let roles: Vec<&str> = second
        .iter()
        .map(|m| m["role"].as_str().unwrap_or(""))
        .collect();
    let tool_at = roles
        .iter()
        .position(|r| *r == "tool")
        .expect("tool message");
    assert_eq!(second[tool_at + 1]["role"], "assistant");
    assert_eq!(second[tool_at + 1]["content"], "Check the list again");
    // The feedback is part of the response, so it is in the result's messages too.
    let result = finish(&out);
    assert!(
        result.messages.iter().any(|m| m.role() == pb::Role::Assistant
            && m.content.iter().any(|p| matches!(&p.kind, Some(pb::part::Kind::Text(t)) if t.text == "Check the list again"))),
    );
}

#[tokio::test]
async fn iteration_continue_false_stops_and_true_forces_another_step() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    mock.push(tool_call("task_check", json!({})));
    let stop = |go_on: bool| -> Answerer {
        Box::new(move |call| {
            answer(
                call,
                Answer::OnIterationComplete(pb::IterationAnswer {
                    continue_run: Some(go_on),
                    feedback: None,
                }),
            )
        })
    };
    let options = || hook_options(&[pb::HookKind::OnIterationComplete], None, false);
    let out = generate_hooked(&server, ask("worker", "go"), options(), stop(false)).await;
    assert_eq!(
        mock.requests().len(),
        1,
        "continue false stops after the tool step"
    );
    assert_eq!(finish(&out).finish_reason(), pb::FinishReason::ToolCalls);
    // continue:true on text steps: forced on until max_steps.
    for text in ["first", "second", "third"] {
        mock.push(MockReply::Text(text.into()));
    }
    let mut request = ask("worker", "go");
    request.max_steps = Some(3);
    let out = generate_hooked(&server, request, options(), stop(true)).await;
    assert_eq!(mock.requests().len(), 4);
    assert_eq!(finish(&out).steps.len(), 3);
}

#[tokio::test]
async fn prepare_step_changes_one_steps_tool_choice_and_tools() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    for _ in 0..3 {
        mock.push(tool_call("task_check", json!({})));
    }
    mock.push(MockReply::Text("done".into()));
    let out = generate_hooked(
        &server,
        ask("worker", "go"),
        hook_options(&[pb::HookKind::PrepareStep], None, false),
        Box::new(|call| {
            let Some(Context::PrepareStep(c)) = &call.context else {
                panic!("unexpected hook");
            };
            assert_eq!(c.model, "mock/test-model");
            assert!(c.tools.contains(&"task_write".to_owned()));
            assert_eq!(c.system_messages[0], "You work.");
            if c.step_number == 3 {
                // `none`: the model is offered no tools at all, as the reference.
                let none = pb::ToolChoice {
                    choice: Some(pb::tool_choice::Choice::Mode(
                        pb::ToolChoiceMode::None as i32,
                    )),
                };
                return answer(
                    call,
                    Answer::PrepareStep(pb::PrepareStepAnswer {
                        tool_choice: Some(none),
                        ..Default::default()
                    }),
                );
            }
            if c.step_number != 1 {
                return unchanged(call);
            }
            answer(
                call,
                Answer::PrepareStep(pb::PrepareStepAnswer {
                    tool_choice: Some(pb::ToolChoice {
                        choice: Some(pb::tool_choice::Choice::ToolName("task_check".into())),
                    }),
                    active_tools: Some(pb::StringList {
                        values: vec!["task_check".into()],
                    }),
                    system_messages: Some(pb::StringList {
                        values: vec!["Only check.".into()],
                    }),
                    ..Default::default()
                }),
            )
        }),
    )
    .await;
    assert_eq!(out.calls.len(), 4);
    let requests = mock.requests();
    let tool_names = |i: usize| -> Vec<String> {
        requests[i]["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|t| t["function"]["name"].as_str().unwrap_or("").to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(tool_names(1), ["task_check"]);
    assert_eq!(requests[1]["tool_choice"]["function"]["name"], "task_check");
    assert_eq!(requests[1]["messages"][0]["content"], "Only check.");
    assert!(
        tool_names(2).len() > 1,
        "the next step is back to the run's tools"
    );
    assert_ne!(requests[2]["messages"][0]["content"], "Only check.");
    assert!(requests[3].get("tools").is_none() && requests[3].get("tool_choice").is_none());
    assert_eq!(finish(&out).finish_reason(), pb::FinishReason::Stop);
}

fn completion(scorers: Vec<pb::CompletionScorer>) -> pb::IsTaskComplete {
    pb::IsTaskComplete {
        scorers,
        ..Default::default()
    }
}

fn scorer(id: &str, name: &str, kind: pb::completion_scorer::Kind) -> pb::CompletionScorer {
    pb::CompletionScorer {
        id: id.into(),
        name: name.into(),
        kind: Some(kind),
    }
}

fn checks(chunks: &[pb::Chunk]) -> Vec<pb::IsTaskCompleteChunk> {
    chunks
        .iter()
        .filter_map(|c| match &c.payload {
            Some(Payload::IsTaskComplete(x)) => Some(x.clone()),
            _ => None,
        })
        .collect()
}

/// The feedback text with its duration (which varies) replaced by `Nms`.
fn without_duration(text: &str) -> String {
    let re_start = text.find("Duration: ").map(|i| i + "Duration: ".len());
    match re_start {
        Some(i) => {
            let end = text[i..].find("ms").map_or(i, |e| i + e);
            format!("{}N{}", &text[..i], &text[end..])
        }
        None => text.to_owned(),
    }
}

#[tokio::test]
async fn is_task_complete_hook_scorer_feedback_is_the_references() {
    use pb::completion_scorer::Kind;
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    mock.push(MockReply::Text("working".into()));
    mock.push(MockReply::Text("DONE".into()));
    let mut request = ask("worker", "finish it");
    request.is_task_complete = Some(completion(vec![scorer(
        "has-done",
        "Has Done",
        Kind::Hook(pb::HookScorer {}),
    )]));
    let out = generate_hooked(
        &server,
        request,
        hook_options(&[pb::HookKind::IsTaskComplete], None, false),
        Box::new(|call| {
            let Some(Context::IsTaskComplete(c)) = &call.context else {
                panic!("unexpected hook");
            };
            assert_eq!(c.original_task, "finish it");
            let done = c.output.contains("DONE");
            answer(
                call,
                Answer::IsTaskComplete(pb::ScoreAnswer {
                    score: if done { 1.0 } else { 0.0 },
                    reason: Some(if done { "has DONE" } else { "no DONE yet" }.into()),
                }),
            )
        }),
    )
    .await;
    let second = messages(&mock, 1);
    let n = second.len();
    assert_eq!(second[n - 2]["content"], "working");
    assert_eq!(
        without_duration(second[n - 1]["content"].as_str().unwrap_or("")),
        "#### Completion Check Results\n\nOverall: ❌ NOT COMPLETE\nDuration: Nms\n\n**Has Done** (has-done)\nScore: 0 ❌\nReason: no DONE yet\n\n🔄 The task is not yet complete. Please continue working based on the feedback above."
    );
    let checks = checks(&out.chunks);
    assert_eq!(checks.len(), 2);
    assert!(!checks[0].passed && checks[1].passed);
    let kinds = support::kinds(&out.chunks);
    let at = kinds
        .iter()
        .position(|k| *k == "is-task-complete")
        .expect("chunk");
    assert_eq!(kinds[at - 1], "text-end");
    assert_eq!(kinds[at + 1], "step-finish");
    let result = finish(&out);
    assert_eq!(result.text, "workingDONE");
    let last = result.completion_check.expect("completion check");
    assert!(last.passed);
    assert_eq!(last.results[0].reason, "has DONE");
}

#[tokio::test]
async fn built_in_scorers_need_no_client() {
    use pb::completion_scorer::Kind;
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    let mut agents = support::agents_client(&server).await;
    // json_schema: prose fails, JSON passes.
    mock.push(MockReply::Text("Here it is".into()));
    mock.push(MockReply::Text(r#"{"answer": 42}"#.into()));
    let schema = json!({"type": "object", "required": ["answer"]});
    let mut request = ask("worker", "answer as JSON");
    request.is_task_complete = Some(completion(vec![scorer(
        "json",
        "",
        Kind::JsonSchema(pb::JsonSchemaScorer {
            schema: schema.as_object().map(to_proto_struct),
        }),
    )]));
    let chunks = support::generate(&mut agents, request).await;
    let found = checks(&chunks);
    assert_eq!(found.len(), 2);
    assert!(
        found[0].results[0]
            .reason
            .starts_with("The answer is not JSON")
    );
    assert!(found[1].passed);
    // llm_judge on the scripted model: 0 then 1.
    let before = mock.requests().len();
    mock.push(MockReply::Text("draft".into()));
    mock.push(MockReply::Text(
        r#"{"score": 0, "reason": "too short"}"#.into(),
    ));
    mock.push(MockReply::Text("final answer".into()));
    mock.push(MockReply::Text(
        r#"{"score": 1, "reason": "complete"}"#.into(),
    ));
    let mut request = ask("worker", "write it");
    request.is_task_complete = Some(completion(vec![scorer(
        "judge",
        "Judge",
        Kind::LlmJudge(pb::LlmJudgeScorer {
            model: "mock/judge-model".into(),
            rubric: "Says final".into(),
        }),
    )]));
    let chunks = support::generate(&mut agents, request).await;
    let found = checks(&chunks);
    assert_eq!(found[0].results[0].reason, "too short");
    assert!(found[1].passed);
    let judge = &mock.requests()[before + 1];
    assert_eq!(judge["model"], "judge-model");
    let prompt = judge["messages"][1]["content"].to_string();
    assert!(
        prompt.contains("Rubric:") && prompt.contains("Says final") && prompt.contains("draft"),
        "{prompt}"
    );
    // task_list_complete: not complete while the list is empty.
    mock.push(MockReply::Text("nothing to do".into()));
    mock.push(MockReply::Text("still nothing".into()));
    let mut request = ask("worker", "plan");
    request.max_steps = Some(2);
    request.is_task_complete = Some(completion(vec![scorer(
        "tasks",
        "",
        Kind::TaskListComplete(pb::TaskListScorer {}),
    )]));
    let chunks = support::generate(&mut agents, request).await;
    let found = checks(&chunks);
    assert_eq!(found.len(), 2);
    assert!(found[1].max_iteration_reached);
    // A hook scorer without a handler is refused up front, naming the field.
    let mut request = ask("worker", "x");
    request.is_task_complete = Some(completion(vec![scorer(
        "h",
        "",
        Kind::Hook(pb::HookScorer {}),
    )]));
    let err = agents.generate(request).await.expect_err("refused");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    let fields: Vec<String> = err
        .get_details_bad_request()
        .expect("bad request details")
        .field_violations
        .into_iter()
        .map(|v| v.field)
        .collect();
    assert_eq!(fields, ["is_task_complete.scorers.0"]);
}

#[tokio::test]
async fn a_missed_deadline_follows_the_declared_policy() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    mock.push(MockReply::Text("hello".into()));
    let silent = || -> Answerer { Box::new(|_| vec![]) };
    let out = generate_hooked(
        &server,
        ask("worker", "hi"),
        hook_options(&[pb::HookKind::PrepareStep], Some(100), false),
        silent(),
    )
    .await;
    let result = finish(&out);
    assert_eq!(result.finish_reason(), pb::FinishReason::Error);
    let error = result.error.expect("error");
    assert_eq!(
        (error.id.as_str(), error.category.as_str()),
        ("HOOK_FAILED", "HOOK")
    );
    assert!(support::kinds(&out.chunks).contains(&"hook-error"));
    assert!(mock.requests().is_empty(), "the model is never called");
    // CONTINUE: the run goes on without the hook.
    let out = generate_hooked(
        &server,
        ask("worker", "hi"),
        hook_options(&[pb::HookKind::PrepareStep], Some(100), true),
        silent(),
    )
    .await;
    assert_eq!(finish(&out).finish_reason(), pb::FinishReason::Stop);
    let policy = out.chunks.iter().find_map(|c| match &c.payload {
        Some(Payload::HookError(e)) => Some(e.policy()),
        _ => None,
    });
    assert_eq!(policy, Some(pb::HookFailurePolicy::Continue));
}

#[tokio::test]
async fn bad_answers_are_rejected_and_the_run_goes_on() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    mock.push(MockReply::Text("hello".into()));
    let out = generate_hooked(
        &server,
        ask("worker", "hi"),
        hook_options(&[pb::HookKind::PrepareStep], None, false),
        Box::new(|call| {
            let right = pb::HookAnswer {
                id: call.id.clone(),
                answer: Some(Answer::PrepareStep(pb::PrepareStepAnswer::default())),
            };
            vec![
                pb::HookAnswer {
                    id: "nope".into(),
                    answer: None,
                },
                pb::HookAnswer {
                    id: call.id.clone(),
                    answer: Some(Answer::BeforeToolCall(pb::BeforeToolCallAnswer::default())),
                },
                right.clone(),
                right,
            ]
        }),
    )
    .await;
    assert_eq!(finish(&out).finish_reason(), pb::FinishReason::Stop);
    let reasons: Vec<&str> = out.rejected.iter().map(|r| r.reason.as_str()).collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(reasons[0].contains("answer.id \"nope\""));
    assert!(reasons[1].contains("answer.before_tool_call"));
    assert!(reasons[2].contains("already answered"));
    // A stream that does not start with `start`, and unknown kinds, are INVALID_ARGUMENT.
    let mut client = support::agents_client(&server).await;
    let first = pb::GenerateWithHooksRequest {
        message: Some(pb::generate_with_hooks_request::Message::Answer(
            pb::HookAnswer::default(),
        )),
    };
    let err = client
        .generate_with_hooks(futures::stream::iter([first]))
        .await
        .expect_err("refused");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    let start = pb::GenerateWithHooksRequest {
        message: Some(pb::generate_with_hooks_request::Message::Start(
            pb::HookedGenerate {
                request: Some(ask("worker", "x")),
                hooks: Some(pb::HookOptions {
                    kinds: vec![99],
                    ..Default::default()
                }),
            },
        )),
    };
    let err = client
        .generate_with_hooks(futures::stream::iter([start]))
        .await
        .expect_err("refused");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
}

/// A webhook server: answers before_tool_call with a skip, or fails with 500.
struct Hook {
    url: String,
    seen: Arc<Mutex<Vec<Value>>>,
    _task: tokio::task::JoinHandle<()>,
}

async fn webhook() -> Hook {
    use axum::Json;
    use axum::http::StatusCode;
    use axum::routing::post;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let log2 = seen.clone();
    let app = axum::Router::new()
        .route(
            "/policy",
            post(move |Json(body): Json<Value>| {
                log.lock().expect("log").push(body.clone());
                async move {
                    let allowed = body["beforeToolCall"]["toolName"] == "task_write";
                    if allowed {
                        Json(json!({}))
                    } else {
                        Json(json!({"id": body["id"], "beforeToolCall": {"proceed": false, "output": "blocked by policy"}}))
                    }
                }
            }),
        )
        .route(
            "/down",
            post(move |Json(body): Json<Value>| {
                log2.lock().expect("log").push(body);
                async { (StatusCode::INTERNAL_SERVER_ERROR, "down") }
            }),
        );
    let (url, task) = support::serve_http(app).await;
    Hook {
        url,
        seen,
        _task: task,
    }
}

#[tokio::test]
async fn an_agents_webhook_enforces_a_tool_policy_and_the_client_overrides_it() {
    let hook = webhook().await;
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let extra = format!(
        r#"
[[agents]]
id = "policed"
model = "mock/test-model"
tools = ["tasks"]
[[agents.webhooks]]
url = "{url}/policy"
kinds = ["before_tool_call"]
headers = {{ x-policy = "strict" }}
[[agents.webhooks]]
url = "{url}/down"
kinds = ["on_iteration_complete"]
on_failure = "continue"
timeout_ms = 2000
"#,
        url = hook.url
    );
    let server = server(&mock, dir.path(), &extra).await;
    let mut agents = support::agents_client(&server).await;
    mock.push(tool_call("task_check", json!({})));
    mock.push(MockReply::Text("ok".into()));
    let chunks = support::generate(&mut agents, ask("policed", "check")).await;
    let tool = messages(&mock, 1)
        .into_iter()
        .find(|m| m["role"] == "tool")
        .expect("tool message");
    assert_eq!(tool["content"], "blocked by policy");
    assert_eq!(
        support::finish(&chunks).finish_reason(),
        pb::FinishReason::Stop
    );
    // The failing on_iteration_complete webhook (CONTINUE) is reported, and nothing hangs.
    assert_eq!(
        support::kinds(&chunks)
            .iter()
            .filter(|k| **k == "hook-error")
            .count(),
        2
    );
    {
        let seen = hook.seen.lock().expect("seen");
        let call = seen
            .iter()
            .find(|b| b["kind"] == "HOOK_KIND_BEFORE_TOOL_CALL")
            .expect("call");
        assert_eq!(call["agentId"], "policed");
        assert_eq!(call["beforeToolCall"]["toolName"], "task_check");
    }
    // A client handling before_tool_call overrides the agent's webhook for that kind.
    let before = hook.seen.lock().expect("seen").len();
    mock.push(tool_call("task_check", json!({})));
    mock.push(MockReply::Text("ok".into()));
    let out = generate_hooked(
        &server,
        ask("policed", "check"),
        hook_options(&[pb::HookKind::BeforeToolCall], None, false),
        Box::new(unchanged),
    )
    .await;
    assert_eq!(out.calls.len(), 1);
    assert_eq!(finish(&out).finish_reason(), pb::FinishReason::Stop);
    let seen = hook.seen.lock().expect("seen");
    assert!(
        seen[before..]
            .iter()
            .all(|b| b["kind"] != "HOOK_KIND_BEFORE_TOOL_CALL")
    );
}

#[tokio::test]
async fn continuations_attach_their_own_hooks_and_a_missing_handler_follows_the_policy() {
    use pb::continue_with_hooks_request::Message;
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    // A run suspends on an approval; its before_tool_call hook is not called before approval.
    mock.push(tool_call("task_check", json!({})));
    let kinds = [pb::HookKind::BeforeToolCall];
    let out = generate_hooked(
        &server,
        ask("guarded", "check"),
        hook_options(&kinds, None, false),
        Box::new(|_| panic!("no hook before the approval")),
    )
    .await;
    let result = finish(&out);
    assert_eq!(result.finish_reason(), pb::FinishReason::Suspended);
    let run_id = result.run_id.clone();
    let call_id = result.tool_calls[0].tool_call_id.clone();
    // Approved with hooks attached: the continuation's client answers before_tool_call.
    mock.push(MockReply::Text("checked".into()));
    let mut approvals = ApprovalServiceClient::new(support::channel(&server).await);
    let (tx, rx) = mpsc::channel(8);
    tx.send(pb::ContinueWithHooksRequest {
        message: Some(Message::Start(pb::HookedContinue {
            decision: Some(pb::hooked_continue::Decision::Approve(pb::ApproveRequest {
                run_id: run_id.clone(),
                tool_call_id: call_id,
                ..Default::default()
            })),
            hooks: Some(hook_options(&kinds, None, false)),
        })),
    })
    .await
    .expect("start");
    let events = approvals
        .continue_with_hooks(ReceiverStream::new(rx))
        .await
        .expect("continue")
        .into_inner();
    let (answers, mut answer_rx) = mpsc::channel::<pb::HookAnswer>(8);
    let forward = tx.clone();
    tokio::spawn(async move {
        while let Some(a) = answer_rx.recv().await {
            let _ = forward
                .send(pb::ContinueWithHooksRequest {
                    message: Some(Message::Answer(a)),
                })
                .await;
        }
    });
    drop(tx);
    let out = drive(
        events,
        answers,
        Box::new(|call| {
            answer(
                call,
                Answer::BeforeToolCall(pb::BeforeToolCallAnswer {
                    proceed: Some(false),
                    output: Some(to_proto_value(&json!("approved but skipped"))),
                }),
            )
        }),
    )
    .await;
    assert_eq!(out.calls.len(), 1);
    assert_eq!(finish(&out).finish_reason(), pb::FinishReason::Stop);
    let tool = messages(&mock, 1)
        .into_iter()
        .find(|m| m["role"] == "tool")
        .expect("tool message");
    assert_eq!(tool["content"], "approved but skipped");
    // Suspended with hooks, continued by plain Approve: the FAIL policy ends the run.
    mock.push(tool_call("task_check", json!({})));
    let out = generate_hooked(
        &server,
        ask("guarded", "check"),
        hook_options(&kinds, None, false),
        Box::new(|_| vec![]),
    )
    .await;
    let result = finish(&out);
    let chunks = support::collect(
        approvals
            .approve(pb::ApproveRequest {
                run_id: result.run_id.clone(),
                tool_call_id: result.tool_calls[0].tool_call_id.clone(),
                ..Default::default()
            })
            .await
            .expect("approve")
            .into_inner(),
    )
    .await;
    let end = support::finish(&chunks);
    assert_eq!(end.finish_reason(), pb::FinishReason::Error);
    assert_eq!(end.error.expect("error").category, "HOOK");
}
