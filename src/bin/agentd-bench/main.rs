//! agentd-bench: measures agentd as it is deployed. It starts the release `agentd` binary, the
//! instant model server (`mock-openai`) and, for Redis, private `redis-server`s (one node, a
//! 3-master cluster, or a master with a replica every write waits for), each its own process,
//! and drives agentd over gRPC from this one. Every figure is given as min / median / max over
//! rounds; nothing here asserts a speed.
//!
//! `cargo build --release --features mock --bins && target/release/agentd-bench` (all modes,
//! both stores); `--help` lists the modes and knobs, `--json` prints JSON.

mod failover;
mod load;
mod procs;
mod redis;
mod report;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use procs::{Procs, StoreKind, sibling};
use report::Figure;

// The same allocator as agentd: a benchmark's harness should not spend its share of the two
// cores in glibc malloc's arena locks.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Command-line flags.
#[derive(Parser)]
#[command(about = "Benchmarks a real agentd process over gRPC (see README: Benchmarks)")]
struct Args {
    /// What to measure.
    #[arg(value_enum, default_values_t = [Mode::All])]
    modes: Vec<Mode>,
    /// The store agentd runs on.
    #[arg(long, value_enum, default_value_t = Stores::Both)]
    store: Stores,
    /// Rounds per figure (each figure is min / median / max over them).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Runs per round one at a time.
    #[arg(long, default_value_t = 300)]
    runs: usize,
    /// Seconds per round of each throughput figure.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Idle streams held open per round of `idle`.
    #[arg(long, default_value_t = 10_000)]
    idle_streams: usize,
    /// Finished runs per round of `redis-memory`.
    #[arg(long, default_value_t = 2_000)]
    memory_runs: usize,
    /// Print the figures as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// The agentd binary (default: next to this one).
    #[arg(long)]
    agentd: Option<PathBuf>,
    /// Another agentd binary to compare with (`generate` and `tasks` only): each round runs on
    /// both, one after the other, so the machine's drift hits both alike, and every figure
    /// gains its ratio, against / agentd, round by round.
    #[arg(long)]
    against: Option<PathBuf>,
    /// The mock-openai binary (default: next to this one).
    #[arg(long)]
    model: Option<PathBuf>,
}

/// A benchmark mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Every mode below.
    All,
    /// Planning runs (task_write, then text; memory on, a fresh thread each): one at a time
    /// (latency) and 16 at once (runs/s).
    Generate,
    /// The TaskService mix (Write, Update, Complete, Check) at 1, 16 and 64 callers, next to a
    /// bare unary call (health Check) on the same server, as a ratio.
    Tasks,
    /// Generate streams waiting on a silent model, whose calls hold an HTTP/1 connection each,
    /// then share one HTTP/2 connection: agentd's RSS per stream, and after they close.
    Idle,
    /// Redis memory per finished run at the default retention (Redis store only).
    RedisMemory,
    /// The capacity model's inputs on the Redis stores: per planning run and per TaskService
    /// call at 16 at once, Redis commands, network bytes and CPU, and agentd's CPU.
    Capacity,
    /// A failover under load on the Sentinel stores: 16 writers, the master killed, what was
    /// acknowledged and lost, and the longest time no write was acknowledged.
    Failover,
}

/// Which stores to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Stores {
    /// The embedded store.
    Embedded,
    /// The embedded store with `store.sync = "always"`.
    EmbeddedSync,
    /// A private redis-server.
    Redis,
    /// A private 3-master Redis Cluster.
    RedisCluster,
    /// A private redis-server with a replica every write waits for (`store.wait_replicas = 1`).
    RedisWait,
    /// The embedded store and one redis-server, one after the other.
    Both,
    /// Every store above, one after the other.
    All,
    /// A master with two replicas and a Sentinel: writes not waiting, then waiting for a replica.
    RedisSentinel,
}

/// Bytes in a MiB, for memory figures.
const MIB: f64 = 1024.0 * 1024.0;

/// The rows `tasks` prints for each number of callers (name after `c=N`, unit), in the order
/// of its values. The last is the mix / baseline ratio with every core busy at the CPU per call
/// measured: what is left to bound the mix once nothing waits.
const TASKS_ROWS: [(&str, &str); 9] = [
    ("TaskService mix", "ops/s"),
    ("health Check (baseline)", "ops/s"),
    ("mix / baseline", "ratio"),
    ("agentd CPU per mix call", "µs"),
    ("machine idle during the mix", "%"),
    ("machine idle during the baseline", "%"),
    ("machine CPU per mix call", "µs"),
    ("machine CPU per baseline call", "µs"),
    ("mix / baseline with no core idle", "ratio"),
];

/// How the ratio of the two builds' figures is marked.
const RATIO_LABEL: &str = "against / agentd";

/// The order the builds take their turns in `round`: reversed every other round, so that
/// neither always goes first (onto a machine the other just warmed or left busy).
fn turns(builds: usize, round: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..builds).collect();
    if round % 2 == 1 {
        order.reverse();
    }
    order
}

/// One build's `generate` figures, a value per round.
#[derive(Default)]
struct GenerateRounds {
    /// Median, p90 and p99 latency one at a time.
    latency: [Vec<f64>; 3],
    /// Runs per second one at a time.
    one: Vec<f64>,
    /// agentd's CPU per run one at a time.
    one_cpu: Vec<f64>,
    /// Runs per second at 16 concurrent runs.
    sixteen: Vec<f64>,
    /// agentd's CPU per run at 16 concurrent runs.
    cpu: Vec<f64>,
    /// agentd's peak RSS (one value: the peak over every round).
    peak_rss: Vec<f64>,
}

impl GenerateRounds {
    /// One round on `procs`: `runs` runs one at a time, then 16 at once for `time`.
    async fn measure(
        &mut self,
        procs: &Procs,
        round: usize,
        runs: usize,
        time: Duration,
    ) -> anyhow::Result<()> {
        let started = std::time::Instant::now();
        let cpu = procs.agentd_cpu()?;
        let summary = load::latency_summary(
            load::sequential_runs(procs, &format!("seq{round}"), runs).await?,
        );
        self.one.push(runs as f64 / started.elapsed().as_secs_f64());
        let cpu = procs.agentd_cpu_per(cpu, runs as u64)?;
        self.one_cpu.push(cpu.as_secs_f64() * 1000.0);
        for (figure, value) in self.latency.iter_mut().zip(summary) {
            figure.push(value);
        }
        let (runs_per_sec, cpu_ms) =
            load::concurrent_runs(procs, &format!("c16r{round}"), 16, time).await?;
        self.sixteen.push(runs_per_sec);
        self.cpu.push(cpu_ms);
        Ok(())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.rounds > 0, "--rounds must be at least 1");
    let mut builds = vec![Build {
        label: "agentd",
        path: sibling(args.agentd.as_deref(), "agentd")?,
    }];
    if let Some(path) = &args.against {
        let compared = [Mode::Generate, Mode::Tasks];
        anyhow::ensure!(
            args.modes.iter().all(|mode| compared.contains(mode)),
            "--against compares the generate and tasks modes: name one or both"
        );
        builds.push(Build {
            label: "against",
            path: path.clone(),
        });
        if !args.json {
            for build in &builds {
                println!("{} = {}", build.label, build.path.display());
            }
        }
    }
    let model = sibling(args.model.as_deref(), "mock-openai")?;
    let stores = match args.store {
        Stores::Embedded => vec![StoreKind::Embedded],
        Stores::EmbeddedSync => vec![StoreKind::EmbeddedSync],
        Stores::Redis => vec![StoreKind::Redis],
        Stores::RedisCluster => vec![StoreKind::RedisCluster],
        Stores::RedisWait => vec![StoreKind::RedisWait],
        Stores::Both => vec![StoreKind::Embedded, StoreKind::Redis],
        Stores::All => vec![
            StoreKind::Embedded,
            StoreKind::EmbeddedSync,
            StoreKind::Redis,
            StoreKind::RedisCluster,
            StoreKind::RedisWait,
        ],
        Stores::RedisSentinel => vec![StoreKind::RedisSentinel, StoreKind::RedisSentinelWait],
    };
    let all = args.modes.contains(&Mode::All);
    let wanted = |mode: Mode| all || args.modes.contains(&mode);
    let mut figures = Vec::new();
    for store in stores {
        let mut bench = Bench {
            args: &args,
            store,
            builds: &builds,
            model: &model,
            figures: &mut figures,
        };
        if wanted(Mode::Generate) {
            bench.generate().await?;
        }
        if wanted(Mode::Tasks) {
            bench.tasks().await?;
        }
        if wanted(Mode::Idle) {
            bench.idle().await?;
        }
        if wanted(Mode::RedisMemory) && store == StoreKind::Redis {
            bench.redis_memory().await?;
        }
        if wanted(Mode::Capacity) && !store.embedded() {
            bench.capacity().await?;
        }
        let sentinel = matches!(
            store,
            StoreKind::RedisSentinel | StoreKind::RedisSentinelWait
        );
        if wanted(Mode::Failover) && sentinel {
            bench.failover().await?;
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&figures)?);
    }
    Ok(())
}

/// An agentd binary under measurement.
struct Build {
    /// How its figures are marked: `agentd`, or `against` for the one compared with it.
    label: &'static str,
    path: PathBuf,
}

/// One store's measurements.
struct Bench<'a> {
    args: &'a Args,
    store: StoreKind,
    /// The agentd binary, then the one `--against` names, if any.
    builds: &'a [Build],
    model: &'a std::path::Path,
    figures: &'a mut Vec<Figure>,
}

impl Bench<'_> {
    /// Fresh processes for one mode, on the first build.
    async fn start(&self, max_runs: usize) -> anyhow::Result<Procs> {
        let agentd = &self.builds[0].path;
        Procs::start(self.store, agentd, self.model, max_runs).await
    }

    /// Fresh processes for one mode on every build, all started before any round.
    async fn start_builds(&self, max_runs: usize) -> anyhow::Result<Vec<Procs>> {
        let mut started = Vec::with_capacity(self.builds.len());
        for build in self.builds {
            started.push(Procs::start(self.store, &build.path, self.model, max_runs).await?);
        }
        Ok(started)
    }

    fn seconds(&self) -> Duration {
        Duration::from_secs_f64(self.args.seconds)
    }

    /// Records a figure and prints it as it comes (unless the output is JSON).
    fn record(&mut self, mode: &'static str, name: String, unit: &'static str, rounds: Vec<f64>) {
        self.push(Figure::new(self.store, mode, name, unit, rounds));
    }

    /// Records a figure measured on every build (`rounds[i]` on build `i`), and with two
    /// builds, its ratio round by round.
    fn record_builds(
        &mut self,
        mode: &'static str,
        name: &str,
        unit: &'static str,
        rounds: Vec<Vec<f64>>,
    ) {
        if let [first, second] = rounds.as_slice() {
            let ratio = second.iter().zip(first).map(|(b, a)| b / a).collect();
            let figures = [
                (self.builds[0].label, first.clone(), unit),
                (self.builds[1].label, second.clone(), unit),
                (RATIO_LABEL, ratio, "ratio"),
            ];
            for (label, values, unit) in figures {
                let figure = Figure::new(self.store, mode, name, unit, values);
                self.push(figure.of_build(label));
            }
            return;
        }
        for values in rounds {
            self.record(mode, name.to_owned(), unit, values);
        }
    }

    fn push(&mut self, figure: Figure) {
        if !self.args.json {
            println!("{}", figure.line());
        }
        self.figures.push(figure);
    }

    async fn generate(&mut self) -> anyhow::Result<()> {
        let builds = self.start_builds(1024).await?;
        for procs in &builds {
            // Warm-up: connections, the model client's pool, the store's caches.
            load::sequential_runs(procs, "warmup", 100).await?;
        }
        let mut rounds: Vec<GenerateRounds> = builds.iter().map(|_| Default::default()).collect();
        // Rounds interleave the two shapes (and the builds), so drift on a busy machine hits
        // all alike.
        for round in 0..self.args.rounds {
            for i in turns(builds.len(), round) {
                let (procs, figures) = (&builds[i], &mut rounds[i]);
                figures
                    .measure(procs, round, self.args.runs, self.seconds())
                    .await?;
            }
        }
        // Once: the peak over every round, so the store's cache had the whole load to grow in.
        for (procs, figures) in builds.iter().zip(&mut rounds) {
            figures.peak_rss.push(procs.agentd_peak_rss()? as f64 / MIB);
        }
        let field = |pick: fn(&GenerateRounds) -> &Vec<f64>| -> Vec<Vec<f64>> {
            rounds.iter().map(|r| pick(r).clone()).collect()
        };
        let rows: [(&str, &'static str, Vec<Vec<f64>>); 8] = [
            ("c=1 latency median", "ms", field(|r| &r.latency[0])),
            ("c=1 latency p90", "ms", field(|r| &r.latency[1])),
            ("c=1 latency p99", "ms", field(|r| &r.latency[2])),
            ("c=1 throughput", "runs/s", field(|r| &r.one)),
            ("c=1 agentd CPU per run", "ms", field(|r| &r.one_cpu)),
            ("c=16 throughput", "runs/s", field(|r| &r.sixteen)),
            ("c=16 agentd CPU per run", "ms", field(|r| &r.cpu)),
            ("agentd peak RSS", "MiB", field(|r| &r.peak_rss)),
        ];
        for (name, unit, values) in rows {
            self.record_builds("generate", name, unit, values);
        }
        Ok(())
    }

    async fn tasks(&mut self) -> anyhow::Result<()> {
        let builds = self.start_builds(1024).await?;
        for procs in &builds {
            let warmup = load::Unary::TaskMix;
            load::unary_ops(procs, "warmup", warmup, 16, Duration::from_secs(1)).await?;
        }
        for workers in [1, 16, 64] {
            // Per build and row of TASKS_ROWS, a value per round.
            let mut figures: Vec<[Vec<f64>; TASKS_ROWS.len()]> =
                builds.iter().map(|_| Default::default()).collect();
            for round in 0..self.args.rounds {
                let tag = format!("c{workers}r{round}");
                for i in turns(builds.len(), round) {
                    let procs = &builds[i];
                    let tasks =
                        load::unary_ops(procs, &tag, load::Unary::TaskMix, workers, self.seconds())
                            .await?;
                    let baseline = load::Unary::HealthCheck;
                    let health =
                        load::unary_ops(procs, &tag, baseline, workers, self.seconds()).await?;
                    let values = [
                        tasks.rate,
                        health.rate,
                        tasks.rate / health.rate,
                        tasks.agentd_cpu_us,
                        tasks.machine_idle,
                        health.machine_idle,
                        tasks.machine_cpu_us,
                        health.machine_cpu_us,
                        health.machine_cpu_us / tasks.machine_cpu_us.max(f64::MIN_POSITIVE),
                    ];
                    for (figure, value) in figures[i].iter_mut().zip(values) {
                        figure.push(value);
                    }
                }
            }
            for (i, (name, unit)) in TASKS_ROWS.into_iter().enumerate() {
                let values = figures.iter().map(|build| build[i].clone()).collect();
                self.record_builds("tasks", &format!("c={workers} {name}"), unit, values);
            }
        }
        Ok(())
    }

    /// Idle streams whose model calls each hold an HTTP/1 connection (a plain `http://`
    /// provider), then share one HTTP/2 connection (what `https://` providers negotiate, and
    /// `http2_prior_knowledge` gives a plain one).
    async fn idle(&mut self) -> anyhow::Result<()> {
        for (agent, model) in [("idler", "HTTP/1 model"), ("idler-h2", "HTTP/2 model")] {
            self.idle_on(agent, model).await?;
        }
        Ok(())
    }

    async fn idle_on(&mut self, agent: &str, model: &str) -> anyhow::Result<()> {
        let streams = self.args.idle_streams.max(1);
        let (mut held, mut per_stream, mut after, mut baseline) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for round in 0..self.args.rounds {
            // A fresh agentd each round: a second round in the same process reuses the memory
            // the first freed, which would hide what a stream costs.
            let procs = self.start(streams + 16).await?;
            load::sequential_runs(&procs, "warmup", 20).await?;
            let [before, with, left] =
                load::idle_streams(&procs, &format!("idle{round}"), agent, streams).await?;
            baseline.push(before as f64 / MIB);
            held.push(with as f64 / MIB);
            per_stream.push(with.saturating_sub(before) as f64 / streams as f64 / 1024.0);
            after.push(left as f64 / MIB);
        }
        self.record(
            "idle",
            format!("{model}: RSS before the streams"),
            "MiB",
            baseline,
        );
        self.record(
            "idle",
            format!("{model}: RSS with {streams} idle streams"),
            "MiB",
            held,
        );
        self.record(
            "idle",
            format!("{model}: RSS per idle stream"),
            "KiB",
            per_stream,
        );
        self.record(
            "idle",
            format!("{model}: RSS after they closed"),
            "MiB",
            after,
        );
        Ok(())
    }

    async fn capacity(&mut self) -> anyhow::Result<()> {
        let procs = self.start(1024).await?;
        let Some(redis) = procs.redis.as_ref() else {
            return Ok(());
        };
        load::sequential_runs(&procs, "warmup", 50).await?;
        // Per round: throughput, Redis commands, KiB in, KiB out, Redis CPU ms, agentd CPU ms.
        let mut runs: [Vec<f64>; 6] = Default::default();
        let mut calls: [Vec<f64>; 6] = Default::default();
        for round in 0..self.args.rounds {
            for (figures, tasks) in [(&mut runs, false), (&mut calls, true)] {
                let (store_before, cpu_before) = (redis.totals()?, procs.agentd_cpu()?);
                let tag = format!("cap{round}{}", if tasks { "t" } else { "r" });
                let burst = if tasks {
                    let mix = load::Unary::TaskMix;
                    load::unary_burst(&procs, &tag, mix, 16, self.seconds()).await?
                } else {
                    load::run_burst(&procs, &tag, 16, self.seconds()).await?
                };
                // The last runs' final writes (log batches) land just after they return.
                tokio::time::sleep(Duration::from_millis(100)).await;
                let n = burst.count.max(1) as f64;
                let per = redis.totals()?.per(store_before, n);
                let agentd_ms =
                    procs.agentd_cpu_per(cpu_before, burst.count)?.as_secs_f64() * 1000.0;
                let values = [
                    burst.rate(),
                    per.commands,
                    per.net_in / 1024.0,
                    per.net_out / 1024.0,
                    per.cpu * 1000.0,
                    agentd_ms,
                ];
                for (figure, value) in figures.iter_mut().zip(values) {
                    figure.push(value);
                }
            }
        }
        for (what, rate, figures) in [("run", "runs/s", runs), ("task call", "calls/s", calls)] {
            let rows = [
                ("c=16 throughput".to_owned(), rate),
                (format!("Redis commands per {what}"), "commands"),
                (format!("Redis network in per {what}"), "KiB"),
                (format!("Redis network out per {what}"), "KiB"),
                (format!("Redis CPU per {what}"), "ms"),
                (format!("agentd CPU per {what}"), "ms"),
            ];
            for ((name, unit), rounds) in rows.into_iter().zip(figures) {
                self.record("capacity", name, unit, rounds);
            }
        }
        Ok(())
    }

    async fn failover(&mut self) -> anyhow::Result<()> {
        let (mut rate, mut lost, mut acked, mut gap) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for round in 0..self.args.rounds {
            // A fresh set each round: the last one's master is dead.
            let mut procs = self.start(1024).await?;
            let tag = format!("fail{round}");
            let outcome = failover::round(&mut procs, &tag, self.seconds(), self.seconds()).await?;
            rate.push(outcome.acked_per_sec);
            lost.push(outcome.lost as f64);
            acked.push(outcome.acked as f64);
            gap.push(outcome.gap_secs);
        }
        for (name, unit, rounds) in [
            ("writes acknowledged before the kill", "writes/s", rate),
            ("writes acknowledged in all", "writes", acked),
            ("acknowledged writes lost", "writes", lost),
            ("longest time with none acknowledged", "s", gap),
        ] {
            self.record("failover", name.into(), unit, rounds);
        }
        Ok(())
    }

    async fn redis_memory(&mut self) -> anyhow::Result<()> {
        let procs = self.start(1024).await?;
        load::sequential_runs(&procs, "warmup", 20).await?;
        let (mut bytes, mut keys) = (Vec::new(), Vec::new());
        for round in 0..self.args.rounds {
            let (b, k) =
                load::redis_memory_per_run(&procs, &format!("mem{round}"), self.args.memory_runs)
                    .await?;
            bytes.push(b / 1024.0);
            keys.push(k);
        }
        self.record(
            "redis-memory",
            "Redis memory per finished run".into(),
            "KiB",
            bytes,
        );
        self.record(
            "redis-memory",
            "Redis keys per finished run".into(),
            "keys",
            keys,
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::turns;

    #[test]
    fn builds_take_turns_first_in_alternate_rounds() {
        assert_eq!(turns(2, 0), [0, 1]);
        assert_eq!(turns(2, 1), [1, 0]);
        assert_eq!(turns(2, 2), [0, 1]);
        assert_eq!(turns(1, 1), [0]);
    }
}
