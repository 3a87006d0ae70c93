//! JavaScript semantics the reference's prompts and formulas depend on: how a number prints
//! inside a template literal, `JSON.stringify` (compact and indented), `Math.round`, and the
//! `trim`/`toLowerCase` its verdict checks use. A prompt that differs by one digit or one
//! key order is a different prompt, so these are exact. The printing and `trim` are the
//! crate's one copy, shared with the task tools and the processors.

pub(super) use crate::agent::processors::js_trim as trim;
pub(super) use crate::tasks::jsjson::{
    js_number_to_string as number, quote, stringify, stringify_pretty,
};

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

/// `String.prototype.toLowerCase` (Unicode default case mapping, as Rust's).
pub(super) fn lower(text: &str) -> String {
    text.to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn trim_uses_javascript_whitespace() {
        assert_eq!(trim("\u{feff} Yes \n"), "Yes");
        assert_eq!(trim("\u{85}x"), "\u{85}x");
    }
}
