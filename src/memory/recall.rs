//! Semantic recall as the reference's `SemanticRecall` processor does it: the query is the last
//! user message's text; the top-k most similar stored messages of the scope (the thread, or
//! every thread of the resource) are found, those under the threshold dropped, each expanded by
//! `message_range` neighbours, and messages already in the prompt skipped. Hits from the run's
//! own thread go back into the history; hits from other threads become one system message.
//!
//! Neighbours are counted in the reference's stored rows: a user message is a row, and a run's
//! response (its assistant and tool messages, which agentd stores one per step) is one row, so
//! a hit inside a response brings the whole response along.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use bytes::Bytes;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::{VectorIndex, embed_texts};
use crate::config::{RecallOptions, RecallScope};
use crate::model::{Embedder, ModelError};
use crate::store::{MessageQuery, Store, StoreError, ThreadKey};

/// Stored messages read per row of range around a hit (a response row spans one message per
/// step plus its tool results); a row cut by the window's edge is kept in part.
const ROW_SPAN: u64 = 8;

/// The reference's opening of the system message of other threads' hits.
const OTHER_THREADS_HEADER: &str =
    "The following messages were remembered from a different conversation:";

/// What recall found for a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recalled {
    /// Stored messages of the run's own thread, oldest first (they go before the history).
    pub same_thread: Vec<Bytes>,
    /// The system message holding the other threads' hits, if any.
    pub system: Option<String>,
}

/// Why recall failed.
#[derive(Debug, thiserror::Error)]
pub enum RecallError {
    /// The embedder failed.
    #[error("{0}")]
    Embedding(ModelError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One recall: whose messages, what to look for, and what the prompt already holds.
pub struct RecallQuery<'a> {
    /// The run's thread and resource.
    pub key: &'a ThreadKey,
    /// The last user message's text.
    pub text: String,
    /// The run's recall options.
    pub options: &'a RecallOptions,
    /// Ids of the messages already in the prompt.
    pub known_ids: &'a HashSet<&'a str>,
}

/// What recall needs from the server.
pub struct RecallDeps<'a> {
    /// The store holding the messages.
    pub store: &'a dyn Store,
    /// The vector index.
    pub index: &'a VectorIndex,
    /// The agent's embedder.
    pub embedder: &'a dyn Embedder,
}

/// The parts of a stored message recall reads.
#[derive(Clone, Deserialize)]
struct Peek {
    id: String,
    role: String,
    #[serde(default)]
    parts: Vec<PeekPart>,
    #[serde(default)]
    created_at_ms: i64,
    #[serde(default)]
    signal: Option<serde::de::IgnoredAny>,
}

#[derive(Clone, Deserialize)]
struct PeekPart {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: String,
}

impl Peek {
    /// Part of a run's response row (an assistant or tool message, not a signal).
    fn is_response(&self) -> bool {
        self.signal.is_none() && (self.role == "assistant" || self.role == "tool")
    }
}

/// A message found by recall.
struct Found {
    thread_id: String,
    position: u64,
    raw: Bytes,
    peek: Peek,
}

/// Runs one recall.
pub async fn recall(
    deps: RecallDeps<'_>,
    query: RecallQuery<'_>,
    cancel: CancellationToken,
) -> Result<Recalled, RecallError> {
    let mut vectors = embed_texts(deps.embedder, vec![query.text], cancel)
        .await
        .map_err(RecallError::Embedding)?;
    let Some(vector) = vectors.pop() else {
        return Ok(Recalled::default());
    };
    let options = query.options;
    let thread_id = query.key.thread_id.as_str();
    let scope = (options.scope == RecallScope::Thread).then_some(thread_id);
    let mut hits = deps
        .index
        .search(&query.key.resource_id, vector, options.top_k, scope)
        .await?;
    if let Some(threshold) = options.threshold {
        hits.retain(|hit| f64::from(hit.score) >= threshold);
    }
    let mut by_thread: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for hit in hits {
        by_thread
            .entry(hit.thread_id)
            .or_default()
            .push(hit.position);
    }
    let reads = by_thread.into_iter().map(|(thread, positions)| {
        let key = ThreadKey {
            thread_id: thread,
            resource_id: query.key.resource_id.clone(),
        };
        async move { with_neighbours(deps.store, key, &positions, options).await }
    });
    let mut found = Vec::new();
    for read in futures::future::join_all(reads).await {
        found.extend(read?);
    }
    found.retain(|f| !query.known_ids.contains(f.peek.id.as_str()));
    let (mut same, other): (Vec<Found>, Vec<Found>) =
        found.into_iter().partition(|f| f.thread_id == thread_id);
    same.sort_by_key(|f| f.position);
    Ok(Recalled {
        same_thread: same.into_iter().map(|f| f.raw).collect(),
        system: (!other.is_empty()).then(|| other_threads_message(other)),
    })
}

/// The hits of one thread with their neighbouring rows, each message once.
async fn with_neighbours(
    store: &dyn Store,
    key: ThreadKey,
    positions: &[u64],
    options: &RecallOptions,
) -> Result<Vec<Found>, StoreError> {
    let range = options.message_range;
    let before = ROW_SPAN * (range.before as u64 + 1);
    let after = ROW_SPAN * (range.after as u64 + 1);
    // Overlapping windows are read once.
    let mut windows: Vec<(u64, u64)> = positions
        .iter()
        .map(|&p| (p.saturating_sub(before), p.saturating_add(after + 1)))
        .collect();
    windows.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (from, to) in windows {
        match merged.last_mut() {
            Some(last) if from <= last.1 => last.1 = last.1.max(to),
            _ => merged.push((from, to)),
        }
    }
    let mut keep: BTreeMap<u64, (Bytes, Peek)> = BTreeMap::new();
    for (from, to) in merged {
        let query = MessageQuery {
            from,
            to,
            limit: usize::try_from(to - from).unwrap_or(usize::MAX),
            newest_first: false,
        };
        let messages = match store.read_messages(&key, query).await {
            Ok(Some(messages)) => messages,
            // The thread was deleted (or never saved) since its vectors were read.
            Ok(None) | Err(StoreError::WrongOwner { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let window: Vec<(u64, Bytes, Peek)> = messages
            .into_iter()
            .filter_map(|(position, raw)| {
                let peek = serde_json::from_slice::<Peek>(&raw).ok()?;
                Some((position, raw, peek))
            })
            .collect();
        let rows = rows_of(&window);
        for &hit in positions.iter().filter(|&&p| from <= p && p < to) {
            let Some(row) = rows.iter().position(|r| r.contains(&hit)) else {
                continue; // the message itself is gone
            };
            let first = row.saturating_sub(range.before);
            let last = (row + range.after).min(rows.len().saturating_sub(1));
            for position in rows[first..=last].iter().flatten() {
                keep.entry(*position).or_insert_with(|| {
                    let at = window.partition_point(|(p, _, _)| p < position);
                    let (_, raw, peek) = &window[at];
                    (raw.clone(), peek.clone())
                });
            }
        }
    }
    Ok(keep
        .into_iter()
        .map(|(position, (raw, peek))| Found {
            thread_id: key.thread_id.clone(),
            position,
            raw,
            peek,
        })
        .collect())
}

/// The positions of each row of a window, in order: consecutive response messages form one row.
fn rows_of(window: &[(u64, Bytes, Peek)]) -> Vec<BTreeSet<u64>> {
    let mut rows: Vec<BTreeSet<u64>> = Vec::new();
    let mut previous_is_response = false;
    for (position, _, peek) in window {
        let response = peek.is_response();
        match rows.last_mut() {
            Some(row) if response && previous_is_response => {
                row.insert(*position);
            }
            _ => rows.push(BTreeSet::from([*position])),
        }
        previous_is_response = response;
    }
    rows
}

/// The system message of other threads' hits, byte for byte as the reference formats it
/// (`formatCrossThreadMessages`): sorted by time, thread, role and id; a header per UTC day;
/// each message `Message from previous conversation at {h}:{mm} {AM|PM}: {Role}: {text}`,
/// with the text parts joined by spaces. The reference puts no separator between two
/// messages of one day; neither does this.
fn other_threads_message(mut found: Vec<Found>) -> String {
    // Task-list signals are the run's own bookkeeping, not conversation.
    found.retain(|f| f.peek.signal.is_none());
    found.sort_by(|a, b| {
        (
            a.peek.created_at_ms,
            &a.thread_id,
            role_order(&a.peek.role),
            &a.peek.id,
        )
            .cmp(&(
                b.peek.created_at_ms,
                &b.thread_id,
                role_order(&b.peek.role),
                &b.peek.id,
            ))
    });
    let lines: Vec<(i64, &str, String)> = found
        .iter()
        .map(|f| {
            let text: Vec<&str> = f
                .peek
                .parts
                .iter()
                .filter(|p| p.kind == "text")
                .map(|p| p.text.as_str())
                .collect();
            (f.peek.created_at_ms, f.peek.role.as_str(), text.join(" "))
        })
        .collect();
    format_other_threads(&lines)
}

/// Formats (created_at_ms, role, text) lines, already in order.
pub fn format_other_threads(lines: &[(i64, &str, String)]) -> String {
    let mut result = String::new();
    let mut last_day: Option<String> = None;
    for (created_at_ms, role, text) in lines {
        let (day, time) = utc_day_and_time(*created_at_ms);
        if last_day.as_deref() != Some(day.as_str()) {
            result.push_str(&format!("\nthe following messages are from {day}\n"));
        }
        let mut label = role.to_string();
        if let Some(first) = label.get_mut(..1) {
            first.make_ascii_uppercase();
        }
        result.push_str(&format!(
            "Message from previous conversation at {time}: {label}: {text}"
        ));
        last_day = Some(day);
    }
    format!(
        "{OTHER_THREADS_HEADER}\n<remembered_from_other_conversation>\n{result}\n<end_remembered_from_other_conversation>"
    )
}

/// The reference's role order for equal times.
fn role_order(role: &str) -> u8 {
    match role {
        "system" => 0,
        "user" => 1,
        "assistant" => 2,
        "tool" => 3,
        _ => 99,
    }
}

/// `("{YYYY}, {Mon}, {D}", "{h}:{mm} {AM|PM}")` of a Unix-milliseconds time, in UTC.
fn utc_day_and_time(ms: i64) -> (String, String) {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = ms.div_euclid(86_400_000);
    let minutes_of_day = ms.rem_euclid(86_400_000) / 60_000;
    let (year, month, day) = crate::dates::civil(days);
    let (hour, minute) = (minutes_of_day / 60, minutes_of_day % 60);
    let hour12 = if hour % 12 == 0 { 12 } else { hour % 12 };
    let ampm = if hour < 12 { "AM" } else { "PM" };
    let month_name = MONTHS[usize::try_from(month - 1).unwrap_or(0).min(11)];
    (
        format!("{year}, {month_name}, {day}"),
        format!("{hour12}:{minute:02} {ampm}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_utc_on_a_twelve_hour_clock() {
        // 2024-02-29T00:05:00Z, 2024-02-29T12:59:00Z, 2026-12-02T23:01:00Z.
        assert_eq!(
            utc_day_and_time(1_709_165_100_000),
            ("2024, Feb, 29".into(), "12:05 AM".into())
        );
        assert_eq!(utc_day_and_time(1_709_211_540_000).1, "12:59 PM");
        assert_eq!(
            utc_day_and_time(1_796_252_460_000),
            ("2026, Dec, 2".into(), "11:01 PM".into())
        );
        assert_eq!(
            utc_day_and_time(0),
            ("1970, Jan, 1".into(), "12:00 AM".into())
        );
    }

    #[test]
    fn other_threads_read_as_the_reference_writes_them() {
        let lines = [
            (1_709_165_100_000, "user", "Bake sourdough".to_owned()),
            (
                1_709_165_160_000,
                "assistant",
                "Feed the starter".to_owned(),
            ),
            (1_796_252_460_000, "user", "Again".to_owned()),
        ];
        assert_eq!(
            format_other_threads(&lines),
            "The following messages were remembered from a different conversation:\n\
             <remembered_from_other_conversation>\n\
             \nthe following messages are from 2024, Feb, 29\n\
             Message from previous conversation at 12:05 AM: User: Bake sourdough\
             Message from previous conversation at 12:06 AM: Assistant: Feed the starter\
             \nthe following messages are from 2026, Dec, 2\n\
             Message from previous conversation at 11:01 PM: User: Again\
             \n<end_remembered_from_other_conversation>"
        );
    }

    fn peek(role: &str, signal: bool) -> Peek {
        let json = if signal {
            format!(r#"{{"id":"x","role":"{role}","signal":{{}}}}"#)
        } else {
            format!(r#"{{"id":"x","role":"{role}"}}"#)
        };
        serde_json::from_str(&json).unwrap()
    }

    #[test]
    fn a_response_is_one_row() {
        let window: Vec<(u64, Bytes, Peek)> = [
            ("user", false),
            ("assistant", false),
            ("tool", false),
            ("assistant", false),
            ("user", true),
            ("assistant", false),
            ("user", false),
        ]
        .into_iter()
        .enumerate()
        .map(|(i, (role, signal))| (i as u64 + 10, Bytes::new(), peek(role, signal)))
        .collect();
        let rows: Vec<Vec<u64>> = rows_of(&window)
            .into_iter()
            .map(|r| r.into_iter().collect())
            .collect();
        assert_eq!(
            rows,
            vec![vec![10], vec![11, 12, 13], vec![14], vec![15], vec![16]]
        );
    }
}
