//! Working memory, as the reference (`@mastra/memory`) does it: a Markdown template or a JSON
//! Schema, the `updateWorkingMemory` tool (replace for Markdown, deep merge for a schema) and
//! the system message the model reads. Pure rules: storage is the caller's.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The tool the model updates working memory with.
pub const TOOL_NAME: &str = "updateWorkingMemory";

/// The store document kind of working memory (per thread or per resource).
pub const DOC_KIND: &str = "working_memory";

/// The reference's default Markdown template.
pub const DEFAULT_TEMPLATE: &str = "\n# User Information\n- **First Name**: \n- **Last Name**: \n- **Location**: \n- **Occupation**: \n- **Interests**: \n- **Goals**: \n- **Events**: \n- **Facts**: \n- **Projects**: \n";

const MARKDOWN_DESCRIPTION: &str = "Update the working memory with new information. Any data not included will be overwritten. Always pass data as string to the memory field. Never pass an object.";
const SCHEMA_DESCRIPTION: &str = "Update the working memory with new information. Data is merged with existing memory - only include fields you want to add or update. To preserve existing data, omit the field entirely. Arrays are replaced entirely when provided, so pass the complete array or omit it to keep the existing values.";
const MEMORY_PROPERTY_DESCRIPTION: &str = "The Markdown formatted working memory content to store. This MUST be a string. Never pass an object.";
const EMPTY_TEMPLATE_REFUSED: &str = "Attempted to replace existing working memory with empty template. Update skipped to prevent data loss.";
const NO_DATA: &str = "No memory data provided, existing memory unchanged.";

/// Whose working memory a run reads and updates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// One value per resource, shared by its threads (the reference's default).
    #[default]
    Resource,
    /// One value per thread.
    Thread,
}

/// How working memory is shaped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// Free Markdown following a template; updates replace it.
    Markdown {
        /// The template (the reference's default when none is configured).
        template: String,
    },
    /// JSON matching a schema; updates are deep-merged.
    Schema {
        /// The JSON Schema (an object schema).
        schema: Value,
    },
}

/// A run's working-memory settings (agent config merged with the request).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Whose memory.
    pub scope: Scope,
    /// Markdown template or JSON Schema.
    pub format: Format,
}

impl Settings {
    /// The `updateWorkingMemory` tool: (description, parameters) as the model sees them.
    pub fn tool(&self) -> (&'static str, Value) {
        match &self.format {
            Format::Markdown { .. } => (
                MARKDOWN_DESCRIPTION,
                json!({
                    "type": "object",
                    "properties": {
                        "memory": {"type": "string", "description": MEMORY_PROPERTY_DESCRIPTION},
                    },
                    "required": ["memory"],
                    "additionalProperties": false,
                }),
            ),
            Format::Schema { schema } => {
                let mut inner = schema.clone();
                if let Some(object) = inner.as_object_mut() {
                    object.remove("$schema");
                }
                (
                    SCHEMA_DESCRIPTION,
                    json!({
                        "type": "object",
                        "description": "The JSON formatted working memory content to store.",
                        "properties": {"memory": inner},
                        "required": ["memory"],
                    }),
                )
            }
        }
    }

    /// What the caller of GetWorkingMemory sees as the template: the Markdown template, or the
    /// empty object of the schema.
    pub fn template_text(&self) -> String {
        match &self.format {
            Format::Markdown { template } => template.trim().to_owned(),
            Format::Schema { schema } => empty_from_schema(schema).to_string(),
        }
    }

    /// The system message of a run: the tool instructions with the stored `data`, or the
    /// read-only text when the run saves nothing.
    pub fn system_message(&self, data: Option<&str>, read_only: bool) -> String {
        if read_only {
            return read_only_message(data);
        }
        let (kind, markdown) = match &self.format {
            Format::Markdown { .. } => ("Markdown", true),
            Format::Schema { .. } => ("JSON", false),
        };
        let string_rules = if markdown {
            "5. IMPORTANT: When calling updateWorkingMemory, the only valid parameter is the memory field. DO NOT pass an object.\n6. IMPORTANT: ALWAYS pass the data you want to store in the memory field as a string. DO NOT pass an object.\n7. IMPORTANT: Data must only be sent as a string no matter which format is used."
        } else {
            ""
        };
        let template_block = match &self.format {
            Format::Markdown { template } => {
                format!(
                    "<working_memory_template>\n{}\n</working_memory_template>",
                    template.trim()
                )
            }
            Format::Schema { .. } => String::new(),
        };
        let (json_intro, json_object) = match &self.format {
            Format::Schema { schema } => {
                let empty = empty_from_schema(schema);
                if empty.as_object().is_some_and(|o| !o.is_empty()) {
                    (
                        "When working with json data, the object format below represents the template:",
                        empty.to_string(),
                    )
                } else {
                    ("", String::new())
                }
            }
            Format::Markdown { .. } => ("", String::new()),
        };
        let data = data.unwrap_or("null");
        format!(
            "WORKING_MEMORY_SYSTEM_INSTRUCTION:
Store and update any conversation-relevant information by calling the updateWorkingMemory tool. If information might be referenced again - store it!

Guidelines:
1. Store anything that could be useful later in the conversation
2. Update proactively when information changes, no matter how small
3. Use {kind} format for all data
4. Act naturally - don't mention this system to users. Even though you're storing this information that doesn't make it your primary focus. Do not ask them generally for \"information about yourself\"
{string_rules}


{template_block}

{json_intro}
{json_object}

<working_memory_data>
{data}
</working_memory_data>

Notes:
- Update memory whenever referenced information changes
- If you're unsure whether to store something, store it (eg if the user tells you information about themselves, call updateWorkingMemory immediately to update it)
- This system is here so that you can maintain the conversation when your context window is very short. Update your working memory because you may need it to maintain the conversation without the full conversation history
- Do not remove empty sections - you must include the empty sections along with the ones you're filling in
- REMEMBER: the way you update your working memory is by calling the updateWorkingMemory tool with the entire {kind} content. The system will store it for you. The user will not see it.
- IMPORTANT: You MUST call updateWorkingMemory in every response to a prompt where you received relevant information.
- IMPORTANT: Preserve the {kind} formatting structure above while updating the content."
        )
    }

    /// Applies one `updateWorkingMemory` call to the stored value: the new value to store (if
    /// any) and the result the model sees. `Err` is a tool error (the reference throws).
    pub fn apply(&self, current: Option<&str>, args: &Value) -> Result<Update, String> {
        let input = args.get("memory");
        match &self.format {
            Format::Markdown { template } => {
                let new = match input {
                    Some(Value::String(text)) => text.clone(),
                    Some(other) => other.to_string(),
                    None => "undefined".to_owned(),
                };
                if let Some(existing) = current {
                    let template = collapse(template.trim());
                    if collapse(&new) == template && collapse(existing) != template {
                        return Ok(Update::unchanged(
                            json!({"success": false, "message": EMPTY_TEMPLATE_REFUSED}),
                        ));
                    }
                }
                Ok(Update::write(new))
            }
            Format::Schema { schema } => {
                let new = match input {
                    None | Some(Value::Null) => {
                        return Ok(Update::unchanged(
                            json!({"success": true, "message": NO_DATA}),
                        ));
                    }
                    Some(Value::String(text)) => serde_json::from_str(text).map_err(|e| {
                        format!(
                            "Failed to parse working memory input as JSON: {e}. Raw input: {}",
                            truncate_raw(text)
                        )
                    })?,
                    Some(value) => value.clone(),
                };
                let new = strip_optional_nulls(&new, schema);
                let existing = current
                    .and_then(|raw| serde_json::from_str::<Value>(raw).ok())
                    .and_then(|v| v.as_object().cloned());
                let update = new.as_object().cloned().unwrap_or_default();
                let merged = deep_merge(existing.as_ref(), &update);
                Ok(Update::write(Value::Object(merged).to_string()))
            }
        }
    }

    /// Checks content written through the API: with a schema it must be JSON matching it.
    pub fn check_content(&self, content: &str) -> Result<(), String> {
        let Format::Schema { schema } = &self.format else {
            return Ok(());
        };
        let value: Value =
            serde_json::from_str(content).map_err(|e| format!("must be JSON: {e}"))?;
        let validator = jsonschema::validator_for(schema)
            .map_err(|e| format!("the agent's working-memory schema is invalid: {e}"))?;
        match validator.iter_errors(&value).next() {
            None => Ok(()),
            Some(error) => {
                let at = error.instance_path().to_string();
                let at = if at.is_empty() { "/".to_owned() } else { at };
                Err(format!(
                    "does not match the working-memory schema at {at}: {error}"
                ))
            }
        }
    }
}

/// A request's changes to the agent's working-memory settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Overrides {
    /// On or off for this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Another scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
    /// Another template or schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
}

impl Overrides {
    /// Whether the request changes nothing.
    pub fn is_empty(&self) -> bool {
        self.enabled.is_none() && self.scope.is_none() && self.format.is_none()
    }
}

/// A run's settings: the agent's, changed by the request. A request naming a template or
/// schema turns working memory on (unless it also says `enabled: false`).
pub fn resolve(agent: Option<&Settings>, overrides: &Overrides) -> Option<Settings> {
    if overrides.is_empty() {
        return agent.cloned();
    }
    let on = overrides
        .enabled
        .unwrap_or(agent.is_some() || overrides.format.is_some());
    if !on {
        return None;
    }
    let base = agent.cloned().unwrap_or(Settings {
        scope: Scope::Resource,
        format: Format::Markdown {
            template: DEFAULT_TEMPLATE.to_owned(),
        },
    });
    Some(Settings {
        scope: overrides.scope.unwrap_or(base.scope),
        format: overrides.format.clone().unwrap_or(base.format),
    })
}

/// A run's working memory: its settings and the system message computed at the start (the
/// reference computes it once per run: an update shows in the next run).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunWorkingMemory {
    /// The settings.
    pub settings: Settings,
    /// The system message.
    pub prompt: String,
}

/// Text without `<working_memory>…</working_memory>` blocks.
pub fn strip_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<working_memory>") {
        out.push_str(&rest[..start]);
        match rest[start..].find("</working_memory>") {
            Some(end) => rest = &rest[start + end + "</working_memory>".len()..],
            None => rest = "",
        }
    }
    out.push_str(rest);
    out
}

/// The outcome of one tool call.
#[derive(Clone, Debug, PartialEq)]
pub struct Update {
    /// The value to store, if it changes.
    pub store: Option<String>,
    /// The tool result the model sees.
    pub result: Value,
}

impl Update {
    fn write(value: String) -> Self {
        Self {
            store: Some(value),
            result: json!({"success": true}),
        }
    }

    fn unchanged(result: Value) -> Self {
        Self {
            store: None,
            result,
        }
    }
}

fn read_only_message(data: Option<&str>) -> String {
    let data = data
        .filter(|d| !d.is_empty())
        .unwrap_or("No working memory data available.");
    format!(
        "WORKING_MEMORY_SYSTEM_INSTRUCTION (READ-ONLY):
The following is your working memory - persistent information about the user and conversation collected over previous interactions. This data is provided for context to help you maintain continuity.

<working_memory_data>
{data}
</working_memory_data>

Guidelines:
1. Use this information to provide personalized and contextually relevant responses
2. Act naturally - don't mention this system to users. This information should inform your responses without being explicitly referenced
3. This memory is read-only in the current session - you cannot update it

Notes:
- This system is here so that you can maintain the conversation when your context window is very short
- The user will not see the working memory data directly"
    )
}

/// Whitespace runs collapsed to one space, trimmed (the reference's template comparison).
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The raw input quoted in a parse error: at most 500 characters, then `...`.
fn truncate_raw(text: &str) -> String {
    match text.char_indices().nth(500) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_owned(),
    }
}

/// The reference's empty object for a schema: defaults, else empty values by type.
pub fn empty_from_schema(schema: &Value) -> Value {
    let mut out = Map::new();
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Value::Object(out);
    }
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Value::Object(out);
    };
    for (key, prop) in properties {
        let value = if let Some(default) = prop.get("default") {
            default.clone()
        } else {
            match prop.get("type").and_then(Value::as_str) {
                Some("object") if prop.get("properties").is_some() => empty_from_schema(prop),
                Some("object") => json!({}),
                Some("string") => json!(""),
                Some("array") => json!([]),
                Some("number" | "integer") => json!(0),
                Some("boolean") => json!(false),
                _ => Value::Null,
            }
        };
        out.insert(key.clone(), value);
    }
    Value::Object(out)
}

/// Nulls of optional properties are "not provided", not "delete" (strict providers make models
/// pad every property).
fn strip_optional_nulls(value: &Value, schema: &Value) -> Value {
    match value {
        Value::Array(items) => {
            let item_schema = schema.get("items").cloned().unwrap_or(Value::Null);
            Value::Array(
                items
                    .iter()
                    .map(|item| strip_optional_nulls(item, &item_schema))
                    .collect(),
            )
        }
        Value::Object(object) => {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let properties = schema.get("properties");
            let mut out = Map::new();
            for (key, v) in object {
                if v.is_null() && !required.contains(&key.as_str()) {
                    continue;
                }
                let sub = properties
                    .and_then(|p| p.get(key))
                    .cloned()
                    .unwrap_or(Value::Null);
                out.insert(key.clone(), strip_optional_nulls(v, &sub));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// The reference's merge: `null` deletes, arrays replace, objects merge, the rest overwrites.
pub fn deep_merge(
    existing: Option<&Map<String, Value>>,
    update: &Map<String, Value>,
) -> Map<String, Value> {
    let mut result = existing.cloned().unwrap_or_default();
    if update.is_empty() {
        return result;
    }
    for (key, value) in update {
        match value {
            Value::Null => {
                result.remove(key);
            }
            Value::Object(branch) => {
                let merged = deep_merge(result.get(key).and_then(Value::as_object), branch);
                result.insert(key.clone(), Value::Object(merged));
            }
            other => {
                result.insert(key.clone(), other.clone());
            }
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn markdown() -> Settings {
        Settings {
            scope: Scope::Resource,
            format: Format::Markdown {
                template: DEFAULT_TEMPLATE.to_owned(),
            },
        }
    }

    fn schema() -> Settings {
        Settings {
            scope: Scope::Thread,
            format: Format::Schema {
                schema: json!({
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "city": {"type": "string"},
                                   "tags": {"type": "array"}, "prefs": {"type": "object", "properties": {"tea": {"type": "boolean"}}}},
                }),
            },
        }
    }

    #[test]
    fn markdown_prompt_matches_the_reference_shape() {
        let text = markdown().system_message(None, false);
        assert!(text.starts_with("WORKING_MEMORY_SYSTEM_INSTRUCTION:\nStore and update"));
        // The template is trimmed: its last line loses its trailing space, the others keep it.
        assert!(text.contains("7. IMPORTANT: Data must only be sent as a string no matter which format is used.\n\n\n<working_memory_template>\n# User Information\n- **First Name**: \n"));
        assert!(text.contains("- **Projects**:\n</working_memory_template>\n\n\n\n\n<working_memory_data>\nnull\n</working_memory_data>"));
        assert!(text.ends_with("- IMPORTANT: Preserve the Markdown formatting structure above while updating the content."));
    }

    #[test]
    fn schema_prompt_shows_the_empty_object() {
        let text = schema().system_message(Some(r#"{"name":"Ada"}"#), false);
        assert!(text.contains("3. Use JSON format for all data\n4. Act naturally"));
        assert!(text.contains("\"information about yourself\"\n\n\n\n\n\nWhen working with json data, the object format below represents the template:\n{\"name\":\"\",\"city\":\"\",\"tags\":[],\"prefs\":{\"tea\":false}}\n\n<working_memory_data>\n{\"name\":\"Ada\"}\n</working_memory_data>"));
        assert!(text.contains("with the entire JSON content"));
    }

    #[test]
    fn read_only_prompt() {
        let text = markdown().system_message(None, true);
        assert!(text.starts_with("WORKING_MEMORY_SYSTEM_INSTRUCTION (READ-ONLY):\n"));
        assert!(text.contains(
            "<working_memory_data>\nNo working memory data available.\n</working_memory_data>"
        ));
    }

    #[test]
    fn markdown_updates_replace_but_never_with_the_empty_template() {
        let s = markdown();
        let update = s.apply(None, &json!({"memory": "# Ada"})).unwrap();
        assert_eq!(update.store.as_deref(), Some("# Ada"));
        assert_eq!(update.result, json!({"success": true}));
        let refused = s
            .apply(Some("# Ada"), &json!({"memory": DEFAULT_TEMPLATE}))
            .unwrap();
        assert_eq!(refused.store, None);
        assert_eq!(refused.result["success"], json!(false));
        // An object is stored as its JSON text, as the reference does.
        let object = s.apply(None, &json!({"memory": {"a": 1}})).unwrap();
        assert_eq!(object.store.as_deref(), Some(r#"{"a":1}"#));
    }

    #[test]
    fn schema_updates_merge_delete_and_replace_arrays() {
        let s = schema();
        let current = r#"{"name":"Ada","city":"Paris","tags":["a","b"],"prefs":{"tea":true}}"#;
        let update = s
            .apply(
                Some(current),
                &json!({"memory": {"city": null, "tags": ["c"], "prefs": {"coffee": true}, "name": null}}),
            )
            .unwrap();
        // `name` and `city` are optional, so their nulls mean "not provided".
        assert_eq!(
            update.store.as_deref(),
            Some(
                r#"{"name":"Ada","city":"Paris","tags":["c"],"prefs":{"tea":true,"coffee":true}}"#
            )
        );
        let parsed = s
            .apply(None, &json!({"memory": "{\"name\":\"Bo\"}"}))
            .unwrap();
        assert_eq!(parsed.store.as_deref(), Some(r#"{"name":"Bo"}"#));
        let bad = s.apply(None, &json!({"memory": "{nope"})).unwrap_err();
        assert!(
            bad.starts_with("Failed to parse working memory input as JSON: "),
            "{bad}"
        );
        let none = s.apply(Some(current), &json!({})).unwrap();
        assert_eq!(none.store, None);
        assert_eq!(none.result["message"], json!(NO_DATA));
    }

    #[test]
    fn api_content_is_checked_against_the_schema() {
        let s = schema();
        assert!(s.check_content(r#"{"name":"Ada"}"#).is_ok());
        assert!(
            s.check_content(r#"{"name":3}"#)
                .unwrap_err()
                .contains("/name")
        );
        assert!(
            s.check_content("nope")
                .unwrap_err()
                .starts_with("must be JSON")
        );
        assert!(markdown().check_content("anything").is_ok());
    }

    #[test]
    fn tools_as_the_model_sees_them() {
        let (description, parameters) = markdown().tool();
        assert!(
            description.starts_with("Update the working memory with new information. Any data")
        );
        assert_eq!(parameters["additionalProperties"], json!(false));
        let (description, parameters) = schema().tool();
        assert!(description.contains("Data is merged with existing memory"));
        assert_eq!(parameters["properties"]["memory"]["type"], json!("object"));
    }
}
