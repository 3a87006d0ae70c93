//! The prompt alignment scorer's texts, verbatim from the reference
//! (`prompt-alignment/prompts.ts`).

use super::js;
use super::prompt_alignment::{Analysis, EvaluationMode};
use super::step::render;

/// The judge's system message.
pub(super) const INSTRUCTIONS: &str = r#"You are an expert prompt-response alignment evaluator. Your job is to analyze how well an agent's response aligns with the user's prompt in terms of intent, requirements, completeness, and appropriateness.

Key Evaluation Dimensions:
1. **Intent Alignment**: Does the response address the core purpose of the prompt?
2. **Requirements Fulfillment**: Are all explicit and implicit requirements met?
3. **Completeness**: Is the response comprehensive and thorough?
4. **Response Appropriateness**: Does the format, tone, and style match expectations?

Evaluation Guidelines:
- Identify the primary intent and any secondary intents in the prompt
- Extract all explicit requirements (specific tasks, constraints, formats)
- Consider implicit requirements based on context and standard expectations
- Assess whether the response fully addresses the prompt or leaves gaps
- Evaluate if the response format and tone are appropriate for the request
- Be objective and focus on alignment rather than response quality

Score each dimension from 0.0 (completely misaligned) to 1.0 (perfectly aligned)."#;

/// The conversation history ahead of the prompts.
pub(super) const HISTORY_CONTEXT: &str = r#"Conversation History (prior turns, for context only):
${history}

"#;

/// How the judge is to use the history.
pub(super) const HISTORY_GUIDANCE: &str = r#"
Note on conversation history:
- The conversation history is provided only to resolve the meaning of the current prompt. Use it to interpret short or referential prompts (e.g. "A", "yes", "the second one") against what was previously asked or offered.
- Evaluate only the agent response to the current prompt. Do not score earlier turns, and do not credit or penalise the agent for anything it said in them."#;

/// The analyze step's prompt.
pub(super) const ANALYZE: &str = r#"Analyze how well the agent's response aligns with ${target} across multiple dimensions.

${prompt_context}

Agent Response:
${agent_response}
${history_guidance}

Evaluate the following aspects:

1. **Intent Alignment**:
   ${intent}
   - Provide reasoning for your assessment

2. **Requirements Fulfillment**:
   ${requirements}
   - Provide reasoning for each requirement assessment

3. **Completeness**:
   ${completeness}
   - Score from 0.0 (severely incomplete) to 1.0 (fully complete)
   - Provide reasoning for your assessment

4. **Response Appropriateness**:
   ${appropriateness}
   - Score from 0.0 (completely inappropriate) to 1.0 (perfectly appropriate)
   - Provide reasoning for your assessment

Format your response as:
{
  "intentAlignment": {
    "score": 0.0-1.0,
    "primaryIntent": "the main purpose of the prompt",
    "isAddressed": true/false,
    "reasoning": "explanation of intent alignment"
  },
  "requirementsFulfillment": {
    "requirements": [
      {
        "requirement": "specific requirement from prompt",
        "isFulfilled": true/false,
        "reasoning": "explanation of fulfillment status"
      }
    ],
    "overallScore": 0.0-1.0
  },
  "completeness": {
    "score": 0.0-1.0,
    "missingElements": ["list of missing elements if any"],
    "reasoning": "explanation of completeness assessment"
  },
  "responseAppropriateness": {
    "score": 0.0-1.0,
    "formatAlignment": true/false,
    "toneAlignment": true/false,
    "reasoning": "explanation of appropriateness"
  },
  "overallAssessment": "summary of the prompt-response alignment"
}

Example:
User Prompt: "Write a Python function to calculate factorial with error handling for negative numbers."

Agent Response: "def factorial(n):
    if n < 0:
        raise ValueError('Factorial not defined for negative numbers')
    if n == 0:
        return 1
    return n * factorial(n-1)"

{
  "intentAlignment": {
    "score": 1.0,
    "primaryIntent": "Create a Python function to calculate factorial",
    "isAddressed": true,
    "reasoning": "The response provides exactly what was requested - a Python function that calculates factorial"
  },
  "requirementsFulfillment": {
    "requirements": [
      {
        "requirement": "Write a Python function",
        "isFulfilled": true,
        "reasoning": "A proper Python function is provided with correct syntax"
      },
      {
        "requirement": "Calculate factorial",
        "isFulfilled": true,
        "reasoning": "The function correctly implements factorial calculation using recursion"
      },
      {
        "requirement": "Include error handling for negative numbers",
        "isFulfilled": true,
        "reasoning": "The function raises a ValueError for negative inputs with an appropriate message"
      }
    ],
    "overallScore": 1.0
  },
  "completeness": {
    "score": 0.9,
    "missingElements": ["No docstring or comments"],
    "reasoning": "The function is complete and functional but could benefit from documentation"
  },
  "responseAppropriateness": {
    "score": 1.0,
    "formatAlignment": true,
    "toneAlignment": true,
    "reasoning": "The response is in the exact format requested (Python code) with appropriate technical implementation"
  },
  "overallAssessment": "The response perfectly aligns with the prompt, providing a correct Python factorial function with the requested error handling for negative numbers"
}"#;

/// Intent alignment, system mode.
pub(super) const INTENT_SYSTEM: &str = r#"- Identify the primary behavioral guidelines and constraints from the system prompt
   - Assess whether the response follows these guidelines
   - Score from 0.0 (violates system constraints) to 1.0 (perfectly follows system guidelines)"#;

/// Intent alignment, user mode.
pub(super) const INTENT_USER: &str = r#"- Identify the primary intent of the user's prompt
   - Assess whether the response addresses this intent
   - Score from 0.0 (completely misses intent) to 1.0 (perfectly addresses intent)"#;

/// Intent alignment, both.
pub(super) const INTENT_BOTH: &str = r#"- Identify both the user's intent AND system behavioral guidelines
   - Assess whether the response addresses user intent while following system constraints
   - Score from 0.0 (misses both) to 1.0 (perfectly addresses both)"#;

/// Requirements, system mode.
pub(super) const REQUIREMENTS_SYSTEM: &str = r#"- List all system constraints and rules from the system prompt
   - Check if each constraint is respected
   - Calculate an overall score based on respected vs. total constraints"#;

/// Requirements, user mode.
pub(super) const REQUIREMENTS_USER: &str = r#"- List all explicit requirements from the user prompt
   - Check if each requirement is fulfilled
   - Calculate an overall score based on fulfilled vs. total requirements"#;

/// Requirements, both.
pub(super) const REQUIREMENTS_BOTH: &str = r#"- List requirements from BOTH user prompt and system constraints
   - Check fulfillment of each requirement
   - Calculate separate scores for user requirements and system constraints, then combine"#;

/// Completeness, system mode.
pub(super) const COMPLETENESS_SYSTEM: &str = r#"- Evaluate if the response fully adheres to all system guidelines
   - Identify any system rules that were not followed"#;

/// Completeness, user mode.
pub(super) const COMPLETENESS_USER: &str = r#"- Evaluate if the response is comprehensive for the user's request
   - Identify any missing elements that should have been included"#;

/// Completeness, both.
pub(super) const COMPLETENESS_BOTH: &str = r#"- Evaluate completeness for both user request AND system compliance
   - Identify missing elements from either perspective"#;

/// Appropriateness, system mode.
pub(super) const APPROPRIATENESS_SYSTEM: &str = r#"- Check if the format/tone matches system specifications
   - Evaluate consistency with defined agent behavior"#;

/// Appropriateness, user mode.
pub(super) const APPROPRIATENESS_USER: &str = r#"- Check if the format matches what was requested (e.g., list, paragraph, code)
   - Evaluate if the tone is appropriate (e.g., formal, casual, technical)"#;

/// Appropriateness, both.
pub(super) const APPROPRIATENESS_BOTH: &str = r#"- Check format/tone for both user expectations AND system requirements
   - Evaluate if response satisfies both perspectives"#;

/// The generateReason step's prompt.
pub(super) const REASON: &str = r#"Explain the prompt alignment score based on how well the agent's response addresses the ${alignment}.

${prompt_context}

Score: ${score} out of ${scale}

Evaluation Breakdown:
- Intent Alignment (40% weight): ${intent_score}
  Primary Intent: "${primary_intent}"
  Addressed: ${addressed}
  ${intent_reasoning}

- Requirements Fulfillment (30% weight): ${requirements_score}
  ${fulfilled} out of ${total} requirements met
  ${requirement_lines}

- Completeness (20% weight): ${completeness_score}
  ${missing}
  ${completeness_reasoning}

- Response Appropriateness (10% weight): ${appropriateness_score}
  Format: ${format}
  Tone: ${tone}
  ${appropriateness_reasoning}

Overall Assessment: ${overall}

Prompt Alignment measures how well the response addresses the user's request across intent, requirements, completeness, and appropriateness. The weighted scoring ensures primary focus on understanding and addressing the core intent while meeting specific requirements.

Rules for explanation:
- Summarize the key strengths and weaknesses of alignment
- Highlight any major misalignments that significantly impacted the score
- Be concise but comprehensive in the explanation
- Use the given score, don't recalculate

Format:
"The score is ${score} because {explanation of alignment strengths and weaknesses based on the weighted dimensions}"

Example responses:
"The score is 0.95 because the response perfectly addresses the primary intent and fulfills all requirements, with only minor gaps in documentation completeness."
"The score is 0.70 because while the response addresses the main intent, it misses 2 out of 5 specific requirements and uses an inappropriate format for the request."
"The score is 0.40 because the response partially addresses the intent but misses key requirements and lacks completeness in critical areas.""#;

/// The history section ahead of the prompts (empty without history).
fn history_context(history: Option<&str>) -> String {
    match history {
        Some(history) if !history.is_empty() => render(HISTORY_CONTEXT, &[("history", history)]),
        _ => String::new(),
    }
}

/// The prompts the response is judged against, after the history.
fn prompt_context(
    mode: EvaluationMode,
    user_prompt: &str,
    system_prompt: &str,
    history: Option<&str>,
) -> String {
    let prompts = match mode {
        EvaluationMode::User => format!("User Prompt:\n{user_prompt}"),
        EvaluationMode::System => format!("System Prompt:\n{system_prompt}"),
        EvaluationMode::Both => {
            format!("User Prompt:\n{user_prompt}\n\nSystem Prompt:\n{system_prompt}")
        }
    };
    history_context(history) + &prompts
}

/// The analyze prompt.
pub(super) fn analyze(
    mode: EvaluationMode,
    user_prompt: &str,
    system_prompt: &str,
    agent_response: &str,
    history: Option<&str>,
) -> String {
    let (target, intent, requirements, completeness, appropriateness) = match mode {
        EvaluationMode::System => (
            "the system's behavioral guidelines and constraints",
            INTENT_SYSTEM,
            REQUIREMENTS_SYSTEM,
            COMPLETENESS_SYSTEM,
            APPROPRIATENESS_SYSTEM,
        ),
        EvaluationMode::User => (
            "the user's prompt",
            INTENT_USER,
            REQUIREMENTS_USER,
            COMPLETENESS_USER,
            APPROPRIATENESS_USER,
        ),
        EvaluationMode::Both => (
            "both the user's prompt and the system's behavioral guidelines",
            INTENT_BOTH,
            REQUIREMENTS_BOTH,
            COMPLETENESS_BOTH,
            APPROPRIATENESS_BOTH,
        ),
    };
    let guidance = match history {
        Some(history) if !history.is_empty() => HISTORY_GUIDANCE,
        _ => "",
    };
    render(
        ANALYZE,
        &[
            ("target", target),
            (
                "prompt_context",
                &prompt_context(mode, user_prompt, system_prompt, history),
            ),
            ("agent_response", agent_response),
            ("history_guidance", guidance),
            ("intent", intent),
            ("requirements", requirements),
            ("completeness", completeness),
            ("appropriateness", appropriateness),
        ],
    )
}

/// What the reason prompt shows.
pub(super) struct ReasonFacts<'a> {
    /// Whose prompts were judged.
    pub mode: EvaluationMode,
    /// The user's message.
    pub user_prompt: &'a str,
    /// The combined system prompt.
    pub system_prompt: &'a str,
    /// The remembered conversation, when included.
    pub history: Option<&'a str>,
    /// The score.
    pub score: f64,
    /// The scale.
    pub scale: f64,
    /// The analyze step's answer.
    pub analysis: &'a Analysis,
}

/// The reason prompt.
pub(super) fn reason(facts: &ReasonFacts<'_>) -> String {
    let a = facts.analysis;
    let alignment = match facts.mode {
        EvaluationMode::System => "system behavioral guidelines and constraints",
        EvaluationMode::User => "user's prompt",
        EvaluationMode::Both => "both user's prompt and system guidelines",
    };
    let requirements = &a.requirements_fulfillment.requirements;
    let fulfilled = requirements.iter().filter(|r| r.is_fulfilled).count();
    let requirement_lines: Vec<String> = requirements
        .iter()
        .map(|r| {
            let mark = if r.is_fulfilled { '✓' } else { '✗' };
            format!("• {}: {mark}", r.requirement)
        })
        .collect();
    let missing = &a.completeness.missing_elements;
    let missing = if missing.is_empty() {
        "Response is complete".to_owned()
    } else {
        format!("Missing elements: {}", missing.join(", "))
    };
    let aligned = |yes: bool| if yes { "Aligned" } else { "Misaligned" };
    render(
        REASON,
        &[
            ("alignment", alignment),
            (
                "prompt_context",
                &prompt_context(
                    facts.mode,
                    facts.user_prompt,
                    facts.system_prompt,
                    facts.history,
                ),
            ),
            ("score", &js::number(facts.score)),
            ("scale", &js::number(facts.scale)),
            ("intent_score", &js::number(a.intent_alignment.score)),
            ("primary_intent", &a.intent_alignment.primary_intent),
            (
                "addressed",
                if a.intent_alignment.is_addressed {
                    "Yes"
                } else {
                    "No"
                },
            ),
            ("intent_reasoning", &a.intent_alignment.reasoning),
            (
                "requirements_score",
                &js::number(a.requirements_fulfillment.overall_score),
            ),
            ("fulfilled", &fulfilled.to_string()),
            ("total", &requirements.len().to_string()),
            ("requirement_lines", &requirement_lines.join("\n  ")),
            ("completeness_score", &js::number(a.completeness.score)),
            ("missing", &missing),
            ("completeness_reasoning", &a.completeness.reasoning),
            (
                "appropriateness_score",
                &js::number(a.response_appropriateness.score),
            ),
            (
                "format",
                aligned(a.response_appropriateness.format_alignment),
            ),
            ("tone", aligned(a.response_appropriateness.tone_alignment)),
            (
                "appropriateness_reasoning",
                &a.response_appropriateness.reasoning,
            ),
            ("overall", &a.overall_assessment),
        ],
    )
}
