//! The client side of a GenerateWithHooks / ContinueWithHooks stream: hook calls go out on a
//! channel the RPC forwards, answers come back by id. An answer is taken only for a call that
//! is waiting and only when it is of the call's kind; anything else is rejected with a reason
//! and the call keeps waiting until its deadline.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::{ClientBinding, HookFault, HookTransport, answers_kind};
use crate::pb;

/// Hook calls buffered towards one client.
const CALL_BUFFER: usize = 64;

/// Hook calls waiting for this client's answers.
pub struct ClientHooks {
    binding: ClientBinding,
    calls: mpsc::Sender<pb::HookCall>,
    waiting: Mutex<HashMap<String, (pb::HookKind, oneshot::Sender<pb::HookAnswer>)>>,
    gone: CancellationToken,
}

impl ClientHooks {
    /// A client answering the hooks of `binding`; the receiver yields the calls to send it.
    pub fn new(binding: ClientBinding) -> (std::sync::Arc<Self>, mpsc::Receiver<pb::HookCall>) {
        let (calls, rx) = mpsc::channel(CALL_BUFFER);
        let hooks = std::sync::Arc::new(Self {
            binding,
            calls,
            waiting: Mutex::new(HashMap::new()),
            gone: CancellationToken::new(),
        });
        (hooks, rx)
    }

    /// The kinds, deadline and policy this client declared.
    pub fn binding(&self) -> &ClientBinding {
        &self.binding
    }

    /// Takes an answer; `Err` says why it was not taken (naming the field).
    pub fn answer(&self, answer: pb::HookAnswer) -> Result<(), String> {
        if answer.id.is_empty() {
            return Err("answer.id must name the hook call answered".to_owned());
        }
        let mut waiting = self
            .waiting
            .lock()
            .map_err(|_| "the run's hook state is unavailable".to_owned())?;
        let Some((kind, _)) = waiting.get(&answer.id) else {
            return Err(format!(
                "answer.id {:?} is not a hook call waiting for an answer (unknown, already \
                 answered, or past its deadline)",
                answer.id
            ));
        };
        if let Some(a) = &answer.answer
            && !answers_kind(a, *kind)
        {
            return Err(format!(
                "answer.{} does not answer a {} call",
                answer_field(a),
                kind.as_str_name()
            ));
        }
        if let Some((_, reply)) = waiting.remove(&answer.id) {
            // The run stops waiting only at its deadline; a send error means it just passed.
            let _ = reply.send(answer);
        }
        Ok(())
    }

    /// The client went away: waiting and later calls fail at once (their policy applies).
    pub fn close(&self) {
        self.gone.cancel();
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.clear();
        }
    }
}

#[async_trait]
impl HookTransport for ClientHooks {
    async fn call(
        &self,
        call: pb::HookCall,
        deadline: Duration,
    ) -> Result<pb::HookAnswer, HookFault> {
        if self.gone.is_cancelled() {
            return Err(HookFault::Gone);
        }
        let kind = pb::HookKind::try_from(call.kind).unwrap_or(pb::HookKind::Unspecified);
        let id = call.id.clone();
        let (reply, answer) = oneshot::channel();
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.insert(id.clone(), (kind, reply));
        }
        let forget = || {
            if let Ok(mut waiting) = self.waiting.lock() {
                waiting.remove(&id);
            }
        };
        let outcome = tokio::select! {
            () = self.gone.cancelled() => Err(HookFault::Gone),
            sent = tokio::time::timeout(deadline, self.calls.send(call)) => match sent {
                Err(_) => Err(HookFault::Timeout),
                Ok(Err(_)) => Err(HookFault::Gone),
                Ok(Ok(())) => Ok(()),
            },
        };
        if let Err(fault) = outcome {
            forget();
            return Err(fault);
        }
        let outcome = tokio::select! {
            () = self.gone.cancelled() => Err(HookFault::Gone),
            answered = tokio::time::timeout(deadline, answer) => match answered {
                Err(_) => Err(HookFault::Timeout),
                Ok(Err(_)) => Err(HookFault::Gone),
                Ok(Ok(answer)) => Ok(answer),
            },
        };
        if outcome.is_err() {
            forget();
        }
        outcome
    }
}

/// The proto field name of an answer's variant.
fn answer_field(answer: &pb::hook_answer::Answer) -> &'static str {
    use pb::hook_answer::Answer as A;
    match answer {
        A::OnIterationComplete(_) => "on_iteration_complete",
        A::BeforeToolCall(_) => "before_tool_call",
        A::AfterToolCall(_) => "after_tool_call",
        A::PrepareStep(_) => "prepare_step",
        A::IsTaskComplete(_) => "is_task_complete",
        A::OnDelegationStart(_) => "on_delegation_start",
        A::OnDelegationComplete(_) => "on_delegation_complete",
        A::MessageFilter(_) => "message_filter",
        A::Processor(_) => "processor",
        A::Score(_) => "score",
        A::Error(_) => "error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, kind: pb::HookKind) -> pb::HookCall {
        pb::HookCall {
            id: id.into(),
            kind: kind as i32,
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn answers_are_matched_by_id_and_kind() {
        let (hooks, mut rx) = ClientHooks::new(ClientBinding::default());
        let waiter = {
            let hooks = hooks.clone();
            tokio::spawn(async move {
                hooks
                    .call(
                        call("c1", pb::HookKind::BeforeToolCall),
                        Duration::from_secs(5),
                    )
                    .await
            })
        };
        let sent = rx.recv().await.unwrap();
        assert_eq!(sent.id, "c1");
        let wrong = pb::HookAnswer {
            id: "c1".into(),
            answer: Some(pb::hook_answer::Answer::PrepareStep(Default::default())),
        };
        let err = hooks.answer(wrong).unwrap_err();
        assert!(err.contains("answer.prepare_step"), "{err}");
        assert!(
            hooks
                .answer(pb::HookAnswer {
                    id: "zz".into(),
                    answer: None
                })
                .is_err()
        );
        let right = pb::HookAnswer {
            id: "c1".into(),
            answer: Some(pb::hook_answer::Answer::BeforeToolCall(Default::default())),
        };
        hooks.answer(right.clone()).unwrap();
        let err = hooks.answer(right).unwrap_err();
        assert!(err.contains("already"), "{err}");
        assert!(waiter.await.unwrap().is_ok());
    }

    #[tokio::test]
    async fn a_missed_deadline_and_a_closed_client_are_faults() {
        let (hooks, mut rx) = ClientHooks::new(ClientBinding::default());
        let late = hooks
            .call(
                call("c1", pb::HookKind::PrepareStep),
                Duration::from_millis(20),
            )
            .await;
        assert_eq!(late.unwrap_err(), HookFault::Timeout);
        assert!(rx.recv().await.is_some());
        hooks.close();
        let gone = hooks
            .call(
                call("c2", pb::HookKind::PrepareStep),
                Duration::from_secs(5),
            )
            .await;
        assert_eq!(gone.unwrap_err(), HookFault::Gone);
    }
}
