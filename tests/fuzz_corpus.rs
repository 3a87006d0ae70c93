//! The fuzz target's seed corpus (fuzz/corpus/decode_requests/): one valid request per RPC,
//! encoded here, in the target's input format (a byte picking the method, then the request).
//! The committed files must be exactly these; `AGENTD_WRITE_CORPUS=1 cargo test --test
//! fuzz_corpus` rewrites them after a proto change.

use std::path::PathBuf;

use agentd::api::fuzzing::{METHODS, Outcome, decode_and_convert};
use agentd::pb;
use prost::Message;

/// One request of `method`, in the fuzz target's input format.
fn seed(method: &str, request: &impl Message) -> (String, Vec<u8>) {
    let index = METHODS
        .iter()
        .position(|m| *m == method)
        .unwrap_or_else(|| panic!("{method} is not in METHODS"));
    let mut bytes = vec![u8::try_from(index).expect("fewer than 256 methods")];
    bytes.extend(request.encode_to_vec());
    let name = method.trim_start_matches("agentd.v1.").replace('/', "-");
    (name, bytes)
}

fn text(s: &str) -> pb::Part {
    pb::Part {
        kind: Some(pb::part::Kind::Text(pb::TextPart { text: s.into() })),
    }
}

fn generate() -> pb::GenerateRequest {
    pb::GenerateRequest {
        agent_id: "notes".into(),
        messages: vec![pb::Message {
            role: pb::Role::User.into(),
            content: vec![text("Plan the release")],
            ..Default::default()
        }],
        max_steps: Some(4),
        memory: Some(pb::MemoryOptions {
            thread: Some(pb::ThreadRef {
                id: "thread-1".into(),
                ..Default::default()
            }),
            resource: "user-1".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    let (thread_id, resource_id) = ("thread-1".to_owned(), "user-1".to_owned());
    let task = |id: Option<&str>, content: &str, status: pb::TaskStatus| pb::TaskInput {
        id: id.map(str::to_owned),
        content: content.into(),
        status: status.into(),
        active_form: format!("Doing: {content}"),
    };
    let approve = pb::ApproveRequest {
        run_id: "run-1".into(),
        tool_call_id: "call-1".into(),
        ..Default::default()
    };
    let hooks = pb::HookOptions {
        kinds: vec![pb::HookKind::BeforeToolCall.into()],
        deadline_ms: Some(5000),
        ..Default::default()
    };
    vec![
        seed(
            "agentd.v1.TaskService/Write",
            &pb::WriteRequest {
                thread_id: thread_id.clone(),
                resource_id: resource_id.clone(),
                tasks: vec![
                    task(None, "Write tests", pb::TaskStatus::InProgress),
                    task(Some("task_review"), "Review", pb::TaskStatus::Pending),
                    task(None, "Ünïcode café", pb::TaskStatus::Completed),
                ],
            },
        ),
        seed(
            "agentd.v1.TaskService/Update",
            &pb::UpdateRequest {
                thread_id: thread_id.clone(),
                resource_id: resource_id.clone(),
                id: "task_review".into(),
                status: Some(pb::TaskStatus::InProgress.into()),
                ..Default::default()
            },
        ),
        seed(
            "agentd.v1.TaskService/Complete",
            &pb::CompleteRequest {
                thread_id: thread_id.clone(),
                resource_id: resource_id.clone(),
                id: "task_review".into(),
            },
        ),
        seed(
            "agentd.v1.TaskService/Check",
            &pb::CheckRequest {
                thread_id: thread_id.clone(),
                resource_id: resource_id.clone(),
            },
        ),
        seed(
            "agentd.v1.TaskService/Watch",
            &pb::WatchRequest {
                thread_id: thread_id.clone(),
                resource_id: resource_id.clone(),
            },
        ),
        seed("agentd.v1.AgentService/Generate", &generate()),
        seed(
            "agentd.v1.AgentService/Observe",
            &pb::ObserveRequest {
                run_id: "run-1".into(),
                after_sequence: 3,
            },
        ),
        seed(
            "agentd.v1.AgentService/Abort",
            &pb::AbortRequest {
                run_id: "run-1".into(),
                reason: "user cancelled".into(),
            },
        ),
        seed(
            "agentd.v1.AgentService/ListAgents",
            &pb::ListAgentsRequest {},
        ),
        seed(
            "agentd.v1.AgentService/GetAgent",
            &pb::GetAgentRequest {
                agent_id: "notes".into(),
            },
        ),
        seed(
            "agentd.v1.AgentService/GenerateWithHooks",
            &pb::GenerateWithHooksRequest {
                message: Some(pb::generate_with_hooks_request::Message::Start(
                    pb::HookedGenerate {
                        request: Some(generate()),
                        hooks: Some(hooks.clone()),
                    },
                )),
            },
        ),
        seed(
            "agentd.v1.ApprovalService/ListPending",
            &pb::ListPendingRequest {
                resource_id: Some(resource_id.clone()),
                ..Default::default()
            },
        ),
        seed("agentd.v1.ApprovalService/Approve", &approve),
        seed(
            "agentd.v1.ApprovalService/Decline",
            &pb::DeclineRequest {
                run_id: "run-1".into(),
                tool_call_id: "call-1".into(),
                reason: Some("not now".into()),
                ..Default::default()
            },
        ),
        seed(
            "agentd.v1.ApprovalService/Resume",
            &pb::ResumeRequest {
                run_id: "run-1".into(),
                tool_call_id: "call-1".into(),
                data: Some(prost_types::Value {
                    kind: Some(prost_types::value::Kind::BoolValue(true)),
                }),
                ..Default::default()
            },
        ),
        seed(
            "agentd.v1.ApprovalService/ContinueWithHooks",
            &pb::ContinueWithHooksRequest {
                message: Some(pb::continue_with_hooks_request::Message::Start(
                    pb::HookedContinue {
                        decision: Some(pb::hooked_continue::Decision::Approve(approve.clone())),
                        hooks: Some(hooks),
                    },
                )),
            },
        ),
        seed(
            "agentd.v1.ThreadService/ListThreads",
            &pb::ListThreadsRequest {
                resource_id: resource_id.clone(),
                page_size: 20,
                ..Default::default()
            },
        ),
        seed(
            "agentd.v1.ThreadService/GetThread",
            &pb::GetThreadRequest {
                thread_id: thread_id.clone(),
                resource_id: resource_id.clone(),
            },
        ),
        seed(
            "agentd.v1.ThreadService/UpdateThread",
            &pb::UpdateThreadRequest {
                thread_id: thread_id.clone(),
                resource_id: resource_id.clone(),
                title: Some("Release planning".into()),
                metadata: None,
            },
        ),
        seed(
            "agentd.v1.ThreadService/DeleteThread",
            &pb::DeleteThreadRequest {
                thread_id: thread_id.clone(),
                resource_id: resource_id.clone(),
            },
        ),
        seed(
            "agentd.v1.ThreadService/ListMessages",
            &pb::ListMessagesRequest {
                thread_id: thread_id.clone(),
                resource_id: resource_id.clone(),
                page_size: 50,
                ..Default::default()
            },
        ),
        seed(
            "agentd.v1.ThreadService/DeleteMessages",
            &pb::DeleteMessagesRequest {
                thread_id: thread_id.clone(),
                resource_id: resource_id.clone(),
                message_ids: vec!["msg-1".into()],
            },
        ),
        seed(
            "agentd.v1.ThreadService/GetWorkingMemory",
            &pb::GetWorkingMemoryRequest {
                resource_id: resource_id.clone(),
                agent_id: "notes".into(),
                ..Default::default()
            },
        ),
        seed(
            "agentd.v1.ThreadService/UpdateWorkingMemory",
            &pb::UpdateWorkingMemoryRequest {
                resource_id,
                thread_id,
                scope: pb::WorkingMemoryScope::Thread.into(),
                agent_id: "profile".into(),
                content: r#"{"name": "Ada"}"#.into(),
                ..Default::default()
            },
        ),
        seed(
            "agentd.v1.ScoreService/ListScores",
            &pb::ListScoresRequest {
                target: Some(pb::list_scores_request::Target::AgentId("notes".into())),
                page_size: 10,
                ..Default::default()
            },
        ),
    ]
}

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/decode_requests")
}

#[test]
fn every_method_has_an_accepted_seed() {
    let seeds = seeds();
    assert_eq!(seeds.len(), METHODS.len());
    for (name, bytes) in &seeds {
        let method = METHODS[usize::from(bytes[0])];
        let outcome = decode_and_convert(method, &bytes[1..]);
        assert!(
            matches!(outcome, Some(Outcome::Accepted)),
            "{name}: {outcome:?}"
        );
    }
}

#[test]
fn the_committed_corpus_is_the_generated_one() {
    let dir = corpus_dir();
    if std::env::var_os("AGENTD_WRITE_CORPUS").is_some() {
        std::fs::create_dir_all(&dir).expect("create the corpus dir");
        for (name, bytes) in seeds() {
            std::fs::write(dir.join(name), bytes).expect("write a seed");
        }
    }
    for (name, bytes) in seeds() {
        let committed = std::fs::read(dir.join(&name)).unwrap_or_default();
        assert!(
            committed == bytes,
            "fuzz/corpus/decode_requests/{name} is stale or missing: run \
             AGENTD_WRITE_CORPUS=1 cargo test --test fuzz_corpus"
        );
    }
}
