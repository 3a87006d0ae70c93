//! A text as compromise reads it for the completeness scorer: tokenized, tagged and chunked;
//! then its nouns, its verbs put in the infinitive (which changes the document, as there),
//! its topics and its terms, as texts.

use super::infinitive::to_infinitive;
use super::model::{Model, model};
use super::phrases::{self, Phrase};
use super::posttag::post_tag;
use super::pretag::{freeze, lexicon, pre_tag};
use super::term::Term;
use super::tokenize::tokenize;

/// What the scorer reads of a document, each a list of phrase texts.
pub(super) struct Elements {
    pub nouns: Vec<String>,
    pub verbs: Vec<String>,
    pub topics: Vec<String>,
    pub terms: Vec<String>,
}

/// A parsed text.
pub(super) struct Document {
    sentences: Vec<Vec<Term>>,
}

impl Document {
    /// `nlp(text)`: tokenized, tagged (lexicon, pre-tagger, the second contraction pass, the
    /// post-tagger rules) and chunked.
    pub fn parse(text: &str) -> Self {
        let m = model();
        let mut sentences = tokenize(text);
        for terms in &mut sentences {
            tag(terms, m);
        }
        Document { sentences }
    }

    /// `doc.nouns()`, then `doc.verbs().toInfinitive()`, `doc.topics()` and `doc.terms()`, as
    /// the reference's `extractElements` calls them.
    pub fn elements(mut self) -> Elements {
        let m = model();
        let nouns = self
            .sentences
            .iter()
            .flat_map(|s| {
                phrases::nouns(s, m)
                    .into_iter()
                    .map(|p| text(s, &p))
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut verbs = Vec::new();
        for terms in &mut self.sentences {
            let found = phrases::verbs(terms, m);
            let mut shift = 0isize;
            for phrase in found {
                let start = phrase.start.saturating_add_signed(shift);
                let end = phrase.end.saturating_add_signed(shift);
                if start >= end || end > terms.len() {
                    break;
                }
                let before = terms.len();
                let converted = to_infinitive(terms, start..end, m);
                verbs.push(text(terms, &converted));
                shift += terms.len() as isize - before as isize;
                // compromise tags the sentence again after each change.
                retag(terms, m);
            }
        }
        let topics = self
            .sentences
            .iter()
            .flat_map(|s| {
                phrases::topics(s, m)
                    .into_iter()
                    .map(|p| text(s, &p))
                    .collect::<Vec<_>>()
            })
            .collect();
        let terms = self
            .sentences
            .iter()
            .flatten()
            .map(|t| t.text.clone())
            .collect();
        Elements {
            nouns,
            verbs,
            topics,
            terms,
        }
    }
}

fn tag(terms: &mut Vec<Term>, m: &Model) {
    freeze(terms, m);
    lexicon(terms, m);
    pre_tag(terms, m);
    super::contractions::expand_tagged(terms, m);
    post_tag(terms, m);
    unfreeze(terms);
    phrases::chunk(terms, m);
}

fn retag(terms: &mut [Term], m: &Model) {
    freeze(terms, m);
    lexicon(terms, m);
    pre_tag(terms, m);
    post_tag(terms, m);
    unfreeze(terms);
    phrases::chunk(terms, m);
}

fn unfreeze(terms: &mut [Term]) {
    for t in terms {
        t.frozen = false;
    }
}

/// A phrase's words as written (a contraction's implicit part has none).
fn text(terms: &[Term], phrase: &Phrase) -> String {
    terms[phrase.clone()]
        .iter()
        .map(|t| t.text.as_str())
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
impl Document {
    /// Each term with its tags and chunk, for reading a difference.
    pub fn describe(&self) -> String {
        let m = model();
        self.sentences
            .iter()
            .map(|s| {
                s.iter()
                    .map(|t| {
                        let tags: Vec<&str> = t
                            .tags
                            .iter()
                            .map(|x| m.names[*x as usize].as_str())
                            .collect();
                        format!(
                            "{}[{}]/{}/{:?}",
                            t.text,
                            t.implicit.as_deref().unwrap_or(""),
                            tags.join(","),
                            t.chunk
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("  ")
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}
