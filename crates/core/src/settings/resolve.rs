//! From parsed arguments to the settings tree: the files they name are read, URLs
//! normalised, and what clap cannot check is checked. A role the command does not run
//! keeps its defaults.

use std::time::Duration;

use anyhow::{Context, bail};

use super::{
    BackendSettings, Endpoint, GatewayFile, GatewaySettings, HttpTimeouts, IdentityFile,
    IdentitySettings, LlmSettings, McpCaps, McpSettings, ModelProfile, RedisSettings, Settings,
    normalize_url, sqlite_url,
};
use crate::cli::{
    AllArgs, BackendArgs, CommonArgs, GatewayArgs, IdentityArgs, IssuerArgs, McpArgs, TimeoutArgs,
};
use crate::http::client_ip::{TraceCallers, TrustedProxies};
use crate::issuer::Issuer;

/// The roles a command runs, with their arguments.
#[derive(Default)]
pub struct RoleArgs<'a> {
    pub identity: Option<&'a IdentityArgs>,
    pub backend: Option<&'a BackendArgs>,
    pub mcp: Option<&'a McpArgs>,
    pub gateway: Option<&'a GatewayArgs>,
}

impl<'a> From<&'a AllArgs> for RoleArgs<'a> {
    fn from(all: &'a AllArgs) -> Self {
        Self {
            identity: Some(&all.identity),
            backend: Some(&all.backend),
            mcp: Some(&all.mcp),
            gateway: Some(&all.gateway),
        }
    }
}

impl Settings {
    pub fn resolve(common: &CommonArgs, roles: RoleArgs<'_>) -> anyhow::Result<Self> {
        let state = &common.state;
        let database_url = match &state.database_url {
            Some(url) => url.clone(),
            None => sqlite_url(&state.data_dir.join("maitred.db")),
        };
        let backend = Endpoint::new(
            common.issuer.backend_port,
            common.issuer.backend_url.as_deref(),
        )?;
        let gateway = Endpoint::new(common.gateway_port, common.gateway_url.as_deref())?;
        let mcp = Endpoint::new(common.mcp_port, common.mcp_url.as_deref())?;
        let mut identity = IdentitySettings {
            external_issuer: optional_url(common.issuer.oidc_issuer.as_deref())?,
            internal_url: optional_url(common.issuer.issuer_internal_url.as_deref())?,
            ..IdentitySettings::default()
        };
        if let Some(args) = roles.identity {
            identity_from(&mut identity, args)?;
        }
        let mcp = match roles.mcp {
            Some(args) => mcp_from(McpSettings::new(mcp, &backend, &gateway), args)?,
            None => McpSettings::new(mcp, &backend, &gateway),
        };
        let mut backend = BackendSettings::new(backend);
        if let Some(args) = roles.backend {
            if args.body_limit < 1024 {
                bail!("MAITRED_BODY_LIMIT must be at least 1024 bytes");
            }
            backend.body_limit = args.body_limit;
            backend.idempotency_ttl = within(
                args.idempotency_ttl.into(),
                "MAITRED_IDEMPOTENCY_TTL",
                Duration::from_secs(1),
                Duration::from_secs(30 * 24 * 3600),
            )?;
            backend.idempotency_wait = within(
                args.idempotency_wait.into(),
                "MAITRED_IDEMPOTENCY_WAIT",
                Duration::from_millis(100),
                Duration::from_secs(60),
            )?;
        }
        let gateway = match roles.gateway {
            Some(args) => gateway_from(GatewaySettings::new(gateway), args)?,
            None => GatewaySettings::new(gateway),
        };
        Ok(Self {
            mode: common.mode,
            data_dir: state.data_dir.clone(),
            database_url: database_url.into(),
            bind: common.bind,
            trusted_proxies: TrustedProxies::parse(
                &common.trusted_proxies,
                common.forwarded_header,
            )?,
            trace_callers: TraceCallers::parse(&common.trusted_trace_callers)?,
            plain_http_origins: common
                .plain_http_origins
                .iter()
                .filter(|o| !o.trim().is_empty())
                .map(|o| super::plain_http_origin(o))
                .collect::<anyhow::Result<_>>()?,
            timeouts: timeouts_from(&common.timeouts)?,
            metrics_token: metrics_token(common.metrics_token.as_deref())?,
            identity,
            backend,
            mcp,
            gateway,
        })
    }
}

impl IssuerArgs {
    /// The issuer, with where this process reaches it (for `maitred token`).
    pub fn location(&self) -> anyhow::Result<Issuer> {
        let backend = Endpoint::new(self.backend_port, self.backend_url.as_deref())?;
        let issuer = optional_url(self.oidc_issuer.as_deref())?.unwrap_or(backend.public_url);
        let internal = optional_url(self.issuer_internal_url.as_deref())?;
        Ok(Issuer::new(&issuer, internal.as_deref()))
    }
}

fn identity_from(identity: &mut IdentitySettings, args: &IdentityArgs) -> anyhow::Result<()> {
    if args.auth_rate_limit == 0 {
        bail!("MAITRED_AUTH_RATE_LIMIT must be at least 1");
    }
    identity.rate_limit_per_minute = args.auth_rate_limit;
    identity.access_token_ttl = args.access_token_ttl.into();
    identity.delegated_token_ttl = within(
        args.delegated_token_ttl.into(),
        "MAITRED_DELEGATED_TOKEN_TTL",
        Duration::from_secs(1),
        super::defaults::DELEGATED_TOKEN_TTL,
    )?;
    if let Some(path) = &args.config {
        identity.file = IdentityFile::load(path)?;
    }
    Ok(())
}

fn mcp_from(mut mcp: McpSettings, args: &McpArgs) -> anyhow::Result<McpSettings> {
    if let Some(url) = &args.mcp_backend_url {
        mcp.backend_url = normalize_url(url)?;
    }
    mcp.backend_timeout = within(
        args.mcp_backend_timeout.into(),
        "MAITRED_MCP_BACKEND_TIMEOUT",
        Duration::from_millis(1),
        Duration::from_secs(300),
    )?;
    mcp.client_id.clone_from(&args.mcp_client_id);
    mcp.client_secret = secret(args.mcp_client_secret.as_deref());
    if !args.mcp_allowed_hosts.is_empty() {
        mcp.allowed_hosts.clone_from(&args.mcp_allowed_hosts);
    }
    if !args.mcp_allowed_origins.is_empty() {
        mcp.allowed_origins.clone_from(&args.mcp_allowed_origins);
    }
    mcp.trusted_actors = args
        .mcp_trusted_actors
        .iter()
        .map(|a| a.trim().to_owned())
        .filter(|a| !a.is_empty())
        .collect();
    mcp.report_step_delay = within(
        args.mcp_report_step_delay.into(),
        "MAITRED_MCP_REPORT_STEP_DELAY",
        Duration::ZERO,
        Duration::from_secs(60),
    )?;
    mcp.caps = McpCaps {
        tasks_per_caller: at_least_one(args.mcp_tasks_per_caller, "MAITRED_MCP_TASKS_PER_CALLER")?,
        tasks_in_all: at_least_one(args.mcp_tasks_in_all, "MAITRED_MCP_TASKS_IN_ALL")?,
        sessions_per_caller: at_least_one(
            args.mcp_sessions_per_caller,
            "MAITRED_MCP_SESSIONS_PER_CALLER",
        )?,
        sessions_in_all: at_least_one(args.mcp_sessions_in_all, "MAITRED_MCP_SESSIONS_IN_ALL")?,
    };
    Ok(mcp)
}

fn gateway_from(defaults: GatewaySettings, args: &GatewayArgs) -> anyhow::Result<GatewaySettings> {
    let llm = match &args.llm_base_url {
        Some(url) if !url.trim().is_empty() => Some(LlmSettings {
            base_url: normalize_url(url)?,
            api_key: secret(args.llm_api_key.as_deref()),
            model: args.llm_model.clone(),
            temperature: args.llm_temperature,
            max_tokens: args.llm_max_tokens,
            tool_calls: args.llm_tool_calls,
            profile: ModelProfile {
                small: args.llm_small,
                context_window: args.llm_context_window,
                tool_budget: args.llm_tool_budget,
                result_budget: args.llm_result_budget,
                require_tool_call: args.llm_require_tool_call,
                warm_up: args.llm_warm_up,
                first_token_timeout: args.llm_first_token_timeout.map(Into::into),
                grounding: args.llm_grounding,
            },
        }),
        _ => None,
    };
    let system_prompt = match &args.system_prompt_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading the system prompt {}", path.display()))?,
        ),
        None => None,
    };
    if args.max_iterations == 0 || args.question_limit == 0 || args.tool_output_cap < 256 {
        bail!(
            "MAITRED_MAX_ITERATIONS and MAITRED_QUESTION_LIMIT must be positive, MAITRED_TOOL_OUTPUT_CAP at least 256"
        );
    }
    let file = match &args.gateway_config {
        Some(path) => GatewayFile::load(path)?,
        None => GatewayFile::default(),
    };
    let redis = args
        .redis_url
        .clone()
        .filter(|url| !url.trim().is_empty())
        .or_else(|| file.redis_url.clone())
        .map(|url| RedisSettings {
            url: url.into(),
            prefix: args.redis_prefix.clone(),
        });
    Ok(GatewaySettings {
        llm,
        system_prompt,
        file,
        redis,
        answer_lease: within(
            args.answer_lease.into(),
            "MAITRED_ANSWER_LEASE",
            Duration::from_secs(1),
            Duration::from_secs(3600),
        )?,
        resume_answers: args.resume_answers,
        resume_max: args.resume_max,
        tasks_per_person: args.tasks_per_person,
        tasks_per_server: args.tasks_per_server,
        task_give_up: within(
            args.task_give_up.into(),
            "MAITRED_TASK_GIVE_UP",
            Duration::from_secs(1),
            Duration::from_secs(7 * 24 * 3600),
        )?,
        account_keys: secret(args.account_keys.as_deref()),
        connect_timeout: within(
            args.connect_timeout.into(),
            "MAITRED_CONNECT_TIMEOUT",
            Duration::from_secs(1),
            Duration::from_secs(3600),
        )?,
        sign_ins_per_person: at_least_one(args.sign_ins_per_person, "MAITRED_SIGN_INS_PER_PERSON")?,
        mcp_url: optional_url(args.gateway_mcp_url.as_deref())?,
        mcp_client_secret: secret(args.gateway_client_secret.as_deref()),
        offline_grounding: args.llm_grounding,
        max_iterations: args.max_iterations,
        tool_output_cap: args.tool_output_cap,
        approval_timeout: args.approval_timeout.into(),
        input_timeout: args.input_timeout.into(),
        question_limit: args.question_limit,
        context_budget: args.context_budget,
        stream_grace: args.stream_grace.into(),
        ui_dir: args.ui_dir.clone(),
        sse_keepalive: within(
            args.sse_keepalive.into(),
            "MAITRED_SSE_KEEPALIVE",
            Duration::from_millis(50),
            Duration::from_secs(3600),
        )?,
        ..defaults
    })
}

fn timeouts_from(args: &TimeoutArgs) -> anyhow::Result<HttpTimeouts> {
    let (min, max) = (Duration::from_millis(10), Duration::from_secs(3600));
    Ok(HttpTimeouts {
        header_read: within(
            args.header_read_timeout.into(),
            "MAITRED_HEADER_READ_TIMEOUT",
            min,
            max,
        )?,
        body_idle: within(
            args.body_idle_timeout.into(),
            "MAITRED_BODY_IDLE_TIMEOUT",
            min,
            max,
        )?,
        body_read: within(
            args.body_read_timeout.into(),
            "MAITRED_BODY_READ_TIMEOUT",
            min,
            max,
        )?,
        request: within(
            args.request_timeout.into(),
            "MAITRED_REQUEST_TIMEOUT",
            min,
            max,
        )?,
    })
}

fn within(value: Duration, name: &str, min: Duration, max: Duration) -> anyhow::Result<Duration> {
    if value < min || value > max {
        bail!(
            "{name} must be between {} and {}",
            humantime::format_duration(min),
            humantime::format_duration(max)
        );
    }
    Ok(value)
}

/// A scrape token short enough to guess is a mistake, said at start-up.
fn metrics_token(token: Option<&str>) -> anyhow::Result<Option<secrecy::SecretString>> {
    match token.map(str::trim).filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(token) if token.len() < 16 => {
            bail!("MAITRED_METRICS_TOKEN must be at least 16 characters")
        }
        Some(token) => Ok(Some(secrecy::SecretString::from(token.to_owned()))),
    }
}

/// A cap of 0 would refuse everything: a configuration mistake, said at start-up.
fn at_least_one(value: usize, name: &str) -> anyhow::Result<usize> {
    if value == 0 {
        bail!("{name} must be at least 1");
    }
    Ok(value)
}

fn optional_url(url: Option<&str>) -> anyhow::Result<Option<String>> {
    url.map(normalize_url).transpose()
}

/// An empty secret is none at all (`FOO_SECRET=` in a compose file).
fn secret(value: Option<&str>) -> Option<secrecy::SecretString> {
    value.filter(|s| !s.is_empty()).map(Into::into)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    use super::*;

    fn resolve(args: &[&str]) -> anyhow::Result<Settings> {
        let cli = Cli::try_parse_from(args)?;
        match &cli.command {
            None => Settings::resolve(&cli.all.common, (&*cli.all).into()),
            Some(Command::Gateway(gateway)) => Settings::resolve(
                &gateway.common,
                RoleArgs {
                    gateway: Some(&gateway.gateway),
                    ..RoleArgs::default()
                },
            ),
            Some(_) => unreachable!("only all and gateway here"),
        }
    }

    #[test]
    fn defaults_are_the_same_from_the_command_line_and_in_code() {
        let parsed = resolve(&["maitred"]).unwrap();
        let built = Settings::local("data".into(), String::new());
        assert_eq!(
            parsed.gateway.approval_timeout,
            built.gateway.approval_timeout
        );
        assert_eq!(parsed.gateway.input_timeout, built.gateway.input_timeout);
        assert_eq!(parsed.gateway.max_iterations, built.gateway.max_iterations);
        assert_eq!(parsed.gateway.sse_keepalive, built.gateway.sse_keepalive);
        assert_eq!(parsed.gateway.answer_lease, built.gateway.answer_lease);
        assert_eq!(parsed.gateway.resume_answers, built.gateway.resume_answers);
        assert_eq!(parsed.gateway.resume_max, built.gateway.resume_max);
        assert_eq!(parsed.mcp.backend_timeout, built.mcp.backend_timeout);
        assert_eq!(parsed.mcp.report_step_delay, built.mcp.report_step_delay);
        assert_eq!(parsed.backend.body_limit, built.backend.body_limit);
        assert_eq!(
            parsed.backend.idempotency_ttl,
            built.backend.idempotency_ttl
        );
        assert_eq!(
            parsed.backend.idempotency_wait,
            built.backend.idempotency_wait
        );
        assert_eq!(parsed.timeouts, built.timeouts);
        assert_eq!(parsed.trace_callers, built.trace_callers);
        assert_eq!(
            parsed.identity.access_token_ttl,
            built.identity.access_token_ttl
        );
        assert_eq!(parsed.issuer(), "http://localhost:8080");
    }

    #[test]
    fn out_of_range_values_name_their_variable() {
        let error = resolve(&["maitred", "--sse-keepalive", "10ms"]).unwrap_err();
        assert!(
            error.to_string().contains("MAITRED_SSE_KEEPALIVE"),
            "{error}"
        );
        let error = resolve(&["maitred", "gateway", "--answer-lease", "2h"]).unwrap_err();
        assert!(
            error.to_string().contains("MAITRED_ANSWER_LEASE"),
            "{error}"
        );
        let error = resolve(&["maitred", "--body-limit", "10"]).unwrap_err();
        assert!(error.to_string().contains("MAITRED_BODY_LIMIT"), "{error}");
        let error = resolve(&["maitred", "gateway", "--request-timeout", "0s"]).unwrap_err();
        assert!(
            error.to_string().contains("MAITRED_REQUEST_TIMEOUT"),
            "{error}"
        );
    }
}
