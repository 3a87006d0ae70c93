//! Garbage, random values and oversized requests to every RPC of a real server: every reply
//! is a status a client can read (message and details under 4 KiB), none is `INTERNAL` or
//! `UNKNOWN`, and the server keeps serving.

mod support;

use std::time::Duration;

use agentd::pb;
use bytes::{Buf, BufMut, Bytes};
use futures::StreamExt;
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::Channel;
use tonic::{Code, Status};

/// Every agentd method, with whether the client streams (the hook streams).
fn methods() -> Vec<(&'static str, &'static str, bool)> {
    let mut all: Vec<_> = support::AGENTD_METHODS
        .iter()
        .map(|&(service, method)| (service, method, false))
        .collect();
    all.push(("agentd.v1.AgentService", "GenerateWithHooks", true));
    all.push(("agentd.v1.ApprovalService", "ContinueWithHooks", true));
    all.push(("grpc.health.v1.Health", "Check", false));
    all
}

/// Sends and receives message bytes as they are.
#[derive(Clone, Copy, Default)]
struct RawCodec;

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> Self::Encoder {
        *self
    }

    fn decoder(&mut self) -> Self::Decoder {
        *self
    }
}

impl Encoder for RawCodec {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// A small deterministic generator (xorshift), so a failure names a reproducible case.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }

    /// Text of `len` chars mixing ASCII, controls and multi-byte characters.
    fn text(&mut self, len: usize) -> String {
        const CHARS: [char; 8] = ['a', 'Z', '0', '\u{0}', '\n', 'é', '語', '🦀'];
        (0..len)
            .map(|_| CHARS[self.below(CHARS.len() as u64) as usize])
            .collect()
    }

    /// A wire-valid message of random fields: the request type's own field numbers carry
    /// values of random kinds (varints, strings, nested garbage).
    fn fields(&mut self, depth: u32) -> Vec<u8> {
        let mut out = Vec::new();
        for _ in 0..self.below(8) {
            let field = 1 + self.below(30) as u32;
            match self.below(4) {
                0 => {
                    prost::encoding::encode_key(field, prost::encoding::WireType::Varint, &mut out);
                    prost::encoding::encode_varint(self.next() >> self.below(64), &mut out);
                }
                1 if depth < 4 => {
                    let nested = self.fields(depth + 1);
                    prost::encoding::bytes::encode(field, &nested, &mut out);
                }
                2 => {
                    let len = [0, 1, 40, 9000][self.below(4) as usize];
                    prost::encoding::string::encode(field, &self.text(len), &mut out);
                }
                _ => {
                    let len = self.below(64) as usize;
                    prost::encoding::bytes::encode(field, &self.bytes(len), &mut out);
                }
            }
        }
        out
    }
}

/// A Struct nested `depth` levels deep.
fn nested_struct(depth: usize) -> prost_types::Struct {
    let mut inner = prost_types::Struct::default();
    for _ in 0..depth {
        let value = prost_types::Value {
            kind: Some(prost_types::value::Kind::StructValue(inner)),
        };
        inner = prost_types::Struct {
            fields: [("a".to_owned(), value)].into(),
        };
    }
    inner
}

/// Requests built to provoke long errors: every field wrong at once, huge echoed values.
fn oversized(method: &str) -> Vec<Bytes> {
    let long_id = "x".repeat(9000);
    let bad_tasks = (0..60)
        .map(|i| pb::TaskInput {
            id: Some(format!("{i}-{}", "y".repeat(300))),
            content: "\u{0}".repeat(5000),
            active_form: "z".repeat(5000),
            ..Default::default()
        })
        .collect();
    let encoded: Vec<Bytes> = match method {
        "Write" => vec![
            pb::WriteRequest {
                thread_id: long_id.clone(),
                resource_id: long_id.clone(),
                tasks: bad_tasks,
            }
            .encode_to_vec()
            .into(),
        ],
        "GetAgent" => vec![
            pb::GetAgentRequest {
                agent_id: long_id.clone(),
            }
            .encode_to_vec()
            .into(),
        ],
        "Generate" => [20, 33, 50, 200]
            .into_iter()
            .map(|depth| {
                pb::GenerateRequest {
                    agent_id: long_id.clone(),
                    request_context: Some(nested_struct(depth)),
                    ..Default::default()
                }
                .encode_to_vec()
                .into()
            })
            .collect(),
        _ => Vec::new(),
    };
    encoded
}

/// Calls `path` with `body` and returns the status it ended with, if it failed (a success is
/// `None`: the first reply message, or nothing within a second for streams that wait).
async fn call(channel: &Channel, path: &str, client_streams: bool, body: Bytes) -> Option<Status> {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.expect("the connection is ready");
    let path = http::uri::PathAndQuery::try_from(path).expect("a valid path");
    let outcome = if client_streams {
        let requests = futures::stream::iter([body]);
        grpc.streaming(tonic::Request::new(requests), path, RawCodec)
            .await
    } else {
        grpc.server_streaming(tonic::Request::new(body), path, RawCodec)
            .await
    };
    let mut stream = match outcome {
        Ok(response) => response.into_inner(),
        Err(status) => return Some(status),
    };
    match tokio::time::timeout(Duration::from_secs(1), stream.next()).await {
        Ok(Some(Err(status))) => Some(status),
        _ => None,
    }
}

/// The size a client reads for a status: its message and its details.
fn reply_size(status: &Status) -> usize {
    status.message().len() + status.details().len()
}

#[tokio::test]
async fn hostile_requests_get_bounded_client_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_embedded(dir.path()).await;
    let channel = support::channel(&server).await;
    let mut rng = Rng(0x5eed_cafe_f00d_d00d);
    let mut calls = 0;
    let mut failures = Vec::new();
    for (service, method, client_streams) in methods() {
        let path = format!("/{service}/{method}");
        let mut bodies: Vec<(String, Bytes)> = Vec::new();
        for i in 0..12 {
            let len = rng.below(200) as usize + 1;
            bodies.push((format!("random bytes #{i}"), rng.bytes(len).into()));
        }
        for i in 0..12 {
            bodies.push((format!("random fields #{i}"), rng.fields(0).into()));
        }
        for (i, body) in oversized(method).into_iter().enumerate() {
            bodies.push((format!("oversized #{i}"), body));
        }
        for (case, body) in bodies {
            calls += 1;
            let Some(status) = call(&channel, &path, client_streams, body).await else {
                continue;
            };
            if matches!(status.code(), Code::Internal | Code::Unknown)
                || reply_size(&status) >= 4096
            {
                failures.push(format!(
                    "{path} {case}: {:?}, {} bytes: {}",
                    status.code(),
                    reply_size(&status),
                    agentd::error_text::prefix(status.message(), 300)
                ));
            }
        }
    }
    assert!(calls > 600, "{calls} calls");
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // Still serving, and still right: a valid call works after all of that.
    let mut tasks = support::tasks_client(&server).await;
    let checked = tasks
        .check(pb::CheckRequest {
            thread_id: support::unique("after-garbage"),
            resource_id: "r".into(),
        })
        .await;
    assert!(checked.is_ok(), "{checked:?}");
    server.stop().await.unwrap();
}

#[tokio::test]
async fn a_write_with_every_field_wrong_names_the_first_and_counts_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_embedded(dir.path()).await;
    let mut tasks = support::tasks_client(&server).await;
    let tasks_in = (0..60)
        .map(|i| pb::TaskInput {
            id: Some(format!("task-{i}")),
            content: String::new(),
            ..Default::default()
        })
        .collect();
    let status = tasks
        .write(pb::WriteRequest {
            thread_id: support::unique("bad-write"),
            resource_id: "r".into(),
            tasks: tasks_in,
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(reply_size(&status) < 4096, "{}", reply_size(&status));
    assert!(status.message().contains("more)"), "{}", status.message());
    let details = tonic_types::StatusExt::get_details_bad_request(&status)
        .unwrap_or_else(|| panic!("no details: {status:?}"));
    let last = details.field_violations.last().unwrap();
    assert!(
        last.description.ends_with("more not listed"),
        "{:?}",
        details.field_violations
    );
    server.stop().await.unwrap();
}
