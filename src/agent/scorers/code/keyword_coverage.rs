//! `keyword-coverage-scorer`: the share of the input's keywords that the response repeats, the
//! keywords as `keyword-extractor` 0.0.28 finds them (English stopwords out, lowercased,
//! numbers dropped, duplicates dropped).

use std::collections::HashSet;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::json;

use super::{is_js_space, js_trim};
use crate::agent::scorers::{Scored, ScorerRun};

/// The reference's scorer id.
pub const ID: &str = "keyword-coverage-scorer";
/// The reference's scorer name.
pub const NAME: &str = "Keyword Coverage Scorer";
/// The reference's scorer description (it names compromise, which this scorer does not use).
pub const DESCRIPTION: &str = "Leverage the nlp method from \"compromise\" to extract elements from the input and output and calculate the coverage.";

/// The scorer takes no options.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeywordCoverageOptions {}

/// Scores a run.
pub fn score(run: &ScorerRun, _options: &KeywordCoverageOptions) -> Result<Scored, String> {
    let input = run.input_text();
    let output = run.output_text();
    if input.is_empty() && output.is_empty() {
        // The reference returns its two empty sets nested under `result` here, so its analyze
        // step finds no keywords and the score is 1.
        return Ok(Scored {
            score: 1.0,
            preprocess_step_result: Some(json!({
                "result": { "referenceKeywords": [], "responseKeywords": [] }
            })),
            analyze_step_result: Some(
                json!({ "totalKeywordsLength": 0, "matchedKeywordsLength": 0 }),
            ),
            ..Scored::default()
        });
    }
    let reference = extract_keywords(&input);
    let response = extract_keywords(&output);
    let response_set: HashSet<&str> = response.iter().map(String::as_str).collect();
    let total = reference.len();
    let matched = reference
        .iter()
        .filter(|k| response_set.contains(k.as_str()))
        .count();
    // The reference's analyze step counts nothing when neither side has a keyword; its score
    // is 1 whenever the input has none.
    let score = if total == 0 {
        1.0
    } else {
        matched as f64 / total as f64
    };
    Ok(Scored {
        score,
        preprocess_step_result: Some(json!({
            "referenceKeywords": reference,
            "responseKeywords": response,
        })),
        analyze_step_result: Some(
            json!({ "totalKeywordsLength": total, "matchedKeywordsLength": matched }),
        ),
        ..Scored::default()
    })
}

/// `keyword_extractor.extract(text, { language: 'english', remove_digits: true,
/// return_changed_case: true, remove_duplicates: true })`, in first-seen order.
pub fn extract_keywords(text: &str) -> Vec<String> {
    let stripped = strip_tags(text);
    let text = js_trim(&stripped);
    if text.is_empty() {
        return Vec::new();
    }
    let stopwords = stopwords();
    let mut seen = HashSet::new();
    let mut keywords = Vec::new();
    // `split(/\s/)`: every whitespace character separates, so runs give empty words.
    for word in text.split(is_js_space) {
        let mut w = if is_url(word) {
            word.to_owned()
        } else {
            strip_punctuation(word)
        };
        if w.encode_utf16().count() == 1 {
            w.retain(|c| !matches!(c, '_' | '@' | '&' | '#'));
        }
        let digits = w.chars().filter(char::is_ascii_digit).count();
        if digits > 0 && digits == w.encode_utf16().count() {
            w.clear();
        }
        if w.is_empty() {
            continue;
        }
        let lower = w.to_lowercase();
        if stopwords.contains(lower.as_str()) {
            continue;
        }
        // A URL keeps its case; every other keyword is lowercased.
        let keyword = if is_url(&w) { w } else { lower };
        if seen.insert(keyword.clone()) {
            keywords.push(keyword);
        }
    }
    keywords
}

/// `/https?:\/\/.*[\r\n]*/`: the word holds a URL.
fn is_url(word: &str) -> bool {
    word.contains("http://") || word.contains("https://")
}

/// `replace(/(<([^>]+)>)/gi, "")`: a `<`, one or more characters other than `>`, then `>`.
fn strip_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        let after = &rest[open + 1..];
        match after.find('>') {
            // No `>` left: nothing further can match.
            None => break,
            // `<>` is no tag; the `>` may still close a later `<`.
            Some(0) => {
                out.push_str(&rest[..=open]);
                rest = after;
            }
            Some(close) => {
                out.push_str(&rest[..open]);
                rest = &after[close + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Removes `.,;!?():"“”‘’` anywhere and an apostrophe at either end of the (original) word.
fn strip_punctuation(word: &str) -> String {
    let last = word.char_indices().last().map(|(i, _)| i);
    word.char_indices()
        .filter(|&(i, c)| {
            let edge_quote = c == '\'' && (i == 0 || Some(i) == last);
            !edge_quote
                && !matches!(
                    c,
                    '.' | ',' | ';' | '!' | '?' | '(' | ')' | ':' | '"' | '“' | '”' | '‘' | '’'
                )
        })
        .map(|(_, c)| c)
        .collect()
}

/// The English stopword list.
fn stopwords() -> &'static HashSet<&'static str> {
    static STOPWORDS: OnceLock<HashSet<&'static str>> = OnceLock::new();
    STOPWORDS.get_or_init(|| {
        include_str!("data/stopwords-en.txt")
            .lines()
            .filter(|line| !line.starts_with('#') && !line.is_empty())
            .collect()
    })
}
