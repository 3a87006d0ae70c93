//! Checks a request against the agent it runs: tool names, tool choice, client tools, the
//! structured-output schema and model, completion scorers, processors and scorers. Runs before
//! anything is written.

use super::error::RunError;
use super::hooks::ClientHooks;
use super::request::RunRequest;
use super::run::offered_tools;
use super::scorers::scorer::{Kind as RunScorerKind, RunScorer, requested};
use super::structured;
use super::{AgentDef, Agents};
use crate::config::ScorerKind;
use crate::pb;

/// Checks a request against its agent: tool names, tool choice, client tools, schema.
pub fn validate_against_agent(
    agent: &AgentDef,
    agents: &Agents,
    request: &RunRequest,
) -> Result<(), RunError> {
    let mut violations = Vec::new();
    let tools = agent.tools();
    let known: Vec<&str> = tools
        .iter()
        .map(|t| t.name())
        .chain(request.client_tools.iter().map(|t| t.name.as_str()))
        .collect();
    for (i, tool) in request.client_tools.iter().enumerate() {
        if tools.iter().any(|t| t.def.name == tool.name) {
            violations.push((
                format!("client_tools.{i}.name"),
                format!(
                    "{:?} is already a tool of agent {:?}",
                    tool.name, agent.config.id
                ),
            ));
        }
    }
    for (i, name) in request.active_tools.iter().enumerate() {
        if !known.contains(&name.as_str()) {
            violations.push((
                format!("active_tools.{i}"),
                format!("unknown tool {name:?} (known: {})", known.join(", ")),
            ));
        }
    }
    if let Some(crate::model::ToolChoice::Tool(name)) = &request.tool_choice {
        let offered = offered_tools(agent, request);
        if !offered.iter().any(|t| &t.def.name == name) {
            violations.push((
                "tool_choice.tool_name".into(),
                format!("{name:?} is not among the tools offered to the model"),
            ));
        }
    }
    if let Some(output) = &request.structured_output {
        if let Err(e) = structured::compile(&output.schema) {
            violations.push(("structured_output.schema".into(), e));
        }
        if let Some(model) = &output.model
            && agents.model(model).is_none()
        {
            violations.push((
                "structured_output.model".into(),
                format!("{model:?} names no configured provider"),
            ));
        }
    }
    let recall = request
        .memory
        .as_ref()
        .and_then(|m| m.semantic_recall.as_ref());
    if recall.is_some_and(|r| r.enabled != Some(false)) && agent.embedder.is_none() {
        violations.push((
            "memory.options.semantic_recall".into(),
            format!(
                "agent {:?} has no embedder ([agents.memory] embedder = \"provider/model\")",
                agent.config.id
            ),
        ));
    }
    for (list, specs) in [
        ("input", &request.processors.input),
        ("output", &request.processors.output),
    ] {
        for (i, spec) in specs.iter().flatten().enumerate() {
            if let Some(model) = spec.detector_model()
                && agents.model(model).is_none()
            {
                violations.push((
                    format!(
                        "processors.{list}.processors.{i}.{}.model",
                        spec.field_name()
                    ),
                    format!("{model:?} names no configured provider"),
                ));
            }
        }
    }
    if violations.is_empty() {
        Ok(())
    } else {
        Err(RunError::Invalid(violations))
    }
}

/// Checks the run's completion scorers: judge models are configured, schemas compile, and a
/// `hook` scorer has a handler (the calling client's, or one of the agent's webhooks).
pub fn validate_completion(
    agent: &AgentDef,
    agents: &Agents,
    request: &RunRequest,
    client: Option<&ClientHooks>,
) -> Result<(), RunError> {
    let Some(config) = &request.is_task_complete else {
        return Ok(());
    };
    let hook = pb::HookKind::IsTaskComplete as i32;
    let handled = client.is_some_and(|c| c.binding().kinds.contains(&hook))
        || agent
            .config
            .webhooks
            .iter()
            .any(|w| w.kinds.iter().any(|k| k == "is_task_complete"));
    let mut violations = Vec::new();
    for (i, scorer) in config.scorers.iter().enumerate() {
        let field = format!("is_task_complete.scorers.{i}");
        match &scorer.kind {
            ScorerKind::Hook if !handled => violations.push((
                field,
                "a hook scorer needs an is_task_complete hook: declare the kind on \
                 GenerateWithHooks, or give the agent a webhook for it"
                    .to_owned(),
            )),
            ScorerKind::LlmJudge { model, .. } if agents.model(model).is_none() => {
                violations.push((
                    format!("{field}.llm_judge.model"),
                    format!("{model:?} names no configured provider"),
                ))
            }
            ScorerKind::JsonSchema { schema } => {
                if let Err(e) = structured::compile(schema) {
                    violations.push((format!("{field}.json_schema.schema"), e));
                }
            }
            _ => {}
        }
    }
    if violations.is_empty() {
        Ok(())
    } else {
        Err(RunError::Invalid(violations))
    }
}

/// Checks that every hook processor of the run has a handler for its stage (the calling
/// client's, or one of the agent's webhooks): `process_input` in the input list,
/// `process_output_step` or `process_output_result` in the output list.
pub fn validate_processors(
    agent: &AgentDef,
    request: &RunRequest,
    client: Option<&ClientHooks>,
) -> Result<(), RunError> {
    let handled = |kind: pb::HookKind| {
        client.is_some_and(|c| c.binding().kinds.contains(&(kind as i32)))
            || agent
                .config
                .webhooks
                .iter()
                .any(|w| w.kinds.iter().any(|k| k == super::hooks::kind_name(kind)))
    };
    let overrides = &request.processors;
    let lists = [
        (
            overrides.input.as_deref(),
            &agent.config.input_processors,
            "input",
            vec![pb::HookKind::ProcessInput],
        ),
        (
            overrides.output.as_deref(),
            &agent.config.output_processors,
            "output",
            vec![
                pb::HookKind::ProcessOutputStep,
                pb::HookKind::ProcessOutputResult,
            ],
        ),
    ];
    let mut violations = Vec::new();
    for (requested, configured, list, kinds) in lists {
        if kinds.iter().any(|k| handled(*k)) {
            continue;
        }
        let names: Vec<&str> = kinds.iter().map(|k| super::hooks::kind_name(*k)).collect();
        let (specs, field): (&[crate::config::ProcessorSpec], String) = match requested {
            Some(specs) => (specs, format!("processors.{list}.processors")),
            None => (
                configured,
                format!("agent {:?} {list}_processors", agent.config.id),
            ),
        };
        for (i, spec) in specs.iter().enumerate() {
            if let crate::config::ProcessorSpec::Hook { id } = spec {
                violations.push((
                    format!("{field}.{i}.hook"),
                    format!(
                        "hook processor {id:?} needs a {} hook: declare the kind on \
                         GenerateWithHooks, or give the agent a webhook for it",
                        names.join(" or ")
                    ),
                ));
            }
        }
    }
    if violations.is_empty() {
        Ok(())
    } else {
        Err(RunError::Invalid(violations))
    }
}

/// Checks the run's scorers once its agent is known: the request's resolve against the
/// agent's, judges name configured models, and a `hook` scorer has a SCORE handler (the
/// calling client's, or one of the agent's webhooks).
pub fn validate_scorers(
    agent: &AgentDef,
    agents: &Agents,
    request: &RunRequest,
    client: Option<&ClientHooks>,
) -> Result<(), RunError> {
    let (scorers, fields): (Vec<RunScorer>, Vec<String>) = match &request.scorers {
        Some(list) => {
            let scorers = requested(list, &agent.scorers).map_err(RunError::Invalid)?;
            let fields = (0..scorers.len())
                .map(|i| format!("scorers.scorers.{i}"))
                .collect();
            (scorers, fields)
        }
        // The agent's own were built at start-up; only their hook handler is left to check.
        None if agent
            .scorers
            .iter()
            .all(|s| !matches!(s.kind, RunScorerKind::Hook)) =>
        {
            return Ok(());
        }
        None => {
            let fields = agent
                .scorers
                .iter()
                .map(|s| format!("agent {:?} scorers.{}", agent.config.id, s.key))
                .collect();
            (agent.scorers.clone(), fields)
        }
    };
    let hook = pb::HookKind::Score as i32;
    let handled = client.is_some_and(|c| c.binding().kinds.contains(&hook))
        || agent
            .config
            .webhooks
            .iter()
            .any(|w| w.kinds.iter().any(|k| k == "score"));
    let mut violations = Vec::new();
    for (scorer, field) in scorers.iter().zip(&fields) {
        if matches!(scorer.kind, RunScorerKind::Hook) && !handled {
            violations.push((
                format!("{field}.scorer"),
                "a hook scorer needs a score hook: declare the kind on GenerateWithHooks, or \
                 give the agent a webhook for it"
                    .to_owned(),
            ));
        }
        if let Some(model) = scorer.entry.model()
            && agents.model(model).is_none()
        {
            violations.push((
                format!("{field}.options.model"),
                format!("{model:?} names no configured provider"),
            ));
        }
    }
    if violations.is_empty() {
        Ok(())
    } else {
        Err(RunError::Invalid(violations))
    }
}
