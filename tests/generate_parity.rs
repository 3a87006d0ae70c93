//! `generate()` parity through AgentService.Generate on a real server, against the scripted
//! OpenAI-compatible mock that records every request: the result's aggregation, agent
//! defaults, what the model reads after a decision, the approval resume schema, the step in
//! `step_finish`, provider options, structured output placements and the structuring model,
//! provider metadata, the `messages` result, tool-call concurrency, memory options and the
//! request options that reach the model.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentd::json::{from_proto_struct, from_proto_value, to_proto_struct};
use agentd::model::{MockOpenAi, MockReply, MockRich, MockUsageDetails};
use agentd::pb;
use agentd::pb::approval_service_client::ApprovalServiceClient;
use agentd::pb::chunk::Payload;
use agentd::server::RunningServer;
use serde_json::{Value, json};

/// HTTP tools: `slow` takes 150 ms and counts how many calls overlap; `boom` fails.
struct Tools {
    url: String,
    in_flight: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    _task: tokio::task::JoinHandle<()>,
}

impl Tools {
    async fn start() -> Self {
        use axum::Json;
        use axum::http::StatusCode;
        use axum::routing::post;
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (now, max) = (in_flight.clone(), peak.clone());
        let app = axum::Router::new()
            .route(
                "/slow",
                post(move |Json(body): Json<Value>| {
                    let (now, max) = (now.clone(), max.clone());
                    async move {
                        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                        max.fetch_max(n, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(150)).await;
                        now.fetch_sub(1, Ordering::SeqCst);
                        Json(json!({"ok": true, "got": body["args"]}))
                    }
                }),
            )
            .route(
                "/boom",
                post(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "kaboom") }),
            );
        let (url, task) = support::serve_http(app).await;
        Self {
            url,
            in_flight,
            peak,
            _task: task,
        }
    }

    /// The most calls that overlapped since the last reset.
    fn take_peak(&self) -> usize {
        assert_eq!(self.in_flight.load(Ordering::SeqCst), 0);
        self.peak.swap(0, Ordering::SeqCst)
    }
}

fn agents(tools: &str) -> String {
    format!(
        r#"
[[agents]]
id = "tooling"
instructions = "You use tools."
model = "mock/test-model"
[[agents.http_tools]]
name = "slow"
url = "{tools}/slow"
[[agents.http_tools]]
name = "boom"
url = "{tools}/boom"

[[agents]]
id = "defaults"
instructions = "Defaults apply."
model = "mock/test-model"
[agents.default_options]
max_steps = 2
tool_call_concurrency = 2
temperature = 0.3
max_output_tokens = 99
[[agents.http_tools]]
name = "slow"
url = "{tools}/slow"

[[agents]]
id = "approving"
instructions = "Everything needs approval."
model = "mock/test-model"
[agents.default_options]
require_tool_approval = true
[[agents.http_tools]]
name = "slow"
url = "{tools}/slow"

[[agents]]
id = "guarded"
instructions = "Some tools need approval."
model = "mock/test-model"
require_approval = ["act"]
[[agents.http_tools]]
name = "slow"
url = "{tools}/slow"
[[agents.http_tools]]
name = "act"
url = "{tools}/slow"

[[agents]]
id = "planner"
instructions = "You plan."
model = "mock/test-model"
tools = ["tasks"]
require_approval = ["task_write"]
"#
    )
}

struct World {
    mock: MockOpenAi,
    tools: Tools,
    server: RunningServer,
    _dir: tempfile::TempDir,
}

impl World {
    async fn start() -> Self {
        let mock = MockOpenAi::start().await.expect("mock");
        let tools = Tools::start().await;
        let dir = tempfile::tempdir().expect("dir");
        let config = support::agent_config(&mock, &agents(&tools.url), "embedded", dir.path());
        let server = support::start(config).await;
        Self {
            mock,
            tools,
            server,
            _dir: dir,
        }
    }

    async fn run(&self, request: pb::GenerateRequest) -> Vec<pb::Chunk> {
        let mut client = support::agents_client(&self.server).await;
        support::generate(&mut client, request).await
    }

    async fn result(&self, request: pb::GenerateRequest) -> pb::GenerateResult {
        support::finish(&self.run(request).await)
    }

    /// The body of the model's n-th request.
    fn sent(&self, n: usize) -> Value {
        self.mock.requests()[n].clone()
    }

    async fn stop(self) {
        self.server.stop().await.expect("stop");
    }
}

fn ask(agent: &str, prompt: &str) -> pb::GenerateRequest {
    pb::GenerateRequest {
        agent_id: agent.into(),
        prompt: prompt.into(),
        ..Default::default()
    }
}

fn calls(n: usize, name: &str) -> MockReply {
    MockReply::ToolCalls((0..n).map(|i| (name.to_owned(), json!({"i": i}))).collect())
}

fn names(calls: &[pb::ToolCall]) -> Vec<&str> {
    calls.iter().map(|c| c.tool_name.as_str()).collect()
}

fn result_names(results: &[pb::ToolResult]) -> Vec<&str> {
    results.iter().map(|r| r.tool_name.as_str()).collect()
}

/// One SSE step with reasoning, text and one tool call, as an OpenAI-compatible server streams it.
fn reasoning_text_and_call(reasoning: &str, text: &str, tool: &str) -> MockReply {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "r1", "object": "chat.completion.chunk", "model": "test-model",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        .to_string()
    };
    MockReply::Raw(vec![
        chunk(
            json!({"role": "assistant", "reasoning_content": reasoning}),
            Value::Null,
        ),
        chunk(json!({"content": text}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                   "function": {"name": tool, "arguments": "{\"x\":1}"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
        "[DONE]".to_owned(),
    ])
}

fn messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().cloned().unwrap_or_default()
}

fn first_system(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn the_result_aggregates_every_step_and_step_finish_carries_the_step() {
    let w = World::start().await;
    w.mock.push(reasoning_text_and_call("think1", "A", "slow"));
    w.mock.push(
        MockRich::text("B")
            .tool_call("nope", json!({}))
            .tool_call("boom", json!({}))
            .into(),
    );
    w.mock.push(MockReply::Text("C".into()));
    let chunks = w.run(ask("tooling", "go")).await;
    let r = support::finish(&chunks);
    assert_eq!(r.finish_reason(), pb::FinishReason::Stop);
    assert_eq!(r.text, "ABC", "every step's text, joined without separator");
    assert_eq!(r.reasoning_text, "think1");
    assert_eq!(names(&r.tool_calls), ["slow", "nope", "boom"]);
    assert_eq!(
        result_names(&r.tool_results),
        ["slow"],
        "unknown and failed calls are not results"
    );
    let texts: Vec<&str> = r.steps.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(texts, ["A", "B", "C"]);
    // The model read the errors as the calls' results.
    let tool_texts: Vec<String> = messages(&w.sent(2))
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(tool_texts[1].starts_with("Tool \"nope\" not found. Available tools: slow, boom."));
    assert!(tool_texts[2].contains("HTTP 500"), "{tool_texts:?}");

    let steps: Vec<pb::StepResult> = chunks
        .iter()
        .filter_map(|c| match &c.payload {
            Some(Payload::StepFinish(f)) => f.step.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(steps.len(), 3, "every step_finish carries its step");
    assert_eq!(steps[0].text, "A");
    assert_eq!(steps[0].reasoning_text, "think1");
    assert_eq!(names(&steps[0].tool_calls), ["slow"]);
    assert_eq!(result_names(&steps[0].tool_results), ["slow"]);
    assert_eq!(names(&steps[1].tool_calls), ["nope", "boom"]);
    assert_eq!(
        steps[1].tool_results.len(),
        2,
        "the step keeps what the model read"
    );
    w.stop().await;
}

#[tokio::test]
async fn agent_defaults_apply_unless_the_request_sets_them() {
    let w = World::start().await;
    // max_steps = 2 from the agent; the request's 3 wins.
    for _ in 0..2 {
        w.mock.push(calls(1, "slow"));
    }
    let r = w.result(ask("defaults", "loop")).await;
    assert_eq!(r.steps.len(), 2);
    assert_eq!(r.finish_reason(), pb::FinishReason::ToolCalls);
    for _ in 0..3 {
        w.mock.push(calls(1, "slow"));
    }
    let r = w
        .result(pb::GenerateRequest {
            max_steps: Some(3),
            ..ask("defaults", "loop")
        })
        .await;
    assert_eq!(r.steps.len(), 3);

    // temperature and max_output_tokens from the agent; the request's temperature wins.
    let before = w.mock.requests().len();
    w.mock.push(MockReply::Text("ok".into()));
    w.result(ask("defaults", "hi")).await;
    let body = w.sent(before);
    assert_eq!(
        (body["temperature"].clone(), body["max_tokens"].clone()),
        (json!(0.3), json!(99))
    );
    w.mock.push(MockReply::Text("ok".into()));
    w.result(pb::GenerateRequest {
        model_settings: Some(pb::ModelSettings {
            temperature: Some(0.9),
            ..Default::default()
        }),
        ..ask("defaults", "hi")
    })
    .await;
    let body = w.sent(before + 1);
    assert_eq!(
        (body["temperature"].clone(), body["max_tokens"].clone()),
        (json!(0.9), json!(99))
    );

    // tool_call_concurrency = 2 from the agent; the request's 4 wins.
    w.tools.take_peak();
    w.mock.push(calls(4, "slow"));
    w.mock.push(MockReply::Text("done".into()));
    w.result(ask("defaults", "four")).await;
    assert_eq!(w.tools.take_peak(), 2);
    w.mock.push(calls(4, "slow"));
    w.mock.push(MockReply::Text("done".into()));
    w.result(pb::GenerateRequest {
        tool_call_concurrency: Some(4),
        ..ask("defaults", "four")
    })
    .await;
    assert_eq!(w.tools.take_peak(), 4);

    // require_tool_approval from the agent.
    w.mock.push(calls(1, "slow"));
    let chunks = w.run(ask("approving", "do it")).await;
    assert_eq!(
        support::finish(&chunks).finish_reason(),
        pb::FinishReason::Suspended
    );
    assert!(support::kinds(&chunks).contains(&"tool-call-approval"));
    w.stop().await;
}

#[tokio::test]
async fn tool_calls_run_one_at_a_time_whenever_a_call_may_wait_for_a_decision() {
    let w = World::start().await;
    w.tools.take_peak();
    // No tool of `tooling` can wait: the default runs all four at once.
    w.mock.push(calls(4, "slow"));
    w.mock.push(MockReply::Text("done".into()));
    w.result(ask("tooling", "four")).await;
    assert_eq!(w.tools.take_peak(), 4, "default concurrency 10");
    // `guarded` has a tool that needs approval, not called here: one at a time.
    w.mock.push(calls(3, "slow"));
    w.mock.push(MockReply::Text("done".into()));
    w.result(ask("guarded", "three")).await;
    assert_eq!(w.tools.take_peak(), 1);
    // A client tool may suspend too.
    w.mock.push(calls(3, "slow"));
    w.mock.push(MockReply::Text("done".into()));
    w.result(pb::GenerateRequest {
        client_tools: vec![pb::ClientTool {
            name: "ask_user".into(),
            ..Default::default()
        }],
        ..ask("tooling", "three")
    })
    .await;
    assert_eq!(w.tools.take_peak(), 1);
    // Request-level approval: every call waits, then they run one at a time.
    w.mock.push(calls(2, "slow"));
    let chunks = w
        .run(pb::GenerateRequest {
            require_tool_approval: true,
            on_disconnect: pb::OnDisconnect::Continue.into(),
            ..ask("tooling", "two")
        })
        .await;
    let r = support::finish(&chunks);
    assert_eq!(r.finish_reason(), pb::FinishReason::Suspended);
    assert_eq!(names(&r.tool_calls), ["slow", "slow"], "the waiting calls");
    assert!(r.text.is_empty() && r.steps.is_empty());
    let mut approvals = ApprovalServiceClient::new(support::channel(&w.server).await);
    w.mock.push(MockReply::Text("done".into()));
    let mut last = Vec::new();
    for call in &r.tool_calls {
        let stream = approvals
            .approve(pb::ApproveRequest {
                run_id: r.run_id.clone(),
                tool_call_id: call.tool_call_id.clone(),
                ..Default::default()
            })
            .await
            .expect("approve")
            .into_inner();
        last = support::collect(stream).await;
    }
    assert_eq!(
        support::finish(&last).finish_reason(),
        pb::FinishReason::Stop
    );
    assert_eq!(w.tools.take_peak(), 1);
    w.stop().await;
}

#[tokio::test]
async fn after_a_decline_the_model_reads_what_the_reference_sends() {
    let w = World::start().await;
    let (thread, resource) = (support::unique("t"), support::unique("r"));
    w.mock.push(
        MockRich::text("I will write.")
            .tool_call(
                "task_write",
                json!({"tasks": [{"content": "A", "status": "pending", "activeForm": "Doing A"}]}),
            )
            .into(),
    );
    let chunks = w
        .run(pb::GenerateRequest {
            memory: Some(support::memory(&thread, &resource, None)),
            ..ask("planner", "plan it")
        })
        .await;
    let suspended = support::finish(&chunks);
    assert_eq!(suspended.finish_reason(), pb::FinishReason::Suspended);
    assert!(
        suspended.text.is_empty(),
        "as the reference: no text while suspended"
    );
    let approval = chunks
        .iter()
        .find_map(|c| match &c.payload {
            Some(Payload::ToolCallApproval(s)) => Some(s.clone()),
            _ => None,
        })
        .expect("an approval request");
    let schema = approval
        .resume_schema
        .as_ref()
        .map(from_proto_struct)
        .map(Value::Object);
    assert_eq!(
        schema,
        Some(json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "approved": {"description": "Controls if the tool call is approved or not, should be true when approved and false when declined", "type": "boolean"},
                "reason": {"description": "Optional explanation for the decision, surfaced to the model when the tool call is declined", "type": "string"}
            },
            "required": ["approved"],
            "additionalProperties": false
        }))
    );
    let guidance_first = messages(&w.sent(0))
        .iter()
        .filter(|m| m["role"] == "system")
        .count();
    assert_eq!(guidance_first, 2, "instructions and the task-list guidance");

    w.mock
        .push(MockReply::Text("OK, I did not write it.".into()));
    let mut approvals = ApprovalServiceClient::new(support::channel(&w.server).await);
    let stream = approvals
        .decline(pb::DeclineRequest {
            run_id: suspended.run_id.clone(),
            tool_call_id: approval.tool_call_id.clone(),
            ..Default::default()
        })
        .await
        .expect("decline")
        .into_inner();
    let done = support::finish(&support::collect(stream).await);
    let continuation = messages(&w.sent(1));
    let roles: Vec<&str> = continuation
        .iter()
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool"],
        "no task-list guidance on the continuation, as the reference"
    );
    assert_eq!(continuation[0]["content"], "You plan.");
    assert_eq!(continuation[2]["content"], "I will write.");
    assert_eq!(
        continuation[3]["content"],
        "Tool call was not approved by the user"
    );
    assert_eq!(done.text, "I will write.OK, I did not write it.");
    assert_eq!(names(&done.tool_calls), ["task_write"]);
    assert!(done.tool_results.is_empty(), "a declined call is no result");
    w.stop().await;
}

#[tokio::test]
async fn provider_options_reach_the_provider_by_its_key_and_extra_body_raw() {
    let w = World::start().await;
    w.mock.push(MockReply::Text("ok".into()));
    let options = json!({"openai": {"reasoningEffort": "low", "parallelToolCalls": false}, "anthropic": {"x": 1}});
    let extra = json!({"x_gateway": {"route": "eu"}});
    w.result(pb::GenerateRequest {
        provider_options: options.as_object().map(to_proto_struct),
        extra_body: extra.as_object().map(to_proto_struct),
        ..ask("tooling", "hi")
    })
    .await;
    let body = w.sent(0);
    assert_eq!(body["reasoning_effort"], "low");
    assert_eq!(body["parallel_tool_calls"], false);
    assert!(
        body.get("x").is_none() && body.get("anthropic").is_none() && body.get("openai").is_none()
    );
    assert_eq!(body["x_gateway"], json!({"route": "eu"}));
    w.stop().await;
}

fn schema() -> prost_types::Struct {
    let schema =
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
    schema.as_object().map(to_proto_struct).expect("object")
}

#[tokio::test]
async fn structured_output_goes_where_the_request_says_with_the_reference_texts() {
    let w = World::start().await;
    let output = |f: &dyn Fn(&mut pb::StructuredOutput)| {
        let mut o = pb::StructuredOutput {
            schema: Some(schema()),
            ..Default::default()
        };
        f(&mut o);
        pb::GenerateRequest {
            structured_output: Some(o),
            ..ask("tooling", "who?")
        }
    };
    // Native, with instructions: they reach the first system message too.
    w.mock.push(MockReply::Text("{\"name\": \"Ada\"}".into()));
    let r = w
        .result(output(&|o| {
            o.instructions = Some("Use the full name.".into())
        }))
        .await;
    assert_eq!(
        r.object.as_ref().map(from_proto_value),
        Some(json!({"name": "Ada"}))
    );
    let body = w.sent(0);
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["strict"], true);
    assert_eq!(first_system(&body), "You use tools.\n\nUse the full name.");

    // Inline: the schema text joins the latest user message.
    w.mock.push(MockReply::Text("{\"name\": \"Ada\"}".into()));
    w.result(output(&|o| {
        o.set_injection(pb::JsonPromptInjection::Inline)
    }))
    .await;
    let body = w.sent(1);
    assert!(body.get("response_format").is_none());
    let last_user = messages(&body).last().cloned().expect("a message");
    let parts = last_user["content"].as_array().cloned().unwrap_or_default();
    assert_eq!(parts[0]["text"], "who?");
    let inline = parts[1]["text"].as_str().unwrap_or_default();
    assert!(
        inline.starts_with("Return your response as JSON matching this schema:\n\n{"),
        "{inline}"
    );
    assert!(
        inline
            .ends_with("\n\nReturn only valid JSON. Do not include markdown or explanatory text.")
    );

    // Auto, with a provider that has native support: native.
    w.mock.push(MockReply::Text("{\"name\": \"Ada\"}".into()));
    w.result(output(&|o| o.set_injection(pb::JsonPromptInjection::Auto)))
        .await;
    assert_eq!(w.sent(2)["response_format"]["type"], "json_schema");

    // Both spellings at once are refused, naming the field.
    let mut client = support::agents_client(&w.server).await;
    let status = client
        .generate(output(&|o| {
            o.set_injection(pb::JsonPromptInjection::Inline);
            o.json_prompt_injection = Some(true);
        }))
        .await
        .expect_err("refused");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        status.message().contains("structured_output.injection"),
        "{}",
        status.message()
    );

    // A separate structuring model: the loop answers freely, then `mock/structurer` structures.
    w.mock.push(MockReply::Text("Her name is Ada.".into()));
    w.mock.push(MockReply::Text("{\"name\": \"Ada\"}".into()));
    let chunks = w
        .run(output(&|o| o.model = Some("mock/structurer".into())))
        .await;
    let r = support::finish(&chunks);
    assert_eq!(r.text, "Her name is Ada.");
    assert_eq!(
        r.object.as_ref().map(from_proto_value),
        Some(json!({"name": "Ada"}))
    );
    let main = w.sent(3);
    assert!(main.get("response_format").is_none());
    assert!(first_system(&main).starts_with(
        "You use tools.\n\nYour response will be processed by another agent to extract structured data."
    ));
    let structurer = w.sent(4);
    assert_eq!(structurer["model"], "structurer");
    assert_eq!(structurer["response_format"]["type"], "json_schema");
    assert!(first_system(&structurer).starts_with("You are a data structuring specialist."));
    assert_eq!(
        structurer["messages"][1]["content"],
        "Extract and structure the key information from the following text according to the specified schema. Keep the original meaning and details. Rely on the provided text and conversation history.\n\n# Assistant Response\nHer name is Ada."
    );
    let marked = chunks.iter().any(|c| {
        matches!(c.payload, Some(Payload::Object(_)))
            && c.metadata.as_ref().map(from_proto_struct)
                == json!({"from": "structured-output"}).as_object().cloned()
    });
    assert!(marked, "the structurer's partial objects are marked");
    // An unknown structuring provider is refused before anything runs.
    let status = client
        .generate(output(&|o| o.model = Some("nowhere/x".into())))
        .await
        .expect_err("refused");
    assert!(
        status.message().contains("structured_output.model"),
        "{}",
        status.message()
    );
    w.stop().await;
}

#[tokio::test]
async fn provider_metadata_headers_sources_files_and_warnings_reach_the_result() {
    let w = World::start().await;
    w.mock.push(
        MockRich::text("See the docs.")
            .header("anthropic-ratelimit-requests-remaining", "99")
            .header("set-cookie", "sess=abc; Path=/")
            .header("x-request-id", "req_42")
            .source("https://example.com/docs", "Docs")
            .image("image/png", b"\x89PNG")
            .usage_details(MockUsageDetails {
                cached_tokens: Some(8),
                reasoning_tokens: Some(2),
                ..Default::default()
            })
            .warning(json!("model deprecated"))
            .into(),
    );
    let chunks = w.run(ask("tooling", "docs?")).await;
    let r = support::finish(&chunks);
    let headers = r
        .response
        .as_ref()
        .map(|m| m.headers.clone())
        .unwrap_or_default();
    assert_eq!(
        headers
            .get("anthropic-ratelimit-requests-remaining")
            .map(String::as_str),
        Some("99")
    );
    assert_eq!(
        headers.get("x-request-id").map(String::as_str),
        Some("req_42")
    );
    assert!(!headers.contains_key("set-cookie"), "cookies are not kept");
    assert!(!headers.contains_key("connection") && !headers.contains_key("transfer-encoding"));
    assert_eq!(r.sources.len(), 1);
    assert_eq!(
        (r.sources[0].url.as_str(), r.sources[0].title.as_str()),
        ("https://example.com/docs", "Docs")
    );
    assert_eq!(r.files.len(), 1);
    assert_eq!(
        (r.files[0].data.as_slice(), r.files[0].mime_type.as_str()),
        (&b"\x89PNG"[..], "image/png")
    );
    assert!(
        r.warnings.iter().any(|w| w == "model deprecated"),
        "{:?}",
        r.warnings
    );
    let metadata = r
        .provider_metadata
        .as_ref()
        .map(from_proto_struct)
        .map(Value::Object);
    assert_eq!(
        metadata
            .as_ref()
            .map(|m| m["openai"]["cachedPromptTokens"].clone()),
        Some(json!(8))
    );
    let kinds = support::kinds(&chunks);
    assert!(
        kinds.contains(&"source") && kinds.contains(&"file"),
        "{kinds:?}"
    );
    w.stop().await;
}

#[tokio::test]
async fn messages_hold_history_input_and_response_with_signals_marked() {
    let w = World::start().await;
    let (thread, resource) = (support::unique("t"), support::unique("r"));
    let turn = |prompt: &str| pb::GenerateRequest {
        memory: Some(support::memory(&thread, &resource, None)),
        ..ask("tooling", prompt)
    };
    w.mock.push(MockReply::Text("Hi there.".into()));
    let first = w.result(turn("hello")).await;
    w.mock.push(calls(1, "slow"));
    w.mock.push(MockReply::Text("Done.".into()));
    let second = w.result(turn("work")).await;
    let roles = |m: &[pb::Message]| m.iter().map(|m| m.role()).collect::<Vec<_>>();
    use pb::Role::{Assistant, Tool, User};
    assert_eq!(roles(&first.messages), [User, Assistant]);
    assert_eq!(roles(&second.remembered_messages), [User, Assistant]);
    assert_eq!(
        roles(&second.messages),
        [User, Assistant, User, Assistant, Tool, Assistant]
    );
    assert_eq!(
        second.messages[0].id, first.messages[0].id,
        "history first, as stored"
    );

    // The task-list signal is a message too, marked as such.
    let w2 = World::start().await;
    let mut approvals = ApprovalServiceClient::new(support::channel(&w2.server).await);
    w2.mock.push(
        MockRich::default()
            .tool_call(
                "task_write",
                json!({"tasks": [{"content": "A", "status": "pending", "activeForm": "Doing A"}]}),
            )
            .into(),
    );
    let suspended = w2
        .result(pb::GenerateRequest {
            memory: Some(support::memory(&thread, &resource, None)),
            ..ask("planner", "plan")
        })
        .await;
    w2.mock.push(MockReply::Text("Planned.".into()));
    let stream = approvals
        .approve(pb::ApproveRequest {
            run_id: suspended.run_id.clone(),
            tool_call_id: suspended.tool_calls[0].tool_call_id.clone(),
            ..Default::default()
        })
        .await
        .expect("approve")
        .into_inner();
    let done = support::finish(&support::collect(stream).await);
    let signals: Vec<pb::SignalKind> = done
        .messages
        .iter()
        .map(|m| m.signal())
        .filter(|s| *s != pb::SignalKind::Unspecified)
        .collect();
    assert_eq!(signals, [pb::SignalKind::Snapshot]);
    w2.stop().await;
    w.stop().await;
}

#[tokio::test]
async fn memory_options_incomplete_calls_and_caller_titles() {
    let w = World::start().await;
    let (thread, resource) = (support::unique("t"), support::unique("r"));
    let memory = |filter: Option<bool>| {
        let mut m = support::memory(&thread, &resource, None);
        if let Some(o) = m.options.as_mut() {
            o.filter_incomplete_tool_calls = filter;
        }
        m
    };
    let client_tool = || pb::ClientTool {
        name: "ask_user".into(),
        ..Default::default()
    };
    w.mock.push(calls(1, "ask_user"));
    let suspended = w
        .result(pb::GenerateRequest {
            client_tools: vec![client_tool()],
            memory: Some(memory(None)),
            ..ask("tooling", "ask me")
        })
        .await;
    assert_eq!(suspended.finish_reason(), pb::FinishReason::Suspended);
    // Default: the waiting call is left out of the next prompt.
    w.mock.push(MockReply::Text("ok".into()));
    w.result(pb::GenerateRequest {
        memory: Some(memory(None)),
        ..ask("tooling", "next")
    })
    .await;
    let with_calls = |body: &Value| {
        messages(body)
            .iter()
            .filter(|m| m["tool_calls"].is_array())
            .count()
    };
    assert_eq!(with_calls(&w.sent(1)), 0);
    // false: kept, answered by a pending placeholder.
    w.mock.push(MockReply::Text("ok".into()));
    w.result(pb::GenerateRequest {
        memory: Some(memory(Some(false))),
        ..ask("tooling", "again")
    })
    .await;
    let body = w.sent(2);
    assert_eq!(with_calls(&body), 1);
    let placeholder = messages(&body)
        .into_iter()
        .find(|m| m["role"] == "tool")
        .expect("a placeholder result");
    assert_eq!(placeholder["content"], "{\"status\":\"pending\"}");

    // A caller's title is never replaced by a generated one, and no title chunk is sent.
    let mut titled = support::memory(&support::unique("t"), &resource, None);
    if let Some(t) = titled.thread.as_mut() {
        t.title = Some("Caller Title".into());
    }
    if let Some(o) = titled.options.as_mut() {
        o.generate_title = true;
        o.emit_title_event = true;
    }
    let before = w.mock.requests().len();
    w.mock.push(MockReply::Text("ok".into()));
    let chunks = w
        .run(pb::GenerateRequest {
            memory: Some(titled),
            ..ask("tooling", "title?")
        })
        .await;
    assert_eq!(w.mock.requests().len(), before + 1, "no title call");
    assert!(
        !chunks.iter().any(
            |c| matches!(&c.payload, Some(Payload::Data(d)) if d.r#type == "data-thread-title")
        )
    );
    w.stop().await;
}

#[tokio::test]
async fn request_options_reach_the_model_request() {
    let w = World::start().await;
    let (thread, resource) = (support::unique("t"), support::unique("r"));
    w.mock.push(MockReply::Text("earlier".into()));
    w.result(pb::GenerateRequest {
        memory: Some(support::memory(&thread, &resource, None)),
        ..ask("tooling", "first")
    })
    .await;
    w.mock.push(MockReply::Text("ok".into()));
    let image = pb::Part {
        kind: Some(pb::part::Kind::Image(pb::ImagePart {
            source: Some(pb::image_part::Source::Url(
                "https://img.example/cat.png".into(),
            )),
            mime_type: "image/png".into(),
        })),
    };
    let mut input = support::user("look");
    input.content.push(image);
    let r = w
        .result(pb::GenerateRequest {
            agent_id: "tooling".into(),
            messages: vec![input],
            run_id: "caller-run-7".into(),
            instructions: Some("Override.".into()),
            system: vec!["Extra system.".into()],
            context: vec![support::user("context note")],
            active_tools: vec!["slow".into()],
            tool_choice: Some(pb::ToolChoice {
                choice: Some(pb::tool_choice::Choice::ToolName("slow".into())),
            }),
            model_settings: Some(pb::ModelSettings {
                top_p: Some(0.5),
                presence_penalty: Some(0.1),
                frequency_penalty: Some(0.2),
                stop_sequences: vec!["END".into()],
                seed: Some(42),
                ..Default::default()
            }),
            memory: Some(support::memory(&thread, &resource, None)),
            ..Default::default()
        })
        .await;
    assert_eq!(r.run_id, "caller-run-7");
    let body = w.sent(1);
    let m = messages(&body);
    let contents: Vec<String> = m
        .iter()
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str().or(p["image_url"]["url"].as_str()))
                .collect::<Vec<_>>()
                .join("+"),
            _ => String::new(),
        })
        .collect();
    assert_eq!(
        contents,
        [
            "Override.",
            "Extra system.",
            "first",
            "earlier",
            "context note",
            "look+https://img.example/cat.png"
        ],
        "instructions, system, history, context, input in the reference's order"
    );
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["function"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(tools, ["slow"], "active_tools filters what is offered");
    assert_eq!(body["tool_choice"]["function"]["name"], "slow");
    assert_eq!(
        (
            body["top_p"].clone(),
            body["presence_penalty"].clone(),
            body["frequency_penalty"].clone(),
            body["stop"].clone(),
            body["seed"].clone()
        ),
        (
            json!(0.5),
            json!(0.1),
            json!(0.2),
            json!(["END"]),
            json!(42)
        )
    );
    // The context is not saved; the input is.
    let texts: Vec<String> = r
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|p| match &p.kind {
            Some(pb::part::Kind::Text(t)) => Some(t.text.clone()),
            _ => None,
        })
        .collect();
    assert!(!texts.contains(&"context note".to_owned()));
    w.stop().await;
}

#[tokio::test]
async fn save_per_step_makes_each_step_visible_to_the_thread_at_once() {
    let w = World::start().await;
    let (thread, resource) = (support::unique("t"), support::unique("r"));
    w.mock.push(calls(1, "slow"));
    w.mock.push(MockReply::Slow {
        text: "a slow final answer".into(),
        delay_per_delta: Duration::from_millis(300),
    });
    let memory = support::memory(&thread, &resource, None);
    let run = {
        let server = &w.server;
        let memory = memory.clone();
        async move {
            let mut client = support::agents_client(server).await;
            support::generate(
                &mut client,
                pb::GenerateRequest {
                    memory: Some(memory),
                    save_per_step: true,
                    ..ask("tooling", "slowly")
                },
            )
            .await
        }
    };
    let peek = async {
        // Once the second step's model call began, the first step is in the thread.
        assert!(
            support::eventually(Duration::from_secs(5), || async {
                w.mock.requests().len() >= 2
            })
            .await
        );
        w.mock.push(MockReply::Text("peeked".into()));
        let mut client = support::agents_client(&w.server).await;
        support::generate(
            &mut client,
            pb::GenerateRequest {
                memory: Some(memory.clone()),
                ..ask("tooling", "what happened?")
            },
        )
        .await;
        w.mock.requests()[2].clone()
    };
    let (_, seen) = tokio::join!(run, peek);
    let history_calls = messages(&seen)
        .iter()
        .filter(|m| m["tool_calls"].is_array())
        .count();
    assert_eq!(
        history_calls, 1,
        "the first step's call and result were saved already: {seen}"
    );
    w.stop().await;
}
