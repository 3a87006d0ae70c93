//! Running a completion check (the reference's `isTaskComplete` step): every scorer of the
//! run's `is_task_complete` under one shared deadline, in parallel or in order, each verdict
//! timed; built-in scorers run here, `hook` scorers through the `is_task_complete` hook.

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

use super::Runner;
use crate::agent::completion::{self, CompletionCheck, Verdict};
use crate::agent::error::RunFailure;
use crate::agent::message::Role;
use crate::agent::state::StepRecord;
use crate::agent::wire;
use crate::config::{ScorerKind, ScorerSpec, Strategy};
use crate::json::to_proto_struct;
use crate::model::{ChatMessage, ModelEvent, ModelRequest, ResponseFormat};
use crate::pb;
use crate::pb::hook_answer::Answer;
use crate::pb::hook_call::Context;
use crate::tasks;

/// The judge's instructions.
const JUDGE_SYSTEM: &str = "You judge whether an AI assistant's answer completes its task. \
Read the task, the answer and the rubric. Answer with JSON only: {\"score\": 1, \"reason\": \
\"...\"} when the answer meets the rubric, else {\"score\": 0, \"reason\": \"...\"}, the reason \
saying briefly what is missing or why it passes.";

impl Runner {
    /// Runs the completion check after a step that would end the run; `None` when the run
    /// has no scorers. A hook scorer whose FAIL policy applies fails the run.
    pub(super) async fn check_completion(
        &mut self,
        step: &StepRecord,
    ) -> Result<Option<CompletionCheck>, RunFailure> {
        let Some(config) = self.state.request.is_task_complete.clone() else {
            return Ok(None);
        };
        let iteration =
            u32::try_from(self.state.steps.len() + 1 - self.loop_start).unwrap_or(u32::MAX);
        let started = Instant::now();
        let deadline = started + Duration::from_millis(config.timeout_ms);
        let results = if config.parallel {
            let runs = config
                .scorers
                .iter()
                .map(|s| self.score_by(s, step, iteration, deadline));
            futures::future::join_all(runs).await
        } else {
            let mut results = Vec::new();
            for scorer in &config.scorers {
                let verdict = self.score_by(scorer, step, iteration, deadline).await;
                let stop = match config.strategy {
                    Strategy::All => !verdict.passed,
                    Strategy::Any => verdict.passed,
                };
                results.push(verdict);
                if stop || Instant::now() >= deadline {
                    break;
                }
            }
            results
        };
        if let Some(failure) = self.take_hook_fatal() {
            return Err(failure);
        }
        let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        Ok(Some(CompletionCheck::combine(
            &config,
            results,
            iteration,
            self.state.request.max_steps,
            ms,
        )))
    }

    /// One scorer's verdict, or a timed-out verdict at the shared deadline.
    async fn score_by(
        &self,
        scorer: &ScorerSpec,
        step: &StepRecord,
        iteration: u32,
        deadline: Instant,
    ) -> Verdict {
        let started = Instant::now();
        let name = scorer.display_name();
        let ms = || u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let run = self.score(scorer, step, iteration);
        match tokio::time::timeout_at(deadline.into(), run).await {
            Err(_) => Verdict::timed_out(&scorer.id, name, ms()),
            Ok(Ok((score, reason))) => Verdict::scored(&scorer.id, name, score, reason, ms()),
            Ok(Err(message)) => Verdict::threw(&scorer.id, name, &message, ms()),
        }
    }

    /// A score and reason, or why the scorer failed.
    async fn score(
        &self,
        scorer: &ScorerSpec,
        step: &StepRecord,
        iteration: u32,
    ) -> Result<(f64, Option<String>), String> {
        match &scorer.kind {
            ScorerKind::TaskListComplete => {
                let list = self.env.tasks.lock().await;
                let check = tasks::check(&list.tasks);
                let score = if check.summary.all_completed {
                    1.0
                } else {
                    0.0
                };
                Ok((score, Some(check.content)))
            }
            ScorerKind::JsonSchema { schema } => {
                let (score, reason) = completion::json_schema_verdict(schema, &step.text);
                Ok((score, Some(reason)))
            }
            ScorerKind::LlmJudge { model, rubric } => self.judge(model, rubric, &step.text).await,
            ScorerKind::Hook => self.score_by_hook(scorer, step, iteration).await,
        }
    }

    async fn score_by_hook(
        &self,
        scorer: &ScorerSpec,
        step: &StepRecord,
        iteration: u32,
    ) -> Result<(f64, Option<String>), String> {
        let Some(hooks) = &self.hooks else {
            return Err("no is_task_complete hook handles this scorer".to_owned());
        };
        let context = pb::ScorerContext {
            scorer_id: scorer.id.clone(),
            scorer_name: scorer.display_name().to_owned(),
            iteration,
            max_iterations: self.state.request.max_steps,
            original_task: self.original_task(),
            output: step.text.clone(),
            messages: self.hook_messages(pb::HookKind::IsTaskComplete),
            tool_calls: step.tool_calls.iter().map(wire::call).collect(),
            tool_results: step.tool_results.iter().map(wire::result).collect(),
            request_context: Some(to_proto_struct(&self.state.request.request_context)),
        };
        match hooks
            .call(
                pb::HookKind::IsTaskComplete,
                Context::IsTaskComplete(context),
            )
            .await
        {
            Ok(Some(Answer::IsTaskComplete(a))) => Ok((a.score, a.reason)),
            Ok(Some(Answer::Error(e))) => Err(e.message),
            Ok(_) => Err("the is_task_complete hook gave no score".to_owned()),
            Err(failure) => Err(self.note_fatal(failure)),
        }
    }

    /// The text of the run's first input message's first part.
    fn original_task(&self) -> String {
        let first = self
            .state
            .request
            .input
            .iter()
            .find(|m| m.role != Role::System)
            .and_then(|m| m.parts.first())
            .and_then(|p| match p {
                crate::agent::message::Part::Text { text } => Some(text.as_str()),
                _ => None,
            });
        completion::original_task(first)
    }

    /// The LLM judge: one call to `model` with the task, the answer and the rubric; its JSON
    /// answer `{score, reason}` is the verdict.
    async fn judge(
        &self,
        model: &str,
        rubric: &str,
        output: &str,
    ) -> Result<(f64, Option<String>), String> {
        let judge = self
            .agents
            .model(model)
            .ok_or_else(|| format!("judge model {model:?} is not a configured provider/model"))?;
        let schema = json!({
            "type": "object",
            "properties": {
                "score": {"type": "number", "enum": [0, 1]},
                "reason": {"type": "string"}
            },
            "required": ["score", "reason"],
            "additionalProperties": false
        });
        let request = ModelRequest {
            model: judge.model.clone(),
            messages: vec![
                ChatMessage::system(JUDGE_SYSTEM),
                ChatMessage::user(format!(
                    "Task:\n{}\n\nAnswer:\n{output}\n\nRubric:\n{rubric}",
                    self.original_task()
                )),
            ],
            response_format: judge.provider.supports_structured_output().then(|| {
                ResponseFormat::JsonSchema {
                    name: "verdict".to_owned(),
                    schema,
                    strict: true,
                }
            }),
            ..ModelRequest::default()
        };
        let mut stream = judge
            .provider
            .stream(request, self.cancel.child_token())
            .await
            .map_err(|e| e.to_string())?;
        let mut text = String::new();
        while let Some(event) = stream.next().await {
            match event.map_err(|e| e.to_string())? {
                ModelEvent::TextDelta(delta) => text.push_str(&delta),
                _ => continue,
            }
        }
        let verdict = crate::agent::structured::partial_json(&text)
            .filter(Value::is_object)
            .ok_or_else(|| format!("the judge did not answer with a JSON verdict: {text:?}"))?;
        let score = verdict["score"]
            .as_f64()
            .ok_or_else(|| format!("the judge's verdict has no numeric score: {verdict}"))?;
        Ok((score, verdict["reason"].as_str().map(str::to_owned)))
    }

    /// Applies a failed check: the feedback message the model reads next (saved with the
    /// response, as the reference saves it).
    pub(super) fn add_completion_feedback(&mut self, check: &CompletionCheck) {
        self.state
            .response
            .push(super::hooks::feedback_message(check.feedback()));
    }
}
