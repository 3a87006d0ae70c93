//! Encodings of script replies and stored entries.

use std::time::Duration;

use bytes::Bytes;
use redis::{FromRedisValue, Value};

use crate::store::{Cas, StoreError, StoreResult, Versioned};

/// Decodes a CAS script reply: `{1, v}`, `{0}` or `{0, v, value}`.
pub(super) fn decode_cas(reply: Vec<Value>) -> StoreResult<Cas> {
    let mut parts = reply.into_iter();
    let written = parts.next().map(u8::from_redis_value).transpose();
    let version = parts.next().map(u64::from_redis_value).transpose();
    let value = parts.next().map(Bytes::from_redis_value).transpose();
    let corrupt = |e: redis::ParsingError| StoreError::Corrupt(format!("CAS reply: {e}"));
    match (
        written.map_err(corrupt)?,
        version.map_err(corrupt)?,
        value.map_err(corrupt)?,
    ) {
        (Some(1), Some(version), None) => Ok(Cas::Written(version)),
        (Some(0), None, None) => Ok(Cas::Conflict(None)),
        (Some(0), Some(version), Some(value)) => {
            Ok(Cas::Conflict(Some(Versioned { version, value })))
        }
        _ => Err(StoreError::Corrupt("unexpected CAS reply shape".into())),
    }
}

/// Builds a [`Versioned`] from a script's `{v, value}` pair.
pub(super) fn versioned((version, value): (u64, Bytes)) -> Versioned {
    Versioned { version, value }
}

/// Encodes `<number>:<bytes>` (log entries and doc notifications).
pub(super) fn encode_numbered(number: u64, bytes: &[u8]) -> Vec<u8> {
    let mut out = format!("{number}:").into_bytes();
    out.extend_from_slice(bytes);
    out
}

/// Decodes `<number>:<bytes>`.
pub(super) fn split_numbered(raw: &[u8]) -> StoreResult<(u64, Bytes)> {
    let corrupt = || StoreError::Corrupt("malformed numbered entry".into());
    let colon = raw.iter().position(|b| *b == b':').ok_or_else(corrupt)?;
    let number = std::str::from_utf8(&raw[..colon])
        .ok()
        .and_then(|digits| digits.parse().ok())
        .ok_or_else(corrupt)?;
    Ok((number, Bytes::copy_from_slice(&raw[colon + 1..])))
}

/// Milliseconds for PX/PEXPIRE (at least 1: Redis rejects 0).
pub(super) fn ttl_ms(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_entries_round_trip() {
        let raw = encode_numbered(42, b"a:b");
        assert_eq!(
            split_numbered(&raw).unwrap(),
            (42, Bytes::from_static(b"a:b"))
        );
        assert!(split_numbered(b"nope").is_err());
    }
}
