//! Completion checks: hook and built-in scorers, the reference's feedback and chunk.

use super::*;

fn completion(scorers: Vec<pb::CompletionScorer>) -> pb::IsTaskComplete {
    pb::IsTaskComplete {
        scorers,
        ..Default::default()
    }
}

fn scorer(id: &str, name: &str, kind: pb::completion_scorer::Kind) -> pb::CompletionScorer {
    pb::CompletionScorer {
        id: id.into(),
        name: name.into(),
        kind: Some(kind),
    }
}

fn checks(chunks: &[pb::Chunk]) -> Vec<pb::IsTaskCompleteChunk> {
    chunks
        .iter()
        .filter_map(|c| match &c.payload {
            Some(Payload::IsTaskComplete(x)) => Some(x.clone()),
            _ => None,
        })
        .collect()
}

/// The feedback text with its duration (which varies) replaced by `Nms`.
fn without_duration(text: &str) -> String {
    let re_start = text.find("Duration: ").map(|i| i + "Duration: ".len());
    match re_start {
        Some(i) => {
            let end = text[i..].find("ms").map_or(i, |e| i + e);
            format!("{}N{}", &text[..i], &text[end..])
        }
        None => text.to_owned(),
    }
}

#[tokio::test]
async fn is_task_complete_hook_scorer_feedback_is_the_references() {
    use pb::completion_scorer::Kind;
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    mock.push(MockReply::Text("working".into()));
    mock.push(MockReply::Text("DONE".into()));
    let mut request = ask("worker", "finish it");
    request.is_task_complete = Some(completion(vec![scorer(
        "has-done",
        "Has Done",
        Kind::Hook(pb::HookScorer {}),
    )]));
    let out = generate_hooked(
        &server,
        request,
        hook_options(&[pb::HookKind::IsTaskComplete], None, false),
        Box::new(|call| {
            let Some(Context::IsTaskComplete(c)) = &call.context else {
                panic!("unexpected hook");
            };
            assert_eq!(c.original_task, "finish it");
            let done = c.output.contains("DONE");
            answer(
                call,
                Answer::IsTaskComplete(pb::ScoreAnswer {
                    score: if done { 1.0 } else { 0.0 },
                    reason: Some(if done { "has DONE" } else { "no DONE yet" }.into()),
                }),
            )
        }),
    )
    .await;
    let second = messages(&mock, 1);
    let n = second.len();
    assert_eq!(second[n - 2]["content"], "working");
    assert_eq!(
        without_duration(second[n - 1]["content"].as_str().unwrap_or("")),
        "#### Completion Check Results\n\nOverall: ❌ NOT COMPLETE\nDuration: Nms\n\n**Has Done** (has-done)\nScore: 0 ❌\nReason: no DONE yet\n\n🔄 The task is not yet complete. Please continue working based on the feedback above."
    );
    let checks = checks(&out.chunks);
    assert_eq!(checks.len(), 2);
    assert!(!checks[0].passed && checks[1].passed);
    let kinds = support::kinds(&out.chunks);
    let at = kinds
        .iter()
        .position(|k| *k == "is-task-complete")
        .expect("chunk");
    assert_eq!(kinds[at - 1], "text-end");
    assert_eq!(kinds[at + 1], "step-finish");
    let result = finish(&out);
    assert_eq!(result.text, "workingDONE");
    let last = result.completion_check.expect("completion check");
    assert!(last.passed);
    assert_eq!(last.results[0].reason, "has DONE");
}

#[tokio::test]
async fn scorers_share_one_deadline_and_run_in_order_when_not_parallel() {
    use pb::completion_scorer::Kind;
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    mock.push(MockReply::Text("first".into()));
    mock.push(MockReply::Text("second".into()));
    let mut request = ask("worker", "go");
    request.max_steps = Some(2);
    request.is_task_complete = Some(pb::IsTaskComplete {
        scorers: vec![
            scorer("slow", "Slow", Kind::Hook(pb::HookScorer {})),
            scorer("never", "Never", Kind::Hook(pb::HookScorer {})),
        ],
        parallel: Some(false),
        timeout_ms: Some(150),
        ..Default::default()
    });
    // The hook never answers: the completion deadline (150 ms) passes before the hook's own.
    let out = generate_hooked(
        &server,
        request,
        hook_options(&[pb::HookKind::IsTaskComplete], Some(5000), false),
        Box::new(|_| vec![]),
    )
    .await;
    let found = checks(&out.chunks);
    assert_eq!(found.len(), 2);
    // In order, stopping at the first failure (ALL): only the first scorer ran.
    assert_eq!(found[0].results.len(), 1);
    assert!(found[0].timed_out && found[0].results[0].timed_out);
    assert_eq!(
        found[0].results[0].reason,
        "Scorer did not finish before the completion timeout"
    );
    let feedback = messages(&mock, 1)
        .last()
        .and_then(|m| m["content"].as_str().map(str::to_owned))
        .unwrap_or_default();
    assert!(
        feedback.contains("⚠️ Scoring timed out\n\n**Slow** (slow)"),
        "{feedback}"
    );
    assert!(found[1].max_iteration_reached);
    assert_eq!(finish(&out).finish_reason(), pb::FinishReason::Stop);
}

#[tokio::test]
async fn built_in_scorers_need_no_client() {
    use pb::completion_scorer::Kind;
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = server(&mock, dir.path(), "").await;
    let mut agents = support::agents_client(&server).await;
    // json_schema: prose fails, JSON passes.
    mock.push(MockReply::Text("Here it is".into()));
    mock.push(MockReply::Text(r#"{"answer": 42}"#.into()));
    let schema = json!({"type": "object", "required": ["answer"]});
    let mut request = ask("worker", "answer as JSON");
    request.is_task_complete = Some(completion(vec![scorer(
        "json",
        "",
        Kind::JsonSchema(pb::JsonSchemaScorer {
            schema: schema.as_object().map(to_proto_struct),
        }),
    )]));
    let chunks = support::generate(&mut agents, request).await;
    let found = checks(&chunks);
    assert_eq!(found.len(), 2);
    assert!(
        found[0].results[0]
            .reason
            .starts_with("The answer is not JSON")
    );
    assert!(found[1].passed);
    // llm_judge on the scripted model: 0 then 1.
    let before = mock.requests().len();
    mock.push(MockReply::Text("draft".into()));
    mock.push(MockReply::Text(
        r#"{"score": 0, "reason": "too short"}"#.into(),
    ));
    mock.push(MockReply::Text("final answer".into()));
    mock.push(MockReply::Text(
        r#"{"score": 1, "reason": "complete"}"#.into(),
    ));
    let mut request = ask("worker", "write it");
    request.is_task_complete = Some(completion(vec![scorer(
        "judge",
        "Judge",
        Kind::LlmJudge(pb::LlmJudgeScorer {
            model: "mock/judge-model".into(),
            rubric: "Says final".into(),
        }),
    )]));
    let chunks = support::generate(&mut agents, request).await;
    let found = checks(&chunks);
    assert_eq!(found[0].results[0].reason, "too short");
    assert!(found[1].passed);
    let judge = &mock.requests()[before + 1];
    assert_eq!(judge["model"], "judge-model");
    let prompt = judge["messages"][1]["content"].to_string();
    assert!(
        prompt.contains("Rubric:") && prompt.contains("Says final") && prompt.contains("draft"),
        "{prompt}"
    );
    // task_list_complete: not complete while the list is empty.
    mock.push(MockReply::Text("nothing to do".into()));
    mock.push(MockReply::Text("still nothing".into()));
    let mut request = ask("worker", "plan");
    request.max_steps = Some(2);
    request.is_task_complete = Some(completion(vec![scorer(
        "tasks",
        "",
        Kind::TaskListComplete(pb::TaskListScorer {}),
    )]));
    let chunks = support::generate(&mut agents, request).await;
    let found = checks(&chunks);
    assert_eq!(found.len(), 2);
    assert!(found[1].max_iteration_reached);
    // A hook scorer without a handler is refused up front, naming the field.
    let mut request = ask("worker", "x");
    request.is_task_complete = Some(completion(vec![scorer(
        "h",
        "",
        Kind::Hook(pb::HookScorer {}),
    )]));
    let err = agents.generate(request).await.expect_err("refused");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    let fields: Vec<String> = err
        .get_details_bad_request()
        .expect("bad request details")
        .field_violations
        .into_iter()
        .map(|v| v.field)
        .collect();
    assert_eq!(fields, ["is_task_complete.scorers.0"]);
}

#[tokio::test]
async fn an_agents_configured_scorers_apply_unless_the_request_brings_its_own() {
    use pb::completion_scorer::Kind;
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let extra = r#"
[[agents]]
id = "finisher"
model = "mock/test-model"
tools = ["tasks"]
[agents.is_task_complete]
[[agents.is_task_complete.scorers]]
id = "tasks-done"
name = "Tasks done"
kind = "task_list_complete"
"#;
    let server = server(&mock, dir.path(), extra).await;
    let mut agents = support::agents_client(&server).await;
    let thread = support::unique("t");
    let mut request = ask("finisher", "plan");
    request.max_steps = Some(4);
    request.memory = Some(support::memory(&thread, "r", None));
    // Step 1 answers with nothing done: not complete (the list is empty); step 2 writes a
    // completed task; step 3 answers: complete.
    mock.push(MockReply::Text("thinking".into()));
    mock.push(tool_call(
        "task_write",
        json!({"tasks": [{"content": "Plan", "status": "completed", "activeForm": "Planning"}]}),
    ));
    mock.push(MockReply::Text("planned".into()));
    let chunks = support::generate(&mut agents, request).await;
    let found = checks(&chunks);
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].results[0].scorer_name, "Tasks done");
    assert!(!found[0].passed && found[1].passed);
    assert!(
        found[1].results[0]
            .reason
            .contains("All tasks completed: YES"),
        "{}",
        found[1].results[0].reason
    );
    // The request's own scorers replace the agent's.
    mock.push(MockReply::Text("{}".into()));
    let mut request = ask("finisher", "json please");
    request.is_task_complete = Some(completion(vec![scorer(
        "json",
        "",
        Kind::JsonSchema(pb::JsonSchemaScorer {
            schema: json!({"type": "object"}).as_object().map(to_proto_struct),
        }),
    )]));
    let chunks = support::generate(&mut agents, request).await;
    let found = checks(&chunks);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].results[0].scorer_id, "json");
    assert!(found[0].passed);
}
