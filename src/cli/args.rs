//! The binary's command line: with no subcommand it serves (the server's flags, exactly as
//! before the client existed); each subcommand is a client of a running server.

use std::path::PathBuf;

use clap::{Args as ClapArgs, Parser, Subcommand};

use crate::config::{
    CLIENT_SERVER_ENV, CLIENT_TLS_CA_ENV, CLIENT_TLS_CERT_ENV, CLIENT_TLS_KEY_ENV, Cli,
};

/// The whole command line of `agentd`.
#[derive(Debug, Parser)]
#[command(
    name = "agentd",
    version,
    about = "Runs AI agents behind a gRPC contract",
    long_about = "Runs AI agents behind a gRPC contract.\n\nWith no subcommand, agentd serves \
                  (the flags below). The subcommands are clients of a running server."
)]
pub struct Args {
    /// The server's flags (ignored by the client subcommands).
    #[command(flatten)]
    pub serve: Cli,
    /// A client command; none: run the server.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The client commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Chat with an agent: each line is a run on one thread; approvals are asked inline.
    Chat(ChatArgs),
    /// Task lists of threads.
    Tasks {
        /// Where the server is.
        #[command(flatten)]
        connection: Connection,
        /// What to do.
        #[command(subcommand)]
        command: TasksCommand,
    },
    /// Tool calls waiting for a decision.
    Approvals {
        /// Where the server is.
        #[command(flatten)]
        connection: Connection,
        /// What to do.
        #[command(subcommand)]
        command: ApprovalsCommand,
    },
    /// Runs, running or recently finished.
    Runs {
        /// Where the server is.
        #[command(flatten)]
        connection: Connection,
        /// What to do.
        #[command(subcommand)]
        command: RunsCommand,
    },
}

/// How to reach the server. The API key comes from `AGENTD_API_KEY` only, never from a flag.
#[derive(Debug, Clone, ClapArgs)]
pub struct Connection {
    /// Server address, e.g. http://127.0.0.1:50051 (http:// is assumed when no scheme is given).
    #[arg(
        long,
        global = true,
        env = CLIENT_SERVER_ENV,
        default_value = "http://127.0.0.1:50051"
    )]
    pub server: String,
    /// CA certificates (PEM) the server's certificate must chain to; turns TLS on (a
    /// `host:port` server means https://). An https:// server without it: the system's roots.
    #[arg(long, global = true, env = CLIENT_TLS_CA_ENV)]
    pub tls_ca: Option<PathBuf>,
    /// Client certificate (PEM) for a server that requires one (mutual TLS); with --tls-key.
    #[arg(long, global = true, env = CLIENT_TLS_CERT_ENV)]
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert.
    #[arg(long, global = true, env = CLIENT_TLS_KEY_ENV)]
    pub tls_key: Option<PathBuf>,
}

impl Connection {
    /// Whether any TLS option is given.
    pub fn tls_options(&self) -> bool {
        self.tls_ca.is_some() || self.tls_cert.is_some() || self.tls_key.is_some()
    }
}

/// `agentd chat AGENT`.
#[derive(Debug, ClapArgs)]
pub struct ChatArgs {
    /// Where the server is.
    #[command(flatten)]
    pub connection: Connection,
    /// The agent to chat with (see the server's ListAgents).
    pub agent: String,
    /// Thread to continue (default: a new one, printed at the start).
    #[arg(long)]
    pub thread: Option<String>,
    /// Resource (user, tenant…) that owns the thread.
    #[arg(long, default_value = "cli")]
    pub resource: String,
}

/// `agentd tasks …`.
#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// Follow a thread's task list live: a checklist with progress, redrawn on every change.
    Watch {
        /// The thread.
        thread: String,
        /// Resource that owns the thread.
        #[arg(long, default_value = "cli")]
        resource: String,
        /// Exit once every task is completed (and the list is not empty).
        #[arg(long)]
        until_done: bool,
    },
}

/// `agentd approvals …`.
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// List suspended runs and the tool calls awaiting a decision (give at least one filter).
    List {
        /// Only runs of this resource.
        #[arg(long)]
        resource: Option<String>,
        /// Only runs of this thread.
        #[arg(long)]
        thread: Option<String>,
        /// Only this run.
        #[arg(long)]
        run: Option<String>,
    },
    /// Approve a tool call, then follow the run as it continues.
    Approve {
        /// The suspended run.
        run_id: String,
        /// The call to approve (default: the run's only pending call).
        #[arg(long)]
        tool_call_id: Option<String>,
    },
    /// Decline a tool call (it never runs; the model reads the reason), then follow the run.
    Decline {
        /// The suspended run.
        run_id: String,
        /// The call to decline (default: the run's only pending call).
        #[arg(long)]
        tool_call_id: Option<String>,
        /// What the model is told (default: the server's "not approved" text).
        #[arg(long)]
        reason: Option<String>,
    },
}

/// `agentd runs …`.
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// Re-attach to a run: replay what it streamed so far, then follow it until it ends.
    Observe {
        /// The run.
        run_id: String,
        /// Replay only chunks after this sequence number.
        #[arg(long, default_value_t = 0)]
        after: u64,
    },
    /// The scores runs were given by their scorers: one run's, a thread's runs' or an agent's.
    Scores {
        /// Only this run's.
        #[arg(long, conflicts_with_all = ["thread", "agent"])]
        run: Option<String>,
        /// Only this thread's runs' (with --resource).
        #[arg(long, requires = "resource", conflicts_with = "agent")]
        thread: Option<String>,
        /// The resource that owns --thread.
        #[arg(long, requires = "thread")]
        resource: Option<String>,
        /// Only this agent's runs'.
        #[arg(long)]
        agent: Option<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Args {
        match Args::try_parse_from(args) {
            Ok(args) => args,
            Err(e) => panic!("{args:?}: {e}"),
        }
    }

    #[test]
    fn no_subcommand_serves_with_the_server_flags() {
        let args = parse(&["agentd", "--config", "x.toml", "--check-config"]);
        assert!(args.command.is_none());
        assert_eq!(args.serve.config.as_deref(), Some("x.toml".as_ref()));
        assert!(args.serve.check_config);
    }

    #[test]
    fn subcommands_are_clients_with_a_server_flag_anywhere() {
        let args = parse(&[
            "agentd", "chat", "planner", "--server", "h:1", "--thread", "t",
        ]);
        let Some(Command::Chat(chat)) = args.command else {
            panic!("chat expected");
        };
        assert_eq!(
            (chat.agent.as_str(), chat.connection.server.as_str()),
            ("planner", "h:1")
        );
        assert_eq!(
            (chat.thread.as_deref(), chat.resource.as_str()),
            (Some("t"), "cli")
        );

        let args = parse(&["agentd", "approvals", "--server", "h:2", "decline", "r1"]);
        let Some(Command::Approvals {
            connection,
            command: ApprovalsCommand::Decline { run_id, reason, .. },
        }) = args.command
        else {
            panic!("approvals decline expected");
        };
        assert_eq!((connection.server.as_str(), run_id.as_str()), ("h:2", "r1"));
        assert_eq!(reason, None);
    }

    #[test]
    fn tls_options_are_global_like_the_server() {
        let args = parse(&[
            "agentd",
            "runs",
            "--tls-ca",
            "ca.pem",
            "observe",
            "r",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "k.pem",
        ]);
        let Some(Command::Runs { connection, .. }) = args.command else {
            panic!("runs expected");
        };
        assert!(connection.tls_options());
        assert_eq!(connection.tls_ca.as_deref(), Some("ca.pem".as_ref()));
        assert_eq!(connection.tls_key.as_deref(), Some("k.pem".as_ref()));
    }

    #[test]
    fn there_is_no_flag_for_the_api_key() {
        assert!(
            Args::try_parse_from(["agentd", "runs", "observe", "r", "--api-key", "k"]).is_err()
        );
    }
}
