//! Options as users write them in TOML, read through [`JudgedScorer::from_options`].

use super::super::*;

#[test]
fn options_read_from_toml() {
    let table = |text: &str| -> toml::Value { toml::from_str(text).expect("TOML") };
    let scorer = JudgedScorer::from_options(
        "answer-relevancy-scorer",
        table("uncertainty_weight = 0.5\nscale = 10"),
    );
    assert_eq!(
        scorer,
        Ok(JudgedScorer::AnswerRelevancy(AnswerRelevancyOptions {
            uncertainty_weight: 0.5,
            scale: 10.0,
        }))
    );
    // Each field defaults on its own.
    assert_eq!(
        JudgedScorer::from_options("answer-relevancy-scorer", table("scale = 2")),
        Ok(JudgedScorer::AnswerRelevancy(AnswerRelevancyOptions {
            uncertainty_weight: 0.3,
            scale: 2.0,
        }))
    );
    let tools =
        table(r#"available_tools = [{ id = "weather", description = "Get the weather." }]"#);
    assert_eq!(
        JudgedScorer::from_options("llm-tool-call-accuracy-scorer", tools),
        Ok(JudgedScorer::ToolCallAccuracy(ToolCallAccuracyOptions {
            available_tools: vec![AvailableTool {
                id: "weather".into(),
                description: "Get the weather.".into(),
            }],
        }))
    );
    let relevance =
        table("context = [\"a\", \"b\"]\nscale = 2\n[penalties]\nmissing_context_per_item = 0.2");
    let Ok(JudgedScorer::ContextRelevance(options)) =
        JudgedScorer::from_options("context-relevance-scorer", relevance)
    else {
        panic!("context relevance options");
    };
    assert_eq!(options.context, Some(vec!["a".to_owned(), "b".to_owned()]));
    assert_eq!(
        options.penalties.and_then(|p| p.missing_context_per_item),
        Some(0.2)
    );
    let alignment =
        table("evaluation_mode = \"user\"\ninclude_conversation_history = { max_messages = 4 }");
    assert_eq!(
        JudgedScorer::from_options("prompt-alignment-scorer", alignment),
        Ok(JudgedScorer::PromptAlignment(PromptAlignmentOptions {
            scale: 1.0,
            evaluation_mode: EvaluationMode::User,
            include_conversation_history: Some(ConversationHistory::Limited(HistoryLimit {
                max_messages: Some(4),
            })),
        }))
    );
    assert!(
        JudgedScorer::from_options(
            "prompt-alignment-scorer",
            table("include_conversation_history = true"),
        )
        .is_ok()
    );

    // Unknown fields, missing required ones, a missing context and unknown ids are refused.
    let refused = [
        ("toxicity-scorer", "scale = 1\nthreshold = 0.5"),
        ("llm-tool-call-accuracy-scorer", ""),
        ("context-precision-scorer", "scale = 2"),
        ("context-precision-scorer", "context = []"),
        ("prompt-alignment-scorer", "evaluation_mode = \"assistant\""),
        ("no-such-scorer", ""),
    ];
    for (id, text) in refused {
        let error = JudgedScorer::from_options(id, table(text)).expect_err(text);
        assert!(error.contains(id), "{error}");
    }
}
