//! Conversions between `serde_json::Value` (how agentd handles JSON) and the protobuf
//! well-known `Value`/`Struct` types (how the wire carries it).

use prost_types::value::Kind;
use prost_types::{ListValue, Struct, Value};

/// Converts a protobuf `Value` to JSON; non-finite numbers become `null` (JSON has none).
pub fn from_proto_value(value: &Value) -> serde_json::Value {
    match &value.kind {
        None | Some(Kind::NullValue(_)) => serde_json::Value::Null,
        Some(Kind::BoolValue(b)) => serde_json::Value::Bool(*b),
        Some(Kind::NumberValue(n)) => number(*n),
        Some(Kind::StringValue(s)) => serde_json::Value::String(s.clone()),
        Some(Kind::ListValue(list)) => {
            serde_json::Value::Array(list.values.iter().map(from_proto_value).collect())
        }
        Some(Kind::StructValue(s)) => serde_json::Value::Object(from_proto_struct(s)),
    }
}

/// Converts a protobuf `Struct` to a JSON object (fields sorted by key, as protobuf maps are unordered).
pub fn from_proto_struct(s: &Struct) -> serde_json::Map<String, serde_json::Value> {
    let mut keys: Vec<&String> = s.fields.keys().collect();
    keys.sort();
    keys.into_iter()
        .map(|k| (k.clone(), from_proto_value(&s.fields[k])))
        .collect()
}

/// Converts JSON to a protobuf `Value`.
pub fn to_proto_value(value: &serde_json::Value) -> Value {
    let kind = match value {
        serde_json::Value::Null => Kind::NullValue(0),
        serde_json::Value::Bool(b) => Kind::BoolValue(*b),
        serde_json::Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        serde_json::Value::String(s) => Kind::StringValue(s.clone()),
        serde_json::Value::Array(items) => Kind::ListValue(ListValue {
            values: items.iter().map(to_proto_value).collect(),
        }),
        serde_json::Value::Object(map) => Kind::StructValue(to_proto_struct(map)),
    };
    Value { kind: Some(kind) }
}

/// Converts a JSON object to a protobuf `Struct`.
pub fn to_proto_struct(map: &serde_json::Map<String, serde_json::Value>) -> Struct {
    Struct {
        fields: map
            .iter()
            .map(|(k, v)| (k.clone(), to_proto_value(v)))
            .collect(),
    }
}

/// Protobuf numbers are doubles; integral ones go back to JSON integers so ids and counts
/// survive a round trip unchanged.
fn number(n: f64) -> serde_json::Value {
    const MAX_EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if n.fract() == 0.0 && n.abs() <= MAX_EXACT {
        serde_json::Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(serde_json::Value::Null, serde_json::Value::Number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_json() {
        let original = json!({"a": [1, 2.5, "x", null, true], "b": {"c": -3}});
        assert_eq!(from_proto_value(&to_proto_value(&original)), original);
    }

    #[test]
    fn non_finite_numbers_become_null() {
        let v = Value {
            kind: Some(Kind::NumberValue(f64::NAN)),
        };
        assert_eq!(from_proto_value(&v), serde_json::Value::Null);
    }
}
