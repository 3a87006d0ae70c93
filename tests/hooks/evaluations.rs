//! Scorers on a real server (the reference's `scorers`, sampling and `returnScorerData`): a
//! custom scorer answered through the SCORE hook, rule-based and judged built-ins, sampling at
//! ratio 0 and 1 by the reference's rule, scoring that does not delay `finish`, scores listed by
//! run, thread and agent a page at a time, and the checks a request's scorers pass.

use agentd::pb::score_service_client::ScoreServiceClient;
use tonic::transport::Channel;

use super::*;

/// Agents with scorers: a hook scorer sampled at 1, one never sampled, and a rule-based one.
const SCORED: &str = r#"
[[agents]]
id = "scored"
instructions = "You answer briefly."
model = "mock/test-model"
[agents.scorers.fixed]
scorer = "hook"
sampling = { type = "ratio", rate = 1 }
[agents.scorers.never]
scorer = "hook"
sampling = { type = "ratio", rate = 0 }

[[agents]]
id = "plain"
instructions = "You answer briefly."
model = "mock/test-model"
"#;

async fn scores_client(server: &RunningServer) -> ScoreServiceClient<Channel> {
    ScoreServiceClient::new(support::channel(server).await)
}

fn by_run(run: &str) -> pb::ListScoresRequest {
    pb::ListScoresRequest {
        target: Some(pb::list_scores_request::Target::RunId(run.into())),
        ..Default::default()
    }
}

fn by_agent(agent: &str, page_size: i32, page_token: &str) -> pb::ListScoresRequest {
    pb::ListScoresRequest {
        target: Some(pb::list_scores_request::Target::AgentId(agent.into())),
        page_size,
        page_token: page_token.into(),
    }
}

async fn list(server: &RunningServer, request: pb::ListScoresRequest) -> pb::ListScoresResponse {
    scores_client(server)
        .await
        .list_scores(request)
        .await
        .expect("ListScores answers")
        .into_inner()
}

/// The fields an INVALID_ARGUMENT status names.
fn fields(status: &tonic::Status) -> Vec<String> {
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    status
        .get_error_details()
        .bad_request()
        .map(|b| b.field_violations.iter().map(|v| v.field.clone()).collect())
        .unwrap_or_default()
}

/// A client answering every SCORE call with 0.75 and a reason, as the reference's recorded
/// fixed scorer.
fn fixed_score(call: &pb::HookCall) -> Vec<pb::HookAnswer> {
    answer(
        call,
        Answer::Score(pb::ScoreAnswer {
            score: 0.75,
            reason: Some("fixed at 0.75".into()),
        }),
    )
}

/// Runs `request` on GenerateWithHooks, this client answering its SCORE hooks with 0.75.
async fn scored_run(server: &RunningServer, request: pb::GenerateRequest) -> Hooked {
    generate_hooked(
        server,
        request,
        hook_options(&[pb::HookKind::Score], None, false),
        Box::new(fixed_score),
    )
    .await
}

#[tokio::test]
async fn a_hook_scorer_scores_what_the_run_read_and_its_score_is_listed_by_run_thread_and_agent() {
    let mock = MockOpenAi::start().await.expect("mock starts");
    mock.push(MockReply::Text("It is 21 degrees in Paris.".into()));
    let dir = tempfile::tempdir().expect("tempdir");
    let server = server(&mock, dir.path(), SCORED).await;
    let request = pb::GenerateRequest {
        run_id: "run-agent-1".into(),
        memory: Some(support::memory("t-scored", "u-scored", None)),
        ..ask("scored", "What is the weather in Paris?")
    };
    let hooked = scored_run(&server, request).await;
    let result = finish(&hooked);
    assert_eq!(result.text, "It is 21 degrees in Paris.");
    // Without return_scorer_data the result carries nothing of it.
    assert!(result.scoring_data.is_none() && result.scores.is_empty());

    // Only the sampled scorer was called, with what the run read and answered.
    assert_eq!(hooked.calls.len(), 1, "{:?}", hooked.calls);
    let call = &hooked.calls[0];
    assert_eq!(call.kind, pb::HookKind::Score as i32);
    assert_eq!(
        (call.run_id.as_str(), call.thread_id.as_str()),
        ("run-agent-1", "t-scored")
    );
    let Some(Context::Score(context)) = &call.context else {
        panic!("a score context: {call:?}")
    };
    assert_eq!(context.scorer_key, "fixed");
    let data = Value::Object(agentd::json::from_proto_struct(
        context.scoring_data.as_ref().expect("scoring data"),
    ));
    let input = &data["input"];
    assert_eq!(input["inputMessages"][0]["role"], "user");
    assert_eq!(
        input["inputMessages"][0]["content"]["content"],
        "What is the weather in Paris?"
    );
    assert_eq!(input["inputMessages"][0]["content"]["format"], 2.0);
    assert_eq!(
        input["systemMessages"],
        json!([{"role": "system", "content": "You answer briefly."}])
    );
    assert_eq!(input["rememberedMessages"], json!([]));
    let output = data["output"].as_array().expect("output");
    assert_eq!(output.len(), 1);
    assert_eq!(output[0]["role"], "assistant");
    assert_eq!(
        output[0]["content"]["content"],
        "It is 21 degrees in Paris."
    );
    assert_eq!(output[0]["content"]["metadata"]["modelId"], "test-model");

    // A client answering SCORE hooks is waited for, so the score is stored by now.
    let listed = list(&server, by_run("run-agent-1")).await;
    assert_eq!(listed.scores.len(), 1, "{listed:?}");
    assert!(listed.next_page_token.is_empty());
    let score = &listed.scores[0];
    assert_eq!(
        (
            score.scorer_key.as_str(),
            score.scorer_id.as_str(),
            score.score
        ),
        ("fixed", "fixed", 0.75)
    );
    assert_eq!(score.reason.as_deref(), Some("fixed at 0.75"));
    assert_eq!(
        (
            score.agent_id.as_str(),
            score.thread_id.as_str(),
            score.resource_id.as_str()
        ),
        ("scored", "t-scored", "u-scored")
    );
    assert_eq!(score.source, "LIVE");
    assert!(score.created_at.is_some());
    let by_thread = list(
        &server,
        pb::ListScoresRequest {
            target: Some(pb::list_scores_request::Target::Thread(pb::ScoredThread {
                thread_id: "t-scored".into(),
                resource_id: "u-scored".into(),
            })),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(by_thread.scores, listed.scores);
    assert_eq!(
        list(&server, by_agent("scored", 0, "")).await.scores,
        listed.scores
    );
    assert!(list(&server, by_run("another-run")).await.scores.is_empty());
}

/// A request scorer of the SCORE hook, sampled as given.
fn hook_scorer(key: &str, sampling: Option<pb::ScorerSampling>) -> pb::Scorer {
    pb::Scorer {
        key: key.into(),
        scorer: "hook".into(),
        options: None,
        sampling,
    }
}

fn ratio(rate: f64) -> Option<pb::ScorerSampling> {
    Some(pb::ScorerSampling {
        r#type: pb::SamplingType::Ratio as i32,
        rate,
    })
}

#[tokio::test]
async fn sampling_follows_the_reference_at_ratio_zero_half_and_one() {
    let recording: Value =
        serde_json::from_str(include_str!("../reference/scorers.json")).expect("recording");
    let mock = MockOpenAi::start().await.expect("mock starts");
    let dir = tempfile::tempdir().expect("tempdir");
    let server = server(&mock, dir.path(), SCORED).await;
    // The reference's rateHalf runs: run ids whose hash falls below 0.5 are scored.
    for run in recording["agent"]["rateHalf"]["runs"]
        .as_array()
        .expect("runs")
    {
        let run_id = run["runId"].as_str().expect("run id");
        mock.push(MockReply::Text("Hello.".into()));
        let request = pb::GenerateRequest {
            run_id: run_id.into(),
            scorers: Some(pb::Scorers {
                scorers: vec![
                    hook_scorer("half", ratio(0.5)),
                    hook_scorer("none", ratio(0.0)),
                    hook_scorer("all", ratio(1.0)),
                ],
            }),
            return_scorer_data: true,
            ..ask("plain", "Hi")
        };
        let hooked = scored_run(&server, request).await;
        let called: Vec<String> = hooked
            .calls
            .iter()
            .filter_map(|c| match &c.context {
                Some(Context::Score(s)) => Some(s.scorer_key.clone()),
                _ => None,
            })
            .collect();
        let scored = run["scored"].as_bool().expect("scored");
        let expected: Vec<&str> = if scored {
            vec!["half", "all"]
        } else {
            vec!["all"]
        };
        let mut called_sorted = called.clone();
        called_sorted.sort();
        let mut expected_sorted: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
        expected_sorted.sort();
        assert_eq!(called_sorted, expected_sorted, "{run_id}");
        // return_scorer_data: the scores are on the result, in scorer order, and stored.
        let result = finish(&hooked);
        let keys: Vec<&str> = result
            .scores
            .iter()
            .map(|s| s.scorer_key.as_str())
            .collect();
        assert_eq!(keys, expected, "{run_id}");
        let data = result.scoring_data.expect("scoring data");
        let data = Value::Object(agentd::json::from_proto_struct(&data));
        assert_eq!(data["output"][0]["content"]["content"], "Hello.");
        assert_eq!(
            data["input"]["inputMessages"][0]["content"]["content"],
            "Hi"
        );
        let listed = list(&server, by_run(run_id)).await;
        assert_eq!(listed.scores, result.scores, "{run_id}");
    }
}

#[tokio::test]
async fn scores_are_paged_and_return_scorer_data_alone_returns_what_scorers_would_read() {
    let mock = MockOpenAi::start().await.expect("mock starts");
    let dir = tempfile::tempdir().expect("tempdir");
    let server = server(&mock, dir.path(), SCORED).await;
    for i in 0..5 {
        mock.push(MockReply::Text(format!("Answer {i}.")));
        let request = pb::GenerateRequest {
            run_id: format!("paged-{i}"),
            ..ask("scored", "Hi")
        };
        scored_run(&server, request).await;
    }
    let first = list(&server, by_agent("scored", 2, "")).await;
    let runs = |r: &pb::ListScoresResponse| -> Vec<String> {
        r.scores.iter().map(|s| s.run_id.clone()).collect()
    };
    assert_eq!(runs(&first), ["paged-0", "paged-1"]);
    let second = list(&server, by_agent("scored", 2, &first.next_page_token)).await;
    assert_eq!(runs(&second), ["paged-2", "paged-3"]);
    let third = list(&server, by_agent("scored", 2, &second.next_page_token)).await;
    assert_eq!(runs(&third), ["paged-4"]);
    assert!(third.next_page_token.is_empty());

    // A page token continues only its own listing; sizes and targets are checked.
    let mut client = scores_client(&server).await;
    let wrong = client
        .list_scores(pb::ListScoresRequest {
            page_token: first.next_page_token.clone(),
            ..by_run("paged-0")
        })
        .await
        .expect_err("another listing's token");
    assert_eq!(fields(&wrong), ["page_token"]);
    let status = client
        .list_scores(pb::ListScoresRequest {
            page_size: 101,
            ..Default::default()
        })
        .await
        .expect_err("no target, page too large");
    assert_eq!(fields(&status), ["target", "page_size"]);
    let status = client
        .list_scores(pb::ListScoresRequest {
            target: Some(pb::list_scores_request::Target::Thread(
                pb::ScoredThread::default(),
            )),
            ..Default::default()
        })
        .await
        .expect_err("empty thread ids");
    assert_eq!(fields(&status), ["thread.thread_id", "thread.resource_id"]);

    // No scorers, but return_scorer_data: the data is returned all the same (the reference's
    // standalone agent), and nothing is stored.
    mock.push(MockReply::Text("Hello.".into()));
    let mut agents = support::agents_client(&server).await;
    let chunks = support::generate(
        &mut agents,
        pb::GenerateRequest {
            run_id: "data-only".into(),
            return_scorer_data: true,
            ..ask("plain", "Hi")
        },
    )
    .await;
    let result = support::finish(&chunks);
    let data = Value::Object(agentd::json::from_proto_struct(
        result.scoring_data.as_ref().expect("scoring data"),
    ));
    assert_eq!(data["output"][0]["content"]["content"], "Hello.");
    assert!(result.scores.is_empty());
    assert!(list(&server, by_run("data-only")).await.scores.is_empty());
}

#[tokio::test]
async fn a_request_s_scorers_are_checked_naming_their_field() {
    let mock = MockOpenAi::start().await.expect("mock starts");
    let dir = tempfile::tempdir().expect("tempdir");
    let server = server(&mock, dir.path(), SCORED).await;
    let mut agents = support::agents_client(&server).await;
    let judged = |key: &str, options: Value| pb::Scorer {
        key: key.into(),
        scorer: "answer-relevancy".into(),
        options: options.as_object().map(to_proto_struct),
        sampling: None,
    };
    let status = agents
        .generate(pb::GenerateRequest {
            scorers: Some(pb::Scorers {
                scorers: vec![
                    pb::Scorer {
                        key: "a".into(),
                        scorer: "nonsense".into(),
                        ..Default::default()
                    },
                    judged("b", json!({})),
                    judged("c", json!({"model": "nowhere/judge"})),
                    pb::Scorer {
                        key: "d".into(),
                        ..Default::default()
                    },
                    hook_scorer("e", ratio(1.5)),
                    hook_scorer("e", None),
                ],
            }),
            ..ask("scored", "Hi")
        })
        .await
        .expect_err("bad scorers");
    assert_eq!(
        fields(&status),
        [
            "scorers.scorers.0.scorer",
            "scorers.scorers.1.options.model",
            "scorers.scorers.3.key",
            "scorers.scorers.4.sampling.rate",
            "scorers.scorers.5.key",
        ]
    );
    // Judges name configured providers; hook scorers need a SCORE handler.
    let status = agents
        .generate(pb::GenerateRequest {
            scorers: Some(pb::Scorers {
                scorers: vec![
                    judged("c", json!({"model": "nowhere/judge"})),
                    hook_scorer("h", None),
                    pb::Scorer {
                        key: "fixed".into(),
                        ..Default::default()
                    },
                ],
            }),
            ..ask("scored", "Hi")
        })
        .await
        .expect_err("no provider, no handler");
    assert_eq!(
        fields(&status),
        [
            "scorers.scorers.0.options.model",
            "scorers.scorers.1.scorer",
            "scorers.scorers.2.scorer",
        ]
    );
    assert!(mock.requests().is_empty(), "nothing ran");
}

/// The recorded texts of a judged case's calls: `(system, user)` with the system message's
/// `<instructions>` filled in and the user message's text parts joined.
fn recorded_calls(scorer: &Value, case: &Value) -> Vec<(String, String)> {
    let instructions = scorer["instructions"].as_str().expect("instructions");
    case["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|call| {
            let prompt = call["options"]["prompt"].as_array().expect("prompt");
            let system = match prompt[0]["content"].as_str() {
                Some("<instructions>") => instructions.to_owned(),
                other => other.unwrap_or_default().to_owned(),
            };
            let user: String = prompt[1]["content"]
                .as_array()
                .expect("user parts")
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect();
            (system, user)
        })
        .collect()
}

#[tokio::test]
async fn a_judged_scorer_sends_the_reference_s_prompts_to_its_judge_and_stores_its_score() {
    let recording: Value =
        serde_json::from_str(include_str!("../reference/scorers.json")).expect("recording");
    let scorer = &recording["judged"]["answerRelevancy"];
    let case = &scorer["cases"][0];
    assert_eq!(case["name"], "one relevant and one irrelevant statement");
    let mock = MockOpenAi::start().await.expect("mock starts");
    // The agent's answer, then the judge's three: statements, verdicts, reason.
    mock.push(MockReply::Text(
        "Paris is the capital of France. I like cheese.".into(),
    ));
    for answer in case["answers"].as_array().expect("answers") {
        let text = match answer.get("json") {
            Some(json) => json.to_string(),
            None => answer["text"].as_str().expect("text").to_owned(),
        };
        mock.push(MockReply::Text(text));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // A judge without native structured output, as the recording's: the schema follows the
    // step's prompt in the user message.
    let judge = format!(
        "[[providers]]\nname = \"judge\"\nbase_url = \"{}\"\nmax_retries = 0\nstructured_output = false\n",
        mock.base_url()
    );
    let server = server(&mock, dir.path(), &format!("{SCORED}{judge}")).await;
    let mut agents = support::agents_client(&server).await;
    let relevancy = pb::Scorer {
        key: "relevancy".into(),
        scorer: "answer-relevancy".into(),
        options: json!({"model": "judge/judge"})
            .as_object()
            .map(to_proto_struct),
        sampling: None,
    };
    let chunks = support::generate(
        &mut agents,
        pb::GenerateRequest {
            run_id: "judged-1".into(),
            scorers: Some(pb::Scorers {
                scorers: vec![relevancy],
            }),
            return_scorer_data: true,
            ..ask("plain", "What is the capital of France?")
        },
    )
    .await;
    let result = support::finish(&chunks);
    assert_eq!(
        result.text,
        "Paris is the capital of France. I like cheese."
    );

    let requests = mock.requests();
    assert_eq!(requests.len(), 4, "the agent's call and three judge calls");
    let sent: Vec<(String, String)> = (1..4)
        .map(|i| {
            let p = prompt(&mock, i);
            assert_eq!(p.len(), 2, "system and user: {p:?}");
            assert_eq!(requests[i]["model"], "judge");
            (p[0].1.clone(), p[1].1.clone())
        })
        .collect();
    assert_eq!(sent, recorded_calls(scorer, case));

    let expected = &case["result"];
    let [score] = result.scores.as_slice() else {
        panic!("one score: {:?}", result.scores)
    };
    assert_eq!(score.score, expected["score"].as_f64().expect("score"));
    assert_eq!(score.reason.as_deref(), expected["reason"].as_str());
    assert_eq!(
        (score.scorer_id.as_str(), score.scorer_name.as_str()),
        ("answer-relevancy-scorer", "Answer Relevancy Scorer")
    );
    let step = |v: &Option<prost_types::Value>| v.as_ref().map(from_proto_value);
    assert_eq!(
        step(&score.preprocess_step_result).as_ref(),
        Some(&expected["preprocessStepResult"])
    );
    assert_eq!(
        step(&score.analyze_step_result).as_ref(),
        Some(&expected["analyzeStepResult"])
    );
    assert_eq!(
        score.prompts.get("preprocessPrompt"),
        Some(
            &sent[0]
                .1
                .split("Return your response as JSON")
                .next()
                .unwrap_or_default()
                .to_owned()
        )
    );
    assert_eq!(
        list(&server, by_run("judged-1")).await.scores,
        result.scores
    );
}

#[tokio::test]
async fn scoring_does_not_delay_finish_and_a_webhook_scorer_s_score_is_stored_after_it() {
    use axum::Json;
    use axum::routing::post;
    // The webhook answers only once the test lets it: `finish` must come before that.
    let (release, released) = tokio::sync::watch::channel(false);
    let seen = Arc::new(Mutex::new(Vec::<Value>::new()));
    let log = seen.clone();
    let app = axum::Router::new().route(
        "/score",
        post(move |Json(body): Json<Value>| {
            log.lock().expect("log").push(body.clone());
            let mut released = released.clone();
            async move {
                let _ = released.wait_for(|r| *r).await;
                Json(json!({"id": body["id"], "score": {"score": 0.25, "reason": "too long"}}))
            }
        }),
    );
    let (url, _task) = support::serve_http(app).await;
    let mock = MockOpenAi::start().await.expect("mock starts");
    mock.push(MockReply::Text("Hello.".into()));
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = format!(
        r#"
[[agents]]
id = "reviewed"
instructions = "You answer briefly."
model = "mock/test-model"
[agents.scorers.length]
scorer = "hook"
max_words = 3
[[agents.webhooks]]
url = "{url}/score"
kinds = ["score"]
timeout_ms = 20000
"#
    );
    let server = server(&mock, dir.path(), &extra).await;
    let mut agents = support::agents_client(&server).await;
    let chunks = support::generate(
        &mut agents,
        pb::GenerateRequest {
            run_id: "reviewed-1".into(),
            ..ask("reviewed", "Hi")
        },
    )
    .await;
    let result = support::finish(&chunks);
    assert_eq!(result.text, "Hello.");
    assert!(result.scoring_data.is_none() && result.scores.is_empty());
    assert!(
        support::eventually(Duration::from_secs(10), || async {
            !seen.lock().expect("log").is_empty()
        })
        .await,
        "the webhook is called"
    );
    // The run finished while its scorer was still waiting.
    assert!(list(&server, by_run("reviewed-1")).await.scores.is_empty());
    let call = seen.lock().expect("log")[0].clone();
    assert_eq!(call["kind"], "HOOK_KIND_SCORE");
    assert_eq!(call["score"]["scorerKey"], "length");
    assert_eq!(call["score"]["options"], json!({"max_words": 3.0}));
    assert_eq!(
        call["score"]["scoringData"]["output"][0]["content"]["content"],
        "Hello."
    );
    release.send(true).expect("released");
    let stored = support::eventually(Duration::from_secs(10), || async {
        !list(&server, by_run("reviewed-1")).await.scores.is_empty()
    })
    .await;
    assert!(stored, "the score is stored after the webhook answers");
    let listed = list(&server, by_run("reviewed-1")).await;
    assert_eq!(listed.scores[0].score, 0.25);
    assert_eq!(listed.scores[0].reason.as_deref(), Some("too long"));
}

/// `v` with the recording's `{"Set": [...]}` (a JS Set) written as the list agentd writes.
fn sets_as_lists(v: &Value) -> Value {
    match v {
        Value::Object(map) => match map.get("Set") {
            Some(list) if map.len() == 1 => list.clone(),
            _ => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), sets_as_lists(v)))
                    .collect(),
            ),
        },
        Value::Array(items) => Value::Array(items.iter().map(sets_as_lists).collect()),
        other => other.clone(),
    }
}

#[tokio::test]
async fn rule_based_scorers_score_a_run_as_the_reference_scores_the_same_messages() {
    let recording: Value =
        serde_json::from_str(include_str!("../reference/scorers.json")).expect("recording");
    let recorded = |scorer: &str| {
        recording["code"][scorer]["variants"][0]["cases"]
            .as_array()
            .expect("cases")
            .iter()
            .find(|c| c["case"] == "disjoint sentences")
            .expect("case")["result"]
            .clone()
    };
    let mock = MockOpenAi::start().await.expect("mock starts");
    mock.push(MockReply::Text("Quantum computers use qubits.".into()));
    let dir = tempfile::tempdir().expect("tempdir");
    let server = server(&mock, dir.path(), SCORED).await;
    let scorer = |key: &str, name: &str| pb::Scorer {
        key: key.into(),
        scorer: name.into(),
        ..Default::default()
    };
    let mut agents = support::agents_client(&server).await;
    let chunks = support::generate(
        &mut agents,
        pb::GenerateRequest {
            scorers: Some(pb::Scorers {
                scorers: vec![
                    scorer("similarity", "content-similarity"),
                    scorer("difference", "textual-difference"),
                    scorer("keywords", "keyword-coverage"),
                    scorer("complete", "completeness"),
                ],
            }),
            return_scorer_data: true,
            ..ask("plain", "Apples are red and sweet.")
        },
    )
    .await;
    let result = support::finish(&chunks);
    let by_key = |key: &str| {
        result
            .scores
            .iter()
            .find(|s| s.scorer_key == key)
            .unwrap_or_else(|| panic!("a {key} score: {:?}", result.scores))
    };
    for (key, name) in [
        ("similarity", "contentSimilarity"),
        ("difference", "textualDifference"),
        ("keywords", "keywordCoverage"),
        ("complete", "completeness"),
    ] {
        let expected = recorded(name);
        let score = by_key(key);
        assert_eq!(
            score.score,
            expected["score"].as_f64().expect("score"),
            "{key}"
        );
        let preprocess = score.preprocess_step_result.as_ref().map(from_proto_value);
        assert_eq!(
            preprocess,
            Some(sets_as_lists(&expected["preprocessStepResult"])),
            "{key}"
        );
    }
    assert_eq!(by_key("similarity").scorer_id, "content-similarity-scorer");

    // Options are checked by the scorer itself, naming the option.
    let status = agents
        .generate(pb::GenerateRequest {
            scorers: Some(pb::Scorers {
                scorers: vec![pb::Scorer {
                    options: json!({"ignore_case": "yes"})
                        .as_object()
                        .map(to_proto_struct),
                    ..scorer("similarity", "content-similarity")
                }],
            }),
            ..ask("plain", "Hi")
        })
        .await
        .expect_err("a bad option");
    let named = fields(&status);
    assert_eq!(named.len(), 1, "{named:?}");
    assert!(
        named[0].starts_with("scorers.scorers.0.options"),
        "{named:?}"
    );
}
