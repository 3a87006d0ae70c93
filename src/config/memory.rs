//! An agent's memory settings (`[agents.memory]`): the embedder and semantic recall, as the
//! reference's `semanticRecall: true | {topK, messageRange, scope, threshold}`, and working
//! memory (its table is in `working_memory.rs`).

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::{ConfigError, invalid};

/// Most hits a recall may ask for.
pub const MAX_TOP_K: usize = 100;
/// Most neighbours on either side of a hit.
pub const MAX_MESSAGE_RANGE: usize = 50;

/// `[agents.memory]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentMemoryConfig {
    /// `provider/model` of an OpenAI-compatible `/embeddings` endpoint.
    pub embedder: Option<String>,
    /// `true`, or the options of semantic recall; unset or `false`: off.
    pub semantic_recall: Option<RecallSetting>,
    /// Working memory: a Markdown template or a JSON Schema the model keeps current.
    pub working_memory: Option<super::WorkingMemoryConfig>,
}

impl AgentMemoryConfig {
    /// The agent's recall options, when recall is on.
    pub fn recall(&self) -> Option<RecallOptions> {
        match &self.semantic_recall {
            Some(RecallSetting::Enabled(true)) => Some(RecallOptions::default()),
            Some(RecallSetting::Options(options)) => Some(options.clone()),
            _ => None,
        }
    }
}

/// `semantic_recall = true | false | { … }`.
#[derive(Clone, Debug, PartialEq)]
pub enum RecallSetting {
    /// On with the defaults, or off.
    Enabled(bool),
    /// On with these options.
    Options(RecallOptions),
}

/// Where recall searches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecallScope {
    /// Every thread of the resource (the reference's default).
    #[default]
    Resource,
    /// The run's thread only.
    Thread,
}

/// How many stored messages around each hit come along.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MessageRange {
    /// Messages before the hit.
    pub before: usize,
    /// Messages after the hit.
    pub after: usize,
}

impl Default for MessageRange {
    fn default() -> Self {
        Self {
            before: 1,
            after: 1,
        }
    }
}

/// Semantic recall options (defaults as the reference: top 4, one message either side,
/// resource scope, no threshold).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecallOptions {
    /// How many similar messages to find.
    pub top_k: usize,
    /// Neighbours of each hit: a number (both sides) or `{ before, after }`.
    pub message_range: MessageRange,
    /// `resource` (every thread of the resource) or `thread`.
    pub scope: RecallScope,
    /// Hits with a cosine similarity below this are dropped.
    pub threshold: Option<f64>,
}

impl Default for RecallOptions {
    fn default() -> Self {
        Self {
            top_k: 4,
            message_range: MessageRange::default(),
            scope: RecallScope::Resource,
            threshold: None,
        }
    }
}

impl RecallOptions {
    /// The first out-of-range value, as (key under `semantic_recall`, problem).
    pub fn problem(&self) -> Option<(&'static str, String)> {
        if !(1..=MAX_TOP_K).contains(&self.top_k) {
            return Some(("top_k", format!("must be 1 to {MAX_TOP_K}")));
        }
        let range = self.message_range;
        if range.before > MAX_MESSAGE_RANGE || range.after > MAX_MESSAGE_RANGE {
            return Some((
                "message_range",
                format!("must be 0 to {MAX_MESSAGE_RANGE} on either side"),
            ));
        }
        if self
            .threshold
            .is_some_and(|t| !t.is_finite() || !(-1.0..=1.0).contains(&t))
        {
            return Some(("threshold", "must be between -1 and 1".into()));
        }
        None
    }
}

/// Checks an agent's memory settings: a known embedder provider, an embedder when recall is
/// on, values in range.
pub(super) fn validate(
    agent: &str,
    memory: &AgentMemoryConfig,
    providers: &HashSet<&str>,
) -> Result<(), ConfigError> {
    let key = format!("agent {agent:?}: memory");
    if let Some(embedder) = &memory.embedder {
        let provider = embedder
            .split_once('/')
            .filter(|(p, m)| !p.is_empty() && !m.is_empty())
            .map(|(p, _)| p);
        if !provider.is_some_and(|p| providers.contains(p)) {
            return Err(invalid(&format!(
                "{key}.embedder {embedder:?} must be provider/model with a configured provider"
            )));
        }
    }
    if let Some(options) = memory.recall() {
        if memory.embedder.is_none() {
            return Err(invalid(&format!(
                "{key}.semantic_recall needs {key}.embedder (provider/model of an embeddings endpoint)"
            )));
        }
        if let Some((field, problem)) = options.problem() {
            return Err(invalid(&format!("{key}.semantic_recall.{field} {problem}")));
        }
    }
    if let Some(wm) = &memory.working_memory {
        wm.settings()
            .map_err(|e| invalid(&format!("{key}.working_memory: {e}")))?;
    }
    Ok(())
}

impl<'de> Deserialize<'de> for RecallSetting {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Setting;
        impl<'de> Visitor<'de> for Setting {
            type Value = RecallSetting;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true, false or a table of recall options")
            }
            fn visit_bool<E: de::Error>(self, on: bool) -> Result<Self::Value, E> {
                Ok(RecallSetting::Enabled(on))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let options = Deserialize::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(RecallSetting::Options(options))
            }
        }
        deserializer.deserialize_any(Setting)
    }
}

impl<'de> Deserialize<'de> for MessageRange {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Sides {
            before: usize,
            after: usize,
        }
        struct Range;
        impl<'de> Visitor<'de> for Range {
            type Value = MessageRange;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or { before, after }")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
                let n = usize::try_from(n).map_err(E::custom)?;
                Ok(MessageRange {
                    before: n,
                    after: n,
                })
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
                let n = u64::try_from(n).map_err(|_| E::custom("must not be negative"))?;
                self.visit_u64(n)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let sides: Sides =
                    Deserialize::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(MessageRange {
                    before: sides.before,
                    after: sides.after,
                })
            }
        }
        deserializer.deserialize_any(Range)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    const BASE: &str = r#"
        [[providers]]
        name = "mock"
        base_url = "http://127.0.0.1:1/v1"
        [[agents]]
        id = "a"
        model = "mock/m"
        [agents.memory]
    "#;

    fn check(extra: &str) -> Result<Config, String> {
        let config = Config::from_toml(&format!("{BASE}{extra}")).map_err(|e| e.to_string())?;
        config.validate().map_err(|e| e.to_string())?;
        Ok(config)
    }

    #[test]
    fn recall_settings_parse_in_every_form() {
        let config = check("embedder = \"mock/e\"\nsemantic_recall = true\n").unwrap();
        let memory = &config.agents[0].memory;
        assert_eq!(memory.recall(), Some(RecallOptions::default()));
        let config = check(
            "embedder = \"mock/e\"\nsemantic_recall = { top_k = 2, message_range = { before = 0, after = 3 }, scope = \"thread\", threshold = 0.5 }\n",
        )
        .unwrap();
        let recall = config.agents[0].memory.recall().unwrap();
        assert_eq!(recall.top_k, 2);
        assert_eq!(
            recall.message_range,
            MessageRange {
                before: 0,
                after: 3
            }
        );
        assert_eq!(
            (recall.scope, recall.threshold),
            (RecallScope::Thread, Some(0.5))
        );
        let config = check("embedder = \"mock/e\"\nsemantic_recall = { message_range = 2 }\n");
        let range = config.unwrap().agents[0]
            .memory
            .recall()
            .unwrap()
            .message_range;
        assert_eq!(
            range,
            MessageRange {
                before: 2,
                after: 2
            }
        );
        let off = check("semantic_recall = false\n").unwrap();
        assert_eq!(off.agents[0].memory.recall(), None);
    }

    #[test]
    fn bad_recall_settings_name_the_key() {
        let err = check("semantic_recall = true\n").unwrap_err();
        assert!(err.contains("memory.semantic_recall needs"), "{err}");
        let err = check("embedder = \"other/e\"\n").unwrap_err();
        assert!(err.contains("memory.embedder \"other/e\""), "{err}");
        let err = check("embedder = \"mock/e\"\nsemantic_recall = { top_k = 0 }\n").unwrap_err();
        assert!(
            err.contains("semantic_recall.top_k must be 1 to 100"),
            "{err}"
        );
        let err =
            check("embedder = \"mock/e\"\nsemantic_recall = { message_range = 99 }\n").unwrap_err();
        assert!(err.contains("semantic_recall.message_range"), "{err}");
        let err =
            check("embedder = \"mock/e\"\nsemantic_recall = { threshold = 2.0 }\n").unwrap_err();
        assert!(err.contains("semantic_recall.threshold"), "{err}");
        let err = check("embedder = \"mock/e\"\nsemantic_recall = { topk = 3 }\n").unwrap_err();
        assert!(err.contains("topk"), "{err}");
        let err = check("embedder = \"mock/e\"\nsemantic_recall = \"yes\"\n").unwrap_err();
        assert!(err.contains("true, false or a table"), "{err}");
    }
}
