//! TLS and mutual TLS on the gRPC port (`[server.tls]`): rustls on aws-lc-rs, certificates
//! reloaded from disk without a restart, each handshake in its own task so a slow or failed one
//! never holds up the accept loop or ends the server. Plain or TLS, the port's connections
//! send a response in one write (`flatten.rs`).

mod files;
mod flatten;
mod incoming;
mod reload;

pub use files::{TlsFileError, TlsFiles};
pub use incoming::{Incoming, ServeIncoming, incoming};
