//! `POST /v1/embeddings` of the mock server: deterministic vectors, so that tests can predict
//! what semantic recall finds. A text's vector is a hashed bag of its words: each lower-cased
//! alphanumeric word adds ±1 to one of [`DEFAULT_DIMENSIONS`] (or the request's `dimensions`)
//! coordinates, chosen by its FNV-1a hash, and the sum is normalized. Texts sharing words are
//! similar; texts sharing none are (nearly) orthogonal. Failures can be scripted.

use std::collections::BTreeMap;
use std::sync::{Arc, MutexGuard};

use axum::extract::State;
use axum::response::Response;
use bytes::Bytes;
use http::StatusCode;
use serde_json::{Value, json};

use super::{MockOpenAi, MockState, error_response, json_response};

/// Dimensions of a vector when the request does not ask for others.
pub const DEFAULT_DIMENSIONS: usize = 256;
/// Most dimensions a request may ask for.
const MAX_DIMENSIONS: usize = 8192;

/// Requests received and failures to answer with.
#[derive(Default)]
pub(super) struct EmbeddingsState {
    requests: Vec<Value>,
    /// By the 0-based index of the request to fail.
    failures: BTreeMap<usize, (u16, String)>,
}

impl MockState {
    fn embeddings(&self) -> MutexGuard<'_, EmbeddingsState> {
        self.embeddings.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl MockOpenAi {
    /// Answers the next embeddings request with this HTTP error.
    pub fn fail_embeddings(&self, status: u16, body: &str) {
        let next = self.state.embeddings().requests.len();
        self.fail_embedding_request(next, status, body);
    }

    /// Answers the `index`-th embeddings request (0-based, counting every one received) with
    /// this HTTP error.
    pub fn fail_embedding_request(&self, index: usize, status: u16, body: &str) {
        self.state
            .embeddings()
            .failures
            .insert(index, (status, body.to_owned()));
    }

    /// Every embeddings request body received, in order.
    pub fn embedding_requests(&self) -> Vec<Value> {
        self.state.embeddings().requests.clone()
    }
}

/// The mock's vector for `text` with `dimensions` coordinates (normalized; a text without
/// words gets the first unit vector).
pub fn mock_embedding(text: &str, dimensions: usize) -> Vec<f32> {
    let dimensions = dimensions.max(1);
    let mut vector = vec![0f32; dimensions];
    let words = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty());
    for word in words {
        let hash = word
            .to_lowercase()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
        let slot = usize::try_from(hash % dimensions as u64).unwrap_or(0);
        vector[slot] += if hash >> 63 == 1 { -1.0 } else { 1.0 };
    }
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm == 0.0 {
        vector[0] = 1.0;
    } else {
        vector.iter_mut().for_each(|x| *x /= norm);
    }
    vector
}

pub(super) async fn embeddings(State(state): State<Arc<MockState>>, body: Bytes) -> Response {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error_response(StatusCode::BAD_REQUEST, &format!("invalid JSON body: {e}"));
        }
    };
    let failure = {
        let mut embeddings = state.embeddings();
        let index = embeddings.requests.len();
        embeddings.requests.push(request.clone());
        embeddings.failures.remove(&index)
    };
    if let Some((status, body)) = failure {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return error_response(status, &body);
    }
    let inputs: Vec<&str> = match &request["input"] {
        Value::String(one) => vec![one.as_str()],
        Value::Array(many) => match many.iter().map(Value::as_str).collect::<Option<_>>() {
            Some(texts) => texts,
            None => return error_response(StatusCode::BAD_REQUEST, "input must be strings"),
        },
        _ => return error_response(StatusCode::BAD_REQUEST, "input is required"),
    };
    let dimensions = match request["dimensions"].as_u64() {
        None => DEFAULT_DIMENSIONS,
        Some(d) if (1..=MAX_DIMENSIONS as u64).contains(&d) => d as usize,
        Some(_) => return error_response(StatusCode::BAD_REQUEST, "dimensions out of range"),
    };
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, text)| {
            json!({"object": "embedding", "index": index, "embedding": mock_embedding(text, dimensions)})
        })
        .collect();
    let tokens: usize = inputs.iter().map(|t| t.split_whitespace().count()).sum();
    json_response(
        StatusCode::OK,
        &json!({
            "object": "list",
            "data": data,
            "model": request["model"],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn shared_words_make_texts_similar() {
        let a = mock_embedding("The Sourdough starter needs flour", 256);
        let b = mock_embedding("feed the sourdough STARTER", 256);
        let c = mock_embedding("quarterly tax filing deadline", 256);
        assert!((cosine(&a, &a) - 1.0).abs() < 1e-5);
        assert!(cosine(&a, &b) > 0.5, "{}", cosine(&a, &b));
        assert!(cosine(&a, &c).abs() < 0.3, "{}", cosine(&a, &c));
        assert_eq!(mock_embedding("", 4), vec![1.0, 0.0, 0.0, 0.0]);
    }
}
