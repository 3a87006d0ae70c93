//! `[server.tls]`: TLS and mutual TLS on the gRPC port, from PEM files reloaded when they change.

use std::path::PathBuf;

use serde::Deserialize;

use super::{ConfigError, invalid};

/// TLS on the gRPC port; off unless both `cert_file` and `key_file` are set.
#[cfg_attr(test, derive(serde::Serialize))]
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain, the server's certificate first.
    pub cert_file: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of that certificate.
    pub key_file: Option<PathBuf>,
    /// PEM CA certificates; when set, clients must present a certificate signed by one of them.
    pub client_ca_file: Option<PathBuf>,
    /// Milliseconds between checks of the files for a change; 0: read at start only.
    pub reload_interval_ms: u64,
}

impl Default for TlsConfig {
    fn default() -> Self {
        Self {
            cert_file: None,
            key_file: None,
            client_ca_file: None,
            reload_interval_ms: 1000,
        }
    }
}

impl TlsConfig {
    /// Whether the port serves TLS.
    pub fn enabled(&self) -> bool {
        self.cert_file.is_some() || self.key_file.is_some()
    }

    /// Checks the pair is complete and that the files load: readable, PEM, the key matching the
    /// certificate, the client CAs usable.
    pub fn validate(&self) -> Result<(), ConfigError> {
        match (&self.cert_file, &self.key_file) {
            (Some(_), None) => {
                return Err(invalid(
                    "server.tls.key_file must be set with server.tls.cert_file (TLS needs both)",
                ));
            }
            (None, Some(_)) => {
                return Err(invalid(
                    "server.tls.cert_file must be set with server.tls.key_file (TLS needs both)",
                ));
            }
            (None, None) if self.client_ca_file.is_some() => {
                return Err(invalid(
                    "server.tls.client_ca_file needs server.tls.cert_file and server.tls.key_file",
                ));
            }
            (None, None) => return Ok(()),
            (Some(_), Some(_)) => {}
        }
        crate::tls::TlsFiles::read(self)
            .and_then(|files| files.server_config())
            .map(drop)
            .map_err(|e| ConfigError::Invalid(e.to_string()))
    }
}
