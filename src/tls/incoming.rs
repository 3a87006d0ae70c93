//! The gRPC port's connections: plain TCP, or TLS streams from an accept loop that hands each
//! handshake to its own task.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::Map;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::body::Body;
use tonic::service::Routes;
use tonic::transport::server::{Router, TcpIncoming};
use tower::{BoxError, Layer, Service};
use tracing::{debug, info};

use super::files::TlsFiles;
use super::flatten::Flattened;
use super::reload::watch_files;
use crate::config::Config;

/// How long a client has to complete its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Most handshakes in progress at once; connections beyond it are closed at once (a flood of
/// idle connections must not pile up tasks).
const MAX_HANDSHAKES: usize = 1024;

/// Handshaken connections waiting for the server to pick them up.
const READY_QUEUE: usize = 64;

/// A connection as the server reads it (see [`Flattened`]).
type Conn<T> = Result<Flattened<T>, std::io::Error>;

/// Accepted TCP connections, wrapped.
type PlainConns = Map<TcpIncoming, fn(std::io::Result<TcpStream>) -> Conn<TcpStream>>;

/// The connections the server serves.
pub enum Incoming {
    /// Plain TCP (no `[server.tls]`).
    Plain(PlainConns),
    /// TLS streams whose handshake completed.
    Tls(ReceiverStream<Conn<TlsStream<TcpStream>>>),
}

/// The port's connections with TCP_NODELAY (chunks are small writes: without it each could wait
/// for a delayed ACK), wrapped in TLS when `[server.tls]` is set. Loads the TLS files now, so a
/// bad one fails the start.
pub fn incoming(listener: TcpListener, config: &Config) -> anyhow::Result<Incoming> {
    let tcp = TcpIncoming::from(listener).with_nodelay(Some(true));
    let tls = &config.server.tls;
    if !tls.enabled() {
        return Ok(Incoming::Plain(tcp.map(|conn| conn.map(Flattened::new))));
    }
    let http1 = config.web.http1();
    let files = TlsFiles::read_with_alpn(tls, http1)?;
    let (current, configs) = watch::channel(Arc::new(files.server_config()?));
    if tls.reload_interval_ms > 0 {
        tokio::spawn(watch_files(tls.clone(), http1, files, current));
    }
    let (ready, streams) = mpsc::channel(READY_QUEUE);
    tokio::spawn(accept(tcp, configs, ready));
    info!(
        client_certificates = tls.client_ca_file.is_some(),
        reload_interval_ms = tls.reload_interval_ms,
        "TLS on the gRPC port"
    );
    Ok(Incoming::Tls(ReceiverStream::new(streams)))
}

/// Accepts until the server drops its end of `ready` (then the listener closes with it); each
/// connection's handshake runs in its own task with the configuration current at accept time.
async fn accept(
    mut tcp: TcpIncoming,
    configs: watch::Receiver<Arc<ServerConfig>>,
    ready: mpsc::Sender<Conn<TlsStream<TcpStream>>>,
) {
    let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let stream = tokio::select! {
            () = ready.closed() => return,
            next = tcp.next() => match next {
                Some(Ok(stream)) => stream,
                Some(Err(e)) => {
                    debug!(error = %e, "accepting a connection failed");
                    continue;
                }
                None => return,
            },
        };
        let Ok(permit) = handshakes.clone().try_acquire_owned() else {
            debug!("too many TLS handshakes in progress; closing a new connection");
            continue;
        };
        let acceptor = TlsAcceptor::from(configs.borrow().clone());
        let ready = ready.clone();
        tokio::spawn(async move {
            let peer = stream.peer_addr().ok();
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    drop(permit);
                    // Fails only when the server stopped accepting: the connection just closes.
                    let _ = ready.send(Ok(Flattened::new(tls))).await;
                }
                Ok(Err(e)) => debug!(?peer, error = %e, "TLS handshake failed"),
                Err(_) => debug!(?peer, "TLS handshake timed out"),
            }
        });
    }
}

/// Serving a router on [`Incoming`] (tonic's `serve_with_incoming_shutdown` takes one stream
/// type; this picks the right one).
pub trait ServeIncoming {
    /// Serves `incoming` until `signal` completes, then drains like
    /// `serve_with_incoming_shutdown`.
    fn serve_incoming_shutdown<F>(
        self,
        incoming: Incoming,
        signal: F,
    ) -> impl Future<Output = Result<(), tonic::transport::Error>>
    where
        F: Future<Output = ()>;
}

impl<L, ResBody> ServeIncoming for Router<L>
where
    L: Layer<Routes>,
    L::Service:
        Service<http::Request<Body>, Response = http::Response<ResBody>> + Clone + Send + 'static,
    <L::Service as Service<http::Request<Body>>>::Future: Send,
    <L::Service as Service<http::Request<Body>>>::Error: Into<BoxError> + Send,
    ResBody: http_body::Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    async fn serve_incoming_shutdown<F>(
        self,
        incoming: Incoming,
        signal: F,
    ) -> Result<(), tonic::transport::Error>
    where
        F: Future<Output = ()>,
    {
        match incoming {
            Incoming::Plain(tcp) => self.serve_with_incoming_shutdown(tcp, signal).await,
            Incoming::Tls(tls) => self.serve_with_incoming_shutdown(tls, signal).await,
        }
    }
}
