//! A run's scorers, resolved: the request's when it names any (an entry naming no scorer takes
//! the agent's of its key, as the reference's run options name registered scorers), else the
//! agent's `[agents.scorers]`; each checked and built, every problem naming its field.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::builtin::Builtin;
use crate::config::{HOOK_SCORER, Sampling, ScorerEntry, check_scorer};

/// A scorer of a request: a built-in or hook scorer with its options, or only a key (the
/// agent's scorer of that key, with `sampling` replacing its own when set).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestedScorer {
    /// Its key, unique in the run.
    pub key: String,
    /// The scorer's name; empty: the agent's scorer of `key`.
    pub scorer: String,
    /// Its options.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub options: Map<String, Value>,
    /// Its sampling, when the request sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<Sampling>,
}

/// One scorer of a run, ready to score.
#[derive(Clone, Debug)]
pub struct RunScorer {
    /// Its key.
    pub key: String,
    /// Its entry (options, sampling).
    pub entry: ScorerEntry,
    /// What scores.
    pub kind: Kind,
}

/// What scores a run.
#[derive(Clone, Debug)]
pub enum Kind {
    /// A built-in scorer.
    Builtin(Builtin),
    /// The run's SCORE hook.
    Hook,
}

impl RunScorer {
    /// Builds the scorer `key` of `entry`; errors are `(field, why)` with fields below `at`.
    pub fn build(at: &str, key: &str, entry: &ScorerEntry) -> Result<Self, (String, String)> {
        check_scorer(at, entry)?;
        let kind = if entry.scorer == HOOK_SCORER {
            Kind::Hook
        } else {
            Kind::Builtin(
                Builtin::parse(&entry.scorer, &entry.scorer_options()).map_err(
                    |(field, why)| match field {
                        Some(field) => (format!("{at}.{field}"), why),
                        None => (at.to_owned(), why),
                    },
                )?,
            )
        };
        Ok(Self {
            key: key.to_owned(),
            entry: entry.clone(),
            kind,
        })
    }

    /// The scorer's id (the reference's for built-ins; a hook scorer's key).
    pub fn id(&self) -> &str {
        match &self.kind {
            Kind::Builtin(b) => b.id(),
            Kind::Hook => &self.key,
        }
    }

    /// The scorer's name.
    pub fn name(&self) -> &str {
        match &self.kind {
            Kind::Builtin(b) => b.name(),
            Kind::Hook => &self.key,
        }
    }
}

/// The agent's configured scorers, built (errors name `agents.<id>.scorers.<key>.<field>`).
pub fn configured(
    agent_id: &str,
    scorers: &BTreeMap<String, ScorerEntry>,
) -> Result<Vec<RunScorer>, String> {
    scorers
        .iter()
        .map(|(key, entry)| {
            RunScorer::build(&format!("agents.{agent_id}.scorers.{key}"), key, entry)
                .map_err(|(field, why)| format!("{field}: {why}"))
        })
        .collect()
}

/// The request's scorers (fields named `scorers.scorers.<i>.…`), resolved against the agent's.
pub fn requested(
    list: &[RequestedScorer],
    agent: &[RunScorer],
) -> Result<Vec<RunScorer>, Vec<(String, String)>> {
    let mut problems = Vec::new();
    let mut scorers = Vec::new();
    let mut keys = std::collections::HashSet::new();
    for (i, requested) in list.iter().enumerate() {
        let at = format!("scorers.scorers.{i}");
        if requested.key.trim().is_empty() {
            problems.push((format!("{at}.key"), "must not be empty".to_owned()));
            continue;
        }
        if !keys.insert(requested.key.as_str()) {
            problems.push((
                format!("{at}.key"),
                format!("{:?} names another scorer of this run", requested.key),
            ));
            continue;
        }
        if requested.scorer.is_empty() {
            let Some(configured) = agent.iter().find(|s| s.key == requested.key) else {
                let known: Vec<&str> = agent.iter().map(|s| s.key.as_str()).collect();
                problems.push((
                    format!("{at}.key"),
                    format!(
                        "names no scorer of the agent (configured: {}); or set `scorer`",
                        if known.is_empty() {
                            "none".to_owned()
                        } else {
                            known.join(", ")
                        }
                    ),
                ));
                continue;
            };
            let mut scorer = configured.clone();
            if let Some(sampling) = requested.sampling {
                scorer.entry.sampling = sampling;
            }
            if let Err((field, why)) = check_scorer(&at, &scorer.entry) {
                problems.push((field, why));
                continue;
            }
            scorers.push(scorer);
            continue;
        }
        let entry = ScorerEntry {
            scorer: requested.scorer.clone(),
            sampling: requested.sampling.unwrap_or_default(),
            options: requested.options.clone(),
        };
        match RunScorer::build(&at, &requested.key, &entry) {
            Ok(scorer) => scorers.push(scorer),
            // Options sit below `options` on the wire.
            Err((field, why)) => problems.push((wire_field(&at, &field), why)),
        }
    }
    if problems.is_empty() {
        Ok(scorers)
    } else {
        Err(problems)
    }
}

/// A config-style field (`<at>.model`, `<at>.scale`) as the wire names it
/// (`<at>.options.model`); `scorer` and `sampling` are the Scorer message's own fields.
fn wire_field(at: &str, field: &str) -> String {
    if field == at {
        return format!("{at}.options");
    }
    let Some(rest) = field.strip_prefix(at).and_then(|r| r.strip_prefix('.')) else {
        return field.to_owned();
    };
    if rest == "scorer" || rest.starts_with("sampling") {
        field.to_owned()
    } else {
        format!("{at}.options.{rest}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn hook(key: &str) -> RequestedScorer {
        RequestedScorer {
            key: key.into(),
            scorer: HOOK_SCORER.into(),
            ..RequestedScorer::default()
        }
    }

    #[test]
    fn request_entries_are_checked_naming_their_field() {
        let agent = configured(
            "a",
            &BTreeMap::from([(
                "mine".to_owned(),
                ScorerEntry {
                    scorer: HOOK_SCORER.into(),
                    sampling: Sampling::Ratio { rate: 0.5 },
                    options: Map::new(),
                },
            )]),
        )
        .unwrap();
        let by_key = RequestedScorer {
            key: "mine".into(),
            sampling: Some(Sampling::None),
            ..RequestedScorer::default()
        };
        let resolved = requested(&[by_key, hook("other")], &agent).unwrap();
        assert_eq!(resolved.len(), 2);
        assert_eq!(resolved[0].entry.sampling, Sampling::None);
        assert_eq!(resolved[1].id(), "other");

        let problems = requested(
            &[
                hook("x"),
                hook("x"),
                RequestedScorer {
                    key: "nope".into(),
                    ..RequestedScorer::default()
                },
                RequestedScorer {
                    key: "bad".into(),
                    scorer: "nonsense".into(),
                    ..RequestedScorer::default()
                },
                RequestedScorer {
                    key: "rate".into(),
                    scorer: HOOK_SCORER.into(),
                    sampling: Some(Sampling::Ratio { rate: 2.0 }),
                    ..RequestedScorer::default()
                },
                RequestedScorer {
                    key: "judge".into(),
                    scorer: "faithfulness".into(),
                    ..RequestedScorer::default()
                },
            ],
            &agent,
        )
        .unwrap_err();
        let fields: Vec<&str> = problems.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "scorers.scorers.1.key",
                "scorers.scorers.2.key",
                "scorers.scorers.3.scorer",
                "scorers.scorers.4.sampling.rate",
                "scorers.scorers.5.options.model",
            ]
        );
        assert!(problems[1].1.contains("configured: mine"), "{problems:?}");
        assert!(
            problems[2].1.contains("unknown scorer \"nonsense\""),
            "{problems:?}"
        );
    }

    #[test]
    fn configured_options_are_checked_by_their_scorer_naming_the_key() {
        let entry = |scorer: &str, options: serde_json::Value| ScorerEntry {
            scorer: scorer.into(),
            sampling: Sampling::None,
            options: options.as_object().cloned().unwrap_or_default(),
        };
        let built =
            |key: &str, e: ScorerEntry| configured("a", &BTreeMap::from([(key.to_owned(), e)]));
        let judged = json!({"model": "mock/judge", "scale": 2, "uncertainty_weight": 0.5});
        assert!(built("ok", entry("answer-relevancy", judged)).is_ok());
        assert!(built("ok", entry("tone", json!({"reference_tone": "calm"}))).is_ok());
        let err = built(
            "x",
            entry(
                "answer-relevancy",
                json!({"model": "mock/j", "scale": "big"}),
            ),
        )
        .unwrap_err();
        assert!(err.starts_with("agents.a.scorers.x.scale: "), "{err}");
        let err = built(
            "x",
            entry("bias", json!({"model": "mock/j", "threshold": 1})),
        )
        .unwrap_err();
        assert!(
            err.starts_with("agents.a.scorers.x") && err.contains("threshold"),
            "{err}"
        );
        let err = built("x", entry("tone", json!({"reference_tone": 3}))).unwrap_err();
        assert!(err.starts_with("agents.a.scorers.x"), "{err}");
        let err = built("x", entry("code-tool-call-accuracy", json!({}))).unwrap_err();
        assert!(err.starts_with("agents.a.scorers.x"), "{err}");
        // As the wire names them: below `options`.
        let wire = requested(
            &[RequestedScorer {
                key: "x".into(),
                scorer: "tone".into(),
                options: json!({"reference_tone": 3})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
                sampling: None,
            }],
            &[],
        )
        .unwrap_err();
        assert!(
            wire[0].0.starts_with("scorers.scorers.0.options"),
            "{wire:?}"
        );
    }
}
