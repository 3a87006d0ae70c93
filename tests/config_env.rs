//! The binary itself. Its config layering, end to end through `--check-config`: file, then
//! `AGENTD_*`, then flags, each later source winning; the variables added for
//! `limits.max_messages`, `limits.max_log_chunks` and `auth.api_key_sha256` are read; missing
//! provider keys are named. And the running process: SIGHUP ignored, runs logged, SIGTERM.

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

#[test]
fn check_config_names_every_missing_provider_key_unless_optional() {
    let file = r#"
[[providers]]
name = "openai"
base_url = "https://api.openai.com/v1"
api_key_env = "AGENTD_TEST_UNSET_OPENAI_KEY"
[[providers]]
name = "local"
base_url = "http://127.0.0.1:1/v1"
api_key_env = "AGENTD_TEST_UNSET_LOCAL_KEY"
optional = true
"#;
    let out = check(file, &[], &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("provider \"openai\"") && err.contains("AGENTD_TEST_UNSET_OPENAI_KEY"),
        "{err}"
    );
    assert!(!err.contains("AGENTD_TEST_UNSET_LOCAL_KEY"), "{err}");
    let out = check(file, &[("AGENTD_TEST_UNSET_OPENAI_KEY", "sk-test")], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// The running binary: SIGHUP is logged and ignored, the agents it loaded and each run are
/// logged at info, SIGTERM still stops it cleanly.
#[tokio::test]
async fn sighup_is_ignored_and_runs_are_logged() {
    use std::io::Read;
    use std::process::Stdio;

    let mock = agentd::model::MockOpenAi::start().await.expect("mock");
    mock.push(agentd::model::MockReply::Text("Hello.".into()));
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("agentd.toml");
    let config = format!(
        "[[providers]]\nname = \"mock\"\nbase_url = \"{}\"\n[[agents]]\nid = \"plain\"\nmodel = \"mock/m\"\n",
        mock.base_url()
    );
    std::fs::write(&path, config).expect("write config");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentd"));
    for (_, name) in agentd::config::OVERRIDES {
        command.env_remove(name);
    }
    let mut child = command
        .arg("--config")
        .arg(&path)
        .env("AGENTD_LISTEN", format!("127.0.0.1:{port}"))
        .env("AGENTD_DATA_DIR", dir.path().join("data"))
        .env("AGENTD_LOG_FORMAT", "text")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("agentd starts");
    let url = format!("http://127.0.0.1:{port}");
    let mut client = None;
    for _ in 0..100 {
        if let Ok(c) =
            agentd::pb::agent_service_client::AgentServiceClient::connect(url.clone()).await
        {
            client = Some(c);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let mut client = client.expect("agentd answers");
    let pid = child.id().to_string();
    let hup = Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .expect("kill");
    assert!(hup.success());
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        child.try_wait().expect("status").is_none(),
        "SIGHUP must not stop agentd"
    );
    let mut stream = client
        .generate(agentd::pb::GenerateRequest {
            agent_id: "plain".into(),
            prompt: "hi".into(),
            ..Default::default()
        })
        .await
        .expect("generate")
        .into_inner();
    while let Some(chunk) = futures::StreamExt::next(&mut stream).await {
        chunk.expect("chunk");
    }
    // Closed first: a graceful stop waits for open connections.
    drop(stream);
    drop(client);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let term = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(term.success());
    let status = child.wait().expect("exit");
    assert!(status.success(), "SIGTERM stops agentd cleanly: {status}");
    let mut logs = String::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_string(&mut logs).expect("stdout");
    }
    if let Some(mut err) = child.stderr.take() {
        err.read_to_string(&mut logs).expect("stderr");
    }
    assert!(
        !logs.contains('\u{1b}'),
        "no colour codes when not on a terminal: {logs}"
    );
    assert!(
        logs.contains("agents loaded") && logs.contains("agents=1"),
        "{logs}"
    );
    assert!(logs.contains("SIGHUP received and ignored"), "{logs}");
    let run = logs
        .lines()
        .find(|l| l.contains("run ended"))
        .unwrap_or_else(|| panic!("{logs}"));
    assert!(
        run.contains("agent=plain")
            && run.contains("finish_reason=stop")
            && run.contains("steps=1"),
        "{run}"
    );
}
