//! Token estimates without a tokenizer, as the reference's token limiter makes them (the npm
//! package `tokenx` 1.3.0, bundled in `@mastra/core` 1.71.0: text split into whitespace,
//! punctuation and word segments, each costed by its script and length). Lengths are UTF-16
//! code units where `tokenx` uses `.length`, code points where it iterates characters, as
//! JavaScript counts them.

use std::collections::HashSet;
use std::sync::OnceLock;

use super::unicode::is_js_space;
use super::utf16_len;

/// Characters per token of a word in no listed language.
const DEFAULT_CHARS_PER_TOKEN: f64 = 6.0;
/// Segments this short (in UTF-16 units) are one token.
const SHORT_TOKEN_THRESHOLD: usize = 3;

/// The estimated tokens of `text`.
pub fn estimate(text: &str) -> u64 {
    segments(text).map(segment_tokens).sum()
}

/// The start of `text` that fits in `end` tokens (`tokenx`'s `sliceByTokens(text, 0, end)`, with
/// a cut through a surrogate pair repaired to U+FFFD as the reference's `sliceByTokensSafe`).
pub fn slice_to(text: &str, end: u64) -> String {
    let mut out: Vec<u16> = Vec::new();
    let mut position = 0u64;
    for segment in segments(text) {
        if position >= end {
            break;
        }
        let tokens = segment_tokens(segment);
        if tokens == 0 {
            out.extend(segment.encode_utf16());
            continue;
        }
        let segment_end = position + tokens;
        let overlap_end = tokens.min(end - position);
        if overlap_end == tokens {
            out.extend(segment.encode_utf16());
        } else {
            let units: Vec<u16> = segment.encode_utf16().collect();
            // JavaScript's floating-point arithmetic, then `Math.ceil`.
            let char_end = ((overlap_end as f64 / tokens as f64) * units.len() as f64).ceil();
            let char_end = (char_end as usize).min(units.len());
            out.extend_from_slice(&units[..char_end]);
        }
        position = segment_end;
    }
    String::from_utf16_lossy(&out)
}

/// What a character is for splitting.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Space,
    Punct,
    Word,
}

fn class(c: char) -> Class {
    if is_js_space(c) {
        Class::Space
    } else if is_punct(c) {
        Class::Punct
    } else {
        Class::Word
    }
}

fn is_punct(c: char) -> bool {
    matches!(
        c,
        '.' | ','
            | '!'
            | '?'
            | ';'
            | '('
            | ')'
            | '{'
            | '}'
            | '['
            | ']'
            | '<'
            | '>'
            | ':'
            | '/'
            | '\\'
            | '|'
            | '@'
            | '#'
            | '$'
            | '%'
            | '^'
            | '&'
            | '*'
            | '+'
            | '='
            | '`'
            | '~'
            | '_'
            | '-'
    )
}

/// `text.split(/(\s+|[punct]+)/)` without empty pieces: runs of whitespace, runs of
/// punctuation, and the words between them.
fn segments(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let first = rest.chars().next()?;
        let kind = class(first);
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                let k = class(c);
                // A word runs until whitespace or punctuation; a run of either stays one kind.
                if kind == Class::Word {
                    k != Class::Word
                } else {
                    k != kind
                }
            })
            .map_or(rest.len(), |(i, _)| i);
        let (segment, tail) = rest.split_at(end);
        rest = tail;
        Some(segment)
    })
}

fn segment_tokens(segment: &str) -> u64 {
    if segment.chars().all(is_js_space) {
        return 0;
    }
    if segment.chars().any(is_cjk) {
        return segment.chars().count() as u64;
    }
    if is_number(segment) {
        return 1;
    }
    let units = utf16_len(segment);
    if units <= SHORT_TOKEN_THRESHOLD {
        return 1;
    }
    if segment.chars().any(is_punct) {
        return ceil(units as f64 / 2.0);
    }
    let per_token = language_chars_per_token(segment).unwrap_or(DEFAULT_CHARS_PER_TOKEN);
    ceil(units as f64 / per_token)
}

/// `/^\d+(?:[.,]\d+)*$/` (ASCII digits).
fn is_number(segment: &str) -> bool {
    segment
        .split(['.', ','])
        .all(|run| !run.is_empty() && run.bytes().all(|b| b.is_ascii_digit()))
}

fn ceil(x: f64) -> u64 {
    // Token counts are small and non-negative.
    x.ceil() as u64
}

/// `tokenx`'s CJK class (UTF-16 code units, so astral characters never match).
fn is_cjk(c: char) -> bool {
    matches!(
        c,
        '\u{4e00}'..='\u{9fff}'
            | '\u{3400}'..='\u{4dbf}'
            | '\u{3000}'..='\u{303f}'
            | '\u{ff00}'..='\u{ffef}'
            | '\u{30a0}'..='\u{30ff}'
            | '\u{2e80}'..='\u{2eff}'
            | '\u{31c0}'..='\u{31ef}'
            | '\u{3200}'..='\u{32ff}'
            | '\u{3300}'..='\u{33ff}'
            | '\u{ac00}'..='\u{d7af}'
            | '\u{1100}'..='\u{11ff}'
            | '\u{3130}'..='\u{318f}'
            | '\u{a960}'..='\u{a97f}'
            | '\u{d7b0}'..='\u{d7ff}'
    )
}

/// The language rules, in order: a segment containing one of the characters (matched
/// case-insensitively, as a JavaScript `/[…]/i` class) costs that many characters per token.
const LANGUAGES: [(&str, f64); 3] = [
    ("äöüßẞ", 3.0),
    ("éèêëàâîïôûùüÿçœæáíóúñ", 3.0),
    ("ąćęłńóśźżěščřžýůúďťň", 3.5),
];

fn language_chars_per_token(segment: &str) -> Option<f64> {
    static CLASSES: OnceLock<Vec<HashSet<char>>> = OnceLock::new();
    let classes = CLASSES.get_or_init(|| {
        LANGUAGES
            .iter()
            .map(|(chars, _)| chars.chars().map(canonical).collect())
            .collect()
    });
    LANGUAGES
        .iter()
        .zip(classes)
        .find(|(_, class)| segment.chars().any(|c| class.contains(&canonical(c))))
        .map(|((_, per_token), _)| *per_token)
}

/// JavaScript's case folding for a non-Unicode `/i` regex: the upper case when it is one
/// BMP character and does not turn a non-ASCII character into an ASCII one.
fn canonical(c: char) -> char {
    let mut upper = c.to_uppercase();
    match (upper.next(), upper.next()) {
        (Some(u), None)
            if u.len_utf16() == 1
                && c.len_utf16() == 1
                && !(c as u32 >= 128 && (u as u32) < 128) =>
        {
            u
        }
        _ => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_split_on_whitespace_and_punctuation_runs() {
        let parts: Vec<&str> = segments("Hello, world!!  foo_bar\n\tx").collect();
        assert_eq!(
            parts,
            [
                "Hello", ",", " ", "world", "!!", "  ", "foo", "_", "bar", "\n\t", "x"
            ]
        );
    }

    #[test]
    fn slicing_keeps_whole_segments_then_a_proportional_cut() {
        assert_eq!(slice_to("", 3), "");
        assert_eq!(slice_to("one two three", 0), "");
        let text = "internationalization";
        assert_eq!(estimate(text), 4);
        assert_eq!(slice_to(text, 2), "internatio");
        // However long, a run of digits is one token.
        assert_eq!(estimate("12345678901234"), 1);
    }
}
