//! Optional bearer-key authentication for the agentd services, checked by
//! [`RpcLayer`](super::layer::RpcLayer) (health and reflection stay open so probes and grpcurl
//! discovery work without credentials).

use std::sync::Arc;

use http::HeaderMap;
use sha2::{Digest, Sha256};
use subtle::{Choice, ConstantTimeEq};
use tonic::Status;

/// Accepted API keys, kept only as SHA-256 digests.
#[derive(Clone, Debug, Default)]
pub struct ApiKeys {
    digests: Arc<Vec<[u8; 32]>>,
}

impl ApiKeys {
    /// Keys from plain values and hex SHA-256 digests; an invalid digest is an error naming it.
    pub fn new<'a>(
        plain: impl IntoIterator<Item = &'a str>,
        sha256_hex: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, String> {
        let mut digests: Vec<[u8; 32]> = plain
            .into_iter()
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(digest)
            .collect();
        for hex_digest in sha256_hex {
            let bytes = hex::decode(hex_digest.trim())
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b).ok())
                .ok_or_else(|| {
                    format!("auth.api_key_sha256: {hex_digest:?} is not 64 hex digits")
                })?;
            digests.push(bytes);
        }
        Ok(Self {
            digests: Arc::new(digests),
        })
    }

    /// True when keys are configured (and so required).
    pub fn enabled(&self) -> bool {
        !self.digests.is_empty()
    }

    /// Checks the `authorization: Bearer <key>` header of a call.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Status> {
        if !self.enabled() {
            return Ok(());
        }
        let presented = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim);
        let Some(key) = presented else {
            return Err(Status::unauthenticated(
                "missing authorization: Bearer <api key>",
            ));
        };
        let presented = digest(key);
        // Constant-time per digest, and every digest is compared, so timing reveals neither
        // which bytes matched nor which key did.
        let known = self
            .digests
            .iter()
            .fold(Choice::from(0), |found, d| found | d.ct_eq(&presented));
        if bool::from(known) {
            Ok(())
        } else {
            Err(Status::unauthenticated("invalid API key"))
        }
    }
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(auth: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(value) = auth {
            headers.insert("authorization", value.parse().unwrap());
        }
        headers
    }

    #[test]
    fn no_keys_means_open() {
        assert!(ApiKeys::default().check(&request(None)).is_ok());
    }

    #[test]
    fn plain_and_hashed_keys_are_accepted() {
        let hashed = hex::encode(digest("second"));
        let keys = ApiKeys::new(["first", " "], [hashed.as_str()]).unwrap();
        assert!(keys.check(&request(Some("Bearer first"))).is_ok());
        assert!(keys.check(&request(Some("Bearer second"))).is_ok());
        let wrong = keys.check(&request(Some("Bearer third"))).unwrap_err();
        assert_eq!(wrong.code(), tonic::Code::Unauthenticated);
        let missing = keys.check(&request(None)).unwrap_err();
        assert_eq!(missing.code(), tonic::Code::Unauthenticated);
    }

    #[test]
    fn bad_digest_is_rejected() {
        let err = ApiKeys::new([], ["zz"]).unwrap_err();
        assert!(err.contains("auth.api_key_sha256"), "{err}");
    }
}
