//! `agentd runs observe RUN`: re-attaches to a run from any replica, replaying what it
//! streamed so far and following it live until it ends or suspends.

use super::client::{CliError, Clients};
use super::render::Style;
use super::stream::Follower;
use crate::pb::{FinishReason, ObserveRequest};

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
