//! Tenant isolation on a real server (embedded store, scripted model): two tenants, an unscoped
//! key and no key call every RPC on a tenant's resource and run; a tenant cannot reach another
//! tenant's threads by id, runs, pending approvals or idempotency keys; JWT bearer tokens map
//! to tenants (expiry, issuer, audience, signature, unknown tenant) and the JWKS file reloads.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentd::model::{MockOpenAi, MockReply};
use agentd::pb;
use agentd::pb::agent_service_client::AgentServiceClient;
use agentd::pb::approval_service_client::ApprovalServiceClient;
use agentd::pb::chunk::Payload;
use agentd::pb::task_service_client::TaskServiceClient;
use agentd::pb::thread_service_client::ThreadServiceClient;
use agentd::server::RunningServer;
use futures::StreamExt;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use support::with_metadata;
use tonic::Code;
use tonic::transport::Channel;

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

/// Bearer metadata for `key` (none: no header).
fn bearer(key: Option<&str>) -> Vec<(&'static str, String)> {
    key.map(|k| vec![("authorization", format!("Bearer {k}"))])
        .unwrap_or_default()
}

/// `message` with the caller's credentials.
fn req<T>(auth: &[(&'static str, String)], message: T) -> tonic::Request<T> {
    let pairs: Vec<(&'static str, &str)> = auth.iter().map(|(k, v)| (*k, v.as_str())).collect();
    with_metadata(&pairs, message)
}

struct Clients {
    agents: AgentServiceClient<Channel>,
    tasks: TaskServiceClient<Channel>,
    threads: ThreadServiceClient<Channel>,
    approvals: ApprovalServiceClient<Channel>,
}

async fn clients(server: &RunningServer) -> Clients {
    let channel = support::channel(server).await;
    Clients {
        agents: AgentServiceClient::new(channel.clone()),
        tasks: TaskServiceClient::new(channel.clone()),
        threads: ThreadServiceClient::new(channel.clone()),
        approvals: ApprovalServiceClient::new(channel),
    }
}

fn code<T>(result: Result<T, tonic::Status>) -> Code {
    result.map_or_else(|s| s.code(), |_| Code::Ok)
}

/// Chunks of a started run, to its end.
async fn chunks(
    result: Result<tonic::Response<tonic::Streaming<pb::Chunk>>, tonic::Status>,
) -> Vec<pb::Chunk> {
    support::collect(result.expect("the run starts").into_inner()).await
}

fn ask(prompt: &str, thread: &str, resource: &str) -> pb::GenerateRequest {
    pb::GenerateRequest {
        agent_id: "planner".into(),
        prompt: prompt.into(),
        require_tool_approval: prompt == "needs-approval",
        memory: Some(support::memory(thread, resource, None)),
        ..Default::default()
    }
}

/// What the matrix calls on: a resource and thread with history, a finished and a suspended
/// run of the tenant, the suspended call's id.
struct Target {
    resource: String,
    thread: String,
    finished_run: String,
    suspended_run: String,
}

/// The RPCs in the order [`every_rpc`] calls them.
const RPCS: [&str; 24] = [
    "Generate",
    "GenerateWithHooks",
    "Observe",
    "Abort",
    "ListAgents",
    "GetAgent",
    "Write",
    "Update",
    "Complete",
    "Check",
    "Watch",
    "ListPending",
    "Approve",
    "Decline",
    "Resume",
    "ContinueWithHooks",
    "ListThreads",
    "GetThread",
    "UpdateThread",
    "ListMessages",
    "DeleteMessages",
    "GetWorkingMemory",
    "UpdateWorkingMemory",
    "DeleteThread",
];

/// Calls every RPC once as `key` on `target`, returning each one's status code. Decisions name
/// an unknown tool call (the run stays suspended) and the
/// thread is deleted last, on a thread id nobody made, so the calls leave the target usable.
async fn every_rpc(
    server: &RunningServer,
    key: Option<&str>,
    target: &Target,
) -> Vec<(&'static str, Code)> {
    let auth = bearer(key);
    let mut c = clients(server).await;
    let (r, t) = (target.resource.as_str(), target.thread.as_str());
    let mut out = Vec::new();
    let generate = c.agents.generate(req(&auth, ask("hi", t, r))).await;
    out.push(match generate {
        Ok(stream) => {
            support::collect(stream.into_inner()).await;
            Code::Ok
        }
        Err(status) => status.code(),
    });
    let hooked = pb::GenerateWithHooksRequest {
        message: Some(pb::generate_with_hooks_request::Message::Start(
            pb::HookedGenerate {
                request: Some(ask("hi", t, r)),
                hooks: None,
            },
        )),
    };
    let hooked = c
        .agents
        .generate_with_hooks(req(&auth, futures::stream::iter(vec![hooked])))
        .await;
    out.push(match hooked {
        Ok(stream) => {
            // The run ends with the stream; read it so it does not race the next calls.
            let mut stream = stream.into_inner();
            while let Some(Ok(_)) = stream.next().await {}
            Code::Ok
        }
        Err(status) => status.code(),
    });
    let observe = c.agents.observe(req(
        &auth,
        pb::ObserveRequest {
            run_id: target.finished_run.clone(),
            after_sequence: 0,
        },
    ));
    out.push(match observe.await {
        Ok(stream) => {
            support::collect(stream.into_inner()).await;
            Code::Ok
        }
        Err(status) => status.code(),
    });
    let abort = pb::AbortRequest {
        run_id: target.finished_run.clone(),
        reason: String::new(),
    };
    out.push(code(c.agents.abort(req(&auth, abort)).await));
    out.push(code(
        c.agents
            .list_agents(req(&auth, pb::ListAgentsRequest {}))
            .await,
    ));
    let get = pb::GetAgentRequest {
        agent_id: "planner".into(),
    };
    out.push(code(c.agents.get_agent(req(&auth, get)).await));

    let write = pb::WriteRequest {
        thread_id: t.into(),
        resource_id: r.into(),
        tasks: vec![pb::TaskInput {
            id: Some("task_1".into()),
            content: "Plan".into(),
            status: pb::TaskStatus::Pending.into(),
            active_form: "Planning".into(),
        }],
    };
    out.push(code(c.tasks.write(req(&auth, write)).await));
    let update = pb::UpdateRequest {
        thread_id: t.into(),
        resource_id: r.into(),
        id: "task_1".into(),
        content: Some("Plan more".into()),
        ..Default::default()
    };
    out.push(code(c.tasks.update(req(&auth, update)).await));
    let complete = pb::CompleteRequest {
        thread_id: t.into(),
        resource_id: r.into(),
        id: "task_none".into(),
    };
    out.push(code(c.tasks.complete(req(&auth, complete)).await));
    let check = pb::CheckRequest {
        thread_id: t.into(),
        resource_id: r.into(),
    };
    out.push(code(c.tasks.check(req(&auth, check)).await));
    let watch = pb::WatchRequest {
        thread_id: t.into(),
        resource_id: r.into(),
    };
    out.push(match c.tasks.watch(req(&auth, watch)).await {
        Ok(stream) => {
            let first = tokio::time::timeout(Duration::from_secs(10), stream.into_inner().next())
                .await
                .expect("the first update comes in time")
                .expect("the stream yields the current list");
            code(first)
        }
        Err(status) => status.code(),
    });

    let pending = pb::ListPendingRequest {
        resource_id: Some(r.into()),
        ..Default::default()
    };
    out.push(code(c.approvals.list_pending(req(&auth, pending)).await));
    let approve = pb::ApproveRequest {
        run_id: target.suspended_run.clone(),
        tool_call_id: "call_unknown".into(),
        ..Default::default()
    };
    out.push(code(c.approvals.approve(req(&auth, approve.clone())).await));
    let decline = pb::DeclineRequest {
        run_id: target.suspended_run.clone(),
        tool_call_id: "call_unknown".into(),
        ..Default::default()
    };
    out.push(code(c.approvals.decline(req(&auth, decline)).await));
    let resume = pb::ResumeRequest {
        run_id: target.suspended_run.clone(),
        tool_call_id: "call_unknown".into(),
        ..Default::default()
    };
    out.push(code(c.approvals.resume(req(&auth, resume)).await));
    let hooked = pb::ContinueWithHooksRequest {
        message: Some(pb::continue_with_hooks_request::Message::Start(
            pb::HookedContinue {
                decision: Some(pb::hooked_continue::Decision::Approve(approve)),
                hooks: None,
            },
        )),
    };
    let hooked = c
        .approvals
        .continue_with_hooks(req(&auth, futures::stream::iter(vec![hooked])))
        .await;
    out.push(code(hooked));

    let list = pb::ListThreadsRequest {
        resource_id: r.into(),
        ..Default::default()
    };
    out.push(code(c.threads.list_threads(req(&auth, list)).await));
    let get = pb::GetThreadRequest {
        thread_id: t.into(),
        resource_id: r.into(),
    };
    out.push(code(c.threads.get_thread(req(&auth, get)).await));
    let update = pb::UpdateThreadRequest {
        thread_id: t.into(),
        resource_id: r.into(),
        title: Some("Title".into()),
        ..Default::default()
    };
    out.push(code(c.threads.update_thread(req(&auth, update)).await));
    let messages = pb::ListMessagesRequest {
        thread_id: t.into(),
        resource_id: r.into(),
        ..Default::default()
    };
    out.push(code(c.threads.list_messages(req(&auth, messages)).await));
    let delete_messages = pb::DeleteMessagesRequest {
        thread_id: t.into(),
        resource_id: r.into(),
        message_ids: vec!["msg_none".into()],
    };
    out.push(code(
        c.threads.delete_messages(req(&auth, delete_messages)).await,
    ));
    let get_working = pb::GetWorkingMemoryRequest {
        resource_id: r.into(),
        ..Default::default()
    };
    out.push(code(
        c.threads.get_working_memory(req(&auth, get_working)).await,
    ));
    let update_working = pb::UpdateWorkingMemoryRequest {
        resource_id: r.into(),
        thread_id: t.into(),
        scope: pb::WorkingMemoryScope::Thread.into(),
        content: "# notes".into(),
        ..Default::default()
    };
    out.push(code(
        c.threads
            .update_working_memory(req(&auth, update_working))
            .await,
    ));
    let delete = pb::DeleteThreadRequest {
        thread_id: support::unique("never-made"),
        resource_id: r.into(),
    };
    out.push(code(c.threads.delete_thread(req(&auth, delete)).await));
    RPCS.iter().copied().zip(out).collect()
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
    let mock = MockOpenAi::start().await.expect("mock");
    mock_replies(&mock);
    let dir = tempfile::tempdir().expect("dir");
    let jwks = dir.path().join("jwks.json");
    write_jwks(&jwks, vec![ed_key(1, "k1").1]);
    let server = start(&mock, dir.path(), &jwks).await;
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
async fn threads_named_by_id_stay_with_their_resource() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock_replies(&mock);
    let dir = tempfile::tempdir().expect("dir");
    let jwks = dir.path().join("jwks.json");
    write_jwks(&jwks, vec![ed_key(1, "k1").1]);
    let server = start(&mock, dir.path(), &jwks).await;
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
            "ListAgents" | "GetAgent" | "ListPending" | "ListThreads" | "GetWorkingMemory"
            | "DeleteThread" => Code::Ok,
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
    let mock = MockOpenAi::start().await.expect("mock");
    mock_replies(&mock);
    let dir = tempfile::tempdir().expect("dir");
    let jwks = dir.path().join("jwks.json");
    write_jwks(&jwks, vec![ed_key(1, "k1").1]);
    let server = start(&mock, dir.path(), &jwks).await;
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
    // Nor take its run id for a run of its own: the id is taken.
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
        .expect_err("taken");
    assert_eq!(taken.code(), Code::AlreadyExists);
    // The same key again must not replay acme's run either.
    let again = c
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
        .expect_err("still taken");
    assert_eq!(again.code(), Code::AlreadyExists);

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
