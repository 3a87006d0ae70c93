//! A run's hooks: which handler answers each hook kind (the request's client, else the agent's
//! webhooks, as the reference lets run-level hooks override matching agent-level ones), the
//! deadline and failure policy of each call, and its span and metrics. The handlers' transports
//! are `hooks/client.rs` (the GenerateWithHooks stream) and `hooks/webhook.rs` (HTTP, in the
//! proto's JSON mapping of `hooks/json.rs`). What each answer does to the run is the loop's
//! business (`run/hooks.rs`).

pub mod client;
pub mod json;
pub mod webhook;

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tracing::Instrument;

use super::error::RunFailure;
use crate::config::{AgentConfig, OnHookFailure};
use crate::pb;
use crate::pb::hook_answer::Answer;
use crate::pb::hook_call::Context;
use crate::telemetry;

pub use client::ClientHooks;

/// Why a hook gave no answer.
#[derive(Clone, Debug, PartialEq)]
pub enum HookFault {
    /// The deadline passed.
    Timeout,
    /// The client that handles it went away (or a continuation has no handler attached).
    Gone,
    /// The transport failed (a webhook's status, body or connection).
    Failed(String),
}

impl HookFault {
    fn outcome(&self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Gone => "gone",
            Self::Failed(_) => "failed",
        }
    }

    fn describe(&self, kind: &str, deadline: Duration) -> String {
        match self {
            Self::Timeout => format!(
                "the {kind} hook did not answer within {} ms",
                deadline.as_millis()
            ),
            Self::Gone => format!("the {kind} hook's client is gone"),
            Self::Failed(why) => format!("the {kind} hook failed: {why}"),
        }
    }
}

/// Something that answers hook calls.
#[async_trait]
pub trait HookTransport: Send + Sync {
    /// Sends `call` and waits at most `deadline` for its answer.
    async fn call(
        &self,
        call: pb::HookCall,
        deadline: Duration,
    ) -> Result<pb::HookAnswer, HookFault>;
}

/// One kind's handler: where calls go, how long they may take, what a fault does.
#[derive(Clone)]
struct Handler {
    transport: Arc<dyn HookTransport>,
    deadline: Duration,
    policy: OnHookFailure,
    omit_messages: bool,
}

/// The hooks a client declared, kept with a suspended run so a continuation without a handler
/// applies their policy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientBinding {
    /// Hook kinds (proto numbers) the client answers.
    pub kinds: Vec<i32>,
    /// Per-call deadline it asked for, in milliseconds.
    pub deadline_ms: Option<u64>,
    /// What a fault does.
    pub policy: OnHookFailure,
    /// Contexts leave the conversation out.
    #[serde(default)]
    pub omit_messages: bool,
}

/// A hook failure the run reports as a `hook_error` chunk.
#[derive(Clone, Debug, PartialEq)]
pub struct HookNote {
    /// The call.
    pub call_id: String,
    /// Its kind.
    pub kind: pb::HookKind,
    /// What happened.
    pub message: String,
    /// The policy applied.
    pub policy: OnHookFailure,
}

/// Who a run's hook calls name.
#[derive(Clone, Debug, Default)]
pub struct HookMeta {
    /// The run.
    pub run_id: String,
    /// The agent.
    pub agent_id: String,
    /// The memory thread, if any.
    pub thread_id: String,
    /// The memory resource, if any.
    pub resource_id: String,
}

/// The handlers of one run, by kind; built only when some kind is handled.
pub struct RunHooks {
    handlers: Vec<(pb::HookKind, Handler)>,
    meta: HookMeta,
    calls: AtomicU64,
    /// Distinguishes this execution's call ids from another continuation's.
    epoch: String,
    notes: Mutex<Vec<HookNote>>,
}

/// A transport for kinds whose client is not attached (a continuation without a handler).
struct Absent;

#[async_trait]
impl HookTransport for Absent {
    async fn call(&self, _: pb::HookCall, _: Duration) -> Result<pb::HookAnswer, HookFault> {
        Err(HookFault::Gone)
    }
}

impl RunHooks {
    /// The hooks of a run of `agent`: the client's kinds (attached, or only remembered from the
    /// suspended run) override the agent's webhooks; `None` when no kind is handled, so runs
    /// without hooks pay nothing.
    pub fn resolve(
        agent: &AgentConfig,
        webhooks: &[Arc<webhook::Webhook>],
        client: Option<Arc<ClientHooks>>,
        binding: Option<&ClientBinding>,
        default_deadline: Duration,
        meta: HookMeta,
    ) -> Option<Arc<Self>> {
        let mut handlers: Vec<(pb::HookKind, Handler)> = Vec::new();
        let client_side: Option<(Arc<dyn HookTransport>, &ClientBinding)> = match (&client, binding)
        {
            (Some(c), _) => Some((c.clone() as Arc<dyn HookTransport>, c.binding())),
            (None, Some(b)) => Some((Arc::new(Absent) as Arc<dyn HookTransport>, b)),
            (None, None) => None,
        };
        if let Some((transport, b)) = client_side {
            for kind in b
                .kinds
                .iter()
                .filter_map(|k| pb::HookKind::try_from(*k).ok())
            {
                handlers.push((
                    kind,
                    Handler {
                        transport: transport.clone(),
                        deadline: b
                            .deadline_ms
                            .map_or(default_deadline, Duration::from_millis),
                        policy: b.policy,
                        omit_messages: b.omit_messages,
                    },
                ));
            }
        }
        for (config, hook) in agent.webhooks.iter().zip(webhooks) {
            for name in &config.kinds {
                let Some(kind) = kind_from_name(name) else {
                    continue;
                };
                if handlers.iter().any(|(k, _)| *k == kind) {
                    continue;
                }
                handlers.push((
                    kind,
                    Handler {
                        transport: hook.clone(),
                        deadline: config
                            .timeout_ms
                            .map_or(default_deadline, Duration::from_millis),
                        policy: config.on_failure,
                        omit_messages: config.omit_messages,
                    },
                ));
            }
        }
        (!handlers.is_empty()).then(|| {
            Arc::new(Self {
                handlers,
                meta,
                calls: AtomicU64::new(0),
                epoch: super::message::new_id()[20..].to_owned(),
                notes: Mutex::new(Vec::new()),
            })
        })
    }

    /// Whether the handler of `kind` reads the conversation (so it is worth building).
    pub fn wants_messages(&self, kind: pb::HookKind) -> bool {
        self.handlers
            .iter()
            .any(|(k, h)| *k == kind && !h.omit_messages)
    }

    /// Whether some handler answers `kind`.
    pub fn handles(&self, kind: pb::HookKind) -> bool {
        self.handlers.iter().any(|(k, _)| *k == kind)
    }

    /// Calls the `kind` hook with `context`. `Ok(None)`: no handler, an empty answer, or a
    /// fault under the CONTINUE policy; `Ok(Some(answer))` is of the call's kind or `Error`
    /// (a hook that threw); `Err` ends the run (a fault under the FAIL policy).
    pub async fn call(
        &self,
        kind: pb::HookKind,
        context: Context,
    ) -> Result<Option<Answer>, RunFailure> {
        let Some((_, handler)) = self.handlers.iter().find(|(k, _)| *k == kind) else {
            return Ok(None);
        };
        // Unique across a run's continuations too (each numbers its calls from 1).
        let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("{}-h{n}-{}", self.meta.run_id, self.epoch);
        let name = kind_name(kind);
        let call = pb::HookCall {
            id: id.clone(),
            kind: kind as i32,
            run_id: self.meta.run_id.clone(),
            agent_id: self.meta.agent_id.clone(),
            thread_id: self.meta.thread_id.clone(),
            resource_id: self.meta.resource_id.clone(),
            context: Some(context),
        };
        let span = telemetry::hook_span(name, &id);
        let started = Instant::now();
        let answer = handler
            .transport
            .call(call, handler.deadline)
            .instrument(span.clone())
            .await
            .and_then(|a| match a.answer {
                Some(answer) if !answers_kind(&answer, kind) => Err(HookFault::Failed(format!(
                    "the answer is not of kind {}",
                    kind.as_str_name()
                ))),
                answer => Ok(answer),
            });
        let outcome = match &answer {
            Ok(Some(Answer::Error(_))) => "error",
            Ok(_) => "answered",
            Err(fault) => fault.outcome(),
        };
        span.record("agentd.hook.outcome", outcome);
        telemetry::metrics().hook_call(name, outcome, started.elapsed());
        match answer {
            Ok(answer) => Ok(answer),
            Err(fault) => {
                let message = fault.describe(name, handler.deadline);
                span.record("error.type", outcome);
                if let Ok(mut notes) = self.notes.lock() {
                    notes.push(HookNote {
                        call_id: id,
                        kind,
                        message: message.clone(),
                        policy: handler.policy,
                    });
                }
                match handler.policy {
                    OnHookFailure::Fail => Err(RunFailure::Hook(message)),
                    OnHookFailure::Continue => Ok(None),
                }
            }
        }
    }

    /// The failures recorded since the last call, for `hook_error` chunks.
    pub fn take_notes(&self) -> Vec<HookNote> {
        self.notes
            .lock()
            .map(|mut n| std::mem::take(&mut *n))
            .unwrap_or_default()
    }
}

/// Whether `answer` may answer a call of `kind` (an error answers any kind).
pub fn answers_kind(answer: &Answer, kind: pb::HookKind) -> bool {
    use pb::HookKind as K;
    matches!(
        (answer, kind),
        (Answer::Error(_), _)
            | (Answer::OnIterationComplete(_), K::OnIterationComplete)
            | (Answer::BeforeToolCall(_), K::BeforeToolCall)
            | (Answer::AfterToolCall(_), K::AfterToolCall)
            | (Answer::PrepareStep(_), K::PrepareStep)
            | (Answer::IsTaskComplete(_), K::IsTaskComplete)
            | (Answer::OnDelegationStart(_), K::OnDelegationStart)
            | (Answer::OnDelegationComplete(_), K::OnDelegationComplete)
            | (Answer::MessageFilter(_), K::MessageFilter)
            | (Answer::Score(_), K::Score)
            | (
                Answer::Processor(_),
                K::ProcessInput | K::ProcessOutputStep | K::ProcessOutputResult
            )
    )
}

/// A kind's config name (`before_tool_call`), as `crate::config::HOOK_KINDS` lists them.
pub fn kind_name(kind: pb::HookKind) -> &'static str {
    use pb::HookKind as K;
    match kind {
        K::Unspecified => "unspecified",
        K::OnIterationComplete => "on_iteration_complete",
        K::BeforeToolCall => "before_tool_call",
        K::AfterToolCall => "after_tool_call",
        K::PrepareStep => "prepare_step",
        K::IsTaskComplete => "is_task_complete",
        K::OnDelegationStart => "on_delegation_start",
        K::OnDelegationComplete => "on_delegation_complete",
        K::MessageFilter => "message_filter",
        K::ProcessInput => "process_input",
        K::ProcessOutputStep => "process_output_step",
        K::ProcessOutputResult => "process_output_result",
        K::Score => "score",
    }
}

/// The kind a config name stands for.
pub fn kind_from_name(name: &str) -> Option<pb::HookKind> {
    pb::HookKind::from_str_name(&format!("HOOK_KIND_{}", name.to_ascii_uppercase()))
        .filter(|k| *k != pb::HookKind::Unspecified)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_config_kind_name_is_a_proto_kind_and_back() {
        for name in crate::config::HOOK_KINDS {
            let kind = kind_from_name(name).unwrap();
            assert_eq!(kind_name(kind), name);
        }
        assert_eq!(kind_from_name("unspecified"), None);
        assert_eq!(kind_from_name("nope"), None);
    }

    #[test]
    fn answers_must_match_their_call() {
        let before = Answer::BeforeToolCall(pb::BeforeToolCallAnswer::default());
        assert!(answers_kind(&before, pb::HookKind::BeforeToolCall));
        assert!(!answers_kind(&before, pb::HookKind::AfterToolCall));
        let error = Answer::Error(pb::HookFailure::default());
        assert!(answers_kind(&error, pb::HookKind::PrepareStep));
    }
}
