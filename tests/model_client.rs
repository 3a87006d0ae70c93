//! The OpenAI-compatible client against the scripted mock server, over real HTTP on 127.0.0.1.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentd::model::{
    ChatMessage, ContentPart, FinishReason, MockOpenAi, MockReply, MockRich, MockUsageDetails,
    ModelError, ModelEvent, ModelProvider, ModelRequest, ModelSettings, ModelStream,
    OpenAiProvider, ProviderConfig, ResponseFormat, ToolCall, ToolChoice, ToolDefinition, Usage,
};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Upper bound for anything a test waits for, so a bug fails instead of hanging.
const TEST_TIMEOUT: Duration = Duration::from_secs(20);

fn config(mock: &MockOpenAi) -> ProviderConfig {
    ProviderConfig::new("mock", mock.base_url())
}

fn provider(mock: &MockOpenAi) -> OpenAiProvider {
    OpenAiProvider::new(config(mock)).unwrap()
}

fn request(prompt: &str) -> ModelRequest {
    ModelRequest {
        model: "mock-model".into(),
        messages: vec![ChatMessage::user(prompt)],
        ..ModelRequest::default()
    }
}

/// Drains a stream: the events, and the error that ended it, if any.
async fn drain(mut stream: ModelStream) -> (Vec<ModelEvent>, Option<ModelError>) {
    tokio::time::timeout(TEST_TIMEOUT, async move {
        let mut events = Vec::new();
        while let Some(item) = stream.next().await {
            match item {
                Ok(event) => events.push(event),
                Err(error) => {
                    assert!(stream.next().await.is_none(), "items after an error");
                    return (events, Some(error));
                }
            }
        }
        (events, None)
    })
    .await
    .expect("stream did not end in time")
}

/// Runs one request to completion and expects success.
async fn run(provider: &OpenAiProvider, request: ModelRequest) -> Vec<ModelEvent> {
    let stream = provider
        .stream(request, CancellationToken::new())
        .await
        .unwrap();
    let (events, error) = drain(stream).await;
    assert_eq!(error, None, "events so far: {events:?}");
    events
}

fn text(events: &[ModelEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

fn finish(events: &[ModelEvent]) -> (FinishReason, Usage) {
    let finishes: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::Finish { reason, usage, .. } => Some((*reason, *usage)),
            _ => None,
        })
        .collect();
    assert_eq!(finishes.len(), 1, "exactly one finish: {events:?}");
    assert!(matches!(events.last(), Some(ModelEvent::Finish { .. })));
    finishes[0]
}

fn tool_ends(events: &[ModelEvent]) -> Vec<(u32, String, String, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ToolCallEnd {
                index,
                id,
                name,
                arguments,
            } => Some((*index, id.clone(), name.clone(), arguments.clone())),
            _ => None,
        })
        .collect()
}

fn warnings(events: &[ModelEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::Warning(w) => Some(w.clone()),
            _ => None,
        })
        .collect()
}

fn metadata_headers(events: &[ModelEvent]) -> BTreeMap<String, String> {
    match events.first() {
        Some(ModelEvent::ResponseMetadata { headers, .. }) => headers.clone(),
        _ => panic!("metadata first: {events:?}"),
    }
}

fn provider_metadata(events: &[ModelEvent]) -> Option<Value> {
    match events.last() {
        Some(ModelEvent::Finish {
            provider_metadata, ..
        }) => provider_metadata.clone(),
        _ => panic!("finish last: {events:?}"),
    }
}

fn object(value: Value) -> serde_json::Map<String, Value> {
    value.as_object().cloned().unwrap()
}

/// A streamed chunk holding `delta` and `finish_reason`, as OpenAI sends them.
fn chunk(delta: Value, finish_reason: Value) -> String {
    json!({
        "id": "chatcmpl-raw", "object": "chat.completion.chunk", "created": 1, "model": "raw",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    })
    .to_string()
}

async fn wait_for_disconnect(mock: &MockOpenAi, within: Duration) -> Duration {
    let start = Instant::now();
    while mock.disconnects() == 0 {
        assert!(
            start.elapsed() < within,
            "mock saw no disconnect within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    start.elapsed()
}

#[tokio::test]
async fn text_deltas_arrive_incrementally() {
    let mock = MockOpenAi::start().await.unwrap();
    mock.push(MockReply::Slow {
        text: "one two three four".into(),
        delay_per_delta: Duration::from_millis(100),
    });
    let mut stream = provider(&mock)
        .stream(request("count"), CancellationToken::new())
        .await
        .unwrap();
    let mut deltas = Vec::new();
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        let event = event.unwrap();
        if let ModelEvent::TextDelta(t) = &event {
            deltas.push((Instant::now(), t.clone()));
        }
        events.push(event);
    }
    assert!(matches!(events[0], ModelEvent::ResponseMetadata { .. }));
    let pieces: Vec<&str> = deltas.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(pieces, ["one ", "two ", "three ", "four"]);
    // Loose: the first delta was handed over well before the last one was even sent.
    let spread = deltas[3].0 - deltas[0].0;
    assert!(spread >= Duration::from_millis(200), "spread {spread:?}");
    assert_eq!(finish(&events).0, FinishReason::Stop);
    mock.shutdown().await;
}

#[tokio::test]
async fn text_reply_reports_metadata_and_usage() {
    let mock = MockOpenAi::start().await.unwrap();
    mock.push(MockReply::Text("Hello brave new world".into()));
    let mut req = request("hi");
    req.messages.insert(0, ChatMessage::system("be brief"));
    req.messages
        .insert(1, ChatMessage::assistant("earlier answer"));
    let events = run(&provider(&mock), req).await;

    assert_eq!(text(&events), "Hello brave new world");
    let ModelEvent::ResponseMetadata {
        id, model, created, ..
    } = &events[0]
    else {
        panic!("metadata first: {events:?}");
    };
    assert_eq!(id.as_deref(), Some("chatcmpl-mock-1"));
    assert_eq!(model.as_deref(), Some("mock-model"));
    assert_eq!(*created, Some(1_700_000_000));
    let (reason, usage) = finish(&events);
    assert_eq!(reason, FinishReason::Stop);
    // Mock: input = 10 per message, output = one per delta.
    assert_eq!(
        usage,
        Usage {
            input_tokens: 30,
            output_tokens: 4,
            total_tokens: 34,
            ..Usage::default()
        }
    );
    mock.shutdown().await;
}

#[tokio::test]
async fn empty_script_echoes_last_user_message() {
    let mock = MockOpenAi::start().await.unwrap();
    let provider = provider(&mock);
    for prompt in ["hi there", "again"] {
        let events = run(&provider, request(prompt)).await;
        assert_eq!(text(&events), format!("echo: {prompt}"));
    }
    assert_eq!(mock.requests().len(), 2);
    mock.shutdown().await;
}

#[tokio::test]
async fn missing_usage_counts_as_zero() {
    let mock = MockOpenAi::start().await.unwrap();
    let mut cfg = config(&mock);
    cfg.include_usage = false;
    let provider = OpenAiProvider::new(cfg).unwrap();
    let events = run(&provider, request("hi")).await;
    assert_eq!(finish(&events), (FinishReason::Stop, Usage::default()));
    assert!(mock.requests()[0].get("stream_options").is_none());

    // An explicit `"usage": null` everywhere is the same as none.
    mock.push(MockReply::Raw(vec![
        json!({"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "stop"}], "usage": null}).to_string(),
        "[DONE]".into(),
    ]));
    let events = run(&provider, request("hi")).await;
    assert_eq!(finish(&events), (FinishReason::Stop, Usage::default()));
    mock.shutdown().await;
}

#[tokio::test]
async fn usage_details_and_reasoning_are_parsed() {
    let mock = MockOpenAi::start().await.unwrap();
    mock.push(MockReply::Raw(vec![
        chunk(
            json!({"role": "assistant", "reasoning_content": "thinking…"}),
            Value::Null,
        ),
        chunk(json!({"content": "answer"}), Value::Null),
        chunk(json!({}), json!("stop")),
        // The usage-only final chunk: empty choices.
        json!({
            "id": "chatcmpl-raw", "choices": [],
            "usage": {
                "prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
                "prompt_tokens_details": {"cached_tokens": 64},
                "completion_tokens_details": {"reasoning_tokens": 12},
            },
        })
        .to_string(),
        "[DONE]".into(),
    ]));
    let events = run(&provider(&mock), request("hi")).await;
    assert!(events.contains(&ModelEvent::ReasoningDelta("thinking…".into())));
    assert_eq!(text(&events), "answer");
    assert_eq!(
        finish(&events),
        (
            FinishReason::Stop,
            Usage {
                input_tokens: 100,
                output_tokens: 20,
                total_tokens: 120,
                reasoning_tokens: 12,
                cached_input_tokens: 64,
            }
        )
    );
    mock.shutdown().await;
}

#[tokio::test]
async fn parallel_tool_calls_with_fragmented_arguments() {
    let mock = MockOpenAi::start().await.unwrap();
    let weather = json!({"city": "Paris", "unit": "celsius"});
    let time = json!({"tz": "Europe/Paris"});
    mock.push(MockReply::ToolCalls(vec![
        ("get_weather".into(), weather.clone()),
        ("get_time".into(), time.clone()),
    ]));
    let events = run(&provider(&mock), request("weather and time?")).await;

    let starts: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ToolCallStart { index, id, name } => {
                Some((*index, id.as_str(), name.as_str()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        starts,
        [(0, "call_1_0", "get_weather"), (1, "call_1_1", "get_time")]
    );

    // Fragments arrive interleaved; each call's deltas still add up to its arguments.
    let mut streamed: BTreeMap<u32, String> = BTreeMap::new();
    let mut delta_count = 0;
    for event in &events {
        if let ModelEvent::ToolCallDelta {
            index,
            id,
            args_delta,
        } = event
        {
            assert_eq!(id, &format!("call_1_{index}"));
            streamed.entry(*index).or_default().push_str(args_delta);
            delta_count += 1;
        }
    }
    assert_eq!(delta_count, 6);
    assert_eq!(streamed[&0], weather.to_string());
    assert_eq!(streamed[&1], time.to_string());

    let ends = tool_ends(&events);
    assert_eq!(
        ends,
        [
            (
                0,
                "call_1_0".into(),
                "get_weather".into(),
                weather.to_string()
            ),
            (1, "call_1_1".into(), "get_time".into(), time.to_string()),
        ]
    );
    // Ends come after every delta, right before the finish.
    let first_end = events
        .iter()
        .position(|e| matches!(e, ModelEvent::ToolCallEnd { .. }))
        .unwrap();
    assert!(events[first_end..].iter().all(|e| matches!(
        e,
        ModelEvent::ToolCallEnd { .. } | ModelEvent::Finish { .. }
    )));
    let (reason, usage) = finish(&events);
    assert_eq!(reason, FinishReason::ToolCalls);
    assert_eq!(usage.output_tokens, 6);
    mock.shutdown().await;
}

#[tokio::test]
async fn tool_call_arguments_split_across_many_chunks() {
    let mock = MockOpenAi::start().await.unwrap();
    let mut payloads = vec![chunk(
        json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "search", "arguments": ""}}]}),
        Value::Null,
    )];
    for piece in ["{\"q", "uery\"", ": \"ru", "st\"", "}"] {
        payloads.push(chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
            Value::Null,
        ));
    }
    // A second call with no arguments at all, and no finish_reason anywhere.
    payloads.push(chunk(
        json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "now"}}]}),
        Value::Null,
    ));
    payloads.push("[DONE]".into());
    mock.push(MockReply::Raw(payloads));
    let events = run(&provider(&mock), request("find")).await;
    assert_eq!(
        tool_ends(&events),
        [
            (
                0,
                "call_a".into(),
                "search".into(),
                "{\"query\": \"rust\"}".into()
            ),
            (1, "call_b".into(), "now".into(), "{}".into()),
        ]
    );
    assert_eq!(finish(&events).0, FinishReason::ToolCalls);
    mock.shutdown().await;
}

#[tokio::test]
async fn finish_reasons_are_mapped() {
    let mock = MockOpenAi::start().await.unwrap();
    let provider = provider(&mock);
    let text_with = |reason: Value| {
        vec![
            chunk(json!({"content": "x"}), Value::Null),
            chunk(json!({}), reason),
            "[DONE]".to_owned(),
        ]
    };
    let cases = [
        (text_with(json!("stop")), FinishReason::Stop),
        (text_with(json!("length")), FinishReason::Length),
        (
            text_with(json!("content_filter")),
            FinishReason::ContentFilter,
        ),
        (text_with(json!("function_call")), FinishReason::ToolCalls),
        (text_with(json!("something_new")), FinishReason::Other),
        (text_with(Value::Null), FinishReason::Stop),
        (text_with(json!("")), FinishReason::Stop),
        // No [DONE] either: the end of the body ends the response.
        (
            vec![chunk(json!({"content": "x"}), Value::Null)],
            FinishReason::Stop,
        ),
        (
            vec![chunk(
                json!({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}]}),
                Value::Null,
            )],
            FinishReason::ToolCalls,
        ),
    ];
    for (payloads, expected) in cases {
        mock.push(MockReply::Raw(payloads.clone()));
        let events = run(&provider, request("x")).await;
        assert_eq!(finish(&events).0, expected, "payloads: {payloads:?}");
    }
    mock.shutdown().await;
}

#[tokio::test]
async fn retries_429_honouring_retry_after() {
    let mock = MockOpenAi::start().await.unwrap();
    mock.push(MockReply::Error {
        status: 429,
        body: r#"{"error":{"message":"slow down"}}"#.into(),
        retry_after: Some(1),
    });
    mock.push(MockReply::Text("finally".into()));
    let start = Instant::now();
    let events = run(&provider(&mock), request("hi")).await;
    assert_eq!(text(&events), "finally");
    assert!(
        start.elapsed() >= Duration::from_millis(900),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(mock.requests().len(), 2);
    assert_eq!(mock.requests()[0], mock.requests()[1]);
    mock.shutdown().await;
}

#[tokio::test]
async fn server_errors_are_retried_up_to_max_retries() {
    let mock = MockOpenAi::start().await.unwrap();
    for _ in 0..3 {
        mock.push(MockReply::Error {
            status: 500,
            body: "upstream exploded".into(),
            retry_after: None,
        });
    }
    mock.push(MockReply::Text("never reached".into()));
    let mut req = request("hi");
    req.settings.max_retries = Some(2);
    let start = Instant::now();
    let error = provider(&mock)
        .stream(req, CancellationToken::new())
        .await
        .err()
        .unwrap();
    assert_eq!(
        error,
        ModelError::Http {
            status: 500,
            body: "upstream exploded".into(),
            retryable: true
        }
    );
    assert!(error.is_retryable());
    assert_eq!(mock.requests().len(), 3);
    // Backoff 200 ms + 400 ms.
    assert!(
        start.elapsed() >= Duration::from_millis(550),
        "{:?}",
        start.elapsed()
    );
    mock.shutdown().await;
}

#[tokio::test]
async fn client_errors_are_not_retried_and_keep_the_body() {
    let mock = MockOpenAi::start().await.unwrap();
    mock.push(MockReply::Error {
        status: 400,
        body: r#"{"error":{"message":"Invalid schema for function 'x'"}}"#.into(),
        retry_after: None,
    });
    mock.push(MockReply::Text("never reached".into()));
    let error = provider(&mock)
        .stream(request("hi"), CancellationToken::new())
        .await
        .err()
        .unwrap();
    let ModelError::Http {
        status,
        body,
        retryable,
    } = &error
    else {
        panic!("unexpected error {error:?}");
    };
    assert_eq!((*status, *retryable), (400, false));
    assert!(body.contains("Invalid schema for function 'x'"));
    assert!(error.to_string().contains("HTTP 400"));
    assert_eq!(mock.requests().len(), 1);
    mock.shutdown().await;
}

#[tokio::test]
async fn long_error_bodies_are_truncated() {
    let mock = MockOpenAi::start().await.unwrap();
    mock.push(MockReply::Error {
        status: 422,
        body: "é".repeat(5000),
        retry_after: None,
    });
    let error = provider(&mock)
        .stream(request("hi"), CancellationToken::new())
        .await
        .err()
        .unwrap();
    let ModelError::Http { body, .. } = error else {
        panic!("unexpected error {error:?}");
    };
    assert!(body.len() <= 2100, "{}", body.len());
    assert!(body.ends_with("(truncated)"));
    mock.shutdown().await;
}

#[tokio::test]
async fn include_raw_emits_every_payload_before_its_events() {
    let mock = MockOpenAi::start().await.unwrap();
    let payloads = [
        chunk(json!({"content": "a"}), Value::Null),
        chunk(json!({"content": "b"}), json!("stop")),
    ];
    mock.push(MockReply::Raw(vec![
        payloads[0].clone(),
        payloads[1].clone(),
        "[DONE]".into(),
    ]));
    let mut req = request("hi");
    req.include_raw = true;
    let events = run(&provider(&mock), req).await;
    let raws: Vec<&Value> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::Raw(v) => Some(v),
            _ => None,
        })
        .collect();
    let expected: Vec<Value> = payloads
        .iter()
        .map(|p| serde_json::from_str(p).unwrap())
        .collect();
    assert_eq!(raws, expected.iter().collect::<Vec<_>>());
    let raw_a = events
        .iter()
        .position(|e| matches!(e, ModelEvent::Raw(_)))
        .unwrap();
    let delta_a = events
        .iter()
        .position(|e| e == &ModelEvent::TextDelta("a".into()))
        .unwrap();
    assert!(raw_a < delta_a);

    // Off by default.
    mock.push(MockReply::Raw(vec![payloads[0].clone()]));
    let events = run(&provider(&mock), request("hi")).await;
    assert!(!events.iter().any(|e| matches!(e, ModelEvent::Raw(_))));
    mock.shutdown().await;
}

#[tokio::test]
async fn extra_body_is_merged_last_and_wins() {
    let mock = MockOpenAi::start().await.unwrap();
    let mut req = request("hi");
    req.settings.temperature = Some(0.1);
    req.extra_body = json!({
        "temperature": 0.9,
        "parallel_tool_calls": false,
        "reasoning_effort": "low",
    })
    .as_object()
    .unwrap()
    .clone();
    run(&provider(&mock), req).await;
    let body = &mock.requests()[0];
    assert_eq!(body["temperature"], json!(0.9));
    assert_eq!(body["parallel_tool_calls"], json!(false));
    assert_eq!(body["reasoning_effort"], json!("low"));
    assert_eq!(body["stream"], json!(true));
    mock.shutdown().await;
}

#[tokio::test]
async fn request_body_serializes_messages_tools_and_settings() {
    let mock = MockOpenAi::start().await.unwrap();
    let schema = json!({"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]});
    let req = ModelRequest {
        model: "gpt-4o-mini".into(),
        messages: vec![
            ChatMessage::system("You are terse."),
            ChatMessage::User {
                content: vec![
                    ContentPart::Text("What is this?".into()),
                    ContentPart::ImageUrl {
                        url: "https://example.com/cat.png".into(),
                        detail: Some("low".into()),
                    },
                    ContentPart::ImageData {
                        data: b"foo".to_vec(),
                        mime_type: "image/png".into(),
                    },
                    ContentPart::File {
                        data: b"foobar".to_vec(),
                        mime_type: "application/pdf".into(),
                        filename: Some("doc.pdf".into()),
                    },
                ],
            },
            ChatMessage::Assistant {
                content: None,
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "lookup".into(),
                    arguments: r#"{"q":"cat"}"#.into(),
                }],
            },
            ChatMessage::tool("call_1", r#"{"result":"a cat"}"#),
        ],
        tools: vec![Arc::new(ToolDefinition::new(
            "lookup".into(),
            "Look things up".into(),
            json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        ))],
        tool_choice: Some(ToolChoice::Tool("lookup".into())),
        settings: ModelSettings {
            temperature: Some(0.5),
            max_output_tokens: Some(256),
            top_p: Some(0.9),
            top_k: Some(40),
            presence_penalty: Some(0.25),
            frequency_penalty: Some(-0.5),
            stop_sequences: vec!["END".into()],
            seed: Some(7),
            max_retries: Some(0),
        },
        response_format: Some(ResponseFormat::JsonSchema {
            name: "answer".into(),
            schema: schema.clone(),
            strict: true,
        }),
        provider_options: Default::default(),
        extra_body: Default::default(),
        include_raw: false,
    };
    let events = run(&provider(&mock), req).await;
    // Every setting is sent (top_k and seed included), so nothing warns.
    assert_eq!(warnings(&events), Vec::<String>::new());
    let body = &mock.requests()[0];
    let expected = json!({
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "low"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,Zm9v"}},
                {"type": "file", "file": {"filename": "doc.pdf", "file_data": "data:application/pdf;base64,Zm9vYmFy"}},
            ]},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"cat\"}"}},
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"result\":\"a cat\"}"},
        ],
        "tools": [{"type": "function", "function": {
            "name": "lookup", "description": "Look things up",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        }}],
        "tool_choice": {"type": "function", "function": {"name": "lookup"}},
        "temperature": 0.5,
        "max_tokens": 256,
        "top_p": 0.9,
        "top_k": 40,
        "presence_penalty": 0.25,
        "frequency_penalty": -0.5,
        "seed": 7,
        "stop": ["END"],
        "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": true}},
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    assert_eq!(body, &expected);
    mock.shutdown().await;
}

#[tokio::test]
async fn tool_choice_variants_and_omissions() {
    let mock = MockOpenAi::start().await.unwrap();
    let provider = provider(&mock);
    let tool = Arc::new(ToolDefinition::new(
        "noop".into(),
        String::new(),
        Value::Null,
    ));
    for choice in [ToolChoice::Auto, ToolChoice::None, ToolChoice::Required] {
        let mut req = request("hi");
        req.tools = vec![tool.clone()];
        req.tool_choice = Some(choice);
        run(&provider, req).await;
    }
    // Without tools, tool_choice is left out (OpenAI rejects it alone); unset settings too.
    let mut req = request("hi");
    req.tool_choice = Some(ToolChoice::Required);
    req.response_format = Some(ResponseFormat::JsonObject);
    run(&provider, req).await;

    let bodies = mock.requests();
    let choices: Vec<&Value> = bodies[..3].iter().map(|b| &b["tool_choice"]).collect();
    assert_eq!(
        choices,
        [&json!("auto"), &json!("none"), &json!("required")]
    );
    assert_eq!(
        bodies[0]["tools"],
        json!([{"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}}])
    );
    let last = bodies[3].as_object().unwrap();
    for absent in [
        "tools",
        "tool_choice",
        "top_k",
        "temperature",
        "max_tokens",
        "stop",
        "seed",
    ] {
        assert!(!last.contains_key(absent), "{absent} sent: {last:?}");
    }
    assert_eq!(last["response_format"], json!({"type": "json_object"}));
    assert_eq!(last["messages"], json!([{"role": "user", "content": "hi"}]));
    mock.shutdown().await;
}

#[tokio::test]
async fn json_schema_degrades_to_json_object_without_structured_output() {
    let mock = MockOpenAi::start().await.unwrap();
    let mut cfg = config(&mock);
    cfg.structured_output = false;
    let provider = OpenAiProvider::new(cfg).unwrap();
    assert!(!provider.supports_structured_output());
    let mut req = request("hi");
    req.response_format = Some(ResponseFormat::JsonSchema {
        name: "x".into(),
        schema: json!({"type": "object"}),
        strict: true,
    });
    run(&provider, req).await;
    assert_eq!(
        mock.requests()[0]["response_format"],
        json!({"type": "json_object"})
    );
    mock.shutdown().await;
}

#[tokio::test]
async fn response_headers_are_captured() {
    let mock = MockOpenAi::start().await.unwrap();
    let events = run(&provider(&mock), request("hi")).await;
    let headers = metadata_headers(&events);
    for (name, value) in [
        ("openai-processing-ms", "1"),
        ("x-ratelimit-limit-requests", "1000"),
        ("x-ratelimit-remaining-requests", "999"),
        ("x-request-id", "req_mock_1"),
        ("content-type", "text/event-stream"),
        ("cache-control", "no-cache"),
    ] {
        assert_eq!(
            headers.get(name).map(String::as_str),
            Some(value),
            "{headers:?}"
        );
    }
    // The streamed body is chunked, and that is the connection's business.
    assert!(!headers.contains_key("transfer-encoding"), "{headers:?}");
    mock.shutdown().await;
}

#[tokio::test]
async fn all_headers_but_hop_by_hop_and_cookies_are_kept() {
    let mock = MockOpenAi::start().await.unwrap();
    mock.push(
        MockRich::text("hi")
            .header("x-request-id", "req_scripted")
            .header("anthropic-ratelimit-requests-remaining", "49")
            .header("X-Gateway-Region", "eu-west")
            .header("set-cookie", "session=secret")
            .header("set-cookie", "other=secret")
            .header("keep-alive", "timeout=5")
            .into(),
    );
    let events = run(&provider(&mock), request("hi")).await;
    let headers = metadata_headers(&events);
    assert_eq!(headers["x-request-id"], "req_scripted");
    assert_eq!(headers["anthropic-ratelimit-requests-remaining"], "49");
    assert_eq!(headers["x-gateway-region"], "eu-west");
    assert_eq!(headers["content-type"], "text/event-stream");
    for absent in ["set-cookie", "keep-alive", "transfer-encoding"] {
        assert!(!headers.contains_key(absent), "{absent}: {headers:?}");
    }
    assert!(!format!("{headers:?}").contains("secret"));
    mock.shutdown().await;
}

#[tokio::test]
async fn cancellation_closes_the_connection() {
    let mock = MockOpenAi::start().await.unwrap();
    // 50 deltas × 200 ms: a 10 s answer.
    mock.push(MockReply::Slow {
        text: vec!["word"; 50].join(" "),
        delay_per_delta: Duration::from_millis(200),
    });
    let cancel = CancellationToken::new();
    let mut stream = provider(&mock)
        .stream(request("long story"), cancel.clone())
        .await
        .unwrap();
    loop {
        let event = tokio::time::timeout(TEST_TIMEOUT, stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if matches!(event, ModelEvent::TextDelta(_)) {
            break;
        }
    }
    cancel.cancel();
    // The connection goes away even though nobody polls the stream.
    let took = wait_for_disconnect(&mock, Duration::from_secs(3)).await;
    assert!(took < Duration::from_secs(2), "disconnect after {took:?}");
    assert_eq!(stream.next().await, Some(Err(ModelError::Cancelled)));
    assert_eq!(stream.next().await, None);
    mock.shutdown().await;
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let mock = MockOpenAi::start().await.unwrap();
    mock.push(MockReply::Slow {
        text: vec!["word"; 50].join(" "),
        delay_per_delta: Duration::from_millis(200),
    });
    let mut stream = provider(&mock)
        .stream(request("long story"), CancellationToken::new())
        .await
        .unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert!(matches!(first, ModelEvent::ResponseMetadata { .. }));
    drop(stream);
    let took = wait_for_disconnect(&mock, Duration::from_secs(3)).await;
    assert!(took < Duration::from_secs(2), "disconnect after {took:?}");
    mock.shutdown().await;
}

#[tokio::test]
async fn cancellation_interrupts_retry_backoff() {
    let mock = MockOpenAi::start().await.unwrap();
    mock.push(MockReply::Error {
        status: 503,
        body: "busy".into(),
        retry_after: Some(10),
    });
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        canceller.cancel();
    });
    let start = Instant::now();
    let result = provider(&mock).stream(request("hi"), cancel).await;
    assert_eq!(result.err(), Some(ModelError::Cancelled));
    assert!(start.elapsed() < Duration::from_secs(5));
    mock.shutdown().await;
}

#[tokio::test]
async fn idle_timeout_between_events() {
    let mock = MockOpenAi::start().await.unwrap();
    mock.push(MockReply::Slow {
        text: "too slow".into(),
        delay_per_delta: Duration::from_secs(5),
    });
    let mut cfg = config(&mock);
    cfg.idle_timeout = Duration::from_millis(300);
    let provider = OpenAiProvider::new(cfg).unwrap();
    let start = Instant::now();
    let stream = provider
        .stream(request("hi"), CancellationToken::new())
        .await
        .unwrap();
    let (events, error) = drain(stream).await;
    assert!(matches!(error, Some(ModelError::Timeout(_))), "{error:?}");
    assert!(text(&events).is_empty());
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    wait_for_disconnect(&mock, Duration::from_secs(3)).await;
    mock.shutdown().await;
}

#[tokio::test]
async fn connection_refused_is_a_connect_error() {
    // Bind then release a port so that nothing listens on it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let mut cfg = ProviderConfig::new("down", format!("http://{addr}/v1/"));
    cfg.max_retries = 1;
    let provider = OpenAiProvider::new(cfg).unwrap();
    let start = Instant::now();
    let error = provider
        .stream(request("hi"), CancellationToken::new())
        .await
        .err()
        .unwrap();
    assert!(matches!(error, ModelError::Connect(_)), "{error:?}");
    assert!(error.is_retryable());
    // One retry after 200 ms.
    assert!(start.elapsed() >= Duration::from_millis(180));
}

#[tokio::test]
async fn api_key_and_custom_headers_are_sent_but_never_shown() {
    let mock = MockOpenAi::start().await.unwrap();
    let var = "AGENTD_MODEL_TEST_API_KEY_PRESENT";
    // SAFETY: this variable is unique to this test; nothing else reads or writes it.
    unsafe { std::env::set_var(var, "sk-secret-123") };
    let mut cfg = config(&mock);
    cfg.api_key_env = Some(var.into());
    cfg.headers.insert("X-Title".into(), "agentd tests".into());
    let provider = OpenAiProvider::new(cfg).unwrap();
    run(&provider, request("hi")).await;
    let headers = &mock.request_headers()[0];
    assert_eq!(headers["authorization"], "Bearer sk-secret-123");
    assert_eq!(headers["x-title"], "agentd tests");
    assert!(headers["accept"].contains("text/event-stream"));
    assert!(!format!("{provider:?}").contains("sk-secret"));

    mock.push(MockReply::Error {
        status: 401,
        body: "bad key".into(),
        retry_after: None,
    });
    let error = provider
        .stream(request("hi"), CancellationToken::new())
        .await
        .err()
        .unwrap();
    assert!(!format!("{error} {error:?}").contains("sk-secret"));
    mock.shutdown().await;
}

#[tokio::test]
async fn missing_api_key_variable_is_a_config_error() {
    let mut cfg = ProviderConfig::new("openai", "https://api.openai.com/v1");
    cfg.api_key_env = Some("AGENTD_MODEL_TEST_API_KEY_NEVER_SET".into());
    let error = OpenAiProvider::new(cfg).err().unwrap();
    assert!(matches!(error, ModelError::Config(_)), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("AGENTD_MODEL_TEST_API_KEY_NEVER_SET")
    );

    let error = OpenAiProvider::new(ProviderConfig::new("bad", "localhost:8000"))
        .err()
        .unwrap();
    assert!(matches!(error, ModelError::Config(_)), "{error:?}");
}

#[tokio::test]
async fn non_streaming_json_answers_are_accepted() {
    let mock = MockOpenAi::start().await.unwrap();
    mock.push(MockReply::ToolCalls(vec![(
        "add".into(),
        json!({"a": 1, "b": 2}),
    )]));
    let mut req = request("add");
    // The mock honours `stream: false` with a plain chat.completion, as some servers always do.
    req.extra_body.insert("stream".into(), json!(false));
    let events = run(&provider(&mock), req).await;
    assert_eq!(
        tool_ends(&events),
        [(
            0,
            "call_1_0".into(),
            "add".into(),
            json!({"a": 1, "b": 2}).to_string()
        )]
    );
    let (reason, usage) = finish(&events);
    assert_eq!(reason, FinishReason::ToolCalls);
    assert_eq!(usage.input_tokens, 10);
    assert_eq!(usage.output_tokens, 3);
    mock.shutdown().await;
}

#[tokio::test]
async fn error_payload_mid_stream_is_a_protocol_error() {
    let mock = MockOpenAi::start().await.unwrap();
    mock.push(MockReply::Raw(vec![
        chunk(json!({"content": "partial"}), Value::Null),
        json!({"error": {"message": "model overloaded", "type": "server_error"}}).to_string(),
    ]));
    let stream = provider(&mock)
        .stream(request("hi"), CancellationToken::new())
        .await
        .unwrap();
    let (events, error) = drain(stream).await;
    assert_eq!(text(&events), "partial");
    let Some(ModelError::Protocol(message)) = error else {
        panic!("unexpected {error:?}");
    };
    assert!(message.contains("model overloaded"));

    mock.push(MockReply::Raw(vec!["{not json".into()]));
    let stream = provider(&mock)
        .stream(request("hi"), CancellationToken::new())
        .await
        .unwrap();
    let (_, error) = drain(stream).await;
    assert!(matches!(error, Some(ModelError::Protocol(_))), "{error:?}");
    mock.shutdown().await;
}

#[test]
fn provider_config_deserializes_with_defaults() {
    let cfg: ProviderConfig = serde_json::from_value(json!({
        "name": "local",
        "base_url": "http://localhost:11434/v1",
        "idle_timeout": "500ms",
        "connect_timeout": 3,
    }))
    .unwrap();
    assert_eq!(cfg.idle_timeout, Duration::from_millis(500));
    assert_eq!(cfg.connect_timeout, Duration::from_secs(3));
    assert!(cfg.include_usage && cfg.structured_output);
    assert_eq!(cfg.max_retries, 2);
    assert_eq!(cfg.api_key_env, None);

    let defaults: ProviderConfig =
        serde_json::from_value(json!({"name": "a", "base_url": "http://x"})).unwrap();
    assert_eq!(defaults, ProviderConfig::new("a", "http://x"));

    for bad in [
        json!({"name": "a", "base_url": "http://x", "idle_timeout": "soon"}),
        json!({"name": "a", "base_url": "http://x", "api_key": "sk-inline"}),
    ] {
        assert!(serde_json::from_value::<ProviderConfig>(bad).is_err());
    }
}

#[tokio::test]
async fn connections_are_reused_across_calls() {
    let mock = MockOpenAi::start().await.unwrap();
    let provider = provider(&mock);
    mock.push(MockReply::ToolCalls(vec![("f".into(), json!({}))]));
    // The end of this body comes 100 ms after `[DONE]`: the client must read it rather than
    // drop the connection (it is busy meanwhile, hence the pause after that call).
    mock.push(MockReply::Slow {
        text: "slow tail".into(),
        delay_per_delta: Duration::from_millis(100),
    });
    for i in 0..5 {
        let events = run(&provider, request(&format!("call {i}"))).await;
        finish(&events);
        if i == 1 {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    assert_eq!(mock.requests().len(), 5);
    assert_eq!(mock.connections(), 1);
    assert_eq!(mock.disconnects(), 0);
    mock.shutdown().await;
}

#[tokio::test]
async fn an_answer_ends_at_done_while_the_body_lingers() {
    let mock = MockOpenAi::start().await.unwrap();
    let provider = provider(&mock);
    // The body ends 400 ms after `[DONE]`.
    let linger = Duration::from_millis(400);
    mock.push(MockReply::Slow {
        text: "word".into(),
        delay_per_delta: linger,
    });
    let mut stream = provider
        .stream(request("hi"), CancellationToken::new())
        .await
        .unwrap();
    // The text comes with the rest of the answer and `[DONE]`, right before the lingering.
    let mut text_at = None;
    while let Some(event) = tokio::time::timeout(TEST_TIMEOUT, stream.next())
        .await
        .unwrap()
    {
        if matches!(event.unwrap(), ModelEvent::TextDelta(_)) {
            text_at = Some(Instant::now());
        }
    }
    let waited = text_at.expect("the text").elapsed();
    assert!(
        waited < linger / 2,
        "the stream ended {waited:?} after its text"
    );
    // The body's end is still read, in the background: the next call reuses the connection.
    tokio::time::sleep(linger * 2).await;
    mock.push(MockReply::Text("again".into()));
    assert_eq!(text(&run(&provider, request("again")).await), "again");
    assert_eq!(mock.connections(), 1);
    assert_eq!(mock.disconnects(), 0);
    mock.shutdown().await;
}

/// Calls in flight at once: how many connections they open, with and without HTTP/2 prior
/// knowledge; every call must end with its own text either way.
async fn connections_for_concurrent_calls(http2_prior_knowledge: bool) -> usize {
    const CALLS: usize = 4;
    let mock = MockOpenAi::start().await.unwrap();
    let provider = OpenAiProvider::new(ProviderConfig {
        http2_prior_knowledge,
        ..config(&mock)
    })
    .unwrap();
    for i in 0..CALLS {
        // Slow enough that every call is open while the others start.
        mock.push(MockReply::Slow {
            text: format!("reply {i}"),
            delay_per_delta: Duration::from_millis(50),
        });
    }
    let calls = (0..CALLS).map(|i| run(&provider, request(&format!("call {i}"))));
    let mut texts: Vec<String> = futures::future::join_all(calls)
        .await
        .iter()
        .map(|events| {
            finish(events);
            text(events)
        })
        .collect();
    texts.sort();
    let expected: Vec<String> = (0..CALLS).map(|i| format!("reply {i}")).collect();
    assert_eq!(texts, expected);
    let connections = mock.connections();
    mock.shutdown().await;
    connections
}

#[tokio::test]
async fn http2_prior_knowledge_carries_concurrent_calls_on_one_connection() {
    assert_eq!(connections_for_concurrent_calls(true).await, 1);
    // The contrast: HTTP/1 opens a connection per call in flight.
    assert_eq!(connections_for_concurrent_calls(false).await, 4);
}

#[tokio::test]
async fn provider_options_are_read_by_provider_key() {
    let mock = MockOpenAi::start().await.unwrap();
    let mut req = request("hi");
    req.settings.temperature = Some(0.1);
    req.provider_options = object(json!({
        "openai": {
            "reasoningEffort": "low",
            "logprobs": 2,
            "parallelToolCalls": false,
            "textVerbosity": "low",
            "user": "from-openai",
            // Unknown keys go verbatim, after agentd's own fields.
            "temperature": 0.7,
            "chat_template_kwargs": {"enable_thinking": false},
        },
        // The configured provider's name ("mock") wins over the generic keys.
        "mock": {"user": "from-mock", "serviceTier": "flex"},
        "anthropic": {"thinking": {"type": "enabled", "budgetTokens": 1000}, "user": "nope"},
    }));
    run(&provider(&mock), req.clone()).await;
    let body = &mock.requests()[0];
    assert_eq!(body["reasoning_effort"], json!("low"));
    assert_eq!(body["logprobs"], json!(true));
    assert_eq!(body["top_logprobs"], json!(2));
    assert_eq!(body["parallel_tool_calls"], json!(false));
    assert_eq!(body["verbosity"], json!("low"));
    assert_eq!(body["service_tier"], json!("flex"));
    assert_eq!(body["user"], json!("from-mock"));
    assert_eq!(body["temperature"], json!(0.7));
    assert_eq!(
        body["chat_template_kwargs"],
        json!({"enable_thinking": false})
    );
    for absent in ["thinking", "reasoningEffort", "openai", "anthropic", "mock"] {
        assert!(body.get(absent).is_none(), "{absent} sent: {body}");
    }

    // extra_body is merged last and wins over provider options.
    req.extra_body = object(json!({"user": "from-extra", "reasoning_effort": null}));
    run(&provider(&mock), req).await;
    let body = &mock.requests()[1];
    assert_eq!(body["user"], json!("from-extra"));
    assert_eq!(body["reasoning_effort"], Value::Null);
    mock.shutdown().await;
}

#[tokio::test]
async fn provider_options_under_the_camel_case_provider_name() {
    let mock = MockOpenAi::start().await.unwrap();
    let provider = OpenAiProvider::new(ProviderConfig::new("my-gateway", mock.base_url())).unwrap();
    let mut req = request("hi");
    req.provider_options = object(json!({
        "openaiCompatible": {"user": "generic", "store": true},
        "my-gateway": {"user": "dashed"},
        "myGateway": {"user": "camel", "promptCacheKey": "k1"},
        "other-gateway": {"user": "not me"},
    }));
    run(&provider, req).await;
    let body = &mock.requests()[0];
    assert_eq!(body["user"], json!("camel"));
    assert_eq!(body["store"], json!(true));
    assert_eq!(body["prompt_cache_key"], json!("k1"));
    mock.shutdown().await;
}

#[tokio::test]
async fn strict_json_schema_option_sets_the_schema_strictness() {
    let mock = MockOpenAi::start().await.unwrap();
    let provider = provider(&mock);
    let schema = json!({"type": "object"});
    let mut req = request("hi");
    req.response_format = Some(ResponseFormat::JsonSchema {
        name: "answer".into(),
        schema: schema.clone(),
        strict: true,
    });
    req.provider_options = object(json!({"openai": {"strictJsonSchema": false}}));
    run(&provider, req.clone()).await;
    // Without a schema there is nothing to be strict about; the option is no body field.
    req.response_format = Some(ResponseFormat::JsonObject);
    run(&provider, req).await;
    let bodies = mock.requests();
    assert_eq!(
        bodies[0]["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": false}})
    );
    assert_eq!(bodies[1]["response_format"], json!({"type": "json_object"}));
    for body in &bodies {
        assert!(body.get("strictJsonSchema").is_none(), "{body}");
    }
    mock.shutdown().await;
}

#[tokio::test]
async fn url_citations_become_sources() {
    let mock = MockOpenAi::start().await.unwrap();
    let provider = provider(&mock);
    let rich = MockRich::text("Rust is fast")
        .source("https://www.rust-lang.org", "Rust")
        .source("https://doc.rust-lang.org/book", "The Book");
    for stream in [true, false] {
        mock.push(rich.clone().into());
        let mut req = request("hi");
        if !stream {
            req.extra_body.insert("stream".into(), json!(false));
        }
        let events = run(&provider, req).await;
        assert_eq!(text(&events), "Rust is fast");
        let sources: Vec<(String, String, String, String)> = events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::Source {
                    id,
                    source_type,
                    url,
                    title,
                } => Some((id.clone(), source_type.clone(), url.clone(), title.clone())),
                _ => None,
            })
            .collect();
        let found: Vec<(&str, &str, &str)> = sources
            .iter()
            .map(|(_, t, u, title)| (t.as_str(), u.as_str(), title.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                ("url", "https://www.rust-lang.org", "Rust"),
                ("url", "https://doc.rust-lang.org/book", "The Book"),
            ],
            "stream: {stream}"
        );
        assert!(!sources[0].0.is_empty());
        assert_ne!(sources[0].0, sources[1].0);
    }
    mock.shutdown().await;
}

#[tokio::test]
async fn generated_images_become_files() {
    let mock = MockOpenAi::start().await.unwrap();
    let png = b"\x89PNG\r\n\x1a\nfake".to_vec();
    mock.push(
        MockRich::text("Here it is")
            .image("image/png", &png)
            .image_url("https://images.example/cat.png")
            .image_url("data:image/png;base64,not*base64")
            .into(),
    );
    let events = run(&provider(&mock), request("draw a cat")).await;
    let files: Vec<(&[u8], &str)> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::File { data, mime_type } => Some((data.as_slice(), mime_type.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(files, [(png.as_slice(), "image/png")]);
    let warnings = warnings(&events);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].contains("https://images.example/cat.png"),
        "{warnings:?}"
    );
    assert!(warnings[1].contains("not*base64"), "{warnings:?}");
    assert_eq!(finish(&events).0, FinishReason::Stop);
    mock.shutdown().await;
}

#[tokio::test]
async fn usage_details_become_openai_provider_metadata() {
    let mock = MockOpenAi::start().await.unwrap();
    let provider = provider(&mock);
    mock.push(
        MockRich::text("done")
            .usage_details(MockUsageDetails {
                cached_tokens: Some(64),
                reasoning_tokens: Some(12),
                accepted_prediction_tokens: Some(3),
                rejected_prediction_tokens: Some(1),
            })
            .into(),
    );
    let events = run(&provider, request("hi")).await;
    assert_eq!(
        provider_metadata(&events),
        Some(json!({"openai": {
            "cachedPromptTokens": 64,
            "reasoningTokens": 12,
            "acceptedPredictionTokens": 3,
            "rejectedPredictionTokens": 1,
        }}))
    );
    let usage = finish(&events).1;
    assert_eq!(
        (usage.cached_input_tokens, usage.reasoning_tokens),
        (64, 12)
    );

    // The mock's usual usage reports zero cached and reasoning tokens, as OpenAI does.
    let events = run(&provider, request("hi")).await;
    assert_eq!(
        provider_metadata(&events),
        Some(json!({"openai": {"cachedPromptTokens": 0, "reasoningTokens": 0}}))
    );

    // No details, or no usage at all: no metadata.
    mock.push(
        MockRich::text("plain")
            .usage_details(MockUsageDetails::default())
            .into(),
    );
    let events = run(&provider, request("hi")).await;
    assert_eq!(provider_metadata(&events), None);
    assert_eq!(finish(&events).1.input_tokens, 10);
    let mut cfg = config(&mock);
    cfg.include_usage = false;
    let events = run(&OpenAiProvider::new(cfg).unwrap(), request("hi")).await;
    assert_eq!(provider_metadata(&events), None);
    mock.shutdown().await;
}

#[tokio::test]
async fn provider_warnings_are_surfaced_once_each() {
    let mock = MockOpenAi::start().await.unwrap();
    mock.push(
        MockRich::text("ok")
            .warning(json!("model gpt-x is deprecated"))
            .warning(json!({"type": "unsupported-setting", "message": "seed is ignored"}))
            .warning(json!("model gpt-x is deprecated"))
            .into(),
    );
    let events = run(&provider(&mock), request("hi")).await;
    assert_eq!(
        warnings(&events),
        ["model gpt-x is deprecated", "seed is ignored"]
    );
    assert_eq!(text(&events), "ok");
    mock.shutdown().await;
}

#[tokio::test]
async fn settings_that_are_not_sent_warn() {
    let mock = MockOpenAi::start().await.unwrap();
    let mut cfg = config(&mock);
    cfg.structured_output = false;
    let provider = OpenAiProvider::new(cfg).unwrap();
    let mut req = request("hi");
    req.response_format = Some(ResponseFormat::JsonSchema {
        name: "x".into(),
        schema: json!({"type": "object"}),
        strict: true,
    });
    req.tool_choice = Some(ToolChoice::Required);
    let events = run(&provider, req).await;
    assert!(matches!(events[0], ModelEvent::ResponseMetadata { .. }));
    // Request warnings come right after the metadata, before any delta.
    assert!(matches!(events[1], ModelEvent::Warning(_)), "{events:?}");
    assert!(matches!(events[2], ModelEvent::Warning(_)), "{events:?}");
    let warnings = warnings(&events);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].contains("toolChoice required"), "{warnings:?}");
    assert!(warnings[1].contains("responseFormat"), "{warnings:?}");

    // Auto needs no tools; nothing is lost, nothing warns.
    let mut req = request("hi");
    req.tool_choice = Some(ToolChoice::Auto);
    req.response_format = Some(ResponseFormat::JsonObject);
    let events = run(&provider, req).await;
    assert_eq!(self::warnings(&events), Vec::<String>::new());
    mock.shutdown().await;
}

#[tokio::test]
async fn rich_replies_stream_tool_calls_with_extras() {
    let mock = MockOpenAi::start().await.unwrap();
    mock.push(
        MockRich::default()
            .tool_call("search", json!({"q": "rust"}))
            .source("https://a.example", "A")
            .into(),
    );
    let events = run(&provider(&mock), request("find")).await;
    assert_eq!(
        tool_ends(&events),
        [(
            0,
            "call_1_0".into(),
            "search".into(),
            json!({"q": "rust"}).to_string()
        )]
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, ModelEvent::Source { url, .. } if url == "https://a.example"))
    );
    assert_eq!(
        finish(&events),
        (
            FinishReason::ToolCalls,
            Usage {
                input_tokens: 10,
                output_tokens: 3,
                total_tokens: 13,
                ..Usage::default()
            }
        )
    );
    mock.shutdown().await;
}
