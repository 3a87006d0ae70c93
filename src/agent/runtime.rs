//! Starts, observes, aborts and continues runs, on any replica: run records and chunk logs live
//! in the store, aborts travel over the store's control channel, decisions are compare-and-set
//! on the run record so exactly one of racing deciders wins.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{BoxStream, Stream, StreamExt};
use prost::Message as _;
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::Status;
use tracing::{Instrument, debug, warn};

use super::emit::{ClientSender, Emitter};
use super::message::{self, Message, new_id, now_ms};
use super::request::{OnDisconnect, RunRequest};
use super::run::{RunDeps, RunOutcome, Runner, offered_tools, suspension};
use super::state::{Decision, PendingKind, RunRecord, RunState, RunStatus};
use super::structured;
use super::{AgentDef, Agents};
use crate::pb;
use crate::pb::chunk::Payload;
use crate::store::{Cas, LogLimits, StoreError, ThreadKey, Versioned};
use crate::tasklist::{TASKS_DOC, TaskList};
use crate::telemetry;

/// Control channel every replica listens on (aborts name their run inside the message).
const CONTROL_CHANNEL: &str = "_all";

/// Idempotency keys are remembered this long.
const IDEMPOTENCY_TTL: Duration = Duration::from_secs(24 * 3600);

/// Buffered chunks per client stream (backpressure beyond it).
const CLIENT_BUFFER: usize = 256;

/// Why a call could not start, continue or find a run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Unknown agent, run or tool call.
    #[error("{0}")]
    NotFound(String),
    /// Bad options; each entry names a field.
    #[error("invalid request")]
    Invalid(Vec<(String, String)>),
    /// The run id or idempotency key is taken.
    #[error("{0}")]
    AlreadyExists(String),
    /// Too many runs at once.
    #[error("{0}")]
    Exhausted(String),
    /// The run is not in a state that allows this (already decided, expired, finished).
    #[error("{0}")]
    FailedPrecondition(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A run's chunks, as a client stream.
pub type ChunkStream = BoxStream<'static, Result<pb::Chunk, Status>>;

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
    /// Continue a suspended run rather than start one.
    resuming: bool,
}

struct LiveRun {
    cancel: CancellationToken,
    reason: Arc<Mutex<Option<String>>>,
}

/// The run manager of one replica.
pub struct Runtime {
    deps: RunDeps,
    agents: Arc<Agents>,
    live: Mutex<HashMap<String, LiveRun>>,
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
            live: Mutex::new(HashMap::new()),
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
    ) -> Result<(ChunkStream, TraceIds), RunError> {
        let agent = self.agents.get(&request.agent_id).ok_or_else(|| {
            RunError::NotFound(format!("agent {:?} is not configured", request.agent_id))
        })?;
        validate_against_agent(&agent, &request)?;
        if request.auto_resume_suspended_tools
            && let Some((run_id, call_id)) = self.waiting_client_call(&request).await?
        {
            // The new message answers the client tool the thread's run waits for.
            let answer = request.input.last().map(Message::text).unwrap_or_default();
            let trace = parent
                .as_ref()
                .map(|p| telemetry::run_trace_ids(&tracing::Span::none(), Some(p)))
                .unwrap_or_default();
            let stream = self
                .decide(
                    &run_id,
                    &call_id,
                    Decision::Resumed(Value::String(answer)),
                    request.on_disconnect,
                    parent,
                )
                .await?;
            return Ok((stream, trace));
        }
        let fingerprint = request.fingerprint();
        let mut run_id = request.run_id.clone().unwrap_or_else(new_id);
        if let Some(key) = &request.idempotency_key {
            let claim = json!({"run_id": run_id, "fingerprint": fingerprint}).to_string();
            if let Some(existing) = self
                .deps
                .store
                .claim_key(
                    &format!("idempotency:{key}"),
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
                    let trace = decode_record(&doc)?.trace.unwrap_or_default();
                    return Ok((self.observe(&first, 0).await?, trace));
                }
                // The first attempt never got its run started: start it now under its id.
                run_id = first;
            }
        }
        let permit = self.permits.clone().try_acquire_owned().map_err(|_| {
            RunError::Exhausted("too many runs in progress on this server; retry later".into())
        })?;

        let (history, tasks, thread_existed) = self.load_memory(&request).await?;
        let span = run_span(&agent, &request, &run_id, parent.as_ref(), &[]);
        let trace = telemetry::run_trace_ids(&span, parent.as_ref());
        let record = RunRecord {
            run_id: run_id.clone(),
            agent_id: agent.config.id.clone(),
            status: RunStatus::Running,
            thread_id: request
                .memory
                .as_ref()
                .map(|m| m.thread_id.clone())
                .unwrap_or_default(),
            resource_id: request
                .memory
                .as_ref()
                .map(|m| m.resource_id.clone())
                .unwrap_or_default(),
            fingerprint,
            owner: self.replica.clone(),
            created_at_ms: now_ms(),
            updated_at_ms: now_ms(),
            last_sequence: 0,
            finish_reason: None,
            state: None,
            expires_at_ms: None,
            trace: Some(trace.clone()),
        };
        let version = match self.write_record(&run_id, 0, &record).await? {
            Cas::Written(v) => v,
            Cas::Conflict(_) if request.idempotency_key.is_some() => {
                // An identical request won the race to start it: follow that run.
                return Ok((self.observe(&run_id, 0).await?, trace));
            }
            Cas::Conflict(_) => {
                return Err(RunError::AlreadyExists(format!(
                    "run_id {run_id:?} is already used"
                )));
            }
        };
        let title_pending = !thread_existed
            && request
                .memory
                .as_ref()
                .is_some_and(|m| m.generate_title && !m.read_only);
        let state = RunState {
            request,
            history,
            response: Vec::new(),
            saved: 0,
            thread_existed,
            title_pending,
            steps: Vec::new(),
            warnings: Vec::new(),
            open_step: None,
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
            resuming: false,
        });
        Ok((stream, trace))
    }

    /// The oldest suspended run of the request's thread waiting for a client tool result (never
    /// an approval), with that call's id.
    async fn waiting_client_call(
        &self,
        request: &RunRequest,
    ) -> Result<Option<(String, String)>, RunError> {
        let Some(memory) = &request.memory else {
            return Ok(None);
        };
        let runs = self
            .pending(Some(&memory.thread_id), Some(&memory.resource_id), None)
            .await?;
        Ok(runs.into_iter().find_map(|run| {
            run.pending
                .iter()
                .find(|p| p.kind() == pb::SuspensionKind::ClientTool)
                .map(|p| (run.run_id.clone(), p.tool_call_id.clone()))
        }))
    }

    /// Reads the thread's history and task list (one round trip), checking ownership.
    async fn load_memory(
        &self,
        request: &RunRequest,
    ) -> Result<(Vec<Message>, TaskList, bool), RunError> {
        let Some(memory) = &request.memory else {
            return Ok((Vec::new(), TaskList::default(), false));
        };
        let key = ThreadKey {
            thread_id: memory.thread_id.clone(),
            resource_id: memory.resource_id.clone(),
        };
        let view = self
            .deps
            .store
            .load_thread(&key, memory.last_messages, &[TASKS_DOC])
            .await?;
        let mut history = Vec::with_capacity(view.messages.len());
        for raw in &view.messages {
            match serde_json::from_slice::<Message>(raw) {
                Ok(m) => history.push(m),
                Err(e) => {
                    warn!(thread = %key.thread_id, error = %e, "skipping an unreadable stored message")
                }
            }
        }
        let tasks = TaskList::decode(view.docs.first().and_then(Option::as_ref))?;
        Ok((message::sanitize_history(history), tasks, view.exists))
    }

    async fn write_record(
        &self,
        run_id: &str,
        expected: u64,
        record: &RunRecord,
    ) -> Result<Cas, StoreError> {
        let bytes = serde_json::to_vec(record)
            .map_err(|e| StoreError::Corrupt(format!("run record: {e}")))?;
        let ttl = match record.expires_at_ms {
            Some(expires) => {
                Duration::from_millis(u64::try_from(expires - now_ms()).unwrap_or(0))
                    + self.limits.retention
            }
            None => self.limits.retention,
        };
        self.deps
            .store
            .cas_run(run_id, expected, Bytes::from(bytes), ttl)
            .await
    }

    /// Runs a launch in the background, streaming to the returned client stream.
    fn spawn(self: &Arc<Self>, launch: Launch) -> ChunkStream {
        let (tx, rx) = mpsc::channel(CLIENT_BUFFER);
        let cancel = CancellationToken::new();
        let reason = Arc::new(Mutex::new(None));
        let on_disconnect = launch.state.request.on_disconnect;
        let run_id = launch.record.run_id.clone();
        self.register(&run_id, cancel.clone(), reason.clone());
        let span = launch.span.clone();
        let this = self.clone();
        tokio::spawn(this.execute(launch, tx, cancel, reason).instrument(span));
        ClientStream {
            inner: ReceiverStream::new(rx),
            _active: telemetry::metrics().stream_opened(),
            on_disconnect,
            runtime: self.clone(),
            run_id,
            finished: false,
        }
        .boxed()
    }

    async fn execute(
        self: Arc<Self>,
        launch: Launch,
        client: ClientSender,
        cancel: CancellationToken,
        reason: Arc<Mutex<Option<String>>>,
    ) {
        let Launch {
            agent,
            state,
            tasks,
            mut record,
            version,
            permit,
            span: _,
            trace,
            resuming,
        } = launch;
        let run_id = record.run_id.clone();
        let (mut em, flush) = Emitter::new(
            self.deps.store.clone(),
            run_id.clone(),
            record.last_sequence,
            Some(client),
            self.log_limits(),
        );
        let runner = Runner::new(
            run_id.clone(),
            agent,
            state,
            tasks,
            self.deps.clone(),
            cancel,
            reason,
        );
        let RunOutcome {
            mut result,
            suspended,
        } = if resuming {
            runner.resume(&mut em).await
        } else {
            runner.start(&mut em).await
        };
        (result.trace_id, result.span_id) = trace;
        telemetry::metrics().run_finished(
            &record.agent_id,
            super::wire::run_finish_name(result.finish_reason()),
        );
        // Record first, then emit `finish`: a client that reacts to it (Approve, Abort, a new
        // turn) must find the run in its final state.
        record.last_sequence = em.sequence() + 1;
        record.updated_at_ms = now_ms();
        record.finish_reason = super::wire::finish_reason_from(result.finish_reason());
        match suspended {
            Some(state) => {
                record.status = RunStatus::Suspended;
                record.expires_at_ms = Some(now_ms() + millis(self.limits.approval_ttl));
                record.state = Some(state);
            }
            None => {
                record.status = RunStatus::Finished;
                record.state = None;
                record.expires_at_ms = None;
            }
        }
        // Only the executing replica writes a running run's record, so a conflict is a bug.
        match self.write_record(&run_id, version, &record).await {
            Ok(Cas::Written(_)) => {}
            Ok(Cas::Conflict(_)) => warn!(run_id, "run record changed under its owner"),
            Err(e) => {
                telemetry::metrics().store_error("run_record");
                warn!(run_id, error = %e, "could not record the run's end");
            }
        }
        if record.status == RunStatus::Suspended {
            self.index_pending(&record, true).await;
        }
        em.emit(Payload::Finish(result)).await;
        self.deregister(&run_id);
        drop(em);
        flush.wait().await;
        drop(permit);
        debug!(run_id, status = ?record.status, "run ended");
    }

    fn register(
        &self,
        run_id: &str,
        cancel: CancellationToken,
        reason: Arc<Mutex<Option<String>>>,
    ) {
        if let Ok(mut live) = self.live.lock() {
            live.insert(run_id.to_owned(), LiveRun { cancel, reason });
        }
    }

    fn deregister(&self, run_id: &str) {
        if let Ok(mut live) = self.live.lock() {
            live.remove(run_id);
        }
    }

    /// Waits until no run executes here (each holds a permit until its log is flushed).
    pub async fn drain(&self) {
        let all = u32::try_from(self.limits.max_concurrent_runs).unwrap_or(u32::MAX);
        // The semaphore is never closed, so this only returns once every permit is back.
        let _ = self.permits.acquire_many(all).await;
    }

    /// Aborts every run executing here (at the end of a shutdown's grace period).
    pub fn abort_all(&self, why: &str) {
        let running: Vec<String> = self
            .live
            .lock()
            .map(|live| live.keys().cloned().collect())
            .unwrap_or_default();
        for run_id in running {
            self.cancel_local(&run_id, why);
        }
    }

    /// Stops a local run; false when it does not run here.
    fn cancel_local(&self, run_id: &str, why: &str) -> bool {
        let Ok(live) = self.live.lock() else {
            return false;
        };
        let Some(run) = live.get(run_id) else {
            return false;
        };
        if let Ok(mut reason) = run.reason.lock() {
            reason.get_or_insert_with(|| why.to_owned());
        }
        run.cancel.cancel();
        true
    }

    /// Re-attaches to a run: replays its logged chunks after `after`, then follows it live.
    pub async fn observe(&self, run_id: &str, after: u64) -> Result<ChunkStream, RunError> {
        // Subscribe before reading so that nothing appended in between is missed.
        let live = self.deps.store.follow_chunks(run_id).await?;
        let backlog = self.deps.store.read_chunks(run_id, after).await?;
        if backlog.is_empty() && self.deps.store.get_run(run_id).await?.is_none() {
            return Err(RunError::NotFound(format!(
                "run {run_id:?} is unknown or expired"
            )));
        }
        let mut chunks = Vec::with_capacity(backlog.len());
        for (_, bytes) in &backlog {
            chunks.push(decode_chunk(bytes)?);
        }
        // The log ends where the run ended (or suspended); the last finish closes the stream.
        if let Some(end) = chunks.iter().rposition(is_finish)
            && end + 1 == chunks.len()
        {
            return Ok(futures::stream::iter(chunks.into_iter().map(Ok)).boxed());
        }
        let last = chunks.last().map_or(after, |c| c.sequence);
        let replay = futures::stream::iter(chunks.into_iter().map(Ok));
        // Follow live entries, skipping what the backlog had, and end right after `finish`.
        let follow = futures::stream::unfold(
            (live, last, false),
            |(mut live, mut last, done)| async move {
                if done {
                    return None;
                }
                loop {
                    match live.next().await? {
                        Ok((sequence, _)) if sequence <= last => {}
                        Ok((sequence, bytes)) => {
                            last = sequence;
                            let item = decode_chunk(&bytes).map_err(Status::from);
                            let done = item.as_ref().map_or(true, is_finish);
                            return Some((item, (live, last, done)));
                        }
                        Err(e) => return Some((Err(Status::from(e)), (live, last, true))),
                    }
                }
            },
        );
        Ok(replay.chain(follow).boxed())
    }

    /// Stops a run from any replica; false when it had already ended.
    pub async fn abort(&self, run_id: &str, reason: &str) -> Result<bool, RunError> {
        let why = if reason.is_empty() {
            "Aborted by request"
        } else {
            reason
        };
        let Some(doc) = self.deps.store.get_run(run_id).await? else {
            return Err(RunError::NotFound(format!(
                "run {run_id:?} is unknown or expired"
            )));
        };
        let record = decode_record(&doc)?;
        match record.status {
            RunStatus::Finished => Ok(false),
            RunStatus::Running => {
                if !self.cancel_local(run_id, why) {
                    let message = json!({"run_id": run_id, "reason": why}).to_string();
                    self.deps
                        .store
                        .publish_control(CONTROL_CHANNEL, Bytes::from(message))
                        .await?;
                }
                Ok(true)
            }
            RunStatus::Suspended => self.abort_suspended(doc, record, why).await,
        }
    }

    /// A suspended run has no executor to stop: end it in the store and in its log.
    async fn abort_suspended(
        &self,
        doc: Versioned,
        mut record: RunRecord,
        why: &str,
    ) -> Result<bool, RunError> {
        let first_sequence = record.last_sequence;
        record.status = RunStatus::Finished;
        record.state = None;
        record.expires_at_ms = None;
        record.last_sequence += 2;
        record.updated_at_ms = now_ms();
        match self
            .write_record(&record.run_id, doc.version, &record)
            .await?
        {
            Cas::Written(_) => {}
            // Decided or aborted meanwhile: whatever happened, it is no longer suspended here.
            Cas::Conflict(_) => return Ok(false),
        }
        self.index_pending(&record, false).await;
        let (mut em, flush) = Emitter::new(
            self.deps.store.clone(),
            record.run_id.clone(),
            first_sequence,
            None,
            self.log_limits(),
        );
        em.emit(Payload::Abort(pb::AbortChunk {
            reason: why.to_owned(),
        }))
        .await;
        let result = pb::GenerateResult {
            run_id: record.run_id.clone(),
            finish_reason: pb::FinishReason::Aborted.into(),
            ..Default::default()
        };
        em.emit(Payload::Finish(result)).await;
        drop(em);
        flush.wait().await;
        Ok(true)
    }

    /// Listens for aborts sent by other replicas until `shutdown`; reconnects on errors.
    pub async fn listen_for_aborts(self: Arc<Self>, shutdown: CancellationToken) {
        while !shutdown.is_cancelled() {
            match self.deps.store.subscribe_control(CONTROL_CHANNEL).await {
                Ok(mut messages) => loop {
                    let next = tokio::select! {
                        () = shutdown.cancelled() => return,
                        next = messages.next() => next,
                    };
                    match next {
                        Some(Ok(bytes)) => {
                            let message: Value =
                                serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                            if let Some(run_id) = message["run_id"].as_str() {
                                let why =
                                    message["reason"].as_str().unwrap_or("Aborted by request");
                                self.cancel_local(run_id, why);
                            }
                        }
                        Some(Err(e)) => {
                            warn!(error = %e, "abort channel failed; resubscribing");
                            break;
                        }
                        None => break,
                    }
                },
                Err(e) => warn!(error = %e, "cannot subscribe to the abort channel; retrying"),
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    }

    /// Records a decision on a suspended call. When it was the last one, the run continues here
    /// and the stream carries the rest of it; otherwise the stream reports what still waits.
    pub async fn decide(
        self: &Arc<Self>,
        run_id: &str,
        call_id: &str,
        decision: Decision,
        on_disconnect: OnDisconnect,
        parent: Option<opentelemetry::Context>,
    ) -> Result<ChunkStream, RunError> {
        loop {
            let Some(doc) = self.deps.store.get_run(run_id).await? else {
                return Err(RunError::NotFound(format!(
                    "run {run_id:?} is unknown or expired"
                )));
            };
            let mut record = decode_record(&doc)?;
            let not_waiting = || {
                RunError::FailedPrecondition(format!(
                    "tool call {call_id:?} of run {run_id:?} is not awaiting a decision (already decided, or the run is not suspended)"
                ))
            };
            if record.status != RunStatus::Suspended {
                return Err(not_waiting());
            }
            if let Some(expires) = record.expires_at_ms
                && now_ms() > expires
            {
                return Err(RunError::FailedPrecondition(format!(
                    "the decision on run {run_id:?} expired at {}",
                    super::wire::timestamp(expires).seconds
                )));
            }
            let Some(state) = record.state.as_mut() else {
                return Err(not_waiting());
            };
            let Some(open) = state.open_step.as_mut() else {
                return Err(not_waiting());
            };
            let Some(pending) = open.pending.iter_mut().find(|p| p.call.id == call_id) else {
                return Err(RunError::NotFound(format!(
                    "run {run_id:?} has no tool call {call_id:?} awaiting a decision"
                )));
            };
            if pending.decision.is_some() {
                return Err(not_waiting());
            }
            pending.decision = Some(match (pending.kind, decision.clone()) {
                (PendingKind::ClientTool, Decision::Approved | Decision::Declined(_)) => {
                    return Err(RunError::FailedPrecondition(format!(
                        "tool call {call_id:?} is a client tool: answer it with Resume"
                    )));
                }
                (PendingKind::Approval, Decision::Resumed(data)) => approval_from_data(&data)?,
                (_, decision) => decision,
            });
            let all_decided = open.pending.iter().all(|p| p.decision.is_some());
            let next = open
                .pending
                .iter()
                .find(|p| p.decision.is_none())
                .map(suspension);
            state.request.on_disconnect = on_disconnect;
            record.updated_at_ms = now_ms();
            let first_sequence = record.last_sequence;
            if all_decided {
                record.status = RunStatus::Running;
                record.owner = self.replica.clone();
                record.expires_at_ms = None;
            } else {
                record.last_sequence += 1;
            }
            let permit = if all_decided {
                Some(self.permits.clone().try_acquire_owned().map_err(|_| {
                    RunError::Exhausted(
                        "too many runs in progress on this server; retry later".into(),
                    )
                })?)
            } else {
                None
            };
            // Everything the continuation needs is read before the decision is written, so a
            // failure here leaves the run suspended rather than stuck "running".
            let resumed = match permit {
                Some(permit) => Some((permit, self.continuation_inputs(&record).await?)),
                None => None,
            };
            let version = match self.write_record(run_id, doc.version, &record).await? {
                Cas::Written(v) => v,
                Cas::Conflict(_) => continue,
            };
            if let Some((permit, (agent, tasks))) = resumed {
                self.index_pending(&record, false).await;
                let Some(mut state) = record.state.take() else {
                    return Err(not_waiting());
                };
                state.request.on_disconnect = on_disconnect;
                record.state = None;
                // The continuation joins the decider's trace and links to the original run.
                let links: Vec<_> = record
                    .trace
                    .as_ref()
                    .and_then(|(trace, span)| telemetry::remote_span_context(trace, span))
                    .into_iter()
                    .collect();
                let span = run_span(&agent, &state.request, run_id, parent.as_ref(), &links);
                let trace = telemetry::run_trace_ids(&span, parent.as_ref());
                return Ok(self.spawn(Launch {
                    agent,
                    state,
                    tasks,
                    record,
                    version,
                    permit,
                    span,
                    trace,
                    resuming: true,
                }));
            }
            // Others still wait: tell this caller (and the log) what the run waits for now.
            let mut result = pb::GenerateResult {
                run_id: run_id.to_owned(),
                finish_reason: pb::FinishReason::Suspended.into(),
                suspend_payload: next,
                ..Default::default()
            };
            result.run_id = run_id.to_owned();
            let (mut em, flush) = Emitter::new(
                self.deps.store.clone(),
                run_id.to_owned(),
                first_sequence,
                None,
                self.log_limits(),
            );
            em.emit(Payload::Finish(result)).await;
            drop(em);
            flush.wait().await;
            return self.observe(run_id, first_sequence).await;
        }
    }

    /// The agent and current task list a suspended run continues with.
    async fn continuation_inputs(
        &self,
        record: &RunRecord,
    ) -> Result<(Arc<AgentDef>, TaskList), RunError> {
        let agent = self.agents.get(&record.agent_id).ok_or_else(|| {
            RunError::FailedPrecondition(format!(
                "agent {:?} of run {:?} is no longer configured",
                record.agent_id, record.run_id
            ))
        })?;
        let memory = record
            .state
            .as_ref()
            .and_then(|s| s.request.memory.as_ref());
        let tasks = match memory {
            Some(m) => {
                self.deps
                    .lists
                    .load(&ThreadKey {
                        thread_id: m.thread_id.clone(),
                        resource_id: m.resource_id.clone(),
                    })
                    .await?
            }
            None => TaskList::default(),
        };
        Ok((agent, tasks))
    }

    /// Lists suspended runs matching the filter, oldest first.
    pub async fn pending(
        &self,
        thread_id: Option<&str>,
        resource_id: Option<&str>,
        run_id: Option<&str>,
    ) -> Result<Vec<pb::PendingRun>, RunError> {
        let candidates: Vec<String> = match (run_id, thread_id, resource_id) {
            (Some(run), _, _) => vec![run.to_owned()],
            (None, Some(thread), _) => {
                self.deps
                    .store
                    .index_members(&pending_index("thread", thread))
                    .await?
            }
            (None, None, Some(resource)) => {
                self.deps
                    .store
                    .index_members(&pending_index("resource", resource))
                    .await?
            }
            (None, None, None) => {
                return Err(RunError::Invalid(vec![(
                    "thread_id".into(),
                    "one of thread_id, resource_id or run_id is required".into(),
                )]));
            }
        };
        let mut runs = Vec::new();
        for candidate in candidates {
            let Some(doc) = self.deps.store.get_run(&candidate).await? else {
                continue;
            };
            let record = decode_record(&doc)?;
            let matches = record.status == RunStatus::Suspended
                && thread_id.is_none_or(|t| t == record.thread_id)
                && resource_id.is_none_or(|r| r == record.resource_id)
                && record.expires_at_ms.is_none_or(|e| e >= now_ms());
            let Some(open) = record.state.as_ref().and_then(|s| s.open_step.as_ref()) else {
                continue;
            };
            if !matches {
                continue;
            }
            runs.push(pb::PendingRun {
                run_id: record.run_id.clone(),
                agent_id: record.agent_id.clone(),
                thread_id: record.thread_id.clone(),
                resource_id: record.resource_id.clone(),
                suspended_at: Some(super::wire::timestamp(record.updated_at_ms)),
                expires_at: record.expires_at_ms.map(super::wire::timestamp),
                pending: open
                    .pending
                    .iter()
                    .filter(|p| p.decision.is_none())
                    .map(suspension)
                    .collect(),
            });
        }
        runs.sort_by_key(|r| r.suspended_at.map(|t| (t.seconds, t.nanos)));
        Ok(runs)
    }

    async fn index_pending(&self, record: &RunRecord, present: bool) {
        let mut indexes = Vec::new();
        if !record.thread_id.is_empty() {
            indexes.push(pending_index("thread", &record.thread_id));
        }
        if !record.resource_id.is_empty() {
            indexes.push(pending_index("resource", &record.resource_id));
        }
        for index in indexes {
            if let Err(e) = self
                .deps
                .store
                .index_set(&index, &record.run_id, present)
                .await
            {
                warn!(run_id = %record.run_id, error = %e, "could not update the pending index");
            }
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

fn pending_index(kind: &str, id: &str) -> String {
    format!("pending:{kind}:{id}")
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn is_finish(chunk: &pb::Chunk) -> bool {
    matches!(chunk.payload, Some(Payload::Finish(_)))
}

fn decode_chunk(bytes: &Bytes) -> Result<pb::Chunk, RunError> {
    pb::Chunk::decode(bytes.as_ref())
        .map_err(|e| RunError::Store(StoreError::Corrupt(format!("run log chunk: {e}"))))
}

fn decode_record(doc: &Versioned) -> Result<RunRecord, RunError> {
    serde_json::from_slice(&doc.value)
        .map_err(|e| RunError::Store(StoreError::Corrupt(format!("run record: {e}"))))
}

/// An approval answered through Resume: `{approved: boolean, reason?: string}`.
fn approval_from_data(data: &Value) -> Result<Decision, RunError> {
    match data.get("approved").and_then(Value::as_bool) {
        Some(true) => Ok(Decision::Approved),
        Some(false) => Ok(Decision::Declined(
            data.get("reason")
                .and_then(Value::as_str)
                .filter(|r| !r.is_empty())
                .unwrap_or(super::run::DECLINED_TEXT)
                .to_owned(),
        )),
        None => Err(RunError::Invalid(vec![(
            "data.approved".into(),
            "an approval needs {\"approved\": boolean, \"reason\"?: string}".into(),
        )])),
    }
}

/// Checks a request against its agent: tool names, tool choice, client tools, schema.
fn validate_against_agent(agent: &AgentDef, request: &RunRequest) -> Result<(), RunError> {
    let mut violations = Vec::new();
    let known: Vec<&str> = agent
        .tools
        .iter()
        .map(|t| t.name.as_str())
        .chain(request.client_tools.iter().map(|t| t.name.as_str()))
        .collect();
    for (i, tool) in request.client_tools.iter().enumerate() {
        if agent.tools.iter().any(|t| t.name == tool.name) {
            violations.push((
                format!("client_tools.{i}.name"),
                format!(
                    "{:?} is already a tool of agent {:?}",
                    tool.name, agent.config.id
                ),
            ));
        }
    }
    for (i, name) in request.active_tools.iter().enumerate() {
        if !known.contains(&name.as_str()) {
            violations.push((
                format!("active_tools.{i}"),
                format!("unknown tool {name:?} (known: {})", known.join(", ")),
            ));
        }
    }
    if let Some(crate::model::ToolChoice::Tool(name)) = &request.tool_choice {
        let offered = offered_tools(agent, request);
        if !offered.iter().any(|t| &t.name == name) {
            violations.push((
                "tool_choice.tool_name".into(),
                format!("{name:?} is not among the tools offered to the model"),
            ));
        }
    }
    if let Some(output) = &request.structured_output
        && let Err(e) = structured::compile(&output.schema)
    {
        violations.push(("structured_output.schema".into(), e));
    }
    if violations.is_empty() {
        Ok(())
    } else {
        Err(RunError::Invalid(violations))
    }
}

/// A client's view of a run: when it goes away with `on_disconnect = ABORT`, the run stops.
struct ClientStream {
    inner: ReceiverStream<Result<pb::Chunk, Status>>,
    _active: telemetry::ActiveStream,
    on_disconnect: OnDisconnect,
    runtime: Arc<Runtime>,
    run_id: String,
    finished: bool,
}

impl Stream for ClientStream {
    type Item = Result<pb::Chunk, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = Pin::new(&mut self.inner).poll_next(cx);
        match &polled {
            Poll::Ready(Some(Ok(chunk))) if is_finish(chunk) => self.finished = true,
            Poll::Ready(None) => self.finished = true,
            _ => {}
        }
        polled
    }
}

impl Drop for ClientStream {
    fn drop(&mut self) {
        if self.finished || self.on_disconnect != OnDisconnect::Abort {
            return;
        }
        self.runtime
            .cancel_local(&self.run_id, "The client disconnected");
    }
}
