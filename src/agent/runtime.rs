//! Starts and executes runs on this replica: idempotency, the run record written before the
//! run starts and after it ends, the live runs that aborts can reach. Run records and chunk
//! logs live in the store, so the other halves work on any replica: `runtime/observe.rs`
//! (re-attach), `runtime/abort.rs` (stop from anywhere), `runtime/decide.rs` (approve,
//! decline, resume: compare-and-set on the record, so exactly one of racing deciders wins).

mod abort;
mod decide;
mod delegate;
mod lease;
mod live;
mod observe;
mod prepare;
mod records;
mod renewal;
mod scope;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, warn};

use super::delegation::SubRunEnd;
pub use super::emit::WireChunk;
use super::emit::{ClientSender, Emitter};
use super::error::RunError;
use super::event::Event;
use super::hooks::{ClientHooks, HookMeta, RunHooks};
use super::message::{new_id, now_ms};
use super::record::{RunRecord, RunStatus};
use super::request::RunRequest;
use super::run::{RunDeps, RunOutcome, Runner};
use super::state::RunState;
use super::validate::{
    validate_against_agent, validate_completion, validate_processors, validate_scorers,
};
use super::{AgentDef, Agents};
use crate::store::{Cas, LogLimits};
use crate::tasklist::TaskList;
use crate::telemetry;
use live::{LiveRun, LiveRuns, Registered};
use observe::ClientStream;
pub(super) use records::decode_record;

/// Control channel every replica listens on (aborts name their run inside the message).
pub(super) const CONTROL_CHANNEL: &str = "_all";

/// Idempotency keys are remembered this long.
const IDEMPOTENCY_TTL: Duration = Duration::from_secs(24 * 3600);

/// Most stored messages read to find a run's history window.
const MAX_HISTORY_READ: usize = 4096;

/// Buffered chunks per client stream (backpressure beyond it).
const CLIENT_BUFFER: usize = 256;

/// A run's chunks, as a client stream (encoded: [`WireChunk::decode`] reads one).
pub type ChunkStream = BoxStream<'static, Result<WireChunk, RunError>>;

/// Limits of the runtime.
#[derive(Clone, Debug)]
pub struct RuntimeLimits {
    /// Runs executing at once.
    pub max_concurrent_runs: usize,
    /// Retention of finished runs' records and logs.
    pub retention: Duration,
    /// Chunks kept per run log.
    pub max_log_chunks: usize,
    /// How long pending approvals wait.
    pub approval_ttl: Duration,
    /// How long a hook call may take when nothing else says.
    pub hook_deadline: Duration,
    /// How long this replica's lease on a run lasts without renewal.
    pub lease: Duration,
    /// How often this replica looks for runs whose lease ended.
    pub takeover_interval: Duration,
}

/// Everything a run (or a continuation) starts with.
struct Launch {
    agent: Arc<AgentDef>,
    state: RunState,
    tasks: TaskList,
    record: RunRecord,
    /// Store version of `record`.
    version: u64,
    permit: OwnedSemaphorePermit,
    span: tracing::Span,
    trace: TraceIds,
    /// Where it enters the loop.
    entry: Entry,
    /// The hooks the calling client answers, if it called with hooks.
    hooks: Option<Arc<ClientHooks>>,
}

/// A launch made ready to run: what its task keeps across awaits.
struct Prepared {
    runner: Runner,
    entry: Entry,
    em: Emitter,
    flush: super::emit::LogFlush,
    handle: Arc<lease::RecordHandle>,
    /// Stops the lease's renewal when dropped.
    renewing: renewal::Renewing,
    trace: TraceIds,
    /// A sub-agent's continued run: where it hands its end.
    parent: Option<super::request::ParentLink>,
    permit: OwnedSemaphorePermit,
    started: std::time::Instant,
    run_id: String,
    agent_id: String,
}

/// Where a launch enters the step loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    /// From the first step: a new run, or one taken over before its first checkpoint.
    Start,
    /// A suspended run whose calls are all decided.
    Resume,
    /// A taken-over run at its checkpoint: its open step's calls run (again).
    Checkpoint,
}

/// The run manager of one replica.
pub struct Runtime {
    deps: RunDeps,
    agents: Arc<Agents>,
    live: Arc<LiveRuns>,
    /// The leases of the runs executing here, renewed by [`Runtime::renew_leases`].
    leases: Arc<renewal::Leases>,
    permits: Arc<Semaphore>,
    limits: RuntimeLimits,
    replica: String,
}

impl Runtime {
    /// A runtime for these agents.
    pub fn new(deps: RunDeps, agents: Arc<Agents>, limits: RuntimeLimits) -> Arc<Self> {
        Arc::new(Self {
            deps,
            agents,
            live: Arc::default(),
            leases: Arc::default(),
            permits: Arc::new(Semaphore::new(limits.max_concurrent_runs)),
            limits,
            replica: new_id(),
        })
    }

    /// The configured agents.
    pub fn agents(&self) -> &Agents {
        &self.agents
    }

    fn log_limits(&self) -> LogLimits {
        LogLimits {
            max_chunks: self.limits.max_log_chunks,
            ttl: self.limits.retention,
        }
    }

    /// Starts a run (or replays the run of an idempotency key) and streams its chunks; the run
    /// span joins `parent` (the caller's trace). Also returns the run's trace and span ids.
    pub async fn generate(
        self: &Arc<Self>,
        request: RunRequest,
        parent: Option<opentelemetry::Context>,
        hooks: Option<Arc<ClientHooks>>,
    ) -> Result<(ChunkStream, TraceIds), RunError> {
        let agent = self.agents.get(&request.agent_id).ok_or_else(|| {
            RunError::NotFound(format!("agent {:?} is not configured", request.agent_id))
        })?;
        validate_against_agent(&agent, &self.agents, &request)?;
        // Only an idempotency key compares requests; hashing one costs a serialization.
        let fingerprint = if request.idempotency_key.is_some() {
            request.fingerprint()
        } else {
            String::new()
        };
        let mut request = request;
        request.apply_defaults(&agent.config);
        validate_completion(&agent, &self.agents, &request, hooks.as_deref())?;
        validate_processors(&agent, &request, hooks.as_deref())?;
        validate_scorers(&agent, &self.agents, &request, hooks.as_deref())?;
        let mut run_id = request.run_id.clone().unwrap_or_else(new_id);
        if let Some(key) = &request.idempotency_key {
            let claim = json!({"run_id": run_id, "fingerprint": fingerprint}).to_string();
            if let Some(existing) = self
                .deps
                .store
                .claim_key(
                    &scope::idempotency_key(&request.tenant, key),
                    Bytes::from(claim),
                    IDEMPOTENCY_TTL,
                )
                .await?
            {
                let existing: Value = serde_json::from_slice(&existing).unwrap_or(Value::Null);
                if existing["fingerprint"].as_str() != Some(fingerprint.as_str()) {
                    return Err(RunError::AlreadyExists(format!(
                        "idempotency_key {key:?} was used with a different request"
                    )));
                }
                let first = existing["run_id"].as_str().unwrap_or_default().to_owned();
                if let Some(doc) = self.deps.store.get_run(&first).await? {
                    let record = decode_record(&doc)?;
                    // The key's first attempt named another tenant's run id: never replay that.
                    scope::check_same_tenant(&request.tenant, &record.tenant, &first)?;
                    let trace = record.trace.unwrap_or_default();
                    return Ok((self.observe(&first, 0).await?, trace));
                }
                // The first attempt never got its run started: start it now under its id.
                run_id = first;
            }
        }
        let permit = self.permit()?;

        let span = run_span(&agent, &request, &run_id, parent.as_ref(), &[]);
        let trace = telemetry::run_trace_ids(&span, parent.as_ref());
        // One copy of the request: the record (until the first checkpoint) and the state share it.
        let request = Arc::new(request);
        let record = RunRecord::start(
            &run_id,
            &request,
            fingerprint,
            (&self.replica, millis(self.limits.lease)),
            trace.clone(),
            now_ms(),
        );
        let (state, tasks, written) = self.start_record(&agent, request, &record).await?;
        let version = match written {
            Cas::Written(v) => v,
            Cas::Conflict(_) if state.request.idempotency_key.is_some() => {
                // An identical request won the race to start it: follow that run (when it is
                // this tenant's: a run id another tenant chose is merely taken).
                self.check_run_tenant(&state.request.tenant, &run_id)
                    .await?;
                return Ok((self.observe(&run_id, 0).await?, trace));
            }
            Cas::Conflict(_) => {
                return Err(RunError::AlreadyExists(format!(
                    "run_id {run_id:?} is already used"
                )));
            }
        };
        let stream = self.spawn(Launch {
            agent,
            state,
            tasks,
            record,
            version,
            permit,
            span,
            trace: trace.clone(),
            entry: Entry::Start,
            hooks,
        });
        Ok((stream, trace))
    }

    /// A run slot on this replica, or RESOURCE_EXHAUSTED when every one is taken.
    fn permit(&self) -> Result<OwnedSemaphorePermit, RunError> {
        self.permits.clone().try_acquire_owned().map_err(|_| {
            RunError::Exhausted("too many runs in progress on this server; retry later".into())
        })
    }

    /// Writes chunks for a run nothing executes (a suspended one) after `after` in its log,
    /// in the places the record reserved for them; returns once they are stored.
    async fn append_to_log(&self, run_id: &str, after: u64, events: Vec<Event>) {
        let (mut em, flush) = Emitter::new(
            self.deps.store.clone(),
            run_id.to_owned(),
            after,
            None,
            self.log_limits(),
        );
        for event in events {
            em.emit(event).await;
        }
        drop(em);
        flush.wait().await;
    }

    /// Runs a launch in the background, streaming to the returned client stream.
    fn spawn(self: &Arc<Self>, launch: Launch) -> ChunkStream {
        self.spawn_with(launch, CancellationToken::new())
    }

    /// [`Runtime::spawn`], stopped when `cancel` is (a sub-agent's run: its supervisor's).
    fn spawn_with(self: &Arc<Self>, launch: Launch, cancel: CancellationToken) -> ChunkStream {
        let (tx, rx) = futures::channel::mpsc::channel(CLIENT_BUFFER);
        let on_disconnect = launch.state.request.on_disconnect;
        let run_id = launch.record.run_id.clone();
        let registered = self.live.register(&run_id, cancel.clone());
        let span = launch.span.clone();
        let this = self.clone();
        tokio::spawn(
            this.execute(Box::new(launch), Some(tx), cancel, registered)
                .instrument(span),
        );
        ClientStream {
            inner: rx,
            _active: telemetry::metrics().stream_opened(),
            on_disconnect,
            live: self.live.clone(),
            run_id,
            finished: false,
        }
        .boxed()
    }

    /// Everything a run's task needs before its first await, built from its launch.
    fn prepare(
        self: &Arc<Self>,
        launch: Box<Launch>,
        client: Option<ClientSender>,
        cancel: CancellationToken,
        reason: Arc<Mutex<Option<String>>>,
    ) -> Prepared {
        let Launch {
            agent,
            mut state,
            tasks,
            record,
            version,
            permit,
            span: _,
            trace,
            entry,
            hooks,
        } = *launch;
        let started = std::time::Instant::now();
        let run_id = record.run_id.clone();
        let (em, flush) = Emitter::new(
            self.deps.store.clone(),
            run_id.clone(),
            record.last_sequence,
            client,
            self.log_limits(),
        );
        let agent_id = record.agent_id.clone();
        // The lease is renewed while the run executes; checkpoints go through the same handle.
        let handle = lease::RecordHandle::new(record, version);
        // Renewing stops when the guard goes, at the run's end or if its task unwinds; a
        // renewal that comes after the end finds it recorded and writes nothing.
        let renewing = self
            .leases
            .enter(&run_id, handle.clone(), cancel.clone(), reason.clone());
        let checkpoint = Arc::new(lease::RecordCheckpoint {
            runtime: self.clone(),
            handle: handle.clone(),
        });
        let structurer = state
            .request
            .structured_output
            .as_ref()
            .and_then(|o| o.model.as_deref())
            .and_then(|m| self.agents.model(m));
        if let Some(client) = &hooks {
            state.client_hooks = Some(client.binding().clone());
        }
        let memory = state.request.memory.as_ref();
        let meta = HookMeta {
            run_id: run_id.clone(),
            agent_id: agent.config.id.clone(),
            thread_id: memory.map(|m| m.thread_id.clone()).unwrap_or_default(),
            resource_id: memory.map(|m| m.resource_id.clone()).unwrap_or_default(),
        };
        let hooks = RunHooks::resolve(
            &agent.config,
            &agent.webhooks,
            hooks,
            state.client_hooks.as_ref(),
            self.limits.hook_deadline,
            meta,
        );
        let has_sub_agents = !agent.sub_agents.is_empty();
        // A sub-agent's run continued after decisions hands its end to its waiting supervisor.
        let parent = match entry {
            Entry::Resume | Entry::Checkpoint => state.request.parent.clone(),
            Entry::Start => None,
        };
        let runner = Runner::new(
            run_id.clone(),
            agent,
            state,
            tasks,
            self.deps.clone(),
            cancel,
            reason,
        )
        .with_structurer(structurer)
        .with_agents(self.agents.clone())
        .with_hooks(hooks)
        .with_checkpoint(checkpoint)
        .with_trace_id(trace.0.clone());
        // Only supervisors pay for delegation.
        let runner = if has_sub_agents {
            runner.with_delegator(Arc::new(delegate::ChildRuns {
                runtime: self.clone(),
            }))
        } else {
            runner
        };
        Prepared {
            runner,
            entry,
            em,
            flush,
            handle,
            renewing,
            trace,
            parent,
            permit,
            started,
            run_id,
            agent_id,
        }
    }

    async fn execute(
        self: Arc<Self>,
        launch: Box<Launch>,
        client: Option<ClientSender>,
        cancel: CancellationToken,
        registered: Registered,
    ) {
        let reason = registered.reason().clone();
        // Set up outside the future: only what crosses an await below is kept for the run's
        // whole life (an idle stream's memory), and the launch's box is freed at once.
        let Prepared {
            runner,
            entry,
            mut em,
            flush,
            handle,
            renewing,
            trace,
            parent,
            permit,
            started,
            run_id,
            agent_id,
        } = self.prepare(launch, client, cancel, reason);
        // Boxed, as the tail below: a run's task holds only what the step it waits in needs
        // (an idle stream's memory is mostly this future).
        let outcome = match entry {
            Entry::Start => Box::pin(runner.start(&mut em)).await,
            Entry::Resume => Box::pin(runner.resume(&mut em)).await,
            Entry::Checkpoint => Box::pin(runner.continue_open(&mut em)).await,
        };
        Box::pin(async move {
            let RunOutcome {
                mut result,
                suspended,
                answered_runs,
                ended,
            } = outcome;
            (result.trace_id, result.span_id) = trace;
            let finish_reason =
                super::wire::run_finish_name(super::wire::run_finish_reason(result.end));
            telemetry::metrics().run_finished(&agent_id, finish_reason);
            let steps = result.steps.len();
            drop(renewing);
            // Record first, then emit `finish`: a client that reacts to it (Approve, Abort, a new
            // turn) must find the run in its final state. Retried until it lands. A run that
            // saved its last messages recorded its end with them.
            let (end, last, approval_ttl) = (
                result.end,
                em.sequence() + 1,
                millis(self.limits.approval_ttl),
            );
            if !ended {
                self.write_end(&handle, |r| {
                    r.end(end, suspended.clone(), last, now_ms(), approval_ttl);
                })
                .await;
            }
            let record = handle.record().await;
            debug_assert!(
                record.status == RunStatus::Running || record.last_sequence == last,
                "the recorded end names the finish chunk"
            );
            if record.status == RunStatus::Suspended {
                self.index_pending(&record, true).await;
            }
            for answered in &answered_runs {
                let why = format!("Answered by run {run_id} (auto-resume)");
                if let Err(e) = self.end_suspended(answered, &why).await {
                    warn!(run_id = %answered, error = %e, "could not end a run answered by auto-resume");
                }
            }
            let handoff = parent
                .filter(|_| record.status != RunStatus::Suspended)
                .map(|link| {
                    let end = SubRunEnd::from_finish(&run_id, &super::wire::generate_result(&result));
                    (link, end)
                });
            em.emit(Event::Finish(Box::new(result))).await;
            if record.status != RunStatus::Suspended {
                em.complete();
            }
            drop(registered);
            let client = if handoff.is_some() {
                em.take_client()
            } else {
                None
            };
            drop(em);
            flush.wait().await;
            drop(permit);
            if let Some((link, end)) = handoff {
                self.hand_off(&link, end, client).await;
            }
            info!(
                run_id = %run_id,
                agent = %record.agent_id,
                finish_reason = %finish_reason,
                steps,
                duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                "run ended"
            );
        })
        .await;
    }

    /// Waits until no run executes here (each holds a permit until its log is flushed).
    pub async fn drain(&self) {
        let all = u32::try_from(self.limits.max_concurrent_runs).unwrap_or(u32::MAX);
        // The semaphore is never closed, so this only returns once every permit is back.
        let _ = self.permits.acquire_many(all).await;
        // Then the scoring the finished runs left running.
        self.deps.scoring.close();
        self.deps.scoring.wait().await;
    }

    /// Aborts every run executing here (at the end of a shutdown's grace period).
    pub fn abort_all(&self, why: &str) {
        for run_id in self.live.ids() {
            self.cancel_local(&run_id, why);
        }
    }
}

/// A run's trace id and span id (hex; empty when not traced).
pub type TraceIds = (String, String);

/// The `agent.run` span of a run.
fn run_span(
    agent: &AgentDef,
    request: &RunRequest,
    run_id: &str,
    parent: Option<&opentelemetry::Context>,
    links: &[opentelemetry::trace::SpanContext],
) -> tracing::Span {
    let memory = request.memory.as_ref();
    let attrs = telemetry::RunSpanAttrs {
        agent_id: &agent.config.id,
        run_id,
        thread_id: memory.map_or("", |m| m.thread_id.as_str()),
        resource_id: memory.map_or("", |m| m.resource_id.as_str()),
        tags: &request.tracing.tags,
        metadata: Some(&request.tracing.metadata),
        request_context: Some(&request.request_context),
        request_context_keys: &request.tracing.request_context_keys,
    };
    telemetry::run_span(&attrs, parent, links)
}

/// The links of a run's continuation (after a decision, or on the replica taking it over) to
/// the run's first span.
fn continuation_links(record: &RunRecord) -> Vec<opentelemetry::trace::SpanContext> {
    record
        .trace
        .as_ref()
        .and_then(|(trace, span)| telemetry::remote_span_context(trace, span))
        .into_iter()
        .collect()
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
