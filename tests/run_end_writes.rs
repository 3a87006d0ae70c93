//! A run's end costs one store call: its last messages and its record's end are written
//! together, counted on a real Redis with `MONITOR`, for a run that completes and for one that
//! suspends for an approval and is continued after it. Its lease is renewed while it runs and
//! its record is never written after its end; a run another replica took over writes neither.

mod support;

use agentd::model::{MockOpenAi, MockReply};
use agentd::pb;
use agentd::pb::agent_service_client::AgentServiceClient;
use agentd::pb::approval_service_client::ApprovalServiceClient;
use agentd::pb::chunk::Payload;
use agentd::server::RunningServer;
use futures::StreamExt;
use serde_json::json;
use support::redis::{Monitor, RedisServer};
use tonic::transport::Channel;

const AGENTS: &str = r#"
[[agents]]
id = "plain"
instructions = "You answer briefly."
model = "mock/test-model"

[[agents]]
id = "guarded"
instructions = "Act carefully."
model = "mock/test-model"
require_approval = ["act"]
[[agents.http_tools]]
name = "act"
description = "Does something irreversible (nothing listens: its call fails, the run goes on)"
url = "http://127.0.0.1:9/act"
"#;

/// The commands that appended to `thread`'s messages: those given its message list and its
/// resource's listings (a read of the thread is given no listing).
fn appends_to(commands: &[String], thread: &str) -> Vec<String> {
    let msgs = format!("agentd:{{t:{thread}}}:msgs");
    commands
        .iter()
        .filter(|c| c.contains(&msgs) && c.contains(":threads:created"))
        .cloned()
        .collect()
}

/// A server on a private Redis with the agents above, and its model.
struct Env {
    server: RunningServer,
    agents: AgentServiceClient<Channel>,
    mock: MockOpenAi,
    // Declared last: dropped after the server.
    _dir: tempfile::TempDir,
    redis: RedisServer,
}

impl Env {
    /// Starts it with `lease_ms` as the run lease when given.
    async fn start(lease_ms: Option<u64>) -> Self {
        let redis = RedisServer::start();
        let mock = MockOpenAi::start().await.expect("mock");
        let dir = tempfile::tempdir().expect("dir");
        let mut config = support::agent_config(&mock, AGENTS, &redis.url(), dir.path());
        if let Some(lease) = lease_ms {
            config.limits.run_lease_ms = lease;
        }
        let server = support::start(config).await;
        let agents = support::agents_client(&server).await;
        Self {
            server,
            agents,
            mock,
            _dir: dir,
            redis,
        }
    }

    /// Monitors the server's calls from now, after a first run has loaded the store's scripts
    /// (MONITOR prints a call rejected with `NOSCRIPT` too, which would double it).
    async fn monitor(&mut self) -> Monitor {
        self.mock.push(MockReply::Text("Warm.".into()));
        let thread = support::unique("warm-up");
        support::generate(&mut self.agents, request("plain", &thread)).await;
        Monitor::start(self.redis.port())
    }
}

fn run_key(run_id: &str) -> String {
    format!("agentd:{{r:{run_id}}}:run")
}

fn request(agent: &str, thread: &str) -> pb::GenerateRequest {
    pb::GenerateRequest {
        agent_id: agent.into(),
        prompt: "Go".into(),
        memory: Some(support::memory(thread, "alice", None)),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_runs_messages_are_saved_with_its_end_in_one_call() {
    let mut env = Env::start(None).await;
    let monitor = env.monitor().await;
    let (agents, mock) = (&mut env.agents, &env.mock);

    let thread = support::unique("t");
    mock.push(MockReply::Text("Hello there.".into()));
    let chunks = support::generate(agents, request("plain", &thread)).await;
    let result = support::finish(&chunks);
    assert_eq!(result.text, "Hello there.");

    let commands = monitor.commands();
    let appends = appends_to(&commands, &thread);
    assert_eq!(
        appends.len(),
        1,
        "one call appends the messages: {appends:#?}"
    );
    assert!(
        appends[0].contains(&run_key(&result.run_id)),
        "the same call writes the run's record: {}",
        appends[0]
    );
    // Both landed: the thread holds the prompt and the answer, the run reads as ended.
    support::generate(agents, request("plain", &thread)).await;
    let texts = support::sent_texts(mock, 2);
    assert!(
        texts.iter().any(|t| t == "Go") && texts.iter().any(|t| t == "Hello there."),
        "{texts:?}"
    );
    let aborted = agents
        .abort(pb::AbortRequest {
            run_id: result.run_id.clone(),
            reason: String::new(),
        })
        .await
        .expect("abort answers")
        .into_inner();
    assert!(!aborted.aborted, "the run is recorded as ended");
    env.server.stop().await.expect("clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_run_saves_with_its_suspension_and_again_with_its_end() {
    let mut env = Env::start(None).await;
    let monitor = env.monitor().await;
    let (agents, mock) = (&mut env.agents, &env.mock);

    let thread = support::unique("t");
    mock.push(MockReply::ToolCalls(vec![("act".into(), json!({"n": 1}))]));
    mock.push(MockReply::Text("Done.".into()));
    let chunks = support::generate(agents, request("guarded", &thread)).await;
    let suspended = support::finish(&chunks);
    assert_eq!(suspended.finish_reason(), pb::FinishReason::Suspended);
    let call_id = chunks
        .iter()
        .find_map(|c| match &c.payload {
            Some(Payload::ToolCallApproval(s)) => Some(s.tool_call_id.clone()),
            _ => None,
        })
        .expect("an approval is asked for");
    let commands = monitor.commands();
    let appends = appends_to(&commands, &thread);
    assert_eq!(appends.len(), 1, "{appends:#?}");
    assert!(appends[0].contains(&run_key(&suspended.run_id)));

    let mut approvals = ApprovalServiceClient::new(support::channel(&env.server).await);
    let stream = approvals
        .approve(pb::ApproveRequest {
            run_id: suspended.run_id.clone(),
            tool_call_id: call_id,
            ..Default::default()
        })
        .await
        .expect("approved")
        .into_inner();
    let rest = support::collect(stream).await;
    let result = support::finish(&rest);
    assert_eq!(result.text, "Done.");
    let appends = appends_to(&monitor.commands(), &thread);
    assert_eq!(appends.len(), 2, "{appends:#?}");
    assert!(appends[1].contains(&run_key(&suspended.run_id)));
    env.server.stop().await.expect("clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_is_renewed_while_a_run_streams_and_never_after_its_end() {
    // Renewed every 100 ms.
    let mut env = Env::start(Some(300)).await;
    let (agents, mock, redis) = (&mut env.agents, &env.mock, &env.redis);
    mock.push(MockReply::Slow {
        text: "one two three four five".into(),
        delay_per_delta: std::time::Duration::from_millis(150),
    });
    let thread = support::unique("t");
    let chunks = support::generate(agents, request("plain", &thread)).await;
    let run_id = support::finish(&chunks).run_id.clone();

    let version = || {
        redis
            .cli(&["hget", &run_key(&run_id), "v"])
            .trim()
            .to_owned()
    };
    let ended_at: u64 = version().parse().expect("a version");
    // Written at its start, renewed several times over ~0.9 s, then ended.
    assert!(ended_at >= 4, "renewals while it ran: version {ended_at}");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(
        version(),
        ended_at.to_string(),
        "nothing writes the record after its end"
    );
    let leased = redis.cli(&["zscore", "agentd:run-leases", &run_id]);
    assert!(leased.trim().is_empty(), "off the lease list: {leased:?}");
    env.server.stop().await.expect("clean stop");
}

/// A run streaming `text` slowly on a fresh thread, which another replica claims after its
/// first chunk: the same record under another owner, one version on (as a takeover writes
/// it). Returns the rest of the run's stream, its thread, its record's key and the record as
/// claimed.
async fn run_taken_over(
    env: &mut Env,
    text: &str,
) -> (tonic::Streaming<pb::Chunk>, String, String, String) {
    env.mock.push(MockReply::Slow {
        text: text.into(),
        delay_per_delta: std::time::Duration::from_millis(200),
    });
    let thread = support::unique("t");
    let mut run = env
        .agents
        .generate(request("plain", &thread))
        .await
        .expect("generate starts")
        .into_inner();
    let first = run.next().await.expect("a first chunk").expect("no error");
    let key = run_key(&first.run_id);
    let stored = env.redis.cli(&["hget", &key, "value"]);
    let mut record: serde_json::Value = serde_json::from_str(stored.trim()).expect("a record");
    record["owner"] = json!("another-replica");
    let taken = record.to_string();
    env.redis.cli(&["hset", &key, "value", &taken]);
    env.redis.cli(&["hincrby", &key, "v", "1"]);
    (run, thread, key, taken)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_another_replica_took_over_writes_nothing_at_its_end() {
    let mut env = Env::start(None).await;
    let (run, thread, key, taken) = run_taken_over(&mut env, "one two three").await;

    let rest = support::collect(run).await;
    assert_eq!(support::finish(&rest).text, "one two three");
    // Its end is the new owner's: neither the record nor the thread was written.
    assert_eq!(env.redis.cli(&["hget", &key, "value"]).trim(), taken);
    let msgs = format!("agentd:{{t:{thread}}}:msgs");
    assert_eq!(env.redis.cli(&["llen", &msgs]).trim(), "0");
    env.server.stop().await.expect("clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_that_finds_the_run_taken_over_stops_it_here() {
    // Renewed every 100 ms; the answer would take ~2 s.
    let mut env = Env::start(Some(300)).await;
    let text = "one two three four five six seven eight nine ten";
    let (run, _thread, key, taken) = run_taken_over(&mut env, text).await;

    // The next renewal finds out and stops the run here, long before its answer ends.
    let rest = support::collect(run).await;
    let finish = support::finish(&rest);
    assert_eq!(
        finish.finish_reason(),
        pb::FinishReason::Aborted,
        "{rest:?}"
    );
    assert!(
        !finish.text.contains("ten"),
        "stopped mid-answer: {:?}",
        finish.text
    );
    assert!(
        rest.iter().any(|c| matches!(
            &c.payload,
            Some(Payload::Abort(a)) if a.reason == "Taken over by another server"
        )),
        "{rest:?}"
    );
    assert_eq!(env.redis.cli(&["hget", &key, "value"]).trim(), taken);
    env.server.stop().await.expect("clean stop");
}
