//! compromise's phrase finders over a tagged sentence: the chunker (noun, verb, adjective and
//! pivot chunks), `nouns()`, `verbs()` and `topics()`, each as ranges of terms, with the split
//! rules of compromise 14.17.0 written out as code.

use std::ops::Range;

use super::model::{Model, Tag};
use super::term::{Chunk, Term};

/// A phrase: a range of a sentence's terms.
pub(super) type Phrase = Range<usize>;

/// Assigns each term its chunk (`compute('chunks')`).
pub(super) fn chunk(terms: &mut [Term], m: &Model) {
    for term in terms.iter_mut() {
        let chunk = if term.normal == "this" {
            Some(Chunk::Noun)
        } else if term.normal == "then" {
            Some(Chunk::Pivot)
        } else if term.has(m.t.Verb) {
            Some(Chunk::Verb)
        } else if term.has(m.t.Noun) || term.has(m.t.Determiner) || term.has(m.t.Value) {
            Some(Chunk::Noun)
        } else if term.has(m.t.QuestionWord) {
            Some(Chunk::Pivot)
        } else {
            None
        };
        if let Some(chunk) = chunk {
            term.set_chunk(chunk);
        }
    }
    // By neighbour: 'is cool' vs 'the cool dog'; 'really swimming' vs 'really cool'.
    for i in 0..terms.len() {
        if terms[i].chunk.is_some() {
            continue;
        }
        let left = i.checked_sub(1).map(|j| &terms[j]);
        let right = terms.get(i + 1);
        let l = |t: Tag| left.is_some_and(|x| x.has(t));
        let r = |t: Tag| right.is_some_and(|x| x.has(t));
        let term = &terms[i];
        let chunk = if term.has(m.t.Adjective) {
            if l(m.t.Copula) {
                Some(Chunk::Adjective)
            } else if l(m.t.Determiner) || r(m.t.Noun) {
                Some(Chunk::Noun)
            } else {
                None
            }
        } else if term.has(m.t.Adverb) || term.has(m.t.Negative) {
            if l(m.t.Adjective) {
                Some(Chunk::Adjective)
            } else if l(m.t.Verb) {
                Some(Chunk::Verb)
            } else if r(m.t.Adjective) {
                Some(Chunk::Adjective)
            } else if r(m.t.Verb) {
                Some(Chunk::Verb)
            } else {
                None
            }
        } else {
            None
        };
        if let Some(chunk) = chunk {
            terms[i].set_chunk(chunk);
        }
    }
    // The chunker's match rules ('son of a gun', 'was nice', …).
    super::posttag::sweep(terms, &m.chunker, m);
    for term in terms.iter_mut() {
        if term.chunk.is_none() && !term.chunk_cleared {
            term.chunk = Some(if term.has(m.t.Conjunction) || term.has(m.t.Preposition) {
                Chunk::Pivot
            } else if term.has(m.t.Adverb) {
                Chunk::Verb
            } else {
                Chunk::Noun
            });
        }
    }
    // A verb chunk with no verb in it is no verb chunk.
    let mut i = 0;
    while i < terms.len() {
        let c = terms[i].chunk;
        let end = (i..terms.len())
            .find(|&j| terms[j].chunk != c)
            .unwrap_or(terms.len());
        if c == Some(Chunk::Verb) && !terms[i..end].iter().any(|t| t.has(m.t.Verb)) {
            for t in &mut terms[i..end] {
                t.chunk = None;
                t.chunk_cleared = true;
            }
        }
        i = end;
    }
}

/// Maximal runs of terms in `chunk`, within `within`.
fn runs(terms: &[Term], within: &Phrase, chunk: Chunk) -> Vec<Phrase> {
    let mut out = Vec::new();
    let mut start = None;
    for i in within.clone() {
        match (terms[i].chunk == Some(chunk), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push(s..i);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push(s..within.end);
    }
    out
}

/// Splits each phrase after every term `at` marks (`at` sees the phrase: a pattern matches
/// within it).
fn split_after(phrases: Vec<Phrase>, at: impl Fn(&Phrase, usize) -> bool) -> Vec<Phrase> {
    phrases
        .into_iter()
        .flat_map(|p| {
            let mut out = Vec::new();
            let mut start = p.start;
            for i in p.clone() {
                if at(&p, i) && i + 1 < p.end {
                    out.push(start..i + 1);
                    start = i + 1;
                }
            }
            out.push(start..p.end);
            out
        })
        .collect()
}

/// Splits each phrase before every term `at` marks.
fn split_before(phrases: Vec<Phrase>, at: impl Fn(&Phrase, usize) -> bool) -> Vec<Phrase> {
    phrases
        .into_iter()
        .flat_map(|p| {
            let mut out = Vec::new();
            let mut start = p.start;
            for i in p.clone() {
                if i > start && at(&p, i) {
                    out.push(start..i);
                    start = i;
                }
            }
            out.push(start..p.end);
            out
        })
        .collect()
}

/// Puts every term `at` marks in a phrase of its own.
fn split_on(phrases: Vec<Phrase>, at: impl Fn(&Phrase, usize) -> bool) -> Vec<Phrase> {
    phrases
        .into_iter()
        .flat_map(|p| {
            let marked: Vec<usize> = p.clone().filter(|&i| at(&p, i)).collect();
            split_after(split_before(vec![p], |_, i| marked.contains(&i)), |_, i| {
                marked.contains(&i)
            })
        })
        .collect()
}

/// Removes the terms `at` marks, splitting phrases around them.
fn remove(phrases: Vec<Phrase>, at: impl Fn(usize) -> bool) -> Vec<Phrase> {
    phrases
        .into_iter()
        .flat_map(|p| pieces(&p, |i| !at(i)))
        .collect()
}

/// The contiguous runs of `phrase` where `keep` holds.
pub(super) fn pieces(phrase: &Phrase, keep: impl Fn(usize) -> bool) -> Vec<Phrase> {
    let mut out = Vec::new();
    let mut start = None;
    for i in phrase.clone() {
        match (keep(i), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push(s..i);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push(s..phrase.end);
    }
    out
}

/// `clauses()`: the sentence split after a comma that does not join a list, a place, a date
/// or adjectives, and after an ellipsis, semicolon, dash or colon. (compromise's splits at
/// parentheses, quotations and conjunctions such as 'although' are left out: they seldom
/// fall inside a noun chunk.)
fn clauses(terms: &[Term], m: &Model) -> Vec<Phrase> {
    let n = terms.len();
    let comma = |i: usize| terms.get(i).is_some_and(|t| t.post.contains(','));
    let has = |i: usize, t: Tag| terms.get(i).is_some_and(|x| x.has(t));
    let (city, country) = (m.tag("City"), m.tag("Country"));
    let split = |i: usize| {
        if comma(i) {
            // A word on each side (two after), and no comma beside it: 'fun, cool, and'.
            if i == 0 || i + 2 >= n || comma(i - 1) || comma(i + 1) {
                return false;
            }
            let joined = (has(i, city) && has(i + 1, country))
                || (has(i, m.t.WeekDay) && has(i + 1, m.t.Date))
                || (has(i, m.t.Date) && has(i + 1, m.t.Value))
                || (has(i, m.t.Adjective) && has(i + 1, m.t.Adjective));
            return !joined;
        }
        let t = &terms[i];
        t.post.contains("..") || t.post.contains(['…', ';', ':']) || t.has_dash()
    };
    split_after(whole(n), |_, i| split(i))
}

/// `nouns()`: noun chunks within clauses, split at commas, pronouns, expressions, a new
/// determiner after a noun, and possessive determiners.
pub(super) fn nouns(terms: &[Term], m: &Model) -> Vec<Phrase> {
    // A pattern's terms must lie in the phrase it is matched in.
    let word = |p: &Phrase, i: Option<usize>, words: &[&str]| {
        i.is_some_and(|i| p.contains(&i) && terms[i].is_any(words))
    };
    let tag =
        |p: &Phrase, i: Option<usize>, t: Tag| i.is_some_and(|i| p.contains(&i) && terms[i].has(t));
    let prev = |i: usize| i.checked_sub(1);
    let mut found: Vec<Phrase> = clauses(terms, m)
        .iter()
        .flat_map(|c| runs(terms, c, Chunk::Noun))
        .collect();
    found = split_after(found, |_, i| {
        terms[i].post.contains(',') && !terms[i].has(m.t.Place)
    });
    found = split_on(found, |p, i| tag(p, Some(i), m.t.Expression));
    found = split_on(found, |p, i| {
        word(p, Some(i), &["he", "she", "we", "you", "they", "i"])
    });
    found = split_on(found, |p, i| {
        word(p, Some(i), &["he", "him", "she", "it"])
            && (tag(p, prev(i), m.t.Noun) || tag(p, prev(i), m.t.Adjective))
    });
    found = split_on(found, |p, i| {
        word(p, Some(i), &["he", "him", "she", "it"])
            && (tag(p, Some(i + 1), m.t.Determiner) || tag(p, Some(i + 1), m.t.Value))
    });
    found = split_before(found, |p, i| {
        tag(p, prev(i), m.t.Noun)
            && word(p, Some(i), &["the", "a", "an"])
            && (tag(p, Some(i + 1), m.t.Noun)
                || (tag(p, Some(i + 1), m.t.Adjective) && tag(p, Some(i + 2), m.t.Noun)))
    });
    found = split_on(found, |p, i| {
        word(p, Some(i), &["here", "there"]) && tag(p, Some(i + 1), m.t.Noun)
    });
    found = split_on(found, |p, i| {
        tag(p, Some(i), m.t.Noun) && word(p, Some(i + 1), &["here", "there"])
    });
    found = split_before(found, |p, i| {
        word(p, Some(i), &["our", "my", "their", "your"])
    });
    found = split_on(found, |p, i| {
        tag(p, prev(i), m.t.Noun) && tag(p, Some(i), m.t.Determiner)
    });
    found.retain(|p| terms[p.clone()].iter().any(|t| t.has(m.t.Noun)));
    found
}

/// `verbs()`: verb chunks without conjunctions, prepositions or adjectives, split at commas
/// and between two verbs that do not belong together.
pub(super) fn verbs(terms: &[Term], m: &Model) -> Vec<Phrase> {
    let word = |p: &Phrase, i: Option<usize>, words: &[&str]| {
        i.is_some_and(|i| p.contains(&i) && terms[i].is_any(words))
    };
    let tag =
        |p: &Phrase, i: Option<usize>, t: Tag| i.is_some_and(|i| p.contains(&i) && terms[i].has(t));
    let tense =
        |p: &Phrase, i: Option<usize>| tag(p, i, m.t.PresentTense) || tag(p, i, m.t.PastTense);
    let prev = |i: usize| i.checked_sub(1);
    let mut found = runs(terms, &(0..terms.len()), Chunk::Verb);
    found = remove(found, |i| {
        terms[i].has(m.t.Conjunction) || terms[i].has(m.t.Preposition)
    });
    found = split_after(found, |_, i| terms[i].post.contains(','));
    found = split_after(found, |p, i| {
        word(p, Some(i), &["do", "did", "am", "was", "is", "will"])
            && word(p, Some(i + 1), &["is", "was"])
    });
    found = split_before(found, |p, i| {
        word(p, Some(i), &["being"])
            && tag(p, prev(i), m.t.Verb)
            && !tag(p, prev(i), m.t.Copula)
            && tag(p, Some(i + 1), m.t.Verb)
    });
    found = split_before(found, |p, i| {
        word(p, Some(i), &["to"])
            && word(p, Some(i + 1), &["be"])
            && tag(p, prev(i), m.t.Verb)
            && tag(p, Some(i + 2), m.t.Verb)
    });
    found = split_after(found, |p, i| {
        word(p, Some(i), &["help"]) && tag(p, Some(i + 1), m.t.PresentTense)
    });
    // A phrase's last copula after a tensed verb ('what i can sell is').
    found = split_before(found, |p, i| {
        i + 1 == p.end && tag(p, Some(i), m.t.Copula) && tense(p, prev(i))
    });
    found = split_before(found, |p, i| {
        tense(p, prev(i)) && word(p, Some(i), &["had", "has"])
    });
    found = found
        .into_iter()
        .map(|p| {
            if p.len() > 1 && terms[p.end - 1].has(m.t.Reflexive) {
                p.start..p.end - 1
            } else {
                p
            }
        })
        .collect();
    found = remove(found, |i| terms[i].has(m.t.Adjective));
    // Non-overlapping, left to right: 'sat sat sat' → 'sat' | 'sat sat'.
    found = found
        .into_iter()
        .flat_map(|p| {
            let mut out = Vec::new();
            let mut start = p.start;
            let mut i = p.start;
            while i + 1 < p.end {
                if terms[i].has(m.t.PastTense) {
                    let mut j = i + 1;
                    while j < p.end && terms[j].has(m.t.Auxiliary) {
                        j += 1;
                    }
                    if j < p.end && terms[j].has(m.t.PastTense) {
                        out.push(start..i + 1);
                        start = i + 1;
                        i = j + 1;
                        continue;
                    }
                }
                i += 1;
            }
            out.push(start..p.end);
            out
        })
        .collect();
    found = split_after(found, |p, i| {
        tag(p, prev(i), m.t.Copula)
            && tag(p, Some(i), m.t.Gerund)
            && tag(p, Some(i + 1), m.t.PastTense)
    });
    found.retain(|p| !p.is_empty() && terms[p.clone()].iter().any(|t| t.has(m.t.Verb)));
    // 'held annually is called': a copula after a main verb starts a phrase of its own.
    let two_verbs = found.iter().any(|p| {
        p.clone().any(|i| {
            terms[i].has(m.t.Verb) && !terms[i].has(m.t.Auxiliary) && {
                let mut j = i + 1;
                while j < p.end && terms[j].has(m.t.Adverb) {
                    j += 1;
                }
                j < p.end && terms[j].has(m.t.Copula)
            }
        })
    });
    if two_verbs {
        found = split_before(found, |_, i| terms[i].has(m.t.Copula));
    }
    found
}

/// `topics()`: people, places and organisations, in order.
pub(super) fn topics(terms: &[Term], m: &Model) -> Vec<Phrase> {
    let tag = |i: usize, t: Tag| terms.get(i).is_some_and(|x| x.has(t));
    let all = 0..terms.len();
    let mut found = Vec::new();
    let people = split_after(vec![all.clone()], |_, i| terms[i].post.contains(','));
    for p in people {
        let mut start = None;
        for i in p.clone() {
            let person = tag(i, m.t.Person)
                || (tag(i, m.t.Honorific) && start.is_none() && tag(i + 1, m.t.Person));
            match (person, start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    found.push(s..i);
                    start = None;
                }
                _ => {}
            }
            if person
                && tag(i, m.t.Possessive)
                && !matches!(terms[i].normal.as_str(), "his" | "her")
                && let Some(s) = start.take()
            {
                found.push(s..i + 1);
            }
        }
        if let Some(s) = start {
            found.push(s..p.end);
        }
    }
    let places = runs_where(terms, |i| tag(i, m.t.Place) || tag(i, m.tag("Address")));
    found.extend(split_after(places, |_, i| terms[i].post.contains(',')));
    found.extend(runs_where(terms, |i| tag(i, m.t.Organization)));
    let generic = |i: usize| {
        matches!(
            terms[i].normal.as_str(),
            "someone" | "man" | "woman" | "mother" | "brother" | "sister" | "father"
        )
    };
    let mut found = remove(found, generic);
    found.sort_by_key(|p| (p.start, p.end));
    found
}

fn runs_where(terms: &[Term], at: impl Fn(usize) -> bool) -> Vec<Phrase> {
    remove(whole(terms.len()), |i| !at(i))
}

/// One phrase of all `n` terms.
fn whole(n: usize) -> Vec<Phrase> {
    std::iter::once(0..n).collect()
}
