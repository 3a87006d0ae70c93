//! The `agentd` binary: with no subcommand, parse config, start the server, shut down
//! gracefully on SIGTERM/SIGINT; with one (`chat`, `tasks`, `approvals`, `runs`), a client of a
//! running server.

use std::process::ExitCode;

use clap::Parser;
use tracing::{error, info};

use agentd::config::Config;
use agentd::{cli, server, telemetry};

// Many small allocations from many threads: mimalloc measured faster than glibc malloc here
// (no arena lock contention), and it gives memory back after a burst.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let args = cli::Args::parse();
    if let Some(command) = args.command {
        return cli::run(command).await;
    }
    let cli = args.serve;
    let config = match Config::load(&cli) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("agentd: {e}");
            return ExitCode::from(2);
        }
    };
    if cli.check_config {
        let missing = config.missing_provider_keys();
        if !missing.is_empty() {
            for problem in &missing {
                eprintln!("agentd: {problem}");
            }
            return ExitCode::from(2);
        }
        // Keys from the environment, the JWKS file: what the server would refuse to start on.
        if let Err(e) = agentd::api::auth::ApiKeys::from_config(&config.auth) {
            eprintln!("agentd: {e}");
            return ExitCode::from(2);
        }
        if let Err(e) = agentd::mcp::McpHub::check(&config.mcp_servers) {
            eprintln!("agentd: {e}");
            return ExitCode::from(2);
        }
        return match agentd::agent::Agents::from_config(&config) {
            Ok(agents) => {
                println!(
                    "agentd: configuration is valid ({} agent(s))",
                    agents.iter().count()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("agentd: {e}");
                ExitCode::from(2)
            }
        };
    }
    // Inside the runtime: the OTLP gRPC exporter needs it.
    let telemetry = match telemetry::init(&config.log, config.server.metrics_listen.is_some()) {
        Ok(guard) => guard,
        Err(e) => {
            eprintln!("agentd: {e:#}");
            return ExitCode::from(2);
        }
    };
    let code = match run(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e:#}");
            ExitCode::FAILURE
        }
    };
    // Flushes the spans and metrics still buffered.
    if let Err(e) = telemetry.shutdown() {
        eprintln!("agentd: {e:#}");
    }
    code
}

async fn run(config: Config) -> anyhow::Result<()> {
    // Handlers first: once the server accepts connections a SIGHUP may come at any moment, and
    // before its handler exists its default action ends the process.
    let signal = shutdown_signal();
    let running = server::start(config).await?;
    let shutdown = running.shutdown_token();
    tokio::spawn(async move {
        signal.await;
        info!("shutdown signal received; draining");
        shutdown.cancel();
    });
    running.wait().await
}

/// Installs the signal handlers at once; the future resolves on SIGINT or SIGTERM (Kubernetes
/// sends the latter). SIGHUP, which would end the process by default, is logged and ignored:
/// the configuration is read at start only.
fn shutdown_signal() -> impl Future<Output = ()> {
    #[cfg(unix)]
    let unix = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        )
    };
    async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        match unix {
            (Ok(mut term), Ok(mut hup)) => {
                tokio::pin!(ctrl_c);
                loop {
                    tokio::select! {
                        _ = &mut ctrl_c => break,
                        _ = term.recv() => break,
                        _ = hup.recv() => info!(
                            "SIGHUP received and ignored: agentd reads its configuration at start; restart it to apply changes"
                        ),
                    }
                }
            }
            _ => {
                let _ = ctrl_c.await;
            }
        }
        #[cfg(not(unix))]
        {
            let _ = ctrl_c.await;
        }
    }
}
