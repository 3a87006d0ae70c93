//! compromise's tokenizer: a text into sentences, a sentence into terms (whitespace, hyphens,
//! punctuation split off), each term's normal and machine forms, and the contractions it
//! expands before tagging ("don't" → do + not, "we're" → we + are).

use std::sync::OnceLock;

use regex::Regex;

use super::model::{Model, model};
use super::term::Term;

/// JavaScript's `\s` as a regex class (Rust's `\s` differs at U+0085 and U+FEFF).
const WS: &str = r"[\t\n\x0B\x0C\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}]";

const STOPS: &str = r".!?\x{203D}\x{2E18}\x{203C}\x{2047}-\x{2049}\x{0964}\x{0965}\x{061F}\x{06D4}\x{0589}\x{1362}\x{1367}\x{104B}\x{17D4}\x{3002}";

fn is_js_space(c: char) -> bool {
    super::super::is_js_space(c)
}

struct Patterns {
    line_break: Regex,
    stop_split: Regex,
    stop_only: Regex,
    acronym_end: Regex,
    ellipsis_end: Regex,
    final_stop: Regex,
    hyphen_word: Regex,
    number_word: Regex,
    full_number: Regex,
    has_acronym: Regex,
    chillin: Regex,
    slash: Regex,
    range_start: Regex,
    range_end: Regex,
    lower_acronym: Regex,
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        // Constant patterns: a failure here is a bug, caught by every test.
        let re = |p: &str| Regex::new(p).expect("a valid constant pattern");
        Patterns {
            line_break: re(r"(?:\r?\n|\r)+"),
            stop_split: re(&format!("[{STOPS}]+{WS}")),
            stop_only: re(&format!("^[{STOPS}]+{WS}$")),
            acronym_end: re(r"(?i)[ .][A-Z]\.? *$"),
            ellipsis_end: re(r"(?:\x{2026}|\.{2,}) *$"),
            final_stop: re(r"[.!?\x{203D}\x{2E18}\x{203C}\x{2047}-\x{2049}] *$"),
            hyphen_word: re(r"(?i)^([a-z\x{C0}-\x{FF}`'/]+)[-–—]([a-z0-9\x{C0}-\x{FF}].*)"),
            number_word: re(r#"(?i)^[('"]?([0-9]{1,4})[-–—]([a-z\x{C0}-\x{FF}`"'/-]+[)'"]?$)"#),
            full_number: re(r"^[(+\-]?[0-9]+(th|st|nd|rd)?[)+\-]?$"),
            has_acronym: re(r"(?i)^[a-z]\.([a-z]\.)+"),
            chillin: re(r"[sn]['’]$"),
            slash: re(r"\p{L} ?/ ?\p{L}+$"),
            range_start: re(r"^[0-9]{1,4}(:[0-9][0-9])?([a-z]{1,2})? ?[-–—] ?$"),
            range_end: re(r"^[0-9]{1,4}([a-z]{1,2})? ?$"),
            lower_acronym: re(r"([a-z]\.)+[a-z]\.?$"),
        }
    })
}

/// The text as sentences of terms, contractions expanded.
pub(super) fn tokenize(text: &str) -> Vec<Vec<Term>> {
    let model = model();
    split_sentences(text)
        .iter()
        .map(|sentence| {
            let mut terms: Vec<Term> = split_terms(sentence)
                .iter()
                .map(|t| parse_term(t, model))
                .collect();
            super::contractions::expand(&mut terms, model);
            for term in &mut terms {
                set_machine(term);
            }
            terms
        })
        .filter(|terms| !terms.is_empty())
        .collect()
}

/// The terms of a short text (one sentence), untagged: what compromise's `replace()`
/// inserts.
pub(super) fn words_of(text: &str) -> Vec<Term> {
    let model = model();
    split_terms(text)
        .iter()
        .map(|t| parse_term(t, model))
        .collect()
}

/// `splitSentences`: split after sentence-ending punctuation followed by whitespace and at
/// line breaks, then chunks without letters and non-sentences (abbreviations, initials,
/// ellipses) merged into the next. (compromise's CJK full stops, quotation and parenthesis
/// merging are left out.)
fn split_sentences(text: &str) -> Vec<String> {
    if text.chars().all(is_js_space) {
        return Vec::new();
    }
    let p = patterns();
    let mut splits: Vec<String> = Vec::new();
    for line in split_keeping(&p.line_break, text) {
        let mut pieces = split_keeping(&p.stop_split, &line);
        for o in 0..pieces.len() {
            if o + 1 < pieces.len()
                && !pieces[o + 1].is_empty()
                && p.stop_only.is_match(&pieces[o + 1])
            {
                let next = std::mem::take(&mut pieces[o + 1]);
                pieces[o].push_str(&next);
            }
            if !pieces[o].is_empty() {
                splits.push(pieces[o].clone());
            }
        }
    }
    // Chunks with no letter (or only whitespace) join the previous one, or the next.
    let mut chunks: Vec<String> = Vec::new();
    let mut carry = String::new();
    for (i, s) in splits.iter().enumerate() {
        let s = format!("{carry}{s}");
        carry.clear();
        let lettered = s.chars().any(|c| c.is_alphanumeric() || is_symbol_other(c));
        if s.chars().all(is_js_space) || !lettered {
            if let Some(last) = chunks.last_mut() {
                last.push_str(&s);
                continue;
            } else if i + 1 < splits.len() {
                carry = s;
                continue;
            }
        }
        chunks.push(s);
    }
    let model = model();
    let mut sentences: Vec<String> = Vec::new();
    let mut pending = String::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let c = format!("{pending}{chunk}");
        pending.clear();
        if i + 1 < chunks.len() && !is_sentence(&c, model) && !c.ends_with('\n') {
            pending = c;
        } else if !c.is_empty() {
            sentences.push(c);
        }
    }
    if sentences.is_empty() {
        return vec![text.to_owned()];
    }
    // Leading whitespace moves to the end of the previous sentence.
    for i in 1..sentences.len() {
        let trimmed = sentences[i].trim_start_matches(is_js_space).to_owned();
        let ws = sentences[i][..sentences[i].len() - trimmed.len()].to_owned();
        sentences[i - 1].push_str(&ws);
        sentences[i] = trimmed;
    }
    sentences
}

/// `str.split(/(re)/)`: the pieces and the separators between them, in order.
fn split_keeping(re: &Regex, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut last = 0;
    for m in re.find_iter(text) {
        out.push(text[last..m.start()].to_owned());
        out.push(m.as_str().to_owned());
        last = m.end();
    }
    out.push(text[last..].to_owned());
    out
}

/// `\p{So}`, which compromise counts as letter-like when merging sentences (emoji).
fn is_symbol_other(c: char) -> bool {
    !c.is_alphanumeric() && !c.is_ascii() && !c.is_whitespace() && !is_punctuation(c)
}

fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(c, '\u{2010}'..='\u{2027}' | '\u{2030}'..='\u{205e}' | '\u{3000}'..='\u{303f}' | '\u{a1}' | '\u{a7}' | '\u{ab}' | '\u{b6}' | '\u{b7}' | '\u{bb}' | '\u{bf}')
}

/// `isSentence`: has a letter, and does not end with an initial, an acronym, an ellipsis or
/// a known abbreviation.
fn is_sentence(s: &str, model: &Model) -> bool {
    let p = patterns();
    if !s.chars().any(char::is_alphabetic) {
        return false;
    }
    if p.acronym_end.is_match(s) {
        return false;
    }
    let b = s.as_bytes();
    if s.len() == 3 && b[0].is_ascii_uppercase() && b[1] == b'.' && b[2] == b' ' {
        return false;
    }
    if p.ellipsis_end.is_match(s) {
        return false;
    }
    let txt = p.final_stop.replace(s, "");
    let last = txt.split(' ').next_back().unwrap_or("").to_lowercase();
    !(model.abbreviations.contains(&last) && s.trim_end_matches(' ').ends_with('.'))
}

/// `splitTerms`: words split at whitespace (and at hyphens between words), each with the
/// whitespace and punctuation-only pieces after it.
fn split_terms(sentence: &str) -> Vec<String> {
    let model = model();
    let mut pieces: Vec<String> = Vec::new();
    // `str.split(/(\S+)/)`: whitespace runs and words alternate.
    let mut rest = sentence;
    while !rest.is_empty() {
        let space = rest.find(|c: char| !is_js_space(c)).unwrap_or(rest.len());
        pieces.push(rest[..space].to_owned());
        rest = &rest[space..];
        let word = rest.find(is_js_space).unwrap_or(rest.len());
        if word > 0 {
            let w = &rest[..word];
            if has_hyphen(w, model) {
                pieces.extend(split_hyphens(w));
            } else {
                pieces.push(w.to_owned());
            }
        }
        rest = &rest[word..];
    }
    let not_word = |w: &str| {
        matches!(
            w,
            "." | "?"
                | "!"
                | ":"
                | ";"
                | "-"
                | "–"
                | "—"
                | "--"
                | "..."
                | "("
                | ")"
                | "["
                | "]"
                | "\""
                | "'"
                | "`"
                | "«"
                | "»"
                | "*"
                | "•"
        ) || (!w.is_empty() && w.chars().all(|c| matches!(c, '!' | '?' | '.')))
    };
    let mut result: Vec<String> = Vec::new();
    let mut carry = String::new();
    for word in pieces {
        if word.chars().any(|c| !is_js_space(c)) && !not_word(&word) {
            match result.last_mut() {
                Some(last) => {
                    last.push_str(&carry);
                    result.push(word);
                }
                None => result.push(format!("{carry}{word}")),
            }
            carry.clear();
        } else {
            carry.push_str(&word);
        }
    }
    if !carry.is_empty() {
        match result.last_mut() {
            Some(last) => last.push_str(&carry),
            None => result.push(carry),
        }
    }
    combine(result)
}

/// `combineSlashes` ('he / she' one word) and `combineRanges` ('2 - 5' one word).
fn combine(mut arr: Vec<String>) -> Vec<String> {
    let p = patterns();
    let mut i = 1;
    while i + 1 < arr.len() {
        if p.slash.is_match(&arr[i]) {
            let (a, b) = (std::mem::take(&mut arr[i]), std::mem::take(&mut arr[i + 1]));
            arr[i - 1].push_str(&a);
            arr[i - 1].push_str(&b);
        }
        i += 1;
    }
    for i in 0..arr.len().saturating_sub(1) {
        if !arr[i + 1].is_empty()
            && p.range_start.is_match(&arr[i])
            && p.range_end.is_match(&arr[i + 1])
        {
            let b = std::mem::take(&mut arr[i + 1]);
            arr[i].push_str(&b);
        }
    }
    arr.retain(|s| !s.is_empty());
    arr
}

/// `hasHyphen`: split "one-two" but not "x-ray", "re-do" or "flower-like".
fn has_hyphen(word: &str, model: &Model) -> bool {
    let parts: Vec<&str> = word.split(['-', '–', '—']).collect();
    if parts.len() <= 1 {
        return false;
    }
    if parts[0].chars().count() == 1 && parts[0].chars().all(|c| c.is_ascii_alphabetic()) {
        return false;
    }
    if model.prefixes.contains(parts[0]) {
        return false;
    }
    let second = parts[1].trim_matches(is_js_space);
    let second = second.strip_suffix(['.', '?', '!']).unwrap_or(second);
    if model.suffixes.contains(second) {
        return false;
    }
    let p = patterns();
    p.hyphen_word.is_match(word) || p.number_word.is_match(word)
}

fn split_hyphens(word: &str) -> Vec<String> {
    let dash = word
        .chars()
        .find(|c| matches!(c, '-' | '–' | '—'))
        .unwrap_or('-');
    let parts: Vec<&str> = word.split(['-', '–', '—']).collect();
    let last = parts.len() - 1;
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            if i == last {
                (*p).to_owned()
            } else {
                format!("{p}{dash}")
            }
        })
        .collect()
}

/// `parseTerm`: punctuation off both ends (`#@_` kept in front, `%_` behind, a trailing
/// apostrophe after s/n), then the normal form.
fn parse_term(raw: &str, model: &Model) -> Term {
    let p = patterns();
    let trimmed = raw.trim_matches(is_js_space);
    if model.emoticons.contains(trimmed) {
        let mut term = Term::new(trimmed.to_owned(), String::new(), " ".to_owned());
        term.normal = normalize(&term.text, model);
        return term;
    }
    let is_letter_or_number = |c: char| c.is_alphanumeric() || is_currency(c);
    let full_number = p.full_number.is_match(trimmed);
    let chars: Vec<char> = raw.chars().collect();
    let mut start = 0;
    while start < chars.len() {
        let c = chars[start];
        if model.pre_punctuation.contains(&c)
            || (matches!(c, '+' | '-' | '(') && full_number)
            || is_letter_or_number(c)
        {
            break;
        }
        start += 1;
    }
    let mut end = chars.len();
    while end > start {
        let c = chars[end - 1];
        let keep = model.post_punctuation.contains(&c)
            || is_letter_or_number(c)
            || (c == '.' && p.has_acronym.is_match(raw))
            || (c == '\'' && p.chillin.is_match(raw))
            || (matches!(c, '+' | ')') && full_number);
        if keep {
            break;
        }
        end -= 1;
    }
    let collect = |from: usize, to: usize| chars[from..to].iter().collect::<String>();
    let mut term = if start >= end {
        // Nothing but punctuation: the whole piece is the word, trailing spaces its post.
        let body = raw.trim_end_matches(' ');
        Term::new(body.to_owned(), String::new(), raw[body.len()..].to_owned())
    } else {
        Term::new(
            collect(start, end),
            collect(0, start),
            collect(end, chars.len()),
        )
    };
    term.normal = normalize(&term.text, model);
    term
}

fn is_currency(c: char) -> bool {
    matches!(
        c,
        '$' | '¢' | '£' | '¤' | '¥' | '֏' | '؋' | '৲' | '৳' | '฿' | '៛' | '₠'
            ..='₿' | '﷼' | '﹩' | '＄' | '￠' | '￡' | '￥' | '￦'
    )
}

/// `normalize`: lowercased, trimmed, end punctuation and leading quotes removed, zero-width
/// characters removed, `1,000` → `1000`, accents transliterated, `u.s.a` → `usa`.
pub(super) fn normalize(text: &str, model: &Model) -> String {
    let original = text.to_lowercase().trim_matches(is_js_space).to_owned();
    let mut s = original
        .trim_end_matches([',', ';', '.', '!', '?'])
        .replace('\u{2026}', "...")
        .replace('\u{2013}', "-");
    if !s.starts_with([':', ';']) {
        if s.ends_with("...") {
            s = s.trim_end_matches('.').to_owned();
        }
        s = s
            .trim_end_matches(['"', ',', '.', '!', ':', ';', '?', ')'])
            .trim_start_matches(['\'', '"', '('])
            .to_owned();
    }
    s.retain(|c| !matches!(c, '\u{200b}'..='\u{200d}' | '\u{feff}'));
    let mut s = s.trim_matches(is_js_space).to_owned();
    if s.is_empty() {
        s = original;
    }
    // No commas inside numbers.
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    for (i, c) in chars.iter().enumerate() {
        let between_digits = *c == ','
            && i > 0
            && chars[i - 1].is_ascii_digit()
            && chars.get(i + 1).is_some_and(char::is_ascii_digit);
        if !between_digits {
            match model.unicode.get(c) {
                Some(ascii) => out.push_str(ascii),
                None => out.push(*c),
            }
        }
    }
    if patterns().lower_acronym.is_match(&out) {
        out.retain(|c| c != '.');
    }
    out
}

/// `machine`: the lookup form without a possessive 's, "lookin'" as "looking", "re-do" as
/// "redo", a leading #/@ dropped; kept only when it differs from `normal`.
pub(super) fn set_machine(term: &mut Term) {
    let base = term
        .implicit
        .clone()
        .filter(|i| !i.is_empty())
        .unwrap_or_else(|| {
            if term.normal.is_empty() {
                term.text.clone()
            } else {
                term.normal.clone()
            }
        });
    let mut s = base;
    for suffix in ["'s", "’s"] {
        if let Some(stem) = s.strip_suffix(suffix) {
            s = stem.to_owned();
        }
    }
    for suffix in ["s'", "s’"] {
        if s.ends_with(suffix) {
            s.truncate(s.len() - suffix.len());
            s.push('s');
        }
    }
    if let Some(stem) = s.strip_suffix("in'") {
        let b: Vec<char> = stem.chars().collect();
        let n = b.len();
        if n >= 2 && "aeiou".contains(b[n - 2]) && "ktrp".contains(b[n - 1]) {
            s = format!("{stem}ing");
        }
    }
    let parts: Vec<&str> = s.split('-').collect();
    if parts.len() == 2
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(char::is_alphabetic))
    {
        s = s.replace('-', "");
    }
    let s = s.strip_prefix(['#', '@']).map(str::to_owned).unwrap_or(s);
    if s != term.normal {
        term.machine = Some(s);
    }
}
