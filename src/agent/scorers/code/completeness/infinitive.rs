//! compromise's `verbs().toInfinitive()` on one verb phrase: the main verb through the
//! conjugation models, the auxiliaries dropped, and a negative phrase given 'not' and
//! 'do'/'does', quirks included ('is not' → 'does be not').

use std::sync::OnceLock;

use regex::Regex;

use super::matcher::{Reg, find_all};
use super::model::{Conversion, Model, Tag};
use super::phrases::{self, Phrase};
use super::term::Term;
use super::tokenize::words_of;

/// `toInfinitive()` on one verb phrase: its main verb in the infinitive, its auxiliaries
/// removed, and for a negative phrase 'not' and do/does put in front ('is not' → 'does be
/// not', compromise's own reading). Returns the phrase's new range.
pub(super) fn to_infinitive(terms: &mut Vec<Term>, vb: Phrase, m: &Model) -> Phrase {
    let root = main_verb(terms, &vb, m);
    let aux: Vec<usize> = if root.start > vb.start {
        (vb.start..root.start)
            .filter(|&i| {
                !(terms[i].has(m.t.Adverb)
                    || terms[i].has(m.t.Negative)
                    || terms[i].has(m.t.Prefix))
            })
            .collect()
    } else {
        Vec::new()
    };
    let negative = terms[vb.clone()].iter().any(|t| t.has(m.t.Negative));
    let root_text = normal_text(terms, root.clone(), m);
    let tense = tense_of(&terms[root.clone()], m);
    let infinitive = infinitive(&root_text, tense, m);
    let mut end = vb.end;
    if !infinitive.is_empty() {
        // `replace()`: inserting after the root spells out contractions at its last term,
        // any part left in the root grows over all the parts beside it, and deleting the old
        // root spells out those beside it.
        spell_out(terms, root.end - 1..root.end, false);
        spell_out(terms, root.clone(), true);
        spell_out(terms, root.clone(), false);
        let old: Vec<Vec<Tag>> = terms[root.clone()].iter().map(|t| t.tags.clone()).collect();
        let new: Vec<Term> = words_of(&infinitive)
            .into_iter()
            .enumerate()
            .map(|(k, mut t)| {
                t.tags = old.get(k).cloned().unwrap_or_default();
                t.set_tag(m.t.Verb, m, false);
                t
            })
            .collect();
        let added = new.len() as isize - root.len() as isize;
        terms.splice(root.clone(), new);
        terms[root.start].set_tag(m.t.Infinitive, m, false);
        end = end.saturating_add_signed(added);
    }
    // Remove the auxiliaries (they come before the root, so its indices do not move).
    if let (Some(&first), Some(&last)) = (aux.first(), aux.last()) {
        spell_out(terms, first..last + 1, false);
    }
    for &i in aux.iter().rev() {
        terms.remove(i);
        end -= 1;
    }
    if negative {
        if !terms[vb.start..end].iter().any(|t| t.is_word("not")) {
            prepend(terms, vb.start, "not");
            end += 1;
        }
        let does = do_does(terms, vb.start..end, m);
        prepend(terms, vb.start, does);
        end += 1;
    }
    vb.start..end
}

/// `prepend()`: a word put before the phrase (spelling out a contraction at its first term).
fn prepend(terms: &mut Vec<Term>, at: usize, word: &str) {
    spell_out(terms, at..at + 1, false);
    let mut t = Term::new(word.to_owned(), String::new(), " ".to_owned());
    t.normal = word.to_owned();
    terms.insert(at, t);
}

/// `root.text('normal')`: the root's normal words with some of their punctuation, as
/// compromise writes them; a root at the start of its sentence keeps its end punctuation
/// ('spoiled.'), which then fails to conjugate, as there.
fn normal_text(terms: &[Term], root: Phrase, m: &Model) -> String {
    static PUNCT: OnceLock<[Regex; 8]> = OnceLock::new();
    let [trim_start, trim_end, kill, exclaim_question, exclaims, questions, dots, space] = PUNCT.get_or_init(|| {
        let re = |p: &str| Regex::new(p).expect("a valid constant pattern");
        [
            re("^[(\\['\"*~\u{FF02}\u{201C}\u{2018}\u{201F}\u{201B}\u{201E}\u{2E42}\u{201A}\u{00AB}\u{2039}\u{2035}\u{2036}\u{2037}\u{301D}\u{0060}\u{301F}]+"),
            re("[,:;)\\]*.?~!\u{0022}\u{FF02}\u{201D}\u{2019}\u{00BB}\u{203A}\u{2032}\u{2033}\u{2034}\u{301E}\u{00B4}—-]+$"),
            re("[,:;)('\"\u{201D}\\]]"),
            re("\\?!+"),
            re("!+"),
            re("\\?+"),
            re("\\.{2,}"),
            re(WS_RUN),
        ]
    });
    let mut text = String::new();
    for t in &terms[root.clone()] {
        let pre = trim_start.replace(&t.pre, "");
        let mut post = if matches!(t.post.as_str(), "-" | "–" | "—") {
            " ".to_owned()
        } else {
            t.post.clone()
        };
        for (re, with) in [
            (kill, ""),
            (exclaim_question, "?"),
            (exclaims, "!"),
            (questions, "?"),
            (dots, ""),
        ] {
            post = re.replacen(&post, 1, with).into_owned();
        }
        if t.has(m.t.Abbreviation) {
            post = post.replacen('.', "", 1);
        }
        let pre = match pre
            .char_indices()
            .find(|(_, c)| super::super::is_js_space(*c))
        {
            Some((i, c)) => format!("{}{}", &pre[..i], &pre[i + c.len_utf8()..]),
            None => pre.into_owned(),
        };
        let post = space.replacen(&post, 1, " ");
        // The verb's contractions are spelled out first, so a part reads as its word.
        let word = t.reading();
        text.push_str(&pre);
        text.push_str(word);
        text.push_str(&post);
    }
    let mut text = super::super::js_trim(&text).to_owned();
    if root.start != 0 {
        text = trim_end
            .replace(&trim_start.replace(&text, ""), "")
            .into_owned();
        if text.ends_with('\'') && !text.ends_with("s'") {
            text = text.replacen('\'', "", 1);
        }
    }
    text
}

/// A run of JavaScript whitespace (`\s+`).
const WS_RUN: &str = "[\\t\\n\\x0B\\x0C\\r \\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}\\x{feff}]+";

/// `getMain`: the phrase without negatives, auxiliaries, modals, adverbs and prefixes (its
/// last piece when that leaves several), else the phrase without negatives.
fn main_verb(terms: &[Term], vb: &Phrase, m: &Model) -> Phrase {
    if vb.len() <= 1 {
        return vb.clone();
    }
    let skip = |t: &Term| {
        [
            m.t.Negative,
            m.t.Auxiliary,
            m.t.Modal,
            m.t.Adverb,
            m.t.Prefix,
        ]
        .iter()
        .any(|x| t.has(*x))
    };
    let mut root = phrases::pieces(vb, |i| !skip(&terms[i])).last().cloned();
    if let Some(r) = &root {
        // 'want to' (within the root) is a modal here.
        let want =
            |i: usize| r.contains(&i) && matches!(terms[i].reading(), "want" | "wants" | "wanted");
        let to = |i: usize| r.contains(&i) && terms[i].reading() == "to";
        let keep: Vec<usize> = r
            .clone()
            .filter(|&i| !(want(i) && to(i + 1) || to(i) && i > 0 && want(i - 1)))
            .collect();
        root = keep.first().map(|&s| s..keep.last().map_or(s, |e| e + 1));
    }
    match root {
        Some(r) if !r.is_empty() => r,
        _ => phrases::pieces(vb, |i| !terms[i].has(m.t.Negative))
            .into_iter()
            .next()
            .unwrap_or_else(|| vb.clone()),
    }
}

/// compromise's `grow('@hasContraction')` (`+` when greedy) `.contractions().expand()`, which
/// it runs when a change touches a contraction: the range grows by the contraction parts
/// beside it (as its matcher finds them), and each run of parts in it is spelled out, each
/// part's word becoming its text.
fn spell_out(terms: &mut [Term], range: Phrase, greedy: bool) {
    if range.end > terms.len() || !terms[range.clone()].iter().any(|t| t.implicit.is_some()) {
        return;
    }
    let right = find_all(
        &terms[range.end..],
        &[Reg::has_contraction(greedy, true, false)],
        None,
    );
    let end = range.end + right.iter().map(|f| f.end - f.start).sum::<usize>();
    let left = find_all(
        &terms[..range.start],
        &[Reg::has_contraction(greedy, false, true)],
        None,
    );
    let start = range.start
        - left
            .iter()
            .map(|f| f.end - f.start)
            .sum::<usize>()
            .min(range.start);
    let runs = find_all(
        &terms[start..end],
        &[Reg::has_contraction(true, false, false)],
        None,
    );
    for run in runs {
        let (from, to) = (start + run.start, start + run.end);
        let title = super::pretag::is_title_case(&terms[from].text);
        let last = to - 1;
        for (i, t) in terms[from..to].iter_mut().enumerate() {
            let word = t.implicit.take().unwrap_or_default();
            t.normal = word.to_lowercase();
            t.text = word;
            t.machine = None;
            if from + i < last && t.post.is_empty() {
                t.post.push(' ');
            }
        }
        if title {
            terms[from].text = capitalize(&terms[from].text);
        }
    }
}

fn capitalize(word: &str) -> String {
    let mut c = word.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// `getTense`: the root's tense, Infinitive first.
fn tense_of(root: &[Term], m: &Model) -> Option<Tag> {
    [
        m.t.Infinitive,
        m.t.Participle,
        m.t.PastTense,
        m.t.Gerund,
        m.t.PresentTense,
    ]
    .into_iter()
    .find(|t| root.iter().any(|r| r.has(*t)))
}

/// compromise's `toInfinitive(str, model, tense)`: forms of 'be' as 'be', else the verb
/// (its particle and prefix kept) through the conjugation model for its tense.
fn infinitive(text: &str, tense: Option<Tag>, m: &Model) -> String {
    if matches!(
        text,
        "are" | "were" | "been" | "is" | "am" | "was" | "be" | "being"
    ) {
        return "be".to_owned();
    }
    let tense = tense.or_else(|| super::pretag::guess_tense(text, m));
    let mut parts = text.split(' ');
    let mut verb = parts.next().unwrap_or("");
    let mut particle = parts.next().unwrap_or("");
    let mut prefix = "";
    if !particle.is_empty() && m.prefixes.contains(verb) {
        prefix = verb;
        verb = particle;
        particle = "";
    }
    let model = match tense {
        Some(t) if t == m.t.Participle => "fromParticiple",
        Some(t) if t == m.t.PastTense => "fromPast",
        Some(t) if t == m.t.PresentTense => "fromPresent",
        Some(t) if t == m.t.Gerund => "fromGerund",
        _ => return text.to_owned(),
    };
    let mut out = m
        .conjugation
        .get(model)
        .map_or_else(|| verb.to_owned(), |c| convert(verb, c));
    if !particle.is_empty() {
        out = format!("{out} {particle}");
    }
    if !prefix.is_empty() {
        out = format!("{prefix} {out}");
    }
    out
}

/// suffix-thumb's `convert`: an exception, a suffix kept as it is, else the longest rule.
fn convert(word: &str, model: &Conversion) -> String {
    if let Some(ex) = model.ex.get(word).filter(|e| !e.is_empty()) {
        return ex.clone();
    }
    if model.same.iter().any(|s| word.ends_with(s.as_str())) {
        return word.to_owned();
    }
    let chars: Vec<char> = word.chars().collect();
    for i in (1..chars.len()).rev() {
        let size = chars.len() - i;
        let suffix: String = chars[size..].iter().collect();
        let stem: String = chars[..size].iter().collect();
        if let Some(to) = model.fwd.get(&suffix).or_else(|| model.both.get(&suffix)) {
            return format!("{stem}{to}");
        }
    }
    match model.fwd.get("").or_else(|| model.both.get("")) {
        Some(to) => format!("{word}{to}"),
        None => word.to_owned(),
    }
}

/// `doDoes`: 'do' after I, we or a plural subject (or beside are/were/does), else 'does'.
fn do_does(terms: &[Term], vb: Phrase, m: &Model) -> &'static str {
    if terms[vb.clone()]
        .iter()
        .any(|t| t.is_any(&["are", "were", "does"]))
    {
        return "do";
    }
    let before = &terms[..vb.start];
    let subject = phrases::nouns(before, m).pop();
    let Some(subject) = subject else {
        return "does";
    };
    let words = &before[subject];
    if words
        .iter()
        .any(|t| t.is_any(&["i", "we", "those", "they"]))
    {
        return "do";
    }
    let head = words.iter().rev().find(|t| t.has(m.t.Noun));
    if head.is_some_and(|t| t.has(m.t.Plural)) {
        "do"
    } else {
        "does"
    }
}
