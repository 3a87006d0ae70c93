//! The client side of the connection: the channel, the bearer key on every call, and the one
//! place where a failed call becomes a one-line message and an exit code.

use std::path::Path;
use std::time::Duration;

use tonic::metadata::{AsciiMetadataValue, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Code, Request, Status};

use crate::config::CLIENT_API_KEY_ENV;
use crate::pb::agent_service_client::AgentServiceClient;
use crate::pb::approval_service_client::ApprovalServiceClient;
use crate::pb::score_service_client::ScoreServiceClient;
use crate::pb::task_service_client::TaskServiceClient;

use super::args::Connection;

/// A channel whose calls carry the API key.
pub type AuthChannel = InterceptedService<Channel, BearerKey>;

/// The three agentd services on one connection.
pub struct Clients {
    /// AgentService.
    pub agents: AgentServiceClient<AuthChannel>,
    /// ApprovalService.
    pub approvals: ApprovalServiceClient<AuthChannel>,
    /// TaskService.
    pub tasks: TaskServiceClient<AuthChannel>,
    /// ScoreService.
    pub scores: ScoreServiceClient<AuthChannel>,
    /// The server's address, for messages.
    pub server: String,
}

/// Adds `authorization: Bearer <key>` to every call when a key is set.
#[derive(Clone)]
pub struct BearerKey(Option<AsciiMetadataValue>);

impl Interceptor for BearerKey {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// Why a command failed; each prints as one line and maps to its own exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The server could not be reached (refused, timed out, bad address).
    #[error(
        "cannot reach the agentd server at {server}: {detail} (is it running? set --server or AGENTD_SERVER)"
    )]
    Unreachable {
        /// The address tried.
        server: String,
        /// Why.
        detail: String,
    },
    /// The server refused the credentials.
    #[error("the server refused the API key: {0} (set AGENTD_API_KEY)")]
    Unauthenticated(String),
    /// The key is valid but not for this resource.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// The agent, run, thread or call does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// Any other status from the server.
    #[error("the server answered {code:?}: {message}")]
    Status {
        /// The status code.
        code: Code,
        /// Its message.
        message: String,
    },
    /// A run's stream broke off before the run ended or suspended.
    #[error("{0}")]
    Interrupted(String),
    /// The user's input or the environment is not usable.
    #[error("{0}")]
    Usage(String),
    /// The run this command followed ended with an error.
    #[error("the run failed: {0}")]
    RunFailed(String),
    /// The terminal (stdin/stdout) failed.
    #[error("terminal: {0}")]
    Io(#[from] std::io::Error),
}

impl CliError {
    /// The process exit code: scripts can tell "server down" from "wrong key" from "no such run".
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::RunFailed(_) | Self::Status { .. } | Self::Interrupted(_) | Self::Io(_) => 1,
            Self::Usage(_) => 2,
            Self::Unreachable { .. } => 3,
            Self::Unauthenticated(_) | Self::PermissionDenied(_) => 4,
            Self::NotFound(_) => 5,
        }
    }

    /// Maps a failed call; `server` names the address for an unreachable one.
    pub fn from_status(status: Status, server: &str) -> Self {
        let message = status.message().to_owned();
        match status.code() {
            Code::Unauthenticated => Self::Unauthenticated(message),
            Code::PermissionDenied => Self::PermissionDenied(message),
            Code::NotFound => Self::NotFound(message),
            // A transport failure after connecting (server gone, TLS mismatch) arrives as
            // UNAVAILABLE too: the same advice applies.
            Code::Unavailable => Self::Unreachable {
                server: server.to_owned(),
                detail: message,
            },
            // What a plain HTTP server (or another gRPC service) answers on this port.
            Code::Unimplemented => Self::Status {
                code: Code::Unimplemented,
                message: format!("{message} (is {server} an agentd server?)"),
            },
            code => Self::Status { code, message },
        }
    }
}

impl Clients {
    /// Connects (eagerly, so an unreachable server is reported before anything else happens).
    pub async fn connect(connection: &Connection) -> Result<Self, CliError> {
        let server = normalize(&connection.server, connection.tls_options());
        let key = api_key()?;
        let unreachable = |detail: String| CliError::Unreachable {
            server: server.clone(),
            detail,
        };
        let mut endpoint = Endpoint::from_shared(server.clone())
            .map_err(|e| CliError::Usage(format!("--server {server:?} is not an address: {e}")))?
            .connect_timeout(Duration::from_secs(5));
        if server.starts_with("https://") {
            endpoint = endpoint
                .tls_config(tls_config(connection)?)
                .map_err(|e| CliError::Usage(format!("TLS: {e}")))?;
        } else if connection.tls_options() {
            return Err(CliError::Usage(format!(
                "--tls-ca, --tls-cert and --tls-key need an https:// server, not {server}"
            )));
        }
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| unreachable(crate::error_text::error_chain(&e)))?;
        let auth = BearerKey(key);
        Ok(Self {
            agents: AgentServiceClient::with_interceptor(channel.clone(), auth.clone()),
            approvals: ApprovalServiceClient::with_interceptor(channel.clone(), auth.clone()),
            tasks: TaskServiceClient::with_interceptor(channel.clone(), auth.clone()),
            scores: ScoreServiceClient::with_interceptor(channel, auth),
            server,
        })
    }

    /// Maps a failed call of this connection.
    pub fn error(&self, status: Status) -> CliError {
        CliError::from_status(status, &self.server)
    }
}

/// `host:port` means `http://host:port`, or `https://host:port` with a TLS option.
fn normalize(server: &str, tls: bool) -> String {
    let server = server.trim();
    if server.contains("://") {
        server.to_owned()
    } else if tls {
        format!("https://{server}")
    } else {
        format!("http://{server}")
    }
}

/// The server's certificate checked against `--tls-ca` (else the system's roots), and the
/// client certificate for mutual TLS.
fn tls_config(connection: &Connection) -> Result<ClientTlsConfig, CliError> {
    let read = |path: &Path, flag: &str| {
        std::fs::read(path)
            .map_err(|e| CliError::Usage(format!("{flag} {}: cannot read: {e}", path.display())))
    };
    let tls = match &connection.tls_ca {
        Some(ca) => {
            ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(ca, "--tls-ca")?))
        }
        None => ClientTlsConfig::new().with_native_roots(),
    };
    match (&connection.tls_cert, &connection.tls_key) {
        (Some(cert), Some(key)) => Ok(tls.identity(Identity::from_pem(
            read(cert, "--tls-cert")?,
            read(key, "--tls-key")?,
        ))),
        (None, None) => Ok(tls),
        _ => Err(CliError::Usage(
            "--tls-cert and --tls-key must be given together".into(),
        )),
    }
}

/// The key from the environment, as a header value.
fn api_key() -> Result<Option<AsciiMetadataValue>, CliError> {
    let Some(key) = std::env::var_os(CLIENT_API_KEY_ENV) else {
        return Ok(None);
    };
    let key = key.to_str().map(str::trim).unwrap_or_default().to_owned();
    if key.is_empty() {
        return Ok(None);
    }
    MetadataValue::try_from(format!("Bearer {key}"))
        .map(Some)
        .map_err(|_| {
            CliError::Usage(format!(
                "{CLIENT_API_KEY_ENV} holds characters an HTTP header cannot carry"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_without_a_scheme_is_plain_http() {
        assert_eq!(
            normalize("127.0.0.1:50051", false),
            "http://127.0.0.1:50051"
        );
        assert_eq!(
            normalize(" https://agentd:443 ", false),
            "https://agentd:443"
        );
        assert_eq!(normalize("agentd:443", true), "https://agentd:443");
        assert_eq!(normalize("http://agentd:80", true), "http://agentd:80");
    }

    #[test]
    fn statuses_map_to_distinct_exit_codes() {
        let code = |s: Status| CliError::from_status(s, "http://x").exit_code();
        assert_eq!(code(Status::unauthenticated("k")), 4);
        assert_eq!(code(Status::not_found("run")), 5);
        assert_eq!(code(Status::unavailable("down")), 3);
        assert_eq!(code(Status::invalid_argument("bad")), 1);
    }
}
