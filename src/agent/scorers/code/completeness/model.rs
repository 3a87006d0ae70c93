//! compromise 14.17.0's English model, as `data/compromise-en.json` holds it (generated from
//! the npm package by `tests/reference/record/scorer_data.mjs`): the tag tree, the lexicon,
//! the clues for ambiguous and unknown words, and the verb conjugation rules.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

use super::matcher::{Reg, RegData};
use super::term::Chunk;

/// A tag of compromise's tag set, by its index in `Model::names`.
pub(super) type Tag = u8;

/// The tags the port names in code; resolved once from the model's names.
macro_rules! known_tags {
    ($($field:ident = $name:literal,)*) => {
        /// Tags by name.
        #[allow(non_snake_case)]
        pub(super) struct Known { $(pub $field: Tag,)* }

        fn known(index: &HashMap<String, Tag>) -> Known {
            Known { $($field: index.get($name).copied().unwrap_or(Tag::MAX),)* }
        }
    };
}

known_tags! {
    Acronym = "Acronym", Adjective = "Adjective", Adverb = "Adverb", Auxiliary = "Auxiliary",
    Cardinal = "Cardinal", Conjunction = "Conjunction",
    Copula = "Copula", Date = "Date", Determiner = "Determiner", Expression = "Expression",
    FirstName = "FirstName", Gerund = "Gerund", Hyphenated = "Hyphenated",
    Imperative = "Imperative", Infinitive = "Infinitive", Modal = "Modal", Month = "Month",
    Negative = "Negative", Noun = "Noun", NumericValue = "NumericValue",
    Organization = "Organization", Ordinal = "Ordinal", Participle = "Participle",
    Particle = "Particle", PastTense = "PastTense", Person = "Person",
    PhrasalVerb = "PhrasalVerb", Place = "Place", Plural = "Plural", Possessive = "Possessive",
    Preposition = "Preposition", PresentTense = "PresentTense", Prefix = "Prefix",
    Pronoun = "Pronoun", ProperNoun = "ProperNoun", QuestionWord = "QuestionWord",
    Reflexive = "Reflexive", RomanNumeral = "RomanNumeral", Singular = "Singular",
    SlashedTerm = "SlashedTerm", HashTag = "HashTag",
    Uncountable = "Uncountable", Value = "Value", Verb = "Verb",
    WeekDay = "WeekDay", Year = "Year", Activity = "Activity", Honorific = "Honorific",
    Abbreviation = "Abbreviation", Unit = "Unit", Actor = "Actor",
}

/// Which way an ambiguous word leans, by its neighbours (`model.two.clues[form]`).
#[derive(Default)]
pub(super) struct Clues {
    pub before_tags: HashMap<Tag, Tag>,
    pub after_tags: HashMap<Tag, Tag>,
    pub before_words: HashMap<String, Tag>,
    pub after_words: HashMap<String, Tag>,
}

/// A suffix-thumb conversion model (`fromPast`, `fromGerund`, …).
#[derive(Default, Deserialize)]
pub(super) struct Conversion {
    pub fwd: HashMap<String, String>,
    pub both: HashMap<String, String>,
    pub ex: HashMap<String, String>,
    pub same: Vec<String>,
}

/// A contraction rule: a whole word, or what comes before or after the apostrophe.
#[derive(Deserialize)]
pub(super) struct Contraction {
    pub word: Option<String>,
    pub before: Option<String>,
    pub after: Option<String>,
    pub out: Vec<String>,
}

/// A post-tagger or chunker rule: its pattern and what a match does.
pub(super) struct Rule {
    /// The pattern's text, which identifies the rule in the sweep.
    pub key: String,
    pub regs: Vec<Reg>,
    pub group: Option<String>,
    pub not_if: Option<Vec<Reg>>,
    pub if_no: Vec<String>,
    /// Tag names: one (space-separated for one per matched term) or several for all.
    pub tags: Vec<String>,
    pub untag: Option<Tag>,
    pub chunk: Option<Chunk>,
    pub safe: bool,
    pub needs: Vec<String>,
    pub wants: Vec<String>,
    pub min_want: usize,
    pub min_words: usize,
}

/// A rule set with compromise's sweep hooks: which rules a sentence with a given word, tag or
/// switch may match, in the order the sweep runs them.
#[derive(Default)]
pub(super) struct Net {
    pub rules: Vec<Rule>,
    pub hooks: Vec<(String, Vec<usize>)>,
    pub always: Vec<usize>,
}

/// The loaded model.
pub(super) struct Model {
    pub names: Vec<String>,
    index: HashMap<String, Tag>,
    pub frozen: HashMap<String, Vec<Tag>>,
    pub post_tagger: Net,
    pub chunker: Net,
    pub t: Known,
    pub parents: Vec<Vec<Tag>>,
    pub not: Vec<Vec<Tag>>,
    pub lexicon: HashMap<String, Vec<Tag>>,
    /// First word of a multi-word lexicon entry → the most words such an entry has.
    pub multi: HashMap<String, usize>,
    pub switches: HashMap<String, String>,
    pub clues: HashMap<String, Clues>,
    pub suffix_patterns: Vec<HashMap<String, Tag>>,
    pub prefix_patterns: Vec<HashMap<String, Tag>>,
    pub ends_with: HashMap<char, Vec<(Regex, Vec<Tag>)>>,
    pub regex_text: Vec<(Regex, Vec<Tag>)>,
    pub regex_normal: Vec<(Regex, Vec<Tag>)>,
    pub regex_numbers: Vec<(Regex, Vec<Tag>)>,
    pub left_tags: Vec<(Tag, Tag)>,
    pub left_words: Vec<(String, Tag)>,
    pub right_tags: Vec<(Tag, Tag)>,
    pub right_words: Vec<(String, Tag)>,
    pub conjugation: HashMap<String, Conversion>,
    pub tense_guess: HashMap<String, Tag>,
    pub contractions: Vec<Contraction>,
    pub number_suffixes: HashSet<String>,
    pub prefixes: HashSet<String>,
    pub suffixes: HashSet<String>,
    pub abbreviations: HashSet<String>,
    pub org_words: HashSet<String>,
    pub place_words: HashSet<String>,
    pub unicode: HashMap<char, String>,
    pub emoticons: HashSet<String>,
    pub pre_punctuation: HashSet<char>,
    pub post_punctuation: HashSet<char>,
}

/// The model, loaded on first use.
pub(super) fn model() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| load(include_str!("../data/compromise-en.json")))
}

impl Model {
    /// The tag of a name the model knows (`Tag::MAX`, matching nothing, otherwise).
    pub fn tag(&self, name: &str) -> Tag {
        self.index.get(name).copied().unwrap_or(Tag::MAX)
    }
}

/// Reads the bundled model. It is our own generated file, checked by the tests; a part that
/// does not parse is left empty rather than failing a run.
fn load(text: &str) -> Model {
    let data: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let names: Vec<String> = data["tags"]
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    let index: HashMap<String, Tag> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), i as Tag))
        .collect();
    let tag = |v: &Value| v.as_str().and_then(|s| index.get(s).copied());
    let tags = |v: &Value| -> Vec<Tag> {
        match v {
            Value::Array(items) => items.iter().filter_map(tag).collect(),
            other => tag(other).into_iter().collect(),
        }
    };
    let words = |v: &Value| -> HashSet<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let tag_lists = |key: &str| -> Vec<Vec<Tag>> {
        names.iter().map(|n| tags(&data["tags"][n][key])).collect()
    };

    let mut multi: HashMap<String, usize> = HashMap::new();
    let mut grouped = |key: &str| -> HashMap<String, Vec<Tag>> {
        let mut out = HashMap::new();
        for (group, list) in data[key].as_object().into_iter().flatten() {
            let group_tags: Vec<Tag> = group
                .split(',')
                .filter_map(|n| index.get(n).copied())
                .collect();
            for word in list
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let count = word.split(' ').count();
                if count > 1 {
                    let first = word.split(' ').next().unwrap_or_default().to_owned();
                    let max = multi.entry(first).or_default();
                    *max = (*max).max(count);
                }
                out.insert(word.to_owned(), group_tags.clone());
            }
        }
        out
    };
    let lexicon = grouped("lexicon");
    let frozen = grouped("frozenLex");
    let mut switches = HashMap::new();
    for (form, list) in data["switches"].as_object().into_iter().flatten() {
        for word in list
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            switches.insert(word.to_owned(), form.clone());
        }
    }
    let by_tag = |v: &Value| -> HashMap<Tag, Tag> {
        v.as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((index.get(k).copied()?, tag(v)?)))
            .collect()
    };
    let by_word = |v: &Value| -> HashMap<String, Tag> {
        v.as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), tag(v)?)))
            .collect()
    };
    let clues = data["clues"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(form, c)| {
            let clues = Clues {
                before_tags: by_tag(&c["beforeTags"]),
                after_tags: by_tag(&c["afterTags"]),
                before_words: by_word(&c["beforeWords"]),
                after_words: by_word(&c["afterWords"]),
            };
            (form.clone(), clues)
        })
        .collect();
    let patterns = |v: &Value| -> Vec<HashMap<String, Tag>> {
        v.as_array().into_iter().flatten().map(by_word).collect()
    };
    let regexes = |v: &Value| -> Vec<(Regex, Vec<Tag>)> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| Some((js_regex(r[0].as_str()?, r[1].as_str()?)?, tags(&r[2]))))
            .collect()
    };
    let pairs_by_tag = |v: &Value| -> Vec<(Tag, Tag)> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| Some((tag(&p[0])?, tag(&p[1])?)))
            .collect()
    };
    let pairs_by_word = |v: &Value| -> Vec<(String, Tag)> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p[0].as_str()?.to_owned(), tag(&p[1])?)))
            .collect()
    };
    let chars =
        |v: &Value| -> HashSet<char> { words(v).iter().filter_map(|s| s.chars().next()).collect() };
    let neighbours = &data["neighbours"];
    let resolve = |name: &str| index.get(name).copied().unwrap_or(Tag::MAX);
    Model {
        post_tagger: net(&data["postTagger"], &resolve),
        chunker: net(&data["chunker"], &resolve),
        frozen,
        t: known(&index),
        parents: tag_lists("parents"),
        not: tag_lists("not"),
        lexicon,
        multi,
        switches,
        clues,
        suffix_patterns: patterns(&data["suffixPatterns"]),
        prefix_patterns: patterns(&data["prefixPatterns"]),
        ends_with: data["endsWith"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.chars().next()?, regexes(v))))
            .collect(),
        regex_text: regexes(&data["regexText"]),
        regex_normal: regexes(&data["regexNormal"]),
        regex_numbers: regexes(&data["regexNumbers"]),
        left_tags: pairs_by_tag(&neighbours["leftTags"]),
        left_words: pairs_by_word(&neighbours["leftWords"]),
        right_tags: pairs_by_tag(&neighbours["rightTags"]),
        right_words: pairs_by_word(&neighbours["rightWords"]),
        conjugation: serde_json::from_value(data["conjugation"].clone()).unwrap_or_default(),
        tense_guess: by_word(&data["tenseGuess"]),
        contractions: serde_json::from_value(data["contractions"].clone()).unwrap_or_default(),
        number_suffixes: words(&data["numberSuffixes"]),
        prefixes: words(&data["prefixes"]),
        suffixes: words(&data["suffixes"]),
        abbreviations: words(&data["abbreviations"]),
        org_words: words(&data["orgWords"]),
        place_words: words(&data["placeWords"]),
        unicode: data["unicode"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.chars().next()?, v.as_str()?.to_owned())))
            .collect(),
        emoticons: words(&data["emoticons"]),
        pre_punctuation: chars(&data["prePunctuation"]),
        post_punctuation: chars(&data["postPunctuation"]),
        names,
        index,
    }
}

fn net(data: &Value, tag: &dyn Fn(&str) -> Tag) -> Net {
    let strings = |v: &Value| -> Vec<String> {
        match v {
            Value::String(s) => vec![s.clone()],
            Value::Array(a) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        }
    };
    let regs = |v: &Value| -> Option<Vec<Reg>> {
        let data: Vec<RegData> = serde_json::from_value(v.clone()).ok()?;
        Some(data.iter().map(|r| Reg::resolve(r, tag)).collect())
    };
    let rules = data["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| Rule {
            key: r["match"].as_str().unwrap_or_default().to_owned(),
            regs: regs(&r["regs"]).unwrap_or_default(),
            group: match &r["group"] {
                Value::Number(n) => Some(n.to_string()),
                Value::String(s) => Some(s.clone()),
                _ => None,
            },
            not_if: regs(&r["notIf"]),
            if_no: strings(&r["ifNo"]),
            tags: strings(&r["tag"]),
            untag: r["unTag"].as_str().map(|t| tag(t.trim_start_matches('#'))),
            chunk: Chunk::named(r["chunk"].as_str().unwrap_or_default()),
            safe: r["safe"].as_bool().unwrap_or(false),
            needs: strings(&r["needs"]),
            wants: strings(&r["wants"]),
            min_want: r["minWant"].as_u64().unwrap_or(0) as usize,
            min_words: r["minWords"].as_u64().unwrap_or(0) as usize,
        })
        .collect();
    let hooks = data["hooks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| {
            let key = h[0].as_str()?.to_owned();
            let list = h[1]
                .as_array()?
                .iter()
                .filter_map(Value::as_u64)
                .map(|i| i as usize)
                .collect();
            Some((key, list))
        })
        .collect();
    let always = data["always"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .map(|i| i as usize)
        .collect();
    Net {
        rules,
        hooks,
        always,
    }
}

/// A JavaScript regex of the model in Rust's syntax: without the `u` flag `\w` and `\d` are
/// ASCII there (Rust's are Unicode), and `i` becomes `(?i)`.
pub(super) fn js_regex(source: &str, flags: &str) -> Option<Regex> {
    let mut pattern = String::new();
    if flags.contains('i') {
        pattern.push_str("(?i)");
    }
    if flags.contains('u') {
        pattern.push_str(source);
    } else {
        pattern.push_str(
            &source
                .replace("\\w", "[0-9A-Za-z_]")
                .replace("\\d", "[0-9]"),
        );
    }
    Regex::new(&pattern).ok()
}
