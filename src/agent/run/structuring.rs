//! The separate structuring call of `structured_output.model`: the run's answer, reasoning and
//! tool traffic turned into the object by another model, its partial objects streamed.

use futures::StreamExt;
use serde_json::Value;

use super::Runner;
use crate::agent::ModelRef;
use crate::agent::emit::Emitter;
use crate::agent::error::RunFailure;
use crate::agent::event::Event;
use crate::agent::request::StructuredOutput;
use crate::agent::structured::{self, ObjectOutcome};
use crate::model::{FinishReason, ModelEvent, ModelRequest};

impl Runner {
    /// The separate structuring call: the run's answer, reasoning and tool traffic turned into
    /// the object by `model`, its partial objects streamed as they come.
    pub(super) async fn structure(
        &mut self,
        em: &mut Emitter,
        output: &StructuredOutput,
        model: ModelRef,
    ) -> ObjectOutcome {
        let request = ModelRequest {
            model: model.model.clone(),
            messages: structured::structuring_request(output, &self.state.steps),
            response_format: model
                .provider
                .supports_structured_output()
                .then(|| structured::response_format(output)),
            ..ModelRequest::default()
        };
        let failed = |why: String| {
            structured::on_failure(
                output,
                RunFailure::StructuredOutputInvalid(format!(
                    "[StructuredOutputProcessor] Structuring failed: {why}"
                )),
            )
        };
        let mut stream = match model
            .provider
            .stream(request, self.cancel.child_token())
            .await
        {
            Ok(stream) => stream,
            Err(e) => return failed(e.to_string()),
        };
        let mut text = String::new();
        let mut last: Option<Value> = None;
        let mut reason = FinishReason::Other;
        while let Some(event) = stream.next().await {
            match event {
                Ok(ModelEvent::TextDelta(delta)) => {
                    text.push_str(&delta);
                    if let Some(object) = structured::partial_json(&text)
                        && last.as_ref() != Some(&object)
                    {
                        em.emit(Event::StructuringObject(object.clone())).await;
                        last = Some(object);
                    }
                }
                Ok(ModelEvent::Finish { reason: r, .. }) => reason = r,
                Ok(_) => {}
                Err(e) => return failed(e.to_string()),
            }
        }
        match structured::resolve(output, &text, reason) {
            ObjectOutcome::Failure(problem) => failed(problem.to_string()),
            outcome => outcome,
        }
    }
}
