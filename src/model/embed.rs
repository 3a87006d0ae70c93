//! Text embeddings for semantic recall: the [`Embedder`] trait the memory layer calls, served
//! by any OpenAI-compatible `/embeddings` endpoint ([`OpenAiEmbedder`]).

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::ModelError;
pub use super::openai::OpenAiEmbedder;

/// Turns texts into vectors.
#[async_trait]
pub trait Embedder: Send + Sync {
    /// `provider/model`, for errors and logs.
    fn name(&self) -> &str;

    /// One vector per text, in order (one request for all of them, where the endpoint allows).
    async fn embed(
        &self,
        texts: Vec<String>,
        cancel: CancellationToken,
    ) -> Result<Vec<Vec<f32>>, ModelError>;
}
