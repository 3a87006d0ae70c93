//! The two ways agent work goes wrong: a call that cannot start, continue or find a run
//! ([`RunError`], mapped to a gRPC status once, in `api::error`), and a run that started and
//! then failed ([`RunFailure`], reported in the stream as an `error` chunk and a finish with
//! reason `error`; the RPC itself ends OK).

use crate::model::ModelError;
use crate::store::StoreError;

/// Why a call could not start, continue or find a run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Unknown agent, run or tool call.
    #[error("{0}")]
    NotFound(String),
    /// Bad options; each entry names a field.
    #[error("invalid request")]
    Invalid(Vec<(String, String)>),
    /// The run id or idempotency key is taken.
    #[error("{0}")]
    AlreadyExists(String),
    /// Too many runs at once.
    #[error("{0}")]
    Exhausted(String),
    /// The run is not in a state that allows this (already decided, expired, finished).
    #[error("{0}")]
    FailedPrecondition(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// agentd broke down (a bug): the run's execution stopped without finishing.
    #[error("{0}")]
    Internal(String),
}

impl RunError {
    /// One invalid field.
    pub fn invalid(field: impl Into<String>, description: impl Into<String>) -> Self {
        Self::Invalid(vec![(field.into(), description.into())])
    }
}

/// Who is to blame for a failed run, as clients group errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureCategory {
    /// The model provider failed or answered unusably.
    Model,
    /// agentd's own rules (structured output, limits) rejected the outcome.
    System,
    /// The store could not keep the run's state.
    Store,
    /// A hook (client or webhook) failed under the FAIL policy, or a prepare_step hook threw.
    Hook,
    /// The replica executing the run stopped, and the run could not be continued elsewhere.
    Replica,
}

impl FailureCategory {
    /// The category's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Model => "MODEL",
            Self::System => "SYSTEM",
            Self::Store => "STORE",
            Self::Hook => "HOOK",
            Self::Replica => "REPLICA",
        }
    }
}

/// Why a run that had started failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RunFailure {
    /// The model call failed (HTTP error, timeout, protocol error, unusable provider).
    #[error("{0}")]
    Model(ModelError),
    /// The answer was cut off (length or content filter) before an object was complete.
    #[error("{0}")]
    StructuredOutputTruncated(String),
    /// The answer is not JSON matching the schema (strict strategy).
    #[error("{0}")]
    StructuredOutputInvalid(String),
    /// The run's messages or state could not be saved.
    #[error("Saving the run's messages failed: {0}")]
    Store(String),
    /// A hook failed and its policy ends the run.
    #[error("{0}")]
    Hook(String),
    /// Semantic recall could not embed the query or the messages to save.
    #[error("Semantic recall failed: {0}")]
    Embedding(String),
    /// The replica executing the run stopped and the replica taking it over cannot continue it.
    #[error("The server executing the run stopped and the run cannot be continued: {0}")]
    OwnerLost(String),
    /// The run's processors cannot be built (a stored run from another version).
    #[error("The run's processors are invalid: {0}")]
    Processors(String),
}

impl RunFailure {
    /// The stable error id clients match on.
    pub fn id(&self) -> &'static str {
        match self {
            Self::Model(_) => "MODEL_PROVIDER_ERROR",
            Self::StructuredOutputTruncated(_) => "STRUCTURED_OUTPUT_TRUNCATED",
            Self::StructuredOutputInvalid(_) => "STRUCTURED_OUTPUT_SCHEMA_VALIDATION_FAILED",
            Self::Store(_) => "STORE_UNAVAILABLE",
            Self::Hook(_) => "HOOK_FAILED",
            Self::Embedding(_) => "EMBEDDING_FAILED",
            Self::OwnerLost(_) => "RUN_OWNER_LOST",
            Self::Processors(_) => "PROCESSORS_INVALID",
        }
    }

    /// Who is to blame.
    pub fn category(&self) -> FailureCategory {
        match self {
            Self::Model(_) | Self::Embedding(_) => FailureCategory::Model,
            Self::StructuredOutputTruncated(_)
            | Self::StructuredOutputInvalid(_)
            | Self::Processors(_) => FailureCategory::System,
            Self::Store(_) => FailureCategory::Store,
            Self::Hook(_) => FailureCategory::Hook,
            Self::OwnerLost(_) => FailureCategory::Replica,
        }
    }
}

impl From<&StoreError> for RunFailure {
    fn from(e: &StoreError) -> Self {
        Self::Store(e.to_string())
    }
}

impl From<StoreError> for RunFailure {
    fn from(e: StoreError) -> Self {
        Self::from(&e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_have_stable_ids_and_categories() {
        let cases = [
            (
                RunFailure::Model(ModelError::Timeout("idle".into())),
                "MODEL_PROVIDER_ERROR",
                "MODEL",
            ),
            (
                RunFailure::StructuredOutputTruncated("cut".into()),
                "STRUCTURED_OUTPUT_TRUNCATED",
                "SYSTEM",
            ),
            (
                RunFailure::StructuredOutputInvalid("bad".into()),
                "STRUCTURED_OUTPUT_SCHEMA_VALIDATION_FAILED",
                "SYSTEM",
            ),
            (RunFailure::Hook("late".into()), "HOOK_FAILED", "HOOK"),
            (
                RunFailure::Embedding("down".into()),
                "EMBEDDING_FAILED",
                "MODEL",
            ),
            (
                RunFailure::Store("down".into()),
                "STORE_UNAVAILABLE",
                "STORE",
            ),
            (
                RunFailure::OwnerLost("agent gone".into()),
                "RUN_OWNER_LOST",
                "REPLICA",
            ),
        ];
        for (failure, id, category) in cases {
            assert_eq!(failure.id(), id);
            assert_eq!(failure.category().as_str(), category);
        }
        assert_eq!(
            RunFailure::Store("down".into()).to_string(),
            "Saving the run's messages failed: down"
        );
    }
}
