//! compromise's contractions: the first pass before tagging (known ones, n't, 'd where clear,
//! "there's", number ranges and units), the second after it (an apostrophe-s as a possessive
//! or 'is'/'has', 'd as 'had' or 'would', "ain't"). A contraction becomes a term per word, the
//! first keeping the written text and the rest none ("don't" → do + not).

use std::sync::OnceLock;

use regex::Regex;

use super::model::Model;
use super::pretag::{freeze, lexicon, pre_tag};
use super::term::Term;
use super::tokenize::{normalize, set_machine};

struct Patterns {
    num_dash: Regex,
    range: Regex,
    time_range: Regex,
    phone: Regex,
    num_unit: Regex,
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        // Constant patterns: a failure here is a bug, caught by every test.
        let re = |p: &str| Regex::new(p).expect("a valid constant pattern");
        Patterns {
            num_dash: re(r"^[0-9][^-–—]*[-–—].*?[0-9]"),
            range: re(r"(?i)^([0-9.]{1,4}[a-z]{0,2}) ?[-–—] ?([0-9]{1,4}[a-z]{0,2})$"),
            time_range: re(r"(?i)^([0-9]{1,2}(:[0-9][0-9])?(am|pm)?) ?[-–—] ?([0-9]{1,2}(:[0-9][0-9])?(am|pm)?)$"),
            phone: re(r"^[0-9]{3}-[0-9]{4}$"),
            num_unit: re(r"^([+-]?[0-9][.,0-9]*)([a-z°²³µ/]+)$"),
        }
    })
}

/// compromise's first contraction pass: known contractions ("can't", "dont", "we're"),
/// n't as "not", 'd as did/had/would where clear, "there's" as there is/has; the
/// apostrophe-s of other words waits for the tagger (`expand_apostrophe_s`).
pub(super) fn expand(terms: &mut Vec<Term>, model: &Model) {
    for i in (0..terms.len()).rev() {
        let normal = terms[i].normal.clone();
        let (before, after) = match normal.split_once('\'') {
            Some((b, a)) => (Some(b), Some(a.split('\'').next().unwrap_or(a))),
            None => (None, None),
        };
        let mut words = known_contraction(model, &normal, before, after);
        if words.is_none() && after == Some("t") && normal != "ain't" && normal != "aint" {
            words = Some(vec![normal.replacen("n't", "", 1), "not".to_owned()]);
        }
        if words.is_none() && after == Some("d") {
            words = apostrophe_d(terms, i, before.unwrap_or(""));
        }
        if before == Some("there") && after == Some("s") {
            let been = terms[i + 1..terms.len().min(5).max(i + 1)]
                .iter()
                .any(|t| t.normal == "been");
            words = Some(vec![
                "there".to_owned(),
                if been { "has" } else { "is" }.to_owned(),
            ]);
        }
        if let Some(words) = words {
            splice(terms, i, tagged_words(&words, model));
            continue;
        }
        let p = patterns();
        if p.num_dash.is_match(&normal) {
            if let Some(words) = number_range(&terms[i], model) {
                let mut new = tagged_words(&words, model);
                for t in &mut new {
                    t.set_tag(model.tag("NumberRange"), model, false);
                }
                if new.get(2).is_some_and(|t| t.has(model.tag("Time"))) {
                    new[0].set_tag(model.tag("Time"), model, false);
                }
                splice(terms, i, new);
            }
            continue;
        }
        // '5km' → 5 km.
        if let Some(c) = p.num_unit.captures(&terms[i].text) {
            let unit = c[2].to_lowercase();
            if !model.number_suffixes.contains(&unit) {
                let mut new = tagged_words(&[c[1].to_owned(), unit], model);
                new[1].set_tag(model.t.Unit, model, false);
                splice(terms, i, new);
            }
        }
    }
}

/// '3-4' → 3 to 4 (not a phone number), '3pm-5pm' likewise.
fn number_range(term: &Term, model: &Model) -> Option<Vec<String>> {
    let p = patterns();
    if let Some(c) = p.range.captures(&term.text) {
        if term.has(model.tag("PhoneNumber")) || p.phone.is_match(&term.text) {
            return None;
        }
        return Some(vec![c[1].to_owned(), "to".to_owned(), c[2].to_owned()]);
    }
    let c = p.time_range.captures(&term.text)?;
    Some(vec![c[1].to_owned(), "to".to_owned(), c[4].to_owned()])
}

/// Words a contraction stands for, tagged by themselves first as compromise does
/// (`fromText`: lexicon and pre-tagger on the words alone).
fn tagged_words(words: &[String], model: &Model) -> Vec<Term> {
    let mut new: Vec<Term> = words
        .iter()
        .map(|w| {
            let mut t = Term::new(w.clone(), String::new(), " ".to_owned());
            t.normal = normalize(w, model);
            set_machine(&mut t);
            t
        })
        .collect();
    freeze(&mut new, model);
    lexicon(&mut new, model);
    pre_tag(&mut new, model);
    for t in &mut new {
        t.frozen = false;
    }
    new
}

fn known_contraction(
    model: &Model,
    normal: &str,
    before: Option<&str>,
    after: Option<&str>,
) -> Option<Vec<String>> {
    for rule in &model.contractions {
        if rule.word.as_deref() == Some(normal) {
            return Some(rule.out.clone());
        }
        if after.is_some() && rule.after.as_deref() == after {
            let mut out = vec![before.unwrap_or("").to_owned()];
            out.extend(rule.out.iter().cloned());
            return Some(out);
        }
        if before.is_some()
            && rule.before.as_deref() == before
            && after.is_some_and(|a| a.len() > 2)
        {
            let mut out = rule.out.clone();
            out.push(after.unwrap_or("").to_owned());
            return Some(out);
        }
    }
    None
}

fn apostrophe_d(terms: &[Term], i: usize, before: &str) -> Option<Vec<String>> {
    if matches!(before, "what" | "how" | "when" | "where" | "why") {
        return Some(vec![before.to_owned(), "did".to_owned()]);
    }
    let next = terms.get(i + 1)?;
    let second = match next.normal.as_str() {
        "been" | "gone" => "had",
        "be" | "go" | "start" | "think" | "need" => "would",
        _ => return None,
    };
    Some(vec![before.to_owned(), second.to_owned()])
}

/// Replaces term `i` by the (tagged) terms of a contraction's words: each keeps its word as
/// `implicit`, the first the written text.
fn splice(terms: &mut Vec<Term>, i: usize, mut new: Vec<Term>) {
    let original = terms.remove(i);
    for t in &mut new {
        let word = std::mem::take(&mut t.text);
        t.machine = Some(word.clone());
        t.implicit = Some(word);
        t.pre.clear();
        t.post.clear();
        t.normal.clear();
    }
    if let Some(first) = new.first_mut() {
        first.pre = original.pre.clone();
        first.text = original.text.clone();
        first.normal = original.normal.clone();
    }
    if let Some(last) = new.last_mut() {
        last.post = original.post.clone();
    }
    for (k, term) in new.into_iter().enumerate() {
        terms.insert(i + k, term);
    }
}

/// The second contraction pass, after tagging: an apostrophe-s is a possessive, or 'is',
/// 'has', 'us' ('let's'); n't and 'd as in the first pass.
pub(super) fn expand_tagged(terms: &mut Vec<Term>, m: &Model) {
    for i in (0..terms.len()).rev() {
        if terms[i].implicit.is_some() {
            continue;
        }
        let normal = terms[i].normal.clone();
        let Some((before, after)) = normal.split_once('\'') else {
            continue;
        };
        let after = after.split('\'').next().unwrap_or(after);
        let n_t = normal.replacen("n't", "", 1);
        let words: Option<Vec<&str>> = match after {
            "t" if normal == "ain't" || normal == "aint" => Some(aint(terms, i, m)),
            "t" => Some(vec![n_t.as_str(), "not"]),
            "d" if matches!(before, "how" | "what") => Some(vec![before, "did"]),
            "d" => Some(vec![before, had_or_would(terms, i, m)]),
            "s" if is_possessive(terms, i, m) => {
                terms[i].set_tag(m.t.Possessive, m, false);
                None
            }
            "s" => Some(vec![before, apostrophe_s(terms, i, before, m)]),
            _ => None,
        };
        if let Some(words) = words {
            let words: Vec<String> = words.iter().map(|w| (*w).to_owned()).collect();
            splice(terms, i, tagged_words(&words, m));
            lexicon(terms, m);
            pre_tag(terms, m);
        }
    }
}

/// "ain't": 'have' before 'never', else the copula of the last noun, then 'not'.
fn aint(terms: &[Term], i: usize, m: &Model) -> Vec<&'static str> {
    if terms.get(i + 1).is_some_and(|t| t.normal == "never") {
        return vec!["have"];
    }
    let noun = terms[..i].iter().rev().find(|t| {
        [m.t.Noun, m.t.Pronoun, m.t.Plural, m.t.Singular]
            .iter()
            .any(|x| t.has(*x))
    });
    match noun {
        Some(n) if n.normal == "we" || n.normal == "they" || n.has(m.t.Plural) => {
            vec!["are", "not"]
        }
        Some(n) if n.normal == "i" => vec!["am", "not"],
        _ => vec!["is", "not"],
    }
}

/// 'd: 'had' before a past tense, 'better', 'done', …; else 'would'.
fn had_or_would(terms: &[Term], i: usize, m: &Model) -> &'static str {
    for t in &terms[i + 1..] {
        match t.normal.as_str() {
            "better" | "done" | "before" | "it" | "had" => return "had",
            "have" | "be" => return "would",
            _ => {}
        }
        if t.has(m.t.PastTense) || t.switch.as_deref() == Some("Adj|Past") {
            return "had";
        }
        if t.has(m.t.PresentTense) || t.has(m.t.Infinitive) || t.has(m.t.Adjective) {
            return "would";
        }
    }
    "would"
}

fn apostrophe_s(terms: &[Term], i: usize, before: &str, m: &Model) -> &'static str {
    if before == "let" {
        return "us";
    }
    if before == "there" && terms.get(i + 1).is_some_and(|t| t.has(m.t.Plural)) {
        return "are";
    }
    for (o, t) in terms.iter().enumerate().skip(i + 1) {
        match t.normal.as_str() {
            "been" | "become" => return "has",
            "what" | "how" | "when" | "if" | "too" => return "is",
            _ => {}
        }
        if t.has(m.t.Gerund) || t.has(m.t.Determiner) || t.has(m.t.Adjective) {
            return "is";
        }
        if t.switch.as_deref() == Some("Adj|Past")
            && let Some(next) = terms.get(o + 1)
            && (matches!(next.normal.as_str(), "too" | "also" | "enough")
                || next.has(m.t.Preposition))
        {
            return "is";
        }
        if t.has(m.t.PastTense) {
            return if terms.get(o + 1).is_some_and(|n| n.normal == "for") {
                "is"
            } else {
                "has"
            };
        }
    }
    "is"
}

fn is_possessive(terms: &[Term], i: usize, m: &Model) -> bool {
    let term = &terms[i];
    if matches!(
        term.word(),
        "that" | "there" | "let" | "here" | "everywhere"
    ) {
        return false;
    }
    if term.has(m.t.Possessive) {
        return true;
    }
    if term.has(m.t.QuestionWord) || term.normal == "he's" || term.normal == "she's" {
        return false;
    }
    let Some(next) = terms.get(i + 1) else {
        return true;
    };
    // compromise asks `has('#Noun')` here, a tag no term has: "it's" is never possessive.
    if term.normal == "it's" {
        return false;
    }
    let two = terms.get(i + 2);
    if next.switch.as_deref() == Some("Noun|Gerund") {
        return match two {
            None => term.has(m.t.Actor) || term.has(m.t.ProperNoun),
            Some(two) => two.has(m.t.Copula),
        };
    }
    if next.has(m.t.Verb) {
        return next.has(m.t.Infinitive) || (!next.has(m.t.Gerund) && next.has(m.t.PresentTense));
    }
    if next.switch.as_deref() == Some("Adj|Noun") {
        match two {
            None => return false,
            Some(two)
                if matches!(
                    two.normal.as_str(),
                    "is" | "are" | "did" | "were" | "could" | "should" | "must" | "had" | "have"
                ) =>
            {
                return true;
            }
            Some(two) if matches!(two.normal.as_str(), "too" | "also" | "enough" | "about") => {
                return false;
            }
            _ => {}
        }
    }
    if next.has(m.t.Noun) {
        let s = next.word();
        return !(matches!(s, "here" | "there" | "everywhere")
            || next.has(m.t.Possessive)
            || (next.has(m.t.ProperNoun) && !term.has(m.t.ProperNoun)));
    }
    if i > 0 && matches!(terms[i - 1].normal.as_str(), "in" | "by" | "for") {
        return true;
    }
    if next.has(m.t.Adjective) {
        return match two {
            None => false,
            Some(two) if two.has(m.t.Noun) && !two.has(m.t.Pronoun) => {
                !matches!(next.normal.as_str(), "above" | "below" | "behind")
            }
            Some(two) => two.switch.as_deref() == Some("Noun|Verb"),
        };
    }
    next.has(m.t.Value)
}
