//! Run hooks on a real server: a gRPC client answering hook calls on GenerateWithHooks /
//! ContinueWithHooks, and agents' webhooks served by a real HTTP server. The scripted model
//! records every request, so each test checks what the model reads. One binary, a file per
//! concern: `delegation.rs` (sub-agents), `loop_hooks.rs` (tool hooks, iterations, prepare_step, continuations),
//! `scorers.rs` (completion checks), `evaluations.rs` (run scorers and ListScores), `faults.rs` (deadlines, policies, bad answers),
//! `webhooks.rs`.

#[path = "../support/mod.rs"]
mod support;

mod delegation;
mod evaluations;
mod faults;
mod loop_hooks;
mod processors;
mod scorers;
mod webhooks;

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
        omit_messages: false,
        kinds: kinds.iter().map(|k| *k as i32).collect(),
        deadline_ms,
        on_failure: if continue_on_failure {
            pb::HookFailurePolicy::Continue
        } else {
            pb::HookFailurePolicy::Fail
        } as i32,
    }
}

/// A sender of answers that reach the request stream `tx` as `wrap` makes them; the stream
/// stays open (the run's client is there) until the returned sender is dropped.
fn forward_answers<T: Send + 'static>(
    tx: mpsc::Sender<T>,
    wrap: fn(pb::HookAnswer) -> T,
) -> mpsc::Sender<pb::HookAnswer> {
    let (answers, mut answer_rx) = mpsc::channel::<pb::HookAnswer>(16);
    tokio::spawn(async move {
        while let Some(a) = answer_rx.recv().await {
            if tx.send(wrap(a)).await.is_err() {
                break;
            }
        }
    });
    answers
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
    let answers = forward_answers(tx, |a| pb::GenerateWithHooksRequest {
        message: Some(Message::Answer(a)),
    });
    let events = client
        .generate_with_hooks(ReceiverStream::new(rx))
        .await
        .expect("hooked generate starts")
        .into_inner();
    drive(events, answers, answer).await
}

/// Decides a suspended call on ContinueWithHooks, the client answering `kinds` with `answer`.
async fn continue_hooked(
    server: &RunningServer,
    decision: pb::hooked_continue::Decision,
    options: pb::HookOptions,
    answer: Answerer,
) -> Hooked {
    use pb::continue_with_hooks_request::Message;
    let mut approvals = ApprovalServiceClient::new(support::channel(server).await);
    let (tx, rx) = mpsc::channel(8);
    tx.send(pb::ContinueWithHooksRequest {
        message: Some(Message::Start(pb::HookedContinue {
            decision: Some(decision),
            hooks: Some(options),
        })),
    })
    .await
    .expect("start sent");
    let events = approvals
        .continue_with_hooks(ReceiverStream::new(rx))
        .await
        .expect("continue starts")
        .into_inner();
    let answers = forward_answers(tx, |a| pb::ContinueWithHooksRequest {
        message: Some(Message::Answer(a)),
    });
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

/// `(role, text)` of each message of the model's request `request` (tool calls carry no text).
fn prompt(mock: &MockOpenAi, request: usize) -> Vec<(String, String)> {
    messages(mock, request)
        .iter()
        .map(|m| {
            let content = match &m["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
                _ => String::new(),
            };
            (m["role"].as_str().unwrap_or("").to_owned(), content)
        })
        .collect()
}

fn finish(h: &Hooked) -> pb::GenerateResult {
    support::finish(&h.chunks)
}

/// The texts of the messages saved in a thread (none when it does not exist).
async fn thread_texts(server: &RunningServer, thread: &str, resource: &str) -> Vec<String> {
    let mut threads =
        agentd::pb::thread_service_client::ThreadServiceClient::new(support::channel(server).await);
    let Ok(listed) = threads
        .list_messages(pb::ListMessagesRequest {
            thread_id: thread.into(),
            resource_id: resource.into(),
            ..Default::default()
        })
        .await
    else {
        return Vec::new();
    };
    listed
        .into_inner()
        .messages
        .iter()
        .map(|m| {
            m.content
                .iter()
                .filter_map(|p| match &p.kind {
                    Some(pb::part::Kind::Text(t)) => Some(t.text.clone()),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

async fn server(mock: &MockOpenAi, dir: &std::path::Path, extra: &str) -> RunningServer {
    let agents = format!("{AGENTS}{extra}");
    support::start(support::agent_config(mock, &agents, "embedded", dir)).await
}
