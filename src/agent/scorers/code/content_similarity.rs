//! `content-similarity-scorer`: the Sørensen–Dice coefficient of the input's and the response's
//! character bigrams, as `string-similarity` 4.0.4's `compareTwoStrings` computes it.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::json;

use super::{is_js_space, js_trim};
use crate::agent::scorers::{Scored, ScorerRun};

/// The reference's scorer id.
pub const ID: &str = "content-similarity-scorer";
/// The reference's scorer name.
pub const NAME: &str = "Content Similarity Scorer";
/// The reference's scorer description.
pub const DESCRIPTION: &str = "Calculates content similarity between input and output messages using string comparison algorithms.";

/// The scorer's options. As in the reference, leaving both out means both `true`; once either
/// is given, the other one left out is `false` (the reference's default applies to the whole
/// options object, not to each field).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContentSimilarityOptions {
    /// Compare lowercased texts.
    #[serde(default)]
    pub ignore_case: Option<bool>,
    /// Collapse runs of whitespace into one space and trim.
    #[serde(default)]
    pub ignore_whitespace: Option<bool>,
}

impl ContentSimilarityOptions {
    /// `(ignore_case, ignore_whitespace)` as the reference resolves them.
    pub fn effective(&self) -> (bool, bool) {
        match (self.ignore_case, self.ignore_whitespace) {
            (None, None) => (true, true),
            (case, space) => (case.unwrap_or(false), space.unwrap_or(false)),
        }
    }
}

/// Scores a run.
pub fn score(run: &ScorerRun, options: &ContentSimilarityOptions) -> Result<Scored, String> {
    let (ignore_case, ignore_whitespace) = options.effective();
    let prepare = |text: String| {
        let text = if ignore_case {
            text.to_lowercase()
        } else {
            text
        };
        if ignore_whitespace {
            js_trim(&collapse_whitespace(&text)).to_owned()
        } else {
            text
        }
    };
    let processed_input = prepare(run.input_text());
    let processed_output = prepare(run.output_text());
    let score = compare_two_strings(&processed_input, &processed_output);
    Ok(Scored {
        score,
        preprocess_step_result: Some(json!({
            "processedInput": processed_input,
            "processedOutput": processed_output,
        })),
        ..Scored::default()
    })
}

/// Every run of JavaScript whitespace as one space (`replace(/\s+/g, ' ')`).
pub(super) fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_space = false;
    for c in text.chars() {
        if is_js_space(c) {
            if !in_space {
                out.push(' ');
            }
            in_space = true;
        } else {
            out.push(c);
            in_space = false;
        }
    }
    out
}

/// `compareTwoStrings`: whitespace removed, bigrams of UTF-16 code units (an astral character
/// is two units, as in JavaScript), each bigram of the second matched at most as often as it
/// occurs in the first.
pub fn compare_two_strings(first: &str, second: &str) -> f64 {
    let units = |s: &str| -> Vec<u16> {
        s.chars()
            .filter(|c| !is_js_space(*c))
            .collect::<String>()
            .encode_utf16()
            .collect()
    };
    let (first, second) = (units(first), units(second));
    if first == second {
        return 1.0;
    }
    if first.len() < 2 || second.len() < 2 {
        return 0.0;
    }
    let mut bigrams: HashMap<(u16, u16), usize> = HashMap::with_capacity(first.len());
    for pair in first.windows(2) {
        *bigrams.entry((pair[0], pair[1])).or_default() += 1;
    }
    let mut intersection = 0usize;
    for pair in second.windows(2) {
        if let Some(count) = bigrams.get_mut(&(pair[0], pair[1])).filter(|c| **c > 0) {
            *count -= 1;
            intersection += 1;
        }
    }
    (2.0 * intersection as f64) / ((first.len() + second.len() - 2) as f64)
}
