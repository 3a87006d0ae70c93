//! Runs the real `curl` binary, as the README's examples do.

use std::process::Command;

use serde_json::Value;

/// A finished curl call: HTTP status, headers (lowercased names) and body.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The lines of an NDJSON body, parsed.
    pub fn lines(&self) -> Vec<Value> {
        self.body
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line ({e}): {l}")))
            .collect()
    }
}

/// `curl -s -i <args>` (blocking: call from `spawn_blocking`).
pub fn curl(args: &[&str]) -> Reply {
    let output = Command::new("curl")
        .args(["-s", "-i", "--max-time", "30"])
        .args(args)
        .output()
        .expect("curl runs (scripts/setup.sh installs it)");
    assert!(output.status.success(), "curl failed: {output:?}");
    parse(&String::from_utf8_lossy(&output.stdout))
}

/// Runs `curl` off the async runtime.
pub async fn run(args: Vec<String>) -> Reply {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        curl(&args)
    })
    .await
    .expect("curl task")
}

fn parse(raw: &str) -> Reply {
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {raw:?}"));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {head:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}
