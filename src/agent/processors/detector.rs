//! The detectors that ask a model, as the reference's: the detector call (its instructions as
//! the system message, the prompt as the user's, the answer as JSON matching a schema), the
//! failure strategy (`warn` lets the content through, `strict` stops the run), the
//! category-score rules of `moderation` and `prompt-injection-detector` (which messages are
//! checked, when a score flags them, what each strategy does), and the stages each detector
//! takes part in; `language.rs`, `scrubber.rs` and `pii.rs` hold the others' rules.

use futures::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::Tripwire;
use crate::agent::message::{Message, Part, Role};
use crate::agent::request::{ErrorStrategy, Injection, StructuredOutput};
use crate::agent::structured::{self, ObjectOutcome, Placement};
use crate::agent::{Agents, ModelRef};
use crate::config::{
    DetectorErrorStrategy, DetectorSpec, DetectorStrategy, LanguageSpec, PiiSpec, ScrubberSpec,
};
use crate::model::{ChatMessage, FinishReason, ModelEvent, ModelRequest, ModelSettings};

/// One detector model call: the instructions as the system message, the prompt as the
/// user's, the answer in JSON matching `schema`.
pub struct Ask<'a> {
    /// A configured `provider/model`.
    pub model: &'a str,
    /// The system message.
    pub instructions: &'a str,
    /// The user message (none when empty, as the reference's agent drops it).
    pub prompt: &'a str,
    /// The answer's JSON Schema.
    pub schema: Value,
    /// Where the schema goes when not natively (`None`: natively when the provider can,
    /// else in the system message).
    pub injection: Option<Injection>,
    /// The sampling temperature, when the detector sets one.
    pub temperature: Option<f64>,
}

impl Ask<'_> {
    /// The answer; a failed call follows `failure`: under `warn` it is logged and the answer
    /// is `null` (nothing found, as the reference's fail-open result), under `strict` the run
    /// stops.
    pub async fn answer(
        self,
        agents: &Agents,
        cancel: &CancellationToken,
        failure: OnFailure<'_>,
    ) -> Result<Value, Tripwire> {
        let error = match self.send(agents, cancel).await {
            Ok(answer) => return Ok(answer),
            Err(error) => error,
        };
        match failure.strategy {
            DetectorErrorStrategy::Warn => {
                warn!(%error, "{}", failure.warning);
                Ok(Value::Null)
            }
            DetectorErrorStrategy::Strict => {
                warn!(%error, "{}", failure.abort_reason);
                Err(Tripwire::block(failure.processor_id, failure.abort_reason))
            }
        }
    }

    /// Sends the call and returns the JSON answer, or why there is none.
    pub async fn send(self, agents: &Agents, cancel: &CancellationToken) -> Result<Value, String> {
        // The reference validates with zod objects, which drop keys the schema does not
        // name: the answer is checked without `additionalProperties: false`.
        let lenient = StructuredOutput {
            schema: without_closed_objects(self.schema.clone()),
            error_strategy: ErrorStrategy::Strict,
            fallback_value: None,
            instructions: None,
            injection: self.injection,
            model: None,
        };
        let output = StructuredOutput {
            schema: self.schema.clone(),
            ..lenient.clone()
        };
        let (text, reason) = self.stream(agents, cancel, Some(&output)).await?;
        match structured::resolve(&lenient, &text, reason) {
            ObjectOutcome::Object(value) => Ok(value),
            ObjectOutcome::Failure(problem) => Err(problem.to_string()),
            ObjectOutcome::Fallback(_) | ObjectOutcome::Warning(_) => {
                Err("Structured output returned no object".into())
            }
        }
    }

    /// Sends the call without asking for JSON (`schema` unused) and returns the answer's text.
    pub async fn send_text(
        self,
        agents: &Agents,
        cancel: &CancellationToken,
    ) -> Result<String, String> {
        Ok(self.stream(agents, cancel, None).await?.0)
    }

    /// Streams the model's answer: its text and finish reason.
    async fn stream(
        &self,
        agents: &Agents,
        cancel: &CancellationToken,
        output: Option<&StructuredOutput>,
    ) -> Result<(String, FinishReason), String> {
        let model: ModelRef = agents
            .model(self.model)
            .ok_or_else(|| format!("{:?} names no configured provider", self.model))?;
        let mut messages = vec![ChatMessage::system(self.instructions)];
        if !self.prompt.trim().is_empty() {
            messages.push(ChatMessage::user(self.prompt));
        }
        let placement = output.map(|output| {
            let placement =
                structured::placement(output, model.provider.supports_structured_output());
            structured::place(output, placement, &mut messages);
            placement
        });
        let request = ModelRequest {
            model: model.model.clone(),
            messages,
            response_format: output
                .filter(|_| placement == Some(Placement::Native))
                .map(structured::response_format),
            settings: ModelSettings {
                temperature: self.temperature,
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
        Ok((text, reason))
    }
}

/// `schema` with every `additionalProperties: false` removed.
fn without_closed_objects(mut schema: Value) -> Value {
    match &mut schema {
        Value::Object(map) => {
            if map.get("additionalProperties") == Some(&Value::Bool(false)) {
                map.remove("additionalProperties");
            }
            for value in map.values_mut() {
                *value = without_closed_objects(std::mem::take(value));
            }
        }
        Value::Array(items) => {
            for value in items.iter_mut() {
                *value = without_closed_objects(std::mem::take(value));
            }
        }
        _ => {}
    }
    schema
}

/// Where a failed detector call goes: the processor's error strategy and its texts.
pub struct OnFailure<'a> {
    /// `warn` lets the content through, `strict` stops the run.
    pub strategy: DetectorErrorStrategy,
    /// Logged under `warn`.
    pub warning: &'a str,
    /// The tripwire's reason under `strict`.
    pub abort_reason: &'a str,
    /// The processor.
    pub processor_id: &'a str,
}

/// A JSON Schema object gains a required field that is a described string or null (the
/// optional fields the detectors' answers have under some strategies).
pub fn add_nullable_string(schema: &mut Value, name: &str, description: &str) {
    schema["properties"][name] = json!({"anyOf": [
        {"description": description, "type": "string"},
        {"type": "null"},
    ]});
    if let Some(required) = schema["required"].as_array_mut() {
        required.push(json!(name));
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
            DetectorStrategy::Block => Err(Tripwire::block(self.id, reason)),
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

/// Which of `messages` a detector checks (system ones too, as the reference's): all, or the
/// last one only.
pub fn checked(messages: &[Message], last_only: bool) -> Vec<bool> {
    let n = messages.len();
    (0..n).map(|i| !last_only || n <= 1 || i + 1 == n).collect()
}

/// A number as JavaScript prints it.
pub fn js_number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// A compiled detector processor: one that asks a model.
#[derive(Debug)]
pub enum Detector {
    /// `moderation`: input, stream, result.
    Moderation(DetectorSpec),
    /// `prompt-injection-detector`: input.
    PromptInjection(DetectorSpec),
    /// `language-detector`: input.
    Language(LanguageSpec),
    /// `system-prompt-scrubber`: stream, result.
    Scrubber(ScrubberSpec),
    /// `pii-detector`: input, result.
    Pii(PiiSpec),
}

/// The stage a detector sees messages at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Before the first model call.
    Input,
    /// The final response.
    Result,
}

impl Detector {
    /// The category-score rules and options, for moderation and prompt injection.
    fn scored(&self) -> Option<(&'static Scored, &DetectorSpec)> {
        match self {
            Self::Moderation(spec) => Some((&super::moderation::SCORED, spec)),
            Self::PromptInjection(spec) => Some((&super::prompt_injection::SCORED, spec)),
            Self::Language(_) | Self::Scrubber(_) | Self::Pii(_) => None,
        }
    }

    /// Whether it sees messages at `stage`.
    pub fn at(&self, stage: Stage) -> bool {
        match self {
            Self::Moderation(_) | Self::Pii(_) => true,
            Self::PromptInjection(_) | Self::Language(_) => stage == Stage::Input,
            Self::Scrubber(_) => stage == Stage::Result,
        }
    }

    /// Whether it looks at streamed deltas.
    pub fn on_stream(&self) -> bool {
        matches!(self, Self::Moderation(_) | Self::Scrubber(_))
    }

    /// How many stream parts a moderation window spans (0: the current delta alone).
    pub fn chunk_window(&self) -> u32 {
        match self {
            Self::Moderation(spec) => spec.chunk_window,
            _ => 0,
        }
    }

    /// One category-score call on `content`; a failure follows the error strategy (a `warn`
    /// failure is an answer that flags nothing).
    async fn judge(
        &self,
        agents: &Agents,
        content: &str,
        stream_window: Option<u32>,
        cancel: &CancellationToken,
    ) -> Result<Verdict, Tripwire> {
        let Some((scored, spec)) = self.scored() else {
            return Ok(Verdict {
                flagged: None,
                rewritten: None,
            });
        };
        let (instructions, prompt, schema) = match self {
            Self::PromptInjection(_) => (
                super::prompt_injection::instructions(spec),
                super::prompt_injection::prompt(spec, content),
                super::prompt_injection::schema(spec),
            ),
            _ => (
                super::moderation::instructions(spec),
                super::moderation::prompt(content, stream_window),
                super::moderation::schema(spec),
            ),
        };
        let asked = Ask {
            model: &spec.model,
            instructions: &instructions,
            prompt: &prompt,
            schema,
            injection: spec.json_prompt_injection.then_some(Injection::System),
            temperature: Some(0.0),
        };
        let failure = OnFailure {
            strategy: spec.error_strategy,
            warning: scored.warning,
            abort_reason: scored.failure,
            processor_id: scored.id,
        };
        let answer = asked.answer(agents, cancel, failure).await?;
        Ok(scored.verdict(spec, &answer))
    }

    /// The messages at `stage`: each one it checks is judged, in order; it may be kept,
    /// changed, dropped, or stop the run.
    pub async fn messages(
        &self,
        stage: Stage,
        agents: &Agents,
        messages: &mut Vec<Message>,
        cancel: &CancellationToken,
    ) -> Result<(), Tripwire> {
        if !self.at(stage) {
            return Ok(());
        }
        match self {
            Self::Language(spec) => {
                return super::language::messages(spec, agents, messages, cancel).await;
            }
            Self::Scrubber(spec) => {
                return super::scrubber::messages(spec, agents, messages, cancel).await;
            }
            Self::Pii(spec) => return super::pii::messages(spec, agents, messages, cancel).await,
            Self::Moderation(_) | Self::PromptInjection(_) => {}
        }
        let Some((scored, spec)) = self.scored() else {
            return Ok(());
        };
        let checked = checked(messages, spec.last_message_only);
        let mut kept = Vec::with_capacity(messages.len());
        for (message, check) in std::mem::take(messages).into_iter().zip(checked) {
            let text = message_text(&message);
            if !check || text.is_empty() {
                kept.push(message);
                continue;
            }
            let verdict = self.judge(agents, &text, None, cancel).await?;
            kept.extend(scored.apply(spec, verdict, message)?);
        }
        *messages = kept;
        Ok(())
    }

    /// The stream stage: moderation judges `window` (the delta with its chunk window) and
    /// keeps or drops `text`; the scrubber judges `text` alone and may redact it.
    pub async fn delta(
        &self,
        agents: &Agents,
        text: String,
        window: &str,
        cancel: &CancellationToken,
    ) -> Result<Option<String>, Tripwire> {
        match self {
            Self::Scrubber(spec) => super::scrubber::delta(spec, agents, text, cancel).await,
            Self::Moderation(spec) => {
                let verdict = self
                    .judge(agents, window, Some(spec.chunk_window), cancel)
                    .await?;
                if verdict.flagged.is_none() {
                    return Ok(Some(text));
                }
                let probe = Message::new(Role::Assistant, Vec::new());
                Ok(super::moderation::SCORED
                    .apply(spec, verdict, probe)?
                    .map(|_| text))
            }
            Self::PromptInjection(_) | Self::Language(_) | Self::Pii(_) => Ok(Some(text)),
        }
    }
}
