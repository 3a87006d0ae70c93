//! The OpenAI-compatible embeddings client: `POST {base_url}/embeddings` with every text of a
//! call in one `input` array (split only beyond [`MAX_BATCH`]), on the provider's HTTP client,
//! headers, key and retry rules.

use async_trait::async_trait;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{OpenAiProvider, describe};
use crate::model::embed::Embedder;
use crate::model::{ModelError, ProviderConfig};

/// Most inputs per request (OpenAI accepts 2048; smaller servers fewer).
const MAX_BATCH: usize = 256;
/// Largest response body read (a 256-input batch of 3072-dimension vectors is ~15 MB).
const MAX_BODY: usize = 64 << 20;

/// Embeddings from an OpenAI-compatible provider.
#[derive(Debug)]
pub struct OpenAiEmbedder {
    provider: OpenAiProvider,
    model: String,
    label: String,
    endpoint: String,
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Datum>,
}

#[derive(Deserialize)]
struct Datum {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f32>,
}

impl OpenAiEmbedder {
    /// The model `model` of the provider `cfg` (reads the API key variable now).
    pub fn new(cfg: ProviderConfig, model: &str) -> Result<Self, ModelError> {
        let label = format!("{}/{model}", cfg.name);
        let provider = OpenAiProvider::new(cfg)?;
        Ok(Self {
            endpoint: format!("{}/embeddings", provider.base),
            provider,
            model: model.to_owned(),
            label,
        })
    }

    async fn embed_batch(
        &self,
        texts: &[String],
        cancel: &CancellationToken,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        let body = json!({"model": self.model, "input": texts, "encoding_format": "float"});
        let body = serde_json::to_vec(&body)
            .map_err(|e| ModelError::Protocol(format!("cannot encode request: {e}")))?;
        let max_retries = self.provider.max_retries;
        let mut response = self
            .provider
            .send_with_retries(&self.endpoint, Bytes::from(body), max_retries, cancel)
            .await?;
        let mut raw = Vec::new();
        loop {
            let chunk = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(ModelError::Cancelled),
                chunk = tokio::time::timeout(self.provider.idle_timeout, response.chunk()) => chunk,
            };
            match chunk {
                Err(_) => {
                    let msg = format!("no data within {:?}", self.provider.idle_timeout);
                    return Err(ModelError::Timeout(msg));
                }
                Ok(Err(e)) => return Err(ModelError::Connect(describe(&e.without_url()))),
                Ok(Ok(None)) => break,
                Ok(Ok(Some(bytes))) => {
                    raw.extend_from_slice(&bytes);
                    if raw.len() > MAX_BODY {
                        return Err(ModelError::Protocol(format!(
                            "embeddings response larger than {MAX_BODY} bytes"
                        )));
                    }
                }
            }
        }
        let parsed: Response = serde_json::from_slice(&raw).map_err(|e| {
            ModelError::Protocol(format!(
                "unreadable embeddings response ({e}): {}",
                super::preview(&String::from_utf8_lossy(&raw))
            ))
        })?;
        order(parsed.data, texts.len())
    }
}

/// The vectors in input order, checked: one per input, one dimension, finite values.
fn order(data: Vec<Datum>, inputs: usize) -> Result<Vec<Vec<f32>>, ModelError> {
    let bad = |why: String| Err(ModelError::Protocol(format!("embeddings response: {why}")));
    if data.len() != inputs {
        return bad(format!("{} vectors for {inputs} inputs", data.len()));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; inputs];
    for (i, datum) in data.into_iter().enumerate() {
        let at = datum.index.unwrap_or(i);
        match out.get_mut(at) {
            Some(slot @ None) => *slot = Some(datum.embedding),
            _ => return bad(format!("index {at} out of range or repeated")),
        }
    }
    let out: Vec<Vec<f32>> = out.into_iter().flatten().collect();
    let dim = out.first().map_or(0, Vec::len);
    if dim == 0 || out.iter().any(|v| v.len() != dim) {
        return bad("vectors are empty or of different dimensions".into());
    }
    if out.iter().flatten().any(|x| !x.is_finite()) {
        return bad("a vector holds a non-finite value".into());
    }
    Ok(out)
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn name(&self) -> &str {
        &self.label
    }

    async fn embed(
        &self,
        texts: Vec<String>,
        cancel: CancellationToken,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(MAX_BATCH) {
            vectors.extend(self.embed_batch(batch, &cancel).await?);
        }
        Ok(vectors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn datum(index: Option<usize>, embedding: Vec<f32>) -> Datum {
        Datum { index, embedding }
    }

    #[test]
    fn vectors_come_back_in_input_order_and_are_checked() {
        let data = vec![datum(Some(1), vec![2.0]), datum(Some(0), vec![1.0])];
        assert_eq!(order(data, 2).unwrap(), vec![vec![1.0], vec![2.0]]);
        assert!(order(vec![datum(None, vec![1.0])], 2).is_err());
        let repeated = vec![datum(Some(0), vec![1.0]), datum(Some(0), vec![1.0])];
        assert!(order(repeated, 2).is_err());
        let ragged = vec![datum(None, vec![1.0]), datum(None, vec![1.0, 2.0])];
        assert!(order(ragged, 2).is_err());
        assert!(order(vec![datum(None, vec![f32::NAN])], 1).is_err());
    }
}
