//! Semantic recall through a real server on both stores, against the scripted mock model, whose
//! `/v1/embeddings` gives deterministic vectors (texts sharing words are similar): turns save
//! messages and their embeddings, and a later turn's recorded prompt holds the right earlier
//! messages in the reference's shape — same-thread hits as history, other threads' hits as one
//! system message — by scope and message range; embedding failures fail the run.

mod support;

use std::collections::BTreeSet;

use agentd::memory::recall::format_other_threads;
use agentd::model::{MockOpenAi, MockReply};
use agentd::pb;
use serde_json::Value;
use support::redis::Deployment;
use tonic::Code;

const AGENTS: &str = r#"
[[agents]]
id = "recall"
instructions = "You remember."
model = "mock/chat"
[agents.memory]
embedder = "mock/embed"
semantic_recall = { top_k = 1, message_range = 1, scope = "resource" }

[[agents]]
id = "plain"
instructions = "You forget."
model = "mock/chat"
"#;

/// A store to run against and what keeps it alive.
struct Backend {
    url: String,
    dir: tempfile::TempDir,
    _redis: Option<Deployment>,
}

impl Backend {
    fn embedded() -> Self {
        Self {
            url: "embedded".into(),
            dir: tempfile::tempdir().expect("temp dir"),
            _redis: None,
        }
    }

    fn redis(redis: Deployment) -> Self {
        Self {
            url: redis.url(),
            dir: tempfile::tempdir().expect("temp dir"),
            _redis: Some(redis),
        }
    }
}

/// Runs each case on the embedded store, on a private redis-server and on a Redis Cluster.
macro_rules! on_every_store {
    ($($case:ident),* $(,)?) => {
        mod on_embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Backend::embedded()).await;
                }
            )*
        }
        mod on_redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Backend::redis(super::Deployment::node())).await;
                }
            )*
        }
        mod on_redis_cluster {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Backend::redis(super::Deployment::cluster())).await;
                }
            )*
        }
    };
}

on_every_store!(
    same_thread_hits_come_back_as_history_with_their_range,
    other_threads_hits_become_one_system_message_and_thread_scope_keeps_them_out,
    embedding_failure_fails_the_run_and_saves_nothing,
    recall_off_costs_no_embedding_call,
);

struct Env {
    mock: MockOpenAi,
    server: agentd::server::RunningServer,
    client: pb::agent_service_client::AgentServiceClient<tonic::transport::Channel>,
    _backend: Backend,
}

async fn env(backend: Backend) -> Env {
    let mock = MockOpenAi::start().await.expect("mock");
    let config = support::agent_config(&mock, AGENTS, &backend.url, backend.dir.path());
    let server = support::start(config).await;
    let client = support::agents_client(&server).await;
    Env {
        mock,
        server,
        client,
        _backend: backend,
    }
}

fn turn(agent: &str, thread: &str, resource: &str, prompt: &str) -> pb::GenerateRequest {
    pb::GenerateRequest {
        agent_id: agent.into(),
        prompt: prompt.into(),
        memory: Some(support::memory(thread, resource, Some(2))),
        ..Default::default()
    }
}

fn with_recall(
    mut request: pb::GenerateRequest,
    recall: pb::SemanticRecall,
) -> pb::GenerateRequest {
    if let Some(options) = request.memory.as_mut().and_then(|m| m.options.as_mut()) {
        options.semantic_recall = Some(recall);
    }
    request
}

/// Runs one turn answered with `answer`; returns its chunks.
async fn say(env: &mut Env, request: pb::GenerateRequest, answer: &str) -> Vec<pb::Chunk> {
    env.mock.push(MockReply::Text(answer.into()));
    let chunks = support::generate(&mut env.client, request).await;
    let result = support::finish(&chunks);
    assert!(result.error.is_none(), "{:?}", result.error);
    chunks
}

/// (role, content) of the messages of the model's last request.
fn last_prompt(mock: &MockOpenAi) -> Vec<(String, String)> {
    let requests = mock.requests();
    let messages = requests.last().expect("a model request")["messages"]
        .as_array()
        .expect("messages")
        .clone();
    messages
        .iter()
        .map(|m| {
            let content = match &m["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join(""),
                _ => String::new(),
            };
            (m["role"].as_str().unwrap_or_default().to_owned(), content)
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(r, c)| ((*r).to_owned(), (*c).to_owned()))
        .collect()
}

async fn same_thread_hits_come_back_as_history_with_their_range(backend: Backend) {
    let mut env = env(backend).await;
    let (thread, resource) = (support::unique("t"), support::unique("r"));
    let t = |prompt: &str| turn("recall", &thread, &resource, prompt);
    say(
        &mut env,
        t("my sourdough starter smells like vinegar"),
        "Feed it flour daily.",
    )
    .await;
    // One query embedding, then the turn's user and assistant texts in one batch.
    let embeds = env.mock.embedding_requests();
    assert_eq!(embeds.len(), 2, "{embeds:?}");
    assert_eq!(
        embeds[1]["input"],
        serde_json::json!([
            "my sourdough starter smells like vinegar",
            "Feed it flour daily."
        ])
    );
    assert_eq!(embeds[1]["model"], "embed");
    say(&mut env, t("what is the capital of France"), "Paris.").await;
    say(&mut env, t("name a good jazz album"), "Kind of Blue.").await;
    say(
        &mut env,
        t("how often should my sourdough starter eat"),
        "Daily.",
    )
    .await;
    // History is the last two rows; the hit (turn 1's user message) comes with one row after
    // it (the answer) and none before (it is the first), ahead of the history.
    assert_eq!(
        last_prompt(&env.mock),
        pairs(&[
            ("system", "You remember."),
            ("user", "my sourdough starter smells like vinegar"),
            ("assistant", "Feed it flour daily."),
            ("user", "name a good jazz album"),
            ("assistant", "Kind of Blue."),
            ("user", "how often should my sourdough starter eat"),
        ])
    );
    // A range of 0 takes the hit alone; the hit is the best match of the whole thread (turn 4's
    // question now shares the most words), and what the history holds is not repeated.
    let only_hit = pb::SemanticRecall {
        message_range: Some(pb::RecallMessageRange {
            before: 0,
            after: 0,
        }),
        ..Default::default()
    };
    let request = with_recall(t("capital of France again please"), only_hit);
    say(&mut env, request, "Still Paris.").await;
    assert_eq!(
        last_prompt(&env.mock),
        pairs(&[
            ("system", "You remember."),
            ("user", "what is the capital of France"),
            ("user", "how often should my sourdough starter eat"),
            ("assistant", "Daily."),
            ("user", "capital of France again please"),
        ])
    );
    env.server.stop().await.expect("stop");
}

/// The recall message for one earlier turn whose messages were created between `from` and
/// `to` (Unix ms): every way the two times may fall on either side of a minute.
fn other_thread_candidates(from: i64, to: i64, user: &str, assistant: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for u in [from, to] {
        for a in [from, to] {
            if a >= u {
                let lines = [
                    (u, "user", user.to_owned()),
                    (a, "assistant", assistant.to_owned()),
                ];
                out.insert(format_other_threads(&lines));
            }
        }
    }
    out
}

fn now_ms() -> i64 {
    agentd::agent::message::now_ms()
}

async fn other_threads_hits_become_one_system_message_and_thread_scope_keeps_them_out(
    backend: Backend,
) {
    let mut env = env(backend).await;
    let resource = support::unique("r");
    let (a, b, c) = (
        support::unique("a"),
        support::unique("b"),
        support::unique("c"),
    );
    let before = now_ms();
    say(
        &mut env,
        turn(
            "recall",
            &a,
            &resource,
            "my sourdough starter smells like vinegar",
        ),
        "Feed it flour daily.",
    )
    .await;
    let after = now_ms();
    say(
        &mut env,
        turn(
            "recall",
            &b,
            &resource,
            "how do I revive a sourdough starter",
        ),
        "Warm water.",
    )
    .await;
    let prompt = last_prompt(&env.mock);
    assert_eq!(prompt.len(), 3, "{prompt:?}");
    assert_eq!(prompt[0], ("system".into(), "You remember.".into()));
    assert_eq!(
        prompt[2],
        ("user".into(), "how do I revive a sourdough starter".into())
    );
    assert_eq!(prompt[1].0, "system");
    let candidates = other_thread_candidates(
        before,
        after,
        "my sourdough starter smells like vinegar",
        "Feed it flour daily.",
    );
    assert!(
        candidates.contains(&prompt[1].1),
        "{:?}\nnot one of {candidates:#?}",
        prompt[1].1
    );
    // Another resource sees nothing of it.
    let stranger = support::unique("r");
    say(
        &mut env,
        turn("recall", &c, &stranger, "sourdough starter help"),
        "Sure.",
    )
    .await;
    assert_eq!(last_prompt(&env.mock).len(), 2);
    // Thread scope searches the run's own thread only.
    let thread_scope = pb::SemanticRecall {
        scope: pb::RecallScope::Thread.into(),
        ..Default::default()
    };
    let fresh = support::unique("d");
    let request = with_recall(
        turn("recall", &fresh, &resource, "sourdough starter again"),
        thread_scope,
    );
    say(&mut env, request, "Sure.").await;
    assert_eq!(
        last_prompt(&env.mock),
        pairs(&[
            ("system", "You remember."),
            ("user", "sourdough starter again")
        ])
    );
    env.server.stop().await.expect("stop");
}

async fn embedding_failure_fails_the_run_and_saves_nothing(backend: Backend) {
    let mut env = env(backend).await;
    let (thread, resource) = (support::unique("t"), support::unique("r"));
    env.mock.fail_embeddings(400, "input too long");
    let chunks = support::generate(
        &mut env.client,
        turn("recall", &thread, &resource, "hello there"),
    )
    .await;
    assert_eq!(support::kinds(&chunks), ["start", "error", "finish"]);
    let error = support::finish(&chunks).error.expect("an error");
    assert_eq!(
        (error.id.as_str(), error.category.as_str()),
        ("EMBEDDING_FAILED", "MODEL")
    );
    assert!(
        error.message.contains("mock/embed") && error.message.contains("400"),
        "{}",
        error.message
    );
    assert!(env.mock.requests().is_empty(), "the model is never called");
    // Embedding what a turn saves fails before anything is saved: the query's embedding
    // (the next request) passes, the save's (the one after) fails.
    let next = env.mock.embedding_requests().len();
    env.mock.fail_embedding_request(next + 1, 503, "overloaded");
    env.mock.push(MockReply::Text("Hi.".into()));
    let request = turn("recall", &thread, &resource, "hello again");
    let chunks = support::generate(&mut env.client, request).await;
    let error = support::finish(&chunks).error.expect("an error");
    assert_eq!(error.id, "EMBEDDING_FAILED");
    assert!(error.message.contains("503"), "{}", error.message);
    assert_eq!(env.mock.requests().len(), 1, "the model answered this one");
    say(
        &mut env,
        turn("recall", &thread, &resource, "third time"),
        "Ok.",
    )
    .await;
    let prompt = last_prompt(&env.mock);
    assert_eq!(
        prompt,
        pairs(&[("system", "You remember."), ("user", "third time")]),
        "the failed turns saved nothing"
    );
    env.server.stop().await.expect("stop");
}

async fn recall_off_costs_no_embedding_call(backend: Backend) {
    let mut env = env(backend).await;
    let (thread, resource) = (support::unique("t"), support::unique("r"));
    say(&mut env, turn("plain", &thread, &resource, "hello"), "Hi.").await;
    let off = pb::SemanticRecall {
        enabled: Some(false),
        ..Default::default()
    };
    let request = with_recall(
        turn("recall", &support::unique("t"), &resource, "hello"),
        off,
    );
    say(&mut env, request, "Hi.").await;
    assert!(env.mock.embedding_requests().is_empty());
    // Asking for recall on an agent without an embedder is refused, naming the field.
    let request = with_recall(
        turn("plain", &thread, &resource, "hi"),
        pb::SemanticRecall::default(),
    );
    let status = env.client.generate(request).await.expect_err("refused");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().contains("memory.options.semantic_recall"),
        "{}",
        status.message()
    );
    let bad = pb::SemanticRecall {
        top_k: Some(0),
        ..Default::default()
    };
    let request = with_recall(turn("recall", &thread, &resource, "hi"), bad);
    let status = env.client.generate(request).await.expect_err("refused");
    assert!(
        status.message().contains("semantic_recall.top_k"),
        "{}",
        status.message()
    );
    env.server.stop().await.expect("stop");
}
