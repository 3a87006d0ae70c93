//! The trace a request joins: `tracing_options` fields, else the `x-trace-id` /
//! `x-parent-span-id` headers, else W3C `traceparent` / `tracestate`.
//!
//! Rules (the first source carrying any id wins as a whole; lower sources are not read, so a
//! malformed header behind a valid request field is ignored):
//! - Custom ids (`tracing_options.*`, `x-*`) are 1–32 / 1–16 hex digits, any case, left-padded
//!   with zeros; all-zero ids are invalid. The remote parent they form counts as sampled.
//! - A trace id without a parent span id makes the run a root span of that trace (see
//!   `spans::apply_parent`); a parent span id without a trace id is invalid.
//! - `traceparent` follows W3C Trace Context (lowercase hex, version `ff` invalid, version 00
//!   exactly four parts); its sampled flag is honoured. An unparsable `tracestate` is dropped,
//!   as the W3C spec asks, rather than failing the call.
//! - A header sent more than once, or not visible ASCII, is invalid.

use std::str::FromStr;

use http::HeaderMap;
use opentelemetry::Context;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tonic::metadata::{MetadataMap, MetadataValue};

/// Request field holding the trace id.
pub const TRACE_ID_FIELD: &str = "tracing_options.trace_id";
/// Request field holding the parent span id.
pub const PARENT_SPAN_ID_FIELD: &str = "tracing_options.parent_span_id";
/// Metadata key holding the trace id.
pub const X_TRACE_ID: &str = "x-trace-id";
/// Metadata key holding the parent span id.
pub const X_PARENT_SPAN_ID: &str = "x-parent-span-id";
/// W3C Trace Context parent header.
pub const TRACEPARENT: &str = "traceparent";
/// W3C Trace Context vendor state header.
pub const TRACESTATE: &str = "tracestate";

/// Response metadata key carrying the run's span id (the trace id goes in `x-trace-id`).
pub const X_SPAN_ID: &str = "x-span-id";

/// A trace id or span id in the request that cannot be used; maps to `INVALID_ARGUMENT`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct InvalidTraceField {
    /// The request field or metadata key at fault, e.g. `tracing_options.trace_id`.
    pub field: &'static str,
    /// What is wrong with it.
    pub message: String,
}

impl InvalidTraceField {
    fn new(field: &'static str, message: impl Into<String>) -> Self {
        Self {
            field,
            message: message.into(),
        }
    }
}

/// Marker carried by a parent [`Context`] when the caller named a trace but no parent span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RootInTrace(pub(crate) TraceId);

/// The parent context a request asks for, `None` when it names no trace.
///
/// Pass gRPC metadata as `request.metadata().as_ref()`; `trace_id` / `parent_span_id` are the
/// `tracing_options` fields (empty when unset).
pub fn parent_context(
    metadata: &HeaderMap,
    trace_id: &str,
    parent_span_id: &str,
) -> Result<Option<Context>, InvalidTraceField> {
    if !trace_id.is_empty() || !parent_span_id.is_empty() {
        return custom_ids(
            (TRACE_ID_FIELD, trace_id),
            (PARENT_SPAN_ID_FIELD, parent_span_id),
        )
        .map(Some);
    }
    let x_trace = header(metadata, X_TRACE_ID)?;
    let x_parent = header(metadata, X_PARENT_SPAN_ID)?;
    if x_trace.is_some() || x_parent.is_some() {
        return custom_ids(
            (X_TRACE_ID, x_trace.unwrap_or_default()),
            (X_PARENT_SPAN_ID, x_parent.unwrap_or_default()),
        )
        .map(Some);
    }
    match header(metadata, TRACEPARENT)? {
        Some(value) => traceparent(value, metadata).map(Some),
        None => Ok(None),
    }
}

/// A span context rebuilt from stored hex ids (e.g. the original run of an approval, to link
/// to); `None` when either id is not 1–32 / 1–16 hex digits or is all zeros.
pub fn remote_span_context(trace_id: &str, span_id: &str) -> Option<SpanContext> {
    let trace_id = hex_id(trace_id, 32).ok()?;
    let span_id = hex_id(span_id, 16).ok()?;
    Some(SpanContext::new(
        TraceId::from(trace_id),
        SpanId::from(span_id as u64),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    ))
}

/// Puts a run's ids (from `run_trace_ids`) in response metadata as `x-trace-id` and
/// `x-span-id`, each only when non-empty.
pub fn insert_trace_ids(metadata: &mut MetadataMap, trace_id: &str, span_id: &str) {
    for (key, value) in [(X_TRACE_ID, trace_id), (X_SPAN_ID, span_id)] {
        if value.is_empty() {
            continue;
        }
        // Hex ids always parse; anything else is skipped rather than failing the response.
        if let Ok(value) = MetadataValue::try_from(value) {
            metadata.insert(key, value);
        }
    }
}

/// The trace a parent context names: its span's trace, or the trace of a root-in-trace marker.
pub(crate) fn requested_trace_id(parent: &Context) -> Option<TraceId> {
    if let Some(RootInTrace(trace_id)) = parent.get::<RootInTrace>() {
        return Some(*trace_id);
    }
    let span_context = parent.span().span_context().clone();
    span_context.is_valid().then(|| span_context.trace_id())
}

fn custom_ids(
    (trace_field, trace_id): (&'static str, &str),
    (span_field, span_id): (&'static str, &str),
) -> Result<Context, InvalidTraceField> {
    if trace_id.is_empty() {
        return Err(InvalidTraceField::new(
            trace_field,
            format!("required when {span_field} is set"),
        ));
    }
    let trace_id =
        TraceId::from(hex_id(trace_id, 32).map_err(|m| InvalidTraceField::new(trace_field, m))?);
    if span_id.is_empty() {
        return Ok(Context::new().with_value(RootInTrace(trace_id)));
    }
    let span_id = hex_id(span_id, 16).map_err(|m| InvalidTraceField::new(span_field, m))?;
    // Custom ids carry no sampling flag; the caller asked to join, so treat them as sampled.
    let parent = SpanContext::new(
        trace_id,
        SpanId::from(span_id as u64),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    );
    Ok(Context::new().with_remote_span_context(parent))
}

/// 1..=`max_digits` hex digits (any case) as a number; zero is invalid.
fn hex_id(value: &str, max_digits: usize) -> Result<u128, String> {
    if value.is_empty() || value.len() > max_digits || !value.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Err(format!("must be 1 to {max_digits} hex digits"));
    }
    // Cannot fail: at most 32 hex digits fit in a u128.
    let id = u128::from_str_radix(value, 16).map_err(|e| e.to_string())?;
    if id == 0 {
        return Err("must not be all zeros".to_owned());
    }
    Ok(id)
}

/// The single value of a metadata key, trimmed; `None` when absent or empty.
fn header<'a>(
    metadata: &'a HeaderMap,
    key: &'static str,
) -> Result<Option<&'a str>, InvalidTraceField> {
    let mut values = metadata.get_all(key).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(InvalidTraceField::new(key, "sent more than once"));
    }
    let value = value
        .to_str()
        .map_err(|_| InvalidTraceField::new(key, "must be visible ASCII"))?
        .trim();
    Ok((!value.is_empty()).then_some(value))
}

fn traceparent(value: &str, metadata: &HeaderMap) -> Result<Context, InvalidTraceField> {
    let invalid = |message: &str| InvalidTraceField::new(TRACEPARENT, message);
    let parts: Vec<&str> = value.split('-').collect();
    if parts.len() < 4 {
        return Err(invalid("must be version-traceid-parentid-flags"));
    }
    let version =
        lower_hex(parts[0], 2).ok_or_else(|| invalid("version must be 2 lowercase hex digits"))?;
    if version == 0xff {
        return Err(invalid("version ff is invalid"));
    }
    if version == 0 && parts.len() != 4 {
        return Err(invalid("version 00 has exactly four parts"));
    }
    let trace_id = lower_hex(parts[1], 32)
        .filter(|id| *id != 0)
        .ok_or_else(|| invalid("trace id must be 32 lowercase hex digits, not all zeros"))?;
    let span_id = lower_hex(parts[2], 16)
        .filter(|id| *id != 0)
        .ok_or_else(|| invalid("parent id must be 16 lowercase hex digits, not all zeros"))?;
    let flags =
        lower_hex(parts[3], 2).ok_or_else(|| invalid("flags must be 2 lowercase hex digits"))?;
    // Only the sampled bit has a meaning here; W3C asks to drop the others.
    let flags = TraceFlags::new(flags as u8) & TraceFlags::SAMPLED;
    let parent = SpanContext::new(
        TraceId::from(trace_id),
        SpanId::from(span_id as u64),
        flags,
        true,
        tracestate(metadata),
    );
    Ok(Context::new().with_remote_span_context(parent))
}

/// Every `tracestate` value joined (W3C allows splitting it over several headers); an
/// unparsable one is dropped rather than failing the call.
fn tracestate(metadata: &HeaderMap) -> TraceState {
    let values: Vec<&str> = metadata
        .get_all(TRACESTATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    if values.is_empty() {
        return TraceState::default();
    }
    TraceState::from_str(&values.join(",")).unwrap_or_default()
}

/// Exactly `digits` lowercase hex digits.
fn lower_hex(value: &str, digits: usize) -> Option<u128> {
    let ok = value.len() == digits
        && value
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    ok.then(|| u128::from_str_radix(value, 16).ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const SPAN: &str = "00f067aa0ba902b7";

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(*k, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    fn remote(cx: &Context) -> SpanContext {
        cx.span().span_context().clone()
    }

    fn err(result: Result<Option<Context>, InvalidTraceField>) -> InvalidTraceField {
        result.expect_err("expected an error")
    }

    #[test]
    fn nothing_given_means_no_parent() {
        assert!(parent_context(&HeaderMap::new(), "", "").unwrap().is_none());
    }

    #[test]
    fn request_fields_make_a_sampled_remote_parent() {
        let cx = parent_context(&HeaderMap::new(), TRACE, SPAN)
            .unwrap()
            .unwrap();
        let sc = remote(&cx);
        assert_eq!(sc.trace_id().to_string(), TRACE);
        assert_eq!(sc.span_id().to_string(), SPAN);
        assert!(sc.is_remote() && sc.is_sampled());
    }

    #[test]
    fn short_ids_are_left_padded_and_case_is_ignored() {
        let cx = parent_context(&HeaderMap::new(), "ABC", "f")
            .unwrap()
            .unwrap();
        let sc = remote(&cx);
        assert_eq!(sc.trace_id().to_string(), format!("{:0>32}", "abc"));
        assert_eq!(sc.span_id().to_string(), "000000000000000f");
    }

    #[test]
    fn request_fields_win_over_headers() {
        let other = "11111111111111111111111111111111";
        let map = headers(&[
            (X_TRACE_ID, other),
            (X_PARENT_SPAN_ID, "2222222222222222"),
            (TRACEPARENT, &format!("00-{other}-2222222222222222-01")),
        ]);
        let cx = parent_context(&map, TRACE, SPAN).unwrap().unwrap();
        assert_eq!(remote(&cx).trace_id().to_string(), TRACE);
    }

    #[test]
    fn lower_sources_are_not_validated_when_a_higher_one_wins() {
        let map = headers(&[(X_TRACE_ID, "zz"), (TRACEPARENT, "garbage")]);
        assert!(parent_context(&map, TRACE, SPAN).is_ok());
        let map = headers(&[
            (X_TRACE_ID, TRACE),
            (X_PARENT_SPAN_ID, SPAN),
            (TRACEPARENT, "garbage"),
        ]);
        assert!(parent_context(&map, "", "").is_ok());
    }

    #[test]
    fn x_headers_win_over_traceparent() {
        let map = headers(&[
            (X_TRACE_ID, TRACE),
            (X_PARENT_SPAN_ID, SPAN),
            (
                TRACEPARENT,
                "00-11111111111111111111111111111111-2222222222222222-01",
            ),
        ]);
        let sc = remote(&parent_context(&map, "", "").unwrap().unwrap());
        assert_eq!(sc.trace_id().to_string(), TRACE);
        assert_eq!(sc.span_id().to_string(), SPAN);
        assert!(sc.is_sampled());
    }

    #[test]
    fn traceparent_and_tracestate_are_read() {
        let map = headers(&[
            (TRACEPARENT, &format!("00-{TRACE}-{SPAN}-01")),
            (TRACESTATE, "congo=t61rcWkgMzE"),
            (TRACESTATE, "rojo=00f067aa0ba902b7"),
        ]);
        let sc = remote(&parent_context(&map, "", "").unwrap().unwrap());
        assert_eq!(sc.trace_id().to_string(), TRACE);
        assert_eq!(sc.span_id().to_string(), SPAN);
        assert!(sc.is_sampled() && sc.is_remote());
        assert_eq!(sc.trace_state().get("congo"), Some("t61rcWkgMzE"));
        assert_eq!(sc.trace_state().get("rojo"), Some("00f067aa0ba902b7"));
    }

    #[test]
    fn traceparent_sampled_flag_is_honoured_and_unknown_flags_dropped() {
        let map = headers(&[(TRACEPARENT, &format!("00-{TRACE}-{SPAN}-00"))]);
        assert!(!remote(&parent_context(&map, "", "").unwrap().unwrap()).is_sampled());
        let map = headers(&[(TRACEPARENT, &format!("00-{TRACE}-{SPAN}-09"))]);
        let sc = remote(&parent_context(&map, "", "").unwrap().unwrap());
        assert_eq!(sc.trace_flags(), TraceFlags::SAMPLED);
    }

    #[test]
    fn future_traceparent_versions_may_carry_more_parts() {
        let map = headers(&[(TRACEPARENT, &format!("01-{TRACE}-{SPAN}-01-extra"))]);
        assert!(parent_context(&map, "", "").unwrap().is_some());
    }

    #[test]
    fn bad_tracestate_is_dropped_not_an_error() {
        let map = headers(&[
            (TRACEPARENT, &format!("00-{TRACE}-{SPAN}-01")),
            (TRACESTATE, "no-equals-sign"),
        ]);
        let sc = remote(&parent_context(&map, "", "").unwrap().unwrap());
        assert_eq!(sc.trace_state().header(), "");
    }

    #[test]
    fn trace_id_alone_asks_for_a_root_span_in_that_trace() {
        let cx = parent_context(&HeaderMap::new(), TRACE, "")
            .unwrap()
            .unwrap();
        assert!(!cx.has_active_span());
        assert_eq!(requested_trace_id(&cx).unwrap().to_string(), TRACE);
        let map = headers(&[(X_TRACE_ID, TRACE)]);
        let cx = parent_context(&map, "", "").unwrap().unwrap();
        assert_eq!(
            cx.get::<RootInTrace>().map(|r| r.0.to_string()),
            Some(TRACE.to_owned())
        );
    }

    #[test]
    fn parent_span_id_alone_is_invalid() {
        let e = err(parent_context(&HeaderMap::new(), "", SPAN));
        assert_eq!(e.field, TRACE_ID_FIELD);
        let e = err(parent_context(
            &headers(&[(X_PARENT_SPAN_ID, SPAN)]),
            "",
            "",
        ));
        assert_eq!(e.field, X_TRACE_ID);
    }

    #[test]
    fn malformed_request_fields_are_named() {
        for bad in ["xyz", "+abc", &"a".repeat(33), "0", &"0".repeat(32), " abc"] {
            let e = err(parent_context(&HeaderMap::new(), bad, SPAN));
            assert_eq!(e.field, TRACE_ID_FIELD, "{bad:?}");
        }
        for bad in ["xyz", "-1", &"a".repeat(17), "0000"] {
            let e = err(parent_context(&HeaderMap::new(), TRACE, bad));
            assert_eq!(e.field, PARENT_SPAN_ID_FIELD, "{bad:?}");
        }
    }

    #[test]
    fn malformed_x_headers_are_named() {
        let e = err(parent_context(
            &headers(&[(X_TRACE_ID, "not-hex"), (X_PARENT_SPAN_ID, SPAN)]),
            "",
            "",
        ));
        assert_eq!(e.field, X_TRACE_ID);
        let e = err(parent_context(
            &headers(&[(X_TRACE_ID, TRACE), (X_PARENT_SPAN_ID, "0")]),
            "",
            "",
        ));
        assert_eq!(e.field, X_PARENT_SPAN_ID);
        let e = err(parent_context(
            &headers(&[(X_TRACE_ID, TRACE), (X_TRACE_ID, TRACE)]),
            "",
            "",
        ));
        assert_eq!(e.field, X_TRACE_ID);
        assert!(e.message.contains("more than once"));
        let mut map = HeaderMap::new();
        map.insert(X_TRACE_ID, HeaderValue::from_bytes(b"\xffab").unwrap());
        assert_eq!(err(parent_context(&map, "", "")).field, X_TRACE_ID);
    }

    #[test]
    fn empty_x_headers_count_as_absent() {
        let map = headers(&[
            (X_TRACE_ID, ""),
            (TRACEPARENT, &format!("00-{TRACE}-{SPAN}-01")),
        ]);
        let sc = remote(&parent_context(&map, "", "").unwrap().unwrap());
        assert_eq!(sc.span_id().to_string(), SPAN);
    }

    #[test]
    fn malformed_traceparents_are_named() {
        let cases = [
            "garbage".to_owned(),
            format!("00-{TRACE}-{SPAN}"),
            format!("0-{TRACE}-{SPAN}-01"),
            format!("ff-{TRACE}-{SPAN}-01"),
            format!("00-{TRACE}-{SPAN}-01-extra"),
            format!("00-{}-{SPAN}-01", TRACE.to_uppercase()),
            format!("00-{}-{SPAN}-01", &TRACE[1..]),
            format!("00-{}-{SPAN}-01", "0".repeat(32)),
            format!("00-{TRACE}-{}-01", "0".repeat(16)),
            format!("00-{TRACE}-{}-01", &SPAN[1..]),
            format!("00-{TRACE}-{SPAN}-1"),
            format!("00-{TRACE}-{SPAN}-0g"),
        ];
        for bad in cases {
            let e = err(parent_context(&headers(&[(TRACEPARENT, &bad)]), "", ""));
            assert_eq!(e.field, TRACEPARENT, "{bad:?}");
        }
        let twice = headers(&[
            (TRACEPARENT, &format!("00-{TRACE}-{SPAN}-01")),
            (TRACEPARENT, &format!("00-{TRACE}-{SPAN}-01")),
        ]);
        assert_eq!(err(parent_context(&twice, "", "")).field, TRACEPARENT);
    }

    #[test]
    fn works_with_grpc_metadata() {
        let mut metadata = tonic::metadata::MetadataMap::new();
        metadata.insert(X_TRACE_ID, TRACE.parse().unwrap());
        metadata.insert(X_PARENT_SPAN_ID, SPAN.parse().unwrap());
        let cx = parent_context(metadata.as_ref(), "", "").unwrap().unwrap();
        assert_eq!(remote(&cx).span_id().to_string(), SPAN);
    }

    #[test]
    fn remote_span_contexts_rebuild_from_stored_ids() {
        let sc = remote_span_context(TRACE, SPAN).unwrap();
        assert_eq!(
            (sc.trace_id().to_string(), sc.span_id().to_string()),
            (TRACE.into(), SPAN.into())
        );
        assert!(remote_span_context("", SPAN).is_none());
        assert!(remote_span_context(TRACE, "0").is_none());
    }

    #[test]
    fn ids_go_into_response_metadata_when_known() {
        let mut metadata = MetadataMap::new();
        insert_trace_ids(&mut metadata, TRACE, SPAN);
        assert_eq!(metadata.get(X_TRACE_ID).unwrap(), TRACE);
        assert_eq!(metadata.get(X_SPAN_ID).unwrap(), SPAN);
        let mut metadata = MetadataMap::new();
        insert_trace_ids(&mut metadata, TRACE, "");
        assert!(metadata.get(X_SPAN_ID).is_none());
        insert_trace_ids(&mut metadata, "", "");
        assert_eq!(metadata.len(), 1);
    }

    #[test]
    fn errors_name_the_field() {
        let e = InvalidTraceField::new(X_TRACE_ID, "must be 1 to 32 hex digits");
        assert_eq!(e.to_string(), "x-trace-id: must be 1 to 32 hex digits");
    }
}
