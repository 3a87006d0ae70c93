//! `MemoryConfig.semantic_recall` of a request, checked and turned into the domain's
//! [`RecallOverride`]; every violation names its field.

use super::error::Violations;
use crate::config::{MAX_MESSAGE_RANGE, MAX_TOP_K, MessageRange, RecallScope};
use crate::memory::RecallOverride;
use crate::pb;

/// The field path of the message in a `GenerateRequest`.
const FIELD: &str = "memory.options.semantic_recall";

/// The request's recall settings.
pub(super) fn recall_override(v: &mut Violations, r: &pb::SemanticRecall) -> RecallOverride {
    let top_k = r.top_k.and_then(|n| match usize::try_from(n) {
        Ok(n) if (1..=MAX_TOP_K).contains(&n) => Some(n),
        _ => {
            v.add(
                format!("{FIELD}.top_k"),
                format!("must be 1 to {MAX_TOP_K}"),
            );
            None
        }
    });
    let message_range = r.message_range.as_ref().and_then(|range| {
        let side = |v: &mut Violations, name: &str, n: i32| match usize::try_from(n) {
            Ok(n) if n <= MAX_MESSAGE_RANGE => Some(n),
            _ => {
                v.add(
                    format!("{FIELD}.message_range.{name}"),
                    format!("must be 0 to {MAX_MESSAGE_RANGE}"),
                );
                None
            }
        };
        let before = side(v, "before", range.before);
        let after = side(v, "after", range.after);
        Some(MessageRange {
            before: before?,
            after: after?,
        })
    });
    let scope = match pb::RecallScope::try_from(r.scope) {
        Ok(pb::RecallScope::Unspecified) => None,
        Ok(pb::RecallScope::Resource) => Some(RecallScope::Resource),
        Ok(pb::RecallScope::Thread) => Some(RecallScope::Thread),
        Err(_) => {
            v.add(format!("{FIELD}.scope"), "unknown scope");
            None
        }
    };
    let threshold = r.threshold.filter(|t| {
        let ok = t.is_finite() && (-1.0..=1.0).contains(t);
        if !ok {
            v.add(format!("{FIELD}.threshold"), "must be between -1 and 1");
        }
        ok
    });
    RecallOverride {
        enabled: r.enabled,
        top_k,
        message_range,
        scope,
        threshold,
    }
}
