//! Trace and span ids, with one twist: a span can be made the root of a trace the caller
//! chose (`tracing_options.trace_id` without `parent_span_id`).
//!
//! The SDK draws a root span's trace id from the provider's `IdGenerator` while it builds the
//! span, and offers no other way to pick it; so the generator takes a one-shot override from
//! a thread-local that `with_root_trace_id` sets around the (synchronous) build.

use std::cell::Cell;

use opentelemetry::trace::{SpanId, TraceId};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};

thread_local! {
    static ROOT_TRACE_ID: Cell<Option<TraceId>> = const { Cell::new(None) };
}

/// Random ids, except a trace id requested by [`with_root_trace_id`].
#[derive(Debug, Default)]
pub(crate) struct AgentdIdGenerator(RandomIdGenerator);

impl IdGenerator for AgentdIdGenerator {
    fn new_trace_id(&self) -> TraceId {
        ROOT_TRACE_ID
            .with(Cell::take)
            .unwrap_or_else(|| self.0.new_trace_id())
    }

    fn new_span_id(&self) -> SpanId {
        self.0.new_span_id()
    }
}

/// Runs `build` with `trace_id` as the next root trace id drawn on this thread.
pub(crate) fn with_root_trace_id(trace_id: TraceId, build: impl FnOnce()) {
    ROOT_TRACE_ID.with(|cell| cell.set(Some(trace_id)));
    build();
    // Not drawn (no OTel layer, or the span already existed): do not leak it to the next root.
    ROOT_TRACE_ID.with(|cell| cell.set(None));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn override_is_used_once_then_cleared() {
        let generator = AgentdIdGenerator::default();
        let wanted = TraceId::from(0xabc_u128);
        let mut drawn = None;
        with_root_trace_id(wanted, || drawn = Some(generator.new_trace_id()));
        assert_eq!(drawn, Some(wanted));
        assert_ne!(generator.new_trace_id(), wanted);
        with_root_trace_id(wanted, || {});
        assert_ne!(generator.new_trace_id(), wanted);
    }
}
