//! gRPC-web as a browser sends it (HTTP/1.1, binary and text modes, an Origin), with CORS.

use agentd::model::{MockOpenAi, MockReply};
use agentd::pb;
use agentd::server::RunningServer;
use base64::Engine as _;
use bytes::{Buf, Bytes};
use prost::Message;

use crate::support;

const ORIGIN: &str = "https://app.example.com";

async fn server() -> (RunningServer, MockOpenAi, tempfile::TempDir) {
    let mock = MockOpenAi::start().await.expect("mock model");
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = support::agent_config(&mock, support::AGENTS_TOML, "embedded", dir.path());
    config.web.cors_allowed_origins = vec![ORIGIN.into()];
    (support::start(config).await, mock, dir)
}

/// A browser-like client: HTTP/1.1 only.
fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .http1_only()
        .build()
        .expect("http client")
}

fn frame(message: &impl Message) -> Vec<u8> {
    let body = message.encode_to_vec();
    let mut out = vec![0];
    out.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// The data frames of a gRPC-web body and its trailer frame's text.
fn unframe(mut body: Bytes) -> (Vec<Bytes>, String) {
    let mut messages = Vec::new();
    let mut trailers = String::new();
    while body.remaining() >= 5 {
        let flag = body.get_u8();
        let len = body.get_u32() as usize;
        let payload = body.split_to(len);
        if flag & 0x80 != 0 {
            trailers = String::from_utf8(payload.to_vec()).expect("trailers are text");
        } else {
            messages.push(payload);
        }
    }
    assert!(body.is_empty(), "no bytes after the frames");
    (messages, trailers)
}

async fn call(
    server: &RunningServer,
    method: &str,
    content_type: &str,
    origin: &str,
    body: Vec<u8>,
) -> reqwest::Response {
    browser()
        .post(format!("http://{}/{method}", server.addr))
        .header("content-type", content_type)
        .header("accept", content_type)
        .header("x-grpc-web", "1")
        .header("origin", origin)
        .body(body)
        .send()
        .await
        .expect("grpc-web call")
}

/// A binary-mode gRPC-web call of `message` (`application/grpc-web+proto`).
async fn binary(
    server: &RunningServer,
    method: &str,
    origin: &str,
    message: &impl Message,
) -> reqwest::Response {
    call(
        server,
        method,
        "application/grpc-web+proto",
        origin,
        frame(message),
    )
    .await
}

#[tokio::test]
async fn preflight_and_unary_call_from_an_allowed_origin() {
    let (server, _mock, _dir) = server().await;
    let preflight = browser()
        .request(
            reqwest::Method::OPTIONS,
            format!("http://{}/agentd.v1.TaskService/Write", server.addr),
        )
        .header("origin", ORIGIN)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "content-type,x-grpc-web,authorization",
        )
        .send()
        .await
        .expect("preflight");
    assert!(preflight.status().is_success(), "{}", preflight.status());
    let headers = preflight.headers();
    assert_eq!(headers["access-control-allow-origin"], ORIGIN);
    let allowed = headers["access-control-allow-headers"].to_str().unwrap();
    assert!(
        allowed.contains("x-grpc-web") && allowed.contains("authorization"),
        "{allowed}"
    );

    let write = pb::WriteRequest {
        thread_id: "web".into(),
        resource_id: "alice".into(),
        tasks: vec![pb::TaskInput {
            content: "Ship the page".into(),
            status: pb::TaskStatus::InProgress.into(),
            active_form: "Shipping the page".into(),
            ..Default::default()
        }],
    };
    let response = binary(&server, "agentd.v1.TaskService/Write", ORIGIN, &write).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["access-control-allow-origin"], ORIGIN);
    let exposed = response.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(exposed.contains("grpc-status"), "{exposed}");
    assert_eq!(
        response.headers()["content-type"],
        "application/grpc-web+proto"
    );
    let (messages, trailers) = unframe(response.bytes().await.unwrap());
    assert!(trailers.contains("grpc-status:0"), "{trailers:?}");
    let result = pb::TaskResult::decode(messages[0].clone()).unwrap();
    assert_eq!(result.tasks[0].id, "task_ship_the_page");
    assert_eq!(result.tasks[0].status(), pb::TaskStatus::InProgress);

    // grpc-web-text (base64), the mode grpc-web's JavaScript client uses by default.
    let check = pb::CheckRequest {
        thread_id: "web".into(),
        resource_id: "alice".into(),
    };
    let text = base64::engine::general_purpose::STANDARD.encode(frame(&check));
    let response = call(
        &server,
        "agentd.v1.TaskService/Check",
        "application/grpc-web-text",
        ORIGIN,
        text.into_bytes(),
    )
    .await;
    assert_eq!(response.status(), 200);
    let body = response.text().await.unwrap();
    // Each frame is encoded on its own (padding included), so decode 4-character groups.
    let text: Vec<u8> = body.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    let decoded: Vec<u8> = text
        .chunks(4)
        .flat_map(|group| {
            base64::engine::general_purpose::STANDARD
                .decode(group)
                .unwrap()
        })
        .collect();
    let (messages, trailers) = unframe(Bytes::from(decoded));
    assert!(trailers.contains("grpc-status:0"), "{trailers:?}");
    let check = pb::TaskCheckResult::decode(messages[0].clone()).unwrap();
    assert_eq!(check.summary.unwrap().in_progress, 1);

    // Another origin gets no CORS grant, so its browser refuses to hand over the answer.
    let response = binary(
        &server,
        "agentd.v1.TaskService/Check",
        "https://evil.example",
        &pb::CheckRequest {
            thread_id: "web".into(),
            resource_id: "alice".into(),
        },
    )
    .await;
    assert!(
        response
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_run_streams_over_grpc_web() {
    let (server, mock, _dir) = server().await;
    mock.push(MockReply::Text("Hello, browser.".into()));
    let request = pb::GenerateRequest {
        agent_id: "plain".into(),
        prompt: "Hi".into(),
        ..Default::default()
    };
    let response = binary(&server, "agentd.v1.AgentService/Generate", ORIGIN, &request).await;
    assert_eq!(response.status(), 200);
    let (messages, trailers) = unframe(response.bytes().await.unwrap());
    assert!(trailers.contains("grpc-status:0"), "{trailers:?}");
    let chunks: Vec<pb::Chunk> = messages
        .into_iter()
        .map(|m| pb::Chunk::decode(m).unwrap())
        .collect();
    assert!(chunks.len() >= 4);
    assert_eq!(support::finish(&chunks).text, "Hello, browser.");

    // A failing call reports its status in the trailers (an unknown agent).
    let request = pb::GenerateRequest {
        agent_id: "nobody".into(),
        prompt: "Hi".into(),
        ..Default::default()
    };
    let response = binary(&server, "agentd.v1.AgentService/Generate", ORIGIN, &request).await;
    let status = response
        .headers()
        .get("grpc-status")
        .map(|v| v.to_str().unwrap().to_owned());
    let (_, trailers) = unframe(response.bytes().await.unwrap());
    let code = status.unwrap_or_else(|| trailers.clone());
    assert!(code.contains('5'), "NOT_FOUND, got {code:?} / {trailers:?}");
    server.stop().await.expect("clean stop");
}
