//! `tone-scorer`: the response's sentiment as `sentiment` 5.0.2 scores it (AFINN-165 words and
//! ranked emoji, a negator flipping the next word), compared with a reference tone, or without
//! one how steady it stays from sentence to sentence.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::json;

use super::num;
use super::{is_js_space, js_trim};
use crate::agent::scorers::{Scored, ScorerRun};

/// The reference's scorer id.
pub const ID: &str = "tone-scorer";
/// The reference's scorer name.
pub const NAME: &str = "Tone Scorer";
/// The reference's scorer description.
pub const DESCRIPTION: &str = "Analyzes the tone and sentiment of agent responses using sentiment analysis. Can compare against a reference tone or evaluate sentiment stability.";

/// The scorer's options.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToneOptions {
    /// A text whose sentiment the response should match; without it (or when empty) the score
    /// is the response's sentiment stability.
    #[serde(default)]
    pub reference_tone: Option<String>,
}

/// Scores a run.
pub fn score(run: &ScorerRun, options: &ToneOptions) -> Result<Scored, String> {
    let message = run.output_text();
    let response = comparative(&message);
    if let Some(reference_tone) = options.reference_tone.as_deref().filter(|t| !t.is_empty()) {
        let reference = comparative(reference_tone);
        let difference = (response - reference).abs();
        let score = (1.0 - difference).max(0.0);
        return Ok(Scored {
            score,
            preprocess_step_result: Some(json!({
                "score": num(score),
                "responseSentiment": num(response),
                "referenceSentiment": num(reference),
                "difference": num(difference),
            })),
            ..Scored::default()
        });
    }
    let mut sentences = sentences(&message);
    if sentences.is_empty() {
        sentences.push(&message);
    }
    let sentiments: Vec<f64> = sentences.iter().map(|s| comparative(s)).collect();
    let count = sentiments.len() as f64;
    let average = sentiments.iter().fold(0.0, |sum, s| sum + s) / count;
    let variance = sentiments
        .iter()
        .fold(0.0, |sum, s| sum + (s - average) * (s - average))
        / count;
    let stability = (1.0 - variance).max(0.0);
    Ok(Scored {
        score: stability,
        preprocess_step_result: Some(json!({
            "score": num(stability),
            "avgSentiment": num(average),
            "sentimentVariance": num(variance),
        })),
        ..Scored::default()
    })
}

/// `text.match(/[^.!?]+[.!?]+/g)`: each run of other characters with the terminators after
/// it; text after the last terminator is left out, as there.
fn sentences(text: &str) -> Vec<&str> {
    let is_end = |c: char| matches!(c, '.' | '!' | '?');
    let mut out = Vec::new();
    let mut start = None;
    let mut in_end = false;
    for (i, c) in text.char_indices() {
        match (is_end(c), start) {
            (false, Some(s)) if in_end => {
                out.push(&text[s..i]);
                start = Some(i);
                in_end = false;
            }
            (false, None) => start = Some(i),
            (true, Some(_)) => in_end = true,
            _ => {}
        }
    }
    if let (Some(s), true) = (start, in_end) {
        out.push(&text[s..]);
    }
    out
}

/// `sentiment.analyze(text).comparative`: the summed scores of the labelled tokens over the
/// number of tokens.
pub fn comparative(text: &str) -> f64 {
    let tokens = tokenize(text);
    let (labels, negators) = labels();
    let mut score = 0i64;
    for (i, token) in tokens.iter().enumerate() {
        if let Some(&value) = labels.get(token.as_str()) {
            let negated = i > 0 && negators.contains(tokens[i - 1].as_str());
            score += if negated { -value } else { value };
        }
    }
    // `tokens` is never empty: splitting "" gives one empty token, as in JavaScript.
    score as f64 / tokens.len() as f64
}

/// sentiment's tokenizer: lowercased, newlines and `.,/#!?$%^&*;:{}=_\`"~()` as spaces, runs of
/// two or more whitespace characters as one space, trimmed, split on spaces (so a lone tab
/// stays inside a token, as there).
fn tokenize(text: &str) -> Vec<String> {
    let lowered = text.to_lowercase();
    let spaced: Vec<char> = lowered
        .chars()
        .map(|c| match c {
            '\n' | '.' | ',' | '/' | '#' | '!' | '?' | '$' | '%' | '^' | '&' | '*' | ';' | ':'
            | '{' | '}' | '=' | '_' | '`' | '"' | '~' | '(' | ')' => ' ',
            c => c,
        })
        .collect();
    let mut collapsed = String::with_capacity(spaced.len());
    let mut i = 0;
    while i < spaced.len() {
        let run = spaced[i..].iter().take_while(|c| is_js_space(**c)).count();
        if run >= 2 {
            collapsed.push(' ');
            i += run;
        } else {
            collapsed.push(spaced[i]);
            i += 1;
        }
    }
    js_trim(&collapsed).split(' ').map(str::to_owned).collect()
}

/// The labels (word or emoji to score) and the negators.
fn labels() -> &'static (HashMap<&'static str, i64>, HashSet<&'static str>) {
    static LABELS: OnceLock<(HashMap<&'static str, i64>, HashSet<&'static str>)> = OnceLock::new();
    LABELS.get_or_init(|| {
        let mut labels = HashMap::new();
        let mut negators = HashSet::new();
        for line in include_str!("data/sentiment-en.tsv").lines() {
            if line.starts_with('#') {
                continue;
            }
            let Some((word, value)) = line.split_once('\t') else {
                continue;
            };
            if let Some(negator) = word.strip_prefix('!') {
                negators.insert(negator);
            } else if let Ok(value) = value.parse() {
                labels.insert(word, value);
            }
        }
        (labels, negators)
    })
}
