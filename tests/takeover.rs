//! Runs outlive the replica executing them. Replica A runs in a tokio runtime of its own, which
//! the test shuts down mid-run (its tasks stop where they are: no drain, no last writes, like a
//! killed process); replica B, on the same Redis, takes the runs over once their leases end.
//! Observe clients on B see every run continue and finish with contiguous sequence numbers.

mod support;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd::config::Config;
use agentd::model::{MockOpenAi, MockReply, planner_reply};
use agentd::pb;
use agentd::pb::chunk::Payload;
use futures::StreamExt;
use serde_json::{Value, json};
use support::redis::Deployment;

/// A replica whose runtime can be killed.
struct Doomed {
    addr: std::net::SocketAddr,
    kill: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Doomed {
    /// Starts a server with `config` on a runtime of its own thread.
    fn start(config: Config) -> Self {
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (kill, killed) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime");
            let server = runtime.block_on(support::start(config));
            addr_tx.send(server.addr).expect("the test waits");
            let _ = killed.recv();
            // Every task of the replica stops at its next await: runs, renewals, log writes.
            std::mem::forget(server);
            runtime.shutdown_background();
        });
        let addr = addr_rx.recv().expect("replica A starts");
        Self { addr, kill, thread }
    }

    fn kill(self) {
        let _ = self.kill.send(());
        self.thread.join().expect("replica A's thread ends");
    }
}

/// A config for one of the two replicas: short leases so the test waits seconds, not tens.
/// Besides the planner and the plain agent, `fetcher` calls the HTTP tool `lookup` at `tools`.
fn replica_config(
    mock: &MockOpenAi,
    redis: &Deployment,
    dir: &std::path::Path,
    tools: &str,
) -> Config {
    let agents = format!(
        r#"{}
[[agents]]
id = "fetcher"
instructions = "You look things up."
model = "mock/test-model"
tools = ["tasks"]
[[agents.http_tools]]
name = "lookup"
url = "{tools}/lookup"
"#,
        support::AGENTS_TOML
    );
    let mut config = support::agent_config(mock, &agents, &redis.url(), dir);
    config.limits.run_lease_ms = 1_000;
    config.limits.takeover_interval_ms = 200;
    config
}

/// Turns whose answering step streams slowly (so a kill lands inside it): the planner's, and
/// the fetcher's, which first calls `lookup`.
fn slow_answers(mock: &MockOpenAi) {
    mock.set_fallback(Arc::new(|request| {
        if offers(request, "lookup") && !answered(request) {
            return MockReply::ToolCalls(vec![("lookup".to_owned(), json!({ "q": "docs" }))]);
        }
        match planner_reply(request) {
            MockReply::Text(text) => MockReply::Slow {
                // About four seconds of streaming: ample for every run to be cut mid-answer.
                text: format!(
                    "{text} and then some more words to stream {}",
                    "slowly ".repeat(24)
                ),
                delay_per_delta: Duration::from_millis(130),
            },
            other => other,
        }
    }));
}

fn offers(request: &Value, tool: &str) -> bool {
    request["tools"]
        .as_array()
        .is_some_and(|tools| tools.iter().any(|t| t["function"]["name"] == tool))
}

fn answered(request: &Value) -> bool {
    request["messages"]
        .as_array()
        .is_some_and(|messages| messages.iter().any(|m| m["role"] == "tool"))
}

/// The `lookup` endpoint: answers, and records each call's idempotency key.
async fn lookup_endpoint() -> (String, Arc<Mutex<Vec<String>>>) {
    let keys = Arc::new(Mutex::new(Vec::new()));
    let seen = keys.clone();
    let app = axum::Router::new().route(
        "/lookup",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let seen = seen.clone();
            async move {
                let key = headers
                    .get("idempotency-key")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                seen.lock().expect("keys").push(key);
                axum::Json(json!({ "found": "the docs" }))
            }
        }),
    );
    let (url, _task) = support::serve_http(app).await;
    (url, keys)
}

/// Replica A (to be killed) and replica B on one Redis, the mock model and the `lookup` tool.
struct Pair {
    mock: MockOpenAi,
    keys: Arc<Mutex<Vec<String>>>,
    a: Doomed,
    b: agentd::server::RunningServer,
    on_a: pb::agent_service_client::AgentServiceClient<tonic::transport::Channel>,
    _dir: tempfile::TempDir,
}

impl Pair {
    async fn start(redis: &Deployment) -> Self {
        let mock = MockOpenAi::start().await.expect("mock");
        slow_answers(&mock);
        let (tools, keys) = lookup_endpoint().await;
        let dir = tempfile::tempdir().expect("dir");
        let a = Doomed::start(replica_config(&mock, redis, dir.path(), &tools));
        let b = support::start(replica_config(&mock, redis, dir.path(), &tools)).await;
        let channel_a = tonic::transport::Channel::from_shared(format!("http://{}", a.addr))
            .expect("uri")
            .connect()
            .await
            .expect("connect to A");
        let on_a = pb::agent_service_client::AgentServiceClient::new(channel_a);
        Self {
            mock,
            keys,
            a,
            b,
            on_a,
            _dir: dir,
        }
    }
}

fn generate(agent: &str, thread: &str) -> pb::GenerateRequest {
    pb::GenerateRequest {
        agent_id: agent.into(),
        prompt: format!("write docs, ship it ({thread})"),
        memory: Some(support::memory(thread, "takeover", None)),
        on_disconnect: pb::OnDisconnect::Continue.into(),
        ..Default::default()
    }
}

async fn killing_the_executing_replica_hands_every_run_to_the_survivor(redis: Deployment) {
    let Pair {
        mock,
        keys,
        a,
        b,
        mut on_a,
        _dir,
    } = Pair::start(&redis).await;
    let on_b = support::agents_client(&b).await;

    // Three fetchers (a checkpoint before their HTTP call), three planners (task tools only: no
    // checkpoint, they start again) and two plain runs (one step).
    let mut runs = Vec::new();
    for i in 0..8 {
        let agent = ["fetcher", "planner", "plain"][[0, 0, 0, 1, 1, 1, 2, 2][i]];
        let thread = support::unique(&format!("takeover-{i}"));
        let mut stream = on_a
            .generate(generate(agent, &thread))
            .await
            .expect("generate on A")
            .into_inner();
        let first = stream
            .next()
            .await
            .expect("a first chunk")
            .expect("no error");
        runs.push((first.run_id, agent, thread, stream));
    }
    // Observe every run on B; each reports once its answer streams on A.
    let streaming = Arc::new(AtomicUsize::new(0));
    let mut observers = Vec::new();
    let mut a_streams = Vec::new();
    for (run_id, agent, thread, stream) in runs {
        a_streams.push(stream);
        let mut client = on_b.clone();
        let streaming = streaming.clone();
        observers.push(tokio::spawn(async move {
            let mut chunks = client
                .observe(pb::ObserveRequest {
                    run_id: run_id.clone(),
                    after_sequence: 0,
                })
                .await
                .expect("observe on B")
                .into_inner();
            let mut seen = Vec::new();
            let mut counted = false;
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            loop {
                let next = tokio::time::timeout_at(deadline, chunks.next())
                    .await
                    .expect("the run ends within a minute");
                let Some(chunk) = next else { break };
                let chunk = chunk.expect("no error on B");
                let text = matches!(chunk.payload, Some(Payload::TextDelta(_)));
                let answered = agent == "plain"
                    || seen
                        .iter()
                        .any(|c: &pb::Chunk| matches!(c.payload, Some(Payload::ToolResult(_))));
                if text && answered && !counted {
                    counted = true;
                    streaming.fetch_add(1, Ordering::SeqCst);
                }
                seen.push(chunk);
            }
            (run_id, agent, thread, seen)
        }));
    }
    assert!(
        support::eventually(Duration::from_secs(30), || async {
            streaming.load(Ordering::SeqCst) == 8
        })
        .await,
        "every run streams its answer on A"
    );
    a.kill();
    drop(a_streams);

    let mut tasks = support::tasks_client(&b).await;
    let mut run_ids = HashSet::new();
    for observer in observers {
        let (run_id, agent, thread, chunks) = observer.await.expect("observer");
        run_ids.insert(run_id.clone());
        let sequences: Vec<u64> = chunks.iter().map(|c| c.sequence).collect();
        let expected: Vec<u64> = (1..=sequences.len() as u64).collect();
        assert_eq!(sequences, expected, "{run_id}: contiguous, each once");
        let result = support::finish(&chunks);
        assert_eq!(
            result.finish_reason(),
            pb::FinishReason::Stop,
            "{run_id} ({agent}) finished on B: {result:?}"
        );
        assert!(
            result.text.contains("more words to stream"),
            "{run_id}: {:?}",
            result.text
        );
        if agent == "fetcher" {
            // Continued from its checkpoint: the same call again, under the same key, then the
            // answer.
            assert_eq!(result.steps.len(), 2, "{run_id}: {:?}", result.steps);
            let keys = keys.lock().expect("keys").clone();
            let mine: Vec<&String> = keys.iter().filter(|k| k.starts_with(&run_id)).collect();
            assert_eq!(
                mine.len(),
                2,
                "{run_id}: called on A and again on B: {keys:?}"
            );
            assert_eq!(mine[0], mine[1], "under one idempotency key");
        }
        if agent == "planner" {
            // Started again (task tools only): one task_write per attempt, the list replaced.
            assert_eq!(result.steps.len(), 2, "{run_id}: {:?}", result.steps);
            let list = tasks
                .check(pb::CheckRequest {
                    thread_id: thread.clone(),
                    resource_id: "takeover".into(),
                })
                .await
                .expect("check")
                .into_inner();
            assert_eq!(list.tasks.len(), 2, "{thread}: {list:?}");
        }
    }
    assert_eq!(run_ids.len(), 8);
    // Each run's answering step reached the model twice: on A, cut, and again on B (the
    // fetchers' first step once: B ran its call from the checkpoint).
    let answers = mock
        .requests()
        .iter()
        .filter(|r| {
            let messages = r["messages"].as_array().cloned().unwrap_or_default();
            let tools = r["tools"].as_array().is_some_and(|t| !t.is_empty());
            !tools || messages.iter().any(|m| m["role"] == "tool")
        })
        .count();
    assert_eq!(answers, 16, "answering steps sent to the model");
    // The fetchers' prompts are the same before and after the takeover (a checkpoint is not a
    // resume after a decision: the task-list guidance stays in the system message).
    let systems: HashSet<String> = mock
        .requests()
        .iter()
        .filter(|r| offers(r, "lookup"))
        .map(|r| {
            let messages = r["messages"].as_array().cloned().unwrap_or_default();
            let system: Vec<Value> = messages
                .into_iter()
                .filter(|m| m["role"] == "system")
                .collect();
            Value::Array(system).to_string()
        })
        .collect();
    assert_eq!(
        systems.len(),
        1,
        "the same system messages for every fetcher step: {systems:?}"
    );
    b.stop().await.expect("B stops");
}

async fn an_abort_reaches_a_run_whose_replica_died(redis: Deployment) {
    // The mock model is kept: dropped, it would end the run on A with an error first.
    let Pair {
        mock,
        a,
        b,
        mut on_a,
        _dir,
        ..
    } = Pair::start(&redis).await;
    // An answer far longer than the test: the run can only end by the abort, on any machine.
    mock.set_fallback(Arc::new(|_| MockReply::Slow {
        text: "still thinking about it".into(),
        delay_per_delta: Duration::from_secs(30),
    }));
    let mut stream = on_a
        .generate(generate("plain", &support::unique("orphan")))
        .await
        .expect("generate on A")
        .into_inner();
    let run_id = stream
        .next()
        .await
        .expect("chunk")
        .expect("no error")
        .run_id;
    a.kill();
    drop(stream);

    // Nobody executes it now; the abort is kept in its record for whoever takes it over.
    let mut on_b = support::agents_client(&b).await;
    let aborted = on_b
        .abort(pb::AbortRequest {
            run_id: run_id.clone(),
            reason: "no longer needed".into(),
        })
        .await
        .expect("abort")
        .into_inner();
    let chunks = support::collect(
        on_b.observe(pb::ObserveRequest {
            run_id,
            after_sequence: 0,
        })
        .await
        .expect("observe")
        .into_inner(),
    )
    .await;
    assert!(
        aborted.aborted,
        "the run had ended before the abort: {chunks:?}"
    );
    assert_eq!(
        support::finish(&chunks).finish_reason(),
        pb::FinishReason::Aborted
    );
    let sequences: Vec<u64> = chunks.iter().map(|c| c.sequence).collect();
    assert_eq!(sequences, (1..=sequences.len() as u64).collect::<Vec<_>>());
    b.stop().await.expect("B stops");
}

on_each_redis!(
    killing_the_executing_replica_hands_every_run_to_the_survivor,
    an_abort_reaches_a_run_whose_replica_died,
);
