//! An error and its causes on one line, for messages people read ("transport error: connection
//! refused"): the useful part of a network error is often a source several levels down.

/// `error` followed by each cause not already contained in the text so far (hyper, reqwest and
/// tonic often repeat their source's message in their own).
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The longest prefix of `s` of at most `max` bytes that ends on a char boundary.
pub fn prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `s` cut to at most about `max` bytes, the cut marked with how much was left out, so an error
/// that echoes a client's value stays small.
pub fn clip(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max {
        return s.into();
    }
    let kept = prefix(s, max);
    format!("{kept}… ({} more bytes)", s.len() - kept.len()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_end_on_char_boundaries() {
        assert_eq!(prefix("héllo", 2), "h");
        assert_eq!(prefix("héllo", 3), "hé");
        assert_eq!(prefix("abc", 10), "abc");
    }

    #[test]
    fn clips_mark_what_they_cut() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcdef", 2), "ab… (4 more bytes)");
    }
}
