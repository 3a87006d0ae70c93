//! Tenant isolation on a real server (embedded store, scripted model): two tenants, an unscoped
//! key and no key call every RPC on a tenant's resource and run; a tenant cannot reach another
//! tenant's threads by id, runs, pending approvals or idempotency keys; JWT bearer tokens map
//! to tenants (expiry, issuer, audience, signature, unknown tenant) and the JWKS file reloads.

#[path = "tenants/calls.rs"]
mod calls;
#[path = "tenants/jwt.rs"]
mod jwt;
mod support;

use std::path::Path;
use std::sync::Arc;

use agentd::model::{MockOpenAi, MockReply};
use agentd::pb;
use agentd::pb::chunk::Payload;
use agentd::server::RunningServer;
use calls::{RPCS, Target, ask, bearer, chunks, clients, code, every_rpc, req};
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tonic::Code;

const ROOT_KEY: &str = "root-key-0123";
const ACME_KEY: &str = "acme-key-0123";
const GLOBEX_KEY: &str = "globex-key-0123";
/// Globex's keys come from this variable (`api_key_env`).
const GLOBEX_ENV: &str = "AGENTD_TEST_TENANTS_GLOBEX_KEYS";
/// The HS256 secret's variable (`hs256_secret_env`).
const SECRET_ENV: &str = "AGENTD_TEST_TENANTS_JWT_SECRET";
const SECRET: &str = "an-hs256-secret-of-at-least-32-bytes";
const ISSUER: &str = "https://login.example.test/";
const AUDIENCE: &str = "agentd";

/// Sets the variables every server of this file reads, once, before the first one starts.
fn set_env() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: set before any server of this test binary reads them, never changed after.
    ONCE.call_once(|| unsafe {
        std::env::set_var(GLOBEX_ENV, format!(" {GLOBEX_KEY} , other-globex-key"));
        std::env::set_var(SECRET_ENV, SECRET);
    });
}

fn sha256_hex(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// An Ed25519 signing key from a fixed seed (PKCS#8 v1 DER) and its JWK named `kid`.
fn ed_key(seed: u8, kid: &str) -> (EncodingKey, Jwk) {
    let mut der = hex::decode("302e020100300506032b657004220420").expect("hex");
    der.extend([seed; 32]);
    let key = EncodingKey::from_ed_der(&der);
    let mut jwk = Jwk::from_encoding_key(&key, Algorithm::EdDSA).expect("jwk");
    jwk.common.key_id = Some(kid.to_owned());
    (key, jwk)
}

fn write_jwks(path: &Path, keys: Vec<Jwk>) {
    let set = JwkSet { keys };
    std::fs::write(path, serde_json::to_vec(&set).expect("json")).expect("write jwks");
}

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// A token with `claims` signed by `key` (EdDSA, `kid`).
fn ed_token(key: &EncodingKey, kid: &str, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, key).expect("sign")
}

/// Valid claims for `tenant`.
fn claims(tenant: &str) -> Value {
    json!({"tenant": tenant, "iss": ISSUER, "aud": AUDIENCE, "exp": now() + 600, "sub": "u"})
}

/// The scripted model: approval-needing prompts call `task_check`, tool results end the run.
fn mock_replies(mock: &MockOpenAi) {
    mock.set_fallback(Arc::new(|body: &Value| {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let last = messages.last().cloned().unwrap_or(Value::Null);
        if last["role"] == "tool" {
            return MockReply::Text("Done.".into());
        }
        if body.to_string().contains("needs-approval") {
            return MockReply::ToolCalls(vec![("task_check".into(), json!({}))]);
        }
        MockReply::Text("Hello.".into())
    }));
}

/// A server with tenants acme (`acme/`, a digest) and globex (`globex/`, keys from the
/// environment), an unscoped key, and JWTs from `jwks` (reloaded every second) or HS256.
/// A server with the two tenants, its scripted model and a JWKS of one key (kept alive by the
/// caller).
async fn started() -> (MockOpenAi, tempfile::TempDir, RunningServer) {
    let mock = MockOpenAi::start().await.expect("mock");
    mock_replies(&mock);
    let dir = tempfile::tempdir().expect("dir");
    let jwks = dir.path().join("jwks.json");
    write_jwks(&jwks, vec![ed_key(1, "k1").1]);
    let server = start(&mock, dir.path(), &jwks).await;
    (mock, dir, server)
}

async fn start(mock: &MockOpenAi, dir: &Path, jwks: &Path) -> RunningServer {
    set_env();
    let auth = format!(
        r#"
[[auth.tenants]]
name = "acme"
resource_prefixes = ["acme/"]
api_key_sha256 = ["{}"]

[[auth.tenants]]
name = "globex"
resource_prefixes = ["globex/", "gx-"]
api_key_env = "{GLOBEX_ENV}"

[auth.jwt]
jwks_file = "{}"
jwks_reload_secs = 1
hs256_secret_env = "{SECRET_ENV}"
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
leeway_secs = 0
"#,
        sha256_hex(ACME_KEY),
        jwks.display()
    );
    let agents = format!("{}{auth}", support::AGENTS_TOML);
    let mut config = support::agent_config(mock, &agents, "embedded", dir);
    config.auth.api_keys = vec![ROOT_KEY.to_owned()];
    support::start(config).await
}

/// The suspended run's id and its pending call id.
fn suspension(chunks: &[pb::Chunk]) -> (String, String) {
    let result = support::finish(chunks);
    assert_eq!(result.finish_reason(), pb::FinishReason::Suspended);
    let call = chunks
        .iter()
        .find_map(|c| match &c.payload {
            Some(Payload::ToolCallApproval(s)) => Some(s.tool_call_id.clone()),
            _ => None,
        })
        .expect("a call awaits approval");
    (result.run_id, call)
}

/// Acme's resource, thread, a finished run and a suspended one (with its call id).
async fn acme_target(server: &RunningServer) -> (Target, String) {
    let auth = bearer(Some(ACME_KEY));
    let mut c = clients(server).await;
    let resource = support::unique("acme/user");
    let thread = support::unique("acme-thread");
    let finished = chunks(
        c.agents
            .generate(req(&auth, ask("hi", &thread, &resource)))
            .await,
    )
    .await;
    let finished_run = support::finish(&finished).run_id;
    let suspended = chunks(
        c.agents
            .generate(req(&auth, ask("needs-approval", &thread, &resource)))
            .await,
    )
    .await;
    let (suspended_run, call) = suspension(&suspended);
    (
        Target {
            resource,
            thread,
            finished_run,
            suspended_run,
        },
        call,
    )
}

fn expect(rpc: &str, owner: bool) -> Code {
    match (rpc, owner) {
        ("ListAgents" | "GetAgent", _) => Code::Ok,
        // Decisions on an unknown call of a run the caller may reach: NOT_FOUND too, but from
        // the run (`runs_belong_to_the_tenant_that_started_them` tells the two apart).
        ("Approve" | "Decline" | "Resume" | "ContinueWithHooks", true) => Code::NotFound,
        (_, true) => Code::Ok,
        // Another tenant's run is reported exactly like an unknown one.
        ("Observe" | "Abort" | "Approve" | "Decline" | "Resume" | "ContinueWithHooks", false) => {
            Code::NotFound
        }
        (_, false) => Code::PermissionDenied,
    }
}

#[tokio::test]
async fn the_tenant_matrix() {
    let (_mock, _dir, server) = started().await;
    let (target, _) = acme_target(&server).await;

    let none = every_rpc(&server, None, &target).await;
    for (rpc, got) in &none {
        assert_eq!(*got, Code::Unauthenticated, "{rpc} without a key");
    }
    let wrong = every_rpc(&server, Some("not-a-key"), &target).await;
    for (rpc, got) in &wrong {
        assert_eq!(*got, Code::Unauthenticated, "{rpc} with a wrong key");
    }
    for (caller, key, owner) in [
        ("globex", GLOBEX_KEY, false),
        ("globex (second env key)", "other-globex-key", false),
        ("acme", ACME_KEY, true),
        ("unscoped", ROOT_KEY, true),
    ] {
        let got = every_rpc(&server, Some(key), &target).await;
        let want: Vec<_> = RPCS.iter().map(|rpc| (*rpc, expect(rpc, owner))).collect();
        assert_eq!(got, want, "{caller}");
    }
    // The suspended run is still there, untouched by the refused decisions.
    let mut c = clients(&server).await;
    let listed = c
        .approvals
        .list_pending(req(
            &bearer(Some(ACME_KEY)),
            pb::ListPendingRequest {
                resource_id: Some(target.resource.clone()),
                ..Default::default()
            },
        ))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(listed.runs.len(), 1);
    assert_eq!(listed.runs[0].run_id, target.suspended_run);

    // Globex, on its own resources: allowed (a second prefix too).
    let mut globex = every_rpc(
        &server,
        Some(GLOBEX_KEY),
        &Target {
            resource: support::unique("gx-user"),
            thread: support::unique("gx-thread"),
            ..target
        },
    )
    .await;
    globex.retain(|(rpc, _)| {
        !matches!(
            *rpc,
            "Observe" | "Abort" | "Approve" | "Decline" | "Resume" | "ContinueWithHooks"
        )
    });
    for (rpc, got) in globex {
        assert_eq!(got, Code::Ok, "globex {rpc} on gx-…");
    }
    server.stop().await.expect("stop");
}

#[tokio::test]
async fn scores_are_listed_only_to_the_tenant_whose_run_they_score() {
    let (_mock, _dir, server) = started().await;
    let (acme_auth, globex_auth) = (bearer(Some(ACME_KEY)), bearer(Some(GLOBEX_KEY)));
    let mut c = clients(&server).await;
    let (thread, resource) = (support::unique("scored"), support::unique("acme/scored"));
    let run = pb::GenerateRequest {
        scorers: Some(pb::Scorers {
            scorers: vec![pb::Scorer {
                key: "tone".into(),
                scorer: "tone".into(),
                ..Default::default()
            }],
        }),
        return_scorer_data: true,
        ..ask("hi", &thread, &resource)
    };
    let result = support::finish(&chunks(c.agents.generate(req(&acme_auth, run)).await).await);
    assert_eq!(result.scores.len(), 1);
    let by_run = pb::ListScoresRequest {
        target: Some(pb::list_scores_request::Target::RunId(
            result.run_id.clone(),
        )),
        ..Default::default()
    };
    let by_agent = pb::ListScoresRequest {
        target: Some(pb::list_scores_request::Target::AgentId("planner".into())),
        ..Default::default()
    };
    let by_thread = pb::ListScoresRequest {
        target: Some(pb::list_scores_request::Target::Thread(pb::ScoredThread {
            thread_id: thread,
            resource_id: resource,
        })),
        ..Default::default()
    };
    for request in [&by_run, &by_agent, &by_thread] {
        let mine = c
            .scores
            .list_scores(req(&acme_auth, request.clone()))
            .await
            .expect("acme lists")
            .into_inner();
        assert_eq!(mine.scores, result.scores, "{request:?}");
    }
    // Globex sees none of them: by run or agent nothing is listed, by acme's thread it is
    // refused like any of acme's resources.
    for request in [&by_run, &by_agent] {
        let theirs = c
            .scores
            .list_scores(req(&globex_auth, request.clone()))
            .await
            .expect("globex lists")
            .into_inner();
        assert!(theirs.scores.is_empty(), "{request:?}");
    }
    let denied = c
        .scores
        .list_scores(req(&globex_auth, by_thread))
        .await
        .expect_err("another tenant's thread");
    assert_eq!(denied.code(), Code::PermissionDenied);
    server.stop().await.expect("stop");
}

#[tokio::test]
async fn threads_named_by_id_stay_with_their_resource() {
    let (_mock, _dir, server) = started().await;
    let (acme, _) = acme_target(&server).await;
    let acme_resource = acme.resource.clone();
    // Globex names acme's thread under its own resource: every thread-bound RPC is refused by
    // the store's ownership check, PERMISSION_DENIED, and nothing is touched.
    let stolen = Target {
        resource: support::unique("globex/user"),
        ..acme
    };
    let got = every_rpc(&server, Some(GLOBEX_KEY), &stolen).await;
    for (rpc, code) in got {
        let want = match rpc {
            // Listings keyed by globex's own resource: nothing of acme's is in them.
            "ListAgents" | "GetAgent" | "ListPending" | "ListThreads" | "GetWorkingMemory"
            | "DeleteThread" | "ListScores" => Code::Ok,
            "Observe" | "Abort" | "Approve" | "Decline" | "Resume" | "ContinueWithHooks" => {
                Code::NotFound
            }
            _ => Code::PermissionDenied,
        };
        assert_eq!(code, want, "globex {rpc} on acme's thread");
    }
    // Acme's thread still has its history.
    let mut c = clients(&server).await;
    let messages = c
        .threads
        .list_messages(req(
            &bearer(Some(ACME_KEY)),
            pb::ListMessagesRequest {
                thread_id: stolen.thread.clone(),
                resource_id: acme_resource,
                ..Default::default()
            },
        ))
        .await
        .expect("acme reads its thread")
        .into_inner();
    assert!(!messages.messages.is_empty());
    server.stop().await.expect("stop");
}

#[tokio::test]
async fn runs_belong_to_the_tenant_that_started_them() {
    let (_mock, _dir, server) = started().await;
    let (acme, call) = acme_target(&server).await;
    let (acme_auth, globex_auth) = (bearer(Some(ACME_KEY)), bearer(Some(GLOBEX_KEY)));
    let mut c = clients(&server).await;

    // Globex cannot see acme's pending run, whatever filter it uses.
    for filter in [
        pb::ListPendingRequest {
            run_id: Some(acme.suspended_run.clone()),
            ..Default::default()
        },
        pb::ListPendingRequest {
            thread_id: Some(acme.thread.clone()),
            ..Default::default()
        },
    ] {
        let runs = c
            .approvals
            .list_pending(req(&globex_auth, filter.clone()))
            .await
            .expect("list");
        assert!(runs.into_inner().runs.is_empty(), "{filter:?}");
        let runs = c
            .approvals
            .list_pending(req(&acme_auth, filter))
            .await
            .expect("list");
        assert_eq!(runs.into_inner().runs.len(), 1);
    }
    // Nor approve (with the real call id), observe or abort it: NOT_FOUND, as for no run.
    let approve = pb::ApproveRequest {
        run_id: acme.suspended_run.clone(),
        tool_call_id: call.clone(),
        ..Default::default()
    };
    let denied = c
        .approvals
        .approve(req(&globex_auth, approve.clone()))
        .await
        .expect_err("denied");
    assert_eq!(denied.code(), Code::NotFound);
    let unknown = c
        .approvals
        .approve(req(
            &globex_auth,
            pb::ApproveRequest {
                run_id: "no-such-run".into(),
                ..approve.clone()
            },
        ))
        .await
        .expect_err("unknown");
    assert_eq!(
        denied.message().replace(&acme.suspended_run, "no-such-run"),
        unknown.message()
    );
    let abort = pb::AbortRequest {
        run_id: acme.suspended_run.clone(),
        reason: "mine now".into(),
    };
    assert_eq!(
        code(c.agents.abort(req(&globex_auth, abort)).await),
        Code::NotFound
    );
    // Nor take its run id for a run of its own: the id is taken; and the same key again must
    // not replay acme's run either.
    for attempt in ["taken", "still taken"] {
        let taken = c
            .agents
            .generate(req(
                &globex_auth,
                pb::GenerateRequest {
                    run_id: acme.suspended_run.clone(),
                    idempotency_key: "fresh-key".into(),
                    ..ask("hi", &support::unique("gx-t"), "globex/1")
                },
            ))
            .await
            .expect_err(attempt);
        assert_eq!(taken.code(), Code::AlreadyExists, "{attempt}");
    }

    // Acme approves its own run; it goes on to the end.
    let rest = chunks(c.approvals.approve(req(&acme_auth, approve)).await).await;
    assert_eq!(support::finish(&rest).text, "Done.");

    // Runs without memory are allowed for a tenant and scoped by run.
    let bare = pb::GenerateRequest {
        agent_id: "plain".into(),
        prompt: "hi".into(),
        ..Default::default()
    };
    let run =
        support::finish(&chunks(c.agents.generate(req(&acme_auth, bare.clone())).await).await)
            .run_id;
    let observe = |auth: Vec<(&'static str, String)>, run_id: String| {
        let mut agents = c.agents.clone();
        async move {
            code(
                agents
                    .observe(req(
                        &auth,
                        pb::ObserveRequest {
                            run_id,
                            after_sequence: 0,
                        },
                    ))
                    .await,
            )
        }
    };
    assert_eq!(observe(acme_auth.clone(), run.clone()).await, Code::Ok);
    assert_eq!(
        observe(globex_auth.clone(), run.clone()).await,
        Code::NotFound
    );
    assert_eq!(observe(bearer(Some(ROOT_KEY)), run).await, Code::Ok);

    // One idempotency key, two tenants: two runs; the same tenant again: its run replayed.
    let keyed = pb::GenerateRequest {
        idempotency_key: "shared-key".into(),
        ..bare
    };
    let first =
        support::finish(&chunks(c.agents.generate(req(&acme_auth, keyed.clone())).await).await)
            .run_id;
    let other =
        support::finish(&chunks(c.agents.generate(req(&globex_auth, keyed.clone())).await).await)
            .run_id;
    let unscoped = support::finish(
        &chunks(
            c.agents
                .generate(req(&bearer(Some(ROOT_KEY)), keyed.clone()))
                .await,
        )
        .await,
    )
    .run_id;
    let replay =
        support::finish(&chunks(c.agents.generate(req(&acme_auth, keyed)).await).await).run_id;
    assert_ne!(first, other);
    assert_ne!(first, unscoped);
    assert_ne!(other, unscoped);
    assert_eq!(first, replay);
    server.stop().await.expect("stop");
}
