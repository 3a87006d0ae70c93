//! After a run completes: its scorers (the request's, else the agent's), each sampled by the
//! run's trace id (else its run id), score what the run read and answered, and every score is
//! stored in the score lists of its run, thread and agent. Scoring never delays `finish`
//! (it continues in the background, awaited when the replica drains) unless the request asks
//! for `return_scorer_data`, or a client on the run's stream answers SCORE hooks (its stream
//! ends with `finish`). Nothing here runs for an agent without scorers.

use std::sync::Arc;

use bytes::Bytes;
use futures::future::join_all;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info_span, warn};

use super::Runner;
use crate::agent::Agents;
use crate::agent::hooks::RunHooks;
use crate::agent::processors::detector::Ask;
use crate::agent::request::Injection;
use crate::agent::result::RunResult;
use crate::agent::scorers::builtin::Builtin;
use crate::agent::scorers::record::ScoredRun;
use crate::agent::scorers::scorer::{Kind, RunScorer, requested};
use crate::agent::scorers::{Judge, ScoreRecord, Scored, ScorerRun, Scoring, convert, sampling};
use crate::json::to_proto_struct;
use crate::pb;
use crate::pb::hook_answer::Answer;
use crate::pb::hook_call::Context;
use crate::store::Store;

impl Runner {
    /// Scores the completed run, in the background unless the result waits for it (then the
    /// result carries what the scorers read and gave, when asked).
    pub(super) async fn score_run(&self, result: &mut RunResult) {
        let request = &self.state.request;
        let scorers = match &request.scorers {
            Some(list) => match requested(list, &self.agent.scorers) {
                Ok(scorers) => scorers,
                Err(problems) => {
                    // Checked when the run started; only a changed config gets here.
                    warn!(run_id = %self.run_id, ?problems, "the run's scorers no longer resolve");
                    return;
                }
            },
            None if self.agent.scorers.is_empty() && !request.return_scorer_data => return,
            None => self.agent.scorers.clone(),
        };
        let key = if self.trace_id.is_empty() {
            &self.run_id
        } else {
            &self.trace_id
        };
        let admitted: Vec<RunScorer> = scorers
            .into_iter()
            .filter(|s| sampling::admits(s.entry.sampling, key))
            .collect();
        if admitted.is_empty() && !request.return_scorer_data {
            return;
        }
        let data = convert::scorer_run(
            self.system_messages(),
            &self.state.history,
            &request.input,
            &self.state.response,
            (self.agent.provider.name(), &self.agent.model),
        );
        let memory = request.memory.as_ref();
        let job = Job {
            scorers: admitted,
            data: Arc::new(data),
            run: ScoredRun {
                run_id: self.run_id.clone(),
                agent_id: self.agent.config.id.clone(),
                thread_id: memory.map(|m| m.thread_id.clone()).unwrap_or_default(),
                resource_id: memory.map(|m| m.resource_id.clone()).unwrap_or_default(),
                tenant: request.tenant.clone(),
            },
            store: self.deps.store.clone(),
            agents: self.agents.clone(),
            hooks: self.hooks.clone(),
        };
        let client_scores = job.scorers.iter().any(|s| matches!(s.kind, Kind::Hook))
            && self
                .state
                .client_hooks
                .as_ref()
                .is_some_and(|c| c.kinds.contains(&(pb::HookKind::Score as i32)));
        if !request.return_scorer_data && !client_scores {
            let span = info_span!("agentd.score", run_id = %self.run_id);
            self.deps.scoring.spawn(
                async move {
                    job.run().await;
                }
                .instrument(span),
            );
            return;
        }
        let data = request
            .return_scorer_data
            .then(|| ScorerRun::clone(&job.data));
        let scores = job.run().await;
        if let Some(data) = data {
            result.scoring = Some(Scoring { data, scores });
        }
    }
}

/// One run's scoring: its scorers, what they read, and where the scores go.
struct Job {
    scorers: Vec<RunScorer>,
    data: Arc<ScorerRun>,
    run: ScoredRun,
    store: Arc<dyn Store>,
    agents: Arc<Agents>,
    hooks: Option<Arc<RunHooks>>,
}

impl Job {
    /// Runs every scorer at once and stores each score; returns them in scorer order.
    async fn run(self) -> Vec<ScoreRecord> {
        let scored = join_all(self.scorers.iter().map(|s| self.score(s))).await;
        let mut records = Vec::new();
        for (scorer, outcome) in self.scorers.iter().zip(scored) {
            let scored = match outcome {
                Ok(Some(scored)) => scored,
                Ok(None) => continue,
                Err(error) => {
                    // As the reference: a failed scorer is logged and gives no score.
                    warn!(run_id = %self.run.run_id, scorer = %scorer.key, %error, "a scorer failed");
                    continue;
                }
            };
            let record =
                ScoreRecord::new(&self.run, &scorer.key, (scorer.id(), scorer.name()), scored);
            match serde_json::to_vec(&record) {
                Ok(bytes) => {
                    if let Err(e) = self
                        .store
                        .append_score(&record.lists(), Bytes::from(bytes))
                        .await
                    {
                        warn!(run_id = %self.run.run_id, scorer = %scorer.key, error = %e, "could not store a score");
                    }
                }
                Err(e) => warn!(run_id = %self.run.run_id, error = %e, "could not encode a score"),
            }
            records.push(record);
        }
        records
    }

    /// One scorer's verdict (`None`: its hook gave none), timed.
    async fn score(&self, scorer: &RunScorer) -> Result<Option<Scored>, String> {
        let started = std::time::Instant::now();
        let outcome = self.verdict(scorer).await;
        let label = match &outcome {
            Ok(Some(_)) => "scored",
            Ok(None) => "none",
            Err(_) => "failed",
        };
        // A hook scorer's key is the client's: not a metric label.
        let id = match scorer.kind {
            Kind::Builtin(_) => scorer.id(),
            Kind::Hook => "hook",
        };
        crate::telemetry::metrics().scored(id, label, started.elapsed());
        outcome
    }

    async fn verdict(&self, scorer: &RunScorer) -> Result<Option<Scored>, String> {
        match &scorer.kind {
            Kind::Builtin(builtin) => {
                let judge = ModelJudge {
                    agents: &self.agents,
                    model: scorer.entry.model().unwrap_or_default(),
                };
                if let Builtin::Code(code) = builtin {
                    // CPU work (a long text's tagging takes a while): off the async workers.
                    let (code, data) = (code.clone(), self.data.clone());
                    return tokio::task::spawn_blocking(move || code.score(&data))
                        .await
                        .map_err(|e| format!("the scorer stopped: {e}"))?
                        .map(Some);
                }
                builtin.score(&self.data, &judge).await.map(Some)
            }
            Kind::Hook => self.hook(scorer).await,
        }
    }

    /// A custom scorer: the run's SCORE hook answers.
    async fn hook(&self, scorer: &RunScorer) -> Result<Option<Scored>, String> {
        let Some(hooks) = &self.hooks else {
            return Err("no SCORE hook handler".into());
        };
        let data = serde_json::to_value(&self.data).map_err(|e| e.to_string())?;
        let context = Context::Score(pb::RunScoreContext {
            scorer_key: scorer.key.clone(),
            scoring_data: match &data {
                Value::Object(map) => Some(to_proto_struct(map)),
                _ => None,
            },
            options: Some(to_proto_struct(&scorer.entry.scorer_options())),
        });
        match hooks.call(pb::HookKind::Score, context).await {
            Ok(Some(Answer::Score(answer))) => Ok(Some(Scored {
                score: answer.score,
                reason: answer.reason,
                ..Scored::default()
            })),
            Ok(Some(Answer::Error(e))) => Err(format!("the SCORE hook failed: {}", e.message)),
            Ok(_) => Ok(None),
            Err(failure) => Err(failure.to_string()),
        }
    }
}

/// A judged scorer's judge: a configured model, asked as the detectors ask theirs.
struct ModelJudge<'a> {
    agents: &'a Agents,
    model: &'a str,
}

impl ModelJudge<'_> {
    fn ask<'a>(
        &'a self,
        instructions: &'a str,
        prompt: &'a str,
        schema: Value,
        injection: Injection,
    ) -> Ask<'a> {
        Ask {
            model: self.model,
            instructions,
            prompt,
            schema,
            injection: Some(injection),
            temperature: None,
        }
    }
}

#[async_trait::async_trait]
impl Judge for ModelJudge<'_> {
    async fn json(&self, instructions: &str, prompt: &str, schema: Value) -> Result<Value, String> {
        let cancel = CancellationToken::new();
        // As the reference's judge: the schema natively when the provider can, else after the
        // prompt; a missing or invalid answer is asked for once more with the schema in the
        // system message.
        let first = self.ask(instructions, prompt, schema.clone(), Injection::Auto);
        match first.send(self.agents, &cancel).await {
            Ok(answer) => Ok(answer),
            Err(_) => {
                let again = self.ask(instructions, prompt, schema, Injection::System);
                again.send(self.agents, &cancel).await
            }
        }
    }

    async fn text(&self, instructions: &str, prompt: &str) -> Result<String, String> {
        self.ask(instructions, prompt, Value::Null, Injection::Auto)
            .send_text(self.agents, &CancellationToken::new())
            .await
    }
}
