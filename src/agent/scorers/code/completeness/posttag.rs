//! compromise's sweep (`1-one/sweep`): a rule set run over a sentence, every rule matched
//! against the tags as they were before the sweep, then the matches' tags (or chunks)
//! applied in the sweep's order. It runs the post-tagger's 570 rules and the chunker's.

use std::collections::HashSet;

use super::matcher::find_all;
use super::model::{Model, Net};
use super::pretag::{looks_plural, quick_split};
use super::term::Term;

/// The post-tagger over one sentence, clause by clause as compromise splits it.
pub(super) fn post_tag(terms: &mut [Term], m: &Model) {
    for (start, end) in quick_split(terms, m) {
        sweep(&mut terms[start..end], &m.post_tagger, m);
    }
}

/// Runs a rule set over `terms`.
pub(super) fn sweep(terms: &mut [Term], net: &Net, m: &Model) {
    let mut todo: Vec<(usize, usize, usize)> = Vec::new();
    for r in candidates(terms, net, m) {
        let rule = &net.rules[r];
        for found in find_all(terms, &rule.regs, rule.not_if.as_deref()) {
            let range = match &rule.group {
                Some(group) => found.groups.get(group).copied(),
                None => Some((found.start, found.end)),
            };
            if let Some((start, end)) = range.filter(|(s, e)| s < e) {
                todo.push((r, start, end));
            }
        }
    }
    for (r, start, end) in todo {
        apply(&mut terms[start..end], &net.rules[r], m);
    }
}

/// The rules the sweep tries on these terms, in its order: for each hook key the terms have
/// (a word, `#Tag` or `%Switch%`), its rules, each rule once; those whose needed words and
/// tags are all there (and none of `if_no`); then the rules with no hook; none needing more
/// words than there are.
fn candidates(terms: &[Term], net: &Net, m: &Model) -> Vec<usize> {
    let mut have: HashSet<String> = HashSet::new();
    for t in terms {
        if !t.normal.is_empty() {
            have.insert(t.normal.clone());
        }
        if let Some(switch) = &t.switch {
            have.insert(format!("%{switch}%"));
        }
        have.extend(t.implicit.iter().cloned());
        have.extend(t.machine.iter().cloned());
        for tag in &t.tags {
            have.insert(format!("#{}", m.names[*tag as usize]));
        }
    }
    let mut seen: HashSet<&str> = HashSet::new();
    let mut maybe: Vec<usize> = Vec::new();
    for (key, rules) in &net.hooks {
        if have.contains(key) {
            for &r in rules {
                if net
                    .rules
                    .get(r)
                    .is_some_and(|rule| seen.insert(rule.key.as_str()))
                {
                    maybe.push(r);
                }
            }
        }
    }
    maybe.retain(|&r| {
        let rule = &net.rules[r];
        rule.needs.iter().all(|n| have.contains(n))
            && !rule.if_no.iter().any(|n| have.contains(n))
            && (rule.wants.is_empty()
                || rule.wants.iter().filter(|w| have.contains(*w)).count() >= rule.min_want)
    });
    maybe.extend(net.always.iter().copied());
    maybe.retain(|&r| {
        net.rules
            .get(r)
            .is_some_and(|rule| terms.len() >= rule.min_words)
    });
    maybe
}

/// The sweep's tagger for one match.
fn apply(terms: &mut [Term], rule: &super::model::Rule, m: &Model) {
    let names: Vec<&str> = rule
        .tags
        .iter()
        .map(|t| t.trim().trim_start_matches('#'))
        .collect();
    if rule.safe {
        // 'safe' rules give way to any tag the new one conflicts with.
        if let [name] = names.as_slice() {
            let tag = m.tag(name);
            let not = m.not.get(tag as usize).map(Vec::as_slice).unwrap_or(&[]);
            if terms.iter().any(|t| not.iter().any(|n| t.has(*n))) {
                return;
            }
        }
        if terms.last().is_some_and(|t| t.post == "-") {
            return;
        }
    }
    match names.as_slice() {
        // 'Adverb Adjective': one tag per term.
        [one] if one.contains(' ') => {
            for (term, name) in terms.iter_mut().zip(one.split(' ')) {
                let name = name.trim_start_matches('#');
                if name != "." && !name.is_empty() {
                    term.set_tag(m.tag(name), m, rule.safe);
                }
            }
        }
        _ => {
            for name in &names {
                for term in terms.iter_mut() {
                    term.set_tag(m.tag(name), m, rule.safe);
                }
            }
        }
    }
    if names.as_slice() == ["Noun"]
        && let Some(last) = terms.last_mut()
    {
        // A new noun is singular or plural by its look.
        let number = if looks_plural(&last.text) {
            m.t.Plural
        } else {
            m.t.Singular
        };
        last.set_tag(number, m, rule.safe);
    }
    if let Some(untag) = rule.untag {
        for term in terms.iter_mut() {
            term.untag(untag, m);
        }
    }
    if let Some(chunk) = rule.chunk {
        for term in terms.iter_mut() {
            term.chunk = Some(chunk);
        }
    }
}
