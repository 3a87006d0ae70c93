//! Configuration: a TOML file, overridden by `AGENTD_*` environment variables, overridden by
//! command-line flags. With no file at all the server starts on the embedded store.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use serde::Deserialize;

use crate::model::ProviderConfig;
use crate::store::embedded::DEFAULT_CACHE_BYTES;
use crate::store::redis::RedisTarget;

mod agent;
mod auth;
mod delegation;
mod detectors;
mod mcp;
mod memory;
mod processors;
mod scorers;
mod tls;
mod web;
mod working_memory;

pub use agent::{
    AgentConfig, AgentDefaults, CompletionConfig, HOOK_KINDS, HttpToolConfig, OnHookFailure,
    ScorerKind, ScorerSpec, Strategy, TOOL_SETS, WebhookConfig,
};
pub(crate) use auth::parse_digest;
pub use auth::{ASYMMETRIC_ALGORITHMS, AuthConfig, JwtConfig, TenantConfig};
pub use delegation::{DelegationConfig, SUB_AGENT_TOOL_PREFIX, SubAgents};
pub use detectors::{
    DetectorErrorStrategy, DetectorSpec, DetectorStrategy, LanguageSpec, LanguageStrategy,
    PiiRedaction, PiiSpec, PiiStrategy, ScrubRedaction, ScrubStrategy, ScrubberSpec,
};
pub use mcp::{McpServerConfig, McpTransportKind, McpUse, mcp_tool_name};
pub use memory::{
    AgentMemoryConfig, MAX_MESSAGE_RANGE, MAX_TOP_K, MessageRange, RecallOptions, RecallScope,
    RecallSetting,
};
pub use processors::{
    ProcessorOverrides, ProcessorSpec, REGEX_PRESETS, RegexFilterSpec, RegexPhase, RegexRuleSpec,
    RegexStrategy, TokenCountMode, TokenLimitStrategy, TokenLimiterSpec, TokenTrimMode,
    UnicodeOptions, check_list as check_processors,
};
pub use scorers::{
    CODE_SCORERS, HOOK_SCORER, JUDGED_SCORERS, Sampling, ScorerEntry, check_entry as check_scorer,
};
pub use tls::TlsConfig;
pub use web::{PlaygroundConfig, WebConfig};
pub use working_memory::{WorkingMemoryConfig, schema_value as working_memory_schema};

/// Declares the settings that have an `AGENTD_*` variable and a flag: the [`Cli`] fields, the
/// [`OVERRIDES`] list and [`Config::apply`] all come from the one table below it.
macro_rules! overrides {
    (@value $value:ident) => {
        $value.clone()
    };
    (@value $value:ident, $convert:path) => {
        $convert($value)
    };
    ($(
        $(#[$attr:meta])*
        $flag:ident: $ty:ty => $section:ident $(.$field:ident)+, $env:literal $(, $convert:path)?;
    )*) => {
        /// Command-line flags; each one can also be given as the named environment variable.
        #[derive(Debug, Default, Parser)]
        #[command(
            name = "agentd",
            version,
            about = "Runs AI agents behind a gRPC contract"
        )]
        pub struct Cli {
            /// Path of the TOML config file (optional).
            #[arg(long, env = "AGENTD_CONFIG")]
            pub config: Option<PathBuf>,
            /// Check the configuration (file, environment, flags, agents) and exit.
            #[arg(long)]
            pub check_config: bool,
            $(
                $(#[$attr])*
                #[arg(long, env = $env)]
                pub $flag: Option<$ty>,
            )*
        }

        /// Every overridable setting as (config key, environment variable).
        pub const OVERRIDES: &[(&str, &str)] = &[$(
            (concat!(stringify!($section) $(, ".", stringify!($field))+), $env),
        )*];

        impl Config {
            /// Applies environment and flag overrides (clap merged the two: a flag wins).
            pub fn apply(&mut self, cli: &Cli) {
                $(
                    if let Some(value) = &cli.$flag {
                        self.$section $(.$field)+ = overrides!(@value value $(, $convert)?);
                    }
                )*
            }
        }
    };
}

// Layering, later wins: file, then `AGENTD_*`, then flags. One entry per setting: its doc is
// the flag's help, the flag is `--` plus the first name in kebab case, then the config key it
// sets and its variable (and how the text becomes the value, when not by parsing).
overrides! {
    /// Address to listen on, e.g. 0.0.0.0:50051.
    listen: SocketAddr => server.listen, "AGENTD_LISTEN";
    /// Seconds in-flight calls get to finish after SIGTERM.
    shutdown_grace_secs: u64 => server.shutdown_grace_secs, "AGENTD_SHUTDOWN_GRACE_SECS";
    /// Milliseconds between store health probes.
    health_interval_ms: u64 => server.health_interval_ms, "AGENTD_HEALTH_INTERVAL_MS";
    /// Milliseconds after SIGTERM during which health reports NOT_SERVING while calls are still
    /// accepted, before the drain starts.
    pre_drain_ms: u64 => server.pre_drain_ms, "AGENTD_PRE_DRAIN_MS";
    /// Address of the Prometheus /metrics endpoint, e.g. 0.0.0.0:9464 (unset: off).
    metrics_listen: SocketAddr => server.metrics_listen, "AGENTD_METRICS_LISTEN", some;
    /// PEM certificate chain of the gRPC port (with --tls-key-file: TLS on).
    tls_cert_file: PathBuf => server.tls.cert_file, "AGENTD_TLS_CERT_FILE", some;
    /// PEM private key of that certificate.
    tls_key_file: PathBuf => server.tls.key_file, "AGENTD_TLS_KEY_FILE", some;
    /// PEM CA certificates client certificates must be signed by (mutual TLS).
    tls_client_ca_file: PathBuf => server.tls.client_ca_file, "AGENTD_TLS_CLIENT_CA_FILE", some;
    /// Milliseconds between checks of the TLS files for a change (0: read at start only).
    tls_reload_interval_ms: u64 => server.tls.reload_interval_ms, "AGENTD_TLS_RELOAD_INTERVAL_MS";
    /// Serve gRPC-web on the gRPC port: true or false.
    grpc_web: bool => web.grpc_web, "AGENTD_GRPC_WEB";
    /// Serve the JSON mapping (POST /{service}/{method}) on the gRPC port: true or false.
    json_api: bool => web.json, "AGENTD_JSON_API";
    /// Comma-separated origins browsers may call from (CORS), e.g. https://app.example.com, or *.
    cors_allowed_origins: String => web.cors_allowed_origins, "AGENTD_CORS_ALLOWED_ORIGINS", comma_list;
    /// Serve the web playground at / on the gRPC port: true or false.
    playground: bool => playground.enabled, "AGENTD_PLAYGROUND";
    /// Store URL: "embedded" (default), redis://host:port/db, rediss://…,
    /// redis+cluster://h1:p1,h2:p2 or redis+sentinel://s1:p1,s2:p2/<master>[/<db>].
    store_url: String => store.url, "AGENTD_STORE_URL";
    /// Redis replicas that must have each write before it is acknowledged (WAIT; 0: none).
    store_wait_replicas: u32 => store.wait_replicas, "AGENTD_STORE_WAIT_REPLICAS";
    /// Longest wait, in milliseconds, for those replicas; fewer in time fails the call.
    store_wait_timeout_ms: u64 => store.wait_timeout_ms, "AGENTD_STORE_WAIT_TIMEOUT_MS";
    /// Directory of the embedded store.
    data_dir: PathBuf => store.data_dir, "AGENTD_DATA_DIR";
    /// When the embedded store's writes reach the disk: batch (group commit, at most 100 ms
    /// after the acknowledgement) or always (before it).
    store_sync: StoreSync => store.sync, "AGENTD_STORE_SYNC";
    /// Memory, in MiB, the embedded store caches its file in (bounds its share of the RSS).
    store_cache_mb: u64 => store.cache_mb, "AGENTD_STORE_CACHE_MB";
    /// Log format: text or json.
    log_format: LogFormat => log.format, "AGENTD_LOG_FORMAT";
    /// Log filter, e.g. info or agentd=debug,info.
    log: String => log.filter, "AGENTD_LOG";
    /// Comma-separated bearer API keys clients must send (none: no authentication).
    #[arg(hide_env_values = true)]
    api_keys: String => auth.api_keys, "AGENTD_API_KEYS", comma_list;
    /// Comma-separated SHA-256 digests (hex) of accepted API keys.
    api_key_sha256: String => auth.api_key_sha256, "AGENTD_API_KEY_SHA256", comma_list;
    /// Largest accepted request, in bytes.
    max_request_bytes: usize => limits.max_request_bytes, "AGENTD_MAX_REQUEST_BYTES";
    /// Most tasks in one list.
    max_tasks: usize => limits.max_tasks, "AGENTD_MAX_TASKS";
    /// Longest accepted text field (task content, titles…), in bytes.
    max_text_bytes: usize => limits.max_text_bytes, "AGENTD_MAX_TEXT_BYTES";
    /// Longest accepted id (thread, resource, task, run), in bytes.
    max_id_bytes: usize => limits.max_id_bytes, "AGENTD_MAX_ID_BYTES";
    /// Most messages (input plus context) in one request.
    max_messages: usize => limits.max_messages, "AGENTD_MAX_MESSAGES";
    /// Most runs executing at once on this replica.
    max_concurrent_runs: usize => limits.max_concurrent_runs, "AGENTD_MAX_CONCURRENT_RUNS";
    /// Hard ceiling on steps per run.
    max_steps_ceiling: u32 => limits.max_steps_ceiling, "AGENTD_MAX_STEPS_CEILING";
    /// Seconds a run's chunk log is kept for Observe.
    run_retention_secs: u64 => limits.run_retention_secs, "AGENTD_RUN_RETENTION_SECS";
    /// Most chunks kept in one run's log.
    max_log_chunks: usize => limits.max_log_chunks, "AGENTD_MAX_LOG_CHUNKS";
    /// Seconds a tool call waits for approval before it expires.
    approval_ttl_secs: u64 => limits.approval_ttl_secs, "AGENTD_APPROVAL_TTL_SECS";
    /// Milliseconds one hook call may take by default.
    hook_deadline_ms: u64 => limits.hook_deadline_ms, "AGENTD_HOOK_DEADLINE_MS";
    /// Milliseconds a replica's lease on a run it executes lasts without renewal; then another
    /// replica takes the run over.
    run_lease_ms: u64 => limits.run_lease_ms, "AGENTD_RUN_LEASE_MS";
    /// Milliseconds between a replica's looks for runs whose lease ended.
    takeover_interval_ms: u64 => limits.takeover_interval_ms, "AGENTD_TAKEOVER_INTERVAL_MS";
    /// Most levels of sub-agents below a supervisor.
    max_delegation_depth: u32 => limits.max_delegation_depth, "AGENTD_MAX_DELEGATION_DEPTH";
}

/// An optional setting given a value.
fn some<T: Clone>(value: &T) -> Option<T> {
    Some(value.clone())
}

/// The server address of the client commands (`agentd chat` …), when `--server` is not given.
pub const CLIENT_SERVER_ENV: &str = "AGENTD_SERVER";
/// The CA certificates (PEM) the client commands trust for an `https://` server.
pub const CLIENT_TLS_CA_ENV: &str = "AGENTD_TLS_CA";
/// The client certificate (PEM) the client commands present to a mutual-TLS server.
pub const CLIENT_TLS_CERT_ENV: &str = "AGENTD_TLS_CERT";
/// The private key (PEM) of that client certificate.
pub const CLIENT_TLS_KEY_ENV: &str = "AGENTD_TLS_KEY";
/// The prefix of every environment variable agentd reads.
pub const ENV_PREFIX: &str = "AGENTD_";
/// The API key the client commands send. Only ever read from the environment: a flag's value
/// would show in `ps` and in shell history.
pub const CLIENT_API_KEY_ENV: &str = "AGENTD_API_KEY";

/// A comma-separated list, entries trimmed, empty ones dropped.
fn comma_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The whole configuration.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Network settings.
    pub server: ServerConfig,
    /// Where state lives.
    pub store: StoreConfig,
    /// Logging.
    pub log: LogConfig,
    /// Size bounds of requests and lists.
    pub limits: Limits,
    /// Client authentication.
    pub auth: AuthConfig,
    /// gRPC-web, the JSON mapping and CORS on the gRPC port.
    pub web: WebConfig,
    /// The web playground at `/`.
    pub playground: PlaygroundConfig,
    /// Model providers (OpenAI-compatible endpoints).
    pub providers: Vec<ProviderConfig>,
    /// Agents served.
    pub agents: Vec<AgentConfig>,
    /// MCP servers whose tools agents may use.
    pub mcp_servers: Vec<McpServerConfig>,
    /// The file this configuration was read from, if any (for logs).
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// The file read when neither `--config` nor `AGENTD_CONFIG` names one and it exists (the
/// container image's place for it).
pub const DEFAULT_CONFIG_FILE: &str = "/etc/agentd/agentd.toml";

/// Network settings.
#[cfg_attr(test, derive(serde::Serialize))]
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Listen address.
    pub listen: SocketAddr,
    /// Seconds in-flight calls get to finish after SIGTERM/SIGINT.
    pub shutdown_grace_secs: u64,
    /// Milliseconds between store health probes.
    pub health_interval_ms: u64,
    /// Milliseconds after a shutdown signal during which health reports NOT_SERVING while calls
    /// are still accepted (load balancers stop sending new ones), before the drain.
    pub pre_drain_ms: u64,
    /// Address of the Prometheus `/metrics` HTTP endpoint; unset: not served.
    pub metrics_listen: Option<SocketAddr>,
    /// TLS on the gRPC port (`[server.tls]`).
    pub tls: TlsConfig,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], 50051)),
            shutdown_grace_secs: 25,
            health_interval_ms: 1000,
            pre_drain_ms: 0,
            metrics_listen: None,
            tls: TlsConfig::default(),
        }
    }
}

impl ServerConfig {
    /// How long health reports NOT_SERVING before the drain starts.
    pub fn pre_drain(&self) -> Duration {
        Duration::from_millis(self.pre_drain_ms)
    }

    /// The drain period after a shutdown signal.
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_secs(self.shutdown_grace_secs)
    }
}

/// Where state lives.
#[cfg_attr(test, derive(serde::Serialize))]
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// Empty or `embedded` for the on-disk store; for Redis one node (`redis://…`,
    /// `rediss://…`), a cluster (`redis+cluster://…`) or Sentinel (`redis+sentinel://…`).
    pub url: String,
    /// Directory of the embedded store.
    pub data_dir: PathBuf,
    /// Redis replicas that must have each write before it is acknowledged (`WAIT`); 0: none.
    pub wait_replicas: u32,
    /// Longest `WAIT` for those replicas, in milliseconds.
    pub wait_timeout_ms: u64,
    /// When the embedded store's acknowledged writes are on disk.
    pub sync: StoreSync,
    /// Memory the embedded store caches its file in, in MiB: the bound on what its data adds
    /// to the process's RSS (redb's own default is 1 GiB).
    pub cache_mb: u64,
}

/// Largest [`StoreConfig::cache_mb`] accepted (1 TiB).
const MAX_STORE_CACHE_MB: u64 = 1 << 20;

/// When the embedded store's acknowledged writes are on disk.
#[cfg_attr(test, derive(serde::Serialize))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum StoreSync {
    /// Group commit: a write is on disk at most 100 ms after it was acknowledged (a crash can
    /// lose that window; never a half-applied write).
    #[default]
    Batch,
    /// Every write is on disk before it is acknowledged (one fsync per commit batch).
    Always,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            url: String::new(),
            data_dir: PathBuf::from("./data"),
            wait_replicas: 0,
            wait_timeout_ms: 500,
            sync: StoreSync::Batch,
            cache_mb: (DEFAULT_CACHE_BYTES >> 20) as u64,
        }
    }
}

/// The store a config selects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// The embedded on-disk store in this directory.
    Embedded(PathBuf),
    /// Redis at this URL.
    Redis(String),
}

impl StoreConfig {
    /// The embedded store's cache, in bytes.
    pub fn cache_bytes(&self) -> usize {
        let bytes = self.cache_mb.min(MAX_STORE_CACHE_MB) << 20;
        usize::try_from(bytes).unwrap_or(usize::MAX)
    }

    /// Which store to open.
    pub fn kind(&self) -> Result<StoreKind, ConfigError> {
        let url = self.url.trim();
        if url.is_empty() || url == "embedded" {
            return Ok(StoreKind::Embedded(self.data_dir.clone()));
        }
        let target = RedisTarget::parse(url).map_err(|e| {
            ConfigError::Invalid(format!(
                "store.url must be empty, \"embedded\" or a Redis URL: {e}, got {:?}",
                redact_url(url)
            ))
        })?;
        if self.sync == StoreSync::Always {
            return Err(ConfigError::Invalid(
                "store.sync = \"always\" applies to the embedded store; Redis's durability is its \
                 own (appendfsync in redis.conf, and store.wait_replicas for replicas)"
                    .into(),
            ));
        }
        if self.wait_replicas > 0 && matches!(target, RedisTarget::Cluster(_)) {
            return Err(ConfigError::Invalid(
                "store.wait_replicas is not supported with redis+cluster:// (WAIT must run on the \
                 connection of the write, which a cluster connection does not expose)"
                    .into(),
            ));
        }
        if self.wait_replicas > 0 && !(1..=60_000).contains(&self.wait_timeout_ms) {
            return Err(ConfigError::Invalid(format!(
                "store.wait_timeout_ms must be between 1 and 60000, got {}",
                self.wait_timeout_ms
            )));
        }
        Ok(StoreKind::Redis(url.to_owned()))
    }
}

/// Log output format.
#[cfg_attr(test, derive(serde::Serialize))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Logging.
#[cfg_attr(test, derive(serde::Serialize))]
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// Output format.
    pub format: LogFormat,
    /// `tracing` filter directives.
    pub filter: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            format: LogFormat::Text,
            filter: "info".to_owned(),
        }
    }
}

/// Size bounds; requests beyond them are rejected with a clear error.
#[cfg_attr(test, derive(serde::Serialize))]
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest accepted request, in bytes.
    pub max_request_bytes: usize,
    /// Most tasks in one list.
    pub max_tasks: usize,
    /// Longest text field, in bytes.
    pub max_text_bytes: usize,
    /// Longest id, in bytes.
    pub max_id_bytes: usize,
    /// Most messages (input plus context) in one request.
    pub max_messages: usize,
    /// Most runs executing at once on this replica; beyond it: RESOURCE_EXHAUSTED.
    pub max_concurrent_runs: usize,
    /// Hard step ceiling, applied even when a request sets only `stop_when`.
    pub max_steps_ceiling: u32,
    /// How long a run's chunk log and record are kept after its last change, in seconds.
    pub run_retention_secs: u64,
    /// Most chunks kept in one run's log (for Observe).
    pub max_log_chunks: usize,
    /// How long a tool call waits for a decision before it expires, in seconds.
    pub approval_ttl_secs: u64,
    /// How long one hook call may take when neither the request nor the webhook says, in
    /// milliseconds.
    pub hook_deadline_ms: u64,
    /// How long a replica's lease on a run it executes lasts without renewal (renewed every
    /// third of it), in milliseconds; then another replica takes the run over.
    pub run_lease_ms: u64,
    /// How often each replica looks for runs whose lease ended, in milliseconds.
    pub takeover_interval_ms: u64,
    /// Most levels of sub-agents below a supervisor (checked at start-up on the configured
    /// `sub_agents`).
    pub max_delegation_depth: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_request_bytes: 4 * 1024 * 1024,
            max_tasks: 200,
            max_text_bytes: 16 * 1024,
            max_id_bytes: 256,
            max_messages: 1000,
            max_concurrent_runs: 1024,
            max_steps_ceiling: 100,
            run_retention_secs: 900,
            max_log_chunks: 10_000,
            approval_ttl_secs: 24 * 3600,
            hook_deadline_ms: 10_000,
            run_lease_ms: 10_000,
            takeover_interval_ms: 1_000,
            max_delegation_depth: 3,
        }
    }
}

/// Configuration errors; the server refuses to start with one.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML for this schema.
    #[error("invalid config file {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Box<toml::de::Error>,
    },
    /// A value is out of range or inconsistent.
    #[error("invalid config: {0}")]
    Invalid(String),
}

impl Config {
    /// Loads the file named by the flags (else [`DEFAULT_CONFIG_FILE`] when it exists) and
    /// applies env/flag overrides.
    pub fn load(cli: &Cli) -> Result<Self, ConfigError> {
        Self::load_with_default(cli, Path::new(DEFAULT_CONFIG_FILE))
    }

    /// [`Config::load`] with another default file.
    pub fn load_with_default(cli: &Cli, default: &Path) -> Result<Self, ConfigError> {
        let path = match &cli.config {
            Some(path) => Some(path.clone()),
            None => default.is_file().then(|| default.to_owned()),
        };
        let mut config = match &path {
            Some(path) => Self::from_file(path)?,
            None => Self::default(),
        };
        config.source = path;
        config.apply(cli);
        config.validate()?;
        Ok(config)
    }

    /// The providers whose API key variable is named but not set (and not marked optional):
    /// one line per problem, naming the provider and the variable.
    pub fn missing_provider_keys(&self) -> Vec<String> {
        self.providers
            .iter()
            .filter(|p| !p.optional)
            .filter_map(|p| {
                let var = p.api_key_env.as_deref()?;
                std::env::var_os(var).is_none().then(|| {
                    format!(
                        "provider {:?}: environment variable {var} (api_key_env) is not set; set \
                         it, or mark the provider `optional = true`",
                        p.name
                    )
                })
            })
            .collect()
    }

    /// Parses a TOML file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_toml(&text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source: Box::new(source),
        })
    }

    /// Parses TOML text.
    pub fn from_toml(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }

    /// Checks consistency: store URL, unique ids, agents naming known providers and tools.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.store.kind()?;
        if !(1..=MAX_STORE_CACHE_MB).contains(&self.store.cache_mb) {
            return Err(invalid(&format!(
                "store.cache_mb must be between 1 and {MAX_STORE_CACHE_MB}, got {}",
                self.store.cache_mb
            )));
        }
        self.server.tls.validate()?;
        self.web.validate()?;
        self.playground.validate(&self.web)?;
        self.auth.validate()?;
        if self.server.health_interval_ms == 0 {
            return Err(invalid("server.health_interval_ms must be > 0"));
        }
        let limits = &self.limits;
        for (name, value) in [
            ("limits.max_request_bytes", limits.max_request_bytes),
            ("limits.max_tasks", limits.max_tasks),
            ("limits.max_text_bytes", limits.max_text_bytes),
            ("limits.max_id_bytes", limits.max_id_bytes),
            ("limits.max_messages", limits.max_messages),
            ("limits.max_concurrent_runs", limits.max_concurrent_runs),
            (
                "limits.max_steps_ceiling",
                limits.max_steps_ceiling as usize,
            ),
            (
                "limits.run_retention_secs",
                limits.run_retention_secs as usize,
            ),
            ("limits.max_log_chunks", limits.max_log_chunks),
            (
                "limits.approval_ttl_secs",
                limits.approval_ttl_secs as usize,
            ),
            ("limits.hook_deadline_ms", limits.hook_deadline_ms as usize),
            ("limits.run_lease_ms", limits.run_lease_ms as usize),
            (
                "limits.takeover_interval_ms",
                limits.takeover_interval_ms as usize,
            ),
        ] {
            if value == 0 {
                return Err(invalid(&format!("{name} must be > 0")));
            }
        }
        let mut providers = HashSet::new();
        for p in &self.providers {
            if p.name.is_empty() || !providers.insert(p.name.as_str()) {
                return Err(invalid(&format!(
                    "provider names must be non-empty and unique: {:?}",
                    p.name
                )));
            }
            if !(p.base_url.starts_with("http://") || p.base_url.starts_with("https://")) {
                return Err(invalid(&format!(
                    "provider {:?}: base_url must start with http:// or https://",
                    p.name
                )));
            }
        }
        mcp::validate_servers(&self.mcp_servers)?;
        agent::validate_agents(&self.agents, &providers, &self.mcp_servers)?;
        delegation::validate(&self.agents, self.limits.max_delegation_depth)?;
        Ok(())
    }
}

pub(crate) fn invalid(message: &str) -> ConfigError {
    ConfigError::Invalid(message.to_owned())
}

/// Hides credentials in a URL before it is logged or shown.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}://***@{}", &url[..scheme_end], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests;
