//! Response extras besides the model's output: which response headers reach the metadata
//! event, the usage details reported as provider metadata, and the `data:` URLs generated images
//! arrive in.

use std::collections::BTreeMap;

use http::header::HeaderMap;
use serde_json::{Map, Value, json};

/// Response headers that describe the connection rather than the answer (RFC 9110 §7.6.1).
const HOP_BY_HOP_HEADERS: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "trailers",
    "transfer-encoding",
    "upgrade",
];
/// Cookies may carry session secrets and mean nothing to the caller.
const COOKIE_HEADERS: &[&str] = &["set-cookie", "set-cookie2", "cookie"];

/// The response headers for the metadata: all of them (provider rate limits, request ids…)
/// except hop-by-hop and cookie headers; repeated headers are joined with `, ` as `fetch` does.
pub(super) fn kept_headers(headers: &HeaderMap) -> BTreeMap<String, String> {
    let mut kept: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let name = name.as_str(); // already lower-case
        if HOP_BY_HOP_HEADERS.contains(&name) || COOKIE_HEADERS.contains(&name) {
            continue;
        }
        // A value that is not text cannot be passed on faithfully, so it is left out.
        let Ok(value) = std::str::from_utf8(value.as_bytes()) else {
            continue;
        };
        kept.entry(name.to_owned())
            .and_modify(|joined| {
                joined.push_str(", ");
                joined.push_str(value);
            })
            .or_insert_with(|| value.to_owned());
    }
    kept
}
/// Usage details as @ai-sdk/openai names them in its provider metadata, and where they are.
const USAGE_METADATA: &[(&str, &str)] = &[
    ("cachedPromptTokens", "/prompt_tokens_details/cached_tokens"),
    (
        "reasoningTokens",
        "/completion_tokens_details/reasoning_tokens",
    ),
    (
        "acceptedPredictionTokens",
        "/completion_tokens_details/accepted_prediction_tokens",
    ),
    (
        "rejectedPredictionTokens",
        "/completion_tokens_details/rejected_prediction_tokens",
    ),
];

/// `{"openai": {...}}` with the usage details present in `usage`; `None` when there are none.
pub(super) fn usage_metadata(usage: &Value) -> Option<Value> {
    let details: Map<String, Value> = USAGE_METADATA
        .iter()
        .filter_map(|(name, pointer)| {
            let count = usage.pointer(pointer).filter(|v| v.is_number())?;
            Some(((*name).to_owned(), count.clone()))
        })
        .collect();
    (!details.is_empty()).then(|| json!({ "openai": details }))
}
/// Decodes an RFC 2397 `data:` URL into its bytes and media type.
pub(super) fn decode_data_url(url: &str) -> Option<(Vec<u8>, String)> {
    let url = url.trim();
    let scheme = url.get(..5)?;
    if !scheme.eq_ignore_ascii_case("data:") {
        return None;
    }
    let (meta, payload) = url.get(5..)?.split_once(',')?;
    let mut params = meta.split(';').map(str::trim);
    let mime_type = match params.next() {
        Some(mime) if !mime.is_empty() => mime.to_ascii_lowercase(),
        _ => "text/plain".to_owned(),
    };
    let is_base64 = params.any(|p| p.eq_ignore_ascii_case("base64"));
    let data = percent_decode(payload);
    let data = if is_base64 {
        decode_base64(&data)?
    } else {
        data
    };
    Some((data, mime_type))
}

/// `%XX` escapes to bytes; anything else, a malformed escape included, is kept as is.
fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let hex = |i: usize| bytes.get(i).and_then(|&b| (b as char).to_digit(16));
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(high), Some(low)) = (hex(i + 1), hex(i + 2))
        {
            // Two hex digits: always below 256.
            out.push((high * 16 + low) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// Base64 as servers really send it: padded or not, standard or URL-safe alphabet, with line
/// breaks.
fn decode_base64(text: &[u8]) -> Option<Vec<u8>> {
    use base64::Engine;
    use base64::alphabet::{STANDARD, URL_SAFE};
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    let text: Vec<u8> = text
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    let config = GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true);
    let alphabet = if text.iter().any(|b| matches!(b, b'-' | b'_')) {
        &URL_SAFE
    } else {
        &STANDARD
    };
    GeneralPurpose::new(alphabet, config).decode(text).ok()
}

#[cfg(test)]
mod tests {
    use http::header::HeaderValue;

    use super::*;

    #[test]
    fn headers_keep_all_but_hop_by_hop_and_cookies() {
        let mut h = HeaderMap::new();
        for (name, value) in [
            ("content-type", "text/event-stream"),
            ("x-request-id", "req_1"),
            ("anthropic-ratelimit-requests-remaining", "49"),
            ("set-cookie", "session=secret"),
            ("set-cookie2", "a=b"),
            ("cookie", "c=d"),
            ("connection", "keep-alive"),
            ("keep-alive", "timeout=5"),
            ("proxy-authenticate", "Basic"),
            ("proxy-authorization", "Basic x"),
            ("te", "trailers"),
            ("trailer", "x-checksum"),
            ("trailers", "x"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "h2c"),
        ] {
            h.append(name, HeaderValue::from_static(value));
        }
        h.append("vary", HeaderValue::from_static("origin"));
        h.append("vary", HeaderValue::from_static("accept"));
        let kept = kept_headers(&h);
        let expected: BTreeMap<String, String> = [
            ("anthropic-ratelimit-requests-remaining", "49"),
            ("content-type", "text/event-stream"),
            ("vary", "origin, accept"),
            ("x-request-id", "req_1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(kept, expected);
    }

    #[test]
    fn data_urls_decode() {
        let ok = [
            ("data:image/png;base64,Zm9v", b"foo".as_slice(), "image/png"),
            ("DATA:Image/PNG;BASE64,Zm9vYg", b"foob", "image/png"),
            ("data:image/webp;base64,Zm9v\nYmFy", b"foobar", "image/webp"),
            (
                "data:application/octet-stream;base64,-_8=",
                &[0xfb, 0xff],
                "application/octet-stream",
            ),
            ("data:,a%20b", b"a b", "text/plain"),
            ("data:text/plain;charset=utf-8,%zz", b"%zz", "text/plain"),
        ];
        for (url, data, mime) in ok {
            assert_eq!(
                decode_data_url(url),
                Some((data.to_vec(), mime.to_owned())),
                "{url}"
            );
        }
        for bad in [
            "https://example.com/a.png",
            "data:image/png;base64",
            "data:image/png;base64,@@@",
            "dat",
            "",
        ] {
            assert_eq!(decode_data_url(bad), None, "{bad}");
        }
    }

    #[test]
    fn usage_metadata_names_the_details_present() {
        assert_eq!(usage_metadata(&json!({"prompt_tokens": 1})), None);
        assert_eq!(
            usage_metadata(&json!({"prompt_tokens_details": {"cached_tokens": null}})),
            None
        );
        assert_eq!(
            usage_metadata(&json!({
                "prompt_tokens_details": {"cached_tokens": 5, "audio_tokens": 0},
                "completion_tokens_details": {
                    "reasoning_tokens": 2,
                    "accepted_prediction_tokens": 3,
                    "rejected_prediction_tokens": 4,
                },
            })),
            Some(json!({"openai": {
                "cachedPromptTokens": 5,
                "reasoningTokens": 2,
                "acceptedPredictionTokens": 3,
                "rejectedPredictionTokens": 4,
            }}))
        );
    }
}
