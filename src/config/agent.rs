//! An agent's configuration: model, instructions, tools, defaults, webhooks and completion
//! scorers, and the checks that run at start-up.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

/// An agent: model, instructions and tools.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// Id used in requests.
    pub id: String,
    /// Display name (defaults to the id).
    #[serde(default)]
    pub name: Option<String>,
    /// What the agent is for.
    #[serde(default)]
    pub description: String,
    /// System instructions.
    #[serde(default)]
    pub instructions: String,
    /// `provider/model`, e.g. openai/gpt-4o-mini.
    pub model: String,
    /// Enabled tool sets; `tasks` enables task_write, task_update, task_complete, task_check.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Tools served by HTTP endpoints (webhooks): agentd POSTs the call, the response is the result.
    #[serde(default)]
    pub http_tools: Vec<HttpToolConfig>,
    /// MCP servers whose tools it offers (`"name"` or `{ server = "name", tools = [..] }`);
    /// the model sees them as `{server}_{tool}`.
    #[serde(default)]
    pub mcp_servers: Vec<super::McpUse>,
    /// Tools whose calls wait for approval (MCP tools by the name the model sees).
    #[serde(default)]
    pub require_approval: Vec<String>,
    /// Options applied when a request leaves them unset.
    #[serde(default)]
    pub default_options: AgentDefaults,
    /// Webhooks answering this agent's hooks (a request's own hook handler wins per kind).
    #[serde(default)]
    pub webhooks: Vec<WebhookConfig>,
    /// Completion scorers run after a step that would end a run (a request's own
    /// `is_task_complete` replaces them).
    #[serde(default)]
    pub is_task_complete: Option<CompletionConfig>,
    /// Memory beyond the last messages: the embedder, semantic recall and working memory.
    #[serde(default)]
    pub memory: super::AgentMemoryConfig,
    /// Processors that see the input before the first model call (a request's own list
    /// replaces them).
    #[serde(default)]
    pub input_processors: Vec<super::ProcessorSpec>,
    /// Processors that see the streamed output, each step and the final response (a request's
    /// own list replaces them).
    #[serde(default)]
    pub output_processors: Vec<super::ProcessorSpec>,
    /// Retries in a row an output processor may ask for (none: a retry request ends the run as
    /// a tripwire, as the reference's default).
    #[serde(default)]
    pub max_processor_retries: Option<u32>,
    /// Agents it may delegate to, by key: each is offered to its model as the tool
    /// `agent-{key}` (`researcher = "research-agent"`).
    #[serde(default)]
    pub sub_agents: super::delegation::SubAgents,
    /// How it delegates to its sub-agents.
    #[serde(default)]
    pub delegation: super::delegation::DelegationConfig,
    /// Evaluations of its finished runs, by key (`[agents.scorers.relevancy]`); a request's
    /// own `scorers` replace them.
    #[serde(default)]
    pub scorers: std::collections::BTreeMap<String, super::ScorerEntry>,
}

/// A tool executed by POSTing its call to an HTTP endpoint.
///
/// Request body: `{"toolCallId", "toolName", "args", "runId", "threadId", "resourceId",
/// "requestContext"}`. A 2xx JSON answer is the result; anything else is a tool error the
/// model sees.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpToolConfig {
    /// Tool name offered to the model.
    pub name: String,
    /// What the tool does, for the model.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments (a TOML table).
    #[serde(default = "empty_object_schema")]
    pub parameters: serde_json::Value,
    /// Endpoint URL (http or https).
    pub url: String,
    /// Seconds one call may take.
    #[serde(default = "default_tool_timeout")]
    pub timeout_secs: u64,
    /// Extra request headers; a value `env:NAME` is read from that environment variable.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

fn empty_object_schema() -> serde_json::Value {
    serde_json::json!({"type": "object", "properties": {}})
}

fn default_tool_timeout() -> u64 {
    30
}

/// An agent's default run options.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentDefaults {
    /// Step cap.
    pub max_steps: Option<u32>,
    /// Tool-call concurrency.
    pub tool_call_concurrency: Option<u32>,
    /// Every call needs approval.
    pub require_tool_approval: bool,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Output token cap per model call.
    pub max_output_tokens: Option<u32>,
}

/// The known tool sets an agent may enable.
pub const TOOL_SETS: [&str; 1] = ["tasks"];

/// What a hook failure (missed deadline, gone client, failed webhook) does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnHookFailure {
    /// The run fails.
    #[default]
    Fail,
    /// The run goes on as if the hook were not set.
    Continue,
}

/// The hook kinds, as config and the JSON mapping name them.
pub const HOOK_KINDS: [&str; 12] = [
    "on_iteration_complete",
    "before_tool_call",
    "after_tool_call",
    "prepare_step",
    "is_task_complete",
    "on_delegation_start",
    "on_delegation_complete",
    "message_filter",
    "process_input",
    "process_output_step",
    "process_output_result",
    "score",
];

/// A webhook answering some of an agent's hooks: agentd POSTs each hook call as the proto's
/// JSON mapping of `agentd.v1.HookCall`; the 2xx JSON response is an `agentd.v1.HookAnswer`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// Endpoint URL (http or https).
    pub url: String,
    /// The hook kinds it answers (see [`HOOK_KINDS`]).
    pub kinds: Vec<String>,
    /// How long one call may take, in milliseconds (default: `limits.hook_deadline_ms`).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Extra request headers; a value `env:NAME` is read from that environment variable.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// What a timeout, a non-2xx answer or an unreadable body does.
    #[serde(default)]
    pub on_failure: OnHookFailure,
    /// Leave the conversation (`messages`) out of the contexts it receives.
    #[serde(default)]
    pub omit_messages: bool,
}

/// How completion scorers' verdicts combine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Every scorer passes.
    #[default]
    All,
    /// Some scorer passes.
    Any,
}

/// Completion scorers (the reference's `isTaskComplete`), from config or a request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompletionConfig {
    /// The scorers, in order.
    pub scorers: Vec<ScorerSpec>,
    /// How their verdicts combine.
    #[serde(default)]
    pub strategy: Strategy,
    /// Run the scorers at once (else in order, stopping early).
    #[serde(default = "yes")]
    pub parallel: bool,
    /// One deadline for all scorers, in milliseconds.
    #[serde(default = "default_completion_timeout")]
    pub timeout_ms: u64,
    /// Marks the feedback message (the reference still sends and saves it).
    #[serde(default)]
    pub suppress_feedback: bool,
}

fn yes() -> bool {
    true
}

/// The reference's default completion timeout (10 minutes).
fn default_completion_timeout() -> u64 {
    600_000
}

/// One completion scorer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScorerSpec {
    /// Its id.
    pub id: String,
    /// Its name in the feedback (default: the id).
    #[serde(default)]
    pub name: Option<String>,
    /// What scores.
    #[serde(flatten)]
    pub kind: ScorerKind,
}

impl ScorerSpec {
    /// The name shown in the feedback.
    pub fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }
}

/// What a completion scorer is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ScorerKind {
    /// The `is_task_complete` hook scores (client or webhook).
    Hook,
    /// 1 when the thread's task list has tasks and all are completed.
    TaskListComplete,
    /// 1 when the answer is JSON matching the schema.
    JsonSchema {
        /// The schema.
        schema: serde_json::Value,
    },
    /// A judge model scores the answer against a rubric.
    LlmJudge {
        /// The judge, a configured `provider/model`.
        model: String,
        /// What a complete answer must do.
        rubric: String,
    },
}

/// Checks every agent: unique ids, known providers and tools, webhooks and scorers.
pub(super) fn validate_agents(
    agents: &[AgentConfig],
    providers: &HashSet<&str>,
    mcp_servers: &[super::McpServerConfig],
) -> Result<(), ConfigError> {
    let mut ids = HashSet::new();
    for a in agents {
        if a.id.is_empty() || !ids.insert(a.id.as_str()) {
            return Err(invalid(&format!(
                "agent ids must be non-empty and unique: {:?}",
                a.id
            )));
        }
        let provider = a.model.split_once('/').map(|(p, _)| p);
        if !provider.is_some_and(|p| providers.contains(p)) {
            return Err(invalid(&format!(
                "agent {:?}: model {:?} must be provider/model with a configured provider",
                a.id, a.model
            )));
        }
        let mut names: HashSet<&str> = HashSet::new();
        if a.tools.iter().any(|t| t == "tasks") {
            names.extend(crate::tasks::TOOL_NAMES);
        }
        for tool in &a.http_tools {
            if tool.name.is_empty() || !names.insert(tool.name.as_str()) {
                return Err(invalid(&format!(
                    "agent {:?}: tool names must be non-empty and unique: {:?}",
                    a.id, tool.name
                )));
            }
            if !(tool.url.starts_with("http://") || tool.url.starts_with("https://")) {
                return Err(invalid(&format!(
                    "agent {:?}: http tool {:?}: url must start with http:// or https://",
                    a.id, tool.name
                )));
            }
        }
        let mcp_used = super::mcp::validate_agent_use(a, mcp_servers)?;
        if let Some(t) = a
            .require_approval
            .iter()
            .find(|t| !names.contains(t.as_str()) && !super::mcp::may_be_mcp_tool(t, &mcp_used))
        {
            return Err(invalid(&format!(
                "agent {:?}: require_approval names unknown tool {t:?}",
                a.id
            )));
        }
        if let Some(t) = a.tools.iter().find(|t| !TOOL_SETS.contains(&t.as_str())) {
            return Err(invalid(&format!(
                "agent {:?}: unknown tool set {t:?} (known: {})",
                a.id,
                TOOL_SETS.join(", ")
            )));
        }
        for (i, hook) in a.webhooks.iter().enumerate() {
            validate_webhook(&a.id, i, hook)?;
        }
        if let Some(completion) = &a.is_task_complete {
            validate_completion(&a.id, completion, providers)?;
        }
        super::memory::validate(&a.id, &a.memory, providers)?;
        for (key, entry) in &a.scorers {
            let at = format!("agents.{}.scorers.{key}", a.id);
            super::scorers::check_entry(&at, entry)
                .map_err(|(field, why)| invalid(&format!("{field}: {why}")))?;
            if let Some(model) = entry.model()
                && !model
                    .split_once('/')
                    .is_some_and(|(p, _)| providers.contains(p))
            {
                return Err(invalid(&format!(
                    "{at}.model: {model:?} names no configured provider"
                )));
            }
        }
        for (key, list) in [
            ("input_processors", &a.input_processors),
            ("output_processors", &a.output_processors),
        ] {
            super::processors::check_list(key, list)
                .map_err(|(at, why)| invalid(&format!("agent {:?}: {at} {why}", a.id)))?;
            for (i, spec) in list.iter().enumerate() {
                let Some(model) = spec.detector_model() else {
                    continue;
                };
                let provider = model.split_once('/').map(|(p, _)| p);
                if !provider.is_some_and(|p| providers.contains(p)) {
                    return Err(invalid(&format!(
                        "agent {:?}: {key}[{i}].model {model:?} must be provider/model with a configured provider",
                        a.id
                    )));
                }
            }
        }
    }
    Ok(())
}

fn validate_webhook(agent: &str, i: usize, hook: &WebhookConfig) -> Result<(), ConfigError> {
    let key = format!("agent {agent:?}: webhooks[{i}]");
    if !(hook.url.starts_with("http://") || hook.url.starts_with("https://")) {
        return Err(invalid(&format!(
            "{key}.url must start with http:// or https://"
        )));
    }
    if hook.kinds.is_empty() {
        return Err(invalid(&format!(
            "{key}.kinds must name at least one hook kind"
        )));
    }
    if let Some(kind) = hook
        .kinds
        .iter()
        .find(|k| !HOOK_KINDS.contains(&k.as_str()))
    {
        return Err(invalid(&format!(
            "{key}.kinds: unknown hook kind {kind:?} (known: {})",
            HOOK_KINDS.join(", ")
        )));
    }
    if hook.timeout_ms == Some(0) {
        return Err(invalid(&format!("{key}.timeout_ms must be > 0")));
    }
    Ok(())
}

fn validate_completion(
    agent: &str,
    completion: &CompletionConfig,
    providers: &HashSet<&str>,
) -> Result<(), ConfigError> {
    let key = format!("agent {agent:?}: is_task_complete");
    if completion.scorers.is_empty() {
        return Err(invalid(&format!(
            "{key}.scorers must name at least one scorer"
        )));
    }
    let mut ids = HashSet::new();
    for (i, scorer) in completion.scorers.iter().enumerate() {
        if scorer.id.is_empty() || !ids.insert(scorer.id.as_str()) {
            return Err(invalid(&format!(
                "{key}.scorers[{i}].id must be non-empty and unique"
            )));
        }
        if let ScorerKind::LlmJudge { model, .. } = &scorer.kind {
            let provider = model.split_once('/').map(|(p, _)| p);
            if !provider.is_some_and(|p| providers.contains(p)) {
                return Err(invalid(&format!(
                    "{key}.scorers[{i}].model {model:?} must be provider/model with a configured provider"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const BASE: &str = r#"
        [[providers]]
        name = "mock"
        base_url = "http://127.0.0.1:1/v1"
        [[agents]]
        id = "a"
        model = "mock/m"
    "#;

    fn check(extra: &str) -> Result<(), String> {
        Config::from_toml(&format!("{BASE}{extra}"))
            .map_err(|e| e.to_string())?
            .validate()
            .map_err(|e| e.to_string())
    }

    #[test]
    fn webhooks_and_scorers_parse_and_are_checked_naming_the_key() {
        check(
            r#"
            [[agents.webhooks]]
            url = "http://hooks/x"
            kinds = ["before_tool_call", "is_task_complete"]
            on_failure = "continue"
            [agents.is_task_complete]
            strategy = "any"
            [[agents.is_task_complete.scorers]]
            id = "judge"
            kind = "llm_judge"
            model = "mock/judge"
            rubric = "Says done"
            [[agents.is_task_complete.scorers]]
            id = "json"
            kind = "json_schema"
            schema = { type = "object" }
            "#,
        )
        .unwrap();
        let err = check("[[agents.webhooks]]\nurl = \"http://h\"\nkinds = [\"before_tool\"]\n")
            .unwrap_err();
        assert!(
            err.contains("webhooks[0].kinds: unknown hook kind \"before_tool\""),
            "{err}"
        );
        let err = check("[[agents.webhooks]]\nurl = \"ftp://h\"\nkinds = [\"prepare_step\"]\n")
            .unwrap_err();
        assert!(err.contains("webhooks[0].url"), "{err}");
        let judge = "[agents.is_task_complete]\n[[agents.is_task_complete.scorers]]\nid = \"j\"\nkind = \"llm_judge\"\nmodel = \"other/x\"\nrubric = \"r\"\n";
        let err = check(judge).unwrap_err();
        assert!(err.contains("is_task_complete.scorers[0].model"), "{err}");
        let err = check("[agents.is_task_complete]\nscorers = []\n").unwrap_err();
        assert!(err.contains("is_task_complete.scorers must name"), "{err}");
        let err = check("[agents.is_task_complete]\n[[agents.is_task_complete.scorers]]\nid = \"x\"\nkind = \"vibes\"\n").unwrap_err();
        assert!(err.contains("vibes"), "{err}");
    }

    #[test]
    fn processors_are_checked_at_start_up_naming_the_key() {
        check(
            r#"
            max_processor_retries = 2
            [[agents.input_processors]]
            type = "unicode-normalizer"
            [[agents.output_processors]]
            type = "token-limiter"
            limit = 500
            strategy = "abort"
            "#,
        )
        .unwrap();
        let err =
            check("[[agents.input_processors]]\ntype = \"regex-filter\"\npresets = [\"names\"]\n")
                .unwrap_err();
        assert!(
            err.contains("agent \"a\": input_processors[0].presets[0] unknown preset \"names\""),
            "{err}"
        );
        let err = check(
            "[[agents.output_processors]]\ntype = \"regex-filter\"\n[[agents.output_processors.rules]]\nname = \"r\"\npattern = \"(\"\n",
        )
        .unwrap_err();
        assert!(
            err.contains("output_processors[0].rules[0].pattern is not a valid regular expression"),
            "{err}"
        );
        let err =
            check("[[agents.input_processors]]\ntype = \"moderation-by-vibes\"\n").unwrap_err();
        assert!(err.contains("moderation-by-vibes"), "{err}");
        let err =
            check("[[agents.input_processors]]\ntype = \"moderation\"\nmodel = \"other/m\"\n")
                .unwrap_err();
        assert!(
            err.contains("input_processors[0].model \"other/m\" must be provider/model with a configured provider"),
            "{err}"
        );
        let err = check(
            "[[agents.input_processors]]\ntype = \"moderation\"\nmodel = \"mock/m\"\nstrategy = \"rewrite\"\n",
        )
        .unwrap_err();
        assert!(err.contains("input_processors[0].strategy"), "{err}");
        let err = check(
            "[[agents.input_processors]]\ntype = \"prompt-injection-detector\"\nmodel = \"mock/m\"\nthreshold = 2.0\n",
        )
        .unwrap_err();
        assert!(
            err.contains("input_processors[0].threshold must be between 0 and 1"),
            "{err}"
        );
    }
    #[test]
    fn scorers_are_checked_at_start_up_naming_the_key() {
        check(
            r#"
            [agents.scorers.relevancy]
            scorer = "answer-relevancy"
            model = "mock/judge"
            sampling = { type = "ratio", rate = 0.25 }
            [agents.scorers.tone]
            scorer = "tone"
            [agents.scorers.mine]
            scorer = "hook"
            sampling = { type = "none" }
            "#,
        )
        .unwrap();
        let cases = [
            (
                "[agents.scorers.x]\nscorer = \"vibes\"\n",
                "agents.a.scorers.x.scorer: unknown scorer \"vibes\"",
            ),
            (
                "[agents.scorers.x]\nscorer = \"faithfulness\"\n",
                "agents.a.scorers.x.model: the judged scorer \"faithfulness\" needs a judge",
            ),
            (
                "[agents.scorers.x]\nscorer = \"bias\"\nmodel = \"other/judge\"\n",
                "agents.a.scorers.x.model: \"other/judge\" names no configured provider",
            ),
            (
                "[agents.scorers.x]\nscorer = \"bias\"\nmodel = \"judge\"\n",
                "agents.a.scorers.x.model: must be provider/model",
            ),
            (
                "[agents.scorers.x]\nscorer = \"tone\"\nmodel = \"mock/judge\"\n",
                "agents.a.scorers.x.model: \"tone\" is not judged by a model",
            ),
            (
                "[agents.scorers.x]\nscorer = \"tone\"\nsampling = { type = \"ratio\", rate = 1.5 }\n",
                "agents.a.scorers.x.sampling.rate: must be between 0 and 1",
            ),
        ];
        for (toml, expected) in cases {
            let err = check(toml).unwrap_err();
            assert!(err.contains(expected), "{toml}: {err}");
        }
        let err =
            check("[agents.scorers.x]\nscorer = \"tone\"\nsampling = { type = \"sometimes\" }\n")
                .unwrap_err();
        assert!(err.contains("sometimes"), "{err}");
    }
}
