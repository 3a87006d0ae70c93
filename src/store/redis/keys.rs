//! Key and channel names: every key of a thread or run shares one `{hash tag}`, and id parts
//! are escaped so that distinct ids never share a key.

use std::borrow::Cow;

use crate::store::{ThreadKey, ThreadOrder};

/// Escapes the characters that delimit key parts, so that distinct ids never share a key.
pub(super) fn esc(part: &str) -> Cow<'_, str> {
    if !part.contains(['%', '{', '}', ':']) {
        return Cow::Borrowed(part);
    }
    let mut out = String::with_capacity(part.len() + 8);
    for c in part.chars() {
        match c {
            '%' => out.push_str("%25"),
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            ':' => out.push_str("%3A"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A key of a thread (`suffix` is trusted, not escaped).
pub(super) fn thread_key(thread_id: &str, suffix: &str) -> String {
    format!("agentd:{{t:{}}}:{suffix}", esc(thread_id))
}

/// The key of one document of a thread.
pub(super) fn doc_key(thread_id: &str, kind: &str) -> String {
    thread_key(thread_id, &format!("doc:{}", esc(kind)))
}

/// The channel of a document's new values, scoped to the resource that owns the thread.
pub(super) fn watch_channel(key: &ThreadKey, kind: &str) -> String {
    thread_key(
        &key.thread_id,
        &format!("watch:{}:{}", esc(kind), esc(&key.resource_id)),
    )
}

/// The sorted set of runs executing somewhere, scored by when their lease ends (one key: the
/// takeover scan reads it from any replica).
pub(super) const LEASES_KEY: &str = "agentd:run-leases";

/// A key (or channel) of a run.
pub(super) fn run_key(run_id: &str, suffix: &str) -> String {
    format!("agentd:{{r:{}}}:{suffix}", esc(run_id))
}

/// A resource's thread listing (sorted set of thread ids by time). Its tag is the resource's,
/// so scripts that keep it current with a thread touch two slots: Redis Cluster support will
/// have to move that update out of the thread scripts.
pub(super) fn listing_key(resource_id: &str, order: ThreadOrder) -> String {
    let suffix = match order {
        ThreadOrder::Created => "threads:created",
        ThreadOrder::Updated => "threads:updated",
    };
    resource_key(resource_id, suffix)
}

/// A key of a resource.
pub(super) fn resource_key(resource_id: &str, suffix: &str) -> String {
    format!("agentd:{{u:{}}}:{suffix}", esc(resource_id))
}

/// The key of an index set.
pub(super) fn index_key(index: &str) -> String {
    format!("agentd:{{i:{}}}:set", esc(index))
}

/// The list of a score list's records (a run's, a thread's or an agent's scores).
pub(super) fn score_key(list: &str) -> String {
    format!("agentd:{{s:{}}}:scores", esc(list))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_ids_never_collide() {
        assert_eq!(thread_key("abc", "meta"), "agentd:{t:abc}:meta");
        assert_ne!(
            doc_key("x", "tasks}:meta"),
            thread_key("x}:doc:tasks", "meta")
        );
        assert_eq!(esc("a%7B"), "a%257B");
    }
}
