//! TLS and mutual TLS on the gRPC port, with certificates the test generates: gRPC, the JSON
//! mapping over HTTP/1.1 and the CLI over TLS; plain-text and unauthenticated clients refused;
//! certificates replaced on disk picked up by new connections, broken ones ignored.

mod support;

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use agentd::config::{OVERRIDES, TlsConfig};
use agentd::pb;
use agentd::pb::task_service_client::TaskServiceClient;
use agentd::server::{LIVENESS_SERVICE, RunningServer};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// A certificate authority the test made.
struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("CA certificate");
        Self {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A leaf certificate and its key (PEM): a server one for localhost and 127.0.0.1, or a
    /// client one.
    fn leaf(&self, name: &str, client: bool) -> (String, String) {
        let names = if client {
            Vec::new()
        } else {
            vec!["localhost".to_owned(), "127.0.0.1".to_owned()]
        };
        let mut params = CertificateParams::new(names).expect("leaf params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages.push(if client {
            ExtendedKeyUsagePurpose::ClientAuth
        } else {
            ExtendedKeyUsagePurpose::ServerAuth
        });
        let key = KeyPair::generate().expect("leaf key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("leaf certificate");
        (cert.pem(), key.serialize_pem())
    }
}

/// A server on the embedded store with TLS from files in its temporary directory.
struct TlsServer {
    server: RunningServer,
    dir: tempfile::TempDir,
    ca: Ca,
}

impl TlsServer {
    async fn start(client_ca: Option<&Ca>) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let ca = Ca::new("agentd test CA");
        let (cert, key) = ca.leaf("agentd", false);
        write(&dir.path().join("tls.crt"), &cert);
        write(&dir.path().join("tls.key"), &key);
        let mut config = support::test_config("embedded", &dir.path().join("data"));
        config.server.tls = TlsConfig {
            cert_file: Some(dir.path().join("tls.crt")),
            key_file: Some(dir.path().join("tls.key")),
            client_ca_file: client_ca.map(|client_ca| {
                let path = dir.path().join("client-ca.crt");
                write(&path, &client_ca.pem);
                path
            }),
            reload_interval_ms: 50,
        };
        config.validate().expect("the TLS config is valid");
        let server = support::start(config).await;
        Self { server, dir, ca }
    }

    fn addr(&self) -> SocketAddr {
        self.server.addr
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write a PEM file");
}

/// Connects over TLS trusting `ca_pem`, presenting `identity` (certificate, key) when given.
async fn connect(
    addr: SocketAddr,
    ca_pem: &str,
    identity: Option<&(String, String)>,
) -> Result<Channel, tonic::transport::Error> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca_pem))
        .domain_name("localhost");
    if let Some((cert, key)) = identity {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    Endpoint::from_shared(format!("https://{addr}"))?
        .tls_config(tls)?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
}

/// The liveness status over `channel`, bounded so a refused connection cannot hang the test.
async fn liveness(channel: Channel) -> Result<ServingStatus, tonic::Status> {
    let mut client = HealthClient::new(channel);
    let call = client.check(HealthCheckRequest {
        service: LIVENESS_SERVICE.into(),
    });
    match tokio::time::timeout(Duration::from_secs(10), call).await {
        Ok(reply) => Ok(reply?.into_inner().status()),
        Err(_) => Err(tonic::Status::deadline_exceeded("no answer in 10 s")),
    }
}

/// Whether a new TLS connection trusting `ca_pem` gets a SERVING answer.
async fn serves(addr: SocketAddr, ca_pem: &str, identity: Option<&(String, String)>) -> bool {
    match connect(addr, ca_pem, identity).await {
        Ok(channel) => matches!(liveness(channel).await, Ok(ServingStatus::Serving)),
        Err(_) => false,
    }
}

/// The log lines of this test binary (the reload warnings are checked in them).
fn logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let sink = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || LogWriter(sink.clone()))
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("one global subscriber");
        buffer
    })
    .clone()
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl Write for LogWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logged(needles: &[&str]) -> bool {
    let logs = logs();
    let text = logs
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let text = String::from_utf8_lossy(&text);
    text.lines()
        .any(|line| needles.iter().all(|n| line.contains(n)))
}

#[tokio::test]
async fn grpc_and_json_are_served_over_tls_and_plain_text_is_refused() {
    let tls = TlsServer::start(None).await;
    let channel = connect(tls.addr(), &tls.ca.pem, None)
        .await
        .expect("a client trusting the CA connects");
    assert_eq!(
        liveness(channel.clone()).await.expect("health over TLS"),
        ServingStatus::Serving
    );
    let list = TaskServiceClient::new(channel.clone())
        .check(pb::CheckRequest {
            thread_id: support::unique("tls"),
            resource_id: "alice".into(),
        })
        .await
        .expect("a TaskService call over TLS")
        .into_inner();
    assert!(list.tasks.is_empty(), "{list:?}");

    // A plain-text client gets no answer, and its failed handshake leaves the server serving.
    let plain = async {
        let channel = Channel::from_shared(format!("http://{}", tls.addr()))
            .expect("uri")
            .connect_timeout(Duration::from_secs(5))
            .connect()
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        liveness(channel).await
    };
    assert!(plain.await.is_err(), "plain text must be refused");
    let untrusted = Ca::new("someone else");
    assert!(
        !serves(tls.addr(), &untrusted.pem, None).await,
        "a client trusting another CA must refuse the server"
    );
    assert!(serves(tls.addr(), &tls.ca.pem, None).await);

    // The JSON mapping over HTTP/1.1 (ALPN http/1.1), checked by reqwest against the CA and the
    // 127.0.0.1 address in the certificate.
    let http = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(tls.ca.pem.as_bytes()).expect("CA")])
        .http1_only()
        .build()
        .expect("client");
    let reply = http
        .post(format!(
            "https://127.0.0.1:{}/grpc.health.v1.Health/Check",
            tls.addr().port()
        ))
        .header("content-type", "application/json")
        .body(format!(r#"{{"service": "{LIVENESS_SERVICE}"}}"#))
        .send()
        .await
        .expect("JSON over TLS");
    assert_eq!(reply.version(), reqwest::Version::HTTP_11);
    assert_eq!(reply.status(), 200);
    assert!(
        reply.text().await.expect("body").contains("SERVING"),
        "JSON health answer"
    );
    tls.server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn mutual_tls_admits_only_certificates_of_the_client_ca() {
    let client_ca = Ca::new("agentd client CA");
    let tls = TlsServer::start(Some(&client_ca)).await;
    let alice = client_ca.leaf("alice", true);
    assert!(serves(tls.addr(), &tls.ca.pem, Some(&alice)).await);
    assert!(
        !serves(tls.addr(), &tls.ca.pem, None).await,
        "a client without a certificate must be refused"
    );
    let mallory = Ca::new("not the client CA").leaf("mallory", true);
    assert!(
        !serves(tls.addr(), &tls.ca.pem, Some(&mallory)).await,
        "a certificate of another CA must be refused"
    );

    // agentd's own CLI with the CA and a client certificate.
    let cert = tls.path("alice.crt");
    let key = tls.path("alice.key");
    write(&cert, &alice.0);
    write(&key, &alice.1);
    let ca = tls.path("tls.crt.ca");
    write(&ca, &tls.ca.pem);
    let server = format!("127.0.0.1:{}", tls.addr().port());
    // tokio's Command: a blocking wait would stall the in-process server on this runtime.
    let cli = async |args: &[&Path]| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentd"));
        for (_, name) in OVERRIDES {
            command.env_remove(name);
        }
        for name in [
            "AGENTD_SERVER",
            "AGENTD_API_KEY",
            "AGENTD_TLS_CA",
            "AGENTD_TLS_CERT",
            "AGENTD_TLS_KEY",
        ] {
            command.env_remove(name);
        }
        let run = command
            .args([
                "approvals",
                "list",
                "--resource",
                "alice",
                "--server",
                &server,
            ])
            .args(args)
            .kill_on_drop(true)
            .output();
        tokio::time::timeout(Duration::from_secs(60), run)
            .await
            .expect("the CLI ends")
            .expect("agentd runs")
    };
    let tls_ca = Path::new("--tls-ca");
    let tls_cert = Path::new("--tls-cert");
    let tls_key = Path::new("--tls-key");
    let out = cli(&[tls_ca, &ca, tls_cert, &cert, tls_key, &key]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("No calls wait for a decision"));
    // TLS 1.3: the refusal arrives after the handshake, as the call's transport error.
    let out = cli(&[tls_ca, &ca]).await;
    assert!(
        !out.status.success() && !String::from_utf8_lossy(&out.stdout).contains("No calls"),
        "without a client certificate: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    tls.server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn replaced_certificates_reach_new_connections_and_broken_ones_are_ignored() {
    let _ = logs();
    let tls = TlsServer::start(None).await;
    let before = connect(tls.addr(), &tls.ca.pem, None)
        .await
        .expect("first connection");
    assert_eq!(
        liveness(before.clone()).await.expect("health"),
        ServingStatus::Serving
    );

    // A certificate of a second CA, written over the files (key first, as a tool might: the
    // reload in between sees a mismatched pair and keeps the old one).
    let second = Ca::new("agentd rotated CA");
    let (cert, key) = second.leaf("agentd", false);
    write(&tls.path("tls.key"), &key);
    write(&tls.path("tls.crt"), &cert);
    assert!(
        support::eventually(Duration::from_secs(20), || serves(
            tls.addr(),
            &second.pem,
            None
        ))
        .await,
        "new connections never saw the new certificate"
    );
    assert!(
        !serves(tls.addr(), &tls.ca.pem, None).await,
        "new connections still get the old certificate"
    );
    assert_eq!(
        liveness(before.clone())
            .await
            .expect("the old connection still works"),
        ServingStatus::Serving
    );

    // Garbage: a warning naming the file, and the rotated certificate keeps serving.
    write(&tls.path("tls.crt"), "not a certificate\n");
    write(&tls.path("tls.key"), "not a key\n");
    let cert_path = tls.path("tls.crt").display().to_string();
    assert!(
        support::eventually(Duration::from_secs(20), || async {
            logged(&["WARN", "do not load", &cert_path])
        })
        .await,
        "no warning naming {cert_path}"
    );
    assert!(serves(tls.addr(), &second.pem, None).await);
    tls.server.stop().await.expect("clean stop");
}

#[test]
fn the_config_check_names_the_key_of_each_bad_file() {
    let dir = tempfile::tempdir().expect("dir");
    let ca = Ca::new("check CA");
    let (cert, key) = ca.leaf("agentd", false);
    let (_, other_key) = ca.leaf("other", false);
    write(&dir.path().join("cert.pem"), &cert);
    write(&dir.path().join("key.pem"), &key);
    write(&dir.path().join("other.key"), &other_key);
    write(&dir.path().join("garbage"), "garbage\n");
    let check = |cert: Option<&str>, key: Option<&str>, ca: Option<&str>| {
        let mut config = agentd::config::Config::default();
        config.server.tls.cert_file = cert.map(|f| dir.path().join(f));
        config.server.tls.key_file = key.map(|f| dir.path().join(f));
        config.server.tls.client_ca_file = ca.map(|f| dir.path().join(f));
        config.validate().map_err(|e| e.to_string())
    };
    let err = |result: Result<(), String>| result.expect_err("refused");
    assert!(check(Some("cert.pem"), Some("key.pem"), None).is_ok());
    assert!(check(Some("cert.pem"), Some("key.pem"), Some("cert.pem")).is_ok());
    let e = err(check(Some("cert.pem"), None, None));
    assert!(e.contains("server.tls.key_file must be set"), "{e}");
    let e = err(check(None, Some("key.pem"), None));
    assert!(e.contains("server.tls.cert_file must be set"), "{e}");
    let e = err(check(None, None, Some("cert.pem")));
    assert!(e.contains("server.tls.client_ca_file needs"), "{e}");
    let e = err(check(Some("missing.pem"), Some("key.pem"), None));
    assert!(
        e.contains("server.tls.cert_file") && e.contains("cannot read"),
        "{e}"
    );
    let e = err(check(Some("garbage"), Some("key.pem"), None));
    assert!(
        e.contains("server.tls.cert_file") && e.contains("no PEM CERTIFICATE"),
        "{e}"
    );
    let e = err(check(Some("cert.pem"), Some("garbage"), None));
    assert!(
        e.contains("server.tls.key_file") && e.contains("no PEM PRIVATE KEY"),
        "{e}"
    );
    let e = err(check(Some("cert.pem"), Some("other.key"), None));
    assert!(
        e.contains("server.tls.key_file") && e.contains("does not match"),
        "{e}"
    );
    let e = err(check(Some("cert.pem"), Some("key.pem"), Some("garbage")));
    assert!(
        e.contains("server.tls.client_ca_file") && e.contains("no PEM CERTIFICATE"),
        "{e}"
    );
}
