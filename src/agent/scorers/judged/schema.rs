//! The JSON schemas the judge is asked to answer with: the reference's zod `outputSchema`s as
//! `compileSchema` turns them into JSON Schema (draft 2020-12, every field required unless
//! optional, no additional properties), key for key in the reference's order, since the
//! schema text is part of what the judge reads.

use serde_json::{Map, Value, json};

/// The draft the reference names in every schema.
const DRAFT: &str = "https://json-schema.org/draft/2020-12/schema";

/// A top-level schema: `object` with the draft named first.
pub(super) fn root(object: Value) -> Value {
    let mut map = Map::new();
    map.insert("$schema".to_owned(), json!(DRAFT));
    if let Value::Object(fields) = object {
        map.extend(fields);
    }
    Value::Object(map)
}

/// A closed object with `properties` in order and the `required` ones.
pub(super) fn object(properties: Vec<(&str, Value)>, required: &[&str]) -> Value {
    let properties: Map<String, Value> = properties
        .into_iter()
        .map(|(name, schema)| (name.to_owned(), schema))
        .collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// An array of `items`.
pub(super) fn array(items: Value) -> Value {
    json!({ "type": "array", "items": items })
}

/// A string.
pub(super) fn string() -> Value {
    json!({ "type": "string" })
}

/// A number.
pub(super) fn number() -> Value {
    json!({ "type": "number" })
}

/// A boolean.
pub(super) fn boolean() -> Value {
    json!({ "type": "boolean" })
}

/// One of the given strings.
pub(super) fn string_enum(values: &[&str]) -> Value {
    json!({ "type": "string", "enum": values })
}

/// `{ <name>: string[] }`, the extraction steps' schema.
pub(super) fn string_list(name: &str) -> Value {
    root(object(vec![(name, array(string()))], &[name]))
}

/// `{ <name>: [{ <fields>: string }] }`, the verdict steps' schema.
pub(super) fn string_records(name: &str, fields: &[&str]) -> Value {
    let item = object(fields.iter().map(|f| (*f, string())).collect(), fields);
    root(object(vec![(name, array(item))], &[name]))
}
