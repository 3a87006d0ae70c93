//! Memory beyond the last messages. Semantic recall: `recall` finds the stored messages most
//! similar to a run's last user message and shapes them for the prompt as the reference does;
//! `vectors` is the in-process index it searches (kept current from the store's vector logs),
//! `scan` its exact top-k kernel. `working`: working memory's rules; `threads`: what
//! ThreadService does to stored threads (listing, paging, deleting).

pub mod recall;
mod scan;
pub mod threads;
pub mod vectors;
pub mod working;
pub mod working_store;

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::config::{Config, MessageRange, RecallOptions, RecallScope};
use crate::model::{Embedder, ModelError, OpenAiEmbedder};
pub use vectors::{Hit, VectorIndex};

/// A request's recall settings; each one set overrides the agent's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecallOverride {
    /// `Some(false)` turns recall off; otherwise the request turns it on.
    pub enabled: Option<bool>,
    /// How many similar messages to find.
    pub top_k: Option<usize>,
    /// Neighbours of each hit.
    pub message_range: Option<MessageRange>,
    /// Where to search.
    pub scope: Option<RecallScope>,
    /// Lowest similarity kept.
    pub threshold: Option<f64>,
}

/// The recall options of a run: the agent's, overridden by the request's.
pub fn effective_recall(
    agent: Option<RecallOptions>,
    request: Option<&RecallOverride>,
) -> Option<RecallOptions> {
    let Some(request) = request else {
        return agent;
    };
    if request.enabled == Some(false) {
        return None;
    }
    let mut options = agent.unwrap_or_default();
    if let Some(top_k) = request.top_k {
        options.top_k = top_k;
    }
    if let Some(range) = request.message_range {
        options.message_range = range;
    }
    if let Some(scope) = request.scope {
        options.scope = scope;
    }
    if request.threshold.is_some() {
        options.threshold = request.threshold;
    }
    Some(options)
}

/// The embedder a `provider/model` spec names among the configured providers; a provider that
/// cannot be built (e.g. its key is missing) yields one that fails each call with the reason.
pub fn build_embedder(config: &Config, spec: &str) -> Option<Arc<dyn Embedder>> {
    let (provider, model) = spec.split_once('/')?;
    let cfg = config.providers.iter().find(|p| p.name == provider)?;
    Some(match OpenAiEmbedder::new(cfg.clone(), model) {
        Ok(embedder) => Arc::new(embedder),
        Err(error) => {
            tracing::warn!(embedder = %spec, %error, "embedder unusable; recall will fail when run");
            Arc::new(Unusable {
                name: spec.to_owned(),
                error,
            })
        }
    })
}

/// Stands in for an embedder that could not be built.
struct Unusable {
    name: String,
    error: ModelError,
}

#[async_trait]
impl Embedder for Unusable {
    fn name(&self) -> &str {
        &self.name
    }

    async fn embed(
        &self,
        _texts: Vec<String>,
        _cancel: CancellationToken,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        Err(self.error.clone())
    }
}

/// Embeds `texts` in one call and normalizes the vectors (cosine similarity becomes a dot
/// product); fails unless there is one vector per text.
pub async fn embed_texts(
    embedder: &dyn Embedder,
    texts: Vec<String>,
    cancel: CancellationToken,
) -> Result<Vec<Vec<f32>>, ModelError> {
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    let count = texts.len();
    let mut vectors = embedder.embed(texts, cancel).await?;
    if vectors.len() != count {
        return Err(ModelError::Protocol(format!(
            "{}: {} vectors for {count} texts",
            embedder.name(),
            vectors.len()
        )));
    }
    vectors.iter_mut().for_each(|v| normalize(v));
    Ok(vectors)
}

/// Scales `v` to unit length (cosine similarity becomes a dot product); a zero vector stays.
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// A vector as the store keeps it: little-endian `f32`s.
pub fn to_bytes(v: &[f32]) -> bytes::Bytes {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_settings_override_the_agents() {
        let agent = RecallOptions {
            top_k: 7,
            ..RecallOptions::default()
        };
        assert_eq!(
            effective_recall(Some(agent.clone()), None),
            Some(agent.clone())
        );
        let off = RecallOverride {
            enabled: Some(false),
            ..RecallOverride::default()
        };
        assert_eq!(effective_recall(Some(agent.clone()), Some(&off)), None);
        let thread = RecallOverride {
            scope: Some(RecallScope::Thread),
            threshold: Some(0.2),
            ..RecallOverride::default()
        };
        let merged = effective_recall(Some(agent), Some(&thread)).unwrap();
        assert_eq!((merged.top_k, merged.scope), (7, RecallScope::Thread));
        assert_eq!(merged.threshold, Some(0.2));
        let on = effective_recall(None, Some(&RecallOverride::default())).unwrap();
        assert_eq!(on, RecallOptions::default());
    }

    #[test]
    fn vectors_normalize_and_encode() {
        let mut v = vec![3.0, 4.0];
        normalize(&mut v);
        assert_eq!(v, vec![0.6, 0.8]);
        let mut zero = vec![0.0; 3];
        normalize(&mut zero);
        assert_eq!(zero, vec![0.0; 3]);
        assert_eq!(to_bytes(&[1.0]).as_ref(), &1f32.to_le_bytes());
    }
}
