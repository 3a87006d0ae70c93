//! `textual-difference-scorer`: how much of the input the response keeps, as the length of
//! their longest common subsequence of UTF-16 code units against both lengths (the reference's
//! stand-in for Python's `SequenceMatcher.ratio()`), with word changes and a length-based
//! confidence beside it.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::json;

use super::content_similarity::collapse_whitespace;
use super::num;
use super::{is_js_space, js_trim};
use crate::agent::scorers::{Scored, ScorerRun};

/// The reference's scorer id.
pub const ID: &str = "textual-difference-scorer";
/// The reference's scorer name.
pub const NAME: &str = "Textual Difference Scorer";
/// The reference's scorer description.
pub const DESCRIPTION: &str =
    "Calculate textual difference between input and output using sequence matching algorithms.";

/// The scorer takes no options.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextualDifferenceOptions {}

/// Scores a run.
pub fn score(run: &ScorerRun, _options: &TextualDifferenceOptions) -> Result<Scored, String> {
    let input = run.input_text();
    let output = run.output_text();
    // JavaScript's `.length` and indexing count UTF-16 code units.
    let input_units: Vec<u16> = input.encode_utf16().collect();
    let output_units: Vec<u16> = output.encode_utf16().collect();
    let ratio = ratio(&input_units, &output_units);
    let changes = count_changes(&input, &output);
    let max_length = input_units.len().max(output_units.len());
    let length_diff = if max_length > 0 {
        input_units.len().abs_diff(output_units.len()) as f64 / max_length as f64
    } else {
        0.0
    };
    let confidence = 1.0 - length_diff;
    Ok(Scored {
        score: ratio,
        preprocess_step_result: Some(json!({
            "ratio": num(ratio),
            "confidence": num(confidence),
            "changes": changes,
            "lengthDiff": num(length_diff),
        })),
        ..Scored::default()
    })
}

/// `2 * LCS / (len(a) + len(b))`; 1 for equal texts, 0 when one is empty.
fn ratio(a: &[u16], b: &[u16]) -> f64 {
    if a == b {
        return 1.0;
    }
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    (2.0 * lcs_length(a, b) as f64) / ((a.len() + b.len()) as f64)
}

/// The longest common subsequence's length: the reference's O(n·m) table, kept two rows at a
/// time.
fn lcs_length(a: &[u16], b: &[u16]) -> usize {
    let mut previous = vec![0usize; b.len() + 1];
    let mut current = vec![0usize; b.len() + 1];
    for &x in a {
        for (j, &y) in b.iter().enumerate() {
            current[j + 1] = if x == y {
                previous[j] + 1
            } else {
                previous[j + 1].max(current[j])
            };
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

/// The words changed: with whitespace normalized, the longer text's word count less the words
/// greedily matched; texts differing only in whitespace count the difference in word counts
/// (at least 1).
fn count_changes(input: &str, output: &str) -> usize {
    let input_normalized = collapse_whitespace(input);
    let output_normalized = collapse_whitespace(output);
    let (input_normalized, output_normalized) =
        (js_trim(&input_normalized), js_trim(&output_normalized));
    if input_normalized == output_normalized {
        if input != output {
            return words(input).len().abs_diff(words(output).len()).max(1);
        }
        return 0;
    }
    let input_words = words(input_normalized);
    let output_words = words(output_normalized);
    if input_words.is_empty() || output_words.is_empty() {
        return input_words.len().max(output_words.len());
    }
    input_words.len().max(output_words.len()) - common_words(&input_words, &output_words)
}

/// `split(/\s+/).filter(w => w.length > 0)`.
fn words(text: &str) -> Vec<&str> {
    text.split(is_js_space).filter(|w| !w.is_empty()).collect()
}

/// The reference's greedy pairing (each word of `a` takes the first unused equal word of
/// `b`) pairs, for every word, as many as the fewer of its occurrences: counted here in linear
/// time instead of its O(n·m) scan.
fn common_words(a: &[&str], b: &[&str]) -> usize {
    let mut available: HashMap<&str, usize> = HashMap::with_capacity(b.len());
    for word in b {
        *available.entry(word).or_default() += 1;
    }
    a.iter()
        .filter(|word| match available.get_mut(**word) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        })
        .count()
}
