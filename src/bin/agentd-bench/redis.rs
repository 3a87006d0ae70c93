//! The Redis processes of a benchmark, each its own `redis-server` on a free loopback port with
//! no persistence: one node, a 3-master cluster joined by `redis-cli --cluster create`, a master
//! with a replica that every write waits for, or a master with two replicas watched by a
//! Sentinel (which a failover benchmark kills). Also what they have done so far (commands,
//! network bytes, CPU), read from `INFO`, for the per-run figures of the capacity model.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::procs::{Proc, StoreKind, free_port, wait_for_port};

/// Masters of the benchmark's cluster.
const CLUSTER_MASTERS: usize = 3;
/// The name the Sentinel monitors the master under.
const SENTINEL_MASTER: &str = "agentd-bench";

/// Running Redis processes and how agentd reaches them.
pub struct RedisSet {
    /// agentd's `store.url`.
    pub url: String,
    /// Replicas agentd's writes wait for (`store.wait_replicas`).
    pub wait_replicas: u32,
    /// The ports of the nodes that serve writes (masters), whose `INFO` the figures sum.
    pub data_ports: Vec<u16>,
    /// The Sentinel's port, for the Sentinel stores.
    sentinel_port: Option<u16>,
    /// The processes; for the Sentinel stores the master first.
    procs: Vec<Proc>,
}

/// What the data nodes have done so far, summed over them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Totals {
    /// Commands processed (a script counts once, with each command it runs).
    pub commands: f64,
    /// Bytes received from clients.
    pub net_in: f64,
    /// Bytes sent to clients (replication excluded).
    pub net_out: f64,
    /// CPU seconds (user + system).
    pub cpu: f64,
}

impl Totals {
    /// `self - before`, divided by `n`.
    pub fn per(self, before: Totals, n: f64) -> Totals {
        let n = n.max(1.0);
        Totals {
            commands: (self.commands - before.commands) / n,
            net_in: (self.net_in - before.net_in) / n,
            net_out: (self.net_out - before.net_out) / n,
            cpu: (self.cpu - before.cpu) / n,
        }
    }
}

impl RedisSet {
    /// Starts what `store` needs (nothing for the embedded store), with its files in `dir`.
    pub async fn start(store: StoreKind, dir: &Path) -> anyhow::Result<Option<Self>> {
        match store {
            StoreKind::Embedded | StoreKind::EmbeddedSync => Ok(None),
            StoreKind::Redis => {
                let (proc, port) = server(dir, &[]).await?;
                Ok(Some(Self {
                    url: format!("redis://127.0.0.1:{port}/0"),
                    wait_replicas: 0,
                    data_ports: vec![port],
                    sentinel_port: None,
                    procs: vec![proc],
                }))
            }
            StoreKind::RedisWait => {
                let (master, port) = server(dir, &[]).await?;
                let (replica, _) =
                    server(dir, &["--replicaof", "127.0.0.1", &port.to_string()]).await?;
                wait_for(Duration::from_secs(20), "the replica to sync", || {
                    cli(port, &["info", "replication"]).contains("state=online")
                })
                .await?;
                Ok(Some(Self {
                    url: format!("redis://127.0.0.1:{port}/0"),
                    wait_replicas: 1,
                    data_ports: vec![port],
                    sentinel_port: None,
                    procs: vec![master, replica],
                }))
            }
            StoreKind::RedisSentinel | StoreKind::RedisSentinelWait => {
                let (master, port) = server(dir, &[]).await?;
                let mut procs = vec![master];
                for _ in 0..2 {
                    let args = ["--replicaof", "127.0.0.1", &port.to_string()];
                    procs.push(server(dir, &args).await?.0);
                }
                wait_for(Duration::from_secs(20), "the replicas to sync", || {
                    cli(port, &["info", "replication"])
                        .matches("state=online")
                        .count()
                        == 2
                })
                .await?;
                let sentinel_port = free_port()?;
                let config = dir.join("sentinel.conf");
                std::fs::write(
                    &config,
                    format!(
                        "port {sentinel_port}\nbind 127.0.0.1\nprotected-mode no\n\
                         dir {dir}\nsentinel monitor {SENTINEL_MASTER} 127.0.0.1 {port} 1\n\
                         sentinel down-after-milliseconds {SENTINEL_MASTER} 500\n\
                         sentinel failover-timeout {SENTINEL_MASTER} 5000\n",
                        dir = dir.display()
                    ),
                )?;
                let sentinel = Proc {
                    name: "redis-sentinel",
                    child: Command::new("redis-sentinel")
                        .arg(&config)
                        .stdout(Stdio::null())
                        .spawn()
                        .context("starting redis-sentinel (scripts/setup.sh installs it)")?,
                };
                wait_for_port(sentinel_port, &sentinel).await?;
                procs.push(sentinel);
                wait_for(
                    Duration::from_secs(20),
                    "the Sentinel to know the replicas",
                    || {
                        let out = cli(sentinel_port, &["sentinel", "replicas", SENTINEL_MASTER]);
                        out.matches("slave").count() >= 2
                    },
                )
                .await?;
                Ok(Some(Self {
                    url: format!("redis+sentinel://127.0.0.1:{sentinel_port}/{SENTINEL_MASTER}"),
                    wait_replicas: u32::from(store == StoreKind::RedisSentinelWait),
                    data_ports: vec![port],
                    sentinel_port: Some(sentinel_port),
                    procs,
                }))
            }
            StoreKind::RedisCluster => {
                let mut procs = Vec::new();
                let mut ports = Vec::new();
                for i in 0..CLUSTER_MASTERS {
                    let config = format!("nodes-{i}.conf");
                    let args = ["--cluster-enabled", "yes", "--cluster-config-file", &config];
                    let (proc, port) = server(dir, &args).await?;
                    procs.push(proc);
                    ports.push(port);
                }
                let nodes: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
                let mut args = vec!["--cluster", "create"];
                args.extend(nodes.iter().map(String::as_str));
                args.extend(["--cluster-replicas", "0", "--cluster-yes"]);
                let out = cli(ports[0], &args);
                if !out.contains("[OK] All 16384 slots covered") {
                    bail!("redis-cli --cluster create failed:\n{out}");
                }
                wait_for(Duration::from_secs(30), "the cluster to be ok", || {
                    ports
                        .iter()
                        .all(|p| cli(*p, &["cluster", "info"]).contains("cluster_state:ok"))
                })
                .await?;
                Ok(Some(Self {
                    url: format!("redis+cluster://{}", nodes.join(",")),
                    wait_replicas: 0,
                    data_ports: ports,
                    sentinel_port: None,
                    procs,
                }))
            }
        }
    }

    /// Kills the master of a Sentinel store (SIGKILL: what it had not replicated is gone).
    pub fn kill_master(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.sentinel_port.is_some(),
            "only a Sentinel store fails over"
        );
        let master = &mut self.procs[0].child;
        master.kill()?;
        master.wait()?;
        Ok(())
    }

    /// Waits until the Sentinel names another master than the one killed.
    pub async fn wait_promoted(&self) -> anyhow::Result<()> {
        let sentinel = self.sentinel_port.context("not a Sentinel store")?;
        let old = self.data_ports[0].to_string();
        wait_for(
            Duration::from_secs(30),
            "the Sentinel to promote a replica",
            || {
                let out = cli(
                    sentinel,
                    &["sentinel", "get-master-addr-by-name", SENTINEL_MASTER],
                );
                out.lines().nth(1).is_some_and(|port| port.trim() != old)
            },
        )
        .await
    }

    /// What the data nodes have done so far.
    pub fn totals(&self) -> anyhow::Result<Totals> {
        let mut totals = Totals::default();
        for port in &self.data_ports {
            let info = cli(*port, &["info", "all"]);
            let field = |name: &str| -> anyhow::Result<f64> {
                info.lines()
                    .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .with_context(|| format!("no {name} in INFO of port {port}"))
            };
            totals.commands += field("total_commands_processed")?;
            totals.net_in += field("total_net_input_bytes")?;
            // Redis 7 counts the replication stream in the output too.
            let replication = field("total_net_repl_output_bytes").unwrap_or(0.0);
            totals.net_out += field("total_net_output_bytes")? - replication;
            totals.cpu += field("used_cpu_sys")? + field("used_cpu_user")?;
        }
        Ok(totals)
    }
}

/// Starts one `redis-server` with extra arguments on a free port, its files in `dir`.
async fn server(dir: &Path, args: &[&str]) -> anyhow::Result<(Proc, u16)> {
    let port = free_port()?;
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .args(args)
        .stdout(Stdio::null())
        .spawn()
        .context("starting redis-server (is it installed? scripts/setup.sh installs it)")?;
    let proc = Proc {
        name: "redis-server",
        child,
    };
    wait_for_port(port, &proc).await?;
    Ok((proc, port))
}

/// Runs `redis-cli -p <port> <args>` and returns what it printed (empty when it cannot run).
fn cli(port: u16, args: &[&str]) -> String {
    Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default()
}

/// Polls `probe` every 50 ms until it holds, at most `limit`.
async fn wait_for(limit: Duration, what: &str, probe: impl Fn() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    while !probe() {
        if Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}
