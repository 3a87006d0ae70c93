//! Optional bearer authentication for the agentd services, checked by
//! [`RpcLayer`](super::layer::RpcLayer) (health and reflection stay open so probes and grpcurl
//! discovery work without credentials). A call's credential resolves, in memory, to the
//! [`Identity`] its handlers scope data by: unscoped keys reach everything, a tenant's keys and
//! tokens only its resources and runs.

use std::sync::Arc;

use http::HeaderMap;
use sha2::{Digest, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};
use tonic::Status;

use super::jwt::JwtVerifier;
use crate::config::{AuthConfig, parse_digest};
use crate::tenant::{Identity, Tenant};

/// Accepted API keys (kept only as SHA-256 digests, each with the identity it stands for) and
/// JWT bearer tokens.
#[derive(Clone, Debug, Default)]
pub struct ApiKeys {
    /// Digests and the index in `identities` of their owner.
    digests: Arc<Vec<([u8; 32], u32)>>,
    /// Index 0 is [`Identity::Unscoped`], then one per tenant in config order.
    identities: Arc<Vec<Identity>>,
    jwt: Option<Arc<JwtVerifier>>,
}

impl ApiKeys {
    /// Unscoped keys from plain values and hex SHA-256 digests; an invalid digest is an error
    /// naming it.
    pub fn new<'a>(
        plain: impl IntoIterator<Item = &'a str>,
        sha256_hex: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, String> {
        let mut keys = Self {
            identities: Arc::new(vec![Identity::Unscoped]),
            ..Self::default()
        };
        let digests = Arc::make_mut(&mut keys.digests);
        add_plain(digests, plain, 0);
        for hex_digest in sha256_hex {
            digests.push((parse_digest("auth.api_key_sha256", hex_digest)?, 0));
        }
        Ok(keys)
    }

    /// Every key, tenant and token source of `[auth]`, with the environment's plain keys:
    /// fails naming the setting when a variable is unset, a key has two owners or the JWKS
    /// cannot be used.
    pub fn from_config(auth: &AuthConfig) -> Result<Self, String> {
        auth.validate().map_err(|e| e.to_string())?;
        let mut keys = Self::new(
            auth.api_keys.iter().map(String::as_str),
            auth.api_key_sha256.iter().map(String::as_str),
        )?;
        let digests = Arc::make_mut(&mut keys.digests);
        let identities = Arc::make_mut(&mut keys.identities);
        for tenant in &auth.tenants {
            let index = u32::try_from(identities.len()).map_err(|_| "too many tenants")?;
            identities.push(Identity::Tenant(Arc::new(Tenant {
                name: tenant.name.clone(),
                resource_prefixes: tenant.resource_prefixes.clone(),
            })));
            let key = format!("auth.tenants[{}]", tenant.name);
            for d in &tenant.api_key_sha256 {
                digests.push((parse_digest(&format!("{key}.api_key_sha256"), d)?, index));
            }
            if let Some(var) = &tenant.api_key_env {
                let plain = std::env::var(var).map_err(|_| {
                    format!("{key}.api_key_env: environment variable {var} is not set")
                })?;
                add_plain(digests, plain.split(','), index);
            }
        }
        // Plain keys are only seen here: the file's digests were checked by `validate`.
        let mut owners = std::collections::HashMap::new();
        for (digest, owner) in digests.iter() {
            if let Some(other) = owners.insert(*digest, *owner)
                && other != *owner
            {
                return Err(format!(
                    "auth: one key belongs to both {} and {}; a key has one owner",
                    owner_name(identities, other),
                    owner_name(identities, *owner)
                ));
            }
        }
        if let Some(jwt) = &auth.jwt {
            keys.jwt = Some(Arc::new(JwtVerifier::new(jwt)?));
        }
        Ok(keys)
    }

    /// Starts the background reload of the JWKS file, when one is configured to be watched.
    pub fn watch_jwks(&self) {
        if let Some(jwt) = &self.jwt {
            JwtVerifier::watch(jwt);
        }
    }

    /// True when keys or tokens are configured (and so required).
    pub fn enabled(&self) -> bool {
        !self.digests.is_empty() || self.jwt.is_some()
    }

    /// Checks the `authorization: Bearer <key or token>` header of a call and says who makes
    /// it; with nothing configured every call is [`Identity::Unscoped`].
    pub fn identify(&self, headers: &HeaderMap) -> Result<Identity, Status> {
        if !self.enabled() {
            return Ok(Identity::Unscoped);
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
        // which bytes matched nor which key did. Owners are numbered from 1 here; 0: no match.
        let mut found = 0u32;
        for (d, owner) in self.digests.iter() {
            found.conditional_assign(&(owner + 1), d.ct_eq(&presented));
        }
        if let Some(identity) = found
            .checked_sub(1)
            .and_then(|i| self.identities.get(i as usize))
        {
            return Ok(identity.clone());
        }
        match &self.jwt {
            Some(jwt) if looks_like_jwt(key) => {
                let tenant = jwt.tenant_of(key)?;
                self.identities
                    .iter()
                    .find(|i| i.tenant() == Some(tenant.as_str()))
                    .cloned()
                    .ok_or_else(|| {
                        Status::unauthenticated(format!(
                            "token names tenant {tenant:?}, which is not configured"
                        ))
                    })
            }
            _ => Err(Status::unauthenticated("invalid API key")),
        }
    }
}

/// Three base64url parts separated by dots.
fn looks_like_jwt(value: &str) -> bool {
    value.split('.').count() == 3
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn add_plain<'a>(
    digests: &mut Vec<([u8; 32], u32)>,
    plain: impl IntoIterator<Item = &'a str>,
    owner: u32,
) {
    digests.extend(
        plain
            .into_iter()
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(|k| (digest(k), owner)),
    );
}

fn owner_name(identities: &[Identity], index: u32) -> String {
    match identities.get(index as usize).and_then(Identity::tenant) {
        Some(name) => format!("auth.tenants[{name}]"),
        None => "the unscoped keys (auth.api_key_sha256 / AGENTD_API_KEYS)".to_owned(),
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
        let identity = ApiKeys::default().identify(&request(None)).unwrap();
        assert_eq!(identity, Identity::Unscoped);
    }

    #[test]
    fn plain_and_hashed_keys_are_accepted() {
        let hashed = hex::encode(digest("second"));
        let keys = ApiKeys::new(["first", " "], [hashed.as_str()]).unwrap();
        assert!(keys.identify(&request(Some("Bearer first"))).is_ok());
        assert!(keys.identify(&request(Some("Bearer second"))).is_ok());
        let wrong = keys.identify(&request(Some("Bearer third"))).unwrap_err();
        assert_eq!(wrong.code(), tonic::Code::Unauthenticated);
        let missing = keys.identify(&request(None)).unwrap_err();
        assert_eq!(missing.code(), tonic::Code::Unauthenticated);
    }

    #[test]
    fn bad_digest_is_rejected() {
        let err = ApiKeys::new([], ["zz"]).unwrap_err();
        assert!(err.contains("auth.api_key_sha256"), "{err}");
    }

    fn tenants() -> AuthConfig {
        let toml = format!(
            "[[auth.tenants]]\nname = \"acme\"\nresource_prefixes = [\"acme/\"]\napi_key_sha256 = [\"{}\"]\n",
            hex::encode(digest("acme-key"))
        );
        let mut config = crate::config::Config::from_toml(&toml).unwrap();
        config.auth.api_keys = vec!["root".into()];
        config.auth
    }

    #[test]
    fn keys_resolve_to_their_owner() {
        let keys = ApiKeys::from_config(&tenants()).unwrap();
        assert!(keys.enabled());
        let acme = keys.identify(&request(Some("Bearer acme-key"))).unwrap();
        assert_eq!(acme.tenant(), Some("acme"));
        assert!(acme.allows_resource("acme/1") && !acme.allows_resource("globex/1"));
        let root = keys.identify(&request(Some("Bearer root"))).unwrap();
        assert_eq!(root, Identity::Unscoped);
        // Shaped like a token, but no [auth.jwt]: just a wrong key.
        let token = keys.identify(&request(Some("Bearer a.b.c"))).unwrap_err();
        assert_eq!(token.message(), "invalid API key");
    }

    #[test]
    fn a_plain_key_has_one_owner_too() {
        let mut auth = tenants();
        auth.api_keys = vec!["acme-key".into()];
        let err = ApiKeys::from_config(&auth).unwrap_err();
        assert!(err.contains("belongs to both"), "{err}");
        assert!(err.contains("auth.tenants[acme]"), "{err}");
    }

    #[test]
    fn tokens_are_told_apart_from_keys() {
        assert!(looks_like_jwt("eyJh.eyJz.c2ln"));
        assert!(!looks_like_jwt("plain-key"));
        assert!(!looks_like_jwt("a.b"));
        assert!(!looks_like_jwt("a.b.c d"));
    }
}
