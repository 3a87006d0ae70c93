//! The last word on every error reply, whichever service or layer made it: a client can always
//! read it (message and details together well under 4 KiB, where HTTP/2 header limits would
//! otherwise turn it into `RESOURCE_EXHAUSTED` on the client), and a request the server could
//! not decode is the client's error, `INVALID_ARGUMENT`, not tonic's `INTERNAL`.
//!
//! Handlers already keep their errors small ([`Violations`](super::error::Violations) caps its
//! list, echoed values are clipped): this layer is the guarantee for everything else.

use std::pin::Pin;
use std::task::{Context, Poll};

use base64::Engine as _;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use percent_encoding::{AsciiSet, CONTROLS, percent_decode, utf8_percent_encode};
use tonic::body::Body;
use tonic::{Code, Status};
use tower::{Layer, Service};

use crate::error_text::clip;

/// Longest `grpc-message` sent, percent-encoded.
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// Longest `grpc-status-details-bin` sent, base64-encoded (2 KiB of details).
pub const MAX_DETAILS_BYTES: usize = 2732;
/// A message too long is cut to this many bytes before encoding (at most three bytes each).
const CUT_MESSAGE_BYTES: usize = 300;

/// What gRPC's `grpc-message` percent-encodes: controls and `%` (non-ASCII always is).
const MESSAGE_ENCODING: &AsciiSet = &CONTROLS.add(b'%');

/// How tonic's decoder words failures caused by the request's bytes (it answers `INTERNAL`).
const DECODE_FAILURES: [&[u8]; 3] = [
    b"failed to decode Protobuf message",
    b"protocol error: received message with",
    b"Unexpected EOF decoding stream",
];

/// Wraps a service with [`BoundedErrors`].
#[derive(Clone, Copy, Debug, Default)]
pub struct BoundedErrorsLayer;

impl<S> Layer<S> for BoundedErrorsLayer {
    type Service = BoundedErrors<S>;

    fn layer(&self, inner: S) -> Self::Service {
        BoundedErrors { inner }
    }
}

/// A service whose error replies are bounded and whose decode failures are
/// `INVALID_ARGUMENT`; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct BoundedErrors<S> {
    inner: S,
}

impl<S, B> Service<Request<B>> for BoundedErrors<S>
where
    S: Service<Request<B>, Response = Response<Body>>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = futures::future::MapOk<S::Future, fn(Response<Body>) -> Response<Body>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        use futures::TryFutureExt as _;
        self.inner.call(request).map_ok(bound_response)
    }
}

/// Bounds a trailers-only error now, and the trailers of a streamed reply as they pass.
fn bound_response(response: Response<Body>) -> Response<Body> {
    let (mut parts, body) = response.into_parts();
    bound_status(&mut parts.headers);
    let grpc = parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    let body = if grpc && !body.is_end_stream() {
        Body::new(BoundedBody { inner: body })
    } else {
        body
    };
    Response::from_parts(parts, body)
}

/// A gRPC reply body whose trailers go through [`bound_status`].
struct BoundedBody {
    inner: Body,
}

impl HttpBody for BoundedBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let mut polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &mut polled
            && let Some(trailers) = frame.trailers_mut()
        {
            bound_status(trailers);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Rewrites the status in `headers` (if any, and not OK) when its message or details are too
/// long, or when it is tonic's `INTERNAL` for a request it could not decode.
pub fn bound_status(headers: &mut HeaderMap) {
    let Some(code) = headers.get(Status::GRPC_STATUS) else {
        return;
    };
    let code = Code::from_bytes(code.as_bytes());
    if code == Code::Ok {
        return;
    }
    let raw_message = headers
        .get(Status::GRPC_MESSAGE)
        .map_or(&b""[..], HeaderValue::as_bytes);
    // tonic percent-encodes spaces: compare the decoded start (only errors get here).
    let decode_failure = matches!(code, Code::Internal | Code::Unknown) && {
        let start: Vec<u8> = percent_decode(&raw_message[..raw_message.len().min(120)]).collect();
        DECODE_FAILURES.iter().any(|p| start.starts_with(p))
    };
    let long_message = raw_message.len() > MAX_MESSAGE_BYTES;
    let long_details = headers
        .get(Status::GRPC_STATUS_DETAILS)
        .is_some_and(|v| v.len() > MAX_DETAILS_BYTES);
    if !decode_failure && !long_message && !long_details {
        return;
    }
    let message = percent_decode(raw_message).decode_utf8_lossy();
    let mut message = if long_message {
        clip(&message, CUT_MESSAGE_BYTES).into_owned()
    } else {
        message.into_owned()
    };
    if decode_failure {
        message = format!("the request could not be decoded: {message}");
    }
    if long_details && let Some(details) = headers.remove(Status::GRPC_STATUS_DETAILS) {
        message.push_str(&format!(
            " (error details of {} bytes left out)",
            base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(details.as_bytes())
                .map_or(details.len(), |d| d.len())
        ));
    }
    let code = if decode_failure {
        Code::InvalidArgument
    } else {
        code
    };
    headers.insert(Status::GRPC_STATUS, code_header(code));
    let encoded = utf8_percent_encode(&message, MESSAGE_ENCODING).to_string();
    match HeaderValue::from_str(&encoded) {
        Ok(value) => {
            headers.insert(Status::GRPC_MESSAGE, value);
        }
        // Unreachable (percent-encoded text is visible ASCII); never send the long one.
        Err(_) => {
            headers.remove(Status::GRPC_MESSAGE);
        }
    }
}

/// The `grpc-status` value of a code.
fn code_header(code: Code) -> HeaderValue {
    HeaderValue::from(code as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(status: &Status) -> HeaderMap {
        let mut headers = HeaderMap::new();
        status.add_header(&mut headers).unwrap();
        headers
    }

    fn reply_size(headers: &HeaderMap) -> usize {
        headers
            .iter()
            .map(|(k, v)| k.as_str().len() + v.len())
            .sum()
    }

    #[test]
    fn long_messages_are_cut_and_details_left_out() {
        let details = Bytes::from(vec![7u8; 20_000]);
        let status = Status::with_details(Code::NotFound, "é".repeat(9000), details);
        let mut headers = headers(&status);
        assert!(reply_size(&headers) > 30_000);
        bound_status(&mut headers);
        assert!(reply_size(&headers) < 1400, "{}", reply_size(&headers));
        let bounded = Status::from_header_map(&headers).unwrap();
        assert_eq!(bounded.code(), Code::NotFound);
        assert!(bounded.message().starts_with("éé"));
        assert!(
            bounded
                .message()
                .ends_with("more bytes) (error details of 20000 bytes left out)"),
            "{}",
            bounded.message()
        );
        assert!(bounded.details().is_empty());
    }

    #[test]
    fn decode_failures_are_invalid_argument() {
        let status = Status::internal("failed to decode Protobuf message: invalid wire type");
        let mut headers = headers(&status);
        bound_status(&mut headers);
        let bounded = Status::from_header_map(&headers).unwrap();
        assert_eq!(bounded.code(), Code::InvalidArgument);
        assert_eq!(
            bounded.message(),
            "the request could not be decoded: failed to decode Protobuf message: invalid wire type"
        );
    }

    #[test]
    fn small_errors_and_ok_pass_untouched() {
        for status in [
            Status::internal("store exploded"),
            Status::not_found("no run x"),
            Status::new(Code::Ok, ""),
        ] {
            let mut headers = headers(&status);
            let before = headers.clone();
            bound_status(&mut headers);
            assert_eq!(headers, before);
        }
    }
}
