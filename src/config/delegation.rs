//! Sub-agents: the configured agents a supervisor may delegate to (`[agents.sub_agents]`, each
//! offered to its model as the tool `agent-{key}`), the delegation options, and the start-up
//! checks: known agents, tool names that collide with nothing, no cycles, bounded depth.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Deserialize;

use super::{AgentConfig, ConfigError, invalid};

/// The prefix of a delegation tool's name, as the reference names it.
pub const SUB_AGENT_TOOL_PREFIX: &str = "agent-";

/// How a supervisor delegates (`[agents.delegation]`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelegationConfig {
    /// The supervisor's model reads the sub-agent's whole result (text, ids and tool results)
    /// as JSON rather than its text alone (`includeSubAgentToolResultsInModelContext`).
    #[serde(default)]
    pub include_sub_agent_tool_results: bool,
}

/// Checks every agent's sub-agents: each key makes a tool name of its own, each names a
/// configured agent, no agent reaches itself, and no chain of delegations is deeper than
/// `max_depth`.
pub(super) fn validate(agents: &[AgentConfig], max_depth: u32) -> Result<(), ConfigError> {
    let by_id: HashMap<&str, &AgentConfig> = agents.iter().map(|a| (a.id.as_str(), a)).collect();
    for a in agents {
        for (key, target) in &a.sub_agents {
            let at = format!("agents.{}.sub_agents.{key}", a.id);
            if key.is_empty()
                || !key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(invalid(&format!(
                    "{at}: a key must be letters, digits, '_' or '-' (the model calls the tool agent-{{key}})"
                )));
            }
            if !by_id.contains_key(target.as_str()) {
                return Err(invalid(&format!(
                    "{at}: unknown agent {target:?} (configured: {})",
                    agents
                        .iter()
                        .map(|a| a.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        let names = own_tool_names(a);
        if let Some(clash) = a
            .sub_agents
            .keys()
            .map(|key| format!("{SUB_AGENT_TOOL_PREFIX}{key}"))
            .find(|name| names.contains(name))
        {
            return Err(invalid(&format!(
                "agents.{}.sub_agents: the tool {clash:?} would have the name of another of its tools",
                a.id
            )));
        }
    }
    for a in agents {
        let mut path = vec![a.id.as_str()];
        depth_from(a, &by_id, &mut path, max_depth)?;
    }
    Ok(())
}

/// The names of an agent's HTTP tools (the others cannot start with `agent-`).
fn own_tool_names(agent: &AgentConfig) -> HashSet<String> {
    agent.http_tools.iter().map(|t| t.name.clone()).collect()
}

/// Walks the delegations below `agent` (the last of `path`), failing on a cycle or a chain
/// deeper than `max_depth`.
fn depth_from<'a>(
    agent: &'a AgentConfig,
    by_id: &HashMap<&str, &'a AgentConfig>,
    path: &mut Vec<&'a str>,
    max_depth: u32,
) -> Result<(), ConfigError> {
    for (key, target) in &agent.sub_agents {
        let Some(sub) = by_id.get(target.as_str()) else {
            continue;
        };
        if path.contains(&sub.id.as_str()) {
            path.push(&sub.id);
            return Err(invalid(&format!(
                "agents.{}.sub_agents.{key}: delegation cycle {}",
                agent.id,
                path.join(" -> ")
            )));
        }
        path.push(&sub.id);
        if path.len() - 1 > max_depth as usize {
            return Err(invalid(&format!(
                "agents.{}.sub_agents.{key}: delegations nest deeper than limits.max_delegation_depth = {max_depth} ({})",
                agent.id,
                path.join(" -> ")
            )));
        }
        depth_from(sub, by_id, path, max_depth)?;
        path.pop();
    }
    Ok(())
}

/// The sub-agents of one agent, by key (what `[agents.sub_agents]` reads into).
pub type SubAgents = BTreeMap<String, String>;

#[cfg(test)]
mod tests {
    use super::super::Config;

    fn check(toml: &str) -> Result<(), String> {
        let base = "[[providers]]\nname = \"p\"\nbase_url = \"http://127.0.0.1:1/v1\"\n";
        Config::from_toml(&format!("{base}{toml}"))
            .map_err(|e| e.to_string())?
            .validate()
            .map_err(|e| e.to_string())
    }

    fn agent(id: &str, subs: &[(&str, &str)]) -> String {
        let mut out = format!("[[agents]]\nid = \"{id}\"\nmodel = \"p/m\"\n[agents.sub_agents]\n");
        for (key, target) in subs {
            out.push_str(&format!("{key} = \"{target}\"\n"));
        }
        out
    }

    #[test]
    fn sub_agents_are_checked_at_start_up_naming_the_key() {
        let ok = format!("{}{}", agent("boss", &[("r", "res")]), agent("res", &[]));
        check(&ok).expect("a supervisor and its sub-agent");

        let unknown = check(&agent("boss", &[("r", "nobody")])).expect_err("unknown");
        assert!(
            unknown.contains("agents.boss.sub_agents.r: unknown agent \"nobody\""),
            "{unknown}"
        );

        let cycle = format!(
            "{}{}{}",
            agent("a", &[("b", "b")]),
            agent("b", &[("c", "c")]),
            agent("c", &[("a", "a")])
        );
        let err = check(&cycle).expect_err("cycle");
        assert!(err.contains("delegation cycle a -> b -> c -> a"), "{err}");
        let own = check(&agent("a", &[("me", "a")])).expect_err("self");
        assert!(own.contains("delegation cycle a -> a"), "{own}");

        let deep = format!(
            "[limits]\nmax_delegation_depth = 1\n{}{}{}",
            agent("a", &[("b", "b")]),
            agent("b", &[("c", "c")]),
            agent("c", &[])
        );
        let err = check(&deep).expect_err("too deep");
        assert!(
            err.contains("agents.b.sub_agents.c: delegations nest deeper than limits.max_delegation_depth = 1 (a -> b -> c)"),
            "{err}"
        );

        let bad_key = check(&format!(
            "{}{}",
            agent("a", &[("\"x y\"", "b")]),
            agent("b", &[])
        ))
        .expect_err("key");
        assert!(bad_key.contains("agents.a.sub_agents.x y"), "{bad_key}");
    }
}
