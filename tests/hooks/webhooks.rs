//! Agents' webhooks: a tool policy, failures, timeouts, and the client overriding them.

use super::*;

/// A webhook server: answers before_tool_call with a skip, or fails with 500.
struct Hook {
    url: String,
    seen: Arc<Mutex<Vec<Value>>>,
    _task: tokio::task::JoinHandle<()>,
}

async fn webhook() -> Hook {
    use axum::Json;
    use axum::http::StatusCode;
    use axum::routing::post;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let log2 = seen.clone();
    let app = axum::Router::new()
        .route(
            "/policy",
            post(move |Json(body): Json<Value>| {
                log.lock().expect("log").push(body.clone());
                async move {
                    let allowed = body["beforeToolCall"]["toolName"] == "task_write";
                    if allowed {
                        Json(json!({}))
                    } else {
                        Json(json!({"id": body["id"], "beforeToolCall": {"proceed": false, "output": "blocked by policy"}}))
                    }
                }
            }),
        )
        .route(
            "/slow",
            post(|| async {
                tokio::time::sleep(Duration::from_secs(3)).await;
                Json(json!({}))
            }),
        )
        .route("/garbage", post(|| async { "not json" }))
        .route(
            "/down",
            post(move |Json(body): Json<Value>| {
                log2.lock().expect("log").push(body);
                async { (StatusCode::INTERNAL_SERVER_ERROR, "down") }
            }),
        );
    let (url, task) = support::serve_http(app).await;
    Hook {
        url,
        seen,
        _task: task,
    }
}

#[tokio::test]
async fn an_agents_webhook_enforces_a_tool_policy_and_the_client_overrides_it() {
    let hook = webhook().await;
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let extra = format!(
        r#"
[[agents]]
id = "policed"
model = "mock/test-model"
tools = ["tasks"]
[[agents.webhooks]]
url = "{url}/policy"
kinds = ["before_tool_call"]
headers = {{ x-policy = "strict" }}
[[agents.webhooks]]
url = "{url}/down"
kinds = ["on_iteration_complete"]
on_failure = "continue"
timeout_ms = 2000
"#,
        url = hook.url
    );
    let server = server(&mock, dir.path(), &extra).await;
    let mut agents = support::agents_client(&server).await;
    mock.push(tool_call("task_check", json!({})));
    mock.push(MockReply::Text("ok".into()));
    let chunks = support::generate(&mut agents, ask("policed", "check")).await;
    let tool = messages(&mock, 1)
        .into_iter()
        .find(|m| m["role"] == "tool")
        .expect("tool message");
    assert_eq!(tool["content"], "blocked by policy");
    assert_eq!(
        support::finish(&chunks).finish_reason(),
        pb::FinishReason::Stop
    );
    // The failing on_iteration_complete webhook (CONTINUE) is reported, and nothing hangs.
    assert_eq!(
        support::kinds(&chunks)
            .iter()
            .filter(|k| **k == "hook-error")
            .count(),
        2
    );
    {
        let seen = hook.seen.lock().expect("seen");
        let call = seen
            .iter()
            .find(|b| b["kind"] == "HOOK_KIND_BEFORE_TOOL_CALL")
            .expect("call");
        assert_eq!(call["agentId"], "policed");
        assert_eq!(call["beforeToolCall"]["toolName"], "task_check");
    }
    // A client handling before_tool_call overrides the agent's webhook for that kind.
    let before = hook.seen.lock().expect("seen").len();
    mock.push(tool_call("task_check", json!({})));
    mock.push(MockReply::Text("ok".into()));
    let out = generate_hooked(
        &server,
        ask("policed", "check"),
        hook_options(&[pb::HookKind::BeforeToolCall], None, false),
        Box::new(unchanged),
    )
    .await;
    assert_eq!(out.calls.len(), 1);
    assert_eq!(finish(&out).finish_reason(), pb::FinishReason::Stop);
    let seen = hook.seen.lock().expect("seen");
    assert!(
        seen[before..]
            .iter()
            .all(|b| b["kind"] != "HOOK_KIND_BEFORE_TOOL_CALL")
    );
}

#[tokio::test]
async fn a_slow_or_garbled_webhook_fails_the_run_by_its_deadline() {
    let hook = webhook().await;
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let extra = format!(
        r#"
[[agents]]
id = "slow"
model = "mock/test-model"
[[agents.webhooks]]
url = "{url}/slow"
kinds = ["prepare_step"]
timeout_ms = 200

[[agents]]
id = "garbled"
model = "mock/test-model"
[[agents.webhooks]]
url = "{url}/garbage"
kinds = ["prepare_step"]
"#,
        url = hook.url
    );
    let server = server(&mock, dir.path(), &extra).await;
    let mut agents = support::agents_client(&server).await;
    for (agent, expect) in [
        ("slow", "did not answer within 200 ms"),
        ("garbled", "not a HookAnswer"),
    ] {
        let started = std::time::Instant::now();
        let chunks = support::generate(&mut agents, ask(agent, "hi")).await;
        assert!(started.elapsed() < Duration::from_secs(2), "{agent} hung");
        let result = support::finish(&chunks);
        assert_eq!(result.finish_reason(), pb::FinishReason::Error, "{agent}");
        let error = result.error.expect("error");
        assert_eq!(error.category, "HOOK");
        assert!(error.message.contains(expect), "{agent}: {}", error.message);
        assert!(support::kinds(&chunks).contains(&"hook-error"));
    }
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn an_agents_webhook_answers_its_hook_processor_in_the_json_mapping() {
    use axum::Json;
    use axum::routing::post;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let app = axum::Router::new().route(
        "/guard",
        post(move |Json(body): Json<Value>| {
            log.lock().expect("log").push(body.clone());
            async move {
                let text = body["processOutputStep"]["text"].as_str().unwrap_or("");
                if text.contains("secret") {
                    Json(json!({"processor": {"abort": {"reason": "No secrets", "metadata": {"why": "leak"}}}}))
                } else {
                    Json(json!({}))
                }
            }
        }),
    );
    let (url, _task) = support::serve_http(app).await;
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let extra = format!(
        r#"
[[agents]]
id = "guarded-by-webhook"
model = "mock/test-model"
[[agents.output_processors]]
type = "hook"
id = "secret-guard"
[[agents.webhooks]]
url = "{url}/guard"
kinds = ["process_output_step"]
"#
    );
    let server = server(&mock, dir.path(), &extra).await;
    let mut agents = support::agents_client(&server).await;
    mock.push(MockReply::Text("all fine".into()));
    let chunks = support::generate(&mut agents, ask("guarded-by-webhook", "hi")).await;
    assert_eq!(
        support::finish(&chunks).finish_reason(),
        pb::FinishReason::Stop
    );
    mock.push(MockReply::Text("the secret is 42".into()));
    let chunks = support::generate(&mut agents, ask("guarded-by-webhook", "hi")).await;
    let result = support::finish(&chunks);
    assert_eq!(result.finish_reason(), pb::FinishReason::Tripwire);
    let trip = result.tripwire.expect("tripwire");
    assert_eq!(
        (trip.reason.as_str(), trip.processor_id.as_str()),
        ("No secrets", "secret-guard")
    );
    let seen = seen.lock().expect("seen");
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1]["kind"], "HOOK_KIND_PROCESS_OUTPUT_STEP");
    assert_eq!(seen[1]["processOutputStep"]["processorId"], "secret-guard");
}
