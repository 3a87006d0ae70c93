//! The MCP server and agent checks, each failure naming its field.

use super::mcp_tool_name;
use crate::config::{Config, McpTransportKind};

const BASE: &str = r#"
    [[providers]]
    name = "mock"
    base_url = "http://127.0.0.1:1/v1"
"#;

fn check(text: &str) -> Result<Config, String> {
    let config = Config::from_toml(&format!("{BASE}{text}")).map_err(|e| e.to_string())?;
    config.validate().map_err(|e| e.to_string())?;
    Ok(config)
}

const SERVERS: &str = r#"
    [[mcp_servers]]
    name = "everything"
    command = "node"
    args = ["server.js", "stdio"]
    env = { TOKEN = "env:SOME_TOKEN" }
    [[mcp_servers]]
    name = "py"
    url = "http://127.0.0.1:9/mcp"
    headers = { Authorization = "env:PY_AUTH" }
    timeout_secs = 5
"#;

#[test]
fn both_transports_and_both_agent_forms_parse() {
    let config = check(&format!(
        r#"{SERVERS}
        [[agents]]
        id = "a"
        model = "mock/m"
        mcp_servers = ["everything", {{ server = "py", tools = ["whoami"] }}]
        require_approval = ["everything_get-sum", "py_whoami"]
        "#
    ))
    .unwrap();
    assert_eq!(config.mcp_servers[0].transport(), McpTransportKind::Stdio);
    assert_eq!(config.mcp_servers[1].transport(), McpTransportKind::Http);
    assert_eq!(config.mcp_servers[1].timeout_secs, 5);
    assert_eq!(config.mcp_servers[0].timeout_secs, 60);
    let uses = &config.agents[0].mcp_servers;
    assert_eq!(uses[0].server(), "everything");
    assert!(uses[0].tools().is_none());
    assert_eq!(uses[1].tools().unwrap(), ["whoami".to_owned()]);
}

#[test]
fn server_errors_name_the_field() {
    let cases = [
        (
            "[[mcp_servers]]\nname = \"a b\"\ncommand = \"x\"\n",
            "mcp_servers[0].name \"a b\" must be",
        ),
        (
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\n[[mcp_servers]]\nname = \"a\"\ncommand = \"y\"\n",
            "mcp_servers[1].name \"a\" is used by another",
        ),
        (
            "[[mcp_servers]]\nname = \"a\"\n",
            "mcp server \"a\": set exactly one of command",
        ),
        (
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\nurl = \"http://h/mcp\"\n",
            "set exactly one of command",
        ),
        (
            "[[mcp_servers]]\nname = \"a\"\nurl = \"ftp://h/mcp\"\n",
            "mcp server \"a\".url \"ftp://h/mcp\" must be",
        ),
        (
            "[[mcp_servers]]\nname = \"a\"\nurl = \"http://bad host/\"\n",
            "mcp server \"a\".url",
        ),
        (
            "[[mcp_servers]]\nname = \"a\"\nurl = \"http://h/\"\nargs = [\"x\"]\n",
            "args, env and cwd are for command servers",
        ),
        (
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\nheaders = { A = \"b\" }\n",
            "mcp server \"a\".headers are for url servers",
        ),
        (
            "[[mcp_servers]]\nname = \"a\"\nurl = \"http://h/\"\nheaders = { \"bad header\" = \"b\" }\n",
            "\"bad header\" is not a valid header name",
        ),
        (
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\ntimeout_secs = 0\n",
            "mcp server \"a\".timeout_secs must be > 0",
        ),
        (
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\nmax_backoff_secs = 0\n",
            "max_backoff_secs must be > 0",
        ),
    ];
    for (text, expected) in cases {
        let err = check(text).unwrap_err();
        assert!(err.contains(expected), "{text}\n=> {err}");
    }
}

#[test]
fn agent_errors_name_the_field() {
    let agent =
        |extra: &str| format!("{SERVERS}\n[[agents]]\nid = \"a\"\nmodel = \"mock/m\"\n{extra}\n");
    let cases = [
        (
            "mcp_servers = [\"nope\"]",
            "agent \"a\": mcp_servers[0]: unknown MCP server \"nope\" (configured: everything, py)",
        ),
        (
            "mcp_servers = [\"py\", { server = \"py\", tools = [\"x\"] }]",
            "agent \"a\": mcp_servers[1]: MCP server \"py\" is listed twice",
        ),
        (
            "mcp_servers = [{ server = \"py\", tools = [] }]",
            "mcp_servers[0].tools must name at least one tool",
        ),
        (
            "mcp_servers = [\"py\"]\nrequire_approval = [\"everything_echo\"]",
            "require_approval names unknown tool \"everything_echo\"",
        ),
        (
            "mcp_servers = [{ server = \"py\", tools = [\"a\"] }]\nrequire_approval = [\"py_b\"]",
            "require_approval names unknown tool \"py_b\"",
        ),
        (
            "mcp_servers = [\"py\"]\nrequire_approval = [\"py_\"]",
            "require_approval names unknown tool \"py_\"",
        ),
    ];
    for (extra, expected) in cases {
        let err = check(&agent(extra)).unwrap_err();
        assert!(err.contains(expected), "{extra}\n=> {err}");
    }
    let err =
        check("[[agents]]\nid = \"a\"\nmodel = \"mock/m\"\nmcp_servers = [\"x\"]\n").unwrap_err();
    assert!(err.contains("(configured: none)"), "{err}");
}

#[test]
fn tool_names_are_prefixed_and_valid_function_names() {
    assert_eq!(mcp_tool_name("everything", "get-sum"), "everything_get-sum");
    assert_eq!(mcp_tool_name("fs", "read.file/v2"), "fs_read_file_v2");
    let long = mcp_tool_name("s", &"x".repeat(100));
    assert_eq!(long.len(), 64);
    assert!(long.starts_with("s_x"));
}
