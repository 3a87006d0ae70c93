//! The PEM files of `[server.tls]` and the rustls server configuration built from them; every
//! error names the config key and the file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_rustls::rustls::crypto::{CryptoProvider, aws_lc_rs};
use tokio_rustls::rustls::pki_types::pem::{self, PemObject};
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, RootCertStore, ServerConfig};

use crate::config::TlsConfig;

/// A file of `[server.tls]` that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{key} ({}): {detail}", .path.display())]
pub struct TlsFileError {
    /// The config key naming the file, e.g. `server.tls.key_file`.
    pub key: &'static str,
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub detail: String,
}

/// One file's bytes, with the key that named it.
#[derive(PartialEq, Eq)]
struct PemFile {
    key: &'static str,
    path: PathBuf,
    bytes: Vec<u8>,
}

impl PemFile {
    fn read(key: &'static str, path: Option<&Path>) -> Result<Self, TlsFileError> {
        let Some(path) = path else {
            return Err(TlsFileError {
                key,
                path: PathBuf::new(),
                detail: "not set".into(),
            });
        };
        let bytes = std::fs::read(path).map_err(|e| TlsFileError {
            key,
            path: path.to_owned(),
            detail: format!("cannot read: {e}"),
        })?;
        Ok(Self {
            key,
            path: path.to_owned(),
            bytes,
        })
    }

    fn error(&self, detail: impl Into<String>) -> TlsFileError {
        TlsFileError {
            key: self.key,
            path: self.path.clone(),
            detail: detail.into(),
        }
    }

    /// Every certificate in the file; at least one.
    fn certificates(&self) -> Result<Vec<CertificateDer<'static>>, TlsFileError> {
        let certs = CertificateDer::pem_slice_iter(&self.bytes)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.error(format!("not PEM certificates: {e}")))?;
        if certs.is_empty() {
            return Err(self.error("no PEM CERTIFICATE block in the file"));
        }
        Ok(certs)
    }
}

/// The contents of the configured files, read together so a reload compares and uses one
/// consistent snapshot. No `Debug`: it holds the private key.
#[derive(PartialEq, Eq)]
pub struct TlsFiles {
    cert: PemFile,
    key: PemFile,
    client_ca: Option<PemFile>,
    /// Whether ALPN offers `http/1.1` besides `h2` (the JSON mapping and gRPC-web use it).
    http1: bool,
}

impl TlsFiles {
    /// Reads the files `tls` names (both the certificate and the key must be set).
    pub fn read(tls: &TlsConfig) -> Result<Self, TlsFileError> {
        Self::read_with_alpn(tls, true)
    }

    /// [`TlsFiles::read`], offering HTTP/1.1 in ALPN only when `http1`.
    pub fn read_with_alpn(tls: &TlsConfig, http1: bool) -> Result<Self, TlsFileError> {
        Ok(Self {
            cert: PemFile::read("server.tls.cert_file", tls.cert_file.as_deref())?,
            key: PemFile::read("server.tls.key_file", tls.key_file.as_deref())?,
            client_ca: tls
                .client_ca_file
                .as_deref()
                .map(|path| PemFile::read("server.tls.client_ca_file", Some(path)))
                .transpose()?,
            http1,
        })
    }

    /// The rustls configuration: the certificate chain and its key, client certificates
    /// required and verified against the client CAs when set, ALPN `h2` (and `http/1.1`).
    pub fn server_config(&self) -> Result<ServerConfig, TlsFileError> {
        let provider = Arc::new(aws_lc_rs::default_provider());
        let certs = self.cert.certificates()?;
        let key = PrivateKeyDer::from_pem_slice(&self.key.bytes).map_err(|e| match e {
            pem::Error::NoItemsFound => self.key.error("no PEM PRIVATE KEY block in the file"),
            e => self.key.error(format!("not a PEM private key: {e}")),
        })?;
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| self.cert.error(format!("TLS provider: {e}")))?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => builder.with_client_cert_verifier(client_verifier(ca, provider)?),
        };
        let mut config = builder.with_single_cert(certs, key).map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => self.key.error(format!(
                "the key does not match the certificate in server.tls.cert_file ({})",
                self.cert.path.display()
            )),
            e => self
                .key
                .error(format!("unusable with server.tls.cert_file: {e}")),
        })?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        if self.http1 {
            config.alpn_protocols.push(b"http/1.1".to_vec());
        }
        Ok(config)
    }
}

/// Requires a client certificate signed by one of the CAs in `ca`.
fn client_verifier(
    ca: &PemFile,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TlsFileError> {
    let mut roots = RootCertStore::empty();
    for cert in ca.certificates()? {
        roots
            .add(cert)
            .map_err(|e| ca.error(format!("not a usable CA certificate: {e}")))?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| ca.error(format!("cannot verify clients with these CAs: {e}")))
}
