//! The calls of the tenant matrix: every agentd RPC once, as one caller, on one target.

use std::time::Duration;

use agentd::pb;
use agentd::pb::agent_service_client::AgentServiceClient;
use agentd::pb::approval_service_client::ApprovalServiceClient;
use agentd::pb::score_service_client::ScoreServiceClient;
use agentd::pb::task_service_client::TaskServiceClient;
use agentd::pb::thread_service_client::ThreadServiceClient;
use agentd::server::RunningServer;
use futures::StreamExt;
use tonic::Code;
use tonic::transport::Channel;

use crate::support;
use crate::support::with_metadata;

/// Bearer metadata for `key` (none: no header).
pub(crate) fn bearer(key: Option<&str>) -> Vec<(&'static str, String)> {
    key.map(|k| vec![("authorization", format!("Bearer {k}"))])
        .unwrap_or_default()
}

/// `message` with the caller's credentials.
pub(crate) fn req<T>(auth: &[(&'static str, String)], message: T) -> tonic::Request<T> {
    let pairs: Vec<(&'static str, &str)> = auth.iter().map(|(k, v)| (*k, v.as_str())).collect();
    with_metadata(&pairs, message)
}

pub(crate) struct Clients {
    pub(crate) agents: AgentServiceClient<Channel>,
    pub(crate) tasks: TaskServiceClient<Channel>,
    pub(crate) threads: ThreadServiceClient<Channel>,
    pub(crate) approvals: ApprovalServiceClient<Channel>,
    pub(crate) scores: ScoreServiceClient<Channel>,
}

pub(crate) async fn clients(server: &RunningServer) -> Clients {
    let channel = support::channel(server).await;
    Clients {
        agents: AgentServiceClient::new(channel.clone()),
        tasks: TaskServiceClient::new(channel.clone()),
        threads: ThreadServiceClient::new(channel.clone()),
        approvals: ApprovalServiceClient::new(channel.clone()),
        scores: ScoreServiceClient::new(channel),
    }
}

pub(crate) fn code<T>(result: Result<T, tonic::Status>) -> Code {
    result.map_or_else(|s| s.code(), |_| Code::Ok)
}

/// Chunks of a started run, to its end.
pub(crate) async fn chunks(
    result: Result<tonic::Response<tonic::Streaming<pb::Chunk>>, tonic::Status>,
) -> Vec<pb::Chunk> {
    support::collect(result.expect("the run starts").into_inner()).await
}

pub(crate) fn ask(prompt: &str, thread: &str, resource: &str) -> pb::GenerateRequest {
    pb::GenerateRequest {
        agent_id: "planner".into(),
        prompt: prompt.into(),
        require_tool_approval: prompt == "needs-approval",
        memory: Some(support::memory(thread, resource, None)),
        ..Default::default()
    }
}

/// What the matrix calls on: a resource and thread with history, a finished and a suspended
/// run of the tenant, the suspended call's id.
pub(crate) struct Target {
    pub(crate) resource: String,
    pub(crate) thread: String,
    pub(crate) finished_run: String,
    pub(crate) suspended_run: String,
}

/// The RPCs in the order [`every_rpc`] calls them.
pub(crate) const RPCS: [&str; 25] = [
    "Generate",
    "GenerateWithHooks",
    "Observe",
    "Abort",
    "ListAgents",
    "GetAgent",
    "Write",
    "Update",
    "Complete",
    "Check",
    "Watch",
    "ListPending",
    "Approve",
    "Decline",
    "Resume",
    "ContinueWithHooks",
    "ListThreads",
    "GetThread",
    "UpdateThread",
    "ListMessages",
    "DeleteMessages",
    "GetWorkingMemory",
    "UpdateWorkingMemory",
    "ListScores",
    "DeleteThread",
];

/// Calls every RPC once as `key` on `target`, returning each one's status code. Decisions name
/// an unknown tool call (the run stays suspended) and the
/// thread is deleted last, on a thread id nobody made, so the calls leave the target usable.
pub(crate) async fn every_rpc(
    server: &RunningServer,
    key: Option<&str>,
    target: &Target,
) -> Vec<(&'static str, Code)> {
    let auth = bearer(key);
    let mut c = clients(server).await;
    let (r, t) = (target.resource.as_str(), target.thread.as_str());
    let mut out = Vec::new();
    let generate = c.agents.generate(req(&auth, ask("hi", t, r))).await;
    out.push(match generate {
        Ok(stream) => {
            support::collect(stream.into_inner()).await;
            Code::Ok
        }
        Err(status) => status.code(),
    });
    let hooked = pb::GenerateWithHooksRequest {
        message: Some(pb::generate_with_hooks_request::Message::Start(
            pb::HookedGenerate {
                request: Some(ask("hi", t, r)),
                hooks: None,
            },
        )),
    };
    let hooked = c
        .agents
        .generate_with_hooks(req(&auth, futures::stream::iter(vec![hooked])))
        .await;
    out.push(match hooked {
        Ok(stream) => {
            // The run ends with the stream; read it so it does not race the next calls.
            let mut stream = stream.into_inner();
            while let Some(Ok(_)) = stream.next().await {}
            Code::Ok
        }
        Err(status) => status.code(),
    });
    let observe = c.agents.observe(req(
        &auth,
        pb::ObserveRequest {
            run_id: target.finished_run.clone(),
            after_sequence: 0,
        },
    ));
    out.push(match observe.await {
        Ok(stream) => {
            support::collect(stream.into_inner()).await;
            Code::Ok
        }
        Err(status) => status.code(),
    });
    let abort = pb::AbortRequest {
        run_id: target.finished_run.clone(),
        reason: String::new(),
    };
    out.push(code(c.agents.abort(req(&auth, abort)).await));
    out.push(code(
        c.agents
            .list_agents(req(&auth, pb::ListAgentsRequest {}))
            .await,
    ));
    let get = pb::GetAgentRequest {
        agent_id: "planner".into(),
    };
    out.push(code(c.agents.get_agent(req(&auth, get)).await));

    let write = pb::WriteRequest {
        thread_id: t.into(),
        resource_id: r.into(),
        tasks: vec![pb::TaskInput {
            id: Some("task_1".into()),
            content: "Plan".into(),
            status: pb::TaskStatus::Pending.into(),
            active_form: "Planning".into(),
        }],
    };
    out.push(code(c.tasks.write(req(&auth, write)).await));
    let update = pb::UpdateRequest {
        thread_id: t.into(),
        resource_id: r.into(),
        id: "task_1".into(),
        content: Some("Plan more".into()),
        ..Default::default()
    };
    out.push(code(c.tasks.update(req(&auth, update)).await));
    let complete = pb::CompleteRequest {
        thread_id: t.into(),
        resource_id: r.into(),
        id: "task_none".into(),
    };
    out.push(code(c.tasks.complete(req(&auth, complete)).await));
    let check = pb::CheckRequest {
        thread_id: t.into(),
        resource_id: r.into(),
    };
    out.push(code(c.tasks.check(req(&auth, check)).await));
    let watch = pb::WatchRequest {
        thread_id: t.into(),
        resource_id: r.into(),
    };
    out.push(match c.tasks.watch(req(&auth, watch)).await {
        Ok(stream) => {
            let first = tokio::time::timeout(Duration::from_secs(10), stream.into_inner().next())
                .await
                .expect("the first update comes in time")
                .expect("the stream yields the current list");
            code(first)
        }
        Err(status) => status.code(),
    });

    let pending = pb::ListPendingRequest {
        resource_id: Some(r.into()),
        ..Default::default()
    };
    out.push(code(c.approvals.list_pending(req(&auth, pending)).await));
    let approve = pb::ApproveRequest {
        run_id: target.suspended_run.clone(),
        tool_call_id: "call_unknown".into(),
        ..Default::default()
    };
    out.push(code(c.approvals.approve(req(&auth, approve.clone())).await));
    let decline = pb::DeclineRequest {
        run_id: target.suspended_run.clone(),
        tool_call_id: "call_unknown".into(),
        ..Default::default()
    };
    out.push(code(c.approvals.decline(req(&auth, decline)).await));
    let resume = pb::ResumeRequest {
        run_id: target.suspended_run.clone(),
        tool_call_id: "call_unknown".into(),
        ..Default::default()
    };
    out.push(code(c.approvals.resume(req(&auth, resume)).await));
    let hooked = pb::ContinueWithHooksRequest {
        message: Some(pb::continue_with_hooks_request::Message::Start(
            pb::HookedContinue {
                decision: Some(pb::hooked_continue::Decision::Approve(approve)),
                hooks: None,
            },
        )),
    };
    let hooked = c
        .approvals
        .continue_with_hooks(req(&auth, futures::stream::iter(vec![hooked])))
        .await;
    out.push(code(hooked));

    let list = pb::ListThreadsRequest {
        resource_id: r.into(),
        ..Default::default()
    };
    out.push(code(c.threads.list_threads(req(&auth, list)).await));
    let get = pb::GetThreadRequest {
        thread_id: t.into(),
        resource_id: r.into(),
    };
    out.push(code(c.threads.get_thread(req(&auth, get)).await));
    let update = pb::UpdateThreadRequest {
        thread_id: t.into(),
        resource_id: r.into(),
        title: Some("Title".into()),
        ..Default::default()
    };
    out.push(code(c.threads.update_thread(req(&auth, update)).await));
    let messages = pb::ListMessagesRequest {
        thread_id: t.into(),
        resource_id: r.into(),
        ..Default::default()
    };
    out.push(code(c.threads.list_messages(req(&auth, messages)).await));
    let delete_messages = pb::DeleteMessagesRequest {
        thread_id: t.into(),
        resource_id: r.into(),
        message_ids: vec!["msg_none".into()],
    };
    out.push(code(
        c.threads.delete_messages(req(&auth, delete_messages)).await,
    ));
    let get_working = pb::GetWorkingMemoryRequest {
        resource_id: r.into(),
        ..Default::default()
    };
    out.push(code(
        c.threads.get_working_memory(req(&auth, get_working)).await,
    ));
    let update_working = pb::UpdateWorkingMemoryRequest {
        resource_id: r.into(),
        thread_id: t.into(),
        scope: pb::WorkingMemoryScope::Thread.into(),
        content: "# notes".into(),
        ..Default::default()
    };
    out.push(code(
        c.threads
            .update_working_memory(req(&auth, update_working))
            .await,
    ));
    let scores = pb::ListScoresRequest {
        target: Some(pb::list_scores_request::Target::Thread(pb::ScoredThread {
            thread_id: t.into(),
            resource_id: r.into(),
        })),
        ..Default::default()
    };
    out.push(code(c.scores.list_scores(req(&auth, scores)).await));
    let delete = pb::DeleteThreadRequest {
        thread_id: support::unique("never-made"),
        resource_id: r.into(),
    };
    out.push(code(c.threads.delete_thread(req(&auth, delete)).await));
    RPCS.iter().copied().zip(out).collect()
}
