//! The processes a benchmark drives: an agentd (the release binary, as deployed), the instant
//! model server (`mock-openai`) and, for a Redis store, private `redis-server`s (`redis.rs`), each
//! its own process on a free loopback port, stopped when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use crate::redis::RedisSet;

/// Which store agentd runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoreKind {
    /// The embedded on-disk store (the default deployment of one replica).
    Embedded,
    /// The embedded store with `store.sync = "always"` (every write on disk before its reply).
    EmbeddedSync,
    /// A private redis-server (no persistence), as production runs on Redis.
    Redis,
    /// A private 3-master Redis Cluster.
    RedisCluster,
    /// A private redis-server with a replica that every write waits for (`WAIT 1`).
    RedisWait,
    /// A master with two replicas and a Sentinel; agentd finds the master through it.
    RedisSentinel,
    /// The same, every write waiting for a replica (`WAIT 1`).
    RedisSentinelWait,
}

impl StoreKind {
    /// Whether it is an embedded store (no Redis).
    pub fn embedded(self) -> bool {
        matches!(self, Self::Embedded | Self::EmbeddedSync)
    }

    /// Its name in figures and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Embedded => "embedded",
            Self::EmbeddedSync => "embedded-sync",
            Self::Redis => "redis",
            Self::RedisCluster => "redis-cluster",
            Self::RedisWait => "redis-wait",
            Self::RedisSentinel => "redis-sentinel",
            Self::RedisSentinelWait => "redis-sentinel-wait",
        }
    }
}

/// A child process killed when dropped.
pub struct Proc {
    /// What it is, for messages.
    pub name: &'static str,
    /// The process.
    pub child: Child,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The running processes of one benchmark.
pub struct Procs {
    /// agentd's gRPC address, `http://127.0.0.1:port`.
    pub agentd_url: String,
    /// agentd's process id, for its memory figures.
    pub agentd_pid: u32,
    // Fields drop in declaration order: agentd first, then the model, then Redis (which agentd
    // would otherwise see go away), then the scratch directory.
    _agentd: Proc,
    _model: Proc,
    /// The Redis processes, when the store is Redis.
    pub redis: Option<RedisSet>,
    _dir: TempDir,
}

/// A scratch directory (config and embedded data), removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> anyhow::Result<Self> {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("agentd-bench-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Self(path))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where the binaries are: `--agentd` / `--model` when given, else next to this one (a
/// `cargo build --release --features mock --bins` puts all three in target/release).
pub fn sibling(given: Option<&Path>, name: &str) -> anyhow::Result<PathBuf> {
    if let Some(path) = given {
        return Ok(path.to_owned());
    }
    let me = std::env::current_exe().context("locating this binary")?;
    let path = me.with_file_name(name);
    if !path.exists() {
        bail!(
            "{} not found: build it with `cargo build --release --features mock --bins` (or pass its path)",
            path.display()
        );
    }
    Ok(path)
}

impl Procs {
    /// Starts Redis (when asked), the model server and agentd, and waits until agentd serves.
    pub async fn start(
        store: StoreKind,
        agentd: &Path,
        model: &Path,
        max_runs: usize,
    ) -> anyhow::Result<Self> {
        let dir = TempDir::new()?;
        let redis = RedisSet::start(store, dir.path()).await?;
        let model_port = free_port()?;
        let model = Proc {
            name: "mock-openai",
            child: Command::new(model)
                .args(["--listen", &format!("127.0.0.1:{model_port}")])
                .stdout(Stdio::null())
                .spawn()
                .with_context(|| format!("starting {}", model.display()))?,
        };
        wait_for_port(model_port, &model).await?;

        let port = free_port()?;
        let store_url = redis.as_ref().map_or("embedded", |r| r.url.as_str());
        let wait_replicas = redis.as_ref().map_or(0, |r| r.wait_replicas);
        let config = dir.path().join("agentd.toml");
        std::fs::write(
            &config,
            config_text(
                port,
                store_url,
                wait_replicas,
                if store == StoreKind::EmbeddedSync {
                    "always"
                } else {
                    "batch"
                },
                &dir.path().join("data"),
                model_port,
                max_runs,
            ),
        )?;
        let log = dir.path().join("agentd.log");
        let mut command = Command::new(agentd);
        command
            .args(["--config".as_ref(), config.as_os_str()])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?);
        // The config file says everything: AGENTD_* and OTEL_* variables of this shell (a data
        // directory, a metrics port in use) would override it.
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy();
            if name.starts_with(agentd::config::ENV_PREFIX) || name.starts_with("OTEL_") {
                command.env_remove(name.as_ref());
            }
        }
        let agentd = Proc {
            name: "agentd",
            child: command
                .spawn()
                .with_context(|| format!("starting {}", agentd.display()))?,
        };
        let agentd_url = format!("http://127.0.0.1:{port}");
        if let Err(e) = wait_until_serving(&agentd_url, &agentd).await {
            let output = std::fs::read_to_string(&log).unwrap_or_default();
            let from = output.len().saturating_sub(2000);
            let from = (from..output.len())
                .find(|i| output.is_char_boundary(*i))
                .unwrap_or(output.len());
            let tail = &output[from..];
            bail!("{e}; its log ends:\n{tail}");
        }
        Ok(Self {
            agentd_url,
            agentd_pid: agentd.child.id(),
            redis,
            _model: model,
            _agentd: agentd,
            _dir: dir,
        })
    }

    /// A new HTTP/2 connection to agentd.
    pub async fn connect(&self) -> anyhow::Result<Channel> {
        Ok(Channel::from_shared(self.agentd_url.clone())?
            .tcp_nodelay(true)
            .connect()
            .await?)
    }

    /// CPU time agentd has used so far (user + system), from /proc.
    pub fn agentd_cpu(&self) -> anyhow::Result<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.agentd_pid))?;
        // Fields after the command name (which may hold spaces, so split after its ')').
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
        let ticks: u64 = fields
            .get(11..13)
            .context("short /proc stat")?
            .iter()
            .map(|f| f.parse::<u64>().unwrap_or(0))
            .sum();
        Ok(from_ticks(ticks))
    }

    /// agentd's CPU time since `before` (an [`Procs::agentd_cpu`] reading), per one of `count`
    /// runs or calls.
    pub fn agentd_cpu_per(&self, before: Duration, count: u64) -> anyhow::Result<Duration> {
        let used = self.agentd_cpu()?.saturating_sub(before);
        Ok(per_call(used, count))
    }

    /// agentd's resident memory, in bytes (`VmRSS` of /proc).
    pub fn agentd_rss(&self) -> anyhow::Result<u64> {
        self.agentd_status("VmRSS")
    }

    /// The most resident memory agentd has had so far, in bytes (`VmHWM` of /proc).
    pub fn agentd_peak_rss(&self) -> anyhow::Result<u64> {
        self.agentd_status("VmHWM")
    }

    /// A memory field of agentd's /proc status, in bytes.
    fn agentd_status(&self, field: &str) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.agentd_pid))?;
        let kib = status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .with_context(|| format!("no {field} in /proc status"))?;
        Ok(kib * 1024)
    }
}

/// CPU time given in clock ticks, as /proc reports it: USER_HZ, 100 per second on every
/// mainstream architecture.
fn from_ticks(ticks: u64) -> Duration {
    Duration::from_millis(ticks * 10)
}

/// CPU time `used` over `count` runs or calls, per one of them.
pub fn per_call(used: Duration, count: u64) -> Duration {
    used.div_f64(count.max(1) as f64)
}

/// A reading of the machine's CPU time (all cores, from /proc/stat), to tell how much of it
/// stayed idle over a burst: idle cores under load mean callers waiting, not a CPU bound.
#[derive(Clone, Copy, Debug)]
pub struct MachineCpu {
    total: u64,
    idle: u64,
}

impl MachineCpu {
    /// The machine's CPU time so far.
    pub fn now() -> anyhow::Result<Self> {
        Self::parse(&std::fs::read_to_string("/proc/stat")?)
    }

    /// Reads the summed `cpu` line of a /proc/stat text.
    fn parse(stat: &str) -> anyhow::Result<Self> {
        let ticks: Vec<u64> = stat
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("cpu "))
            .context("no cpu line in /proc/stat")?
            .split_whitespace()
            .map(|f| f.parse().unwrap_or(0))
            .collect();
        // user nice system idle iowait irq softirq steal (guest time is inside user).
        Ok(Self {
            total: ticks.iter().take(8).sum(),
            idle: ticks.iter().skip(3).take(2).sum(),
        })
    }

    /// How the machine's CPU time was spent since `self`.
    pub fn since(self) -> anyhow::Result<MachineUse> {
        Ok(self.until(Self::now()?))
    }

    /// How the machine's CPU time was spent between `self` and `later`.
    fn until(self, later: Self) -> MachineUse {
        let total = later.total.saturating_sub(self.total);
        let idle = later.idle.saturating_sub(self.idle);
        MachineUse {
            idle_percent: idle as f64 * 100.0 / total.max(1) as f64,
            busy: from_ticks(total.saturating_sub(idle)),
        }
    }
}

/// The machine's CPU time over a burst, all cores and processes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MachineUse {
    /// The share left idle (idle and iowait), in percent.
    pub idle_percent: f64,
    /// The time spent working.
    pub busy: Duration,
}

/// The benchmark's agentd: the planner agent of the workload, an agent on the silent model for
/// idle streams, quiet logs, and room for every idle stream.
fn config_text(
    port: u16,
    store_url: &str,
    wait_replicas: u32,
    sync: &str,
    data: &Path,
    model_port: u16,
    max_runs: usize,
) -> String {
    format!(
        r#"[server]
listen = "127.0.0.1:{port}"
[store]
url = "{store_url}"
wait_replicas = {wait_replicas}
sync = "{sync}"
data_dir = "{data}"
[log]
filter = "warn"
[limits]
max_concurrent_runs = {max_runs}
[[providers]]
name = "mock"
base_url = "http://127.0.0.1:{model_port}/v1"
max_retries = 0
[[agents]]
id = "planner"
instructions = "You plan work with the task tools."
model = "mock/planner"
tools = ["tasks"]
[[providers]]
name = "mock-h2"
base_url = "http://127.0.0.1:{model_port}/v1"
max_retries = 0
http2_prior_knowledge = true
[[agents]]
id = "idler"
instructions = "You wait."
model = "mock/silent"
tools = ["tasks"]
[[agents]]
id = "idler-h2"
instructions = "You wait."
model = "mock-h2/silent"
tools = ["tasks"]
"#,
        data = data.display(),
    )
}

/// A loopback port free right now.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Waits until `proc` listens on `port`.
pub async fn wait_for_port(port: u16, proc: &Proc) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        if Instant::now() > deadline {
            bail!("{} did not listen on {port}", proc.name);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

async fn wait_until_serving(url: &str, proc: &Proc) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(channel) = Channel::from_shared(url.to_owned())?.connect().await {
            let reply = HealthClient::new(channel)
                .check(HealthCheckRequest::default())
                .await;
            if reply.is_ok_and(|r| r.get_ref().status() == ServingStatus::Serving) {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            bail!("{} did not start serving at {url}", proc.name);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_use_counts_idle_and_iowait_of_all_cores_and_the_rest_as_work() {
        let stat = |user, idle, iowait| {
            format!("cpu  {user} 0 100 {idle} {iowait} 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
        };
        let before = MachineCpu::parse(&stat(1000, 500, 0)).expect("parses");
        // 300 ticks busy, 60 idle, 40 waiting on I/O: 100 of 400 ticks not working.
        let after = MachineCpu::parse(&stat(1300, 560, 40)).expect("parses");
        let spent = before.until(after);
        assert_eq!(spent.idle_percent, 25.0);
        assert_eq!(spent.busy, Duration::from_secs(3));
        let none = after.until(after);
        assert_eq!(none.idle_percent, 0.0);
        assert_eq!(none.busy, Duration::ZERO);
        assert!(MachineCpu::parse("intr 1 2 3\n").is_err());
    }
}
