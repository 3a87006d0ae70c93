//! compromise's lexicon lookup and pre-tagger: the frozen lexicon, the lexicon, then the word
//! by itself (case, suffix, regexes, prefix, year); the pass by its neighbours is `context`.

use super::context::{
    check_acronym, imperative, neighbours, noun_fallback, org_words, place_words, switches,
    verb_type,
};
use super::model::{Model, Tag};
use super::term::Term;

/// `freeze`: words and phrases of the frozen lexicon take its tags, and no later tagging may
/// contradict them.
pub(super) fn freeze(terms: &mut [Term], m: &Model) {
    for i in 0..terms.len() {
        let word = terms[i].word().to_owned();
        if let Some(&max) = m.multi.get(&word).filter(|_| i + 1 < terms.len()) {
            let end = (i + max).min(terms.len());
            for stop in (i + 2..=end).rev() {
                let phrase = terms[i..stop]
                    .iter()
                    .map(Term::word)
                    .collect::<Vec<_>>()
                    .join(" ");
                if let Some(tags) = m.frozen.get(&phrase) {
                    for term in &mut terms[i..stop] {
                        term.set_tags(tags, m);
                        term.frozen = true;
                    }
                }
            }
        }
        if let Some(tags) = m.frozen.get(&word) {
            terms[i].set_tags(tags, m);
            terms[i].frozen = true;
        }
    }
}

/// Tags the words the lexicon knows (multi-word entries first), leaving tagged ones alone.
pub(super) fn lexicon(terms: &mut [Term], m: &Model) {
    let mut i = 0;
    while i < terms.len() {
        if terms[i].tags.is_empty() {
            if let Some(n) = multi_word(terms, i, m) {
                i += n;
                continue;
            }
            single_word(&mut terms[i], m);
        }
        i += 1;
    }
}

fn multi_word(terms: &mut [Term], start: usize, m: &Model) -> Option<usize> {
    let max = *m.multi.get(terms[start].word())?;
    let end = (start + max).min(terms.len());
    for stop in (start + 2..=end).rev() {
        let phrase = terms[start..stop]
            .iter()
            .map(Term::word)
            .collect::<Vec<_>>()
            .join(" ");
        if let Some(tags) = m.lexicon.get(&phrase) {
            for term in &mut terms[start..stop] {
                term.set_tags(tags, m);
            }
            if tags.len() == 2 && tags.contains(&m.t.PhrasalVerb) {
                terms[start + 1].set_tag(m.t.Particle, m, false);
            }
            return Some(stop - start);
        }
    }
    None
}

fn single_word(term: &mut Term, m: &Model) {
    if let Some(tags) = m.lexicon.get(term.word()) {
        term.set_tags(&tags.clone(), m);
        return;
    }
    // 'redo', 'mistake': a verb or adjective with a prefix.
    let word = term.word().to_owned();
    for prefix in [
        "under", "over", "mis", "re", "un", "dis", "semi", "pre", "post",
    ] {
        if let Some(stem) = word.strip_prefix(prefix) {
            let stem = stem.strip_prefix('-').unwrap_or(stem);
            if let Some(tags) = m.lexicon.get(stem).filter(|_| stem.chars().count() > 3) {
                let allowed = [
                    m.t.Verb,
                    m.t.Infinitive,
                    m.t.PastTense,
                    m.t.Gerund,
                    m.t.PresentTense,
                    m.t.Adjective,
                    m.t.Participle,
                ];
                if tags.len() == 1 && allowed.contains(&tags[0]) {
                    term.set_tags(&tags.clone(), m);
                }
            }
            return;
        }
    }
}

/// The pre-tagger over one sentence.
pub(super) fn pre_tag(terms: &mut [Term], m: &Model) {
    // "Breaking: ..." – a colon after the first word.
    if terms.len() >= 3 && terms[0].post.contains(':') {
        let next = &terms[1];
        if !next.has(m.t.Value) && !next.has(m.tag("Email")) && !next.has(m.tag("PhoneNumber")) {
            terms[0].set_tag(m.t.Expression, m, false);
        }
    }
    for (start, end) in quick_split(terms, m) {
        let clause = &mut terms[start..end];
        let yelling = is_yelling(clause, m);
        for i in 0..clause.len() {
            if clause[i].frozen {
                continue;
            }
            tag_switch(&mut clause[i], m);
            if !yelling {
                check_case(clause, i, start + i, m);
            }
            check_suffix(&mut clause[i], m);
            check_regex(&mut clause[i], m);
            check_prefix(&mut clause[i], m);
            check_year(clause, i, m);
        }
        for i in 0..clause.len() {
            let mut found = check_acronym(&mut clause[i], m);
            fill_tags(&mut clause[i], m);
            found = found || neighbours(clause, i, m);
            if !found {
                noun_fallback(&mut clause[i], m);
            }
        }
        for i in 0..clause.len() {
            if clause[i].frozen {
                continue;
            }
            org_words(clause, i, yelling, m);
            place_words(clause, i, yelling, m);
            switches(clause, i, m);
            verb_type(&mut clause[i], m);
            if clause[i].post == "-" && i + 1 < clause.len() {
                clause[i].set_tag(m.t.Hyphenated, m, false);
                clause[i + 1].set_tag(m.t.Hyphenated, m, false);
            }
        }
        imperative(clause, m);
    }
}

/// `quickSplit`: clauses at a comma, colon or semicolon, unless a place, date, adjective or
/// short number is beside it.
pub(super) fn quick_split(terms: &[Term], m: &Model) -> Vec<(usize, usize)> {
    let split_on = |i: usize| -> bool {
        let Some(term) = terms.get(i) else {
            return false;
        };
        let maybe_date = |s: &str| matches!(s, "may" | "april" | "august" | "jan");
        if term.normal == "like"
            || maybe_date(&term.normal)
            || term.has(m.t.Place)
            || term.has(m.t.Date)
        {
            return false;
        }
        if i > 0 {
            let last = &terms[i - 1];
            if last.has(m.t.Date)
                || maybe_date(&last.normal)
                || last.has(m.t.Adjective)
                || term.has(m.t.Adjective)
            {
                return false;
            }
        }
        let s = &term.normal;
        !(matches!(s.len(), 1 | 2 | 4) && s.bytes().all(|b| b.is_ascii_digit()))
    };
    let mut clauses = Vec::new();
    let mut start = 0;
    for (i, term) in terms.iter().enumerate() {
        if term.post.contains([',', ':', ';']) && split_on(i + 1) {
            clauses.push((start, i + 1));
            start = i + 1;
        }
    }
    if start < terms.len() {
        clauses.push((start, terms.len()));
    }
    clauses
}

fn is_yelling(terms: &[Term], m: &Model) -> bool {
    if terms.iter().filter(|t| !t.has(m.t.ProperNoun)).count() <= 3 {
        return false;
    }
    terms
        .iter()
        .all(|t| !t.text.starts_with(|c: char| c.is_ascii_lowercase()))
}

fn tag_switch(term: &mut Term, m: &Model) {
    if let Some(form) = m.switches.get(&term.normal) {
        term.switch = Some(form.clone());
        return;
    }
    if let Some(stem) = strip_switch_prefix(&term.normal)
        && stem.chars().count() > 3
        && let Some(form) = m.switches.get(stem)
    {
        term.switch = Some(form.clone());
    }
}

/// `/^(under|over|mis|re|un|dis|semi)-?/` removed.
fn strip_switch_prefix(word: &str) -> Option<&str> {
    ["under", "over", "mis", "re", "un", "dis", "semi"]
        .iter()
        .find_map(|p| word.strip_prefix(p))
        .map(|stem| stem.strip_prefix('-').unwrap_or(stem))
}

/// `/^\p{Lu}[\p{Ll}'’]/`.
pub(super) fn is_title_case(text: &str) -> bool {
    let mut chars = text.chars();
    matches!((chars.next(), chars.next()), (Some(a), Some(b)) if a.is_uppercase() && (b.is_lowercase() || b == '\'' || b == '’'))
}

/// A title-cased word after the first is a proper noun; a valid roman numeral is one.
fn check_case(terms: &mut [Term], i: usize, index: usize, m: &Model) {
    let term = &terms[i];
    if index != 0 && is_title_case(&term.text) && !term.text.bytes().any(|b| b.is_ascii_digit()) {
        if [m.t.Date, m.t.Month, m.t.WeekDay, m.t.Unit, m.t.Expression]
            .iter()
            .any(|t| term.has(*t))
        {
            return;
        }
        if term.pre.ends_with(['"', '\'']) || term.normal == "the" {
            return;
        }
        fill_tags(&mut terms[i], m);
        let term = &mut terms[i];
        if !term.has(m.t.Noun) {
            term.tags.clear();
        }
        term.fast_tag(m.t.ProperNoun);
        return;
    }
    let text = &term.text;
    let roman = text.len() >= 2
        && text.bytes().all(|b| b"IVXLCDM".contains(&b))
        && text.contains(['I', 'V', 'X'])
        && valid_roman(text)
        && !matches!(term.normal.as_str(), "li" | "dc" | "md" | "dm" | "ml");
    if roman {
        terms[i].fast_tag(m.t.RomanNumeral);
    }
}

/// `^M{0,4}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})$`.
fn valid_roman(s: &str) -> bool {
    let mut rest = s.trim_start_matches('M');
    if s.len() - rest.len() > 4 {
        return false;
    }
    for (nine, four, five, one) in [
        ("CM", "CD", 'D', 'C'),
        ("XC", "XL", 'L', 'X'),
        ("IX", "IV", 'V', 'I'),
    ] {
        if let Some(r) = rest.strip_prefix(nine).or_else(|| rest.strip_prefix(four)) {
            rest = r;
        } else {
            rest = rest.strip_prefix(five).unwrap_or(rest);
            let ones = rest.len() - rest.trim_start_matches(one).len();
            if ones > 3 {
                return false;
            }
            rest = &rest[ones..];
        }
    }
    rest.is_empty()
}

fn check_suffix(term: &mut Term, m: &Model) {
    if !term.tags.is_empty() {
        return;
    }
    let found = suffix_tag(&term.normal, m)
        .or_else(|| term.implicit.as_deref().and_then(|i| suffix_tag(i, m)));
    if let Some(tag) = found {
        term.fast_tag(tag);
    }
}

/// The longest known ending of up to seven letters (not the whole word).
fn suffix_tag(word: &str, m: &Model) -> Option<Tag> {
    let chars: Vec<char> = word.chars().collect();
    let max = 7.min(chars.len().saturating_sub(1));
    (2..=max).rev().find_map(|n| {
        let suffix: String = chars[chars.len() - n..].iter().collect();
        m.suffix_patterns.get(n)?.get(&suffix).copied()
    })
}

fn check_regex(term: &mut Term, m: &Model) {
    let apostrophe = |s: &str| s.contains(['\'', '‘', '’', '‛', '‵', '′', '`', '´']);
    let mut text = term.text.clone();
    if apostrophe(&term.post) && !apostrophe(&term.pre) {
        text.push_str(term.post.trim());
    }
    let normal = term.word().to_owned();
    let first = |list: &[(regex::Regex, Vec<Tag>)], s: &str| {
        list.iter()
            .find(|(re, _)| re.is_match(s))
            .map(|(_, t)| t.clone())
    };
    let mut found = first(&m.regex_text, &text).or_else(|| first(&m.regex_normal, &normal));
    if found.is_none() && normal.bytes().any(|b| b.is_ascii_digit()) {
        found = first(&m.regex_numbers, &normal);
    }
    if found.is_none() && term.tags.is_empty() {
        found = normal
            .chars()
            .last()
            .and_then(|c| m.ends_with.get(&c))
            .and_then(|list| first(list, &normal));
    }
    if let Some(tags) = found {
        term.set_tags(&tags, m);
    }
}

fn check_prefix(term: &mut Term, m: &Model) {
    if !term.tags.is_empty() {
        return;
    }
    let chars: Vec<char> = term.normal.chars().collect();
    let max = 7.min(chars.len().saturating_sub(3));
    let found = (3..=max).rev().find_map(|n| {
        let prefix: String = chars[..n].iter().collect();
        m.prefix_patterns.get(n)?.get(&prefix).copied()
    });
    if let Some(tag) = found {
        term.fast_tag(tag);
    }
}

/// '1993' as a year, next to a date word or a proper noun, or close to one.
fn check_year(terms: &mut [Term], i: usize, m: &Model) {
    let term = &terms[i];
    if !(term.has(m.t.NumericValue) && term.has(m.t.Cardinal) && term.normal.len() == 4) {
        return;
    }
    let Ok(num) = term.normal.parse::<u32>() else {
        return;
    };
    if !(1400 < num && num < 2100) {
        return;
    }
    let date_like = |t: &Term| {
        [m.t.Date, m.t.Month, m.t.WeekDay, m.t.Year]
            .iter()
            .any(|x| t.has(*x))
    };
    let seems_good = |t: Option<&Term>| {
        t.is_some_and(|t| {
            matches!(
                t.normal_or_implicit(),
                "in" | "on"
                    | "by"
                    | "until"
                    | "for"
                    | "to"
                    | "during"
                    | "throughout"
                    | "through"
                    | "within"
                    | "before"
                    | "after"
                    | "of"
                    | "this"
                    | "next"
                    | "last"
                    | "circa"
                    | "around"
                    | "post"
                    | "pre"
                    | "budget"
                    | "classic"
                    | "plan"
                    | "may"
            ) || date_like(t)
                || t.has(m.t.ProperNoun)
        })
    };
    let seems_okay = |t: Option<&Term>| {
        t.is_some_and(|t| {
            t.has(m.t.Ordinal)
                || (t.has(m.t.Cardinal) && t.normal.len() < 3)
                || t.normal == "is"
                || t.normal == "was"
        })
    };
    let last = i.checked_sub(1).and_then(|j| terms.get(j));
    let next = terms.get(i + 1);
    let year = seems_good(last)
        || seems_good(next)
        || ((1920..2025).contains(&num)
            && (seems_okay(last)
                || seems_okay(next)
                || i.checked_sub(2)
                    .and_then(|j| terms.get(j))
                    .is_some_and(date_like)
                || terms.get(i + 2).is_some_and(date_like)
                || (last.is_some_and(|l| l.has(m.t.Determiner) || l.has(m.t.Possessive))
                    && next.is_some_and(|n| n.has(m.t.Noun) && !n.has(m.t.Plural)))));
    if year {
        terms[i].fast_tag(m.t.Year);
    }
}

/// `fillTags`: parent tags, singular or plural for a bare noun, a tense for a bare verb.
pub(super) fn fill_tags(term: &mut Term, m: &Model) {
    for tag in term.tags.clone() {
        for parent in m.parents.get(tag as usize).into_iter().flatten() {
            term.fast_tag(*parent);
        }
    }
    let uncountable = [
        m.t.Acronym,
        m.t.Abbreviation,
        m.t.ProperNoun,
        m.t.Uncountable,
        m.t.Possessive,
        m.t.Pronoun,
        m.t.Activity,
        m.t.Honorific,
        m.t.Month,
    ];
    if term.has(m.t.Noun)
        && !term.has(m.t.Plural)
        && !term.has(m.t.Singular)
        && !uncountable.iter().any(|t| term.has(*t))
    {
        let tag = if looks_plural(&term.normal) {
            m.t.Plural
        } else {
            m.t.Singular
        };
        term.fast_tag(tag);
    }
    if term.has(m.t.Verb)
        && term.tags.len() == 1
        && let Some(tense) = guess_tense(&term.normal, m)
    {
        term.fast_tag(tense);
    }
}

/// `looksPlural`: ends in s but not like 'virus' or 'thesis', or is 'mice', 'feet', ….
pub(super) fn looks_plural(s: &str) -> bool {
    if s.chars().count() <= 3 {
        return false;
    }
    if matches!(s, "israelis" | "menus" | "logos") {
        return true;
    }
    match s.chars().last() {
        Some('e') => [
            "mice",
            "louse",
            "antennae",
            "formulae",
            "nebulae",
            "vertebrae",
            "vitae",
        ]
        .iter()
        .any(|x| s.ends_with(x)),
        Some('i') => [
            "tia", "octopi", "viri", "radii", "nuclei", "fungi", "cacti", "stimuli",
        ]
        .iter()
        .any(|x| s.ends_with(x)),
        Some('n') => s.ends_with("men"),
        Some('t') => s.ends_with("feet"),
        Some('s') => ![
            "bus", "mas", "was", "ias", "xas", "vas", "cis", "lis", "nis", "ois", "ris", "sis",
            "tis", "xis", "aus", "cus", "eus", "fus", "gus", "ius", "lus", "nus", "das", "ous",
            "pus", "rus", "sus", "tus", "xus", "aos", "igos", "ados", "ogos", "'s", "ss",
        ]
        .iter()
        .any(|x| s.ends_with(x)),
        _ => false,
    }
}

/// `getTense`: a verb's tense by its last three, then two letters, or a final s.
pub(super) fn guess_tense(s: &str, m: &Model) -> Option<Tag> {
    let chars: Vec<char> = s.chars().collect();
    for n in [3, 2] {
        if chars.len() >= n {
            let end: String = chars[chars.len() - n..].iter().collect();
            if let Some(tag) = m.tense_guess.get(&end) {
                return Some(*tag);
            }
        } else if let Some(tag) = m.tense_guess.get(s) {
            return Some(*tag);
        }
    }
    (chars.last() == Some(&'s')).then_some(m.t.PresentTense)
}
