//! JWT bearer tokens mapped to tenants on a real server, the JWKS reload, and
//! `--check-config` reading tenant keys and the JWKS as the server would.

use std::time::Duration;

use agentd::model::MockOpenAi;
use agentd::pb;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;
use tonic::Code;

use super::calls::{bearer, clients, code, req};
use super::{SECRET, claims, ed_key, ed_token, mock_replies, now, start, write_jwks};
use crate::support;

#[tokio::test]
async fn jwt_bearer_tokens_map_to_tenants() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock_replies(&mock);
    let dir = tempfile::tempdir().expect("dir");
    let jwks = dir.path().join("jwks.json");
    let (key, jwk) = ed_key(1, "k1");
    write_jwks(&jwks, vec![jwk]);
    let server = start(&mock, dir.path(), &jwks).await;
    let threads = clients(&server).await.threads;
    let list = |token: String, resource: &str| {
        let mut threads = threads.clone();
        let request = req(
            &bearer(Some(&token)),
            pb::ListThreadsRequest {
                resource_id: resource.into(),
                ..Default::default()
            },
        );
        async move { threads.list_threads(request).await.map(drop) }
    };

    let valid = ed_token(&key, "k1", &claims("acme"));
    list(valid.clone(), "acme/1")
        .await
        .expect("a valid token is acme");
    let denied = list(valid, "globex/1").await.expect_err("not globex's");
    assert_eq!(denied.code(), Code::PermissionDenied);
    assert!(
        denied.message().contains("resource_id"),
        "{}",
        denied.message()
    );
    let hs = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims("globex"),
        &EncodingKey::from_secret(SECRET.as_bytes()).expect("key"),
    )
    .expect("sign");
    list(hs, "globex/1")
        .await
        .expect("an HS256 token is globex");

    let mut expired = claims("acme");
    expired["exp"] = json!(now() - 10);
    let mut early = claims("acme");
    early["nbf"] = json!(now() + 600);
    let mut issuer = claims("acme");
    issuer["iss"] = json!("https://evil.example.test/");
    let mut audience = claims("acme");
    audience["aud"] = json!("someone-else");
    let mut no_exp = claims("acme");
    no_exp.as_object_mut().expect("object").remove("exp");
    let mut no_tenant = claims("acme");
    no_tenant.as_object_mut().expect("object").remove("tenant");
    let (other_key, _) = ed_key(2, "k1");
    let refused = [
        (
            "expired",
            ed_token(&key, "k1", &expired),
            "token has expired",
        ),
        (
            "not yet valid",
            ed_token(&key, "k1", &early),
            "not valid yet",
        ),
        ("wrong issuer", ed_token(&key, "k1", &issuer), "issuer"),
        (
            "wrong audience",
            ed_token(&key, "k1", &audience),
            "audience",
        ),
        ("no exp", ed_token(&key, "k1", &no_exp), "\"exp\""),
        (
            "bad signature",
            ed_token(&other_key, "k1", &claims("acme")),
            "signature",
        ),
        (
            "unknown kid",
            ed_token(&key, "k9", &claims("acme")),
            "\"k9\"",
        ),
        (
            "unknown tenant",
            ed_token(&key, "k1", &claims("initech")),
            "\"initech\"",
        ),
        (
            "no tenant claim",
            ed_token(&key, "k1", &no_tenant),
            "\"tenant\" claim",
        ),
    ];
    for (case, token, says) in refused {
        let status = list(token, "acme/1").await.expect_err(case);
        assert_eq!(status.code(), Code::Unauthenticated, "{case}");
        assert!(
            status.message().contains(says),
            "{case}: {}",
            status.message()
        );
    }
    // A tampered payload breaks the signature.
    let token = ed_token(&key, "k1", &claims("acme"));
    let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
    parts[1] = {
        use base64::Engine;
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        engine.encode(claims("globex").to_string())
    };
    let status = list(parts.join("."), "globex/1")
        .await
        .expect_err("tampered");
    assert_eq!(status.code(), Code::Unauthenticated);

    // A new key in the JWKS file is picked up without a restart.
    let (new_key, new_jwk) = ed_key(3, "k2");
    let fresh = ed_token(&new_key, "k2", &claims("acme"));
    assert_eq!(
        code(list(fresh.clone(), "acme/1").await),
        Code::Unauthenticated
    );
    write_jwks(&jwks, vec![ed_key(1, "k1").1, new_jwk]);
    let reloaded = support::eventually(Duration::from_secs(20), || {
        let attempt = list(fresh.clone(), "acme/1");
        async move { attempt.await.is_ok() }
    })
    .await;
    assert!(reloaded, "the reloaded JWKS verifies the new key");
    server.stop().await.expect("stop");
}

/// `agentd --check-config` on `config` with only `env` among the variables this file names.
fn check_config(config: &str, env: &[(&str, &str)]) -> (bool, String) {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("agentd.toml");
    std::fs::write(&path, config).expect("write config");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_agentd"));
    command.arg("--check-config").arg("--config").arg(&path);
    for (_, name) in agentd::config::OVERRIDES {
        command.env_remove(name);
    }
    command
        .env_remove("CHECK_ACME_KEYS")
        .env_remove("CHECK_GLOBEX_KEYS");
    let out = command
        .envs(env.iter().copied())
        .output()
        .expect("agentd runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_config_reads_tenant_keys_and_the_jwks_as_the_server_would() {
    let tenants = "[[auth.tenants]]\nname = \"acme\"\nresource_prefixes = [\"acme/\"]\napi_key_env = \"CHECK_ACME_KEYS\"\n\
                   [[auth.tenants]]\nname = \"globex\"\nresource_prefixes = [\"globex/\"]\napi_key_env = \"CHECK_GLOBEX_KEYS\"\n";
    let both = [("CHECK_ACME_KEYS", "a1,a2"), ("CHECK_GLOBEX_KEYS", "g1")];
    let (ok, stderr) = check_config(tenants, &both);
    assert!(ok, "{stderr}");
    let (ok, stderr) = check_config(tenants, &both[..1]);
    assert!(!ok);
    assert!(
        stderr.contains(
            "auth.tenants[globex].api_key_env: environment variable CHECK_GLOBEX_KEYS is not set"
        ),
        "{stderr}"
    );
    let shared = [
        ("CHECK_ACME_KEYS", "a1,same"),
        ("CHECK_GLOBEX_KEYS", "same"),
    ];
    let (ok, stderr) = check_config(tenants, &shared);
    assert!(!ok);
    assert!(
        stderr.contains("belongs to both auth.tenants[acme] and auth.tenants[globex]"),
        "{stderr}"
    );
    let shared = [
        ("CHECK_ACME_KEYS", "a1"),
        ("CHECK_GLOBEX_KEYS", "g1"),
        ("AGENTD_API_KEYS", "a1"),
    ];
    let (ok, stderr) = check_config(tenants, &shared);
    assert!(!ok);
    assert!(stderr.contains("the unscoped keys"), "{stderr}");

    let jwt = format!("{tenants}[auth.jwt]\njwks_file = \"/nonexistent/jwks.json\"\n");
    let (ok, stderr) = check_config(&jwt, &both);
    assert!(!ok);
    assert!(
        stderr.contains("auth.jwt.jwks_file: cannot read /nonexistent/jwks.json"),
        "{stderr}"
    );
    let dir = tempfile::tempdir().expect("dir");
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#).expect("write");
    let jwt = format!("{tenants}[auth.jwt]\njwks_file = \"{}\"\n", jwks.display());
    let (ok, stderr) = check_config(&jwt, &both);
    assert!(!ok);
    assert!(
        stderr.contains("keys[0] is a symmetric (oct) key"),
        "{stderr}"
    );
    write_jwks(&jwks, vec![ed_key(1, "k1").1]);
    let (ok, stderr) = check_config(&jwt, &both);
    assert!(ok, "{stderr}");
    let secret = format!("{tenants}[auth.jwt]\nhs256_secret_env = \"CHECK_SECRET\"\n");
    let (ok, stderr) = check_config(&secret, &[both[0], both[1], ("CHECK_SECRET", "short")]);
    assert!(!ok);
    assert!(stderr.contains("must be at least 32 bytes"), "{stderr}");
}
