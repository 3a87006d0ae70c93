//! Scorers (the reference's evaluations) as an agent's config and a request name them:
//! `[agents.scorers.<key>]` tables with a `scorer`, its options and its `sampling`. What each
//! scorer computes is `agent/scorers/`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The built-in scorers judged by a model: they need `model`.
pub const JUDGED_SCORERS: [&str; 9] = [
    "answer-relevancy",
    "faithfulness",
    "hallucination",
    "toxicity",
    "bias",
    "tool-call-accuracy",
    "context-relevance",
    "context-precision",
    "prompt-alignment",
];

/// The built-in scorers computed locally.
pub const CODE_SCORERS: [&str; 6] = [
    "completeness",
    "content-similarity",
    "keyword-coverage",
    "textual-difference",
    "tone",
    "code-tool-call-accuracy",
];

/// The scorer name of a custom scorer answered by the run's SCORE hook.
pub const HOOK_SCORER: &str = "hook";

/// One scorer entry: which scorer, its options, which runs it scores.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScorerEntry {
    /// A built-in scorer's name (see [`JUDGED_SCORERS`], [`CODE_SCORERS`]) or `hook`.
    pub scorer: String,
    /// Which runs it scores (default: all).
    #[serde(default)]
    pub sampling: Sampling,
    /// The scorer's own options (a judged scorer's judge is `model`).
    #[serde(flatten)]
    pub options: Map<String, Value>,
}

impl ScorerEntry {
    /// The judge model of a judged scorer.
    pub fn model(&self) -> Option<&str> {
        self.options.get("model").and_then(Value::as_str)
    }

    /// The options without `model` (what the scorer itself reads).
    pub fn scorer_options(&self) -> Map<String, Value> {
        let mut options = self.options.clone();
        options.remove("model");
        options
    }
}

/// Which runs a scorer scores, as the reference's `sampling`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum Sampling {
    /// Every run.
    #[default]
    None,
    /// A run when its hash falls below `rate` (0..=1).
    Ratio {
        /// The share of runs scored.
        rate: f64,
    },
}

/// Checks one entry below `at` (`scorers.relevancy`): a known scorer, a rate within 0..=1, a
/// judged scorer's `model` (`provider/model`) and no `model` on the others. Options are
/// checked by the scorer itself when it is built.
pub fn check_entry(at: &str, entry: &ScorerEntry) -> Result<(), (String, String)> {
    let name = entry.scorer.as_str();
    let judged = JUDGED_SCORERS.contains(&name);
    if !judged && !CODE_SCORERS.contains(&name) && name != HOOK_SCORER {
        return Err((
            format!("{at}.scorer"),
            format!(
                "unknown scorer {name:?} (known: {}, {}, {HOOK_SCORER})",
                JUDGED_SCORERS.join(", "),
                CODE_SCORERS.join(", ")
            ),
        ));
    }
    if let Sampling::Ratio { rate } = entry.sampling
        && !(0.0..=1.0).contains(&rate)
    {
        return Err((
            format!("{at}.sampling.rate"),
            "must be between 0 and 1".into(),
        ));
    }
    match (judged, entry.options.get("model")) {
        (true, None) => Err((
            format!("{at}.model"),
            format!("the judged scorer {name:?} needs a judge: provider/model"),
        )),
        (true, Some(model)) => match model.as_str() {
            Some(m)
                if m.split_once('/')
                    .is_some_and(|(p, m)| !p.is_empty() && !m.is_empty()) =>
            {
                Ok(())
            }
            _ => Err((format!("{at}.model"), "must be provider/model".into())),
        },
        (false, Some(_)) => Err((
            format!("{at}.model"),
            format!("{name:?} is not judged by a model"),
        )),
        (false, None) => Ok(()),
    }
}
