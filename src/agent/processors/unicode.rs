//! `unicode-normalizer`: the input's text in NFKC with whitespace cleaned up, as the
//! reference's UnicodeNormalizer does it, character for character.

use unicode_normalization::UnicodeNormalization;

use crate::agent::message::{Message, Part, Role};
use crate::config::UnicodeOptions;

/// Normalizes every text part of the non-system messages.
pub fn apply(options: &UnicodeOptions, messages: &mut [Message]) {
    for message in messages.iter_mut().filter(|m| m.role != Role::System) {
        for part in &mut message.parts {
            if let Part::Text { text } = part {
                *text = normalize(options, text);
            }
        }
    }
}

/// One text, normalized.
pub fn normalize(options: &UnicodeOptions, text: &str) -> String {
    let mut out: String = text.nfkc().collect();
    if options.strip_control_chars {
        // Both of the reference's variants remove the same characters: its "keep emoji off"
        // class matches UTF-16 code units, so every astral character survives it too.
        out.retain(|c| !is_stripped_control(c));
    }
    if options.collapse_whitespace {
        out = collapse(&out);
    }
    if options.trim {
        out = js_trim(&out).to_owned();
    }
    out
}

/// C0 controls but tab, newline and carriage return; DEL; C1 controls.
fn is_stripped_control(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

/// CRLF and CR become LF, a run of LFs one LF, a run of spaces and tabs one space.
fn collapse(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' | '\n' => {
                while matches!(chars.peek(), Some('\r' | '\n')) {
                    chars.next();
                }
                out.push('\n');
            }
            ' ' | '\t' => {
                while matches!(chars.peek(), Some(' ' | '\t')) {
                    chars.next();
                }
                out.push(' ');
            }
            c => out.push(c),
        }
    }
    out
}

/// JavaScript's `String.prototype.trim`: its whitespace differs from Rust's (it trims U+FEFF,
/// and keeps U+0085).
pub fn js_trim(text: &str) -> &str {
    text.trim_matches(is_js_space)
}

/// ECMAScript WhiteSpace and LineTerminator.
pub fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\u{9}'..='\u{d}'
            | ' '
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
            | '\u{feff}'
    )
}
