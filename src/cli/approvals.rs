//! `agentd approvals list|approve|decline`: the calls waiting for a decision, and deciding one
//! from outside a chat (then following the run as it continues).

use std::time::{SystemTime, UNIX_EPOCH};

use super::client::{CliError, Clients};
use super::render::{self, Glyph, Style};
use super::runs::ended;
use super::stream::Follower;
use crate::pb::{
    ApproveRequest, DeclineRequest, FinishReason, ListPendingRequest, OnDisconnect, PendingRun,
    SuspensionKind,
};

/// Prints the pending runs matching the filters, each with its waiting calls.
pub async fn list(
    clients: &mut Clients,
    resource: Option<String>,
    thread: Option<String>,
    run: Option<String>,
) -> Result<(), CliError> {
    if resource.is_none() && thread.is_none() && run.is_none() {
        return Err(CliError::Usage(
            "approvals list needs --resource, --thread or --run".to_owned(),
        ));
    }
    let style = Style::stdout();
    let runs = clients
        .approvals
        .list_pending(ListPendingRequest {
            thread_id: thread,
            resource_id: resource,
            run_id: run,
        })
        .await
        .map_err(|s| clients.error(s))?
        .into_inner()
        .runs;
    if runs.is_empty() {
        render::out("No calls wait for a decision.");
        return Ok(());
    }
    for run in &runs {
        let mut heading = format!("run {} · agent {}", run.run_id, run.agent_id);
        if !run.thread_id.is_empty() {
            heading.push_str(&format!(" · thread {}", run.thread_id));
        }
        if !run.resource_id.is_empty() {
            heading.push_str(&format!(" · resource {}", run.resource_id));
        }
        if let Some(expires) = &run.expires_at {
            heading.push_str(&format!(" · expires {}", in_time(expires.seconds)));
        }
        render::out(&style.bold(&heading));
        for call in &run.pending {
            let waits = match call.kind() {
                SuspensionKind::ClientTool => "a result",
                _ => "approval",
            };
            render::out(&format!(
                "  {} {} {}",
                style.yellow(style.glyph(Glyph::Waiting)),
                render::call(&call.tool_name, call.args.as_ref()),
                style.dim(&format!(
                    "waits for {waits} · tool call {}",
                    call.tool_call_id
                ))
            ));
        }
    }
    Ok(())
}

/// Approves (`decline` = None) or declines one call, then follows the continued run.
pub async fn decide(
    clients: &mut Clients,
    run_id: String,
    tool_call_id: Option<String>,
    decline: Option<Option<String>>,
) -> Result<(), CliError> {
    let tool_call_id = match tool_call_id {
        Some(id) => id,
        None => only_pending_call(clients, &run_id).await?,
    };
    // This command exists to decide; the run must not stop because the terminal closed
    // while it continues (re-attach with `agentd runs observe`).
    let on_disconnect = OnDisconnect::Continue as i32;
    let stream = match decline {
        None => {
            clients
                .approvals
                .approve(ApproveRequest {
                    run_id: run_id.clone(),
                    tool_call_id,
                    on_disconnect,
                })
                .await
        }
        Some(reason) => {
            clients
                .approvals
                .decline(DeclineRequest {
                    run_id: run_id.clone(),
                    tool_call_id,
                    reason,
                    on_disconnect,
                })
                .await
        }
    }
    .map_err(|s| clients.error(s))?
    .into_inner();
    let style = Style::stdout();
    let result = Follower::new(style, false)
        .follow(stream, &clients.server)
        .await?;
    if result.finish_reason() == FinishReason::Suspended
        && let Some(next) = &result.suspend_payload
    {
        render::out(&style.yellow(&format!(
            "Run {run_id} waits again: agentd approvals approve {run_id} --tool-call-id {}",
            next.tool_call_id
        )));
    }
    ended(&result)
}

/// The id of the run's one waiting call; several need `--tool-call-id`.
async fn only_pending_call(clients: &mut Clients, run_id: &str) -> Result<String, CliError> {
    let runs: Vec<PendingRun> = clients
        .approvals
        .list_pending(ListPendingRequest {
            run_id: Some(run_id.to_owned()),
            ..ListPendingRequest::default()
        })
        .await
        .map_err(|s| clients.error(s))?
        .into_inner()
        .runs;
    let pending: Vec<_> = runs.iter().flat_map(|r| &r.pending).collect();
    match pending.as_slice() {
        [] => Err(CliError::NotFound(format!(
            "run {run_id} has no call waiting for a decision"
        ))),
        [only] => Ok(only.tool_call_id.clone()),
        several => Err(CliError::Usage(format!(
            "run {run_id} has {} waiting calls; name one with --tool-call-id ({})",
            several.len(),
            several
                .iter()
                .map(|c| c.tool_call_id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// "in 23h 59m" (or "now") for a Unix time in seconds.
fn in_time(at: i64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let left = at - now;
    if left <= 0 {
        return "now".to_owned();
    }
    let (hours, minutes) = (left / 3600, (left % 3600) / 60);
    match (hours, minutes) {
        (0, 0) => format!("in {left}s"),
        (0, m) => format!("in {m}m"),
        (h, m) => format!("in {h}h {m}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_reads_as_time_left() {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        assert_eq!(in_time(now - 5), "now");
        assert_eq!(in_time(now + 25 * 3600 + 120 + 30), "in 25h 2m");
    }
}
