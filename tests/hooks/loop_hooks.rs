//! Tool hooks, iteration hooks, prepare_step and continuations: what the model reads.

use super::*;

#[tokio::test]
async fn before_tool_call_skips_with_an_output_the_model_reads() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    mock.push(tool_call("task_check", json!({})));
    mock.push(MockReply::Text("done".into()));
    let kinds = [pb::HookKind::BeforeToolCall, pb::HookKind::AfterToolCall];
    let out = generate_hooked(
        &server,
        ask("worker", "check"),
        hook_options(&kinds, None, false),
        Box::new(|call| match &call.context {
            Some(Context::BeforeToolCall(c)) => {
                assert_eq!(c.tool_name, "task_check");
                answer(
                    call,
                    Answer::BeforeToolCall(pb::BeforeToolCallAnswer {
                        proceed: Some(false),
                        output: Some(to_proto_value(&json!({"skipped": true}))),
                    }),
                )
            }
            other => panic!("unexpected hook {other:?}"),
        }),
    )
    .await;
    assert_eq!(
        out.calls.len(),
        1,
        "after_tool_call is skipped with the tool"
    );
    let tool = messages(&mock, 1)
        .into_iter()
        .find(|m| m["role"] == "tool")
        .expect("tool message");
    assert_eq!(tool["content"], r#"{"skipped":true}"#);
    let result = finish(&out);
    assert_eq!(result.finish_reason(), pb::FinishReason::Stop);
    let output = from_proto_value(result.tool_results[0].result.as_ref().expect("result"));
    assert_eq!(output, json!({"skipped": true}));
}

#[tokio::test]
async fn after_tool_call_replaces_the_result_and_a_throwing_hook_is_a_tool_error() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    mock.push(MockReply::ToolCalls(vec![
        ("task_check".into(), json!({})),
        ("task_check".into(), json!({})),
    ]));
    mock.push(MockReply::Text("done".into()));
    let mut n = 0;
    let out = generate_hooked(
        &server,
        ask("worker", "check twice"),
        hook_options(&[pb::HookKind::AfterToolCall], None, false),
        Box::new(move |call| {
            let Some(Context::AfterToolCall(c)) = &call.context else {
                panic!("unexpected hook");
            };
            assert!(c.output.is_some() && c.error.is_none());
            n += 1;
            if n == 1 {
                answer(
                    call,
                    Answer::AfterToolCall(pb::AfterToolCallAnswer {
                        output: Some(to_proto_value(&json!("REPLACED"))),
                    }),
                )
            } else {
                answer(
                    call,
                    Answer::Error(pb::HookFailure {
                        message: "after hook failed".into(),
                    }),
                )
            }
        }),
    )
    .await;
    let tools: Vec<Value> = messages(&mock, 1)
        .into_iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].clone())
        .collect();
    assert_eq!(tools, [json!("REPLACED"), json!("after hook failed")]);
    assert!(support::kinds(&out.chunks).contains(&"tool-error"));
}

#[tokio::test]
async fn iteration_feedback_is_an_assistant_message_after_the_tool_results() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    let tasks =
        json!({"tasks": [{"content": "Check", "status": "in_progress", "activeForm": "Checking"}]});
    mock.push(tool_call("task_write", tasks));
    mock.push(MockReply::Text("done".into()));
    let thread = support::unique("t");
    let mut request = ask("worker", "go");
    request.memory = Some(support::memory(&thread, "r", None));
    let out = generate_hooked(
        &server,
        request,
        hook_options(&[pb::HookKind::OnIterationComplete], None, false),
        Box::new(|call| {
            let Some(Context::OnIterationComplete(c)) = &call.context else {
                panic!("unexpected hook");
            };
            if c.iteration == 1 {
                assert!(!c.is_final);
                assert_eq!(c.tool_calls.len(), 1);
                answer(
                    call,
                    Answer::OnIterationComplete(pb::IterationAnswer {
                        continue_run: None,
                        feedback: Some("Check the list again".into()),
                    }),
                )
            } else {
                assert!(c.is_final);
                assert_eq!(c.text, "done");
                unchanged(call)
            }
        }),
    )
    .await;
    assert_eq!(out.calls.len(), 2);
    let second = messages(&mock, 1);
    let roles: Vec<&str> = second
        .iter()
        .map(|m| m["role"].as_str().unwrap_or(""))
        .collect();
    let tool_at = roles
        .iter()
        .position(|r| *r == "tool")
        .expect("tool message");
    assert_eq!(second[tool_at + 1]["role"], "assistant");
    assert_eq!(second[tool_at + 1]["content"], "Check the list again");
    // Before the state signal computed for the next step, as the reference orders them.
    assert_eq!(second[tool_at + 2]["role"], "user");
    let signal = second[tool_at + 2]["content"].to_string();
    assert!(signal.contains("<current-task-list"), "{signal}");
    // The feedback is part of the response, so it is in the result's messages too.
    let result = finish(&out);
    assert!(
        result.messages.iter().any(|m| m.role() == pb::Role::Assistant
            && m.content.iter().any(|p| matches!(&p.kind, Some(pb::part::Kind::Text(t)) if t.text == "Check the list again"))),
    );
    // And saved: the next turn on the thread reads it as remembered assistant text.
    mock.push(MockReply::Text("again".into()));
    let mut agents = support::agents_client(&server).await;
    let mut next = ask("worker", "and now?");
    next.memory = Some(support::memory(&thread, "r", None));
    support::generate(&mut agents, next).await;
    let third = messages(&mock, 2);
    assert!(
        third
            .iter()
            .any(|m| m["role"] == "assistant" && m["content"] == "Check the list again"),
        "{third:?}"
    );
}

#[tokio::test]
async fn iteration_continue_false_stops_and_true_forces_another_step() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    mock.push(tool_call("task_check", json!({})));
    let stop = |go_on: bool| -> Answerer {
        Box::new(move |call| {
            answer(
                call,
                Answer::OnIterationComplete(pb::IterationAnswer {
                    continue_run: Some(go_on),
                    feedback: None,
                }),
            )
        })
    };
    let options = || hook_options(&[pb::HookKind::OnIterationComplete], None, false);
    let out = generate_hooked(&server, ask("worker", "go"), options(), stop(false)).await;
    assert_eq!(
        mock.requests().len(),
        1,
        "continue false stops after the tool step"
    );
    assert_eq!(finish(&out).finish_reason(), pb::FinishReason::ToolCalls);
    // continue:true on text steps: forced on until max_steps.
    for text in ["first", "second", "third"] {
        mock.push(MockReply::Text(text.into()));
    }
    let mut request = ask("worker", "go");
    request.max_steps = Some(3);
    let out = generate_hooked(&server, request, options(), stop(true)).await;
    assert_eq!(mock.requests().len(), 4);
    assert_eq!(finish(&out).steps.len(), 3);
}

#[tokio::test]
async fn feedback_with_continue_false_allows_exactly_one_more_call() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    mock.push(tool_call("task_check", json!({})));
    mock.push(tool_call("task_check", json!({})));
    mock.push(MockReply::Text("never asked".into()));
    let out = generate_hooked(
        &server,
        ask("worker", "go"),
        hook_options(&[pb::HookKind::OnIterationComplete], None, false),
        Box::new(|call| {
            let Some(Context::OnIterationComplete(c)) = &call.context else {
                panic!("unexpected hook");
            };
            if c.iteration > 1 {
                return unchanged(call);
            }
            answer(
                call,
                Answer::OnIterationComplete(pb::IterationAnswer {
                    continue_run: Some(false),
                    feedback: Some("Wrap up now.".into()),
                }),
            )
        }),
    )
    .await;
    // The second call reads the feedback; the run stops after it although it called a tool
    // (whose call still ran).
    assert_eq!(mock.requests().len(), 2);
    let second = messages(&mock, 1);
    assert!(
        second
            .iter()
            .any(|m| m["role"] == "assistant" && m["content"] == "Wrap up now.")
    );
    let result = finish(&out);
    assert_eq!(result.finish_reason(), pb::FinishReason::ToolCalls);
    assert_eq!(result.steps.len(), 2);
    assert_eq!(result.tool_results.len(), 2);
}

#[tokio::test]
async fn prepare_step_changes_one_steps_tool_choice_and_tools() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    for _ in 0..3 {
        mock.push(tool_call("task_check", json!({})));
    }
    mock.push(MockReply::Text("done".into()));
    let out = generate_hooked(
        &server,
        ask("worker", "go"),
        hook_options(&[pb::HookKind::PrepareStep], None, false),
        Box::new(|call| {
            let Some(Context::PrepareStep(c)) = &call.context else {
                panic!("unexpected hook");
            };
            assert_eq!(c.model, "mock/test-model");
            assert!(c.tools.contains(&"task_write".to_owned()));
            assert_eq!(c.system_messages[0], "You work.");
            if c.step_number == 3 {
                // `none`: the model is offered no tools at all, as the reference.
                let none = pb::ToolChoice {
                    choice: Some(pb::tool_choice::Choice::Mode(
                        pb::ToolChoiceMode::None as i32,
                    )),
                };
                return answer(
                    call,
                    Answer::PrepareStep(pb::PrepareStepAnswer {
                        tool_choice: Some(none),
                        ..Default::default()
                    }),
                );
            }
            if c.step_number != 1 {
                return unchanged(call);
            }
            answer(
                call,
                Answer::PrepareStep(pb::PrepareStepAnswer {
                    tool_choice: Some(pb::ToolChoice {
                        choice: Some(pb::tool_choice::Choice::ToolName("task_check".into())),
                    }),
                    active_tools: Some(pb::StringList {
                        values: vec!["task_check".into()],
                    }),
                    system_messages: Some(pb::StringList {
                        values: vec!["Only check.".into()],
                    }),
                    ..Default::default()
                }),
            )
        }),
    )
    .await;
    assert_eq!(out.calls.len(), 4);
    let requests = mock.requests();
    let tool_names = |i: usize| -> Vec<String> {
        requests[i]["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|t| t["function"]["name"].as_str().unwrap_or("").to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(tool_names(1), ["task_check"]);
    assert_eq!(requests[1]["tool_choice"]["function"]["name"], "task_check");
    assert_eq!(requests[1]["messages"][0]["content"], "Only check.");
    assert!(
        tool_names(2).len() > 1,
        "the next step is back to the run's tools"
    );
    assert_ne!(requests[2]["messages"][0]["content"], "Only check.");
    assert!(requests[3].get("tools").is_none() && requests[3].get("tool_choice").is_none());
    assert_eq!(finish(&out).finish_reason(), pb::FinishReason::Stop);
}

#[tokio::test]
async fn continuations_attach_their_own_hooks_and_a_missing_handler_follows_the_policy() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    // A run suspends on an approval; its before_tool_call hook is not called before approval.
    mock.push(tool_call("task_check", json!({})));
    let kinds = [pb::HookKind::BeforeToolCall];
    let out = generate_hooked(
        &server,
        ask("guarded", "check"),
        hook_options(&kinds, None, false),
        Box::new(|_| panic!("no hook before the approval")),
    )
    .await;
    let result = finish(&out);
    assert_eq!(result.finish_reason(), pb::FinishReason::Suspended);
    let run_id = result.run_id.clone();
    let call_id = result.tool_calls[0].tool_call_id.clone();
    // Approved with hooks attached: the continuation's client answers before_tool_call.
    mock.push(MockReply::Text("checked".into()));
    let approve = pb::hooked_continue::Decision::Approve(pb::ApproveRequest {
        run_id: run_id.clone(),
        tool_call_id: call_id,
        ..Default::default()
    });
    let out = continue_hooked(
        &server,
        approve,
        hook_options(&kinds, None, false),
        skip_with("approved but skipped"),
    )
    .await;
    assert_eq!(out.calls.len(), 1);
    assert_eq!(finish(&out).finish_reason(), pb::FinishReason::Stop);
    let tool = messages(&mock, 1)
        .into_iter()
        .find(|m| m["role"] == "tool")
        .expect("tool message");
    assert_eq!(tool["content"], "approved but skipped");
    // Suspended with hooks, continued by plain Approve: the FAIL policy ends the run.
    let mut approvals = ApprovalServiceClient::new(support::channel(&server).await);
    mock.push(tool_call("task_check", json!({})));
    let out = generate_hooked(
        &server,
        ask("guarded", "check"),
        hook_options(&kinds, None, false),
        Box::new(|_| vec![]),
    )
    .await;
    let result = finish(&out);
    let chunks = support::collect(
        approvals
            .approve(pb::ApproveRequest {
                run_id: result.run_id.clone(),
                tool_call_id: result.tool_calls[0].tool_call_id.clone(),
                ..Default::default()
            })
            .await
            .expect("approve")
            .into_inner(),
    )
    .await;
    let end = support::finish(&chunks);
    assert_eq!(end.finish_reason(), pb::FinishReason::Error);
    assert_eq!(end.error.expect("error").category, "HOOK");
}

#[tokio::test]
async fn omit_messages_leaves_the_conversation_out_of_contexts() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    mock.push(MockReply::Text("hello".into()));
    let mut options = hook_options(
        &[pb::HookKind::PrepareStep, pb::HookKind::OnIterationComplete],
        None,
        false,
    );
    options.omit_messages = true;
    let out = generate_hooked(&server, ask("worker", "hi"), options, Box::new(unchanged)).await;
    assert_eq!(out.calls.len(), 2);
    for call in &out.calls {
        match &call.context {
            Some(Context::PrepareStep(c)) => {
                assert!(c.messages.is_empty());
                assert_eq!(c.system_messages[0], "You work.");
            }
            Some(Context::OnIterationComplete(c)) => {
                assert!(c.messages.is_empty());
                assert_eq!(c.text, "hello");
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    // Without it, the conversation is there.
    mock.push(MockReply::Text("hello".into()));
    let options = hook_options(&[pb::HookKind::PrepareStep], None, false);
    let out = generate_hooked(&server, ask("worker", "hi"), options, Box::new(unchanged)).await;
    let Some(Context::PrepareStep(c)) = &out.calls[0].context else {
        panic!("prepare_step");
    };
    assert_eq!(c.messages.len(), 1);
}

/// A before_tool_call answerer that skips every call with `output`.
fn skip_with(output: &'static str) -> Answerer {
    Box::new(move |call| {
        answer(
            call,
            Answer::BeforeToolCall(pb::BeforeToolCallAnswer {
                proceed: Some(false),
                output: Some(to_proto_value(&json!(output))),
            }),
        )
    })
}

#[tokio::test]
async fn a_run_suspended_with_hooks_on_one_replica_continues_with_hooks_on_another() {
    let redis = support::redis::RedisServer::start();
    let mock = MockOpenAi::start().await.expect("mock");
    let (dir_a, dir_b) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let a = support::start(support::agent_config(
        &mock,
        AGENTS,
        &redis.url(),
        dir_a.path(),
    ))
    .await;
    let b = support::start(support::agent_config(
        &mock,
        AGENTS,
        &redis.url(),
        dir_b.path(),
    ))
    .await;
    let kinds = [pb::HookKind::BeforeToolCall];
    mock.push(tool_call("task_check", json!({})));
    let out = generate_hooked(
        &a,
        ask("guarded", "check"),
        hook_options(&kinds, None, false),
        Box::new(unchanged),
    )
    .await;
    let result = finish(&out);
    assert_eq!(result.finish_reason(), pb::FinishReason::Suspended);
    a.stop().await.expect("replica a stops");
    mock.push(MockReply::Text("checked on b".into()));
    let approve = pb::hooked_continue::Decision::Approve(pb::ApproveRequest {
        run_id: result.run_id.clone(),
        tool_call_id: result.tool_calls[0].tool_call_id.clone(),
        ..Default::default()
    });
    let out = continue_hooked(
        &b,
        approve,
        hook_options(&kinds, None, false),
        skip_with("skipped on b"),
    )
    .await;
    assert_eq!(out.calls.len(), 1);
    let end = finish(&out);
    assert_eq!(end.finish_reason(), pb::FinishReason::Stop);
    assert_eq!(end.text, "checked on b");
    let tool = messages(&mock, 1)
        .into_iter()
        .find(|m| m["role"] == "tool")
        .expect("tool message");
    assert_eq!(tool["content"], "skipped on b");
}

#[tokio::test]
async fn a_declined_call_never_reaches_the_tool_hooks() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    mock.push(tool_call("task_check", json!({})));
    let kinds = [pb::HookKind::BeforeToolCall, pb::HookKind::AfterToolCall];
    let out = generate_hooked(
        &server,
        ask("guarded", "check"),
        hook_options(&kinds, None, false),
        Box::new(|_| panic!("no tool hook before a decision")),
    )
    .await;
    let result = finish(&out);
    mock.push(MockReply::Text("understood".into()));
    let decline = pb::hooked_continue::Decision::Decline(pb::DeclineRequest {
        run_id: result.run_id.clone(),
        tool_call_id: result.tool_calls[0].tool_call_id.clone(),
        reason: Some("Not today".into()),
        ..Default::default()
    });
    let out = continue_hooked(
        &server,
        decline,
        hook_options(&kinds, None, false),
        Box::new(|_| panic!("a declined call runs no tool hook")),
    )
    .await;
    assert!(out.calls.is_empty());
    assert_eq!(finish(&out).finish_reason(), pb::FinishReason::Stop);
    let tool = messages(&mock, 1)
        .into_iter()
        .find(|m| m["role"] == "tool")
        .expect("tool message");
    assert_eq!(tool["content"], "Not today");
}
