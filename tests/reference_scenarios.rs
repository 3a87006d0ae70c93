//! The reference's recorded scenarios replayed through agentd: `tests/reference/scenarios.json`
//! holds what `@mastra/core` 1.71.0 sent its scripted model and returned from `generate()` for
//! a multi-step task run, the default step cap, an unknown tool, history truncation and a
//! declined approval. The same scripts run against a real agentd and the scripted
//! OpenAI-compatible mock; every prompt (role, text, tool calls, what the model read as tool
//! results) and the result's fields must be the same.

mod support;

use agentd::model::{MockOpenAi, MockRich};
use agentd::pb;
use agentd::pb::approval_service_client::ApprovalServiceClient;
use agentd::pb::chunk::Payload;
use serde_json::{Value, json};

async fn tool_server() -> (String, tokio::task::JoinHandle<()>) {
    use axum::Json;
    use axum::routing::post;
    let app = axum::Router::new()
        .route(
            "/loop",
            post(|Json(b): Json<Value>| async move { Json(json!({"n": b["args"]["n"]})) }),
        )
        .route(
            "/lookup",
            post(|Json(b): Json<Value>| async move { Json(json!({"found": b["args"]["q"]})) }),
        )
        .route(
            "/danger",
            post(|Json(b): Json<Value>| async move { Json(json!({"deleted": b["args"]["path"]})) }),
        );
    support::serve_http(app).await
}

/// The reference's agents: instructions "You are test.", and the tools of each scenario.
fn agents(tools: &str) -> String {
    let http = |name: &str, param: &str, kind: &str| {
        format!(
            "[[agents.http_tools]]\nname = \"{name}\"\ndescription = \"{name}\"\nurl = \"{tools}/{name}\"\n[agents.http_tools.parameters]\ntype = \"object\"\nproperties = {{ {param} = {{ type = \"{kind}\" }} }}\nrequired = [\"{param}\"]\n"
        )
    };
    format!(
        "[[agents]]\nid = \"tasks\"\ninstructions = \"You are test.\"\nmodel = \"mock/m\"\ntools = [\"tasks\"]\n\n\
         [[agents]]\nid = \"loop\"\ninstructions = \"You are test.\"\nmodel = \"mock/m\"\n{}\n\
         [[agents]]\nid = \"lookup\"\ninstructions = \"You are test.\"\nmodel = \"mock/m\"\n{}\n\
         [[agents]]\nid = \"danger\"\ninstructions = \"You are test.\"\nmodel = \"mock/m\"\ntools = [\"tasks\"]\nrequire_approval = [\"danger\"]\n{}",
        http("loop", "n", "number"),
        http("lookup", "q", "string"),
        http("danger", "path", "string"),
    )
}

/// A prompt in the recordings' normalized form: role, text, tool calls (name, arguments),
/// and for a tool message the text the model reads.
fn normalize(body: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or_default();
        let text = match &m["content"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
            _ => String::new(),
        };
        let mut entry = json!({"role": role, "text": text});
        if let Some(calls) = m["tool_calls"].as_array() {
            let calls: Vec<Value> = calls
                .iter()
                .map(|c| {
                    let args = c["function"]["arguments"].as_str().unwrap_or("null");
                    json!([
                        c["function"]["name"],
                        serde_json::from_str::<Value>(args).unwrap_or(Value::Null)
                    ])
                })
                .collect();
            entry["calls"] = Value::Array(calls);
        }
        out.push(entry);
    }
    out
}

fn finish_name(reason: pb::FinishReason) -> &'static str {
    match reason {
        pb::FinishReason::Stop => "stop",
        pb::FinishReason::ToolCalls => "tool-calls",
        pb::FinishReason::Suspended => "suspended",
        pb::FinishReason::Length => "length",
        other => panic!("unexpected finish reason {other:?}"),
    }
}

/// The recorded result fields of a `generate()` result.
fn fields(r: &pb::GenerateResult) -> Value {
    json!({
        "text": r.text,
        "finishReason": finish_name(r.finish_reason()),
        "toolCalls": r.tool_calls.iter().map(|c| c.tool_name.clone()).collect::<Vec<_>>(),
        "toolResults": r.tool_results.iter().map(|c| c.tool_name.clone()).collect::<Vec<_>>(),
        "steps": r.steps.len(),
    })
}

#[tokio::test]
async fn recorded_reference_scenarios_give_the_same_prompts_and_results() {
    let recorded: Value =
        serde_json::from_str(include_str!("reference/scenarios.json")).expect("scenarios parse");
    let (tools, _task) = tool_server().await;
    for scenario in recorded["scenarios"].as_array().expect("scenarios") {
        let name = scenario["name"].as_str().unwrap_or_default();
        let mock = MockOpenAi::start().await.expect("mock");
        for reply in scenario["replies"].as_array().expect("replies") {
            let mut rich = MockRich::text(reply["text"].as_str().unwrap_or_default());
            for call in reply["calls"].as_array().into_iter().flatten() {
                rich = rich.tool_call(call[0].as_str().unwrap_or_default(), call[1].clone());
            }
            mock.push(rich.into());
        }
        let dir = tempfile::tempdir().expect("dir");
        let server = support::start(support::agent_config(
            &mock,
            &agents(&tools),
            "embedded",
            dir.path(),
        ))
        .await;
        let mut client = support::agents_client(&server).await;
        let (thread, resource) = (support::unique("t"), support::unique("r"));
        let mut last = None;
        for turn in scenario["turns"].as_array().expect("turns") {
            let memory = turn["memory"].as_bool().unwrap_or(false).then(|| {
                let n = turn["last_messages"]
                    .as_i64()
                    .and_then(|n| i32::try_from(n).ok());
                support::memory(&thread, &resource, n)
            });
            let chunks = support::generate(
                &mut client,
                pb::GenerateRequest {
                    agent_id: scenario["agent"].as_str().unwrap_or_default().into(),
                    prompt: turn["prompt"].as_str().unwrap_or_default().into(),
                    memory,
                    ..Default::default()
                },
            )
            .await;
            last = Some(chunks);
        }
        let chunks = last.expect("a turn ran");
        let mut result = support::finish(&chunks);
        if scenario["decline"].as_bool().unwrap_or(false) {
            assert_eq!(
                fields(&result),
                scenario["suspended"],
                "{name}: suspended result"
            );
            let call = chunks
                .iter()
                .find_map(|c| match &c.payload {
                    Some(Payload::ToolCallApproval(s)) => Some(s.tool_call_id.clone()),
                    _ => None,
                })
                .expect("an approval request");
            let mut approvals = ApprovalServiceClient::new(support::channel(&server).await);
            let stream = approvals
                .decline(pb::DeclineRequest {
                    run_id: result.run_id.clone(),
                    tool_call_id: call,
                    ..Default::default()
                })
                .await
                .expect("decline")
                .into_inner();
            result = support::finish(&support::collect(stream).await);
        }
        let requests = mock.requests();
        let expected = scenario["calls"].as_array().expect("calls");
        let sent: Vec<Value> = if scenario["last_call_only"].as_bool().unwrap_or(false) {
            requests
                .last()
                .map(normalize)
                .into_iter()
                .map(Value::Array)
                .collect()
        } else {
            requests
                .iter()
                .map(|b| Value::Array(normalize(b)))
                .collect()
        };
        assert_eq!(sent.len(), expected.len(), "{name}: model calls");
        for (i, (ours, theirs)) in sent.iter().zip(expected).enumerate() {
            assert_eq!(ours, theirs, "{name}: prompt of model call {i}");
        }
        let offered: Vec<&str> = requests
            .last()
            .and_then(|b| b["tools"].as_array())
            .map(|t| {
                t.iter()
                    .filter_map(|t| t["function"]["name"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(json!(offered), scenario["tools"], "{name}: tools offered");
        assert_eq!(fields(&result), scenario["result"], "{name}: result");
        server.stop().await.expect("stop");
    }
}
