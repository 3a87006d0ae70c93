//! JWT bearer tokens (`[auth.jwt]`): the signature checked against a JWKS file's public keys
//! or an HS256 secret, `exp` (required) and `nbf` with some leeway, `iss` and `aud` when
//! configured, and a claim naming the tenant. CPU only: the keys are in memory, and a changed
//! JWKS file is picked up by a background task, never on the call's path.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation};
use serde_json::{Map, Value};
use tonic::Status;
use tracing::{info, warn};

use crate::config::JwtConfig;

/// One public key of the JWKS.
struct PublicKey {
    /// `kid`, when the key has one.
    kid: Option<String>,
    /// `alg`, when the key pins one.
    alg: Option<Algorithm>,
    key: DecodingKey,
}

/// Verifies bearer tokens; see the [module docs](self).
pub struct JwtVerifier {
    jwks: RwLock<Arc<Vec<PublicKey>>>,
    jwks_file: Option<PathBuf>,
    reload_every: Option<Duration>,
    hmac: Option<DecodingKey>,
    /// One validation per accepted algorithm: the crate wants every algorithm of a
    /// validation in the family of the key it verifies with.
    validations: Vec<(Algorithm, Validation)>,
    tenant_claim: String,
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("jwks_file", &self.jwks_file)
            .field(
                "algorithms",
                &self.validations.iter().map(|(a, _)| a).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl JwtVerifier {
    /// A verifier for `config`: reads the JWKS file and the secret's variable now, and fails
    /// naming the setting when either is missing or unusable.
    pub fn new(config: &JwtConfig) -> Result<Self, String> {
        let jwks = match &config.jwks_file {
            Some(path) => read_jwks(path)?,
            None => Vec::new(),
        };
        let hmac = match &config.hs256_secret_env {
            Some(var) => {
                let secret = std::env::var(var).map_err(|_| {
                    format!("auth.jwt.hs256_secret_env: environment variable {var} is not set")
                })?;
                if secret.len() < 32 {
                    return Err(format!(
                        "auth.jwt.hs256_secret_env: the secret in {var} must be at least 32 bytes"
                    ));
                }
                Some(DecodingKey::from_secret(secret.as_bytes()).map_err(|e| {
                    format!("auth.jwt.hs256_secret_env: unusable secret in {var}: {e}")
                })?)
            }
            None => None,
        };
        let mut validation = Validation::new(Algorithm::RS256);
        validation.leeway = config.leeway_secs;
        validation.validate_nbf = true;
        let mut required = vec!["exp"];
        if let Some(issuer) = &config.issuer {
            validation.set_issuer(&[issuer]);
            required.push("iss");
        }
        match &config.audience {
            Some(audience) => {
                validation.set_audience(&[audience]);
                required.push("aud");
            }
            // Nothing to compare with: an `aud` in the token is not this server's to judge.
            None => validation.validate_aud = false,
        }
        validation.set_required_spec_claims(&required);
        let validations = config
            .algorithms()
            .into_iter()
            .map(|alg| {
                let mut v = validation.clone();
                v.algorithms = vec![alg];
                (alg, v)
            })
            .collect();
        Ok(Self {
            jwks: RwLock::new(Arc::new(jwks)),
            jwks_file: config.jwks_file.clone(),
            reload_every: (config.jwks_reload_secs > 0)
                .then(|| Duration::from_secs(config.jwks_reload_secs)),
            hmac,
            validations,
            tenant_claim: config.tenant_claim.clone(),
        })
    }

    /// Reloads the JWKS file in the background when it changes, as long as `this` lives.
    pub fn watch(this: &Arc<Self>) {
        let (Some(path), Some(every)) = (this.jwks_file.clone(), this.reload_every) else {
            return;
        };
        let weak: Weak<Self> = Arc::downgrade(this);
        tokio::spawn(async move {
            let mut last = tokio::fs::read(&path).await.ok();
            loop {
                tokio::time::sleep(every).await;
                let Some(verifier) = weak.upgrade() else {
                    return;
                };
                let now = tokio::fs::read(&path).await.ok();
                if now.is_none() || now == last {
                    continue;
                }
                match now.as_deref().map(parse_jwks).transpose() {
                    Ok(Some(keys)) => {
                        info!(file = %path.display(), keys = keys.len(), "JWKS reloaded");
                        if let Ok(mut jwks) = verifier.jwks.write() {
                            *jwks = Arc::new(keys);
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        warn!(file = %path.display(), error = %e, "JWKS changed but cannot be used; keeping the previous keys")
                    }
                }
                last = now;
            }
        });
    }

    /// The tenant a valid token names; UNAUTHENTICATED saying why otherwise.
    pub fn tenant_of(&self, token: &str) -> Result<String, Status> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| Status::unauthenticated("invalid bearer token"))?;
        let Some((_, validation)) = self.validations.iter().find(|(a, _)| *a == header.alg) else {
            return Err(Status::unauthenticated(format!(
                "token algorithm {:?} is not accepted",
                header.alg
            )));
        };
        let family = header.alg.family();
        let jwks = self.jwks.read().map(|k| k.clone()).unwrap_or_default();
        let candidates: Vec<&DecodingKey> = if family == AlgorithmFamily::Hmac {
            self.hmac.iter().collect()
        } else {
            jwks.iter()
                .filter(|k| header.kid.is_none() || k.kid == header.kid)
                .filter(|k| k.key.family() == family && k.alg.is_none_or(|a| a == header.alg))
                .map(|k| &k.key)
                .collect()
        };
        if candidates.is_empty() {
            return Err(Status::unauthenticated(match &header.kid {
                Some(kid) => format!("no configured key has id {kid:?} for {:?}", header.alg),
                None => format!("no configured key verifies {:?}", header.alg),
            }));
        }
        let mut claims = None;
        for key in candidates {
            match jsonwebtoken::decode::<Map<String, Value>>(token, key, validation) {
                Ok(data) => {
                    claims = Some(data.claims);
                    break;
                }
                Err(e) if matches!(e.kind(), ErrorKind::InvalidSignature) => {}
                Err(e) => return Err(rejected(e.kind())),
            }
        }
        let claims =
            claims.ok_or_else(|| Status::unauthenticated("token signature does not verify"))?;
        match claims.get(&self.tenant_claim) {
            Some(Value::String(tenant)) if !tenant.is_empty() => Ok(tenant.clone()),
            _ => Err(Status::unauthenticated(format!(
                "token has no {:?} claim naming a tenant",
                self.tenant_claim
            ))),
        }
    }
}

/// Why a token whose signature verified is refused.
fn rejected(kind: &ErrorKind) -> Status {
    Status::unauthenticated(match kind {
        ErrorKind::ExpiredSignature => "token has expired".to_owned(),
        ErrorKind::ImmatureSignature => "token is not valid yet (nbf)".to_owned(),
        ErrorKind::InvalidIssuer => "token issuer is not accepted".to_owned(),
        ErrorKind::InvalidAudience => "token audience is not accepted".to_owned(),
        ErrorKind::MissingRequiredClaim(claim) => format!("token has no {claim:?} claim"),
        ErrorKind::InvalidClaimFormat(claim) => format!("token claim {claim:?} is malformed"),
        ErrorKind::InvalidAlgorithm => "token algorithm does not match its key".to_owned(),
        _ => "invalid bearer token".to_owned(),
    })
}

fn read_jwks(path: &Path) -> Result<Vec<PublicKey>, String> {
    let bytes = std::fs::read(path)
        .map_err(|e| format!("auth.jwt.jwks_file: cannot read {}: {e}", path.display()))?;
    parse_jwks(&bytes).map_err(|e| format!("auth.jwt.jwks_file: {}: {e}", path.display()))
}

/// The public keys of a JWKS document; symmetric (`oct`) keys are refused: a key file is not
/// the place for a secret.
fn parse_jwks(bytes: &[u8]) -> Result<Vec<PublicKey>, String> {
    let set: JwkSet =
        serde_json::from_slice(bytes).map_err(|e| format!("not a JSON Web Key Set: {e}"))?;
    let mut keys = Vec::with_capacity(set.keys.len());
    for (i, jwk) in set.keys.iter().enumerate() {
        if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
            return Err(format!(
                "keys[{i}] is a symmetric (oct) key; use hs256_secret_env for a shared secret"
            ));
        }
        let key = DecodingKey::from_jwk(jwk).map_err(|e| format!("keys[{i}]: {e}"))?;
        let alg = match jwk.common.key_algorithm {
            Some(alg) => Some(
                Algorithm::try_from(alg)
                    .map_err(|e| format!("keys[{i}].alg is not a signing algorithm: {e}"))?,
            ),
            None => None,
        };
        keys.push(PublicKey {
            kid: jwk.common.key_id.clone(),
            alg,
            key,
        });
    }
    if keys.is_empty() {
        return Err("it holds no key".to_owned());
    }
    Ok(keys)
}
