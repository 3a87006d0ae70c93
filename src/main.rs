//! The `agentd` binary: with no subcommand, parse config, start the server, shut down
//! gracefully on SIGTERM/SIGINT; with one (`chat`, `tasks`, `approvals`, `runs`), a client of a
//! running server.

use std::process::ExitCode;

use clap::Parser;
use tracing::{error, info};

use agentd::config::Config;
use agentd::{cli, server, telemetry};

// Many small allocations from many threads: mimalloc measured faster than glibc malloc here
// (no arena lock contention), and it gives memory back after a burst (`memory_return`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(memory_return::on_park)
        .build();
    match runtime {
        Ok(runtime) => runtime.block_on(async {
            tokio::spawn(memory_return::sweep());
            serve_or_command().await
        }),
        Err(e) => {
            eprintln!("agentd: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve_or_command() -> ExitCode {
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

/// Gives memory freed after a burst back to the OS. mimalloc returns a thread's free pages
/// only when that thread next allocates or collects, so a runtime worker that goes idle would
/// keep what the burst left; workers collect as they park (at most once per `PARK_EVERY`), and
/// a sweep collects every `SWEEP_EVERY` so the last frees before a quiet spell go back too.
mod memory_return {
    use std::cell::Cell;
    use std::time::{Duration, Instant};

    const PARK_EVERY: Duration = Duration::from_millis(100);
    const SWEEP_EVERY: Duration = Duration::from_secs(1);

    thread_local! {
        static LAST: Cell<Option<Instant>> = const { Cell::new(None) };
    }

    /// On a worker parking: collect its heap, unless it did so within `PARK_EVERY`.
    pub fn on_park() {
        let now = Instant::now();
        if LAST.get().is_some_and(|last| now - last < PARK_EVERY) {
            return;
        }
        LAST.set(Some(now));
        collect();
    }

    /// Collects on whichever worker runs it, every `SWEEP_EVERY`, forever.
    pub async fn sweep() {
        let mut tick = tokio::time::interval(SWEEP_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            collect();
        }
    }

    fn collect() {
        // SAFETY: mi_collect only walks and trims the allocator's own structures; it may be
        // called from any thread at any time.
        unsafe { libmimalloc_sys::mi_collect(true) }
    }
}
