//! Shared helpers of the integration tests: in-process servers on 127.0.0.1:0, clients, and a
//! private redis-server per test.

#![allow(dead_code)]

pub mod otlp;
pub mod redis;
pub mod span_tree;
pub mod writers;

use std::path::Path;
use std::time::Duration;

use agentd::config::Config;
use agentd::pb::task_service_client::TaskServiceClient;
use agentd::server::{self, RunningServer};
use tonic::transport::Channel;

/// A config for tests: loopback on a free port, fast health probes, short drain.
pub fn test_config(store_url: &str, data_dir: &Path) -> Config {
    let mut config = Config::default();
    config.server.listen = "127.0.0.1:0".parse().expect("loopback address");
    config.server.health_interval_ms = 100;
    config.server.shutdown_grace_secs = 5;
    config.store.url = store_url.to_owned();
    config.store.data_dir = data_dir.to_owned();
    config
}

/// Starts a server with `config`.
pub async fn start(config: Config) -> RunningServer {
    server::start(config).await.expect("server starts")
}

/// Starts a server on the embedded store in `dir`.
pub async fn start_embedded(dir: &Path) -> RunningServer {
    start(test_config("embedded", dir)).await
}

/// Starts a server on Redis at `url`.
pub async fn start_redis(url: &str) -> RunningServer {
    let dir = std::env::temp_dir();
    start(test_config(url, &dir)).await
}

/// A channel to a running server.
pub async fn channel(server: &RunningServer) -> Channel {
    Channel::from_shared(format!("http://{}", server.addr))
        .expect("valid uri")
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .expect("connect to the test server")
}

/// A TaskService client for a running server.
pub async fn tasks_client(server: &RunningServer) -> TaskServiceClient<Channel> {
    TaskServiceClient::new(channel(server).await)
}

/// Polls `probe` every 50 ms until it returns true or `within` passes.
pub async fn eventually<F, Fut>(within: Duration, mut probe: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if probe().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A unique id for test threads and resources.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

use agentd::model::MockOpenAi;
use agentd::pb;
use agentd::pb::agent_service_client::AgentServiceClient;
use agentd::pb::chunk::Payload;
use futures::StreamExt;

/// Agents pointing at a mock model: `planner` has the task tools, `plain` has none.
pub const AGENTS_TOML: &str = r#"
[[agents]]
id = "planner"
name = "Planner"
instructions = "You plan work with the task tools."
model = "mock/test-model"
tools = ["tasks"]

[[agents]]
id = "plain"
instructions = "You answer briefly."
model = "mock/test-model"
"#;

/// A config whose provider `mock` is the given mock model, with `agents` (TOML) appended.
pub fn agent_config(mock: &MockOpenAi, agents: &str, store_url: &str, dir: &Path) -> Config {
    let text = format!(
        "[[providers]]\nname = \"mock\"\nbase_url = \"{}\"\nmax_retries = 0\n{agents}",
        mock.base_url()
    );
    let mut config = Config::from_toml(&text).expect("agent config parses");
    let base = test_config(store_url, dir);
    config.server = base.server;
    config.store = base.store;
    config.validate().expect("agent config is valid");
    config
}

/// Serves `app` on a free loopback port (an HTTP tool endpoint in a test); returns its base
/// URL and the server task.
pub async fn serve_http(app: axum::Router) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, task)
}

/// The health status a server reports for `service` (`None` when the call fails).
pub async fn health_status(
    client: &mut tonic_health::pb::health_client::HealthClient<Channel>,
    service: &str,
) -> Option<tonic_health::pb::health_check_response::ServingStatus> {
    let response = client
        .check(tonic_health::pb::HealthCheckRequest {
            service: service.to_owned(),
        })
        .await
        .ok()?;
    tonic_health::pb::health_check_response::ServingStatus::try_from(response.into_inner().status)
        .ok()
}

/// An AgentService client for a running server.
pub async fn agents_client(server: &RunningServer) -> AgentServiceClient<Channel> {
    AgentServiceClient::new(channel(server).await)
}

/// A user message with one text part.
pub fn user(text: &str) -> pb::Message {
    pb::Message {
        role: pb::Role::User.into(),
        content: vec![pb::Part {
            kind: Some(pb::part::Kind::Text(pb::TextPart { text: text.into() })),
        }],
        ..Default::default()
    }
}

/// Memory options for a thread.
pub fn memory(thread: &str, resource: &str, last_messages: Option<i32>) -> pb::MemoryOptions {
    pb::MemoryOptions {
        thread: Some(pb::ThreadRef {
            id: thread.into(),
            ..Default::default()
        }),
        resource: resource.into(),
        options: Some(pb::MemoryConfig {
            last_messages,
            ..Default::default()
        }),
    }
}

/// The text contents of the messages the mock model was sent in its `request`-th call.
pub fn sent_texts(mock: &MockOpenAi, request: usize) -> Vec<String> {
    mock.requests()[request]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["content"].as_str())
        .map(str::to_owned)
        .collect()
}

/// Collects a chunk stream to its end (bounded by 30 s).
pub async fn collect(mut stream: tonic::Streaming<pb::Chunk>) -> Vec<pb::Chunk> {
    let mut chunks = Vec::new();
    let read = async {
        while let Some(chunk) = stream.next().await {
            chunks.push(chunk.expect("chunk"));
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("the stream ends in time");
    chunks
}

/// Runs a Generate and collects its chunks.
pub async fn generate(
    client: &mut AgentServiceClient<Channel>,
    request: pb::GenerateRequest,
) -> Vec<pb::Chunk> {
    let stream = client
        .generate(request)
        .await
        .expect("generate starts")
        .into_inner();
    collect(stream).await
}

/// The kebab-case type names of chunks, e.g. `text-delta`.
pub fn kinds(chunks: &[pb::Chunk]) -> Vec<&'static str> {
    chunks
        .iter()
        .map(|c| match &c.payload {
            Some(Payload::Start(_)) => "start",
            Some(Payload::StepStart(_)) => "step-start",
            Some(Payload::TextStart(_)) => "text-start",
            Some(Payload::TextDelta(_)) => "text-delta",
            Some(Payload::TextEnd(_)) => "text-end",
            Some(Payload::ReasoningStart(_)) => "reasoning-start",
            Some(Payload::ReasoningDelta(_)) => "reasoning-delta",
            Some(Payload::ReasoningEnd(_)) => "reasoning-end",
            Some(Payload::ToolCall(_)) => "tool-call",
            Some(Payload::ToolCallDelta(_)) => "tool-call-delta",
            Some(Payload::ToolCallApproval(_)) => "tool-call-approval",
            Some(Payload::ToolCallSuspended(_)) => "tool-call-suspended",
            Some(Payload::ToolResult(_)) => "tool-result",
            Some(Payload::ToolError(_)) => "tool-error",
            Some(Payload::ToolOutputDenied(_)) => "tool-output-denied",
            Some(Payload::StepFinish(_)) => "step-finish",
            Some(Payload::Data(_)) => "data",
            Some(Payload::Object(_)) => "object",
            Some(Payload::ObjectResult(_)) => "object-result",
            Some(Payload::Tripwire(_)) => "tripwire",
            Some(Payload::Abort(_)) => "abort",
            Some(Payload::Error(_)) => "error",
            Some(Payload::Raw(_)) => "raw",
            Some(Payload::Finish(_)) => "finish",
            Some(Payload::Source(_)) => "source",
            Some(Payload::File(_)) => "file",
            Some(Payload::IsTaskComplete(_)) => "is-task-complete",
            Some(Payload::HookError(_)) => "hook-error",
            Some(Payload::ToolOutput(_)) => "tool-output",
            None => "none",
        })
        .collect()
}

/// The result carried by the last (finish) chunk.
pub fn finish(chunks: &[pb::Chunk]) -> pb::GenerateResult {
    match chunks.last().and_then(|c| c.payload.clone()) {
        Some(Payload::Finish(result)) => result,
        other => panic!("the last chunk must be finish, got {other:?}"),
    }
}

/// Every agentd RPC as (service, method).
pub const AGENTD_METHODS: [(&str, &str); 22] = [
    ("agentd.v1.AgentService", "Generate"),
    ("agentd.v1.AgentService", "Observe"),
    ("agentd.v1.AgentService", "Abort"),
    ("agentd.v1.AgentService", "ListAgents"),
    ("agentd.v1.AgentService", "GetAgent"),
    ("agentd.v1.TaskService", "Write"),
    ("agentd.v1.TaskService", "Update"),
    ("agentd.v1.TaskService", "Complete"),
    ("agentd.v1.TaskService", "Check"),
    ("agentd.v1.TaskService", "Watch"),
    ("agentd.v1.ApprovalService", "ListPending"),
    ("agentd.v1.ApprovalService", "Approve"),
    ("agentd.v1.ApprovalService", "Decline"),
    ("agentd.v1.ApprovalService", "Resume"),
    ("agentd.v1.ThreadService", "ListThreads"),
    ("agentd.v1.ThreadService", "GetThread"),
    ("agentd.v1.ThreadService", "UpdateThread"),
    ("agentd.v1.ThreadService", "DeleteThread"),
    ("agentd.v1.ThreadService", "ListMessages"),
    ("agentd.v1.ThreadService", "DeleteMessages"),
    ("agentd.v1.ThreadService", "GetWorkingMemory"),
    ("agentd.v1.ThreadService", "UpdateWorkingMemory"),
];

/// `message` as a request carrying `metadata`.
pub fn with_metadata<T>(metadata: &[(&'static str, &str)], message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    for (key, value) in metadata {
        request
            .metadata_mut()
            .insert(*key, value.parse().expect("ascii metadata"));
    }
    request
}

/// The outcome of one call of [`call_every_method`]: `Ok` or the status it failed with.
pub type CallOutcome = ((&'static str, &'static str), Result<(), tonic::Status>);

/// Calls every method of [`AGENTD_METHODS`] once, in that order, with `metadata` on each call.
/// Arguments are harmless whatever the server holds (an unknown agent and runs, a fresh
/// thread), so most calls fail with NOT_FOUND once past auth; Watch reads its first update.
pub async fn call_every_method(
    server: &RunningServer,
    metadata: &[(&'static str, &str)],
) -> Vec<CallOutcome> {
    use pb::agent_service_client::AgentServiceClient;
    use pb::approval_service_client::ApprovalServiceClient;

    let channel = channel(server).await;
    let mut agents = AgentServiceClient::new(channel.clone());
    let mut tasks = TaskServiceClient::new(channel.clone());
    let threads_channel = channel.clone();
    let mut approvals = ApprovalServiceClient::new(channel);
    let thread = unique("every-method");
    let (t, r) = (thread.as_str(), "every-method");
    let run = || "no-such-run".to_owned();
    let mut out = Vec::new();
    let mut record = |i: usize, result: Result<(), tonic::Status>| {
        out.push((AGENTD_METHODS[i], result));
    };

    let generate = agents.generate(with_metadata(
        metadata,
        pb::GenerateRequest {
            agent_id: "no-such-agent".into(),
            prompt: "hello".into(),
            ..Default::default()
        },
    ));
    record(0, generate.await.map(drop));
    let observe = agents.observe(with_metadata(
        metadata,
        pb::ObserveRequest {
            run_id: run(),
            ..Default::default()
        },
    ));
    record(1, observe.await.map(drop));
    let abort = agents.abort(with_metadata(
        metadata,
        pb::AbortRequest {
            run_id: run(),
            ..Default::default()
        },
    ));
    record(2, abort.await.map(drop));
    record(
        3,
        agents
            .list_agents(with_metadata(metadata, pb::ListAgentsRequest {}))
            .await
            .map(drop),
    );
    let get = agents.get_agent(with_metadata(
        metadata,
        pb::GetAgentRequest {
            agent_id: "no-such-agent".into(),
        },
    ));
    record(4, get.await.map(drop));

    let write = tasks.write(with_metadata(
        metadata,
        pb::WriteRequest {
            thread_id: t.into(),
            resource_id: r.into(),
            ..Default::default()
        },
    ));
    record(5, write.await.map(drop));
    let update = tasks.update(with_metadata(
        metadata,
        pb::UpdateRequest {
            thread_id: t.into(),
            resource_id: r.into(),
            id: "task_none".into(),
            ..Default::default()
        },
    ));
    record(6, update.await.map(drop));
    let complete = tasks.complete(with_metadata(
        metadata,
        pb::CompleteRequest {
            thread_id: t.into(),
            resource_id: r.into(),
            id: "task_none".into(),
        },
    ));
    record(7, complete.await.map(drop));
    let check = tasks.check(with_metadata(
        metadata,
        pb::CheckRequest {
            thread_id: t.into(),
            resource_id: r.into(),
        },
    ));
    record(8, check.await.map(drop));
    let watch = tasks.watch(with_metadata(
        metadata,
        pb::WatchRequest {
            thread_id: t.into(),
            resource_id: r.into(),
        },
    ));
    let watched = match watch.await {
        Ok(stream) => {
            let mut stream = stream.into_inner();
            tokio::time::timeout(Duration::from_secs(10), stream.next())
                .await
                .expect("the first update comes in time")
                .expect("the stream yields the current list")
                .map(drop)
        }
        Err(status) => Err(status),
    };
    record(9, watched);

    let pending =
        approvals.list_pending(with_metadata(metadata, pb::ListPendingRequest::default()));
    record(10, pending.await.map(drop));
    let approve = approvals.approve(with_metadata(
        metadata,
        pb::ApproveRequest {
            run_id: run(),
            tool_call_id: "call".into(),
            ..Default::default()
        },
    ));
    record(11, approve.await.map(drop));
    let decline = approvals.decline(with_metadata(
        metadata,
        pb::DeclineRequest {
            run_id: run(),
            tool_call_id: "call".into(),
            ..Default::default()
        },
    ));
    record(12, decline.await.map(drop));
    let resume = approvals.resume(with_metadata(
        metadata,
        pb::ResumeRequest {
            run_id: run(),
            tool_call_id: "call".into(),
            ..Default::default()
        },
    ));
    record(13, resume.await.map(drop));

    let mut threads = pb::thread_service_client::ThreadServiceClient::new(threads_channel);
    let list = threads.list_threads(with_metadata(
        metadata,
        pb::ListThreadsRequest {
            resource_id: r.into(),
            ..Default::default()
        },
    ));
    record(14, list.await.map(drop));
    let get = threads.get_thread(with_metadata(
        metadata,
        pb::GetThreadRequest {
            thread_id: t.into(),
            resource_id: r.into(),
        },
    ));
    record(15, get.await.map(drop));
    let update = threads.update_thread(with_metadata(
        metadata,
        pb::UpdateThreadRequest {
            thread_id: t.into(),
            resource_id: r.into(),
            title: Some("title".into()),
            ..Default::default()
        },
    ));
    record(16, update.await.map(drop));
    let delete = threads.delete_thread(with_metadata(
        metadata,
        pb::DeleteThreadRequest {
            thread_id: t.into(),
            resource_id: r.into(),
        },
    ));
    record(17, delete.await.map(drop));
    let messages = threads.list_messages(with_metadata(
        metadata,
        pb::ListMessagesRequest {
            thread_id: t.into(),
            resource_id: r.into(),
            ..Default::default()
        },
    ));
    record(18, messages.await.map(drop));
    let delete_messages = threads.delete_messages(with_metadata(
        metadata,
        pb::DeleteMessagesRequest {
            thread_id: t.into(),
            resource_id: r.into(),
            message_ids: vec!["msg".into()],
        },
    ));
    record(19, delete_messages.await.map(drop));
    let get_working = threads.get_working_memory(with_metadata(
        metadata,
        pb::GetWorkingMemoryRequest {
            resource_id: r.into(),
            ..Default::default()
        },
    ));
    record(20, get_working.await.map(drop));
    let update_working = threads.update_working_memory(with_metadata(
        metadata,
        pb::UpdateWorkingMemoryRequest {
            resource_id: r.into(),
            thread_id: t.into(),
            scope: pb::WorkingMemoryScope::Thread.into(),
            content: "# notes".into(),
            ..Default::default()
        },
    ));
    record(21, update_working.await.map(drop));
    out
}
