//! The `agentd` binary: parse config, start the server, shut down gracefully on SIGTERM/SIGINT.

use std::process::ExitCode;

use clap::Parser;
use tracing::{error, info};

use agentd::config::{Cli, Config};
use agentd::{server, telemetry};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = match Config::load(&cli) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("agentd: {e}");
            return ExitCode::from(2);
        }
    };
    if cli.check_config {
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
    let telemetry = match telemetry::init(&config.log) {
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
    let running = server::start(config).await?;
    let shutdown = running.shutdown_token();
    tokio::spawn(async move {
        wait_for_signal().await;
        info!("shutdown signal received; draining");
        shutdown.cancel();
    });
    running.wait().await
}

/// Resolves on SIGINT or SIGTERM (Kubernetes sends the latter).
async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
