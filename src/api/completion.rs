//! `is_task_complete` from the wire: every scorer checked, each problem naming its field.

use std::collections::HashSet;

use super::check_text;
use super::error::Violations;
use crate::config::{CompletionConfig, Limits, ScorerKind, ScorerSpec, Strategy};
use crate::json::from_proto_struct;
use crate::pb;
use crate::pb::completion_scorer::Kind;

/// The reference's default completion timeout (10 minutes).
const DEFAULT_TIMEOUT_MS: u64 = 600_000;

/// Converts and checks a request's `is_task_complete`.
pub(crate) fn completion(
    v: &mut Violations,
    c: &pb::IsTaskComplete,
    limits: &Limits,
) -> Option<CompletionConfig> {
    if c.scorers.is_empty() {
        v.add("is_task_complete.scorers", "name at least one scorer");
    }
    let strategy = match pb::CompletionStrategy::try_from(c.strategy) {
        Ok(pb::CompletionStrategy::Any) => Strategy::Any,
        Ok(_) => Strategy::All,
        Err(_) => {
            v.add("is_task_complete.strategy", "unknown strategy");
            Strategy::All
        }
    };
    if c.timeout_ms == Some(0) {
        v.add("is_task_complete.timeout_ms", "must be > 0");
    }
    let mut ids = HashSet::new();
    let mut scorers = Vec::with_capacity(c.scorers.len());
    for (i, s) in c.scorers.iter().enumerate() {
        let field = format!("is_task_complete.scorers.{i}");
        if s.id.is_empty() || !ids.insert(s.id.as_str()) {
            v.add(format!("{field}.id"), "must be non-empty and unique");
        }
        super::check_id(v, &format!("{field}.id"), &s.id, limits);
        check_text(v, &format!("{field}.name"), &s.name, limits);
        let kind = match &s.kind {
            None => {
                v.add(
                    format!("{field}.kind"),
                    "set hook, task_list_complete, json_schema or llm_judge",
                );
                continue;
            }
            Some(Kind::Hook(_)) => ScorerKind::Hook,
            Some(Kind::TaskListComplete(_)) => ScorerKind::TaskListComplete,
            Some(Kind::JsonSchema(j)) => match &j.schema {
                Some(schema) => ScorerKind::JsonSchema {
                    schema: serde_json::Value::Object(from_proto_struct(schema)),
                },
                None => {
                    v.add(format!("{field}.json_schema.schema"), "is required");
                    continue;
                }
            },
            Some(Kind::LlmJudge(j)) => {
                if j.model.is_empty() {
                    v.add(
                        format!("{field}.llm_judge.model"),
                        "must name a provider/model",
                    );
                }
                if j.rubric.is_empty() {
                    v.add(format!("{field}.llm_judge.rubric"), "must not be empty");
                }
                check_text(v, &format!("{field}.llm_judge.rubric"), &j.rubric, limits);
                ScorerKind::LlmJudge {
                    model: j.model.clone(),
                    rubric: j.rubric.clone(),
                }
            }
        };
        scorers.push(ScorerSpec {
            id: s.id.clone(),
            name: (!s.name.is_empty()).then(|| s.name.clone()),
            kind,
        });
    }
    Some(CompletionConfig {
        scorers,
        strategy,
        parallel: c.parallel.unwrap_or(true),
        timeout_ms: c.timeout_ms.map_or(DEFAULT_TIMEOUT_MS, u64::from),
        suppress_feedback: c.suppress_feedback,
    })
}
