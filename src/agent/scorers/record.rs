//! A stored score: one scorer's verdict on one run, kept in the score lists of its run, its
//! thread and its agent (the reference's `scores` store, read by `listScoresByRunId` and kin).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Scored;

/// One stored score.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScoreRecord {
    /// Unique id.
    pub id: String,
    /// The scorer's key in the run's scorers.
    pub scorer_key: String,
    /// The scorer's id.
    pub scorer_id: String,
    /// The scorer's name.
    pub scorer_name: String,
    /// The run scored.
    pub run_id: String,
    /// Its agent.
    pub agent_id: String,
    /// Its memory thread ("" without memory).
    pub thread_id: String,
    /// Its memory resource ("" without memory).
    pub resource_id: String,
    /// The tenant that started the run ("" unscoped): only it (or an unscoped caller) lists it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    /// The score.
    pub score: f64,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The preprocess step's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preprocess_step_result: Option<Value>,
    /// The analyze step's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analyze_step_result: Option<Value>,
    /// The judge's prompts by key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prompts: BTreeMap<String, String>,
    /// When it was scored, Unix milliseconds.
    pub created_at_ms: i64,
}

/// Who a score belongs to.
#[derive(Clone, Debug, Default)]
pub struct ScoredRun {
    /// The run.
    pub run_id: String,
    /// Its agent.
    pub agent_id: String,
    /// Its thread ("" without memory).
    pub thread_id: String,
    /// Its resource ("" without memory).
    pub resource_id: String,
    /// The tenant that started it ("" unscoped).
    pub tenant: String,
}

impl ScoreRecord {
    /// The record of `scored`, given by the scorer `key` (`id`, `name`) to `run`.
    pub fn new(run: &ScoredRun, key: &str, (id, name): (&str, &str), scored: Scored) -> Self {
        Self {
            id: crate::agent::message::new_id(),
            scorer_key: key.to_owned(),
            scorer_id: id.to_owned(),
            scorer_name: name.to_owned(),
            run_id: run.run_id.clone(),
            agent_id: run.agent_id.clone(),
            thread_id: run.thread_id.clone(),
            resource_id: run.resource_id.clone(),
            tenant: run.tenant.clone(),
            score: scored.score,
            reason: scored.reason,
            preprocess_step_result: scored.preprocess_step_result,
            analyze_step_result: scored.analyze_step_result,
            prompts: scored.prompts,
            created_at_ms: crate::agent::message::now_ms(),
        }
    }

    /// The score lists it goes into: its run's, its thread's (with memory) and its agent's.
    pub fn lists(&self) -> Vec<String> {
        let mut lists = vec![run_list(&self.run_id), agent_list(&self.agent_id)];
        if !self.thread_id.is_empty() {
            lists.push(thread_list(&self.resource_id, &self.thread_id));
        }
        lists
    }
}

/// The score list of a run.
pub fn run_list(run_id: &str) -> String {
    format!("run\u{1f}{run_id}")
}

/// The score list of a resource's thread.
pub fn thread_list(resource_id: &str, thread_id: &str) -> String {
    // The separator cannot be part of an id the API accepts, so no two threads share a list.
    format!("thread\u{1f}{resource_id}\u{1f}{thread_id}")
}

/// The score list of an agent.
pub fn agent_list(agent_id: &str) -> String {
    format!("agent\u{1f}{agent_id}")
}
