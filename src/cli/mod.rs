//! The command-line client in the agentd binary: `agentd chat`, `tasks watch`, `approvals`,
//! `runs observe|scores`, each a gRPC client of a running server (`--server`, key from
//! `AGENTD_API_KEY`). One concern per file: the command line (`args`), the connection and
//! its errors (`client`), following a run (`stream`), how things look (`render`), typed lines
//! (`input`), and one file per command.

mod approvals;
mod args;
mod chat;
mod client;
mod input;
mod render;
mod runs;
mod stream;
mod tasks;

use std::process::ExitCode;

pub use args::{ApprovalsCommand, Args, ChatArgs, Command, Connection, RunsCommand, TasksCommand};
pub use client::CliError;

use client::Clients;

/// Runs a client command; every failure is one line on stderr and a non-zero exit code
/// (3: server unreachable, 4: key refused, 5: not found, 2: usage, 1: anything else).
pub async fn run(command: Command) -> ExitCode {
    match execute(command).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("agentd: {error}");
            ExitCode::from(error.exit_code())
        }
    }
}

async fn execute(command: Command) -> Result<(), CliError> {
    match command {
        Command::Chat(args) => chat::chat(args).await,
        Command::Tasks {
            connection,
            command:
                TasksCommand::Watch {
                    thread,
                    resource,
                    until_done,
                },
        } => {
            let mut clients = Clients::connect(&connection).await?;
            tasks::watch(&mut clients, thread, resource, until_done).await
        }
        Command::Approvals {
            connection,
            command,
        } => {
            let mut clients = Clients::connect(&connection).await?;
            match command {
                ApprovalsCommand::List {
                    resource,
                    thread,
                    run,
                } => approvals::list(&mut clients, resource, thread, run).await,
                ApprovalsCommand::Approve {
                    run_id,
                    tool_call_id,
                } => approvals::decide(&mut clients, run_id, tool_call_id, None).await,
                ApprovalsCommand::Decline {
                    run_id,
                    tool_call_id,
                    reason,
                } => approvals::decide(&mut clients, run_id, tool_call_id, Some(reason)).await,
            }
        }
        Command::Runs {
            connection,
            command,
        } => {
            let mut clients = Clients::connect(&connection).await?;
            match command {
                RunsCommand::Observe { run_id, after } => {
                    runs::observe(&mut clients, run_id, after).await
                }
                RunsCommand::Scores {
                    run,
                    thread,
                    resource,
                    agent,
                } => runs::scores(&mut clients, run, thread.zip(resource), agent).await,
            }
        }
    }
}
