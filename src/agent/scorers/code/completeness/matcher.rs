//! compromise's match engine (`1-one/match`), step for step: a parsed match pattern (words,
//! tags, switches, choices, optional, greedy and negative tokens, groups, anchors) tried at a
//! term, and all non-overlapping matches in a sentence. The patterns come parsed from the
//! model (`data/compromise-en.json`), so compromise's own rules run unchanged.

use std::collections::{HashMap, HashSet};

use regex::Regex;
use serde::Deserialize;

use super::model::Tag;
use super::term::{Chunk, Term};

/// A pattern token as the model stores it (compromise's parsed `reg`).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct RegData {
    word: Option<String>,
    tag: Option<String>,
    switch: Option<String>,
    fast_or: Option<Vec<String>>,
    choices: Option<Vec<Vec<RegData>>>,
    operator: Option<String>,
    regex: Option<(String, String)>,
    method: Option<String>,
    chunk: Option<String>,
    optional: bool,
    greedy: bool,
    negative: bool,
    anything: bool,
    start: bool,
    end: bool,
    group: Option<String>,
    min: Option<usize>,
    max: Option<usize>,
}

/// A pattern token, resolved against the model.
#[derive(Clone, Default)]
pub(super) struct Reg {
    word: Option<String>,
    tag: Option<Tag>,
    switch: Option<String>,
    fast_or: Option<HashSet<String>>,
    choices: Option<Vec<Vec<Reg>>>,
    and: bool,
    regex: Option<Regex>,
    method: Option<String>,
    chunk: Option<Chunk>,
    pub optional: bool,
    greedy: bool,
    pub negative: bool,
    anything: bool,
    pub start: bool,
    pub end: bool,
    group: Option<String>,
    min: Option<usize>,
    max: Option<usize>,
}

impl Reg {
    /// The token with its tag resolved (an unknown tag matches nothing).
    pub fn resolve(data: &RegData, tag: &dyn Fn(&str) -> Tag) -> Reg {
        Reg {
            word: data.word.clone(),
            tag: data.tag.as_deref().map(tag),
            switch: data.switch.clone(),
            fast_or: data.fast_or.as_ref().map(|w| w.iter().cloned().collect()),
            choices: data.choices.as_ref().map(|cs| {
                cs.iter()
                    .map(|c| c.iter().map(|r| Reg::resolve(r, tag)).collect())
                    .collect()
            }),
            and: data.operator.as_deref() == Some("and"),
            regex: data
                .regex
                .as_ref()
                .and_then(|(source, flags)| super::model::js_regex(source, flags)),
            method: data.method.clone(),
            chunk: Chunk::named(data.chunk.as_deref().unwrap_or_default()),
            optional: data.optional,
            greedy: data.greedy,
            negative: data.negative,
            anything: data.anything,
            start: data.start,
            end: data.end,
            group: data.group.clone(),
            min: data.min,
            max: data.max,
        }
    }

    /// `@hasContraction` (`+` when greedy), anchored at the start or the end.
    pub fn has_contraction(greedy: bool, start: bool, end: bool) -> Reg {
        Reg {
            method: Some("hasContraction".to_owned()),
            greedy,
            start,
            end,
            ..Reg::default()
        }
    }

    fn without_anchors(&self) -> Reg {
        Reg {
            start: false,
            end: false,
            ..self.clone()
        }
    }
}

/// `doesMatch`: one token against one term (`index` in a phrase of `length` terms), its
/// negation applied.
fn matches(term: &Term, reg: &Reg, index: usize, length: usize) -> bool {
    let found = raw_match(term, reg, index, length);
    if reg.negative { !found } else { found }
}

fn raw_match(term: &Term, reg: &Reg, index: usize, length: usize) -> bool {
    if reg.anything {
        return true;
    }
    if (reg.start && index != 0) || (reg.end && index + 1 != length) {
        return false;
    }
    if let Some(word) = &reg.word {
        return term.machine.as_deref() == Some(word.as_str())
            || *word == term.text
            || *word == term.normal;
    }
    if let Some(tag) = reg.tag {
        return term.has(tag);
    }
    if let Some(method) = &reg.method {
        return term_method(term, method);
    }
    if let Some(re) = &reg.regex {
        return re.is_match(&term.normal);
    }
    if let Some(chunk) = reg.chunk {
        return term.chunk == Some(chunk);
    }
    if let Some(switch) = &reg.switch {
        return term.switch.as_deref() == Some(switch.as_str());
    }
    if let Some(words) = &reg.fast_or {
        let s = term
            .implicit
            .as_deref()
            .filter(|s| !s.is_empty())
            .or(term.machine.as_deref().filter(|s| !s.is_empty()))
            .unwrap_or(&term.normal);
        return words.contains(s) || words.contains(&term.text);
    }
    if let Some(choices) = &reg.choices {
        // compromise tests each choice (a list of tokens) as if it were one token, which
        // never matches: a choice block only matches through `or_block`/`and_block`.
        return reg.and && choices.is_empty();
    }
    false
}

/// compromise's term methods (`@hasComma`, …) the rules use.
fn term_method(term: &Term, method: &str) -> bool {
    match method {
        "hasComma" => term.post.contains(','),
        "hasPeriod" => term.post.contains('.') && !term.post.contains("..."),
        "hasExclamation" => term.post.contains('!'),
        "hasQuestionMark" => term.post.contains(['?', '¿']),
        "hasEllipses" => term.post.contains("..") || term.post.contains('…'),
        "hasSemicolon" => term.post.contains(';'),
        "hasColon" => term.post.contains(':'),
        "hasSlash" => term.text.contains('/'),
        "hasHyphen" => {
            matches!(term.post.as_str(), "-" | "–" | "—")
                || matches!(term.pre.as_str(), "-" | "–" | "—")
        }
        "hasDash" => term.has_dash(),
        "hasContraction" => term.implicit.is_some(),
        "isKnown" => !term.tags.is_empty(),
        "isTitleCase" => super::pretag::is_title_case(&term.text),
        "isUpperCase" => !term.text.is_empty() && term.text.chars().all(char::is_uppercase),
        "hasQuote" | "hasQuotation" => {
            term.pre.contains(['"', '\'', '“', '‘', '«', '`'])
                || term.post.contains(['"', '\'', '”', '’', '»', '´'])
        }
        _ => false,
    }
}

/// A match: its terms and its named groups (absolute indices).
pub(super) struct Found {
    pub start: usize,
    pub end: usize,
    pub groups: HashMap<String, (usize, usize)>,
}

struct State<'a> {
    t: usize,
    r: usize,
    terms: &'a [Term],
    regs: &'a [Reg],
    groups: HashMap<String, (usize, usize)>,
    start_i: usize,
    phrase_length: usize,
    in_group: Option<String>,
}

impl State<'_> {
    fn matches_at(&self, t: usize, reg: &Reg) -> bool {
        self.terms
            .get(t)
            .is_some_and(|term| matches(term, reg, self.start_i + t, self.phrase_length))
    }

    fn group(&mut self, at: usize) -> Option<&mut (usize, usize)> {
        let name = self.in_group.clone()?;
        Some(self.groups.entry(name).or_insert((at, 0)))
    }
}

/// `fromHere`: the pattern tried at the start of `terms`, a slice starting at `start_i` of a
/// phrase of `phrase_length` terms.
pub(super) fn from_here(
    terms: &[Term],
    regs: &[Reg],
    start_i: usize,
    phrase_length: usize,
) -> Option<Found> {
    if terms.is_empty() || regs.is_empty() {
        return None;
    }
    let mut s = State {
        t: 0,
        r: 0,
        terms,
        regs,
        groups: HashMap::new(),
        start_i,
        phrase_length,
        in_group: None,
    };
    while s.r < regs.len() {
        let reg: &Reg = &regs[s.r];
        s.in_group = reg.group.clone();
        if s.t >= terms.len() {
            if regs[s.r..].iter().all(|r| r.optional) {
                break;
            }
            return None;
        }
        let alive = if reg.anything && reg.greedy {
            astrix(&mut s)
        } else if reg.choices.is_some() && !reg.and {
            let skip = or_block(&s);
            choice_block(&mut s, skip)
        } else if reg.choices.is_some() {
            let skip = and_block(&s);
            choice_block(&mut s, skip)
        } else if reg.anything {
            !reg.negative && simple(&mut s)
        } else if is_end_greedy(reg, &s) {
            simple(&mut s)
        } else if reg.negative {
            negative(&mut s)
        } else if s.matches_at(s.t, reg) {
            simple(&mut s)
        } else {
            reg.optional
        };
        if !alive {
            return None;
        }
        s.r += 1;
    }
    if s.t == 0 {
        return None;
    }
    let groups = s
        .groups
        .into_iter()
        .map(|(k, (start, len))| (k, (start_i + start, start_i + start + len)))
        .collect();
    Some(Found {
        start: start_i,
        end: start_i + s.t,
        groups,
    })
}

fn simple(s: &mut State) -> bool {
    let regs = s.regs;
    let reg = &regs[s.r];
    let start_at = s.t;
    let has_next = s.r + 1 < regs.len();
    if reg.optional && has_next && reg.negative {
        return true;
    }
    if reg.optional && has_next {
        // An optional token gives way when the next one matches here and not at the next term.
        let next_reg = &regs[s.r + 1];
        if reg.negative || s.matches_at(s.t, next_reg) {
            let next_term_matches = s.t + 1 < s.terms.len() && s.matches_at(s.t + 1, next_reg);
            if !next_term_matches {
                s.r += 1;
            }
        }
    }
    let terms = s.terms;
    let term = &terms[s.t];
    if term.implicit.is_some() && s.terms.get(s.t + 1).is_some_and(|n| n.implicit.is_some()) {
        if reg.word.as_deref() == Some(term.normal.as_str()) {
            s.t += 1;
        }
        if reg.method.as_deref() == Some("hasContraction") {
            s.t += 1;
        }
    }
    s.t += 1;
    if reg.end && s.t != s.terms.len() && !reg.greedy {
        return false;
    }
    if reg.greedy {
        let Some(t) = greedy(s, reg) else {
            return false;
        };
        s.t = t;
        if reg.end && s.start_i + s.t != s.phrase_length {
            return false;
        }
    }
    if s.in_group.is_some() {
        let greedy_now = s.regs[s.r].greedy;
        let t = s.t;
        if let Some(g) = s.group(start_at) {
            if t > 1 && greedy_now {
                g.1 += t - start_at;
            } else {
                g.1 += 1;
            }
        }
    }
    true
}

/// `getGreedy`: how far a repeated token runs, stopping early where the next token matches.
fn greedy(s: &State, reg: &Reg) -> Option<usize> {
    let reg = reg.without_anchors();
    let end_reg = s.regs.get(s.r + 1);
    let start = s.t;
    let mut t = s.t;
    while t < s.terms.len() {
        let count = t - start + 1;
        if end_reg.is_some_and(|e| s.matches_at(t, e)) && reg.min.is_none_or(|min| count >= min) {
            return Some(t);
        }
        if reg.max == Some(count) {
            return Some(t);
        }
        if !s.matches_at(t, &reg) {
            if reg.min.is_some_and(|min| count < min) {
                return None;
            }
            return Some(t);
        }
        t += 1;
    }
    if reg.min.is_some_and(|min| t - start + 1 < min) {
        return None;
    }
    Some(t)
}

fn astrix(s: &mut State) -> bool {
    let regs = s.regs;
    let reg = &regs[s.r];
    let skip_to = match s.regs.get(s.r + 1) {
        None => Some(s.terms.len()),
        Some(next) => (s.t..s.terms.len()).find(|&t| s.matches_at(t, next)),
    };
    let Some(skip_to) = skip_to.filter(|&x| x != 0) else {
        return false;
    };
    if reg.min.is_some_and(|min| skip_to - s.t < min) {
        return false;
    }
    if let Some(max) = reg.max.filter(|&max| skip_to - s.t > max) {
        s.t += max;
        return true;
    }
    let t = s.t;
    if let Some(g) = s.group(t) {
        g.1 += skip_to - t;
    }
    s.t = skip_to;
    true
}

fn try_choice(s: &State, regs: &[Reg], skip: usize) -> usize {
    let mut len = 0;
    for cr in regs {
        let t = s.t + skip + len;
        if t >= s.terms.len() || !s.matches_at(t, cr) {
            return 0;
        }
        len += 1;
        if cr.greedy {
            let gr = cr.without_anchors();
            for i in t + 1..s.terms.len() {
                if !s.matches_at(i, &gr) {
                    break;
                }
                len += 1;
            }
        }
    }
    len
}

fn try_choices(s: &State, skip: usize) -> usize {
    let choices = s.regs[s.r].choices.as_deref().unwrap_or(&[]);
    choices
        .iter()
        .map(|c| try_choice(s, c, skip))
        .find(|&len| len > 0)
        .unwrap_or(0)
}

fn or_block(s: &State) -> usize {
    let mut skip = try_choices(s, 0);
    if skip > 0 && s.regs[s.r].greedy {
        loop {
            let more = try_choices(s, skip);
            if more == 0 {
                break;
            }
            skip += more;
        }
    }
    skip
}

fn and_block(s: &State) -> usize {
    let choices = s.regs[s.r].choices.as_deref().unwrap_or(&[]);
    let mut longest = 0;
    for block in choices {
        let all = block
            .iter()
            .enumerate()
            .all(|(w, cr)| s.matches_at(s.t + w, cr));
        if !all {
            return 0;
        }
        longest = longest.max(block.len());
    }
    longest
}

fn choice_block(s: &mut State, skip: usize) -> bool {
    let regs = s.regs;
    let reg = &regs[s.r];
    if skip > 0 {
        if reg.negative {
            return false;
        }
        let t = s.t;
        if let Some(g) = s.group(t) {
            g.1 += skip;
        }
        if reg.end && s.t + s.start_i + skip != s.phrase_length {
            return false;
        }
        s.t += skip;
        return true;
    }
    if reg.negative {
        if !reg.optional {
            s.t += 1;
        }
        return true;
    }
    reg.optional
}

fn is_end_greedy(reg: &Reg, s: &State) -> bool {
    reg.end
        && reg.greedy
        && s.start_i + s.t + 1 < s.phrase_length
        && s.matches_at(
            s.t,
            &Reg {
                end: false,
                ..reg.clone()
            },
        )
}

fn negative(s: &mut State) -> bool {
    let reg = s.regs[s.r].clone();
    let positive = Reg {
        negative: false,
        ..reg.clone()
    };
    if s.matches_at(s.t, &positive) {
        return false;
    }
    if reg.optional
        && let Some(next) = s.regs.get(s.r + 1)
    {
        if s.matches_at(s.t, next) {
            s.r += 1;
        } else if next.optional && s.regs.get(s.r + 2).is_some_and(|n2| s.matches_at(s.t, n2)) {
            s.r += 2;
        }
    }
    if reg.greedy {
        let next = s.regs.get(s.r + 1);
        let mut skip = 0;
        for t in s.t..s.terms.len() {
            if s.matches_at(t, &positive) || next.is_some_and(|n| s.matches_at(t, n)) {
                break;
            }
            skip += 1;
            if positive.max == Some(skip) {
                break;
            }
        }
        if skip == 0 || positive.min.is_some_and(|min| min > skip) {
            return false;
        }
        s.t += skip;
        return true;
    }
    s.t += 1;
    true
}

/// `match()` on one phrase: every non-overlapping match left to right (only at the start
/// for a `^` pattern, only at the end for a `$` one), less those `not_if` matches inside.
pub(super) fn find_all(terms: &[Term], regs: &[Reg], not_if: Option<&[Reg]>) -> Vec<Found> {
    let Some(first) = regs.first() else {
        return Vec::new();
    };
    let min_length = regs.iter().filter(|r| !r.optional && !r.negative).count();
    let mut results = Vec::new();
    if first.start {
        results.extend(from_here(terms, regs, 0, terms.len()));
    } else {
        let mut i = 0;
        while i < terms.len() {
            if terms.len() - i < min_length {
                break;
            }
            if let Some(found) = from_here(&terms[i..], regs, i, terms.len()) {
                let end = found.end;
                results.push(found);
                if end.abs_diff(1) > i {
                    i = end.abs_diff(1);
                }
            }
            i += 1;
        }
    }
    if regs.last().is_some_and(|r| r.end) {
        results.retain(|f| f.end == terms.len());
    }
    if let Some(not) = not_if {
        results.retain(|f| {
            let inside = &terms[f.start..f.end];
            !(0..inside.len()).any(|i| from_here(&inside[i..], not, i, inside.len()).is_some())
        });
    }
    results
}
