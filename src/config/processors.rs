//! Processors (the reference's guardrails) as an agent's config and a request name them, and
//! the checks both pass: `[[agents.input_processors]]` / `[[agents.output_processors]]` tables
//! with a `type`, and `max_processor_retries`. What each one does is `agent/processors/`.

use serde::{Deserialize, Serialize};

use super::detectors::{
    DetectorSpec, LanguageSpec, PiiSpec, ScrubberSpec, check_detector, check_model, check_pii,
};

/// One processor: a built-in one with its options, or a custom one answered through hooks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ProcessorSpec {
    /// `unicode-normalizer`: NFKC and whitespace clean-up of the input's text.
    UnicodeNormalizer(UnicodeOptions),
    /// `regex-filter`: named patterns that block, redact or warn.
    RegexFilter(RegexFilterSpec),
    /// `token-limiter`: the input's newest messages that fit, or the output's first tokens.
    TokenLimiter(TokenLimiterSpec),
    /// `moderation`: a detector model scores content against moderation categories.
    Moderation(DetectorSpec),
    /// `prompt-injection-detector`: a detector model scores the input for attacks.
    PromptInjectionDetector(DetectorSpec),
    /// `language-detector`: a detector model names the input's language, and may translate it.
    LanguageDetector(LanguageSpec),
    /// `system-prompt-scrubber`: a detector model finds system-prompt leaks in the output.
    SystemPromptScrubber(ScrubberSpec),
    /// `pii-detector`: a detector model finds personal data in messages.
    PiiDetector(PiiSpec),
    /// A custom processor answered by the run's `process_*` hooks.
    Hook {
        /// Its id, sent with each call and reported in tripwires.
        id: String,
    },
}

/// Options of `unicode-normalizer`, with the reference's defaults.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UnicodeOptions {
    /// Remove control characters other than tab, newline and carriage return.
    pub strip_control_chars: bool,
    /// Accepted as the reference accepts it: either value strips the same C0/C1 controls (its
    /// stricter class matches UTF-16 units, so emoji survive it too).
    pub preserve_emojis: bool,
    /// CRLF and CR become LF, runs of newlines one, runs of spaces and tabs one space.
    pub collapse_whitespace: bool,
    /// Trim leading and trailing whitespace.
    pub trim: bool,
}

impl Default for UnicodeOptions {
    fn default() -> Self {
        Self {
            strip_control_chars: false,
            preserve_emojis: true,
            collapse_whitespace: true,
            trim: true,
        }
    }
}

/// What a regex filter does with a match.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RegexStrategy {
    /// The run ends with a tripwire naming the patterns.
    #[default]
    Block,
    /// Matches are replaced.
    Redact,
    /// Matches are logged; the content passes.
    Warn,
}

/// Where a regex filter applies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RegexPhase {
    /// The input only.
    Input,
    /// The streamed output and the final response only.
    Output,
    /// Both.
    #[default]
    All,
}

/// The regex filter's built-in rule sets.
pub const REGEX_PRESETS: [&str; 3] = ["pii", "secrets", "urls"];

/// Options of `regex-filter`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegexFilterSpec {
    /// Custom rules, checked after the presets' rules.
    pub rules: Vec<RegexRuleSpec>,
    /// Built-in rule sets (see [`REGEX_PRESETS`]).
    pub presets: Vec<String>,
    /// What a match does.
    pub strategy: RegexStrategy,
    /// Where the filter applies.
    pub phase: RegexPhase,
    /// Redacting a stream: how many UTF-16 code units of text are held back so a match split
    /// across deltas is still caught (default 128).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_carryover_size: Option<u32>,
}

/// One named pattern.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegexRuleSpec {
    /// Reported in tripwires and logs.
    pub name: String,
    /// The pattern (Rust `regex` syntax).
    pub pattern: String,
    /// What a match becomes when redacted (default `[REDACTED]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement: Option<String>,
}

/// What an output token limiter does at its limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenLimitStrategy {
    /// Later text is withheld.
    #[default]
    Truncate,
    /// The run ends with a tripwire.
    Abort,
}

/// What an output token limiter counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenCountMode {
    /// All output so far.
    #[default]
    Cumulative,
    /// Each text delta alone.
    Part,
}

/// How an input token limiter picks messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TokenTrimMode {
    /// Newest first, skipping what does not fit.
    #[default]
    BestFit,
    /// Newest first, stopping at the first that does not fit.
    Contiguous,
}

/// Options of `token-limiter`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenLimiterSpec {
    /// The limit, in estimated tokens.
    pub limit: u32,
    /// Output: what happens at the limit.
    #[serde(default)]
    pub strategy: TokenLimitStrategy,
    /// Output: what is counted.
    #[serde(default)]
    pub count_mode: TokenCountMode,
    /// Input: how messages are picked.
    #[serde(default)]
    pub trim_mode: TokenTrimMode,
}

/// A run's processors as its request sets them; each `Some` replaces the agent's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessorOverrides {
    /// Input processors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Vec<ProcessorSpec>>,
    /// Output processors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Vec<ProcessorSpec>>,
    /// Retries in a row an output processor may ask for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
}

impl ProcessorOverrides {
    /// Nothing is overridden.
    pub fn is_empty(&self) -> bool {
        self.input.is_none() && self.output.is_none() && self.max_retries.is_none()
    }
}

impl ProcessorSpec {
    /// Its field in the proto's `Processor.kind` (`regex_filter`), for error paths.
    pub fn field_name(&self) -> &'static str {
        match self {
            Self::UnicodeNormalizer(_) => "unicode_normalizer",
            Self::RegexFilter(_) => "regex_filter",
            Self::TokenLimiter(_) => "token_limiter",
            Self::Moderation(_) => "moderation",
            Self::PromptInjectionDetector(_) => "prompt_injection_detector",
            Self::LanguageDetector(_) => "language_detector",
            Self::SystemPromptScrubber(_) => "system_prompt_scrubber",
            Self::PiiDetector(_) => "pii_detector",
            Self::Hook { .. } => "hook",
        }
    }

    /// The detector model it names (`provider/model`), for one that asks a model.
    pub fn detector_model(&self) -> Option<&str> {
        match self {
            Self::Moderation(d) | Self::PromptInjectionDetector(d) => Some(&d.model),
            Self::LanguageDetector(l) => Some(&l.model),
            Self::SystemPromptScrubber(s) => Some(&s.model),
            Self::PiiDetector(p) => Some(&p.model),
            _ => None,
        }
    }
}

/// Checks one list; the error is the offending key below `key` and why.
pub fn check_list(key: &str, list: &[ProcessorSpec]) -> Result<(), (String, String)> {
    let mut hook_ids = std::collections::HashSet::new();
    for (i, spec) in list.iter().enumerate() {
        let at = format!("{key}[{i}]");
        match spec {
            ProcessorSpec::UnicodeNormalizer(_) => {}
            ProcessorSpec::RegexFilter(filter) => check_regex(&at, filter)?,
            ProcessorSpec::TokenLimiter(limiter) if limiter.limit == 0 => {
                return Err((format!("{at}.limit"), "must be at least 1".into()));
            }
            ProcessorSpec::TokenLimiter(_) => {}
            ProcessorSpec::Moderation(d) => check_detector(&at, d, false)?,
            ProcessorSpec::PromptInjectionDetector(d) => check_detector(&at, d, true)?,
            ProcessorSpec::LanguageDetector(l) => check_model(&at, &l.model, l.threshold)?,
            ProcessorSpec::SystemPromptScrubber(s) => check_model(&at, &s.model, None)?,
            ProcessorSpec::PiiDetector(p) => check_pii(&at, p)?,
            ProcessorSpec::Hook { id } => {
                if id.trim().is_empty() {
                    return Err((format!("{at}.id"), "must not be empty".into()));
                }
                if !hook_ids.insert(id.as_str()) {
                    return Err((
                        format!("{at}.id"),
                        format!("{id:?} names another hook processor of this list"),
                    ));
                }
            }
        }
    }
    Ok(())
}

fn check_regex(at: &str, filter: &RegexFilterSpec) -> Result<(), (String, String)> {
    for (j, preset) in filter.presets.iter().enumerate() {
        if !REGEX_PRESETS.contains(&preset.as_str()) {
            return Err((
                format!("{at}.presets[{j}]"),
                format!(
                    "unknown preset {preset:?} (known: {})",
                    REGEX_PRESETS.join(", ")
                ),
            ));
        }
    }
    if filter.stream_carryover_size == Some(0) {
        return Err((
            format!("{at}.stream_carryover_size"),
            "must be at least 1".into(),
        ));
    }
    if filter.presets.is_empty() && filter.rules.is_empty() {
        return Err((
            format!("{at}.rules"),
            "a regex filter needs at least one rule or preset".into(),
        ));
    }
    for (j, rule) in filter.rules.iter().enumerate() {
        if rule.name.trim().is_empty() {
            return Err((format!("{at}.rules[{j}].name"), "must not be empty".into()));
        }
        if let Err(e) = regex::Regex::new(&rule.pattern) {
            return Err((
                format!("{at}.rules[{j}].pattern"),
                format!("is not a valid regular expression: {e}"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> Vec<ProcessorSpec> {
        #[derive(Deserialize)]
        struct List {
            p: Vec<ProcessorSpec>,
        }
        toml::from_str::<List>(toml_text)
            .map(|l| l.p)
            .unwrap_or_default()
    }

    #[test]
    fn tables_name_their_type_and_take_the_reference_defaults() {
        let list = parse(
            "[[p]]\ntype = \"unicode-normalizer\"\ntrim = false\n\
             [[p]]\ntype = \"regex-filter\"\npresets = [\"pii\"]\nstrategy = \"redact\"\n\
             [[p]]\ntype = \"token-limiter\"\nlimit = 10\n\
             [[p]]\ntype = \"hook\"\nid = \"guard\"\n",
        );
        assert_eq!(list.len(), 4);
        assert_eq!(
            list[0],
            ProcessorSpec::UnicodeNormalizer(UnicodeOptions {
                trim: false,
                ..UnicodeOptions::default()
            })
        );
        let kinds: Vec<&str> = list.iter().map(ProcessorSpec::field_name).collect();
        assert_eq!(
            kinds,
            [
                "unicode_normalizer",
                "regex_filter",
                "token_limiter",
                "hook"
            ]
        );
        assert_eq!(list[3], ProcessorSpec::Hook { id: "guard".into() });
        assert_eq!(check_list("input_processors", &list), Ok(()));
    }

    #[test]
    fn bad_entries_name_their_key() {
        let cases = [
            (
                "[[p]]\ntype = \"regex-filter\"\npresets = [\"names\"]\n",
                "input_processors[0].presets[0]",
            ),
            (
                "[[p]]\ntype = \"regex-filter\"\n",
                "input_processors[0].rules",
            ),
            (
                "[[p]]\ntype = \"regex-filter\"\n[[p.rules]]\nname = \"x\"\npattern = \"(\"\n",
                "input_processors[0].rules[0].pattern",
            ),
            (
                "[[p]]\ntype = \"token-limiter\"\nlimit = 0\n",
                "input_processors[0].limit",
            ),
            (
                "[[p]]\ntype = \"hook\"\nid = \"a\"\n[[p]]\ntype = \"hook\"\nid = \"a\"\n",
                "input_processors[1].id",
            ),
        ];
        for (text, key) in cases {
            let list = parse(text);
            assert!(!list.is_empty(), "{text}");
            let (at, _) = check_list("input_processors", &list).expect_err(text);
            assert_eq!(at, key);
        }
    }
}
