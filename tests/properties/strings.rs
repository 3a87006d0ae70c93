//! Odd strings for generated requests and arguments: empty, control characters, unicode
//! (combining marks, astral planes, right-to-left), lengths at and past the limits, and
//! plain text that the checks accept.

use proptest::prelude::*;

/// Lengths around the default limits (`max_id_bytes` 256, `max_text_bytes` 16 KiB), and one
/// far beyond.
const EDGE_LENGTHS: [usize; 6] = [255, 256, 257, 16 * 1024, 16 * 1024 + 1, 70_000];

/// Any of the odd kinds, plain text most often (so that valid requests are common too).
pub fn odd_string() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-zA-Z0-9_ ]{1,12}",
        1 => Just(String::new()),
        1 => "[\\x00-\\x1f\\x7f\\u{80}-\\u{9f}]{1,3}",
        2 => "\\PC{0,12}",
        1 => "[\\u{300}-\\u{36f}\\u{202e}\\u{1f600}-\\u{1f64f}\\u{10000}-\\u{10ffff}]{1,6}",
        1 => prop::sample::select(EDGE_LENGTHS.as_slice()).prop_map(|n| "x".repeat(n)),
        1 => prop::sample::select(EDGE_LENGTHS.as_slice()).prop_map(|n| "é".repeat(n / 2 + 1)),
    ]
}

/// Short texts, often equal to each other (so ids and contents collide), some of them the
/// spec's own examples.
pub fn colliding_text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "Fix bug", "fix bug", "Review", "Review diff", "Other", "!!!", "A & <b>",
            "Ünïcode café déjà  vu -- Step #2", "task_fix_bug", "task_review", "x", "a",
        ])
        .prop_map(str::to_owned),
        1 => "[a-c ]{1,3}",
        1 => "\\PC{1,8}",
    ]
}

/// Ids as a model sends them: none, empty, generated-looking (some colliding with generated
/// ids), or anything.
pub fn draft_id() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        3 => Just(None),
        1 => Just(Some(String::new())),
        2 => prop::sample::select(vec![
            "task_fix_bug", "task_fix_bug_2", "task_review", "task_review_2", "task_item", "x",
        ])
        .prop_map(|id| Some(id.to_owned())),
        1 => "\\PC{1,8}".prop_map(Some),
    ]
}
