//! Property tests: the task-list rules, the validators of the task tools' JSON arguments and
//! the services' request checks hold for generated inputs (issue 15, item 8). Case counts are
//! kept small so the whole file stays a few seconds in a debug build; proptest's failure
//! persistence records any failing seed under `tests/properties/*.txt`.

#[path = "properties/field_paths.rs"]
mod field_paths;
#[path = "properties/requests.rs"]
mod requests;
#[path = "properties/strings.rs"]
mod strings;
#[path = "properties/task_args.rs"]
mod task_args;
#[path = "properties/task_rules.rs"]
mod task_rules;

use proptest::test_runner::{Config, FileFailurePersistence};

/// `cases` cases (`PROPTEST_CASES` overrides, for a longer run by hand); a failing seed is
/// kept beside its test file (`<file>.regressions`), since proptest's default looks for a
/// `lib.rs` that an integration test does not have.
pub fn config(cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(cases);
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..Config::default()
    }
}
