//! A reader's test of the source layout: the questions a newcomer asks have one answer each,
//! and the agent layer keeps its shape (no transport in it, no file past ~600 lines).

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source files (relative to the crate) whose text contains `needle`; unit-test files
/// (`tests.rs`) are not where a reader looks for a rule.
fn files_with(needle: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    let mut hits: Vec<String> = files
        .iter()
        .filter(|f| !f.ends_with("tests.rs"))
        .filter(|f| {
            std::fs::read_to_string(f)
                .map(|text| text.contains(needle))
                .unwrap_or(false)
        })
        .filter_map(|f| f.strip_prefix(root).ok().map(|p| p.display().to_string()))
        .collect();
    hits.sort();
    hits
}

#[test]
fn what_a_declined_call_tells_the_model_lives_in_one_place() {
    assert_eq!(
        files_with("Tool call was not approved by the user"),
        ["src/agent/decision.rs"]
    );
    assert_eq!(
        files_with("fn approval_resume_schema"),
        ["src/agent/decision.rs"]
    );
}

#[test]
fn a_run_changes_status_in_one_place() {
    assert_eq!(files_with("status = RunStatus::"), ["src/agent/record.rs"]);
}

#[test]
fn a_config_knob_and_its_environment_variable_are_added_in_one_place() {
    assert_eq!(files_with("\"AGENTD_"), ["src/config/mod.rs"]);
}

#[test]
fn the_result_is_aggregated_and_failures_are_typed_in_one_place_each() {
    assert_eq!(files_with("impl RunResult"), ["src/agent/result.rs"]);
    assert_eq!(
        files_with("\"MODEL_PROVIDER_ERROR\""),
        ["src/agent/error.rs"]
    );
}

#[test]
fn the_agent_layer_has_no_transport_and_no_oversized_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src/agent"), &mut files);
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        assert!(!text.contains("tonic"), "{} uses tonic", file.display());
        let lines = text.lines().count();
        assert!(lines <= 650, "{} has {lines} lines", file.display());
    }
}
