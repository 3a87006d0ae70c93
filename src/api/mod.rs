//! gRPC adapters only: proto <-> domain conversion and status mapping. No business rules live
//! here; they are in [`crate::tasks`], [`crate::tasklist`] and the agent modules.

pub mod agents;
pub mod approvals;
pub mod auth;
pub mod bounded;
pub mod codec;
pub mod completion;
pub mod encoded;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod hooks;
pub mod jwt;
pub mod layer;
mod processors;
mod recall;
pub mod run_request;
mod scope;
pub mod scores;
pub mod tasks;
pub mod threads;

use futures::stream::{BoxStream, StreamExt};
use tonic::Status;

use crate::config::Limits;
use crate::store::ThreadKey;
use crate::telemetry::{self, InvalidTraceField};
use error::Violations;

/// A run's chunks as a gRPC response stream, sent as they were encoded for the run's log.
pub(crate) type ChunkStream = BoxStream<'static, Result<encoded::EncodedChunk, Status>>;

/// A run's chunk stream with its errors as statuses.
pub(crate) fn chunk_stream(stream: crate::agent::runtime::ChunkStream) -> ChunkStream {
    stream
        .map(|item| {
            item.map(|chunk| encoded::EncodedChunk(chunk.bytes))
                .map_err(Status::from)
        })
        .boxed()
}

/// `stream` until the server starts draining, then `UNAVAILABLE` (re-attach elsewhere) instead
/// of the clean end a client would take for "nothing more will come". Streams that end on
/// their own before it end as they would.
pub(crate) fn until_drain<T: Send + 'static>(
    stream: BoxStream<'static, Result<T, Status>>,
    drain: tokio_util::sync::CancellationToken,
) -> BoxStream<'static, Result<T, Status>> {
    let cut = drain.clone();
    stream
        .take_until(drain.cancelled_owned())
        .chain(futures::stream::iter([()]).filter_map(move |()| {
            let cut = cut.is_cancelled();
            async move {
                cut.then(|| {
                    Err(Status::unavailable(
                        "the server is shutting down: reconnect (to another replica) to continue",
                    ))
                })
            }
        }))
        .boxed()
}

/// A malformed trace field or header, as INVALID_ARGUMENT naming it.
pub(crate) fn invalid_trace(e: InvalidTraceField) -> Status {
    let mut v = Violations::default();
    v.add(e.field, e.message);
    v.into_status()
}

/// The parent of a run this call starts: the request's own trace fields when set (they win
/// over metadata), else the call's `rpc` span (made by [`layer::RpcLayer`] under the metadata's
/// trace). Without OTel, or with that span disabled, the metadata's trace itself, so the run
/// still reports the caller's trace id.
pub(crate) fn run_parent(
    metadata: &http::HeaderMap,
    trace_id: &str,
    parent_span_id: &str,
) -> Result<Option<opentelemetry::Context>, Status> {
    let requested =
        telemetry::parent_context(metadata, trace_id, parent_span_id).map_err(invalid_trace)?;
    let rpc = tracing::Span::current();
    let from_request = !trace_id.is_empty() || !parent_span_id.is_empty();
    if from_request || rpc.is_disabled() || !telemetry::otel_layer_installed() {
        return Ok(requested);
    }
    Ok(Some(telemetry::otel_context(&rpc)))
}

/// Checks an id field: bounded length, no control characters. Empty is allowed here; callers
/// decide what empty means.
pub(crate) fn check_id(v: &mut Violations, field: &str, value: &str, limits: &Limits) {
    if value.len() > limits.max_id_bytes {
        v.add(
            field,
            format!("must be at most {} bytes", limits.max_id_bytes),
        );
    } else if value.chars().any(char::is_control) {
        v.add(field, "must not contain control characters");
    }
}

/// Checks a text field's length.
pub(crate) fn check_text(v: &mut Violations, field: &str, value: &str, limits: &Limits) {
    if value.len() > limits.max_text_bytes {
        v.add(
            field,
            format!("must be at most {} bytes", limits.max_text_bytes),
        );
    }
}

/// A count for a proto `int32` field (saturating: counts never get near the limit).
pub(crate) fn to_i32(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The thread a request names, or `None` when either id is empty (no memory).
pub(crate) fn thread_key(thread_id: &str, resource_id: &str) -> Option<ThreadKey> {
    (!thread_id.is_empty() && !resource_id.is_empty()).then(|| ThreadKey {
        thread_id: thread_id.to_owned(),
        resource_id: resource_id.to_owned(),
    })
}
