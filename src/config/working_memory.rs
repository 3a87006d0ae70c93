//! `[agents.memory.working_memory]`: the template or schema the model keeps current.

use serde::Deserialize;

use crate::memory::working::{self, Format, Scope, Settings};

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
