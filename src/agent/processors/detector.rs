//! What the detectors that ask a model share, as the reference's do: the detector call (its
//! instructions as the system message, the prompt as the user's, the answer as JSON matching a
//! schema, temperature 0), the failure strategy (`warn` lets the content through, `strict`
//! stops the run), and the category-score rules of `moderation` and
//! `prompt-injection-detector`: which messages are checked, when a score flags them, and what
//! each strategy does.

use futures::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::Tripwire;
use crate::agent::message::{Message, Part, Role};
use crate::agent::request::{ErrorStrategy, Injection, StructuredOutput};
use crate::agent::structured::{self, ObjectOutcome, Placement};
use crate::agent::{Agents, ModelRef};
use crate::config::{DetectorErrorStrategy, DetectorSpec, DetectorStrategy};
use crate::model::{ChatMessage, FinishReason, ModelEvent, ModelRequest, ModelSettings};

/// Asks the detector model `spec` (a configured `provider/model`) and returns its JSON answer.
pub async fn ask(
    agents: &Agents,
    spec: &str,
    instructions: &str,
    prompt: &str,
    schema: Value,
    prompt_injection: bool,
    cancel: &CancellationToken,
) -> Result<Value, String> {
    let model: ModelRef = agents
        .model(spec)
        .ok_or_else(|| format!("{spec:?} names no configured provider"))?;
    let output = StructuredOutput {
        schema,
        error_strategy: ErrorStrategy::Strict,
        fallback_value: None,
        instructions: None,
        injection: prompt_injection.then_some(Injection::System),
        model: None,
    };
    let placement = structured::placement(&output, model.provider.supports_structured_output());
    let mut messages = vec![ChatMessage::system(instructions), ChatMessage::user(prompt)];
    structured::place(&output, placement, &mut messages);
    let request = ModelRequest {
        model: model.model.clone(),
        messages,
        response_format: (placement == Placement::Native)
            .then(|| structured::response_format(&output)),
        settings: ModelSettings {
            temperature: Some(0.0),
            ..ModelSettings::default()
        },
        ..ModelRequest::default()
    };
    let mut stream = model
        .provider
        .stream(request, cancel.child_token())
        .await
        .map_err(|e| e.to_string())?;
    let mut text = String::new();
    let mut reason = FinishReason::Other;
    while let Some(event) = stream.next().await {
        match event.map_err(|e| e.to_string())? {
            ModelEvent::TextDelta(delta) => text.push_str(&delta),
            ModelEvent::Finish { reason: r, .. } => reason = r,
            _ => {}
        }
    }
    match structured::resolve(&output, &text, reason) {
        ObjectOutcome::Object(value) => Ok(value),
        ObjectOutcome::Failure(problem) => Err(problem.to_string()),
        ObjectOutcome::Fallback(_) | ObjectOutcome::Warning(_) => {
            Err("Structured output returned no object".into())
        }
    }
}

/// A failed detector call under the processor's error strategy: `warn` logs and lets the
/// content through (`Ok`), `strict` stops the run.
pub fn on_error(
    strategy: DetectorErrorStrategy,
    error: &str,
    warning: &str,
    abort_reason: &str,
    processor_id: &str,
) -> Result<(), Tripwire> {
    match strategy {
        DetectorErrorStrategy::Warn => {
            warn!(%error, "{warning}");
            Ok(())
        }
        DetectorErrorStrategy::Strict => {
            warn!(%error, "{abort_reason}");
            Err(Tripwire {
                reason: abort_reason.to_owned(),
                retry: false,
                metadata: None,
                processor_id: processor_id.to_owned(),
            })
        }
    }
}

/// The text the detectors read of a message: its text parts joined by spaces, trimmed.
pub fn message_text(message: &Message) -> String {
    let mut text = String::new();
    for part in &message.parts {
        if let Part::Text { text: t } = part {
            text.push_str(t);
            text.push(' ');
        }
    }
    text.trim().to_owned()
}

/// What a category-score detector is: its names, strings and schema.
pub struct Scored {
    /// The processor id.
    pub id: &'static str,
    /// The log prefix, `[ModerationProcessor]`.
    pub tag: &'static str,
    /// The answer's list field (`category_scores`, `categories`).
    pub list: &'static str,
    /// Each item's name field (`category`, `type`).
    pub item: &'static str,
    /// The abort reason's opening (`Content flagged for moderation. Categories: `).
    pub flagged: &'static str,
    /// Logged when the detector call failed under `warn`.
    pub warning: &'static str,
    /// The abort reason when it failed under `strict`.
    pub failure: &'static str,
    /// The default threshold.
    pub threshold: f64,
}

/// A detector's verdict on one piece of content.
pub struct Verdict {
    /// The reason to report, when the content is flagged.
    pub flagged: Option<String>,
    /// The detector's neutralized rewrite, when it gave one.
    pub rewritten: Option<String>,
}

impl Scored {
    /// The verdict of `answer`: flagged when a score reaches the threshold.
    pub fn verdict(&self, spec: &DetectorSpec, answer: &Value) -> Verdict {
        let threshold = spec.threshold.unwrap_or(self.threshold);
        let scores: Vec<(&str, f64)> = answer[self.list]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                (
                    c[self.item].as_str().unwrap_or(""),
                    c["score"].as_f64().unwrap_or(0.0),
                )
            })
            .collect();
        let max = scores
            .iter()
            .map(|(_, s)| *s)
            .fold(f64::NEG_INFINITY, f64::max);
        let flagged = (!scores.is_empty() && max >= threshold).then(|| {
            let names: Vec<&str> = scores
                .iter()
                .filter(|(_, s)| *s >= threshold)
                .map(|(n, _)| *n)
                .collect();
            let mut reason = format!("{}{}", self.flagged, names.join(", "));
            // JavaScript truthiness: an empty reason is left out.
            if let Some(why) = answer["reason"].as_str().filter(|r| !r.is_empty()) {
                reason.push_str(&format!(". Reason: {why}"));
            }
            if spec.include_scores {
                let all: Vec<String> = scores
                    .iter()
                    .map(|(n, s)| format!("{n}: {}", js_number(*s)))
                    .collect();
                reason.push_str(&format!(". Scores: {}", all.join(", ")));
            }
            reason
        });
        Verdict {
            flagged,
            rewritten: answer["rewritten_content"]
                .as_str()
                .filter(|r| !r.is_empty())
                .map(str::to_owned),
        }
    }

    /// Applies the strategy to a flagged message: `Ok(Some)` keeps it (changed or not),
    /// `Ok(None)` drops it, `Err` stops the run.
    pub fn apply(
        &self,
        spec: &DetectorSpec,
        verdict: Verdict,
        message: Message,
    ) -> Result<Option<Message>, Tripwire> {
        let Some(reason) = verdict.flagged else {
            return Ok(Some(message));
        };
        match spec.strategy {
            DetectorStrategy::Block => Err(Tripwire {
                reason,
                retry: false,
                metadata: None,
                processor_id: self.id.to_owned(),
            }),
            DetectorStrategy::Warn => {
                warn!("{} {reason}", self.tag);
                Ok(Some(message))
            }
            DetectorStrategy::Filter => {
                info!("{} Filtered message: {reason}", self.tag);
                Ok(None)
            }
            DetectorStrategy::Rewrite => match verdict.rewritten {
                Some(text) => {
                    info!("{} Rewrote message: {reason}", self.tag);
                    let mut message = message;
                    message.parts = vec![Part::Text { text }];
                    Ok(Some(message))
                }
                None => {
                    warn!("{} No rewrite available, filtering: {reason}", self.tag);
                    Ok(None)
                }
            },
        }
    }
}

/// The messages a detector checks (system ones too, as the reference's): all, or the last
/// one only.
pub fn checked(messages: &[Message], last_only: bool) -> impl Fn(usize) -> bool + '_ {
    move |i| !last_only || messages.len() <= 1 || i + 1 == messages.len()
}

/// A number as JavaScript prints it.
pub fn js_number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// A compiled detector processor.
#[derive(Debug)]
pub struct Detector {
    /// Which one.
    pub kind: DetectorKind,
    /// Its options.
    pub spec: DetectorSpec,
}

/// The detectors that ask a model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DetectorKind {
    /// `moderation`: input, stream, result.
    Moderation,
    /// `prompt-injection-detector`: input.
    PromptInjection,
}

impl Detector {
    fn scored(&self) -> &'static Scored {
        match self.kind {
            DetectorKind::Moderation => &super::moderation::SCORED,
            DetectorKind::PromptInjection => &super::prompt_injection::SCORED,
        }
    }

    /// Its processor id.
    pub fn id(&self) -> &'static str {
        self.scored().id
    }

    /// Whether it looks at the final response (moderation) as well as the input.
    pub fn on_result(&self) -> bool {
        self.kind == DetectorKind::Moderation
    }

    /// Whether it looks at streamed deltas.
    pub fn on_stream(&self) -> bool {
        self.kind == DetectorKind::Moderation
    }

    /// One detector call on `content`; a failure follows the error strategy (a `warn`
    /// failure is an answer that flags nothing).
    async fn judge(
        &self,
        agents: &Agents,
        content: &str,
        stream_window: Option<u32>,
        cancel: &CancellationToken,
    ) -> Result<Verdict, Tripwire> {
        let spec = &self.spec;
        let (instructions, prompt, schema) = match self.kind {
            DetectorKind::Moderation => (
                super::moderation::instructions(spec),
                super::moderation::prompt(content, stream_window),
                super::moderation::schema(spec),
            ),
            DetectorKind::PromptInjection => (
                super::prompt_injection::instructions(spec),
                super::prompt_injection::prompt(spec, content),
                super::prompt_injection::schema(spec),
            ),
        };
        let scored = self.scored();
        match ask(
            agents,
            &spec.model,
            &instructions,
            &prompt,
            schema,
            spec.json_prompt_injection,
            cancel,
        )
        .await
        {
            Ok(answer) => Ok(scored.verdict(spec, &answer)),
            Err(error) => {
                on_error(
                    spec.error_strategy,
                    &error,
                    scored.warning,
                    scored.failure,
                    scored.id,
                )?;
                Ok(Verdict {
                    flagged: None,
                    rewritten: None,
                })
            }
        }
    }

    /// The input (or final-response) stage: each checked message with text is judged, in order.
    pub async fn messages(
        &self,
        agents: &Agents,
        messages: &mut Vec<Message>,
        cancel: &CancellationToken,
    ) -> Result<(), Tripwire> {
        let checked: Vec<bool> = {
            let is_checked = checked(messages, self.spec.last_message_only);
            (0..messages.len()).map(is_checked).collect()
        };
        let mut kept = Vec::with_capacity(messages.len());
        for (message, check) in std::mem::take(messages).into_iter().zip(checked) {
            let text = message_text(&message);
            if !check || text.is_empty() {
                kept.push(message);
                continue;
            }
            let verdict = self.judge(agents, &text, None, cancel).await?;
            kept.extend(self.scored().apply(&self.spec, verdict, message)?);
        }
        *messages = kept;
        Ok(())
    }

    /// The stream stage (moderation): `window` is the text the current delta is judged with;
    /// `Ok(false)` drops the delta.
    pub async fn delta(
        &self,
        agents: &Agents,
        window: &str,
        cancel: &CancellationToken,
    ) -> Result<bool, Tripwire> {
        let verdict = self
            .judge(agents, window, Some(self.spec.chunk_window), cancel)
            .await?;
        if verdict.flagged.is_none() {
            return Ok(true);
        }
        let probe = Message::new(Role::Assistant, Vec::new());
        Ok(self.scored().apply(&self.spec, verdict, probe)?.is_some())
    }
}
