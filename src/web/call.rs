//! One JSON call: the request's JSON (or NDJSON lines, for client streams) becomes gRPC frames,
//! the call goes through the gRPC service stack in process (auth, RPC span, limits and handlers
//! exactly as for gRPC), and its messages come back as JSON, NDJSON or Server-Sent Events.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use http::{Request, Response, Version};
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use prost::Message as _;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, MethodDescriptor};
use serde_json::Value;
use tonic::body::Body;
use tonic_types::{ErrorDetails, StatusExt};
use tower::{BoxError, Service};

use super::frames::{Deframer, frame};
use super::status::{error_response, error_response_as, json_response, status_json};

/// Request headers that describe the HTTP exchange rather than the call; everything else
/// (authorization, traceparent, x-trace-id, grpc-timeout…) reaches the service as metadata.
const HOP_HEADERS: [header::HeaderName; 9] = [
    header::HOST,
    header::CONTENT_TYPE,
    header::CONTENT_LENGTH,
    header::TRANSFER_ENCODING,
    header::CONNECTION,
    header::TE,
    header::UPGRADE,
    header::ACCEPT,
    header::ACCEPT_ENCODING,
];

/// Response headers the gateway replaces with its own.
const GRPC_HEADERS: [&str; 6] = [
    "content-type",
    "content-length",
    "grpc-status",
    "grpc-message",
    "grpc-status-details-bin",
    "grpc-encoding",
];

/// How a streamed response is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StreamFormat {
    /// One `{"result": …}` line per message, a final `{"error": …}` line on failure.
    Ndjson,
    /// `data: …` events, a final `event: error` on failure.
    Sse,
}

/// Serves one JSON call of `method` through `inner`.
pub async fn handle<S>(
    pool: &'static DescriptorPool,
    limit: usize,
    method: MethodDescriptor,
    mut inner: S,
    request: Request<Body>,
) -> Response<Body>
where
    S: Service<Request<Body>, Response = Response<Body>>,
    S::Error: Into<BoxError>,
{
    if request.method() != Method::POST {
        let mut response = error_response_as(
            pool,
            StatusCode::METHOD_NOT_ALLOWED,
            &tonic::Status::unimplemented("use POST with a JSON body"),
        );
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return response;
    }
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let json_body = content_type.starts_with("application/json")
        || (method.is_client_streaming() && content_type.starts_with("application/x-ndjson"));
    if !json_body {
        let expected = if method.is_client_streaming() {
            "application/x-ndjson (one JSON message per line)"
        } else {
            "application/json"
        };
        return error_response_as(
            pool,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            &tonic::Status::invalid_argument(format!(
                "content-type must be {expected}, got {content_type:?}"
            )),
        );
    }
    let format = stream_format(request.headers());
    let (parts, body) = request.into_parts();
    // Why a streamed request failed, when it was its JSON: reported instead of the call's own
    // status, which only says the request body broke.
    let request_failure = Arc::new(Mutex::new(None));
    let grpc_body = if method.is_client_streaming() {
        Body::new(StreamBody::new(ndjson_frames(
            body,
            method.input(),
            limit,
            request_failure.clone(),
        )))
    } else {
        match read_message(body, &method.input(), limit).await {
            Ok(framed) => Body::new(Full::new(framed)),
            // Too large is the body's fault, not a quota's: 413 rather than 429.
            Err(status) if status.code() == tonic::Code::ResourceExhausted => {
                return error_response_as(pool, StatusCode::PAYLOAD_TOO_LARGE, &status);
            }
            Err(status) => return error_response(pool, &status),
        }
    };
    let mut grpc = Request::new(grpc_body);
    *grpc.method_mut() = Method::POST;
    *grpc.uri_mut() = parts.uri;
    *grpc.version_mut() = Version::HTTP_2;
    let headers = grpc.headers_mut();
    for (name, value) in &parts.headers {
        if !HOP_HEADERS.contains(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    headers.insert(header::TE, HeaderValue::from_static("trailers"));

    let response = match inner.call(grpc).await {
        Ok(response) => response,
        Err(e) => {
            let status = tonic::Status::internal(format!("call failed: {}", e.into()));
            return error_response(pool, &status);
        }
    };
    let (parts, body) = response.into_parts();
    let metadata = forwarded_headers(&parts.headers);
    let output = method.output();
    let mut events = Box::pin(events(parts.headers, body, request_failure));
    let first = events.next().await;
    let mut response = match first {
        None => error_response(
            pool,
            &tonic::Status::internal("the call ended without a status"),
        ),
        Some(Event::End(status)) if status.code() != tonic::Code::Ok => {
            error_response(pool, &status)
        }
        Some(first) if !method.is_server_streaming() => unary(pool, &output, first, events).await,
        Some(first) => streamed(pool, output, format, first, events),
    };
    response.headers_mut().extend(metadata);
    response
}

/// What the service sent: a message, or the end with its status.
enum Event {
    Message(Bytes),
    End(tonic::Status),
}

/// The messages of a gRPC response body, then its status (from the trailers, or the headers
/// of a trailers-only response).
fn events(
    headers: HeaderMap,
    body: Body,
    request_failure: Arc<Mutex<Option<tonic::Status>>>,
) -> impl Stream<Item = Event> {
    struct State {
        headers: Option<HeaderMap>,
        body: Body,
        deframer: Deframer,
        done: bool,
        failure: Arc<Mutex<Option<tonic::Status>>>,
    }
    let end = |state: &mut State, status: tonic::Status| {
        state.done = true;
        let failure = state.failure.lock().ok().and_then(|mut f| f.take());
        Event::End(failure.unwrap_or(status))
    };
    let state = State {
        headers: Some(headers),
        body,
        deframer: Deframer::default(),
        done: false,
        failure: request_failure,
    };
    futures::stream::unfold(state, move |mut state| async move {
        if state.done {
            return None;
        }
        if let Some(status) = state
            .headers
            .take()
            .and_then(|h| tonic::Status::from_header_map(&h))
        {
            let event = end(&mut state, status);
            return Some((event, state));
        }
        loop {
            match state.deframer.next_message() {
                Ok(Some(message)) => return Some((Event::Message(message), state)),
                Ok(None) => {}
                Err(e) => {
                    let event = end(&mut state, tonic::Status::internal(e));
                    return Some((event, state));
                }
            }
            let event = match state.body.frame().await {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        state.deframer.push(&data);
                        continue;
                    }
                    Err(frame) => {
                        let status = frame
                            .trailers_ref()
                            .and_then(tonic::Status::from_header_map)
                            .unwrap_or_else(|| tonic::Status::unknown("no grpc-status trailer"));
                        end(&mut state, status)
                    }
                },
                Some(Err(e)) => end(&mut state, tonic::Status::internal(e.to_string())),
                None if state.deframer.is_empty() => {
                    end(&mut state, tonic::Status::unknown("no grpc-status trailer"))
                }
                None => end(
                    &mut state,
                    tonic::Status::internal("response cut mid-message"),
                ),
            };
            return Some((event, state));
        }
    })
}

/// A unary answer: its one message as JSON once the status says OK.
async fn unary(
    pool: &DescriptorPool,
    output: &MessageDescriptor,
    first: Event,
    mut rest: impl Stream<Item = Event> + Unpin,
) -> Response<Body> {
    let Event::Message(message) = first else {
        return error_response(pool, &tonic::Status::internal("no response message"));
    };
    while let Some(event) = rest.next().await {
        if let Event::End(status) = event
            && status.code() != tonic::Code::Ok
        {
            return error_response(pool, &status);
        }
    }
    match message_json(output, &message) {
        Ok(json) => json_response(StatusCode::OK, &json),
        Err(status) => error_response(pool, &status),
    }
}

/// A server stream, written as its messages arrive.
fn streamed(
    pool: &'static DescriptorPool,
    output: MessageDescriptor,
    format: StreamFormat,
    first: Event,
    rest: impl Stream<Item = Event> + Send + 'static,
) -> Response<Body> {
    let lines = futures::stream::once(async { first })
        .chain(rest)
        .filter_map(move |event| {
            let line = match event {
                Event::Message(message) => Some(match message_json(&output, &message) {
                    Ok(json) => stream_line(format, false, &json),
                    Err(status) => stream_line(format, true, &status_json(pool, &status)),
                }),
                Event::End(status) if status.code() == tonic::Code::Ok => None,
                Event::End(status) => Some(stream_line(format, true, &status_json(pool, &status))),
            };
            std::future::ready(line.map(|line| Ok::<_, Infallible>(http_body::Frame::data(line))))
        });
    let mut response = Response::new(Body::new(StreamBody::new(lines)));
    let content_type = match format {
        StreamFormat::Ndjson => "application/x-ndjson",
        StreamFormat::Sse => "text/event-stream",
    };
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies such as nginx would otherwise hold the stream back.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// One streamed item, a message or (`error`) a failure's status: an NDJSON line wrapping it
/// as `result` or `error`, or an SSE event whose data is it (the event type says which).
fn stream_line(format: StreamFormat, error: bool, json: &Value) -> Bytes {
    Bytes::from(match (format, error) {
        (StreamFormat::Ndjson, true) => format!("{{\"error\":{json}}}\n"),
        (StreamFormat::Ndjson, false) => format!("{{\"result\":{json}}}\n"),
        (StreamFormat::Sse, true) => format!("event: error\ndata: {json}\n\n"),
        (StreamFormat::Sse, false) => format!("data: {json}\n\n"),
    })
}

/// SSE when the client accepts `text/event-stream`, NDJSON otherwise.
fn stream_format(headers: &HeaderMap) -> StreamFormat {
    let sse = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"));
    if sse {
        StreamFormat::Sse
    } else {
        StreamFormat::Ndjson
    }
}

/// The service's response metadata (trace ids…) for the HTTP response.
fn forwarded_headers(headers: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in headers {
        if !GRPC_HEADERS.contains(&name.as_str()) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// A decoded message as proto3 JSON.
fn message_json(output: &MessageDescriptor, message: &[u8]) -> Result<Value, tonic::Status> {
    let decoded = DynamicMessage::decode(output.clone(), message)
        .map_err(|e| tonic::Status::internal(format!("undecodable response: {e}")))?;
    serde_json::to_value(&decoded)
        .map_err(|e| tonic::Status::internal(format!("response as JSON: {e}")))
}

/// Reads a whole JSON body (at most `limit` bytes; empty means `{}`) as one framed message.
async fn read_message(
    body: Body,
    input: &MessageDescriptor,
    limit: usize,
) -> Result<Bytes, tonic::Status> {
    let bytes = Limited::new(body, limit)
        .collect()
        .await
        .map_err(|e| body_error(&e, limit))?
        .to_bytes();
    let json: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        &bytes
    };
    let message = parse_message(input, json, None)?;
    frame(&message.encode_to_vec()).map_err(tonic::Status::resource_exhausted)
}

/// A body that could not be read: too large, or broken off.
fn body_error(e: &BoxError, limit: usize) -> tonic::Status {
    if e.is::<http_body_util::LengthLimitError>() {
        tonic::Status::resource_exhausted(format!(
            "request body is larger than limits.max_request_bytes ({limit} bytes)"
        ))
    } else {
        tonic::Status::invalid_argument(format!("cannot read the request body: {e}"))
    }
}

/// Parses `json` as `input`; a failure is INVALID_ARGUMENT naming the field (and the line of a
/// streamed request).
fn parse_message(
    input: &MessageDescriptor,
    json: &[u8],
    line: Option<usize>,
) -> Result<DynamicMessage, tonic::Status> {
    let mut de = serde_json::Deserializer::from_slice(json);
    let mut track = serde_path_to_error::Track::new();
    let parsed = DynamicMessage::deserialize(
        input.clone(),
        serde_path_to_error::Deserializer::new(&mut de, &mut track),
    )
    .and_then(|message| de.end().map(|()| message));
    parsed.map_err(|e| {
        // `tasks[0].status` in serde's notation; agentd's violations write `tasks.0.status`.
        let mut path = track.path().to_string().replace('[', ".").replace(']', "");
        // An unknown field is reported at its parent: name the field itself.
        if let Some(name) = e
            .to_string()
            .strip_prefix("unrecognized field name '")
            .and_then(|rest| rest.split('\'').next())
        {
            path = if path == "." {
                name.to_owned()
            } else {
                format!("{path}.{name}")
            };
        }
        let field = match (line, path.as_str()) {
            (Some(line), ".") => format!("line {line}"),
            (Some(line), path) => format!("line {line}: {path}"),
            (None, ".") => "body".to_owned(),
            (None, path) => path.to_owned(),
        };
        let description = format!("invalid JSON for {}: {e}", input.full_name());
        tonic::Status::with_error_details(
            tonic::Code::InvalidArgument,
            format!("{field}: {description}"),
            ErrorDetails::with_bad_request_violation(field, description),
        )
    })
}

/// A client stream's NDJSON body as gRPC frames, one per non-blank line (each at most `limit`
/// bytes). A bad line ends the stream; why is left in `failure`.
fn ndjson_frames(
    body: Body,
    input: MessageDescriptor,
    limit: usize,
    failure: Arc<Mutex<Option<tonic::Status>>>,
) -> impl Stream<Item = Result<http_body::Frame<Bytes>, BoxError>> + Send {
    struct State {
        body: Body,
        buf: BytesMut,
        line: usize,
        ended: bool,
        input: MessageDescriptor,
        failure: Arc<Mutex<Option<tonic::Status>>>,
    }
    let fail = |state: &State, status: tonic::Status| {
        let message = status.message().to_owned();
        if let Ok(mut slot) = state.failure.lock() {
            slot.get_or_insert(status);
        }
        BoxError::from(message)
    };
    let state = State {
        body,
        buf: BytesMut::new(),
        line: 0,
        ended: false,
        input,
        failure,
    };
    futures::stream::unfold(Some(state), move |state| async move {
        let mut state = state?;
        loop {
            let newline = state.buf.iter().position(|b| *b == b'\n');
            let text = match newline {
                Some(at) => Some(state.buf.split_to(at + 1)),
                None if state.ended && !state.buf.is_empty() => Some(state.buf.split()),
                None if state.ended => return None,
                None => None,
            };
            if let Some(text) = text {
                state.line += 1;
                if text.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let framed = parse_message(&state.input, &text, Some(state.line)).and_then(|m| {
                    frame(&m.encode_to_vec()).map_err(tonic::Status::resource_exhausted)
                });
                return Some(match framed {
                    Ok(framed) => (Ok(http_body::Frame::data(framed)), Some(state)),
                    Err(status) => (Err(fail(&state, status)), None),
                });
            }
            if state.buf.len() > limit {
                let status = tonic::Status::resource_exhausted(format!(
                    "line {} is longer than limits.max_request_bytes ({limit} bytes)",
                    state.line + 1
                ));
                return Some((Err(fail(&state, status)), None));
            }
            match state.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        state.buf.extend_from_slice(&data);
                    }
                }
                Some(Err(e)) => {
                    let status = tonic::Status::invalid_argument(format!(
                        "cannot read the request body: {e}"
                    ));
                    return Some((Err(fail(&state, status)), None));
                }
                None => state.ended = true,
            }
        }
    })
}
