//! The gateway's configuration file (`MAITRED_GATEWAY_CONFIG`, TOML): the MCP servers,
//! fallback models, resilience settings, per-user limits and per-role tool policy.
//! Every section is optional; what is left out keeps its default.
//!
//! ```toml
//! [[mcp_servers]]                       # default: maitred's own MCP role
//! name = "resos"
//! url = "https://mcp.example.com/mcp"
//! [mcp_servers.auth]
//! type = "client_credentials"
//! client_id = "maitred-gateway"
//! client_secret_env = "MCP_SECRET"
//! scopes = ["mcp.read", "mcp.write"]
//!
//! [[fallbacks]]                         # tried in order on 429 or exhausted retries
//! base_url = "https://api.groq.com/openai/v1"
//! api_key_env = "GROQ_API_KEY"
//! model = "llama-3.3-70b-versatile"
//!
//! [resilience]
//! retries = 2                           # per model, before the first token only
//! first_token_timeout_secs = 60
//! breaker_failures = 3                  # consecutive MCP failures that open the breaker
//!
//! [limits]
//! requests_per_minute = 30              # chat questions per user
//! concurrent_generations = 3            # answers running at once per user
//! concurrent_viewers = 20               # answer streams open at once per user
//!
//! [policy.USER]                         # by role; several roles: the most permissive
//! write_tools = false                   # no tool that is not read-only
//! deny = ["resos__getFeedback*"]        # exposed tool names, * as a wildcard
//!
//! [prices."gpt-4o-mini"]                # per million tokens, for budgets in money
//! input_per_million = 0.15
//! output_per_million = 0.60
//!
//! [budgets]
//! max_output_tokens = 4096              # a turn's cap, reserved before it runs
//!
//! [tool_search]                         # many tools: most found by search (docs/tool-search.md)
//! defer_above = 40
//! ```

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use serde::Deserialize;

use super::mcp_servers::{ServerConfig, check_servers, secret};
use super::{LlmSettings, span};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayFile {
    #[serde(default)]
    pub mcp_servers: Vec<ServerConfig>,
    #[serde(default)]
    pub fallbacks: Vec<FallbackConfig>,
    #[serde(default)]
    pub resilience: Resilience,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default = "default_policy")]
    pub policy: BTreeMap<String, RolePolicy>,
    /// Redis shared by the gateway replicas; `MAITRED_REDIS_URL` wins over it.
    #[serde(default)]
    pub redis_url: Option<String>,
    /// Prices per model name, for budgets in money (see [`super::prices`]).
    #[serde(default)]
    pub prices: BTreeMap<String, super::prices::Price>,
    #[serde(default)]
    pub budgets: super::prices::BudgetSettings,
    #[serde(default)]
    pub tool_search: super::tool_search::ToolSearch,
}

/// With no `[policy]` at all, people with only the USER role may read but not change
/// data; OPERATOR and ADMIN may change it, each change approved.
fn default_policy() -> BTreeMap<String, RolePolicy> {
    BTreeMap::from([(
        "USER".to_owned(),
        RolePolicy {
            write_tools: false,
            deny: Vec::new(),
        },
    )])
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FallbackConfig {
    pub base_url: String,
    pub model: String,
    pub api_key: Option<secrecy::SecretString>,
    pub api_key_env: Option<String>,
    /// `auto` (the default), `native` or `text`: how its tool calls are read.
    #[serde(default)]
    pub tool_calls: crate::settings::ToolCallMode,
    /// A local model's needs (`[fallbacks.profile]`): `small`, `context_window`,
    /// `tool_budget`, `require_tool_call`, `first_token_timeout`.
    #[serde(default)]
    pub profile: super::ModelProfile,
}

/// Durations are seconds (`_secs` keys) or milliseconds (`_ms`), or, under the name
/// without the suffix, humantime text (`first_token_timeout = "90s"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Resilience {
    /// Retries per model on connection errors and 5xx, before the first token only.
    pub retries: u32,
    #[serde(
        rename = "backoff_ms",
        alias = "backoff",
        deserialize_with = "span::millis"
    )]
    pub backoff: Duration,
    #[serde(
        rename = "backoff_max_ms",
        alias = "backoff_max",
        deserialize_with = "span::millis"
    )]
    pub backoff_max: Duration,
    /// Longest Retry-After waited for on a 429 when no fallback is left.
    #[serde(
        rename = "max_retry_after_secs",
        alias = "max_retry_after",
        deserialize_with = "span::deserialize"
    )]
    pub max_retry_after: Duration,
    #[serde(
        rename = "first_token_timeout_secs",
        alias = "first_token_timeout",
        deserialize_with = "span::deserialize"
    )]
    pub first_token_timeout: Duration,
    #[serde(
        rename = "inter_token_timeout_secs",
        alias = "inter_token_timeout",
        deserialize_with = "span::deserialize"
    )]
    pub inter_token_timeout: Duration,
    /// Requests one model may have open at once; more wait their turn.
    pub model_concurrency: usize,
    /// Requests per minute to one model (none: unlimited); over it, requests wait.
    pub model_requests_per_minute: Option<u32>,
    /// Longest a request waits for a concurrency or rate-limit slot.
    #[serde(
        rename = "model_wait_secs",
        alias = "model_wait",
        deserialize_with = "span::deserialize"
    )]
    pub model_wait: Duration,
    /// Consecutive failures of an MCP server that open its circuit breaker.
    pub breaker_failures: u32,
    #[serde(
        rename = "breaker_cooldown_secs",
        alias = "breaker_cooldown",
        deserialize_with = "span::deserialize"
    )]
    pub breaker_cooldown: Duration,
    /// At shutdown, how long running answers may take to finish.
    #[serde(
        rename = "shutdown_grace_secs",
        alias = "shutdown_grace",
        deserialize_with = "span::deserialize"
    )]
    pub shutdown_grace: Duration,
}

impl Default for Resilience {
    fn default() -> Self {
        Self {
            retries: 2,
            backoff: Duration::from_millis(250),
            backoff_max: Duration::from_secs(4),
            max_retry_after: Duration::from_secs(20),
            first_token_timeout: Duration::from_secs(60),
            inter_token_timeout: Duration::from_secs(60),
            model_concurrency: 16,
            model_requests_per_minute: None,
            model_wait: Duration::from_secs(30),
            breaker_failures: 3,
            breaker_cooldown: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Questions per minute per user.
    pub requests_per_minute: u32,
    /// Answers running at once per user.
    pub concurrent_generations: usize,
    /// Answer streams open at once per user: asking and watching again alike.
    pub concurrent_viewers: usize,
    /// Tool calls one question may make in all.
    pub tool_calls_per_question: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            requests_per_minute: 30,
            concurrent_generations: 3,
            concurrent_viewers: 20,
            tool_calls_per_question: 25,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RolePolicy {
    /// Whether tools that are not read-only may be called at all.
    pub write_tools: bool,
    /// Exposed tool names (`server__tool`, `*` matches any run) that are refused.
    pub deny: Vec<String>,
}

impl Default for RolePolicy {
    fn default() -> Self {
        Self {
            write_tools: true,
            deny: Vec::new(),
        }
    }
}

impl Default for GatewayFile {
    fn default() -> Self {
        Self {
            mcp_servers: Vec::new(),
            fallbacks: Vec::new(),
            resilience: Resilience::default(),
            limits: Limits::default(),
            policy: default_policy(),
            redis_url: None,
            prices: BTreeMap::new(),
            budgets: super::prices::BudgetSettings::default(),
            tool_search: super::tool_search::ToolSearch::default(),
        }
    }
}

impl GatewayFile {
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the gateway config {}", path.display()))?;
        let file: Self = toml::from_str(&text)
            .with_context(|| format!("parsing the gateway config {}", path.display()))?;
        check_servers(&file.mcp_servers)?;
        file.tool_search.check()?;
        if file.resilience.model_concurrency == 0 || file.limits.concurrent_generations == 0 {
            anyhow::bail!("model_concurrency and concurrent_generations must be at least 1");
        }
        if file.limits.concurrent_viewers == 0 {
            anyhow::bail!("concurrent_viewers must be at least 1");
        }
        Ok(file)
    }

    pub fn fallback_models(&self) -> anyhow::Result<Vec<LlmSettings>> {
        self.fallbacks
            .iter()
            .map(|f| {
                let api_key = match (&f.api_key, &f.api_key_env) {
                    (None, None) => None,
                    (key, env) => Some(secret(
                        key,
                        env,
                        &format!("fallback model {} API key", f.model),
                    )?),
                };
                Ok(LlmSettings {
                    base_url: f.base_url.trim_end_matches('/').to_owned(),
                    api_key,
                    model: f.model.clone(),
                    temperature: None,
                    max_tokens: None,
                    tool_calls: f.tool_calls,
                    profile: f.profile.clone(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fallback_says_what_a_local_model_needs() {
        let file: GatewayFile = toml::from_str(
            r#"
            [[fallbacks]]
            base_url = "http://127.0.0.1:11434/v1"
            model = "qwen2.5:0.5b"
            [fallbacks.profile]
            small = true
            context_window = 8192
            require_tool_call = true
            first_token_timeout = "3m"
            "#,
        )
        .unwrap();
        let profile = &file.fallback_models().unwrap()[0].profile;
        assert!(profile.small && profile.require_tool_call);
        assert_eq!(profile.context_window, Some(8192));
        assert_eq!(profile.tool_budget, None);
        assert_eq!(
            profile.first_token_timeout,
            Some(std::time::Duration::from_secs(180))
        );
        let typo = toml::from_str::<GatewayFile>(
            "[[fallbacks]]\nbase_url = \"http://x\"\nmodel = \"m\"\n[fallbacks.profile]\nsmal = true\n",
        );
        assert!(typo.unwrap_err().to_string().contains("smal"));
    }

    /// The README's example is what an operator copies: it must load as documented.
    #[test]
    fn the_readme_example_loads() {
        let readme = include_str!("../../../../README.md");
        let start = readme.find("```toml\n[[fallbacks]]").unwrap() + "```toml\n".len();
        let end = start + readme[start..].find("```").unwrap();
        let file: GatewayFile = toml::from_str(&readme[start..end]).unwrap();
        assert_eq!(file.fallbacks[0].model, "llama-3.3-70b-versatile");
        assert_eq!(file.resilience.max_retry_after, Duration::from_secs(20));
        assert_eq!(file.resilience.model_requests_per_minute, Some(0));
        assert_eq!(file.limits.concurrent_generations, 3);
        assert!(!file.policy["USER"].write_tools);
    }

    #[test]
    fn durations_read_as_seconds_or_text() {
        let file: GatewayFile = toml::from_str(
            "[resilience]\nfirst_token_timeout_secs = 90\nbackoff_ms = 20\nshutdown_grace = \"1m\"\n",
        )
        .unwrap();
        assert_eq!(file.resilience.first_token_timeout, Duration::from_secs(90));
        assert_eq!(file.resilience.backoff, Duration::from_millis(20));
        assert_eq!(file.resilience.shutdown_grace, Duration::from_secs(60));
    }

    #[test]
    fn unknown_keys_are_refused_with_their_name() {
        let error = toml::from_str::<GatewayFile>("[resilience]\nretrys = 3\n").unwrap_err();
        assert!(error.to_string().contains("retrys"), "{error}");
    }
}
