//! Browser and curl access on the gRPC port: gRPC-web, the JSON mapping, CORS, the playground.

use serde::Deserialize;

use super::{ConfigError, invalid};

/// Which HTTP front ends share the gRPC port, and the origins browsers may call from.
#[cfg_attr(test, derive(serde::Serialize))]
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebConfig {
    /// gRPC-web (over HTTP/1.1 and HTTP/2), for browser clients.
    pub grpc_web: bool,
    /// The JSON mapping of every RPC (`POST /{service}/{method}`) and `/openapi.json`.
    pub json: bool,
    /// Origins allowed to call from a browser (CORS), e.g. `https://app.example.com`, or `*`
    /// for any. Empty: no CORS headers, so browsers allow same-origin pages only.
    pub cors_allowed_origins: Vec<String>,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            grpc_web: true,
            json: true,
            cors_allowed_origins: Vec::new(),
        }
    }
}

impl WebConfig {
    /// Whether anything but HTTP/2 gRPC is served (the server then also accepts HTTP/1.1).
    pub fn http1(&self) -> bool {
        self.grpc_web || self.json
    }

    /// Checks each origin: `*` alone, or `scheme://host[:port]` with nothing after it.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let origins = &self.cors_allowed_origins;
        if origins.iter().any(|o| o == "*") && origins.len() > 1 {
            return Err(invalid(
                "web.cors_allowed_origins: \"*\" allows every origin and cannot be combined with others",
            ));
        }
        for (i, origin) in origins.iter().enumerate() {
            if origin != "*" && !is_origin(origin) {
                return Err(invalid(&format!(
                    "web.cors_allowed_origins[{i}]: {origin:?} is not an origin such as https://app.example.com (scheme and host, no path)"
                )));
            }
        }
        Ok(())
    }
}

/// The web playground agentd serves at `/` (off by default: a page anyone reaching the port can
/// open, though every call it makes still needs the API key when keys are configured).
#[cfg_attr(test, derive(serde::Serialize))]
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlaygroundConfig {
    /// Serve the playground at `/` on the gRPC port.
    pub enabled: bool,
}

impl PlaygroundConfig {
    /// The playground talks to the JSON mapping, so it needs it on.
    pub fn validate(&self, web: &WebConfig) -> Result<(), ConfigError> {
        if self.enabled && !web.json {
            return Err(invalid(
                "playground.enabled: the playground calls the JSON mapping; set web.json = true (or AGENTD_JSON_API=true)",
            ));
        }
        Ok(())
    }
}

/// `http(s)://host[:port]`, the form browsers send in `Origin`.
fn is_origin(text: &str) -> bool {
    let Some(authority) = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
    else {
        return false;
    };
    !authority.is_empty()
        && !authority.contains(['/', '?', '#', '@'])
        && authority.parse::<http::uri::Authority>().is_ok()
        && http::HeaderValue::from_str(text).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(origins: &[&str]) -> WebConfig {
        WebConfig {
            cors_allowed_origins: origins.iter().map(|o| (*o).to_owned()).collect(),
            ..WebConfig::default()
        }
    }

    #[test]
    fn origins_are_checked_by_name() {
        assert!(
            with(&["https://app.example.com", "http://localhost:5173"])
                .validate()
                .is_ok()
        );
        assert!(with(&["*"]).validate().is_ok());
        for (bad, index) in [
            (&["https://ok.example", "app.example.com"][..], "[1]"),
            (&["https://app.example.com/path"][..], "[0]"),
            (&["ftp://x"][..], "[0]"),
        ] {
            let err = with(bad).validate().unwrap_err().to_string();
            assert!(
                err.contains(&format!("web.cors_allowed_origins{index}")),
                "{err}"
            );
        }
        assert!(with(&["*", "https://a.example"]).validate().is_err());
    }

    #[test]
    fn the_playground_needs_the_json_mapping() {
        let on = PlaygroundConfig { enabled: true };
        assert!(on.validate(&WebConfig::default()).is_ok());
        let no_json = WebConfig {
            json: false,
            ..WebConfig::default()
        };
        let err = on.validate(&no_json).unwrap_err().to_string();
        assert!(err.contains("playground.enabled"), "{err}");
        assert!(PlaygroundConfig::default().validate(&no_json).is_ok());
    }
}
