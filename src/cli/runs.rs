//! `agentd runs observe RUN`: re-attaches to a run from any replica, replaying what it
//! streamed so far and following it live until it ends or suspends. `agentd runs scores`: the
//! scores runs were given, every page.

use super::client::{CliError, Clients};
use super::render::{self, Style};
use super::stream::Follower;
use crate::pb::list_scores_request::Target;
use crate::pb::{FinishReason, ListScoresRequest, ObserveRequest, ScoredThread};

/// Prints the scores of a run, a thread (`(thread, resource)`) or an agent, one per line,
/// oldest first.
pub async fn scores(
    clients: &mut Clients,
    run: Option<String>,
    thread: Option<(String, String)>,
    agent: Option<String>,
) -> Result<(), CliError> {
    let target = match (run, thread, agent) {
        (Some(run), _, _) => Target::RunId(run),
        (_, Some((thread_id, resource_id)), _) => Target::Thread(ScoredThread {
            thread_id,
            resource_id,
        }),
        (_, _, Some(agent)) => Target::AgentId(agent),
        _ => {
            return Err(CliError::Usage(
                "runs scores needs --run, --thread (with --resource) or --agent".to_owned(),
            ));
        }
    };
    let style = Style::stdout();
    let mut page_token = String::new();
    let mut printed = 0usize;
    loop {
        let page = clients
            .scores
            .list_scores(ListScoresRequest {
                target: Some(target.clone()),
                page_size: 100,
                page_token,
            })
            .await
            .map_err(|s| clients.error(s))?
            .into_inner();
        for score in &page.scores {
            let mut line = format!(
                "{} {} {} · run {}",
                style.bold(&format!("{:.4}", score.score)),
                score.scorer_key,
                style.dim(&format!("({})", score.scorer_id)),
                score.run_id
            );
            if let Some(reason) = &score.reason {
                line.push_str(&format!(" · {reason}"));
            }
            render::out(&line);
            printed += 1;
        }
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    if printed == 0 {
        render::out("No scores.");
    }
    Ok(())
}

/// Prints the run; a run that ended in an error is a failure of the command too.
pub async fn observe(clients: &mut Clients, run_id: String, after: u64) -> Result<(), CliError> {
    let stream = clients
        .agents
        .observe(ObserveRequest {
            run_id,
            after_sequence: after,
        })
        .await
        .map_err(|s| clients.error(s))?
        .into_inner();
    let result = Follower::new(Style::stdout(), false)
        .follow(stream, &clients.server)
        .await?;
    ended(&result)
}

/// The command's outcome for the way a run ended: an error finish fails the command.
pub fn ended(result: &crate::pb::GenerateResult) -> Result<(), CliError> {
    if result.finish_reason() == FinishReason::Error {
        let error = result.error.clone().unwrap_or_default();
        return Err(CliError::RunFailed(format!(
            "{}: {}",
            error.id, error.message
        )));
    }
    Ok(())
}
