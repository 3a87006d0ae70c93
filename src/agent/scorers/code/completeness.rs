//! `completeness-scorer`: the share of the input's elements (its nouns, verbs in the
//! infinitive, topics and words, as the NLP library `compromise` finds them) that the response
//! covers.
//!
//! The submodules port the parts of compromise 14.17.0 the scorer reaches, on compromise's own
//! data (`data/compromise-en.json`): the tokenizer and its contractions, the lexicon, the
//! pre-tagger's passes, all 570 post-tagger rules (its match engine and sweep order), the
//! chunker, `nouns()`, `verbs().toInfinitive()` and `topics()`. Left out, so this is an
//! approximation: sentence merging at quotes, parentheses and CJK full stops; clause splits at
//! parentheses, quotations and words such as 'although'; aliases ('&' as 'and'); French
//! contractions; compromise's subject finder (do/does follows the last noun phrase before the
//! verb); and `verbs()`' split patterns are written out as code. It gives compromise's elements
//! for every recorded case and the 206 texts of `tests/reference/completeness.json`.

mod context;
mod contractions;
mod document;
mod infinitive;
mod matcher;
mod model;
mod phrases;
mod posttag;
mod pretag;
mod term;
#[cfg(test)]
pub(super) mod tests;
mod tokenize;

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::json;
use unicode_normalization::UnicodeNormalization;

use super::js_trim;
use crate::agent::scorers::{Scored, ScorerRun};

/// The reference's scorer id.
pub const ID: &str = "completeness-scorer";
/// The reference's scorer name.
pub const NAME: &str = "Completeness Scorer";
/// The reference's scorer description.
pub const DESCRIPTION: &str = "Leverage the nlp method from \"compromise\" to extract elements from the input and output and calculate the coverage.";

/// The scorer takes no options.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompletenessOptions {}

/// Scores a run. (The reference's "Inputs cannot be null or undefined" cannot happen here: a
/// message's text is always a string.)
pub fn score(run: &ScorerRun, _options: &CompletenessOptions) -> Result<Scored, String> {
    let input_elements = elements(js_trim(&run.input_text()));
    let output_elements = elements(js_trim(&run.output_text()));
    let output_set: HashSet<&str> = output_elements.iter().map(String::as_str).collect();
    let missing: Vec<&String> = input_elements
        .iter()
        .filter(|e| !output_set.contains(e.as_str()))
        .collect();
    let score = coverage(&input_elements, &output_elements);
    Ok(Scored {
        score,
        preprocess_step_result: Some(json!({
            "inputElements": input_elements,
            "outputElements": output_elements,
            "missingElements": missing,
            "elementCounts": { "input": input_elements.len(), "output": output_elements.len() },
        })),
        ..Scored::default()
    })
}

/// The reference's `extractElements`: the words of the nouns, of the verbs in the infinitive,
/// of the topics and of all terms (the verbs' conversion shows in the terms too, as the
/// reference converts the document in place), normalized, first occurrence kept.
pub fn elements(text: &str) -> Vec<String> {
    let parsed = document::Document::parse(text).elements();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for phrase in parsed
        .nouns
        .iter()
        .chain(&parsed.verbs)
        .chain(&parsed.topics)
        .chain(&parsed.terms)
    {
        for word in split_words(phrase) {
            if seen.insert(word.clone()) {
                out.push(word);
            }
        }
    }
    out
}

/// `normalizeString`: diacritics removed (NFD, then U+0300..U+036F dropped), lowercased.
fn normalize(text: &str) -> String {
    let stripped: String = text
        .nfd()
        .filter(|c| !('\u{300}'..='\u{36f}').contains(c))
        .collect();
    stripped.to_lowercase()
}

/// `cleanAndSplitTerm`: the normalized text's runs of `[a-z0-9]`.
fn split_words(phrase: &str) -> Vec<String> {
    normalize(phrase)
        .split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit()))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `calculateCoverage`: the share of `original` that some element of `simplified` covers: equal
/// for words of up to three letters, else one containing the other with the shorter over 60 %
/// of the longer. (The reference normalizes both again here; elements are already normalized
/// ASCII words, so lengths in bytes are its UTF-16 lengths.)
fn coverage(original: &[String], simplified: &[String]) -> f64 {
    if original.is_empty() {
        return if simplified.is_empty() { 1.0 } else { 0.0 };
    }
    let covered = original
        .iter()
        .filter(|element| simplified.iter().any(|s| covers(element, s)))
        .count();
    covered as f64 / original.len() as f64
}

fn covers(element: &str, simplified: &str) -> bool {
    if element.len() <= 3 {
        return element == simplified;
    }
    let (longer, shorter) = if element.len() > simplified.len() {
        (element, simplified)
    } else {
        (simplified, element)
    };
    longer.contains(shorter) && shorter.len() as f64 / longer.len() as f64 > 0.6
}
