//! Resolved settings: what the roles run with once flags, environment and defaults are
//! combined. Tests build `Settings` directly, so nothing here depends on clap.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::cli::{GatewayArgs, GlobalArgs, Mode};
use crate::http::client_ip::TrustedProxies;
use crate::identity::IdentityConfig;
use crate::issuer::Issuer;

/// The API's path prefix; with the backend's public URL it is the backend's audience.
pub const API_PREFIX: &str = "/api/v1/resos";

#[derive(Debug, Clone)]
pub struct Settings {
    pub mode: Mode,
    pub data_dir: PathBuf,
    pub database_url: String,
    pub bind: IpAddr,
    pub backend: Endpoint,
    pub gateway: Endpoint,
    pub mcp: Endpoint,
    /// Set when an external OIDC issuer replaces the built-in identity provider.
    pub external_issuer: Option<String>,
    /// Where the roles reach the issuer, when not at its public URL.
    pub issuer_internal_url: Option<String>,
    pub body_limit: usize,
    pub auth_rate_limit_per_minute: u32,
    pub access_token_ttl: Duration,
    /// Reverse proxies believed about the client's address.
    pub trusted_proxies: TrustedProxies,
    pub mcp_role: McpSettings,
    pub gateway_role: GatewaySettings,
    pub file: FileConfig,
}

/// The chat gateway: which model, which MCP servers, and the loop's limits.
#[derive(Debug, Clone)]
pub struct GatewaySettings {
    /// `None`: the built-in offline model.
    pub llm: Option<LlmSettings>,
    /// Replaces the built-in system prompt; `{today}` becomes the date.
    pub system_prompt: Option<String>,
    /// The gateway's config file, loaded.
    pub file: crate::gateway::config::GatewayFile,
    /// Where the gateway reaches maitred's own MCP role, if not at its public URL.
    pub mcp_url: Option<String>,
    /// The gateway's secret at the issuer, for its MCP token.
    pub mcp_client_secret: Option<String>,
    pub max_iterations: u32,
    pub tool_output_cap: usize,
    pub approval_timeout: Duration,
    pub question_limit: usize,
    pub context_budget: usize,
    pub stream_grace: Duration,
    /// Between keep-alive comments on a quiet chat stream.
    pub sse_keepalive: Duration,
    /// Pause between the offline model's text fragments, so streaming is visible.
    pub offline_fragment_delay: Duration,
    /// The web UI's files on disk; `None`: the copy embedded at compile time.
    pub ui_dir: Option<std::path::PathBuf>,
    /// Where replicas share running answers; `None`: in this process.
    pub redis: Option<crate::gateway::live::redis::RedisSettings>,
    /// How long a replica's claim on a running answer lasts unless renewed.
    pub answer_lease: Duration,
}

#[derive(Debug, Clone)]
pub struct LlmSettings {
    pub base_url: String,
    pub api_key: Option<String>,
    pub model: String,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    /// How the model's tool calls are read: native deltas, text, or either.
    pub tool_calls: crate::gateway::llm::text_calls::ToolCallMode,
}

impl Default for GatewaySettings {
    fn default() -> Self {
        Self {
            llm: None,
            system_prompt: None,
            file: crate::gateway::config::GatewayFile::default(),
            mcp_url: None,
            mcp_client_secret: None,
            max_iterations: 10,
            tool_output_cap: 16 * 1024,
            approval_timeout: Duration::from_secs(300),
            question_limit: 4000,
            context_budget: 24_000,
            stream_grace: Duration::from_secs(30),
            sse_keepalive: Duration::from_secs(15),
            offline_fragment_delay: Duration::from_millis(15),
            ui_dir: None,
            redis: None,
            answer_lease: Duration::from_secs(15),
        }
    }
}

impl GatewaySettings {
    pub fn from_args(args: &GatewayArgs) -> anyhow::Result<Self> {
        let llm = match &args.llm_base_url {
            Some(url) if !url.trim().is_empty() => Some(LlmSettings {
                base_url: normalize_url(url)?,
                api_key: args.llm_api_key.clone().filter(|k| !k.is_empty()),
                model: args.llm_model.clone(),
                temperature: args.llm_temperature,
                max_tokens: args.llm_max_tokens,
                tool_calls: args.llm_tool_calls,
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
        if !(args.sse_keepalive >= 0.05 && args.sse_keepalive <= 3600.0) {
            bail!("MAITRED_SSE_KEEPALIVE must be between 0.05 and 3600 seconds");
        }
        if args.max_iterations == 0 || args.question_limit == 0 || args.tool_output_cap < 256 {
            bail!(
                "MAITRED_MAX_ITERATIONS and MAITRED_QUESTION_LIMIT must be positive, MAITRED_TOOL_OUTPUT_CAP at least 256"
            );
        }
        if !(1..=3600).contains(&args.answer_lease) {
            bail!("MAITRED_ANSWER_LEASE must be between 1 and 3600 seconds");
        }
        let file = match &args.gateway_config {
            Some(path) => crate::gateway::config::GatewayFile::load(path)?,
            None => crate::gateway::config::GatewayFile::default(),
        };
        let redis = args
            .redis_url
            .clone()
            .filter(|url| !url.trim().is_empty())
            .or_else(|| file.redis_url.clone())
            .map(|url| crate::gateway::live::redis::RedisSettings {
                url,
                prefix: args.redis_prefix.clone(),
            });
        Ok(Self {
            llm,
            system_prompt,
            file,
            redis,
            answer_lease: Duration::from_secs(args.answer_lease),
            mcp_url: args
                .gateway_mcp_url
                .as_deref()
                .map(normalize_url)
                .transpose()?,
            mcp_client_secret: args.gateway_client_secret.clone().filter(|s| !s.is_empty()),
            max_iterations: args.max_iterations,
            tool_output_cap: args.tool_output_cap,
            approval_timeout: Duration::from_secs(args.approval_timeout),
            question_limit: args.question_limit,
            context_budget: args.context_budget,
            stream_grace: Duration::from_secs(args.stream_grace),
            ui_dir: args.ui_dir.clone(),
            sse_keepalive: Duration::from_secs_f64(args.sse_keepalive),
            ..Self::default()
        })
    }
}

/// How the MCP role reaches the backend and whom it answers.
#[derive(Debug, Clone)]
pub struct McpSettings {
    /// Base URL the MCP role calls the backend at (its audience stays the public one).
    pub backend_url: String,
    pub backend_timeout: Duration,
    pub client_id: String,
    /// `None` in dev mode means: the generated one from the data dir.
    pub client_secret: Option<String>,
    pub allowed_hosts: Vec<String>,
    pub allowed_origins: Vec<String>,
}

impl McpSettings {
    /// Defaults derived from the endpoints: loopback and the public hosts.
    pub fn defaults(backend: &Endpoint, gateway: &Endpoint, mcp: &Endpoint) -> Self {
        let mut allowed_hosts = vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ];
        if let Some(host) = url::Url::parse(&mcp.public_url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            && !allowed_hosts.contains(&host)
        {
            allowed_hosts.push(host);
        }
        Self {
            backend_url: backend.public_url.clone(),
            backend_timeout: Duration::from_secs(5),
            client_id: "maitred-mcp".to_owned(),
            client_secret: None,
            allowed_hosts,
            allowed_origins: vec![
                origin(&mcp.public_url),
                origin(&gateway.public_url),
                "http://localhost:*".to_owned(),
                "http://127.0.0.1:*".to_owned(),
            ],
        }
    }
}

/// `scheme://host:port` of a URL, with the port spelt out.
fn origin(url: &str) -> String {
    url::Url::parse(url)
        .ok()
        .and_then(|u| {
            let port = u.port_or_known_default()?;
            Some(format!("{}://{}:{port}", u.scheme(), u.host_str()?))
        })
        .unwrap_or_else(|| url.to_owned())
}

/// Where a role listens and the URL the outside world knows it by (they differ
/// behind a reverse proxy).
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub port: u16,
    pub public_url: String,
}

impl Endpoint {
    pub fn new(port: u16, public_url: Option<&str>) -> anyhow::Result<Self> {
        let public_url = match public_url {
            Some(url) => normalize_url(url)?,
            None => format!("http://localhost:{port}"),
        };
        Ok(Self { port, public_url })
    }
}

/// The optional TOML file (`MAITRED_CONFIG`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub identity: IdentityConfig,
}

impl FileConfig {
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config file {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("parsing config file {}", path.display()))
    }
}

impl Settings {
    /// Dev-mode settings for roles on loopback ports, for tests and benchmarks
    /// (port 0 listeners bound first, their ports passed here).
    pub fn local(
        data_dir: PathBuf,
        database_url: String,
        backend_port: u16,
        gateway_port: u16,
        mcp_port: u16,
    ) -> Self {
        let endpoint = |port: u16| Endpoint {
            port,
            public_url: format!("http://127.0.0.1:{port}"),
        };
        let (backend, gateway, mcp) = (
            endpoint(backend_port),
            endpoint(gateway_port),
            endpoint(mcp_port),
        );
        let mcp_role = McpSettings::defaults(&backend, &gateway, &mcp);
        Self {
            mode: Mode::Dev,
            data_dir,
            database_url,
            bind: std::net::Ipv4Addr::LOCALHOST.into(),
            backend,
            gateway,
            mcp,
            external_issuer: None,
            issuer_internal_url: None,
            body_limit: 64 * 1024,
            auth_rate_limit_per_minute: 120,
            access_token_ttl: Duration::from_secs(900),
            trusted_proxies: TrustedProxies::default(),
            mcp_role,
            gateway_role: GatewaySettings::default(),
            file: FileConfig::default(),
        }
    }

    pub fn from_args(args: &GlobalArgs, gateway_args: &GatewayArgs) -> anyhow::Result<Self> {
        let database_url = match &args.database_url {
            Some(url) => url.clone(),
            None => sqlite_url(&args.data_dir.join("maitred.db")),
        };
        let file = match &args.config {
            Some(path) => FileConfig::load(path)?,
            None => FileConfig::default(),
        };
        let external_issuer = args.oidc_issuer.as_deref().map(normalize_url).transpose()?;
        let backend = Endpoint::new(args.backend_port, args.backend_url.as_deref())?;
        let gateway = Endpoint::new(args.gateway_port, args.gateway_url.as_deref())?;
        let mcp = Endpoint::new(args.mcp_port, args.mcp_url.as_deref())?;
        let mut mcp_role = McpSettings::defaults(&backend, &gateway, &mcp);
        if let Some(url) = &args.mcp_backend_url {
            mcp_role.backend_url = normalize_url(url)?;
        }
        if !(args.mcp_backend_timeout > 0.0 && args.mcp_backend_timeout <= 300.0) {
            bail!("MAITRED_MCP_BACKEND_TIMEOUT must be between 0 and 300 seconds");
        }
        mcp_role.backend_timeout = Duration::from_secs_f64(args.mcp_backend_timeout);
        mcp_role.client_id = args.mcp_client_id.clone();
        mcp_role.client_secret = args.mcp_client_secret.clone().filter(|s| !s.is_empty());
        if !args.mcp_allowed_hosts.is_empty() {
            mcp_role.allowed_hosts = args.mcp_allowed_hosts.clone();
        }
        if !args.mcp_allowed_origins.is_empty() {
            mcp_role.allowed_origins = args.mcp_allowed_origins.clone();
        }
        Ok(Self {
            mode: args.mode,
            data_dir: args.data_dir.clone(),
            database_url,
            bind: args.bind,
            backend,
            gateway,
            mcp,
            mcp_role,
            gateway_role: GatewaySettings::from_args(gateway_args)?,
            external_issuer,
            issuer_internal_url: args
                .issuer_internal_url
                .as_deref()
                .map(normalize_url)
                .transpose()?,
            body_limit: args.body_limit,
            auth_rate_limit_per_minute: args.auth_rate_limit,
            access_token_ttl: Duration::from_secs(args.access_token_ttl),
            trusted_proxies: TrustedProxies::parse(&args.trusted_proxies, args.forwarded_header)?,
            file,
        })
    }

    /// The issuer every role trusts: the external one, or the backend's built-in one.
    pub fn issuer(&self) -> &str {
        self.external_issuer
            .as_deref()
            .unwrap_or(&self.backend.public_url)
    }

    /// The issuer, with where this process reaches it.
    pub fn issuer_location(&self) -> Issuer {
        Issuer::new(self.issuer(), self.issuer_internal_url.as_deref())
    }

    pub fn builtin_identity(&self) -> bool {
        self.external_issuer.is_none()
    }

    /// Audience of tokens for the backend API (RFC 8707 resource).
    pub fn backend_resource(&self) -> String {
        format!("{}{API_PREFIX}", self.backend.public_url)
    }

    /// Audience of tokens for the chat gateway.
    pub fn gateway_resource(&self) -> String {
        self.gateway.public_url.clone()
    }

    /// Audience of tokens for the MCP server: the canonical URL of its endpoint.
    pub fn mcp_resource(&self) -> String {
        format!("{}/mcp", self.mcp.public_url)
    }

    pub fn check(&self) -> anyhow::Result<()> {
        if self.mode == Mode::Production && self.builtin_identity() {
            let identity = &self.file.identity;
            if identity.users.is_empty() || identity.clients.is_empty() {
                bail!(
                    "production mode needs users and clients in the config file (MAITRED_CONFIG, [[identity.users]] and [[identity.clients]]); demo users and generated secrets are for dev mode only"
                );
            }
        }
        if self.mode == Mode::Production {
            let public = [
                (
                    "MAITRED_BACKEND_URL",
                    Some(self.backend.public_url.as_str()),
                ),
                (
                    "MAITRED_GATEWAY_URL",
                    Some(self.gateway.public_url.as_str()),
                ),
                ("MAITRED_MCP_URL", Some(self.mcp.public_url.as_str())),
                ("MAITRED_OIDC_ISSUER", self.external_issuer.as_deref()),
            ];
            for (name, url) in public {
                if let Some(url) = url.filter(|u| !secure_or_loopback(u)) {
                    bail!(
                        "{name} is {url}: production mode needs https public URLs (over plain http, cookies lose Secure and tokens cross the network in the clear); only loopback may use http"
                    );
                }
            }
        }
        if self.body_limit < 1024 {
            bail!("MAITRED_BODY_LIMIT must be at least 1024 bytes");
        }
        if self.auth_rate_limit_per_minute == 0 {
            bail!("MAITRED_AUTH_RATE_LIMIT must be at least 1");
        }
        Ok(())
    }
}

/// https, or http to this machine only (a TLS-terminating proxy on the same host).
fn secure_or_loopback(url: &str) -> bool {
    let Ok(url) = url::Url::parse(url) else {
        return false;
    };
    match (url.scheme(), url.host()) {
        ("https", _) => true,
        ("http", Some(url::Host::Domain(host))) => host.eq_ignore_ascii_case("localhost"),
        ("http", Some(url::Host::Ipv4(ip))) => ip.is_loopback(),
        ("http", Some(url::Host::Ipv6(ip))) => ip.is_loopback(),
        _ => false,
    }
}

pub fn sqlite_url(path: &Path) -> String {
    format!("sqlite://{}?mode=rwc", path.display())
}

fn normalize_url(raw: &str) -> anyhow::Result<String> {
    let url = url::Url::parse(raw).with_context(|| format!("{raw:?} is not a URL"))?;
    if !matches!(url.scheme(), "http" | "https") {
        bail!("{raw:?} must be an http or https URL");
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn production_refuses_plain_http_public_urls_except_loopback() {
        let mut settings =
            Settings::local(PathBuf::from("data"), "sqlite::memory:".into(), 1, 2, 3);
        settings.mode = Mode::Production;
        settings.file.identity = toml::from_str(
            r#"
            [[users]]
            username = "alice"
            password_hash = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaA"
            [[clients]]
            id = "maitred-cli"
            secret = "a-long-random-secret-1"
            grants = ["client_credentials"]
            scopes = ["chat.read"]
            audiences = ["gateway"]
            "#,
        )
        .unwrap();
        assert!(settings.check().is_ok(), "{:?}", settings.check());
        settings.gateway.public_url = "http://chat.example.com".into();
        let refused = settings.check().unwrap_err().to_string();
        assert!(refused.contains("MAITRED_GATEWAY_URL"), "{refused}");
        settings.gateway.public_url = "https://chat.example.com".into();
        assert!(settings.check().is_ok());
        settings.external_issuer = Some("http://id.example.com".into());
        assert!(settings.check().is_err());
        settings.external_issuer = Some("http://[::1]:9000".into());
        assert!(settings.check().is_ok());
        settings.mode = Mode::Dev;
        settings.external_issuer = Some("http://id.example.com".into());
        assert!(settings.check().is_ok(), "dev mode takes plain http");
    }

    #[test]
    fn public_urls_lose_their_trailing_slash() {
        let endpoint = Endpoint::new(8080, Some("https://api.example.com/")).unwrap();
        assert_eq!(endpoint.public_url, "https://api.example.com");
        assert!(Endpoint::new(1, Some("ftp://x")).is_err());
        assert_eq!(
            Endpoint::new(8082, None).unwrap().public_url,
            "http://localhost:8082"
        );
    }
}
