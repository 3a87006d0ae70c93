//! `regex-filter`: named patterns (built-in presets and custom rules) that block, redact or warn
//! on the input, the streamed output and the final response, as the reference's
//! RegexFilterProcessor does. Offsets the reference reports (match indices, the stream's
//! held-back tail) are counted in UTF-16 code units, as JavaScript counts them.

use serde_json::{Map, Value, json};
use tracing::warn;

use super::{Tripwire, utf16_len};
use crate::agent::message::{Message, Part, Role};
use crate::config::{RegexFilterSpec, RegexPhase, RegexStrategy};

/// The processor's id in tripwires.
const ID: &str = "regex-filter";

/// How much streamed text is held back by default so a match split across deltas is still
/// redacted.
const STREAM_CARRYOVER: usize = 128;

/// The presets' rules: name, pattern, replacement. `\b` and `\d` are ASCII, as in JavaScript.
const PII: [(&str, &str, &str); 4] = [
    (
        "email",
        r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}",
        "[EMAIL]",
    ),
    (
        "phone",
        r"(?:\+?1[-.\s]?)?\(?[0-9]{3}\)?[-.\s]?[0-9]{3}[-.\s]?[0-9]{4}",
        "[PHONE]",
    ),
    (
        "ssn",
        r"(?-u:\b)[0-9]{3}-[0-9]{2}-[0-9]{4}(?-u:\b)",
        "[SSN]",
    ),
    (
        "credit-card",
        r"(?-u:\b)(?:[0-9]{4}[-\s]?){3}[0-9]{4}(?-u:\b)",
        "[CREDIT_CARD]",
    ),
];
const SECRETS: [(&str, &str, &str); 3] = [
    (
        "api-key",
        r#"(?i)(?:api[_-]?key|apikey|api[_-]?secret)\s*[:=]\s*["']?[a-zA-Z0-9_\-]{20,}["']?"#,
        "[API_KEY]",
    ),
    (
        "bearer-token",
        r"(?i)Bearer\s+[a-zA-Z0-9_\-.]+",
        "[BEARER_TOKEN]",
    ),
    ("aws-key", r"(?:AKIA|ASIA)[A-Z0-9]{16}", "[AWS_KEY]"),
];
const URLS: [(&str, &str, &str); 1] = [("url", r#"(?i)https?://[^\s<>"{}|\\^`\[\]]+"#, "[URL]")];

/// One compiled rule.
#[derive(Debug)]
struct Rule {
    name: String,
    regex: regex::Regex,
    replacement: Option<String>,
}

/// A compiled regex filter.
#[derive(Debug)]
pub struct RegexFilter {
    rules: Vec<Rule>,
    strategy: RegexStrategy,
    phase: RegexPhase,
    carryover: usize,
}

/// A match of one rule, in byte offsets.
#[derive(Clone, Copy)]
struct Found<'r> {
    rule: &'r Rule,
    start: usize,
    end: usize,
}

/// Overlapping matches merged: the span, and the longest match that owns the replacement.
struct Region<'r> {
    start: usize,
    end: usize,
    owner: Found<'r>,
    overlapped: bool,
}

impl RegexFilter {
    /// Compiles `spec` (checked at config or request validation; a bad pattern is an error
    /// here too).
    pub fn build(spec: &RegexFilterSpec) -> Result<Self, String> {
        let mut rules = Vec::new();
        for preset in &spec.presets {
            let table: &[(&str, &str, &str)] = match preset.as_str() {
                "pii" => &PII,
                "secrets" => &SECRETS,
                "urls" => &URLS,
                other => return Err(format!("unknown regex preset {other:?}")),
            };
            for (name, pattern, replacement) in table {
                rules.push(Rule {
                    name: (*name).to_owned(),
                    regex: regex::Regex::new(pattern).map_err(|e| e.to_string())?,
                    replacement: Some((*replacement).to_owned()),
                });
            }
        }
        for rule in &spec.rules {
            rules.push(Rule {
                name: rule.name.clone(),
                regex: regex::Regex::new(&rule.pattern)
                    .map_err(|e| format!("rule {:?}: {e}", rule.name))?,
                replacement: rule.replacement.clone(),
            });
        }
        if rules.is_empty() {
            return Err("a regex filter needs at least one rule or preset".into());
        }
        Ok(Self {
            rules,
            strategy: spec.strategy,
            phase: spec.phase,
            carryover: spec
                .stream_carryover_size
                .map_or(STREAM_CARRYOVER, |n| n.max(1) as usize),
        })
    }

    fn on_input(&self) -> bool {
        self.phase != RegexPhase::Output
    }

    fn on_output(&self) -> bool {
        self.phase != RegexPhase::Input
    }

    /// Whether it redacts the stream (and so holds text back).
    pub fn redacts_stream(&self) -> bool {
        self.on_output() && self.strategy == RegexStrategy::Redact
    }

    /// The input phase: the messages' text parts checked, then blocked, redacted or logged.
    pub fn input(&self, messages: &mut [Message]) -> Result<(), Tripwire> {
        if self.on_input() {
            self.messages(messages)?;
        }
        Ok(())
    }

    /// The final response, as the input.
    pub fn result(&self, messages: &mut [Message]) -> Result<(), Tripwire> {
        if self.on_output() {
            self.messages(messages)?;
        }
        Ok(())
    }

    fn messages(&self, messages: &mut [Message]) -> Result<(), Tripwire> {
        let mut found: Vec<Value> = Vec::new();
        let mut names: Vec<&str> = Vec::new();
        for text in texts(messages) {
            for m in self.collect(text) {
                push_name(&mut names, &m.rule.name);
                found.push(match_json(text, m));
            }
        }
        if found.is_empty() {
            return Ok(());
        }
        match self.strategy {
            RegexStrategy::Block => Err(self.blocked("content", &names, found)),
            RegexStrategy::Warn => {
                warn!(patterns = %names.join(", "), "[RegexFilterProcessor] Matched patterns");
                Ok(())
            }
            RegexStrategy::Redact => {
                for message in messages.iter_mut().filter(|m| m.role != Role::System) {
                    for part in &mut message.parts {
                        if let Part::Text { text } = part {
                            *text = self.redact(text);
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// One streamed text delta (block and warn look at it alone; redact is [`Self::redact_delta`]).
    pub fn check_delta(&self, text: &str) -> Result<(), Tripwire> {
        if !self.on_output() || text.is_empty() {
            return Ok(());
        }
        let found: Vec<Found<'_>> = self.collect(text);
        if found.is_empty() {
            return Ok(());
        }
        let mut names = Vec::new();
        for m in &found {
            push_name(&mut names, &m.rule.name);
        }
        match self.strategy {
            RegexStrategy::Block => Err(self.blocked(
                "streaming content",
                &names,
                found.iter().map(|m| match_json(text, *m)).collect(),
            )),
            RegexStrategy::Warn => {
                warn!(patterns = %names.join(", "), "[RegexFilterProcessor] Matched streaming patterns");
                Ok(())
            }
            RegexStrategy::Redact => Ok(()),
        }
    }

    /// Redact mode: `delta` joins the held-back tail `carry`; what is safely past the last
    /// carryover (128 code units unless set; never cutting a match) comes out redacted, the rest
    /// stays held back.
    pub fn redact_delta(&self, carry: &mut String, delta: &str) -> Option<String> {
        carry.push_str(delta);
        let units = utf16_len(carry);
        if units <= self.carryover {
            return None;
        }
        let mut emit_end = byte_at_utf16(carry, units - self.carryover);
        let found = self.collect(carry);
        let regions = regions(found);
        for region in &regions {
            if region.start < emit_end && region.end > emit_end {
                emit_end = region.start;
            }
        }
        let head = &carry[..emit_end];
        let kept: Vec<&Region<'_>> = regions.iter().filter(|r| r.end <= emit_end).collect();
        let emitted = redact_regions(head, &kept);
        let tail = carry[emit_end..].to_owned();
        *carry = tail;
        (!emitted.is_empty()).then_some(emitted)
    }

    /// The held-back tail, redacted, when the text run ends.
    pub fn flush(&self, carry: &mut String) -> Option<String> {
        let text = std::mem::take(carry);
        (!text.is_empty()).then(|| self.redact(&text))
    }

    /// Every match of every rule, in rule order.
    fn collect<'r>(&'r self, text: &str) -> Vec<Found<'r>> {
        self.rules
            .iter()
            .flat_map(|rule| {
                rule.regex.find_iter(text).map(move |m| Found {
                    rule,
                    start: m.start(),
                    end: m.end(),
                })
            })
            .collect()
    }

    /// `text` with every match replaced.
    pub fn redact(&self, text: &str) -> String {
        let regions = regions(self.collect(text));
        let all: Vec<&Region<'_>> = regions.iter().collect();
        redact_regions(text, &all)
    }

    fn blocked(&self, context: &str, names: &[&str], matches: Vec<Value>) -> Tripwire {
        let mut metadata = Map::new();
        metadata.insert("processorId".into(), json!(ID));
        metadata.insert("matches".into(), Value::Array(matches));
        metadata.insert("strategy".into(), json!("block"));
        Tripwire {
            metadata: Some(Box::new(metadata)),
            ..Tripwire::block(
                ID,
                format!(
                    "Regex filter: blocked {context} matching patterns: {}",
                    names.join(", ")
                ),
            )
        }
    }
}

/// The text parts the reference checks (system messages are not among its messages).
fn texts(messages: &[Message]) -> impl Iterator<Item = &str> {
    messages
        .iter()
        .filter(|m| m.role != Role::System)
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            Part::Text { text } if !text.is_empty() => Some(text.as_str()),
            _ => None,
        })
}

fn push_name<'a>(names: &mut Vec<&'a str>, name: &'a str) {
    if !names.contains(&name) {
        names.push(name);
    }
}

/// A match as the tripwire reports it: the text itself withheld.
fn match_json(text: &str, m: Found<'_>) -> Value {
    json!({
        "rule": m.rule.name,
        "match": "[REDACTED_MATCH]",
        "index": utf16_len(&text[..m.start]),
    })
}

/// Non-empty matches ordered by start (longer first), overlapping ones merged; the longest
/// match of a merged region owns it.
fn regions(mut found: Vec<Found<'_>>) -> Vec<Region<'_>> {
    found.retain(|m| m.end > m.start);
    found.sort_by(|a, b| {
        a.start
            .cmp(&b.start)
            .then((b.end - b.start).cmp(&(a.end - a.start)))
    });
    let mut regions: Vec<Region<'_>> = Vec::new();
    for m in found {
        match regions.last_mut() {
            Some(current) if m.start < current.end => {
                current.end = current.end.max(m.end);
                current.overlapped = true;
                if m.end - m.start > current.owner.end - current.owner.start {
                    current.owner = m;
                }
            }
            _ => regions.push(Region {
                start: m.start,
                end: m.end,
                owner: m,
                overlapped: false,
            }),
        }
    }
    regions
}

fn redact_regions(text: &str, regions: &[&Region<'_>]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut cursor = 0;
    for region in regions {
        out.push_str(&text[cursor..region.start]);
        out.push_str(&replacement(text, region));
        cursor = region.end;
    }
    out.push_str(&text[cursor..]);
    out
}

/// The owner's replacement; one with `$` references is expanded against the match when the
/// region is that one match alone.
fn replacement(text: &str, region: &Region<'_>) -> String {
    let rule = region.owner.rule;
    let plain = rule.replacement.as_deref().unwrap_or("[REDACTED]");
    if region.overlapped || !plain.contains('$') {
        return plain.to_owned();
    }
    let matched = &text[region.start..region.end];
    match rule.regex.find(matched) {
        Some(m) if m.start() == 0 && m.end() == matched.len() => {
            rule.regex.replace(matched, plain).into_owned()
        }
        _ => plain.to_owned(),
    }
}

/// The byte offset of the character boundary at (or just before) `units` UTF-16 code units.
fn byte_at_utf16(text: &str, units: usize) -> usize {
    let mut seen = 0;
    for (i, c) in text.char_indices() {
        if seen + c.len_utf16() > units {
            return i;
        }
        seen += c.len_utf16();
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(presets: &[&str], strategy: RegexStrategy) -> RegexFilter {
        RegexFilter::build(&RegexFilterSpec {
            presets: presets.iter().map(|p| (*p).to_owned()).collect(),
            strategy,
            ..RegexFilterSpec::default()
        })
        .expect("presets compile")
    }

    #[test]
    fn a_match_split_across_deltas_is_redacted_once_the_tail_is_long_enough() {
        let f = filter(&["pii"], RegexStrategy::Redact);
        let mut carry = String::new();
        let mut out = String::new();
        let text = format!("{} write to jo", "x".repeat(150));
        out.extend(f.redact_delta(&mut carry, &text));
        out.extend(f.redact_delta(&mut carry, "hn@example.com please"));
        out.extend(f.flush(&mut carry));
        assert_eq!(out, format!("{} write to [EMAIL] please", "x".repeat(150)));
    }

    #[test]
    fn indices_count_utf16_units() {
        let f = filter(&["pii"], RegexStrategy::Block);
        let trip = f.check_delta("😀 a@b.co").expect_err("an email blocks");
        let index = &trip.metadata.expect("metadata")["matches"][0]["index"];
        assert_eq!(index, &json!(3));
    }
}
