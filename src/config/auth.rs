//! `[auth]`: unscoped bearer keys, tenants (keys limited to resource-id prefixes) and JWT
//! bearer tokens naming a tenant, with their start-up checks. What can only be checked with
//! the environment and files (key variables set, the JWKS readable) is checked where the keys
//! are built, [`crate::api::auth::ApiKeys::from_config`].

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::str::FromStr;

use serde::Deserialize;

use super::{ConfigError, invalid};

/// Client authentication: bearer API keys and tokens, required on the agentd services when any
/// is configured.
#[cfg_attr(test, derive(serde::Serialize))]
#[derive(Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// SHA-256 digests (hex) of unscoped keys (every resource and run), so the file holds no
    /// secret.
    pub api_key_sha256: Vec<String>,
    /// Plain unscoped keys; only from `AGENTD_API_KEYS`/`--api-keys`, never read from the file.
    #[serde(skip)]
    pub api_keys: Vec<String>,
    /// Tenants: keys (and tokens) limited to resource-id prefixes and their own runs.
    pub tenants: Vec<TenantConfig>,
    /// JWT bearer tokens whose claim names a tenant.
    pub jwt: Option<JwtConfig>,
}

/// Never prints keys: configs end up in logs and panics.
impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field(
                "api_keys",
                &format_args!("<{} redacted>", self.api_keys.len()),
            )
            .field("api_key_sha256", &self.api_key_sha256.len())
            .field("tenants", &self.tenants)
            .field("jwt", &self.jwt)
            .finish()
    }
}

/// One `[[auth.tenants]]` entry.
#[cfg_attr(test, derive(serde::Serialize))]
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TenantConfig {
    /// Unique name: letters, digits, `.`, `_`, `-`; JWTs name it in their tenant claim.
    pub name: String,
    /// A resource id is the tenant's when it starts with one of these (at least one).
    pub resource_prefixes: Vec<String>,
    /// SHA-256 digests (hex) of the tenant's keys.
    pub api_key_sha256: Vec<String>,
    /// Name of an environment variable holding plain keys of the tenant (comma-separated).
    pub api_key_env: Option<String>,
}

/// `[auth.jwt]`: bearer tokens signed by a configured key, naming a tenant in a claim.
#[cfg_attr(test, derive(serde::Serialize))]
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JwtConfig {
    /// A JSON Web Key Set file (RSA, EC, Ed25519 public keys).
    pub jwks_file: Option<PathBuf>,
    /// Seconds between checks of `jwks_file` for changes (a changed file is reloaded); 0: never.
    pub jwks_reload_secs: u64,
    /// Name of an environment variable holding an HS256 secret.
    pub hs256_secret_env: Option<String>,
    /// Required `iss` value, when set.
    pub issuer: Option<String>,
    /// Required `aud` value, when set.
    pub audience: Option<String>,
    /// The claim naming the tenant.
    pub tenant_claim: String,
    /// Accepted `alg` values; empty: every asymmetric one with `jwks_file`, HS256 with
    /// `hs256_secret_env`.
    pub algorithms: Vec<String>,
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    pub leeway_secs: u64,
}

impl Default for JwtConfig {
    fn default() -> Self {
        Self {
            jwks_file: None,
            jwks_reload_secs: 30,
            hs256_secret_env: None,
            issuer: None,
            audience: None,
            tenant_claim: "tenant".to_owned(),
            algorithms: Vec::new(),
            leeway_secs: 60,
        }
    }
}

/// Algorithms verified with a JWKS key, the default with `jwks_file`.
pub const ASYMMETRIC_ALGORITHMS: [&str; 9] = [
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
];

impl JwtConfig {
    /// The accepted algorithms: the configured ones, else the defaults of the key sources.
    pub fn algorithms(&self) -> Vec<jsonwebtoken::Algorithm> {
        let names: Vec<&str> = if self.algorithms.is_empty() {
            let mut names = Vec::new();
            if self.jwks_file.is_some() {
                names.extend(ASYMMETRIC_ALGORITHMS);
            }
            if self.hs256_secret_env.is_some() {
                names.push("HS256");
            }
            names
        } else {
            self.algorithms.iter().map(String::as_str).collect()
        };
        names
            .into_iter()
            .filter_map(|n| jsonwebtoken::Algorithm::from_str(n).ok())
            .collect()
    }

    fn validate(&self, tenants: usize) -> Result<(), ConfigError> {
        if tenants == 0 {
            return Err(invalid(
                "auth.jwt needs [[auth.tenants]]: a token is accepted only when its claim names a configured tenant",
            ));
        }
        if self.jwks_file.is_none() && self.hs256_secret_env.is_none() {
            return Err(invalid(
                "auth.jwt: set jwks_file and / or hs256_secret_env (the keys tokens are verified with)",
            ));
        }
        if self.hs256_secret_env.as_deref().is_some_and(str::is_empty) {
            return Err(invalid(
                "auth.jwt.hs256_secret_env must name an environment variable",
            ));
        }
        if self.tenant_claim.trim().is_empty() {
            return Err(invalid("auth.jwt.tenant_claim must not be empty"));
        }
        for name in &self.algorithms {
            let hmac = name == "HS256";
            let asymmetric = ASYMMETRIC_ALGORITHMS.contains(&name.as_str());
            if !hmac && !asymmetric {
                return Err(invalid(&format!(
                    "auth.jwt.algorithms: {name:?} is not one of HS256, {}",
                    ASYMMETRIC_ALGORITHMS.join(", ")
                )));
            }
            if hmac && self.hs256_secret_env.is_none() {
                return Err(invalid(
                    "auth.jwt.algorithms: HS256 needs auth.jwt.hs256_secret_env",
                ));
            }
            if asymmetric && self.jwks_file.is_none() {
                return Err(invalid(&format!(
                    "auth.jwt.algorithms: {name} needs auth.jwt.jwks_file"
                )));
            }
        }
        Ok(())
    }
}

/// True when `name` is a usable tenant name.
fn valid_tenant_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A digest as 32 bytes, or the error naming its key.
pub(crate) fn parse_digest(key: &str, hex_digest: &str) -> Result<[u8; 32], String> {
    hex::decode(hex_digest.trim())
        .ok()
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .ok_or_else(|| format!("{key}: {hex_digest:?} is not 64 hex digits"))
}

impl AuthConfig {
    /// True when calls must authenticate (any key, tenant or token source configured).
    pub fn required(&self) -> bool {
        !self.api_key_sha256.is_empty()
            || !self.api_keys.is_empty()
            || !self.tenants.is_empty()
            || self.jwt.is_some()
    }

    /// Checks what the file and overrides say: digests, tenant names and prefixes, a key under
    /// one owner only, the JWT settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        // Which owner each digest has: "" for the unscoped list, else the tenant's name.
        let mut owners: HashMap<[u8; 32], String> = HashMap::new();
        for d in &self.api_key_sha256 {
            let digest = parse_digest("auth.api_key_sha256", d).map_err(ConfigError::Invalid)?;
            owners.insert(digest, String::new());
        }
        let mut names = HashSet::new();
        for (i, tenant) in self.tenants.iter().enumerate() {
            let name = &tenant.name;
            if !valid_tenant_name(name) {
                return Err(invalid(&format!(
                    "auth.tenants[{i}].name must be 1 to 64 letters, digits, '.', '_' or '-', got {name:?}"
                )));
            }
            if !names.insert(name.as_str()) {
                return Err(invalid(&format!(
                    "auth.tenants[{i}].name: tenant {name:?} is declared twice"
                )));
            }
            let key = format!("auth.tenants[{name}]");
            if tenant.resource_prefixes.is_empty() {
                return Err(invalid(&format!(
                    "{key}.resource_prefixes must list at least one prefix (a tenant reaching no resource is refused, not assumed)"
                )));
            }
            for prefix in &tenant.resource_prefixes {
                if prefix.is_empty() || prefix.chars().any(char::is_control) {
                    return Err(invalid(&format!(
                        "{key}.resource_prefixes: {prefix:?} must be non-empty text without control characters (an unscoped key reaches every resource)"
                    )));
                }
            }
            for d in &tenant.api_key_sha256 {
                let digest = parse_digest(&format!("{key}.api_key_sha256"), d)
                    .map_err(ConfigError::Invalid)?;
                if let Some(other) = owners.insert(digest, name.clone()) {
                    let other = if other.is_empty() {
                        "auth.api_key_sha256".to_owned()
                    } else {
                        format!("auth.tenants[{other}]")
                    };
                    return Err(invalid(&format!(
                        "{key}.api_key_sha256: {d:?} is also a key of {other}; a key has one owner"
                    )));
                }
            }
            if tenant.api_key_env.as_deref().is_some_and(str::is_empty) {
                return Err(invalid(&format!(
                    "{key}.api_key_env must name an environment variable"
                )));
            }
            let keyless = tenant.api_key_sha256.is_empty() && tenant.api_key_env.is_none();
            if keyless && self.jwt.is_none() {
                return Err(invalid(&format!(
                    "{key} has no api_key_sha256 nor api_key_env, and no [auth.jwt] is configured: nothing could authenticate as it"
                )));
            }
        }
        if let Some(jwt) = &self.jwt {
            jwt.validate(self.tenants.len())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    const DIGEST_A: &str = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";
    const DIGEST_B: &str = "fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9";

    fn check(toml: &str) -> Result<(), String> {
        let config = Config::from_toml(toml).map_err(|e| e.to_string())?;
        config.validate().map_err(|e| e.to_string())
    }

    fn refused(toml: &str, naming: &str) {
        let err = check(toml).expect_err("refused");
        assert!(err.contains(naming), "{err}");
    }

    #[test]
    fn tenants_with_keys_and_prefixes_are_accepted() {
        let toml = format!(
            r#"
[auth]
api_key_sha256 = ["{DIGEST_A}"]
[[auth.tenants]]
name = "acme"
resource_prefixes = ["acme/"]
api_key_sha256 = ["{DIGEST_B}"]
[[auth.tenants]]
name = "globex.eu-1"
resource_prefixes = ["globex/", "gx-"]
api_key_env = "GLOBEX_KEYS"
"#
        );
        check(&toml).expect("valid");
        let config = Config::from_toml(&toml).expect("parses");
        assert!(config.auth.required());
        assert_eq!(config.auth.tenants[1].resource_prefixes.len(), 2);
        assert!(!AuthConfig::default().required());
    }

    #[test]
    fn duplicate_and_malformed_tenant_names_are_refused() {
        let tenant = |name: &str| {
            format!(
                "[[auth.tenants]]\nname = \"{name}\"\nresource_prefixes = [\"x/\"]\napi_key_env = \"K\"\n"
            )
        };
        refused(
            &format!("{}{}", tenant("acme"), tenant("acme")),
            "auth.tenants[1].name: tenant \"acme\" is declared twice",
        );
        refused(&tenant(""), "auth.tenants[0].name must be");
        refused(&tenant("a b"), "auth.tenants[0].name must be");
    }

    #[test]
    fn prefixes_must_be_listed_and_non_empty() {
        refused(
            "[[auth.tenants]]\nname = \"acme\"\napi_key_env = \"K\"\n",
            "auth.tenants[acme].resource_prefixes must list at least one prefix",
        );
        refused(
            "[[auth.tenants]]\nname = \"acme\"\nresource_prefixes = [\"\"]\napi_key_env = \"K\"\n",
            "auth.tenants[acme].resource_prefixes: \"\" must be non-empty",
        );
    }

    #[test]
    fn a_digest_has_one_owner() {
        refused(
            &format!(
                "[auth]\napi_key_sha256 = [\"{DIGEST_A}\"]\n[[auth.tenants]]\nname = \"acme\"\nresource_prefixes = [\"a/\"]\napi_key_sha256 = [\"{DIGEST_A}\"]\n"
            ),
            "auth.tenants[acme].api_key_sha256: \"2c26",
        );
        refused(
            &format!(
                "[[auth.tenants]]\nname = \"acme\"\nresource_prefixes = [\"a/\"]\napi_key_sha256 = [\"{DIGEST_B}\"]\n[[auth.tenants]]\nname = \"globex\"\nresource_prefixes = [\"g/\"]\napi_key_sha256 = [\"{DIGEST_B}\"]\n"
            ),
            "is also a key of auth.tenants[acme]",
        );
        refused(
            "[[auth.tenants]]\nname = \"acme\"\nresource_prefixes = [\"a/\"]\napi_key_sha256 = [\"zz\"]\n",
            "auth.tenants[acme].api_key_sha256: \"zz\" is not 64 hex digits",
        );
    }

    #[test]
    fn a_tenant_needs_a_way_in() {
        refused(
            "[[auth.tenants]]\nname = \"acme\"\nresource_prefixes = [\"a/\"]\n",
            "auth.tenants[acme] has no api_key_sha256 nor api_key_env",
        );
        refused(
            "[[auth.tenants]]\nname = \"acme\"\nresource_prefixes = [\"a/\"]\napi_key_env = \"\"\n",
            "auth.tenants[acme].api_key_env must name",
        );
        // Tokens are a way in.
        check(
            "[[auth.tenants]]\nname = \"acme\"\nresource_prefixes = [\"a/\"]\n[auth.jwt]\njwks_file = \"/etc/agentd/jwks.json\"\n",
        )
        .expect("valid");
    }

    #[test]
    fn jwt_settings_are_checked() {
        let tenant = "[[auth.tenants]]\nname = \"acme\"\nresource_prefixes = [\"a/\"]\n";
        refused(
            "[auth.jwt]\njwks_file = \"j.json\"\n",
            "auth.jwt needs [[auth.tenants]]",
        );
        refused(
            &format!("{tenant}[auth.jwt]\nissuer = \"i\"\n"),
            "auth.jwt: set jwks_file and / or hs256_secret_env",
        );
        refused(
            &format!("{tenant}[auth.jwt]\njwks_file = \"j.json\"\nalgorithms = [\"none\"]\n"),
            "auth.jwt.algorithms: \"none\" is not one of",
        );
        refused(
            &format!("{tenant}[auth.jwt]\njwks_file = \"j.json\"\nalgorithms = [\"HS256\"]\n"),
            "HS256 needs auth.jwt.hs256_secret_env",
        );
        refused(
            &format!("{tenant}[auth.jwt]\nhs256_secret_env = \"S\"\nalgorithms = [\"ES256\"]\n"),
            "ES256 needs auth.jwt.jwks_file",
        );
        refused(
            &format!("{tenant}[auth.jwt]\nhs256_secret_env = \"S\"\ntenant_claim = \" \"\n"),
            "auth.jwt.tenant_claim must not be empty",
        );
        refused(
            &format!("{tenant}[auth.jwt]\nhs256_secret_env = \"S\"\nfoo = 1\n"),
            "unknown field `foo`",
        );
    }

    #[test]
    fn default_algorithms_follow_the_key_sources() {
        use jsonwebtoken::Algorithm;
        let jwks = JwtConfig {
            jwks_file: Some("j.json".into()),
            ..JwtConfig::default()
        };
        assert!(jwks.algorithms().contains(&Algorithm::ES256));
        assert!(!jwks.algorithms().contains(&Algorithm::HS256));
        let secret = JwtConfig {
            hs256_secret_env: Some("S".into()),
            ..JwtConfig::default()
        };
        assert_eq!(secret.algorithms(), vec![Algorithm::HS256]);
        let pinned = JwtConfig {
            algorithms: vec!["ES256".into()],
            ..jwks
        };
        assert_eq!(pinned.algorithms(), vec![Algorithm::ES256]);
    }
}
