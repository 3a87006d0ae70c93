//! Reloading `[server.tls]`: the files are read every `reload_interval_ms`; a changed set that
//! loads replaces the configuration new handshakes use, one that does not is logged and ignored.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_rustls::rustls::ServerConfig;
use tracing::{info, warn};

use super::files::TlsFiles;
use crate::config::TlsConfig;

/// Polls the files until every receiver of `current` is gone (the server stopped accepting).
/// Contents are compared rather than mtimes: a Kubernetes Secret update swaps a symlink, and
/// two writes within one mtime tick must not be missed.
pub(super) async fn watch_files(
    tls: TlsConfig,
    http1: bool,
    mut loaded: TlsFiles,
    current: watch::Sender<Arc<ServerConfig>>,
) {
    let interval = Duration::from_millis(tls.reload_interval_ms);
    // What was last refused (the same broken files are reported once, not every interval).
    let mut rejected: Option<TlsFiles> = None;
    let mut read_error: Option<String> = None;
    loop {
        tokio::select! {
            () = current.closed() => return,
            () = tokio::time::sleep(interval) => {}
        }
        let config = tls.clone();
        let read = tokio::task::spawn_blocking(move || TlsFiles::read_with_alpn(&config, http1));
        let files = match read.await {
            Ok(Ok(files)) => {
                read_error = None;
                files
            }
            Ok(Err(e)) => {
                let text = e.to_string();
                if read_error.as_ref() != Some(&text) {
                    warn!(file = %e.path.display(), error = %text, "cannot read the TLS files; still serving the previous certificate");
                    read_error = Some(text);
                }
                continue;
            }
            Err(_) => continue,
        };
        if files == loaded || rejected.as_ref() == Some(&files) {
            continue;
        }
        match files.server_config() {
            Ok(config) => {
                current.send_replace(Arc::new(config));
                info!("TLS files changed: new connections use the new certificate");
                loaded = files;
                rejected = None;
            }
            Err(e) => {
                warn!(file = %e.path.display(), error = %e, "the changed TLS files do not load; still serving the previous certificate");
                rejected = Some(files);
            }
        }
    }
}
