//! JavaScript semantics the reference's prompts and formulas depend on: how a number prints
//! inside a template literal, `JSON.stringify` (compact and indented), `Math.round`, and the
//! `trim`/`toLowerCase` its verdict checks use. A prompt that differs by one digit or one
//! key order is a different prompt, so these are exact.

use serde_json::{Map, Value};

/// `${x}` of a JavaScript number (`Number.prototype.toString()`).
pub(super) fn number(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if x == 0.0 {
        return "0".to_owned(); // also -0
    }
    // `{:e}` gives the shortest digits that round-trip, the digits JavaScript prints too.
    let formatted = format!("{:e}", x.abs());
    let (mantissa, exponent) = formatted.split_once('e').unwrap_or((&formatted, "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exponent: i64 = exponent.parse().unwrap_or(0);
    let sign = if x < 0.0 { "-" } else { "" };
    format!("{sign}{}", layout(&digits, exponent + 1))
}

/// Digits `d1…dk` meaning `0.d1…dk × 10^n`, laid out as ECMA-262 Number::toString does.
fn layout(digits: &str, n: i64) -> String {
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

/// `Math.round`: the nearest integer, halves toward +∞ (unlike `f64::round`).
pub(super) fn math_round(x: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    let floor = x.floor();
    // Exact for every finite double: both share the exponent range that matters.
    if x - floor >= 0.5 { floor + 1.0 } else { floor }
}

/// The evals' `roundToTwoDecimals`: `Math.round((x + Number.EPSILON) * 100) / 100`.
pub(super) fn round_to_two_decimals(x: f64) -> f64 {
    math_round((x + f64::EPSILON) * 100.0) / 100.0
}

/// `Math.max(a, b)`: NaN wins, unlike `f64::max`.
pub(super) fn max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// `Math.min(a, b)`: NaN wins, unlike `f64::min`.
pub(super) fn min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// `String.prototype.trim`: JavaScript's whitespace, which differs from Rust's (it trims
/// U+FEFF and keeps U+0085).
pub(super) fn trim(text: &str) -> &str {
    text.trim_matches(|c| {
        matches!(
            c,
            '\u{9}'..='\u{d}'
                | ' '
                | '\u{a0}'
                | '\u{1680}'
                | '\u{2000}'..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
        )
    })
}

/// `String.prototype.toLowerCase` (Unicode default case mapping, as Rust's).
pub(super) fn lower(text: &str) -> String {
    text.to_lowercase()
}

/// `JSON.stringify(value)`.
pub(super) fn stringify(value: &Value) -> String {
    let mut out = String::new();
    write(&mut out, value, None, 0);
    out
}

/// `JSON.stringify(value, null, 2)`.
pub(super) fn stringify_pretty(value: &Value) -> String {
    let mut out = String::new();
    write(&mut out, value, Some(2), 0);
    out
}

/// `JSON.stringify` of a string: the quoted literal.
pub(super) fn quote(text: &str) -> String {
    // serde_json escapes exactly what JavaScript escapes in well-formed strings: the quote,
    // the backslash and control characters (short forms, else lowercase `\u00xx`).
    Value::String(text.to_owned()).to_string()
}

fn write(out: &mut String, value: &Value, indent: Option<usize>, depth: usize) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match n.as_f64() {
            // JSON.stringify writes non-finite numbers as null; parsed JSON never has them.
            Some(x) if x.is_finite() => out.push_str(&number(x)),
            Some(_) => out.push_str("null"),
            None => out.push_str(&n.to_string()),
        },
        Value::String(s) => out.push_str(&quote(s)),
        Value::Array(items) => {
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
                write(out, item, indent, depth + 1);
            }
            newline(out, indent, depth);
            out.push(']');
        }
        Value::Object(map) => {
            if map.is_empty() {
                out.push_str("{}");
                return;
            }
            out.push('{');
            for (i, (key, item)) in key_order(map).into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, indent, depth + 1);
                out.push_str(&quote(key));
                out.push(':');
                if indent.is_some() {
                    out.push(' ');
                }
                write(out, item, indent, depth + 1);
            }
            newline(out, indent, depth);
            out.push('}');
        }
    }
}

fn newline(out: &mut String, indent: Option<usize>, depth: usize) {
    if let Some(width) = indent {
        out.push('\n');
        out.push_str(&" ".repeat(width * depth));
    }
}

/// JavaScript's property order: array-index keys ascending, then the others as inserted.
fn key_order(map: &Map<String, Value>) -> Vec<(&String, &Value)> {
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
    let canonical = key == "0"
        || (!key.is_empty() && !key.starts_with('0') && key.bytes().all(|b| b.is_ascii_digit()));
    if !canonical {
        return None;
    }
    key.parse::<u32>().ok().filter(|&n| n != u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_print_like_javascript() {
        for (x, expected) in [
            (1.0, "1"),
            (0.53, "0.53"),
            (-2.5, "-2.5"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (1e-7, "1e-7"),
            (0.000001, "0.000001"),
            (-0.0, "0"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-Infinity"),
        ] {
            assert_eq!(number(x), expected, "{x}");
        }
    }

    #[test]
    fn rounding_matches_math_round() {
        assert_eq!(math_round(2.5), 3.0);
        assert_eq!(math_round(-2.5), -2.0);
        assert_eq!(math_round(0.49999999999999994), 0.0);
        assert_eq!(round_to_two_decimals(1.005), 1.01);
        assert_eq!(round_to_two_decimals(1.3 / 3.0 * 10.0), 4.33);
        assert_eq!(round_to_two_decimals(0.1 + 0.2), 0.3);
    }

    #[test]
    fn stringify_matches_javascript() {
        let value: Value =
            serde_json::from_str(r#"{"b":[1.0,{},[]],"10":"x\n\"y\"","2":null,"a":{"c":true}}"#)
                .unwrap();
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
    fn trim_uses_javascript_whitespace() {
        assert_eq!(trim("\u{feff} Yes \n"), "Yes");
        assert_eq!(trim("\u{85}x"), "\u{85}x");
    }
}
