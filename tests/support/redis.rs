//! A private `redis-server` per test: free port, temp dir, no persistence, killed on drop.
//!
//! ```ignore
//! let mut redis = RedisServer::start();
//! let store = RedisStore::connect(&redis.url()).await?;
//! redis.stop();          // outage: connections refused
//! redis.start_again();   // same port, empty data set
//! redis.pause();         // a hung server: connected, silent (SIGSTOP); `resume()` undoes it
//! ```
//!
//! The binary is `$REDIS_SERVER`, else `redis-server` from `PATH`, else `/usr/bin/redis-server`.
//! A missing binary panics: Redis tests must never be skipped silently.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// How long a fresh server may take to answer PING.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How many free ports to try when another process grabs the first one.
const PORT_ATTEMPTS: usize = 5;

/// A running (or stopped) private Redis server.
pub struct RedisServer {
    port: u16,
    dir: TempDir,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers PING.
    pub fn start() -> Self {
        let dir = tempfile::tempdir().expect("cannot create a temp dir for redis-server");
        let mut last_error = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let port = free_port();
            match spawn_ready(port, &dir) {
                Ok(child) => {
                    return Self {
                        port,
                        dir,
                        child: Some(child),
                    };
                }
                Err(e) => last_error = e,
            }
        }
        panic!("redis-server did not start after {PORT_ATTEMPTS} attempts: {last_error}");
    }

    /// The URL for `RedisStore::connect`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The server's port (kept across `stop`/`start_again`).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server and waits for it to exit (clients see the connection drop).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes the server (SIGSTOP): connections stay open but nothing answers.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Unfreezes the server after [`Self::pause`].
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let child = self.child.as_ref().expect("redis-server is not running");
        let status = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .expect("cannot run kill");
        assert!(status.success(), "kill {signal} failed: {status}");
    }

    /// Starts a new (empty) server on the same port after [`Self::stop`].
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "redis-server is still running");
        // The old socket may linger briefly; retry until the port is free again.
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            match spawn_ready(self.port, &self.dir) {
                Ok(child) => {
                    self.child = Some(child);
                    return;
                }
                Err(e) if Instant::now() >= deadline => {
                    panic!("redis-server did not restart on port {}: {e}", self.port)
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // SIGKILL works on a paused process too.
        self.stop();
    }
}

/// The binary to run.
fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("REDIS_SERVER") {
        return path.into();
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("redis-server"))
            .find(|candidate| candidate.is_file())
    });
    on_path.unwrap_or_else(|| "/usr/bin/redis-server".into())
}

/// Asks the OS for a port that is free right now.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("cannot find a free TCP port")
}

/// Spawns redis-server on `port` and waits for PONG; on failure kills it and returns its log.
fn spawn_ready(port: u16, dir: &TempDir) -> Result<Child, String> {
    let binary = binary();
    let log = dir.path().join(format!("redis-{port}.log"));
    let spawned = Command::new(&binary)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
        .arg("--dir")
        .arg(dir.path())
        .arg("--logfile")
        .arg(&log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) if e.kind() == ErrorKind::NotFound => panic!(
            "redis-server not found at {}: install it (apt-get install redis-server) \
             or set REDIS_SERVER to its path; Redis tests cannot run without it",
            binary.display()
        ),
        Err(e) => panic!("cannot run {}: {e}", binary.display()),
    };
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if ping(port) {
            return Ok(child);
        }
        let exited = child.try_wait().ok().flatten();
        if exited.is_some() || Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(format!("port {port}: status {exited:?}, log:\n{log}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether a server answers PING on `port`.
fn ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut reply = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && &reply == b"+PONG\r\n"
}
