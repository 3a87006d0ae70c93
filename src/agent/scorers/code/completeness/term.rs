//! A term (a word with its punctuation and tags) and compromise's two ways of tagging one:
//! `setTag` (parents added, conflicting tags removed) and `fastTag` (the tag alone).

use super::model::{Model, Tag};

/// The chunk a term belongs to (compromise's `term.chunk`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Chunk {
    Noun,
    Verb,
    Adjective,
    Pivot,
}

impl Chunk {
    /// The chunk of compromise's name for it.
    pub fn named(name: &str) -> Option<Chunk> {
        match name {
            "Noun" => Some(Chunk::Noun),
            "Verb" => Some(Chunk::Verb),
            "Adjective" => Some(Chunk::Adjective),
            "Pivot" => Some(Chunk::Pivot),
            _ => None,
        }
    }
}

/// One term of a sentence.
#[derive(Debug, Clone, Default)]
pub(super) struct Term {
    /// The word as written, punctuation split off ("" for a contraction's implicit part).
    pub text: String,
    /// Punctuation and whitespace before and after it.
    pub pre: String,
    pub post: String,
    /// Lowercased, cleaned and transliterated (`term.normal`).
    pub normal: String,
    /// The word a contraction stands for (`it` and `is` of "it's").
    pub implicit: Option<String>,
    /// The lookup form when it differs from `normal` (`term.machine`).
    pub machine: Option<String>,
    /// Its tags, in the order they were added (clue lookups depend on it).
    pub tags: Vec<Tag>,
    /// The ambiguity form (`Noun|Verb`, …) of a switch word.
    pub switch: Option<String>,
    /// Its chunk (noun, verb, adjective or pivot phrase), once chunked or tagged.
    pub chunk: Option<Chunk>,
    /// The chunker took its chunk away (compromise's `null`, which its fallback skips, as
    /// opposed to never having had one).
    pub chunk_cleared: bool,
    /// Tagged by the frozen lexicon: later tagging cannot contradict it.
    pub frozen: bool,
}

impl Term {
    /// A term as the tokenizer makes it.
    pub fn new(text: String, pre: String, post: String) -> Self {
        Term {
            text,
            pre,
            post,
            ..Term::default()
        }
    }

    /// Whether it has the tag.
    pub fn has(&self, tag: Tag) -> bool {
        self.tags.contains(&tag)
    }

    /// `term.machine || term.normal`: the form the lexicon is asked.
    pub fn word(&self) -> &str {
        self.machine
            .as_deref()
            .filter(|m| !m.is_empty())
            .unwrap_or(&self.normal)
    }

    /// Whether a pattern's word matches it (its machine form, text or normal form).
    pub fn is_word(&self, word: &str) -> bool {
        self.machine.as_deref() == Some(word) || self.text == word || self.normal == word
    }

    /// Whether it is one of these words.
    pub fn is_any(&self, words: &[&str]) -> bool {
        words.iter().any(|w| self.is_word(w))
    }

    /// `@hasDash`: a dash between spaces before or after it ('a - b').
    pub fn has_dash(&self) -> bool {
        let dash = |s: &str| {
            let chars: Vec<char> = s.chars().collect();
            (0..chars.len()).any(|i| {
                let run = chars[i + 1..]
                    .iter()
                    .take_while(|c| matches!(c, '-' | '–' | '—'))
                    .count();
                chars[i] == ' ' && (1..=3).contains(&run) && chars.get(i + 1 + run) == Some(&' ')
            })
        };
        dash(&self.post) || dash(&self.pre)
    }

    /// `term.normal || term.implicit`.
    pub fn normal_or_implicit(&self) -> &str {
        if self.normal.is_empty() {
            self.implicit.as_deref().unwrap_or("")
        } else {
            &self.normal
        }
    }

    /// `term.implicit || term.normal` (or the text), as verbs read their root.
    pub fn reading(&self) -> &str {
        self.implicit
            .as_deref()
            .filter(|i| !i.is_empty())
            .unwrap_or(&self.normal)
    }

    /// `fastTag`: the tag alone.
    pub fn fast_tag(&mut self, tag: Tag) {
        if !self.frozen {
            self.add(tag);
        }
    }

    fn add(&mut self, tag: Tag) {
        if tag != Tag::MAX && !self.has(tag) {
            self.tags.push(tag);
        }
    }

    /// `setTag` on one term (`tagTerm`): conflicting tags removed (or, when `safe`, nothing
    /// done if there is one), then the tag's parents and the tag added.
    pub fn set_tag(&mut self, tag: Tag, model: &Model, safe: bool) {
        if tag == Tag::MAX || self.has(tag) {
            return;
        }
        let safe = safe || self.frozen;
        let not = model
            .not
            .get(tag as usize)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        if safe && not.iter().any(|t| self.has(*t)) {
            return;
        }
        self.tags.retain(|t| !not.contains(t));
        for parent in model.parents.get(tag as usize).into_iter().flatten() {
            self.add(*parent);
            self.add_chunk(*parent, model);
        }
        self.add(tag);
        self.add_chunk(tag, model);
    }

    /// `addChunk`: tagging a noun or a verb sets the chunk (and it stays until the chunker
    /// changes it, even when the tag goes).
    fn add_chunk(&mut self, tag: Tag, model: &Model) {
        if tag == model.t.Noun {
            self.set_chunk(Chunk::Noun);
        } else if tag == model.t.Verb {
            self.set_chunk(Chunk::Verb);
        }
    }

    pub fn set_chunk(&mut self, chunk: Chunk) {
        self.chunk = Some(chunk);
        self.chunk_cleared = false;
    }

    /// `setTag` with several tags, in order.
    pub fn set_tags(&mut self, tags: &[Tag], model: &Model) {
        for tag in tags {
            self.set_tag(*tag, model, false);
        }
    }

    /// Removes a tag (and its descendants, as compromise's `unTag` does).
    pub fn untag(&mut self, tag: Tag, model: &Model) {
        if self.frozen {
            return;
        }
        self.tags.retain(|t| {
            *t != tag
                && !model
                    .parents
                    .get(*t as usize)
                    .is_some_and(|p| p.contains(&tag))
        });
    }
}
