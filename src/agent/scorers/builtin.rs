//! The built-in scorers behind one type: the judged ones of `judged/` and the rule-based ones
//! of `code/`, built from the scorer's config name (`answer-relevancy`, `tone`) and its
//! options, every problem naming the option.

use serde_json::{Map, Value};
use serde_path_to_error::Track;

use super::code::CodeScorer;
use super::judged::{self, JudgedScorer};
use super::{Judge, Scored, ScorerRun};

/// A built-in scorer, ready to score.
#[derive(Debug, Clone)]
pub enum Builtin {
    /// One a judge model answers.
    Judged(JudgedScorer),
    /// One computed in-process.
    Code(CodeScorer),
}

/// A rule-based scorer's config name and its tag in [`CodeScorer`].
const CODE: [(&str, &str); 6] = [
    ("completeness", "completeness"),
    ("content-similarity", "content_similarity"),
    ("keyword-coverage", "keyword_coverage"),
    ("textual-difference", "textual_difference"),
    ("tone", "tone"),
    ("code-tool-call-accuracy", "tool_call_accuracy"),
];

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
        let built = if let Some((_, id)) = JUDGED.iter().find(|(n, _)| *n == name) {
            let value = Value::Object(options.clone());
            let de = serde_path_to_error::Deserializer::new(value, &mut track);
            JudgedScorer::from_options(id, de).map(Self::Judged)
        } else if let Some((_, tag)) = CODE.iter().find(|(n, _)| *n == name) {
            let mut tagged = options.clone();
            tagged.insert("type".into(), Value::from(*tag));
            let de = serde_path_to_error::Deserializer::new(Value::Object(tagged), &mut track);
            serde::Deserialize::deserialize(de)
                .map_err(|e: serde_json::Error| e.to_string())
                .and_then(|scorer: CodeScorer| scorer.validate().map(|()| scorer))
                .map(Self::Code)
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
            Self::Code(s) => s.id(),
        }
    }

    /// The reference's scorer name.
    pub fn name(&self) -> &str {
        match self {
            Self::Judged(s) => s.name(),
            Self::Code(s) => s.name(),
        }
    }

    /// Scores `run`; judged scorers ask `judge`.
    pub async fn score(&self, run: &ScorerRun, judge: &dyn Judge) -> Result<Scored, String> {
        match self {
            Self::Judged(s) => s.score(run, judge).await,
            Self::Code(s) => s.score(run),
        }
    }
}
