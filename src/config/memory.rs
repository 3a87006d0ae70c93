//! An agent's memory settings (`[agents.memory]`) and their start-up checks.

use serde::Deserialize;

use super::{ConfigError, invalid};
use crate::memory::working::{self, Format, Scope, Settings};

/// Memory settings of an agent; a request's `memory.options` overrides them per run.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentMemoryConfig {
    /// Working memory: a Markdown template or a JSON Schema the model keeps current.
    pub working_memory: Option<WorkingMemoryConfig>,
}

/// `[agents.memory.working_memory]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkingMemoryConfig {
    /// On unless set to false (declaring the table turns it on).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// `resource` (default: shared by the resource's threads) or `thread`.
    #[serde(default)]
    pub scope: Scope,
    /// The Markdown template (default: the reference's).
    #[serde(default)]
    pub template: Option<String>,
    /// A JSON Schema (an object schema, as a TOML table or a JSON string); updates are merged.
    #[serde(default)]
    pub schema: Option<serde_json::Value>,
}

fn yes() -> bool {
    true
}

impl WorkingMemoryConfig {
    /// The run settings, or `None` when disabled; `Err` names what is wrong.
    pub fn settings(&self) -> Result<Option<Settings>, String> {
        if !self.enabled {
            return Ok(None);
        }
        let format = match (&self.template, &self.schema) {
            (Some(_), Some(_)) => return Err("set template or schema, not both".into()),
            (Some(template), None) => Format::Markdown {
                template: template.clone(),
            },
            (None, Some(schema)) => Format::Schema {
                schema: schema_value(schema)?,
            },
            (None, None) => Format::Markdown {
                template: working::DEFAULT_TEMPLATE.to_owned(),
            },
        };
        Ok(Some(Settings {
            scope: self.scope,
            format,
        }))
    }
}

/// A schema given as a table or as JSON text, checked to be an object JSON Schema.
pub fn schema_value(schema: &serde_json::Value) -> Result<serde_json::Value, String> {
    let schema = match schema {
        serde_json::Value::String(text) => {
            serde_json::from_str(text).map_err(|e| format!("schema is not valid JSON: {e}"))?
        }
        other => other.clone(),
    };
    if schema.get("type").and_then(serde_json::Value::as_str) != Some("object") {
        return Err("schema must be an object schema (\"type\": \"object\")".into());
    }
    jsonschema::validator_for(&schema)
        .map_err(|e| format!("schema is not a valid JSON Schema: {e}"))?;
    Ok(schema)
}

/// Checks an agent's memory table at start-up.
pub(super) fn validate(agent: &str, memory: &AgentMemoryConfig) -> Result<(), ConfigError> {
    if let Some(wm) = &memory.working_memory {
        wm.settings()
            .map_err(|e| invalid(&format!("agents.{agent}.memory.working_memory: {e}")))?;
    }
    Ok(())
}
