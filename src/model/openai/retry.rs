//! How long to wait before retrying a failed request: exponential backoff, or the provider's
//! own `Retry-After`, capped so that a provider cannot stall a run.

use std::time::{Duration, SystemTime};

use http::header::HeaderMap;

/// First retry delay; doubled on each further attempt.
const BACKOFF_BASE: Duration = Duration::from_millis(200);
/// Longest computed backoff between two attempts.
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Longest wait a provider's `Retry-After` may impose.
const RETRY_AFTER_MAX: Duration = Duration::from_secs(30);

/// Exponential backoff: 200 ms, 400 ms, 800 ms, … capped at [`BACKOFF_MAX`].
pub(super) fn backoff(attempt: u32) -> Duration {
    BACKOFF_BASE
        .saturating_mul(1u32.checked_shl(attempt).unwrap_or(u32::MAX))
        .min(BACKOFF_MAX)
}

/// The provider's requested delay (`retry-after-ms`, `Retry-After` seconds or HTTP date), capped.
pub(super) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let delay = if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        Duration::try_from_secs_f64(ms / 1000.0).ok()?
    } else {
        let value = header("retry-after")?;
        match value.parse::<f64>() {
            Ok(secs) => Duration::try_from_secs_f64(secs).ok()?,
            Err(_) => parse_http_date(value)?
                .duration_since(now)
                .unwrap_or(Duration::ZERO),
        }
    };
    Some(delay.min(RETRY_AFTER_MAX))
}

/// Parses an HTTP date in any of RFC 9110's three formats (§5.6.7): IMF-fixdate, RFC 850 and
/// asctime.
fn parse_http_date(value: &str) -> Option<SystemTime> {
    httpdate::parse_http_date(value).ok()
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use http::header::HeaderValue;

    use super::*;

    #[test]
    fn http_dates_parse_in_all_three_formats() {
        let expected = UNIX_EPOCH + Duration::from_secs(784_111_777);
        for value in [
            "Sun, 06 Nov 1994 08:49:37 GMT",  // IMF-fixdate
            "Sunday, 06-Nov-94 08:49:37 GMT", // RFC 850
            "Sun Nov  6 08:49:37 1994",       // asctime
        ] {
            assert_eq!(parse_http_date(value), Some(expected), "{value}");
        }
        assert!(parse_http_date("garbage").is_none());
        assert!(parse_http_date("Sun, 06 Nov 1994 25:49:37 GMT").is_none());
    }

    #[test]
    fn retry_after_forms_and_cap() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_770);
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h, now), None);
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(2)));
        h.insert(
            "retry-after",
            HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT"),
        );
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(7)));
        h.insert(
            "retry-after",
            HeaderValue::from_static("Sun Nov  6 08:49:37 1994"),
        );
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(7)));
        h.insert("retry-after", HeaderValue::from_static("86400"));
        assert_eq!(retry_after(&h, now), Some(RETRY_AFTER_MAX));
        h.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_millis(150)));
    }

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff(0), Duration::from_millis(200));
        assert_eq!(backoff(2), Duration::from_millis(800));
        assert_eq!(backoff(40), BACKOFF_MAX);
    }
}
