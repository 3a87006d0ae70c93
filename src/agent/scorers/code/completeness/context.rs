//! The pre-tagger's third pass, which looks at a word's neighbours: acronyms, the neighbour
//! clues for unknown words, the noun fallback, organisation and place words, the switch
//! words' clues, bare verbs and a leading imperative.

use std::collections::HashMap;

use super::model::{Model, Tag};
use super::pretag::{fill_tags, is_title_case};
use super::term::Term;

/// All-caps words of up to five letters the lexicon does not know are acronyms ('NDA').
pub(super) fn check_acronym(term: &mut Term, m: &Model) -> bool {
    if term.has(m.t.RomanNumeral) || term.has(m.t.Acronym) {
        return false;
    }
    let text = term.text.clone();
    let upper = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_uppercase() || b == b'-');
    let upper_then_s = |s: &str| {
        s.len() > 1 && s.ends_with('s') && s[..s.len() - 1].bytes().all(|b| b.is_ascii_uppercase())
    };
    let places = matches!(
        term.normal.as_str(),
        "la" | "ny" | "us" | "dc" | "gb" | "uk"
    );
    let no_period = || -> bool {
        let mut s = text.as_str();
        if !upper(s) {
            if s.len() > 3 && upper_then_s(s) {
                s = &s[..s.len() - 1];
            } else {
                return false;
            }
        } else if places {
            return true;
        }
        if s.chars().count() > 5 || s == "I" || s == "A" || m.lexicon.contains_key(&term.normal) {
            return false;
        }
        // An upper-case word of two letters or more, or one letter ('F.').
        s.bytes().filter(u8::is_ascii_uppercase).count() >= 2
            || (s.len() == 1 && s.as_bytes()[0].is_ascii_uppercase())
    };
    if no_period() {
        term.tags.clear();
        term.fast_tag(m.t.Acronym);
        term.fast_tag(m.t.Noun);
        if places {
            term.fast_tag(m.t.Place);
        }
        if upper_then_s(&text) {
            term.fast_tag(m.t.Plural);
        }
        return true;
    }
    let one_letter = {
        let core = text
            .strip_suffix("'s")
            .or_else(|| text.strip_suffix(','))
            .unwrap_or(&text);
        core.len() == 1 && core.as_bytes()[0].is_ascii_uppercase()
    };
    if text != "I" && text != "A" && one_letter {
        term.tags.clear();
        term.fast_tag(m.t.Acronym);
        term.fast_tag(m.t.Noun);
        return true;
    }
    if term.has(m.t.Organization)
        && (text.chars().count() <= 3 || (upper(&text) && text.len() <= 6))
    {
        term.fast_tag(m.t.Acronym);
        return true;
    }
    false
}

/// An untagged word takes a tag from a known word or tag beside it.
pub(super) fn neighbours(terms: &mut [Term], i: usize, m: &Model) -> bool {
    if !terms[i].tags.is_empty() {
        return false;
    }
    let prev = i.checked_sub(1).map(|j| &terms[j]);
    let next = terms.get(i + 1);
    let by_word = |t: Option<&Term>, list: &[(String, Tag)]| {
        t.and_then(|t| list.iter().find(|(w, _)| *w == t.normal).map(|p| p.1))
    };
    let by_tag = |t: Option<&Term>, list: &[(Tag, Tag)]| {
        t.and_then(|t| list.iter().find(|(x, _)| t.has(*x)).map(|p| p.1))
    };
    let tag = by_word(prev, &m.left_words)
        .or_else(|| by_word(next, &m.right_words))
        .or_else(|| by_tag(prev, &m.left_tags))
        .or_else(|| by_tag(next, &m.right_tags));
    match tag {
        Some(tag) => {
            terms[i].fast_tag(tag);
            fill_tags(&mut terms[i], m);
            true
        }
        None => false,
    }
}

pub(super) fn noun_fallback(term: &mut Term, m: &Model) {
    let weak = [m.t.Hyphenated, m.t.HashTag, m.t.Prefix, m.t.SlashedTerm];
    if term.tags.is_empty() || (term.tags.len() == 1 && weak.contains(&term.tags[0])) {
        term.fast_tag(m.t.Noun);
        fill_tags(term, m);
    }
}

pub(super) fn org_words(terms: &mut [Term], i: usize, yelling: bool, m: &Model) {
    let is_org = |t: &Term, index: usize| {
        if t.has(m.t.FirstName) || t.has(m.t.Place) {
            return false;
        }
        if t.has(m.t.ProperNoun) || t.has(m.t.Organization) || t.has(m.t.Acronym) {
            return true;
        }
        !yelling && is_title_case(&t.text) && (index != 0 || t.has(m.t.Singular))
    };
    if !m.org_words.contains(terms[i].word()) || i == 0 || !is_org(&terms[i - 1], i - 1) {
        return;
    }
    terms[i].set_tag(m.t.Organization, m, false);
    for t in (0..=i).rev() {
        if !is_org(&terms[t], t) {
            break;
        }
        terms[t].set_tag(m.t.Organization, m, false);
    }
}

pub(super) fn place_words(terms: &mut [Term], i: usize, yelling: bool, m: &Model) {
    let cont = |s: &str| {
        matches!(
            s,
            "athletic"
                | "city"
                | "community"
                | "eastern"
                | "federal"
                | "financial"
                | "great"
                | "historic"
                | "historical"
                | "local"
                | "memorial"
                | "municipal"
                | "national"
                | "northern"
                | "provincial"
                | "southern"
                | "state"
                | "western"
                | "spring"
                | "pine"
                | "sunset"
                | "view"
                | "oak"
                | "maple"
                | "spruce"
                | "cedar"
                | "willow"
        )
    };
    let is_place = |t: &Term, index: usize| {
        if t.has(m.t.Organization) || t.has(m.t.Possessive) || t.normal.ends_with("'s") {
            return false;
        }
        if t.has(m.t.ProperNoun) || t.has(m.t.Place) {
            return true;
        }
        !yelling && is_title_case(&t.text) && (index != 0 || t.has(m.t.Singular))
    };
    let word = terms[i].word().to_owned();
    if !m.place_words.contains(&word) {
        return;
    }
    for n in (0..i).rev() {
        if cont(&terms[n].normal) {
            continue;
        }
        if is_place(&terms[n], n) {
            for t in &mut terms[n..=i] {
                t.set_tag(m.t.Place, m, false);
            }
            continue;
        }
        break;
    }
    if matches!(
        word.as_str(),
        "center" | "centre" | "way" | "range" | "bar" | "bridge" | "field" | "pit"
    ) {
        return;
    }
    for n in i + 1..terms.len() {
        if is_place(&terms[n], n) {
            for t in &mut terms[i..=n] {
                t.set_tag(m.t.Place, m, false);
            }
            return;
        }
        if terms[n].normal == "of" || cont(&terms[n].normal) {
            continue;
        }
        break;
    }
}

/// A switch word takes the tag its clues give: the next word, the previous word, the
/// previous tag, the next tag; some forms lean on case or position first.
pub(super) fn switches(terms: &mut [Term], i: usize, m: &Model) {
    let Some(form) = terms[i].switch.clone() else {
        return;
    };
    if terms[i].has(m.t.Acronym) || terms[i].has(m.t.PhrasalVerb) {
        return;
    }
    let Some(clues) = m.clues.get(&form) else {
        return;
    };
    let before = if i > 0 && terms[i - 1].text == "also" {
        i.saturating_sub(2)
    } else {
        i.wrapping_sub(1)
    };
    let next = terms.get(i + 1);
    let prev = terms.get(before);
    let by_word = |t: Option<&Term>, words: &HashMap<String, Tag>| {
        t.and_then(|t| words.get(t.normal_or_implicit()).copied())
    };
    let by_tag = |t: Option<&Term>, tags: &HashMap<Tag, Tag>| {
        t.and_then(|t| {
            // Deepest tags first (most parents); ties keep the order the tags were added.
            let mut order = t.tags.clone();
            order
                .sort_by_key(|x| std::cmp::Reverse(m.parents.get(*x as usize).map_or(0, Vec::len)));
            order.iter().find_map(|x| tags.get(x).copied())
        })
    };
    let mut tag = by_word(next, &clues.after_words)
        .or_else(|| by_word(prev, &clues.before_words))
        .or_else(|| by_tag(prev, &clues.before_tags))
        .or_else(|| by_tag(next, &clues.after_tags));
    if let Some(adhoc) = adhoc(terms, i, &form, m) {
        tag = Some(adhoc);
    }
    if let Some(tag) = tag {
        terms[i].set_tag(tag, m, false);
        fill_tags(&mut terms[i], m);
    }
}

fn adhoc(terms: &[Term], i: usize, form: &str, m: &Model) -> Option<Tag> {
    let term = &terms[i];
    let capital = term.has(m.t.ProperNoun)
        && {
            let mut c = term.text.chars();
            matches!((c.next(), c.next()), (Some(a), Some(b)) if a.is_ascii_uppercase() && b.is_ascii_lowercase())
        };
    let capital = capital.then_some(m.t.Noun);
    let alone = |tag: Tag| (i == 0 && terms.len() == 1).then_some(tag);
    match form {
        "Adj|Gerund" | "Actor|Verb" | "Adj|Past" | "Adj|Present" | "Noun|Gerund"
        | "Person|Noun" => capital,
        "Adj|Noun" => capital.or_else(|| {
            (i + 1 == terms.len() && i > 0 && terms[i - 1].has(m.t.Determiner)).then_some(m.t.Noun)
        }),
        "Noun|Verb" => (if i > 0 { capital } else { None }).or_else(|| alone(m.t.Infinitive)),
        "Plural|Verb" => capital
            .or_else(|| alone(m.t.PresentTense))
            .or_else(|| (i == 0 && terms.len() > 3).then_some(m.t.Plural)),
        "Person|Verb" if i != 0 => capital,
        "Person|Adj" => {
            if (i == 0 && terms.len() > 1) || capital.is_some() {
                Some(m.t.Person)
            } else {
                None
            }
        }
        _ => None,
    }
}

pub(super) fn verb_type(term: &mut Term, m: &Model) {
    let typed = [
        m.t.PastTense,
        m.t.PresentTense,
        m.t.Auxiliary,
        m.t.Modal,
        m.t.Particle,
    ];
    if term.has(m.t.Verb) && !typed.iter().any(|t| term.has(*t)) {
        term.set_tag(m.t.Infinitive, m, false);
    }
}

/// '[place] tea bags in hot water': a leading verb-or-noun before a noun is an imperative.
pub(super) fn imperative(terms: &mut [Term], m: &Model) {
    if terms.len() < 2 {
        return;
    }
    let first = &terms[0];
    if !(first.switch.as_deref() == Some("Noun|Verb") || first.has(m.t.Infinitive)) {
        return;
    }
    if terms.len() < 4
        && !matches!(
            terms[1].normal.as_str(),
            "there" | "this" | "it" | "him" | "her" | "us"
        )
    {
        return;
    }
    if !first.has(m.t.PhrasalVerb) && m.multi.contains_key(&first.normal) {
        return;
    }
    if terms[1].has(m.t.Noun) || terms[1].has(m.t.Determiner) {
        let soon_verb = terms[1..terms.len().min(3)].iter().any(|t| t.has(m.t.Verb));
        if !soon_verb {
            terms[0].set_tag(m.t.Imperative, m, false);
        }
    }
}
