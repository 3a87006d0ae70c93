//! Logging setup: `tracing` to stdout, human-readable or JSON.

use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat};

/// Installs the global subscriber; an invalid filter is an error naming it.
pub fn init_logging(config: &LogConfig) -> anyhow::Result<()> {
    let filter = EnvFilter::try_new(&config.filter)
        .map_err(|e| anyhow::anyhow!("invalid log filter {:?}: {e}", config.filter))?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let installed = match config.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    installed.map_err(|e| anyhow::anyhow!("cannot install the logger: {e}"))
}
