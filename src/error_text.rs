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
