//! Processors (the reference's guardrails), compiled from their specs: the chains a run
//! applies at each stage, and the tripwire an abort raises. One file per built-in processor;
//! the stages are pure here, and `run/processors.rs` is how the loop calls them (and the hook
//! processors, which answer over the hook transport).

pub mod detector;
mod language;
mod moderation;
mod pii;
mod prompt_injection;
mod regex_filter;
mod scrubber;
mod token_limiter;
pub mod tokens;
mod unicode;

use std::collections::VecDeque;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::agent::Agents;
use crate::agent::message::Message;
use crate::config::{ProcessorOverrides, ProcessorSpec, TokenLimiterSpec, UnicodeOptions};
pub use detector::{Detector, Stage};
pub use regex_filter::RegexFilter;
pub(crate) use unicode::{is_js_space, js_trim};

/// A processor stopped the run (or, with `retry`, asked the model to answer again).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tripwire {
    /// Why.
    pub reason: String,
    /// The processor asked for a retry.
    #[serde(default)]
    pub retry: bool,
    /// Data the processor attached (boxed: most tripwires have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Box<Map<String, Value>>>,
    /// The processor.
    pub processor_id: String,
}

impl Tripwire {
    /// A built-in processor's abort: no retry, no data.
    pub fn block(processor_id: &str, reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            retry: false,
            metadata: None,
            processor_id: processor_id.to_owned(),
        }
    }
}

/// One compiled processor.
#[derive(Debug)]
pub enum Processor {
    /// `unicode-normalizer`.
    Unicode(UnicodeOptions),
    /// `regex-filter`.
    Regex(RegexFilter),
    /// `token-limiter`.
    TokenLimiter(TokenLimiterSpec),
    /// A detector that asks a model (`moderation`, `prompt-injection-detector`).
    Detector(Detector),
    /// A custom processor answered through hooks, by id.
    Hook(String),
}

impl Processor {
    /// Compiles `spec`.
    pub fn build(spec: &ProcessorSpec) -> Result<Self, String> {
        Ok(match spec {
            ProcessorSpec::UnicodeNormalizer(options) => Self::Unicode(options.clone()),
            ProcessorSpec::RegexFilter(filter) => Self::Regex(RegexFilter::build(filter)?),
            ProcessorSpec::TokenLimiter(limiter) => Self::TokenLimiter(limiter.clone()),
            ProcessorSpec::Moderation(spec) => Self::Detector(Detector::Moderation(spec.clone())),
            ProcessorSpec::PromptInjectionDetector(spec) => {
                Self::Detector(Detector::PromptInjection(spec.clone()))
            }
            ProcessorSpec::LanguageDetector(spec) => {
                Self::Detector(Detector::Language(spec.clone()))
            }
            ProcessorSpec::SystemPromptScrubber(spec) => {
                Self::Detector(Detector::Scrubber(spec.clone()))
            }
            ProcessorSpec::PiiDetector(spec) => Self::Detector(Detector::Pii(spec.clone())),
            ProcessorSpec::Hook { id } => Self::Hook(id.clone()),
        })
    }

    /// The detector, for one that asks a model (its stages are async).
    pub fn detector(&self) -> Option<&Detector> {
        match self {
            Self::Detector(d) => Some(d),
            _ => None,
        }
    }

    /// The custom processor's id, for a hook processor.
    pub fn hook_id(&self) -> Option<&str> {
        match self {
            Self::Hook(id) => Some(id),
            _ => None,
        }
    }

    /// The input stage of a built-in processor on the conversation (system messages are
    /// left alone); hook processors are called by the loop.
    pub fn input(&self, messages: &mut [Message]) -> Result<(), Tripwire> {
        match self {
            Self::Unicode(options) => {
                unicode::apply(options, messages);
                Ok(())
            }
            Self::Regex(filter) => filter.input(messages),
            Self::TokenLimiter(_) | Self::Detector(_) | Self::Hook(_) => Ok(()),
        }
    }

    /// The final-response stage of a built-in processor on the run's response messages.
    pub fn result(&self, messages: &mut [Message]) -> Result<(), Tripwire> {
        match self {
            Self::Regex(filter) => filter.result(messages),
            Self::TokenLimiter(limiter) => token_limiter::result(limiter, messages),
            Self::Unicode(_) | Self::Detector(_) | Self::Hook(_) => Ok(()),
        }
    }
}

/// The processors of one run.
#[derive(Debug, Default)]
pub struct Chain {
    /// Input processors, in order.
    pub input: Vec<Processor>,
    /// Output processors, in order.
    pub output: Vec<Processor>,
    /// Retries in a row an output processor may ask for.
    pub max_retries: Option<u32>,
}

impl Chain {
    /// Compiles two lists; the error names the list and entry.
    pub fn build(
        input: &[ProcessorSpec],
        output: &[ProcessorSpec],
        max_retries: Option<u32>,
    ) -> Result<Self, String> {
        let compile = |key: &str, list: &[ProcessorSpec]| {
            list.iter()
                .enumerate()
                .map(|(i, spec)| Processor::build(spec).map_err(|e| format!("{key}[{i}]: {e}")))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Self {
            input: compile("input_processors", input)?,
            output: compile("output_processors", output)?,
            max_retries,
        })
    }

    /// The chain of a run: the request's lists where it sets them, else the agent's
    /// (`agent` is the agent's compiled chain, shared by its runs). `None`: no processor.
    pub fn for_run(
        agent: Option<&Arc<Chain>>,
        agent_specs: (&[ProcessorSpec], &[ProcessorSpec], Option<u32>),
        request: &ProcessorOverrides,
    ) -> Result<Option<Arc<Chain>>, String> {
        let chain = if request.is_empty() {
            match agent {
                Some(chain) => return Ok(Some(chain.clone())),
                None => return Ok(None),
            }
        } else {
            let (input, output, retries) = agent_specs;
            Arc::new(Self::build(
                request.input.as_deref().unwrap_or(input),
                request.output.as_deref().unwrap_or(output),
                request.max_retries.or(retries),
            )?)
        };
        Ok((!chain.is_empty()).then_some(chain))
    }

    /// No processor at all (retries alone do nothing).
    pub fn is_empty(&self) -> bool {
        self.input.is_empty() && self.output.is_empty()
    }

    /// Whether some output processor looks at the stream.
    pub fn watches_stream(&self) -> bool {
        self.output.iter().any(|p| match p {
            Processor::Regex(_) | Processor::TokenLimiter(_) => true,
            Processor::Detector(d) => d.on_stream(),
            Processor::Unicode(_) | Processor::Hook(_) => false,
        })
    }

    /// Whether some input processor trims each model call's prompt.
    pub fn trims_prompt(&self) -> bool {
        self.input
            .iter()
            .any(|p| matches!(p, Processor::TokenLimiter(_)))
    }

    /// The prompt of one model call (after its `system` messages), trimmed by the input
    /// token limiters in turn (the reference's `processLLMRequest`: this call only; memory
    /// keeps everything).
    pub fn trim_prompt<'m>(
        &self,
        system: &[String],
        mut prompt: Vec<&'m Message>,
    ) -> Result<Vec<&'m Message>, Tripwire> {
        for p in &self.input {
            if let Processor::TokenLimiter(limiter) = p
                && let Some(keep) = token_limiter::trim_prompt(limiter, system, &prompt)?
            {
                prompt = prompt
                    .into_iter()
                    .zip(keep)
                    .filter_map(|(m, k)| k.then_some(m))
                    .collect();
            }
        }
        Ok(prompt)
    }

    /// A fresh view of the output stream, for one run.
    pub fn stream(self: &Arc<Self>) -> OutputStream {
        OutputStream {
            states: self.output.iter().map(|_| StreamState::default()).collect(),
            chain: self.clone(),
        }
    }
}

/// What one output processor keeps between stream chunks.
#[derive(Default)]
struct StreamState {
    /// Redacting regex filter: the held-back tail.
    carry: String,
    /// Token limiter: tokens counted.
    tokens: f64,
    /// Token limiter: the limit was reported.
    notified: bool,
    /// Moderation: the latest stream parts (text deltas, `None` for other chunks).
    window: VecDeque<Option<String>>,
}

/// What the stream stage needs to ask detector models.
pub struct StreamCtx<'a> {
    /// Resolves detector models.
    pub agents: &'a Agents,
    /// The run's cancellation.
    pub cancel: &'a CancellationToken,
}

/// What the stream stage lets out for one chunk.
#[derive(Debug, Default, PartialEq)]
pub struct StreamOut {
    /// Text deltas to emit, in order.
    pub texts: Vec<String>,
    /// `data-*` chunks to emit (kind, payload).
    pub data: Vec<(&'static str, Value)>,
}

/// The output processors' view of a run's streamed text (the reference's
/// `processOutputStream` on text deltas; its state lasts the whole run).
pub struct OutputStream {
    chain: Arc<Chain>,
    states: Vec<StreamState>,
}

impl OutputStream {
    /// A text delta through every output processor in turn.
    pub async fn delta(
        &mut self,
        text: String,
        ctx: &StreamCtx<'_>,
    ) -> Result<StreamOut, Tripwire> {
        let mut out = StreamOut::default();
        self.pass(0, text, &mut out, ctx).await?;
        Ok(out)
    }

    /// A chunk other than a text delta is next: held-back text goes out first.
    pub async fn flush(&mut self, ctx: &StreamCtx<'_>) -> Result<StreamOut, Tripwire> {
        let mut out = StreamOut::default();
        for i in 0..self.states.len() {
            let held = match &self.chain.output[i] {
                Processor::Regex(filter) => filter.flush(&mut self.states[i].carry),
                Processor::Detector(d) if d.on_stream() => {
                    remember(&mut self.states[i].window, d.chunk_window(), None);
                    None
                }
                _ => None,
            };
            if let Some(text) = held {
                self.pass(i + 1, text, &mut out, ctx).await?;
            }
        }
        Ok(out)
    }

    /// `text` through the processors from `from` on.
    async fn pass(
        &mut self,
        from: usize,
        text: String,
        out: &mut StreamOut,
        ctx: &StreamCtx<'_>,
    ) -> Result<(), Tripwire> {
        let mut text = text;
        for i in from..self.states.len() {
            let next = match &self.chain.output[i] {
                Processor::Detector(d) if d.on_stream() => {
                    let state = &mut self.states[i];
                    let size = d.chunk_window();
                    remember(&mut state.window, size, Some(text.clone()));
                    let window = window_text(&state.window, size);
                    d.delta(ctx.agents, text, &window, ctx.cancel).await?
                }
                // An empty delta passes as it is, as the reference's.
                Processor::Regex(filter) if filter.redacts_stream() && !text.is_empty() => {
                    filter.redact_delta(&mut self.states[i].carry, &text)
                }
                Processor::Regex(filter) => {
                    filter.check_delta(&text)?;
                    Some(text)
                }
                Processor::TokenLimiter(limiter) => {
                    let state = &mut self.states[i];
                    token_limiter::stream(limiter, state, text, out)?
                }
                Processor::Unicode(_) | Processor::Detector(_) | Processor::Hook(_) => Some(text),
            };
            match next {
                Some(t) => text = t,
                None => return Ok(()),
            }
        }
        out.texts.push(text);
        Ok(())
    }
}

/// Length in UTF-16 code units, as JavaScript measures strings (the reference's offsets,
/// windows and limits are all in these units).
pub(super) fn utf16_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// Keeps the latest stream parts a moderation window needs.
fn remember(window: &mut VecDeque<Option<String>>, size: u32, part: Option<String>) {
    window.push_back(part);
    while window.len() > (size as usize).max(1) {
        window.pop_front();
    }
}

/// The text a moderation window judges: the current delta alone (size 0), else the text
/// deltas among the last `size` stream parts.
fn window_text(window: &VecDeque<Option<String>>, size: u32) -> String {
    if size == 0 {
        return window.back().cloned().flatten().unwrap_or_default();
    }
    window.iter().flatten().map(String::as_str).collect()
}
