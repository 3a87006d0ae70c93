//! Sub-agents on a real server: a supervisor delegating through `agent-{key}` (the tool, the
//! prompts both models read and the result are the reference's, `tests/reference/
//! delegation.json`), the child's chunks inside the supervisor's stream and on its own run id,
//! its memory, aborting the supervisor, and the delegation hooks.

use super::*;

const TEAM: &str = r#"
[[agents]]
id = "boss"
name = "Boss"
instructions = "You coordinate specialists."
model = "mock/test-model"
[agents.sub_agents]
researcher = "researcher"

[[agents]]
id = "researcher"
name = "Researcher"
description = "Researches questions."
instructions = "You research things."
model = "mock/test-model"
"#;

/// Scenario `n` of the reference's recording.
fn scenario(prefix: &str) -> Value {
    let text = std::fs::read_to_string("tests/reference/delegation.json").expect("fixture");
    let all: Value = serde_json::from_str(&text).expect("json");
    all["scenarios"]
        .as_array()
        .expect("scenarios")
        .iter()
        .find(|s| s["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
        .cloned()
        .expect("scenario")
}

/// `(role, text)` of each message of a reference prompt (tool results: what the model read).
fn reference_prompt(call: &Value) -> Vec<(String, String)> {
    call["prompt"]
        .as_array()
        .expect("prompt")
        .iter()
        .map(|m| {
            let text = match &m["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .map(|p| match p["type"].as_str() {
                        Some("text") => p["text"].as_str().unwrap_or("").to_owned(),
                        Some("tool-result") => {
                            p["output"]["value"].as_str().unwrap_or("").to_owned()
                        }
                        _ => String::new(),
                    })
                    .collect(),
                _ => String::new(),
            };
            (m["role"].as_str().unwrap_or("").to_owned(), text)
        })
        .collect()
}

/// A scripted model and a server running `agents`, whose supervisor first delegates "Why is
/// the sky blue?" to the researcher; then each of `texts` answers in turn.
async fn team(agents: &str, texts: &[&str]) -> (MockOpenAi, tempfile::TempDir, RunningServer) {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), agents).await;
    mock.push(tool_call(
        "agent-researcher",
        json!({"prompt": "Why is the sky blue?"}),
    ));
    for text in texts {
        mock.push(MockReply::Text((*text).into()));
    }
    (mock, dir, server)
}

/// The answers of scenario A: the researcher's, then the supervisor's.
const ANSWERS_A: [&str; 2] = ["Rayleigh scattering.", "It is Rayleigh scattering."];

/// The result object of a run's first delegation.
fn delegated(result: &pb::GenerateResult) -> Value {
    from_proto_value(
        result.steps[0].tool_results[0]
            .result
            .as_ref()
            .expect("result"),
    )
}

/// The sub-agent chunks forwarded inside `chunks`, unwrapped.
fn forwarded(chunks: &[pb::Chunk]) -> Vec<pb::Chunk> {
    chunks
        .iter()
        .filter_map(|c| match &c.payload {
            Some(Payload::ToolOutput(o)) => o.chunk.as_deref().cloned(),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_supervisor_delegates_and_both_models_read_the_reference_prompts() {
    let reference = scenario("A. ");
    let calls = reference["generate"]["calls"].as_array().expect("calls");
    let (mock, _dir, server) = team(TEAM, &ANSWERS_A).await;
    let mut client = support::agents_client(&server).await;
    let chunks = support::generate(
        &mut client,
        pb::GenerateRequest {
            memory: Some(support::memory("th-a", "user-1", None)),
            ..ask("boss", "Ask the researcher about the sky")
        },
    )
    .await;
    let result = support::finish(&chunks);
    assert_eq!(result.text, "It is Rayleigh scattering.");
    let described = client
        .get_agent(pb::GetAgentRequest {
            agent_id: "boss".into(),
        })
        .await
        .expect("get agent")
        .into_inner();
    let names: Vec<String> = described.tools.iter().map(|t| t.name.clone()).collect();
    assert_eq!(names, ["agent-researcher"]);

    // The tool, exactly as the reference's model receives it.
    let tools = mock.requests()[0]["tools"].clone();
    let expected = &calls[0]["tools"][0];
    assert_eq!(tools[0]["function"]["name"], expected["name"]);
    assert_eq!(tools[0]["function"]["description"], expected["description"]);
    assert_eq!(
        tools[0]["function"]["parameters"].to_string(),
        expected["inputSchema"].to_string(),
        "the schema, key order included"
    );
    // The sub-agent reads its instructions, the supervisor's prompt, then the delegation's;
    // the supervisor then reads the sub-agent's text as the tool's output. Its own tools only.
    assert_eq!(calls[1]["model"], "researcher");
    assert_eq!(prompt(&mock, 1), reference_prompt(&calls[1]));
    assert!(mock.requests()[1].get("tools").is_none());
    assert_eq!(prompt(&mock, 2), reference_prompt(&calls[2]));

    // The result object, with the reference's shape and ids.
    let delegated = &result.steps[0].tool_results[0];
    let object = from_proto_value(delegated.result.as_ref().expect("result"));
    let thread = object["subAgentThreadId"]
        .as_str()
        .expect("thread")
        .to_owned();
    assert!(thread.starts_with("th-a-") && thread.len() == "th-a-".len() + 36);
    assert_eq!(
        object,
        json!({"text": "Rayleigh scattering.", "subAgentThreadId": thread,
            "subAgentResourceId": "user-1-researcher", "subAgentToolResults": []})
    );
    assert_eq!(
        delegated.model_output.as_deref(),
        Some("Rayleigh scattering.")
    );

    // The child's chunks sit between the call and its result, in the reference's order, each
    // the child run's own (Observe on its id replays the same chunks).
    let kinds = support::kinds(&chunks);
    let call_at = kinds.iter().position(|k| *k == "tool-call").expect("call");
    let result_at = kinds
        .iter()
        .position(|k| *k == "tool-result")
        .expect("result");
    assert!(
        kinds[call_at + 1..result_at]
            .iter()
            .all(|k| *k == "tool-output")
    );
    let inner = forwarded(&chunks);
    let inner_kinds = support::kinds(&inner);
    assert_eq!(inner_kinds.first(), Some(&"start"));
    assert_eq!(inner_kinds.last(), Some(&"finish"));
    for k in [
        "step-start",
        "text-start",
        "text-delta",
        "text-end",
        "step-finish",
    ] {
        assert!(inner_kinds.contains(&k), "{k} in {inner_kinds:?}");
    }
    let child = inner[0].run_id.clone();
    assert_ne!(child, chunks[0].run_id);
    let Some(Payload::Start(start)) = &inner[0].payload else {
        panic!("start");
    };
    assert_eq!(
        (start.agent_id.as_str(), start.parent_run_id.as_str()),
        ("researcher", chunks[0].run_id.as_str())
    );
    assert_eq!(start.parent_tool_call_id, delegated.tool_call_id);
    let observed = support::collect(
        client
            .observe(pb::ObserveRequest {
                run_id: child.clone(),
                after_sequence: 0,
            })
            .await
            .expect("observe the child")
            .into_inner(),
    )
    .await;
    assert_eq!(observed, inner);

    // The sub-agent's own thread keeps its prompt and answer (not the forwarded context).
    let texts = thread_texts(&server, &thread, "user-1-researcher").await;
    assert_eq!(texts, ["Why is the sky blue?", "Rayleigh scattering."]);
}

#[tokio::test]
async fn aborting_the_supervisor_stops_its_sub_agent() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), TEAM).await;
    mock.push(tool_call(
        "agent-researcher",
        json!({"prompt": "Think long."}),
    ));
    mock.push(MockReply::Slow {
        text: "one two three four five six seven eight nine ten".into(),
        delay_per_delta: Duration::from_millis(300),
    });
    let mut client = support::agents_client(&server).await;
    let mut stream = client
        .generate(ask("boss", "Go"))
        .await
        .expect("generate")
        .into_inner();
    let mut chunks = Vec::new();
    // Once the sub-agent is writing, abort the supervisor.
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.expect("chunk");
        let writing = matches!(&chunk.payload, Some(Payload::ToolOutput(o))
            if matches!(o.chunk.as_deref().and_then(|c| c.payload.as_ref()), Some(Payload::TextDelta(_))));
        chunks.push(chunk);
        if writing {
            break;
        }
    }
    let parent = chunks[0].run_id.clone();
    client
        .abort(pb::AbortRequest {
            run_id: parent,
            reason: "Stop the team".into(),
        })
        .await
        .expect("abort");
    while let Some(chunk) = stream.next().await {
        chunks.push(chunk.expect("chunk"));
    }
    assert_eq!(
        support::finish(&chunks).finish_reason(),
        pb::FinishReason::Aborted
    );
    let child = forwarded(&chunks)[0].run_id.clone();
    let observed = support::collect(
        client
            .observe(pb::ObserveRequest {
                run_id: child,
                after_sequence: 0,
            })
            .await
            .expect("observe the child")
            .into_inner(),
    )
    .await;
    assert_eq!(
        support::finish(&observed).finish_reason(),
        pb::FinishReason::Aborted,
        "the sub-agent stopped with its supervisor"
    );
    // Its model was cut off: no third model call, no full answer.
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn on_delegation_start_rejects_with_the_reference_text() {
    let reference = scenario("D. ");
    let calls = reference["generate"]["calls"].as_array().expect("calls");
    let (mock, _dir, server) = team(TEAM, &["Understood."]).await;
    let out = generate_hooked(
        &server,
        pb::GenerateRequest {
            memory: Some(support::memory("th-d", "user-1", None)),
            ..ask("boss", "Ask the researcher about the sky")
        },
        hook_options(&[pb::HookKind::OnDelegationStart], None, false),
        Box::new(|call| {
            let Some(Context::OnDelegationStart(ctx)) = &call.context else {
                return unchanged(call);
            };
            assert_eq!(
                (
                    ctx.primitive_id.as_str(),
                    ctx.prompt.as_str(),
                    ctx.iteration,
                    ctx.parent_agent_name.as_str()
                ),
                ("researcher", "Why is the sky blue?", 1, "Boss")
            );
            answer(
                call,
                Answer::OnDelegationStart(pb::DelegationStartAnswer {
                    proceed: Some(false),
                    rejection_reason: Some("Not allowed now".into()),
                    ..Default::default()
                }),
            )
        }),
    )
    .await;
    // The sub-agent never ran: two model calls, both the supervisor's.
    assert_eq!(mock.requests().len(), 2);
    assert_eq!(prompt(&mock, 1), reference_prompt(&calls[1]));
    let object = delegated(&finish(&out));
    let expected = &reference["generate"]["result"]["toolResults"][0]["result"];
    assert_eq!(object["text"], expected["text"]);
    assert!(object.get("subAgentToolResults").is_none());
    assert!(forwarded(&out.chunks).is_empty());
    // With memory (the reference's scenario D3), the sub-agent's thread keeps the prompt and
    // the refusal.
    let saved = &scenario("D3. ")["generate"]["savedMemory"]["user-1-researcher"][0]["messages"];
    let expected_texts: Vec<&str> = saved
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["parts"][0]["text"].as_str().expect("text"))
        .collect();
    assert_eq!(object["subAgentResourceId"], "user-1-researcher");
    let thread = object["subAgentThreadId"].as_str().expect("thread");
    assert_eq!(
        thread_texts(&server, thread, "user-1-researcher").await,
        expected_texts
    );
}

#[tokio::test]
async fn on_delegation_complete_replaces_the_text_the_supervisor_reads() {
    let reference = scenario("E1. ");
    let calls = reference["generate"]["calls"].as_array().expect("calls");
    let (mock, _dir, server) = team(TEAM, &ANSWERS_A).await;
    let out = generate_hooked(
        &server,
        ask("boss", "Ask the researcher about the sky"),
        hook_options(&[pb::HookKind::OnDelegationComplete], None, false),
        Box::new(|call| {
            let Some(Context::OnDelegationComplete(ctx)) = &call.context else {
                return unchanged(call);
            };
            assert_eq!(
                (ctx.result_text.as_str(), ctx.success, ctx.finish_reason()),
                ("Rayleigh scattering.", true, pb::FinishReason::Stop)
            );
            answer(
                call,
                Answer::OnDelegationComplete(pb::DelegationCompleteAnswer {
                    result_text: Some("REPLACED TEXT".into()),
                    ..Default::default()
                }),
            )
        }),
    )
    .await;
    assert_eq!(prompt(&mock, 2), reference_prompt(&calls[2]));
    let object = delegated(&finish(&out));
    assert_eq!(object["text"], "REPLACED TEXT");
}

#[tokio::test]
async fn a_failing_sub_agent_is_a_tool_error_with_the_reference_text() {
    let reference = scenario("F. ");
    let calls = reference["generate"]["calls"].as_array().expect("calls");
    let (mock, _dir, server) = team(TEAM, &[]).await;
    mock.push(MockReply::Error {
        status: 400,
        body: r#"{"error":{"message":"boom"}}"#.into(),
        retry_after: None,
    });
    mock.push(MockReply::Text("Sorry.".into()));
    let mut client = support::agents_client(&server).await;
    let chunks =
        support::generate(&mut client, ask("boss", "Ask the researcher about the sky")).await;
    let last = mock.requests().len() - 1;
    assert_eq!(
        prompt(&mock, last).last(),
        reference_prompt(&calls[calls.len() - 1]).last()
    );
    let result = support::finish(&chunks);
    assert_eq!(result.finish_reason(), pb::FinishReason::Stop);
    assert!(result.steps[0].tool_results[0].is_error);
}

/// Every model call of `reference`'s `generate()` run read what agentd's did, in order.
fn assert_prompts_match(mock: &MockOpenAi, reference: &Value) {
    let calls = reference["generate"]["calls"].as_array().expect("calls");
    assert_eq!(mock.requests().len(), calls.len(), "model calls");
    for (i, call) in calls.iter().enumerate() {
        assert_eq!(
            prompt(mock, i),
            reference_prompt(call),
            "call {i} ({})",
            call["model"]
        );
    }
}

#[tokio::test]
async fn two_levels_of_delegation_forward_each_supervisors_prompt() {
    let reference = scenario("G. ");
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let team = format!(
        "{TEAM}[agents.sub_agents]\nchecker = \"checker\"\n\n[[agents]]\nid = \"checker\"\nname = \"Checker\"\ndescription = \"Checks answers.\"\ninstructions = \"You check answers.\"\nmodel = \"mock/test-model\"\n"
    );
    let server = server(&mock, dir.path(), &team).await;
    mock.push(tool_call(
        "agent-researcher",
        json!({"prompt": "Why is the sky blue?"}),
    ));
    mock.push(tool_call(
        "agent-checker",
        json!({"prompt": "Check: Rayleigh scattering."}),
    ));
    mock.push(MockReply::Text("Correct.".into()));
    mock.push(MockReply::Text("Rayleigh scattering (checked).".into()));
    mock.push(MockReply::Text("It is Rayleigh scattering.".into()));
    let mut client = support::agents_client(&server).await;
    let chunks =
        support::generate(&mut client, ask("boss", "Ask the researcher about the sky")).await;
    assert_eq!(support::finish(&chunks).text, "It is Rayleigh scattering.");
    assert_prompts_match(&mock, &reference);
    // The checker's chunks reach the top stream inside the researcher's.
    let nested = forwarded(&forwarded(&chunks));
    assert_eq!(support::kinds(&nested).first(), Some(&"start"));
    let Some(Payload::Start(start)) = &nested[0].payload else {
        panic!("start");
    };
    assert_eq!(start.agent_id, "checker");
}

#[tokio::test]
async fn message_filter_picks_what_the_sub_agent_reads() {
    let reference = scenario("E2. ");
    let (mock, _dir, server) = team(TEAM, &["Rayleigh scattering.", "Done."]).await;
    let out = generate_hooked(
        &server,
        ask("boss", "Ask the researcher about the sky"),
        hook_options(&[pb::HookKind::MessageFilter], None, false),
        Box::new(|call| {
            let Some(Context::MessageFilter(ctx)) = &call.context else {
                return unchanged(call);
            };
            // The supervisor's system message, then its user's.
            assert_eq!(ctx.messages.len(), 2);
            assert_eq!(ctx.prompt, "Why is the sky blue?");
            answer(
                call,
                Answer::MessageFilter(pb::MessageFilterAnswer {
                    messages: ctx.messages[1..].to_vec(),
                }),
            )
        }),
    )
    .await;
    assert_eq!(finish(&out).text, "Done.");
    assert_prompts_match(&mock, &reference);
}

#[tokio::test]
async fn on_delegation_complete_can_bail_and_leave_feedback_for_later_turns() {
    let (mock, _dir, server) = team(TEAM, &ANSWERS_A).await;
    let out = generate_hooked(
        &server,
        pb::GenerateRequest {
            memory: Some(support::memory("t-bail", "u1", None)),
            ..ask("boss", "Ask the researcher about the sky")
        },
        hook_options(&[pb::HookKind::OnDelegationComplete], None, false),
        Box::new(|call| {
            let Some(Context::OnDelegationComplete(_)) = &call.context else {
                return unchanged(call);
            };
            answer(
                call,
                Answer::OnDelegationComplete(pb::DelegationCompleteAnswer {
                    feedback: Some("Ask for sources next time.".into()),
                    bail: true,
                    ..Default::default()
                }),
            )
        }),
    )
    .await;
    // As the reference's bail(): one step, ended on its tool calls, no text.
    let result = finish(&out);
    assert_eq!(result.steps.len(), 1);
    assert_eq!(result.finish_reason(), pb::FinishReason::ToolCalls);
    assert!(result.text.is_empty());
    assert_eq!(
        mock.requests().len(),
        2,
        "the supervisor was not called again"
    );
    // The feedback waits in the supervisor's thread for its next turn.
    let texts = thread_texts(&server, "t-bail", "u1").await;
    assert!(
        texts.iter().any(|t| t == "Ask for sources next time."),
        "{texts:?}"
    );
}

#[tokio::test]
async fn include_sub_agent_tool_results_shows_the_supervisor_the_whole_result() {
    let agents = TEAM.replace(
        "[agents.sub_agents]\nresearcher = \"researcher\"\n",
        "[agents.sub_agents]\nresearcher = \"researcher\"\n[agents.delegation]\ninclude_sub_agent_tool_results = true\n",
    );
    let (mock, _dir, server) = team(&agents, &ANSWERS_A).await;
    let mut client = support::agents_client(&server).await;
    let chunks =
        support::generate(&mut client, ask("boss", "Ask the researcher about the sky")).await;
    let object = delegated(&support::finish(&chunks));
    let tool = messages(&mock, 2)
        .into_iter()
        .find(|m| m["role"] == "tool")
        .expect("tool message");
    let read: Value = serde_json::from_str(tool["content"].as_str().expect("text")).expect("json");
    assert_eq!(read, object);
    assert_eq!(read["subAgentResourceId"], "boss-researcher");
}
