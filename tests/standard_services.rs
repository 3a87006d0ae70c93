//! The standard gRPC services: health follows the store; reflection (v1 and v1alpha) lists
//! every service, checked with real reflection clients.

mod support;

use std::time::Duration;

use agentd::pb;
use futures::StreamExt;
use support::redis::RedisServer;
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use support::health_status as status;

#[tokio::test]
async fn health_follows_redis_down_and_back() {
    let mut redis = RedisServer::start();
    let server = support::start_redis(&redis.url()).await;
    let channel = support::channel(&server).await;
    let mut health = HealthClient::new(channel.clone());
    let mut tasks = pb::task_service_client::TaskServiceClient::new(channel);
    let check = || pb::CheckRequest {
        thread_id: "health-thread".into(),
        resource_id: "health-resource".into(),
    };

    for service in [
        "",
        "agentd.v1.TaskService",
        "agentd.v1.AgentService",
        "agentd.v1.ThreadService",
    ] {
        assert!(
            support::eventually(Duration::from_secs(10), || {
                let mut h = health.clone();
                async move { status(&mut h, service).await == Some(ServingStatus::Serving) }
            })
            .await,
            "{service:?} SERVING while Redis is up"
        );
    }
    tasks.check(check()).await.expect("works while up");

    redis.stop();
    assert!(
        support::eventually(Duration::from_secs(15), || {
            let mut h = health.clone();
            async move {
                status(&mut h, "agentd.v1.TaskService").await == Some(ServingStatus::NotServing)
            }
        })
        .await,
        "NOT_SERVING while Redis is down"
    );
    assert_eq!(
        status(&mut health, "").await,
        Some(ServingStatus::NotServing)
    );
    assert_eq!(
        status(&mut health, "liveness").await,
        Some(ServingStatus::Serving),
        "liveness does not depend on the store"
    );
    let outage = tokio::time::timeout(Duration::from_secs(10), tasks.check(check()))
        .await
        .expect("fails fast, no hang")
        .expect_err("store down");
    assert_eq!(outage.code(), Code::Unavailable, "{outage:?}");

    redis.start_again();
    assert!(
        support::eventually(Duration::from_secs(15), || {
            let mut h = health.clone();
            async move { status(&mut h, "agentd.v1.TaskService").await == Some(ServingStatus::Serving) }
        })
        .await,
        "SERVING again once Redis is back"
    );
    assert!(
        support::eventually(Duration::from_secs(10), || {
            let mut t = tasks.clone();
            async move { t.check(check()).await.is_ok() }
        })
        .await,
        "calls work again"
    );
    server.stop().await.expect("clean stop");
}

const EXPECTED_SERVICES: [&str; 6] = [
    "agentd.v1.AgentService",
    "agentd.v1.ApprovalService",
    "agentd.v1.TaskService",
    "agentd.v1.ThreadService",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
];

#[tokio::test]
async fn reflection_v1_lists_services_and_resolves_symbols() {
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::{ServerReflectionRequest, ServerReflectionResponse};

    let dir = tempfile::tempdir().expect("temp dir");
    let server = support::start_embedded(dir.path()).await;
    let mut client = ServerReflectionClient::new(support::channel(&server).await);
    let ask = |request: MessageRequest| ServerReflectionRequest {
        host: String::new(),
        message_request: Some(request),
    };
    let requests = futures::stream::iter(vec![
        ask(MessageRequest::ListServices(String::new())),
        ask(MessageRequest::FileContainingSymbol(
            "agentd.v1.TaskService".into(),
        )),
        ask(MessageRequest::FileContainingSymbol(
            "google.rpc.BadRequest".into(),
        )),
    ]);
    let responses: Vec<ServerReflectionResponse> = client
        .server_reflection_info(requests)
        .await
        .expect("reflection stream")
        .into_inner()
        .map(|r| r.expect("reflection response"))
        .collect()
        .await;
    let Some(MessageResponse::ListServicesResponse(list)) = &responses[0].message_response else {
        panic!("expected a service list, got {:?}", responses[0]);
    };
    let names: Vec<&str> = list.service.iter().map(|s| s.name.as_str()).collect();
    for expected in EXPECTED_SERVICES {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    let Some(MessageResponse::FileDescriptorResponse(files)) = &responses[1].message_response
    else {
        panic!("expected descriptors, got {:?}", responses[1]);
    };
    assert!(!files.file_descriptor_proto.is_empty());
    // The BadRequest details of INVALID_ARGUMENT statuses are described too, so grpcurl
    // prints them decoded.
    let Some(MessageResponse::FileDescriptorResponse(files)) = &responses[2].message_response
    else {
        panic!(
            "expected the error details' descriptor, got {:?}",
            responses[2]
        );
    };
    let described = files.file_descriptor_proto.iter().any(|bytes| {
        use prost::Message as _;
        prost_types::FileDescriptorProto::decode(bytes.as_slice()).is_ok_and(|f| {
            f.package() == "google.rpc"
                && f.message_type.iter().any(|m| {
                    m.name() == "BadRequest"
                        && m.field
                            .iter()
                            .any(|x| x.name() == "field_violations" && x.number() == 1)
                })
        })
    });
    assert!(described, "google.rpc.BadRequest is served by reflection");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn reflection_v1alpha_lists_services() {
    use tonic_reflection::pb::v1alpha::ServerReflectionRequest;
    use tonic_reflection::pb::v1alpha::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1alpha::server_reflection_response::MessageResponse;

    let dir = tempfile::tempdir().expect("temp dir");
    let server = support::start_embedded(dir.path()).await;
    let mut client = ServerReflectionClient::new(support::channel(&server).await);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = client
        .server_reflection_info(futures::stream::iter(vec![request]))
        .await
        .expect("reflection stream")
        .into_inner();
    let first = responses.next().await.expect("one answer").expect("ok");
    let Some(MessageResponse::ListServicesResponse(list)) = first.message_response else {
        panic!("expected a service list");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    assert!(
        names.iter().any(|n| n == "agentd.v1.TaskService"),
        "{names:?}"
    );
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn list_and_get_agents_from_config() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = agentd::config::Config::from_toml(
        r#"
        [[providers]]
        name = "local"
        base_url = "http://127.0.0.1:9/v1"
        [[agents]]
        id = "planner"
        name = "Planner"
        instructions = "Plan."
        model = "local/test-model"
        tools = ["tasks"]
        require_approval = ["task_write"]
        "#,
    )
    .expect("config parses");
    let base = support::test_config("embedded", dir.path());
    config.server = base.server;
    config.store = base.store;
    let server = support::start(config).await;
    let mut client =
        pb::agent_service_client::AgentServiceClient::new(support::channel(&server).await);
    let agents = client
        .list_agents(pb::ListAgentsRequest {})
        .await
        .expect("list")
        .into_inner()
        .agents;
    assert_eq!(agents.len(), 1);
    let planner = client
        .get_agent(pb::GetAgentRequest {
            agent_id: "planner".into(),
        })
        .await
        .expect("get")
        .into_inner();
    let tools: Vec<(&str, bool)> = planner
        .tools
        .iter()
        .map(|t| (t.name.as_str(), t.require_approval))
        .collect();
    assert_eq!(
        tools,
        [
            ("task_write", true),
            ("task_update", false),
            ("task_complete", false),
            ("task_check", false)
        ]
    );
    let missing = client
        .get_agent(pb::GetAgentRequest {
            agent_id: "nobody".into(),
        })
        .await
        .expect_err("unknown agent");
    assert_eq!(missing.code(), Code::NotFound);
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn api_keys_guard_every_agentd_method_but_not_health_or_reflection() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = support::test_config("embedded", dir.path());
    config.auth.api_keys = vec!["s3cret".into()];
    let server = support::start(config).await;
    let channel = support::channel(&server).await;
    let request = || pb::CheckRequest {
        thread_id: "t".into(),
        resource_id: "r".into(),
    };
    let mut tasks = pb::task_service_client::TaskServiceClient::new(channel.clone());
    let denied = tasks.check(request()).await.expect_err("no key");
    assert_eq!(denied.code(), Code::Unauthenticated);

    let mut with_key = tonic::Request::new(request());
    with_key
        .metadata_mut()
        .insert("authorization", "Bearer s3cret".parse().expect("header"));
    tasks.check(with_key).await.expect("right key");

    let mut wrong = tonic::Request::new(request());
    wrong
        .metadata_mut()
        .insert("authorization", "Bearer nope".parse().expect("header"));
    assert_eq!(
        tasks.check(wrong).await.expect_err("wrong key").code(),
        Code::Unauthenticated
    );

    // Every method of every agentd service, not just the one above.
    for (method, outcome) in support::call_every_method(&server, &[]).await {
        let status = outcome.expect_err("no key");
        assert_eq!(status.code(), Code::Unauthenticated, "{method:?}");
        assert_eq!(
            status.message(),
            "missing authorization: Bearer <api key>",
            "{method:?}"
        );
    }
    let wrong = [("authorization", "Bearer nope")];
    for (method, outcome) in support::call_every_method(&server, &wrong).await {
        let status = outcome.expect_err("wrong key");
        assert_eq!(status.code(), Code::Unauthenticated, "{method:?}");
        assert_eq!(status.message(), "invalid API key", "{method:?}");
    }
    let right = [("authorization", "Bearer s3cret")];
    for (method, outcome) in support::call_every_method(&server, &right).await {
        if let Err(status) = outcome {
            assert_ne!(
                status.code(),
                Code::Unauthenticated,
                "{method:?}: {status:?}"
            );
        }
    }

    let mut health = HealthClient::new(channel.clone());
    assert_eq!(
        status(&mut health, "liveness").await,
        Some(ServingStatus::Serving),
        "probes need no key"
    );
    assert_eq!(status(&mut health, "").await, Some(ServingStatus::Serving));

    // Reflection needs no key either (grpcurl discovery).
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    let list = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut reflection = ServerReflectionClient::new(channel.clone());
    let mut answers = reflection
        .server_reflection_info(futures::stream::iter(vec![list.clone()]))
        .await
        .expect("reflection v1 without a key")
        .into_inner();
    answers.next().await.expect("an answer").expect("ok");
    use tonic_reflection::pb::v1alpha as alpha;
    let mut reflection = alpha::server_reflection_client::ServerReflectionClient::new(channel);
    let list = alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(
            alpha::server_reflection_request::MessageRequest::ListServices(String::new()),
        ),
    };
    let mut answers = reflection
        .server_reflection_info(futures::stream::iter(vec![list]))
        .await
        .expect("reflection v1alpha without a key")
        .into_inner();
    answers.next().await.expect("an answer").expect("ok");
    server.stop().await.expect("clean stop");
}
