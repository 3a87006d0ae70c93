//! Missed deadlines, failure policies and bad answers.

use super::*;

#[tokio::test]
async fn a_missed_deadline_follows_the_declared_policy() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    mock.push(MockReply::Text("hello".into()));
    let silent = || -> Answerer { Box::new(|_| vec![]) };
    let out = generate_hooked(
        &server,
        ask("worker", "hi"),
        hook_options(&[pb::HookKind::PrepareStep], Some(100), false),
        silent(),
    )
    .await;
    let result = finish(&out);
    assert_eq!(result.finish_reason(), pb::FinishReason::Error);
    let error = result.error.expect("error");
    assert_eq!(
        (error.id.as_str(), error.category.as_str()),
        ("HOOK_FAILED", "HOOK")
    );
    assert!(support::kinds(&out.chunks).contains(&"hook-error"));
    assert!(mock.requests().is_empty(), "the model is never called");
    // CONTINUE: the run goes on without the hook.
    let out = generate_hooked(
        &server,
        ask("worker", "hi"),
        hook_options(&[pb::HookKind::PrepareStep], Some(100), true),
        silent(),
    )
    .await;
    assert_eq!(finish(&out).finish_reason(), pb::FinishReason::Stop);
    let policy = out.chunks.iter().find_map(|c| match &c.payload {
        Some(Payload::HookError(e)) => Some(e.policy()),
        _ => None,
    });
    assert_eq!(policy, Some(pb::HookFailurePolicy::Continue));
}

#[tokio::test]
async fn bad_answers_are_rejected_and_the_run_goes_on() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    mock.push(MockReply::Text("hello".into()));
    let out = generate_hooked(
        &server,
        ask("worker", "hi"),
        hook_options(&[pb::HookKind::PrepareStep], None, false),
        Box::new(|call| {
            let right = pb::HookAnswer {
                id: call.id.clone(),
                answer: Some(Answer::PrepareStep(pb::PrepareStepAnswer::default())),
            };
            vec![
                pb::HookAnswer {
                    id: "nope".into(),
                    answer: None,
                },
                pb::HookAnswer {
                    id: call.id.clone(),
                    answer: Some(Answer::BeforeToolCall(pb::BeforeToolCallAnswer::default())),
                },
                right.clone(),
                right,
            ]
        }),
    )
    .await;
    assert_eq!(finish(&out).finish_reason(), pb::FinishReason::Stop);
    let reasons: Vec<&str> = out.rejected.iter().map(|r| r.reason.as_str()).collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(reasons[0].contains("answer.id \"nope\""));
    assert!(reasons[1].contains("answer.before_tool_call"));
    assert!(reasons[2].contains("already answered"));
    // A stream that does not start with `start`, and unknown kinds, are INVALID_ARGUMENT.
    let mut client = support::agents_client(&server).await;
    let first = pb::GenerateWithHooksRequest {
        message: Some(pb::generate_with_hooks_request::Message::Answer(
            pb::HookAnswer::default(),
        )),
    };
    let err = client
        .generate_with_hooks(futures::stream::iter([first]))
        .await
        .expect_err("refused");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    let start = pb::GenerateWithHooksRequest {
        message: Some(pb::generate_with_hooks_request::Message::Start(
            pb::HookedGenerate {
                request: Some(ask("worker", "x")),
                hooks: Some(pb::HookOptions {
                    kinds: vec![99],
                    ..Default::default()
                }),
            },
        )),
    };
    let err = client
        .generate_with_hooks(futures::stream::iter([start]))
        .await
        .expect_err("refused");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
}
