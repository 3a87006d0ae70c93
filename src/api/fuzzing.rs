//! Request checking without a server, for the property tests (`tests/properties.rs`) and the
//! fuzz target (`fuzz/`): each method's request decoded and put through the same checks and
//! conversions its service runs before it touches a store or a run. Not a stable API.

use std::sync::LazyLock;

use prost::Message;
use tonic::Status;

use super::{agents, approvals, hooks, scores, tasks, threads};
use crate::agent::Agents;
use crate::config::{Config, Limits};
use crate::pb;

/// Every agentd RPC as `package.Service/Method`, in the fuzz target's order (its first byte
/// picks one).
pub const METHODS: [&str; 25] = [
    "agentd.v1.TaskService/Write",
    "agentd.v1.TaskService/Update",
    "agentd.v1.TaskService/Complete",
    "agentd.v1.TaskService/Check",
    "agentd.v1.TaskService/Watch",
    "agentd.v1.AgentService/Generate",
    "agentd.v1.AgentService/Observe",
    "agentd.v1.AgentService/Abort",
    "agentd.v1.AgentService/ListAgents",
    "agentd.v1.AgentService/GetAgent",
    "agentd.v1.AgentService/GenerateWithHooks",
    "agentd.v1.ApprovalService/ListPending",
    "agentd.v1.ApprovalService/Approve",
    "agentd.v1.ApprovalService/Decline",
    "agentd.v1.ApprovalService/Resume",
    "agentd.v1.ApprovalService/ContinueWithHooks",
    "agentd.v1.ThreadService/ListThreads",
    "agentd.v1.ThreadService/GetThread",
    "agentd.v1.ThreadService/UpdateThread",
    "agentd.v1.ThreadService/DeleteThread",
    "agentd.v1.ThreadService/ListMessages",
    "agentd.v1.ThreadService/DeleteMessages",
    "agentd.v1.ThreadService/GetWorkingMemory",
    "agentd.v1.ThreadService/UpdateWorkingMemory",
    "agentd.v1.ScoreService/ListScores",
];

/// The agents the working-memory checks can name: a template, a JSON schema, and none.
pub const AGENTS_TOML: &str = r##"
[[providers]]
name = "local"
base_url = "http://127.0.0.1:9"

[[agents]]
id = "notes"
instructions = "Keep notes."
model = "local/model"
[agents.memory.working_memory]
template = "# Notes\n- Name:\n"

[[agents]]
id = "profile"
instructions = "Keep a profile."
model = "local/model"
[agents.memory.working_memory]
scope = "thread"
schema = { type = "object", properties = { name = { type = "string" } } }

[[agents]]
id = "plain"
instructions = "No memory."
model = "local/model"
"##;

/// What became of one encoded request.
#[derive(Debug)]
pub enum Outcome {
    /// Not an encoding of the method's request type (the server never sees such a request).
    Undecodable(prost::DecodeError),
    /// The service would go on with the converted request.
    Accepted,
    /// The service would answer with this status.
    Rejected(Status),
}

/// What the checks read besides the request: the default limits and [`AGENTS_TOML`]'s agents.
struct Checks {
    limits: Limits,
    agents: Agents,
}

static CHECKS: LazyLock<Checks> = LazyLock::new(|| Checks {
    limits: Limits::default(),
    // A constant config: a failure here shows in this module's test, not as a panic.
    agents: Config::from_toml(AGENTS_TOML)
        .ok()
        .and_then(|config| Agents::from_config(&config).ok())
        .unwrap_or_default(),
});

/// Decodes `bytes` as `method`'s request (a name from [`METHODS`]) and checks and converts it
/// as its service does; `None` for an unknown method.
pub fn decode_and_convert(method: &str, bytes: &[u8]) -> Option<Outcome> {
    if !METHODS.contains(&method) {
        return None;
    }
    let c = &*CHECKS;
    let limits = &c.limits;
    let no_metadata = http::HeaderMap::new();
    let outcome = match method.split_once('/')?.1 {
        "Write" => run(bytes, |r: pb::WriteRequest| {
            tasks::write_request(&r, limits).map(drop)
        }),
        "Update" => run(bytes, |r: pb::UpdateRequest| {
            tasks::update_request(&r, limits).map(drop)
        }),
        "Complete" => run(bytes, |r: pb::CompleteRequest| {
            tasks::complete_request(&r, limits).map(drop)
        }),
        "Check" => run(bytes, |r: pb::CheckRequest| {
            tasks::check_request(&r, limits).map(drop)
        }),
        "Watch" => run(bytes, |r: pb::WatchRequest| {
            tasks::watch_request(&r, limits).map(drop)
        }),
        "Generate" => run(bytes, |r: pb::GenerateRequest| {
            agents::checked_run(&no_metadata, r, limits).map(drop)
        }),
        "Observe" => run(bytes, |r: pb::ObserveRequest| {
            agents::required_run_id(&r.run_id, limits)
        }),
        "Abort" => run(bytes, |r: pb::AbortRequest| {
            agents::abort_request(&r, limits)
        }),
        "ListAgents" => run(bytes, |_: pb::ListAgentsRequest| Ok(())),
        "GetAgent" => run(bytes, |r: pb::GetAgentRequest| agents::agent_id_request(&r)),
        "GenerateWithHooks" => run(bytes, |r: pb::GenerateWithHooksRequest| {
            agents::hooked_generate(&no_metadata, hooks::first(Some(r))?, limits).map(drop)
        }),
        "ListPending" => run(bytes, |r: pb::ListPendingRequest| {
            approvals::list_pending_request(&r, limits)
        }),
        "Approve" => run(bytes, |r: pb::ApproveRequest| {
            approvals::approval(&r, limits).map(drop)
        }),
        "Decline" => run(bytes, |r: pb::DeclineRequest| {
            approvals::declining(&r, limits).map(drop)
        }),
        "Resume" => run(bytes, |r: pb::ResumeRequest| {
            approvals::resumption(&r, limits).map(drop)
        }),
        "ContinueWithHooks" => run(bytes, |r: pb::ContinueWithHooksRequest| {
            approvals::hooked_continue(&hooks::first(Some(r))?, limits).map(drop)
        }),
        "ListThreads" => run(bytes, |r: pb::ListThreadsRequest| {
            threads::list_threads_request(&r, limits).map(drop)
        }),
        "GetThread" => run(bytes, |r: pb::GetThreadRequest| {
            threads::thread_request(&r.thread_id, &r.resource_id, limits).map(drop)
        }),
        "UpdateThread" => run(bytes, |r: pb::UpdateThreadRequest| {
            threads::update_thread_request(&r, limits).map(drop)
        }),
        "DeleteThread" => run(bytes, |r: pb::DeleteThreadRequest| {
            threads::thread_request(&r.thread_id, &r.resource_id, limits).map(drop)
        }),
        "ListMessages" => run(bytes, |r: pb::ListMessagesRequest| {
            threads::list_messages_request(&r, limits).map(drop)
        }),
        "DeleteMessages" => run(bytes, |r: pb::DeleteMessagesRequest| {
            threads::delete_messages_request(&r, limits).map(drop)
        }),
        "GetWorkingMemory" => run(bytes, |r: pb::GetWorkingMemoryRequest| {
            threads::get_working_memory_request(&r, (limits, &c.agents)).map(drop)
        }),
        "UpdateWorkingMemory" => run(bytes, |r: pb::UpdateWorkingMemoryRequest| {
            threads::update_working_memory_request(&r, (limits, &c.agents)).map(drop)
        }),
        "ListScores" => run(bytes, |r: pb::ListScoresRequest| {
            scores::list_scores_request(&r, limits).map(drop)
        }),
        _ => return None,
    };
    Some(outcome)
}

/// Decodes one `M` and converts it.
fn run<M: Message + Default>(
    bytes: &[u8],
    convert: impl FnOnce(M) -> Result<(), Status>,
) -> Outcome {
    match M::decode(bytes) {
        Err(e) => Outcome::Undecodable(e),
        Ok(request) => match convert(request) {
            Ok(()) => Outcome::Accepted,
            Err(status) => Outcome::Rejected(status),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agents_config_builds() {
        for id in ["notes", "profile", "plain"] {
            assert!(CHECKS.agents.get(id).is_some(), "agent {id}");
        }
    }

    #[test]
    fn every_method_is_dispatched() {
        for method in METHODS {
            assert!(decode_and_convert(method, &[]).is_some(), "{method}");
        }
        assert!(decode_and_convert("agentd.v1.TaskService/Nope", &[]).is_none());
        assert!(decode_and_convert("other.Service/Write", &[]).is_none());
    }
}
