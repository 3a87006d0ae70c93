//! Context computed per run, the reference's function-valued options (hallucination's
//! `getContext`, context relevance's and precision's `contextExtractor`). A function cannot
//! be written in TOML, so these are set from Rust (the integration can offer, say, the run's
//! tool results through them); they compare equal only to themselves.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::agent::scorers::{DbMessage, ScorerInput, ScorerRun};

/// The step a hallucination context is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextStep {
    /// Before the claims are checked.
    Analyze,
    /// Before the reason is asked for.
    GenerateReason,
}

/// The results of the steps run so far, as the reference passes `results`.
#[derive(Debug, Clone, Copy)]
pub struct StepResults<'a> {
    /// The preprocess step's result.
    pub preprocess: Option<&'a Value>,
    /// The analyze step's result.
    pub analyze: Option<&'a Value>,
    /// The score, once computed.
    pub generate_score: Option<f64>,
}

/// What hallucination's `getContext` is given.
#[derive(Debug, Clone, Copy)]
pub struct GetContextParams<'a> {
    /// The scored run.
    pub run: &'a ScorerRun,
    /// The step results so far.
    pub results: StepResults<'a>,
    /// The score (at `GenerateReason`).
    pub score: Option<f64>,
    /// Which step asks.
    pub step: ContextStep,
}

type GetContextFn = dyn Fn(&GetContextParams<'_>) -> Vec<String> + Send + Sync;
type ExtractorFn = dyn Fn(&ScorerInput, &[DbMessage]) -> Vec<String> + Send + Sync;

/// Hallucination's `getContext`: the context for a step, in place of the `context` option.
#[derive(Clone)]
pub struct GetContext(Arc<GetContextFn>);

impl GetContext {
    /// Wraps a function.
    pub fn new(f: impl Fn(&GetContextParams<'_>) -> Vec<String> + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// The context for `params`.
    pub fn call(&self, params: &GetContextParams<'_>) -> Vec<String> {
        (self.0)(params)
    }
}

/// Context relevance's and precision's `contextExtractor`: the context from the run's
/// input and response, in place of the `context` option.
#[derive(Clone)]
pub struct ContextExtractor(Arc<ExtractorFn>);

impl ContextExtractor {
    /// Wraps a function.
    pub fn new(
        f: impl Fn(&ScorerInput, &[DbMessage]) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        Self(Arc::new(f))
    }

    /// The context of `run`.
    pub fn call(&self, run: &ScorerRun) -> Vec<String> {
        (self.0)(&run.input, &run.output)
    }
}

/// Where context relevance and precision get the run's context: their `context` option and
/// `contextExtractor`.
#[derive(Clone, Copy)]
pub(super) struct ContextSource<'a> {
    context: Option<&'a [String]>,
    extractor: Option<&'a ContextExtractor>,
}

impl<'a> ContextSource<'a> {
    /// The options' `context` and `context_extractor`.
    pub fn new(context: &'a Option<Vec<String>>, extractor: &'a Option<ContextExtractor>) -> Self {
        Self {
            context: context.as_deref(),
            extractor: extractor.as_ref(),
        }
    }

    /// The reference factory's check: one of them is set, and a set `context` is not empty.
    /// `scoring` names the scoring in the message (`Context Relevance`, `Context Precision`).
    pub fn check(self, scorer: &str, scoring: &str) -> Result<(), String> {
        let message = match (self.context, self.extractor) {
            (None, None) => {
                format!("Either context or contextExtractor is required for {scoring} scoring")
            }
            (Some([]), _) => "Context array cannot be empty if provided".to_owned(),
            _ => return Ok(()),
        };
        Err(format!("{scorer}: {message}"))
    }

    /// The context of `run`: the extractor's, else the `context` option (none when unset).
    pub fn context_of(self, run: &ScorerRun) -> Vec<String> {
        match self.extractor {
            Some(extractor) => extractor.call(run),
            None => self.context.map(<[String]>::to_vec).unwrap_or_default(),
        }
    }
}

impl fmt::Debug for GetContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GetContext(<fn>)")
    }
}

impl fmt::Debug for ContextExtractor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ContextExtractor(<fn>)")
    }
}

impl PartialEq for GetContext {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl PartialEq for ContextExtractor {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
