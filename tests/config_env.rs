//! The binary's config layering, end to end through `--check-config`: file, then `AGENTD_*`,
//! then flags, each later source winning; the variables added for `limits.max_messages`,
//! `limits.max_log_chunks` and `auth.api_key_sha256` are read.

use std::process::{Command, Output};

/// `agentd --check-config` with `config` as the file, `env` and then `args`; no other
/// `AGENTD_*` variable leaks in from the test's environment.
fn check(config: &str, env: &[(&str, &str)], args: &[&str]) -> Output {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("agentd.toml");
    std::fs::write(&path, config).expect("write config");
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentd"));
    command.arg("--check-config").arg("--config").arg(&path);
    for (_, name) in agentd::config::OVERRIDES {
        command.env_remove(name);
    }
    command.envs(env.iter().copied()).args(args);
    command.output().expect("agentd runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn env_overrides_the_file_and_flags_override_env() {
    let file = "[limits]\nmax_messages = 0\n";
    let out = check(file, &[], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("limits.max_messages must be > 0"),
        "{}",
        stderr(&out)
    );
    let env = [("AGENTD_MAX_MESSAGES", "5")];
    let out = check(file, &env, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = check(file, &env, &["--max-messages", "0"]);
    assert!(
        stderr(&out).contains("limits.max_messages must be > 0"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn new_variables_are_read() {
    let out = check("", &[("AGENTD_MAX_LOG_CHUNKS", "0")], &[]);
    assert!(
        stderr(&out).contains("limits.max_log_chunks must be > 0"),
        "{}",
        stderr(&out)
    );
    let out = check("", &[("AGENTD_API_KEY_SHA256", "zz")], &[]);
    assert!(
        stderr(&out).contains(r#"auth.api_key_sha256: "zz" is not 64 hex digits"#),
        "{}",
        stderr(&out)
    );
    let digests = format!("{},{}", "ab".repeat(32), "cd".repeat(32));
    let out = check("", &[("AGENTD_API_KEY_SHA256", &digests)], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn unknown_keys_are_still_named() {
    let out = check("[limits]\nmax_mesages = 1\n", &[], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("max_mesages"), "{}", stderr(&out));
}
