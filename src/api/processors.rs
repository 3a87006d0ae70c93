//! `processors` from the wire: each processor converted to its spec and checked as config is,
//! every problem naming its field (`processors.input.processors.0.regex_filter.rules.1.pattern`).

use super::check_text;
use super::error::Violations;
use crate::config::{
    DetectorErrorStrategy, DetectorSpec, DetectorStrategy, LanguageSpec, LanguageStrategy, Limits,
    PiiRedaction, PiiSpec, PiiStrategy, ProcessorOverrides, ProcessorSpec, RegexFilterSpec,
    RegexPhase, RegexRuleSpec, RegexStrategy, ScrubRedaction, ScrubStrategy, ScrubberSpec,
    TokenCountMode, TokenLimitStrategy, TokenLimiterSpec, TokenTrimMode, UnicodeOptions,
    check_processors,
};
use crate::pb;
use crate::pb::processor::Kind;

/// Converts and checks a request's `processors`.
pub(crate) fn processors(
    v: &mut Violations,
    p: &pb::Processors,
    limits: &Limits,
) -> ProcessorOverrides {
    let mut list = |name: &str, l: &Option<pb::ProcessorList>| {
        l.as_ref().map(|l| {
            let key = format!("processors.{name}.processors");
            let specs: Vec<ProcessorSpec> = l
                .processors
                .iter()
                .enumerate()
                .filter_map(|(i, p)| processor(v, &format!("{key}.{i}"), p, limits))
                .collect();
            if specs.len() == l.processors.len()
                && let Err((at, why)) = check_processors(&key, &specs)
            {
                v.add(wire_path(&at, &specs), why);
            }
            specs
        })
    };
    let input = list("input", &p.input);
    let output = list("output", &p.output);
    ProcessorOverrides {
        input,
        output,
        max_retries: p.max_retries,
    }
}

/// The config checker's `key[i].field` path in the proto's `key.i.<kind>.field` form.
fn wire_path(at: &str, specs: &[ProcessorSpec]) -> String {
    let Some((key, rest)) = at.split_once('[') else {
        return at.to_owned();
    };
    let Some((index, field)) = rest.split_once(']') else {
        return at.to_owned();
    };
    let kind = index
        .parse::<usize>()
        .ok()
        .and_then(|i| specs.get(i))
        .map_or(String::new(), |spec| format!(".{}", spec.field_name()));
    let field = field.replace('[', ".").replace(']', "");
    format!("{key}.{index}{kind}{field}")
}

fn processor(
    v: &mut Violations,
    field: &str,
    p: &pb::Processor,
    limits: &Limits,
) -> Option<ProcessorSpec> {
    let Some(kind) = &p.kind else {
        v.add(field, "name a processor kind");
        return None;
    };
    Some(match kind {
        Kind::UnicodeNormalizer(u) => {
            let d = UnicodeOptions::default();
            ProcessorSpec::UnicodeNormalizer(UnicodeOptions {
                strip_control_chars: u.strip_control_chars.unwrap_or(d.strip_control_chars),
                preserve_emojis: u.preserve_emojis.unwrap_or(d.preserve_emojis),
                collapse_whitespace: u.collapse_whitespace.unwrap_or(d.collapse_whitespace),
                trim: u.trim.unwrap_or(d.trim),
            })
        }
        Kind::RegexFilter(r) => {
            let strategy = match pb::RegexStrategy::try_from(r.strategy) {
                Ok(pb::RegexStrategy::Redact) => RegexStrategy::Redact,
                Ok(pb::RegexStrategy::Warn) => RegexStrategy::Warn,
                Ok(_) => RegexStrategy::Block,
                Err(_) => {
                    v.add(format!("{field}.regex_filter.strategy"), "unknown strategy");
                    RegexStrategy::Block
                }
            };
            let phase = match pb::RegexPhase::try_from(r.phase) {
                Ok(pb::RegexPhase::Input) => RegexPhase::Input,
                Ok(pb::RegexPhase::Output) => RegexPhase::Output,
                Ok(_) => RegexPhase::All,
                Err(_) => {
                    v.add(format!("{field}.regex_filter.phase"), "unknown phase");
                    RegexPhase::All
                }
            };
            for (j, rule) in r.rules.iter().enumerate() {
                let at = format!("{field}.regex_filter.rules.{j}");
                check_text(v, &format!("{at}.pattern"), &rule.pattern, limits);
                if let Some(replacement) = &rule.replacement {
                    check_text(v, &format!("{at}.replacement"), replacement, limits);
                }
            }
            ProcessorSpec::RegexFilter(RegexFilterSpec {
                rules: r
                    .rules
                    .iter()
                    .map(|rule| RegexRuleSpec {
                        name: rule.name.clone(),
                        pattern: rule.pattern.clone(),
                        replacement: rule.replacement.clone(),
                    })
                    .collect(),
                presets: r.presets.clone(),
                strategy,
                phase,
                stream_carryover_size: r.stream_carryover_size,
            })
        }
        Kind::TokenLimiter(t) => {
            let strategy = match pb::TokenLimitStrategy::try_from(t.strategy) {
                Ok(pb::TokenLimitStrategy::Abort) => TokenLimitStrategy::Abort,
                Ok(_) => TokenLimitStrategy::Truncate,
                Err(_) => {
                    v.add(
                        format!("{field}.token_limiter.strategy"),
                        "unknown strategy",
                    );
                    TokenLimitStrategy::Truncate
                }
            };
            let count_mode = match pb::TokenCountMode::try_from(t.count_mode) {
                Ok(pb::TokenCountMode::Part) => TokenCountMode::Part,
                Ok(_) => TokenCountMode::Cumulative,
                Err(_) => {
                    v.add(
                        format!("{field}.token_limiter.count_mode"),
                        "unknown count mode",
                    );
                    TokenCountMode::Cumulative
                }
            };
            let trim_mode = match pb::TokenTrimMode::try_from(t.trim_mode) {
                Ok(pb::TokenTrimMode::Contiguous) => TokenTrimMode::Contiguous,
                Ok(_) => TokenTrimMode::BestFit,
                Err(_) => {
                    v.add(
                        format!("{field}.token_limiter.trim_mode"),
                        "unknown trim mode",
                    );
                    TokenTrimMode::BestFit
                }
            };
            ProcessorSpec::TokenLimiter(TokenLimiterSpec {
                limit: t.limit,
                strategy,
                count_mode,
                trim_mode,
            })
        }
        Kind::Moderation(d) => {
            ProcessorSpec::Moderation(detector(v, &format!("{field}.moderation"), d, limits))
        }
        Kind::PromptInjectionDetector(d) => ProcessorSpec::PromptInjectionDetector(detector(
            v,
            &format!("{field}.prompt_injection_detector"),
            d,
            limits,
        )),
        Kind::LanguageDetector(l) => {
            let at = format!("{field}.language_detector");
            let strategy = match pb::LanguageStrategy::try_from(l.strategy) {
                Ok(pb::LanguageStrategy::Translate) => LanguageStrategy::Translate,
                Ok(pb::LanguageStrategy::Block) => LanguageStrategy::Block,
                Ok(pb::LanguageStrategy::Warn) => LanguageStrategy::Warn,
                Ok(_) => LanguageStrategy::Detect,
                Err(_) => {
                    v.add(format!("{at}.strategy"), "unknown strategy");
                    LanguageStrategy::Detect
                }
            };
            ProcessorSpec::LanguageDetector(LanguageSpec {
                model: l.model.clone(),
                instructions: checked_text(v, &at, l.instructions.as_ref(), limits),
                threshold: l.threshold,
                target_languages: l.target_languages.clone(),
                strategy,
                min_text_length: l.min_text_length,
                include_detection_details: l.include_detection_details,
                last_message_only: l.last_message_only,
                error_strategy: error_strategy(v, &at, l.error_strategy),
            })
        }
        Kind::SystemPromptScrubber(s) => {
            let at = format!("{field}.system_prompt_scrubber");
            let strategy = match pb::ScrubStrategy::try_from(s.strategy) {
                Ok(pb::ScrubStrategy::Block) => ScrubStrategy::Block,
                Ok(pb::ScrubStrategy::Warn) => ScrubStrategy::Warn,
                Ok(pb::ScrubStrategy::Filter) => ScrubStrategy::Filter,
                Ok(_) => ScrubStrategy::Redact,
                Err(_) => {
                    v.add(format!("{at}.strategy"), "unknown strategy");
                    ScrubStrategy::Redact
                }
            };
            let redaction_method = match pb::ScrubRedaction::try_from(s.redaction_method) {
                Ok(pb::ScrubRedaction::Placeholder) => ScrubRedaction::Placeholder,
                Ok(pb::ScrubRedaction::Remove) => ScrubRedaction::Remove,
                Ok(_) => ScrubRedaction::Mask,
                Err(_) => {
                    v.add(format!("{at}.redaction_method"), "unknown redaction method");
                    ScrubRedaction::Mask
                }
            };
            ProcessorSpec::SystemPromptScrubber(ScrubberSpec {
                model: s.model.clone(),
                instructions: checked_text(v, &at, s.instructions.as_ref(), limits),
                strategy,
                redaction_method,
                placeholder_text: s.placeholder_text.clone(),
                custom_patterns: s.custom_patterns.clone(),
                include_detections: s.include_detections,
                last_message_only: s.last_message_only,
                error_strategy: error_strategy(v, &at, s.error_strategy),
                json_prompt_injection: s.json_prompt_injection,
            })
        }
        Kind::PiiDetector(p) => {
            let at = format!("{field}.pii_detector");
            let strategy = match pb::PiiStrategy::try_from(p.strategy) {
                Ok(pb::PiiStrategy::Block) => PiiStrategy::Block,
                Ok(pb::PiiStrategy::Warn) => PiiStrategy::Warn,
                Ok(pb::PiiStrategy::Filter) => PiiStrategy::Filter,
                Ok(_) => PiiStrategy::Redact,
                Err(_) => {
                    v.add(format!("{at}.strategy"), "unknown strategy");
                    PiiStrategy::Redact
                }
            };
            let redaction_method = match pb::PiiRedaction::try_from(p.redaction_method) {
                Ok(pb::PiiRedaction::Hash) => PiiRedaction::Hash,
                Ok(pb::PiiRedaction::Remove) => PiiRedaction::Remove,
                Ok(pb::PiiRedaction::Placeholder) => PiiRedaction::Placeholder,
                Ok(_) => PiiRedaction::Mask,
                Err(_) => {
                    v.add(format!("{at}.redaction_method"), "unknown redaction method");
                    PiiRedaction::Mask
                }
            };
            ProcessorSpec::PiiDetector(PiiSpec {
                model: p.model.clone(),
                instructions: checked_text(v, &at, p.instructions.as_ref(), limits),
                threshold: p.threshold,
                strategy,
                redaction_method,
                preserve_format: p.preserve_format,
                detection_types: p.detection_types.clone(),
                include_detections: p.include_detections,
                last_message_only: p.last_message_only,
                error_strategy: error_strategy(v, &at, p.error_strategy),
                json_prompt_injection: p.json_prompt_injection,
            })
        }
        Kind::Hook(h) => ProcessorSpec::Hook { id: h.id.clone() },
    })
}

/// A detector's `instructions`, checked for length.
fn checked_text(
    v: &mut Violations,
    at: &str,
    text: Option<&String>,
    limits: &Limits,
) -> Option<String> {
    let text = text?;
    check_text(v, &format!("{at}.instructions"), text, limits);
    Some(text.clone())
}

fn error_strategy(v: &mut Violations, at: &str, value: i32) -> DetectorErrorStrategy {
    match pb::DetectorErrorStrategy::try_from(value) {
        Ok(pb::DetectorErrorStrategy::Strict) => DetectorErrorStrategy::Strict,
        Ok(_) => DetectorErrorStrategy::Warn,
        Err(_) => {
            v.add(format!("{at}.error_strategy"), "unknown error strategy");
            DetectorErrorStrategy::Warn
        }
    }
}

fn detector(v: &mut Violations, field: &str, d: &pb::Detector, limits: &Limits) -> DetectorSpec {
    let strategy = match pb::DetectorStrategy::try_from(d.strategy) {
        Ok(pb::DetectorStrategy::Warn) => DetectorStrategy::Warn,
        Ok(pb::DetectorStrategy::Filter) => DetectorStrategy::Filter,
        Ok(pb::DetectorStrategy::Rewrite) => DetectorStrategy::Rewrite,
        Ok(_) => DetectorStrategy::Block,
        Err(_) => {
            v.add(format!("{field}.strategy"), "unknown strategy");
            DetectorStrategy::Block
        }
    };
    let error_strategy = error_strategy(v, field, d.error_strategy);
    DetectorSpec {
        model: d.model.clone(),
        instructions: checked_text(v, field, d.instructions.as_ref(), limits),
        threshold: d.threshold,
        strategy,
        include_scores: d.include_scores,
        last_message_only: d.last_message_only,
        error_strategy,
        json_prompt_injection: d.json_prompt_injection,
        categories: d.categories.clone(),
        detection_types: d.detection_types.clone(),
        chunk_window: d.chunk_window,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_paths_become_wire_paths() {
        let specs = vec![ProcessorSpec::RegexFilter(RegexFilterSpec::default())];
        assert_eq!(
            wire_path("processors.input.processors[0].rules[1].pattern", &specs),
            "processors.input.processors.0.regex_filter.rules.1.pattern"
        );
        assert_eq!(
            wire_path("processors.input.processors[0].rules", &specs),
            "processors.input.processors.0.regex_filter.rules"
        );
    }
}
