//! A server's life around its store and its shutdown: it starts while Redis is down and turns
//! SERVING when Redis comes up; a failed store call turns health NOT_SERVING at once; at a
//! shutdown signal health is NOT_SERVING while calls are still accepted (the pre-drain), then
//! open Watch and Observe streams end UNAVAILABLE so clients reconnect elsewhere; a run that
//! ends while the store does not answer has its end written once it does.

mod support;

use std::time::{Duration, Instant};

use agentd::model::{MockOpenAi, MockReply};
use agentd::pb;
use futures::StreamExt;
use support::redis::RedisServer;
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

fn check(thread: &str) -> pb::CheckRequest {
    pb::CheckRequest {
        thread_id: thread.into(),
        resource_id: "lifecycle".into(),
    }
}

/// Waits until `service` reports `want`; false after `within`.
async fn health_becomes(
    health: &HealthClient<tonic::transport::Channel>,
    service: &str,
    want: ServingStatus,
    within: Duration,
) -> bool {
    support::eventually(within, || {
        let mut h = health.clone();
        async move { support::health_status(&mut h, service).await == Some(want) }
    })
    .await
}

/// The error a stream ends with (skipping its items), within ten seconds; a clean end fails.
async fn ending_error<T>(stream: &mut tonic::Streaming<T>) -> tonic::Status {
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(item) = stream.next().await {
            if let Err(status) = item {
                return Some(status);
            }
        }
        None
    })
    .await
    .expect("the stream ends in time");
    ended.expect("it ends with an error, not a clean end")
}

/// Starts the `plain` agent on its (slow) scripted answer: its stream and run id.
async fn start_slow_run(
    agents: &mut pb::agent_service_client::AgentServiceClient<tonic::transport::Channel>,
) -> (tonic::Streaming<pb::Chunk>, String) {
    let mut run = agents
        .generate(pb::GenerateRequest {
            agent_id: "plain".into(),
            prompt: "count slowly".into(),
            ..Default::default()
        })
        .await
        .expect("generate starts")
        .into_inner();
    let run_id = run
        .next()
        .await
        .expect("a first chunk")
        .expect("no error")
        .run_id;
    (run, run_id)
}

#[tokio::test]
async fn starts_while_redis_is_down_and_serves_once_it_comes_up() {
    let mut redis = RedisServer::start();
    redis.stop();
    let server = support::start_redis(&redis.url()).await;
    let channel = support::channel(&server).await;
    let mut health = HealthClient::new(channel.clone());
    let mut tasks = pb::task_service_client::TaskServiceClient::new(channel);

    assert_eq!(
        support::health_status(&mut health, "").await,
        Some(ServingStatus::NotServing)
    );
    assert_eq!(
        support::health_status(&mut health, "liveness").await,
        Some(ServingStatus::Serving),
        "the process is alive: no restart wanted"
    );
    let down = tasks.check(check("t")).await.expect_err("no store yet");
    assert_eq!(down.code(), Code::Unavailable, "{down:?}");
    assert!(
        down.message().contains("not reachable yet"),
        "{}",
        down.message()
    );

    redis.start_again();
    let up_at = Instant::now();
    assert!(
        health_becomes(
            &health,
            "agentd.v1.TaskService",
            ServingStatus::Serving,
            Duration::from_secs(15)
        )
        .await,
        "SERVING once Redis is up"
    );
    // A figure for the log, not an assertion (timings belong in benchmarks).
    eprintln!("SERVING {:?} after Redis came up", up_at.elapsed());
    tasks.check(check("t")).await.expect("calls work");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_failed_store_call_turns_health_not_serving_before_the_next_probe() {
    let mut redis = RedisServer::start();
    let dir = tempfile::tempdir().expect("dir");
    let mut config = support::test_config(&redis.url(), dir.path());
    // A probe a minute apart: only the failed call itself can flip health in this test.
    config.server.health_interval_ms = 60_000;
    let server = support::start(config).await;
    let channel = support::channel(&server).await;
    let mut health = HealthClient::new(channel.clone());
    let mut tasks = pb::task_service_client::TaskServiceClient::new(channel);
    assert_eq!(
        support::health_status(&mut health, "").await,
        Some(ServingStatus::Serving)
    );

    redis.stop();
    let failed = tasks.check(check("t")).await.expect_err("Redis is down");
    assert_eq!(failed.code(), Code::Unavailable, "{failed:?}");
    assert!(
        health_becomes(
            &health,
            "",
            ServingStatus::NotServing,
            Duration::from_secs(5)
        )
        .await,
        "NOT_SERVING right after the failed call"
    );

    // While down it probes often, so it comes back without waiting a minute.
    redis.start_again();
    assert!(
        health_becomes(&health, "", ServingStatus::Serving, Duration::from_secs(15)).await,
        "SERVING again once Redis is back"
    );
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn shutdown_pre_drains_then_ends_watch_and_observe_streams_unavailable() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push(MockReply::Slow {
        text: "one two three four five six seven eight".into(),
        delay_per_delta: Duration::from_millis(250),
    });
    let dir = tempfile::tempdir().expect("dir");
    let mut config = support::agent_config(&mock, support::AGENTS_TOML, "embedded", dir.path());
    config.server.pre_drain_ms = 1500;
    let server = support::start(config).await;
    let channel = support::channel(&server).await;
    let health = HealthClient::new(channel.clone());
    let mut tasks = pb::task_service_client::TaskServiceClient::new(channel.clone());
    let mut agents = pb::agent_service_client::AgentServiceClient::new(channel);

    let mut watch = tasks
        .watch(pb::WatchRequest {
            thread_id: "watched".into(),
            resource_id: "lifecycle".into(),
        })
        .await
        .expect("watch starts")
        .into_inner();
    watch
        .next()
        .await
        .expect("the current list")
        .expect("no error");
    let (run, run_id) = start_slow_run(&mut agents).await;
    let mut observe = agents
        .observe(pb::ObserveRequest {
            run_id,
            after_sequence: 0,
        })
        .await
        .expect("observe starts")
        .into_inner();

    server.shutdown_token().cancel();
    assert!(
        health_becomes(
            &health,
            "",
            ServingStatus::NotServing,
            Duration::from_secs(1)
        )
        .await,
        "NOT_SERVING as soon as the signal comes"
    );
    // Still accepting during the pre-drain: a new connection and a new call.
    let mut late = support::tasks_client(&server).await;
    late.check(check("late"))
        .await
        .expect("calls are accepted during the pre-drain");

    let status = ending_error(&mut watch).await;
    assert_eq!(status.code(), Code::Unavailable, "Watch: {status:?}");
    let status = ending_error(&mut observe).await;
    assert_eq!(
        status.code(),
        Code::Unavailable,
        "Observe, while the run goes on: {status:?}"
    );

    // The run itself finishes within the grace period, on its own stream.
    let rest = support::collect(run).await;
    assert_eq!(
        support::finish(&rest).finish_reason(),
        pb::FinishReason::Stop
    );
    server.wait().await.expect("clean stop");
}

#[tokio::test]
async fn a_runs_end_is_written_once_the_store_answers_again() {
    let redis = RedisServer::start();
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push(MockReply::Slow {
        text: "one two three four".into(),
        delay_per_delta: Duration::from_millis(300),
    });
    let dir = tempfile::tempdir().expect("dir");
    let config = support::agent_config(&mock, support::AGENTS_TOML, &redis.url(), dir.path());
    let server = support::start(config).await;
    let mut agents = support::agents_client(&server).await;
    let (run, run_id) = start_slow_run(&mut agents).await;

    // Redis freezes while the run streams: the run ends meanwhile, and its end cannot be
    // written (each attempt times out after the store's 2 s deadline) until Redis answers.
    redis.pause();
    let rest = tokio::spawn(support::collect(run));
    tokio::time::sleep(Duration::from_secs(4)).await;
    redis.resume();
    // `finish` is sent once the end is recorded: it comes, and the run reads as ended.
    let rest = rest.await.expect("the stream ends");
    assert_eq!(
        support::finish(&rest).finish_reason(),
        pb::FinishReason::Stop
    );
    let aborted = agents
        .abort(pb::AbortRequest {
            run_id,
            reason: String::new(),
        })
        .await
        .expect("abort answers")
        .into_inner();
    assert!(
        !aborted.aborted,
        "the run is recorded as ended, not running"
    );
    server.stop().await.expect("clean stop");
}
