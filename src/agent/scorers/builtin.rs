//! The built-in scorers behind one type: the judged ones of `judged/` and the rule-based ones
//! of `code/`, built from the scorer's config name (`answer-relevancy`, `tone`) and its
//! options, every problem naming the option.

use serde_json::{Map, Value};
use serde_path_to_error::Track;

use super::judged::{self, JudgedScorer};
use super::{Judge, Scored, ScorerRun};

/// A built-in scorer, ready to score.
#[derive(Debug, Clone)]
pub enum Builtin {
    /// One a judge model answers.
    Judged(JudgedScorer),
}

/// A judged scorer's config name and the reference's id.
const JUDGED: [(&str, &str); 9] = [
    ("answer-relevancy", judged::answer_relevancy::ID),
    ("faithfulness", judged::faithfulness::ID),
    ("hallucination", judged::hallucination::ID),
    ("toxicity", judged::toxicity::ID),
    ("bias", judged::bias::ID),
    ("tool-call-accuracy", judged::tool_call_accuracy::ID),
    ("context-relevance", judged::context_relevance::ID),
    ("context-precision", judged::context_precision::ID),
    ("prompt-alignment", judged::prompt_alignment::ID),
];

impl Builtin {
    /// Builds the scorer `name` from its options; an error names the option (`scale`), or
    /// none when it concerns the options as a whole.
    pub fn parse(
        name: &str,
        options: &Map<String, Value>,
    ) -> Result<Self, (Option<String>, String)> {
        let mut track = Track::new();
        let value = Value::Object(options.clone());
        let built = if let Some((_, id)) = JUDGED.iter().find(|(n, _)| *n == name) {
            let de = serde_path_to_error::Deserializer::new(value, &mut track);
            JudgedScorer::from_options(id, de).map(Self::Judged)
        } else {
            return Err((Some("scorer".into()), format!("unknown scorer {name:?}")));
        };
        built.map_err(|why| {
            let path = track.path().to_string();
            ((!path.is_empty() && path != ".").then_some(path), why)
        })
    }

    /// The reference's scorer id.
    pub fn id(&self) -> &str {
        match self {
            Self::Judged(s) => s.id(),
        }
    }

    /// The reference's scorer name.
    pub fn name(&self) -> &str {
        match self {
            Self::Judged(s) => s.name(),
        }
    }

    /// Scores `run`; judged scorers ask `judge`.
    pub async fn score(&self, run: &ScorerRun, judge: &dyn Judge) -> Result<Scored, String> {
        match self {
            Self::Judged(s) => s.score(run, judge).await,
        }
    }
}
