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
    // Unknown fields, missing required ones and unknown ids are refused.
    let refused = [
        ("toxicity-scorer", "scale = 1\nthreshold = 0.5"),
        ("llm-tool-call-accuracy-scorer", ""),
        ("no-such-scorer", ""),
    ];
    for (id, text) in refused {
        let error = JudgedScorer::from_options(id, table(text)).expect_err(text);
        assert!(error.contains(id), "{error}");
    }
}
