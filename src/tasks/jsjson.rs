//! `JSON.stringify` (compact and indented) and `Number.prototype.toString()` as JavaScript
//! prints them, for texts that quote JSON or numbers the way the reference does: the task
//! tools' argument quotes and the judged scorers' prompts. serde_json's printer differs in
//! what shows up in such texts: numbers (`1.0` vs `1`, exponents) and the order of
//! integer-like keys (JavaScript objects list them first, ascending).

use serde_json::{Map, Value};

/// `JSON.stringify(value)`, byte-identical to JavaScript's.
pub(crate) fn stringify(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, None, 0);
    out
}

/// `JSON.stringify(value, null, 2)`, byte-identical to JavaScript's.
pub(crate) fn stringify_pretty(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, Some(2), 0);
    out
}

/// JavaScript's `s.slice(0, max)` (UTF-16 units) plus `... (truncated)` when longer.
///
/// A cut through a surrogate pair drops the whole character: Rust strings cannot hold the
/// lone half JavaScript would keep.
pub(super) fn truncate_utf16(text: &str, max: usize) -> String {
    if text.encode_utf16().count() <= max {
        return text.to_owned();
    }
    let mut units = 0;
    let mut end = 0;
    for (offset, c) in text.char_indices() {
        units += c.len_utf16();
        if units > max {
            break;
        }
        end = offset + c.len_utf8();
    }
    format!("{}... (truncated)", &text[..end])
}

/// Writes `value` at nesting `depth`, each level indented `indent` spaces (`None`: compact).
fn write_value(out: &mut String, value: &Value, indent: Option<usize>, depth: usize) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) => out.push_str(&quote(s)),
        Value::Array(items) => write_array(out, items, indent, depth),
        Value::Object(map) => write_object(out, map, indent, depth),
    }
}

fn write_array(out: &mut String, items: &[Value], indent: Option<usize>, depth: usize) {
    if items.is_empty() {
        out.push_str("[]");
        return;
    }
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        newline(out, indent, depth + 1);
        write_value(out, item, indent, depth + 1);
    }
    newline(out, indent, depth);
    out.push(']');
}

fn write_object(out: &mut String, map: &Map<String, Value>, indent: Option<usize>, depth: usize) {
    if map.is_empty() {
        out.push_str("{}");
        return;
    }
    out.push('{');
    for (i, (key, value)) in js_key_order(map).into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        newline(out, indent, depth + 1);
        out.push_str(&quote(key));
        // The indented form puts a space after the colon; the compact one does not.
        out.push_str(if indent.is_some() { ": " } else { ":" });
        write_value(out, value, indent, depth + 1);
    }
    newline(out, indent, depth);
    out.push('}');
}

/// The line break and indentation before an item; nothing when compact.
fn newline(out: &mut String, indent: Option<usize>, depth: usize) {
    if let Some(width) = indent {
        out.push('\n');
        out.push_str(&" ".repeat(width * depth));
    }
}

/// JavaScript property order: array-index keys ascending, then the others as inserted.
fn js_key_order(map: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut indexed: Vec<(u32, (&String, &Value))> = Vec::new();
    let mut named = Vec::new();
    for entry in map {
        match array_index(entry.0) {
            Some(index) => indexed.push((index, entry)),
            None => named.push(entry),
        }
    }
    indexed.sort_by_key(|(index, _)| *index);
    indexed
        .into_iter()
        .map(|(_, entry)| entry)
        .chain(named)
        .collect()
}

/// A canonical array index: `0` or digits without a leading zero, below 2^32 - 1.
fn array_index(key: &str) -> Option<u32> {
    let canonical =
        key == "0" || (!key.starts_with('0') && key.bytes().all(|b| b.is_ascii_digit()));
    if !canonical {
        return None;
    }
    key.parse::<u32>().ok().filter(|&n| n != u32::MAX)
}

/// `JSON.stringify` of a string: the quoted literal. serde_json escapes exactly the
/// characters JavaScript escapes in well-formed strings (quote, backslash, control
/// characters with lowercase hex).
pub(crate) fn quote(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// A JSON number as JavaScript prints it after parsing it into a double.
fn number(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(x) if x.is_finite() => js_number_to_string(x),
        // JSON.stringify writes non-finite numbers as null; parsed JSON never has them.
        Some(_) => "null".to_owned(),
        None => n.to_string(),
    }
}

/// `${x}` of a JavaScript number: `Number.prototype.toString()` (ECMA-262 Number::toString).
pub(crate) fn js_number_to_string(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if x == 0.0 {
        return "0".to_owned(); // also -0
    }
    // Rust's `{:e}` gives the shortest round-trip digits, the same digits JavaScript uses.
    let formatted = format!("{:e}", x.abs());
    let (mantissa, exponent) = formatted.split_once('e').unwrap_or((&formatted, "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exponent: i64 = exponent.parse().unwrap_or(0);
    let sign = if x < 0.0 { "-" } else { "" };
    format!("{sign}{}", place_decimal_point(&digits, exponent + 1))
}

/// Lays out digits `d1 d2 … dk` meaning `0.d1d2…dk × 10^n` the way JavaScript does.
fn place_decimal_point(digits: &str, n: i64) -> String {
    let k = digits.len() as i64;
    if k <= n && n <= 21 {
        return format!("{digits}{}", "0".repeat((n - k) as usize));
    }
    if 0 < n && n <= 21 {
        let (int, frac) = digits.split_at(n as usize);
        return format!("{int}.{frac}");
    }
    if -6 < n && n <= 0 {
        return format!("0.{}{digits}", "0".repeat((-n) as usize));
    }
    let e = n - 1;
    let e_sign = if e < 0 { '-' } else { '+' };
    let (first, rest) = digits.split_at(1);
    if rest.is_empty() {
        format!("{first}e{e_sign}{}", e.abs())
    } else {
        format!("{first}.{rest}e{e_sign}{}", e.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_print_like_javascript() {
        let cases = [
            (1.0, "1"),
            (-2.5, "-2.5"),
            (0.1, "0.1"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (123456789.125, "123456789.125"),
            (1e-7, "1e-7"),
            (0.000001, "0.000001"),
            (1.5e-10, "1.5e-10"),
            (-0.0, "0"),
            (12345678901234567890.0, "12345678901234567000"),
            (0.53, "0.53"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for (x, expected) in cases {
            assert_eq!(js_number_to_string(x), expected, "{x}");
        }
    }

    #[test]
    fn layout_matches_json_stringify() {
        let value: Value = serde_json::from_str(
            r#"{"b": [1.0, {}, []], "10": "x\n\"y\"", "2": null, "a": {"c": true}}"#,
        )
        .unwrap();
        assert_eq!(
            stringify_pretty(&value),
            "{\n  \"2\": null,\n  \"10\": \"x\\n\\\"y\\\"\",\n  \"b\": [\n    1,\n    {},\n    []\n  ],\n  \"a\": {\n    \"c\": true\n  }\n}"
        );
        assert_eq!(stringify_pretty(&json!("s")), "\"s\"");
        assert_eq!(stringify_pretty(&json!(null)), "null");
        assert_eq!(
            stringify(&value),
            r#"{"2":null,"10":"x\n\"y\"","b":[1,{},[]],"a":{"c":true}}"#
        );
        assert_eq!(
            stringify_pretty(&json!([{"a": 1, "b": []}])),
            "[\n  {\n    \"a\": 1,\n    \"b\": []\n  }\n]"
        );
        assert_eq!(quote("say \"hi\"\u{1}"), "\"say \\\"hi\\\"\\u0001\"");
    }

    #[test]
    fn truncation_counts_utf16_units() {
        assert_eq!(truncate_utf16("abc", 3), "abc");
        assert_eq!(truncate_utf16("abcd", 3), "abc... (truncated)");
        // "😀" is two UTF-16 units: a cut through it drops it.
        assert_eq!(truncate_utf16("a😀b", 2), "a... (truncated)");
        assert_eq!(truncate_utf16("a😀b", 3), "a😀... (truncated)");
    }
}
