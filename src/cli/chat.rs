//! `agentd chat AGENT`: every line typed is a run on one thread; the reply streams as it comes,
//! and a call that waits for approval is asked about inline (y/n, a reason on decline), after
//! which the continued run streams on. The chat offers no client tools, so its runs never wait
//! for a client tool's result.

use super::client::{CliError, Clients};
use super::input::Input;
use super::render::{self, Style};
use super::stream::Follower;
use crate::pb::{
    self, ApproveRequest, DeclineRequest, FinishReason, GenerateRequest, GetAgentRequest,
    MemoryOptions, OnDisconnect, ThreadRef,
};

use super::args::ChatArgs;

/// What the user decided about a waiting call.
enum Decision {
    Approve,
    Decline(Option<String>),
    /// End of input: the run stays suspended for a later decision.
    Leave,
}

/// Runs the chat until end of input.
pub async fn chat(args: ChatArgs) -> Result<(), CliError> {
    let style = Style::stdout();
    let mut clients = Clients::connect(&args.connection).await?;
    let agent = clients
        .agents
        .get_agent(GetAgentRequest {
            agent_id: args.agent.clone(),
        })
        .await
        .map_err(|s| clients.error(s))?
        .into_inner();
    let thread = args
        .thread
        .clone()
        .unwrap_or_else(|| format!("cli-{}", uuid::Uuid::now_v7().simple()));
    let name = if agent.name.is_empty() {
        &agent.id
    } else {
        &agent.name
    };
    render::out(&format!(
        "{} {}",
        style.bold(&format!("Chatting with {name}")),
        style.dim(&format!(
            "({}) · thread {thread} · resource {}",
            agent.model, args.resource
        ))
    ));
    render::out(&style.dim("Type a message and press Enter; Ctrl-D ends the chat."));
    let mut input = Input::stdin();
    let mut follower = Follower::new(style, true);
    loop {
        let Some(line) = input.line(&style.bold("> ")).await? else {
            render::out("");
            return Ok(());
        };
        let prompt = line.trim();
        if prompt.is_empty() {
            continue;
        }
        let request = GenerateRequest {
            agent_id: agent.id.clone(),
            prompt: prompt.to_owned(),
            memory: Some(MemoryOptions {
                thread: Some(ThreadRef {
                    id: thread.clone(),
                    ..ThreadRef::default()
                }),
                resource: args.resource.clone(),
                options: None,
            }),
            ..GenerateRequest::default()
        };
        let turn = match clients.agents.generate(request).await {
            Ok(stream) => follower.follow(stream.into_inner(), &clients.server).await,
            Err(status) => Err(clients.error(status)),
        };
        let settled = match turn {
            Ok(result) => settle(&mut clients, &mut follower, &mut input, style, result).await,
            Err(error) => Err(error),
        };
        match settled {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            // A refused request (too long, rate limited, a decision too late) or a broken
            // stream ends this turn, not the chat.
            Err(error @ (CliError::Status { .. } | CliError::Interrupted(_))) => {
                render::out(&style.red(&format!("agentd: {error}")));
            }
            Err(other) => return Err(other),
        }
    }
}

/// Decides calls until the run no longer waits; false when the user left (end of input).
async fn settle(
    clients: &mut Clients,
    follower: &mut Follower,
    input: &mut Input,
    style: Style,
    mut result: pb::GenerateResult,
) -> Result<bool, CliError> {
    while result.finish_reason() == FinishReason::Suspended {
        let Some(waiting) = result.suspend_payload.clone() else {
            break;
        };
        // A supervisor waiting for its sub-agent: the call to decide is the sub-agent's.
        let (run_id, waiting) = innermost(clients, result.run_id.clone(), waiting).await?;
        let tool_call_id = waiting.tool_call_id.clone();
        // The chat waits for the continuation, so leaving mid-stream stops the run as
        // Generate's default does.
        let on_disconnect = OnDisconnect::Abort as i32;
        let stream = match ask(input, style, &waiting).await? {
            Decision::Approve => {
                clients
                    .approvals
                    .approve(ApproveRequest {
                        run_id,
                        tool_call_id,
                        on_disconnect,
                    })
                    .await
            }
            Decision::Decline(reason) => {
                clients
                    .approvals
                    .decline(DeclineRequest {
                        run_id,
                        tool_call_id,
                        reason,
                        on_disconnect,
                    })
                    .await
            }
            Decision::Leave => {
                render::out("");
                render::out(&style.yellow(&format!(
                    "Run {run_id} stays suspended; decide later with `agentd approvals approve {run_id}` \
                     or `agentd approvals decline {run_id}`."
                )));
                return Ok(false);
            }
        }
        .map_err(|s| clients.error(s))?;
        result = follower
            .follow(stream.into_inner(), &clients.server)
            .await?;
    }
    Ok(true)
}

/// The run and call to decide for `waiting`: itself, or for a delegation waiting on a
/// sub-agent's run, that run's first waiting call (followed down nested sub-agents).
async fn innermost(
    clients: &mut Clients,
    mut run_id: String,
    mut waiting: pb::ToolSuspension,
) -> Result<(String, pb::ToolSuspension), CliError> {
    while waiting.kind() == pb::SuspensionKind::SubAgent {
        let sub_run = waiting.sub_run_id.clone();
        let listed = clients
            .approvals
            .list_pending(pb::ListPendingRequest {
                run_id: Some(sub_run.clone()),
                ..Default::default()
            })
            .await
            .map_err(|s| clients.error(s))?
            .into_inner();
        let Some(next) = listed.runs.into_iter().flat_map(|r| r.pending).next() else {
            return Err(CliError::Interrupted(format!(
                "sub-agent run {sub_run} no longer waits for a decision"
            )));
        };
        run_id = sub_run;
        waiting = next;
    }
    Ok((run_id, waiting))
}

/// Asks about one waiting call until the answer is usable.
async fn ask(
    input: &mut Input,
    style: Style,
    waiting: &pb::ToolSuspension,
) -> Result<Decision, CliError> {
    let call = render::call_in_full(&waiting.tool_name, waiting.args.as_ref());
    loop {
        let prompt = style.yellow(&format!("Approve {call}? [y/n] "));
        let Some(answer) = input.line(&prompt).await? else {
            return Ok(Decision::Leave);
        };
        match answer.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => return Ok(Decision::Approve),
            "n" | "no" => {
                let Some(reason) = input.line(&style.yellow("Reason (optional): ")).await? else {
                    return Ok(Decision::Leave);
                };
                let reason = reason.trim();
                return Ok(Decision::Decline(
                    (!reason.is_empty()).then(|| reason.to_owned()),
                ));
            }
            _ => render::out("Please answer y or n."),
        }
    }
}
