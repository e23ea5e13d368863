//! What the roles run with: one tree, [`Settings`], with a branch per role.
//!
//! The rule:
//! - the command line and the environment are parsed by clap in `cli`, and only
//!   parsed; `resolve` turns the parsed arguments (and the files they name) into this
//!   tree, checking what clap cannot;
//! - every default exists once, in [`defaults`]: clap shows it in `--help` and the
//!   `Default` of each branch starts from it;
//! - durations are [`Duration`]s, written `30s`/`5m`/`250ms` or as seconds ([`span`]);
//!   secrets are [`SecretString`]s, which never print;
//! - roles read their own branch and the shared fields (mode, data dir, database,
//!   where each role is reached); nothing here depends on a role's code.
//!
//! Tests build the tree directly ([`Settings::local`]) and start it with the same
//! `App` as `main`.

pub mod defaults;
pub mod gateway_file;
pub mod identity_file;
mod llm;
pub mod mcp_servers;
pub mod prices;
mod resolve;
pub mod span;
mod timeouts;
pub mod tool_search;
mod urls;

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use secrecy::{ExposeSecret, SecretString};

pub use gateway_file::GatewayFile;
pub use identity_file::IdentityFile;
pub use llm::{GroundingMode, LlmSettings, ModelProfile, ToolCallMode};
pub use resolve::RoleArgs;
pub use timeouts::HttpTimeouts;
pub use urls::{
    Endpoint, InsecureUrl, UrlPolicy, normalize_url, origin, plain_http_origin, sqlite_url,
};

use crate::http::client_ip::{TraceCallers, TrustedProxies};
use crate::issuer::Issuer;

/// The API's path prefix; with the backend's public URL it is the backend's audience.
pub const API_PREFIX: &str = "/api/v1/resos";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Seeds demo data, demo users and generated client secrets.
    Dev,
    /// Refuses demo users and generated secrets; identity comes from the config file.
    Production,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub mode: Mode,
    /// All local state: the SQLite database, generated dev credentials, the replica id.
    pub data_dir: PathBuf,
    /// May hold a password.
    pub database_url: SecretString,
    /// The address every role listens on.
    pub bind: IpAddr,
    /// Reverse proxies believed about the client's address.
    pub trusted_proxies: TrustedProxies,
    /// Callers whose `traceparent` is continued; others start a new trace.
    pub trace_callers: TraceCallers,
    /// Origins (`http://backend:8080`) that production mode lets carry tokens over
    /// plain http: services inside the deployment's own network, acknowledged one by
    /// one (`MAITRED_PLAIN_HTTP_ORIGINS`).
    pub plain_http_origins: Vec<String>,
    /// How long slow clients may hold a connection, in every role.
    pub timeouts: HttpTimeouts,
    /// `MAITRED_METRICS_TOKEN`: when set, `/metrics` answers only a request that
    /// brings it as a bearer token; unset, anyone who reaches the port.
    pub metrics_token: Option<SecretString>,
    pub identity: IdentitySettings,
    pub backend: BackendSettings,
    pub mcp: McpSettings,
    pub gateway: GatewaySettings,
}

/// Who issues tokens, and the built-in identity provider's own settings.
#[derive(Debug, Clone)]
pub struct IdentitySettings {
    /// Set when an external OIDC issuer replaces the built-in identity provider.
    pub external_issuer: Option<String>,
    /// Where the roles reach the issuer, when not at its public URL.
    pub internal_url: Option<String>,
    /// Requests per minute to the token endpoint and the login form, per client.
    pub rate_limit_per_minute: u32,
    pub access_token_ttl: Duration,
    /// Longest life of a token exchange's token (at most 5 minutes).
    pub delegated_token_ttl: Duration,
    /// Users and clients from the config file (`MAITRED_CONFIG`).
    pub file: IdentityFile,
}

impl Default for IdentitySettings {
    fn default() -> Self {
        Self {
            external_issuer: None,
            internal_url: None,
            rate_limit_per_minute: defaults::AUTH_RATE_LIMIT_PER_MINUTE,
            access_token_ttl: defaults::ACCESS_TOKEN_TTL,
            delegated_token_ttl: defaults::DELEGATED_TOKEN_TTL,
            file: IdentityFile::default(),
        }
    }
}

/// The resOS-compatible API.
#[derive(Debug, Clone)]
pub struct BackendSettings {
    pub endpoint: Endpoint,
    /// Largest request body accepted, in bytes.
    pub body_limit: usize,
    /// How long a write's `Idempotency-Key` and stored response are kept.
    pub idempotency_ttl: Duration,
    /// How long a repeat waits for the first request with its key before a 409.
    pub idempotency_wait: Duration,
}

/// How the MCP role reaches the backend and whom it answers.
#[derive(Debug, Clone)]
pub struct McpSettings {
    pub endpoint: Endpoint,
    /// Base URL the MCP role calls the backend at (its audience stays the public one).
    pub backend_url: String,
    pub backend_timeout: Duration,
    pub client_id: String,
    /// `None` in dev mode means: the generated one from the data dir.
    pub client_secret: Option<SecretString>,
    pub allowed_hosts: Vec<String>,
    pub allowed_origins: Vec<String>,
    /// Clients whose delegated tokens are taken (the newest actor in `act`).
    pub trusted_actors: Vec<String>,
    /// The pause between the steps (days) of the long `getMonthReport` tool.
    pub report_step_delay: Duration,
    /// What one caller, and every caller together, may hold at once.
    pub caps: McpCaps,
}

/// The MCP role's caps on what callers hold: tasks running, sessions open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpCaps {
    pub tasks_per_caller: usize,
    pub tasks_in_all: usize,
    pub sessions_per_caller: usize,
    pub sessions_in_all: usize,
}

impl Default for McpCaps {
    fn default() -> Self {
        Self {
            tasks_per_caller: defaults::MCP_TASKS_PER_CALLER,
            tasks_in_all: defaults::MCP_TASKS_IN_ALL,
            sessions_per_caller: defaults::MCP_SESSIONS_PER_CALLER,
            sessions_in_all: defaults::MCP_SESSIONS_IN_ALL,
        }
    }
}

/// The chat gateway: which model, which MCP servers, and the loop's limits.
#[derive(Debug, Clone)]
pub struct GatewaySettings {
    pub endpoint: Endpoint,
    /// `None`: the built-in offline model.
    pub llm: Option<LlmSettings>,
    /// Replaces the built-in system prompt; `{today}` becomes the date.
    pub system_prompt: Option<String>,
    /// The gateway's config file (`MAITRED_GATEWAY_CONFIG`), loaded.
    pub file: GatewayFile,
    /// Where the gateway reaches maitred's own MCP role, if not at its public URL.
    pub mcp_url: Option<String>,
    /// The gateway's secret at the issuer, for its MCP token.
    pub mcp_client_secret: Option<SecretString>,
    pub max_iterations: u32,
    pub tool_output_cap: usize,
    pub approval_timeout: Duration,
    /// How long an MCP server's request for input waits for the person; then cancel.
    pub input_timeout: Duration,
    pub question_limit: usize,
    pub context_budget: usize,
    pub stream_grace: Duration,
    /// Between keep-alive comments on a quiet chat stream.
    pub sse_keepalive: Duration,
    /// Pause between the offline model's text fragments, so streaming is visible.
    pub offline_fragment_delay: Duration,
    /// The offline model's `grounding` (`MAITRED_LLM_GROUNDING` when no model is
    /// configured).
    pub offline_grounding: GroundingMode,
    /// The web UI's files on disk; `None`: the copy embedded at compile time.
    pub ui_dir: Option<PathBuf>,
    /// Where replicas share running answers; `None`: in this process.
    pub redis: Option<RedisSettings>,
    /// How long a replica's claim on a running answer lasts unless renewed.
    pub answer_lease: Duration,
    /// Whether an answer whose server stopped goes on (else: ends as interrupted).
    pub resume_answers: bool,
    /// How many times one answer may be taken over.
    pub resume_max: u32,
    /// Background tasks one person, and one server, may have running at once.
    pub tasks_per_person: usize,
    pub tasks_per_server: usize,
    /// How long a background task may run before it is given up.
    pub task_give_up: Duration,
    /// `MAITRED_ACCOUNT_KEYS`: the keys sealing connected accounts' tokens.
    pub account_keys: Option<SecretString>,
    /// How long a sign-in at a connected account's server may take.
    pub connect_timeout: Duration,
    /// Sign-ins one person may have under way (started, not yet back) at once.
    pub sign_ins_per_person: usize,
}

/// The Redis (or Valkey) gateway replicas share their running answers through.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// May hold a password.
    pub url: SecretString,
    /// Every key and channel starts with it, so deployments can share a Redis.
    pub prefix: String,
}

impl BackendSettings {
    pub fn new(endpoint: Endpoint) -> Self {
        Self {
            endpoint,
            body_limit: defaults::BODY_LIMIT,
            idempotency_ttl: defaults::IDEMPOTENCY_TTL,
            idempotency_wait: defaults::IDEMPOTENCY_WAIT,
        }
    }
}

impl McpSettings {
    /// Defaults derived from where the roles are: loopback and the public hosts.
    pub fn new(endpoint: Endpoint, backend: &Endpoint, gateway: &Endpoint) -> Self {
        let mut allowed_hosts = vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ];
        if let Some(host) = url::Url::parse(&endpoint.public_url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            && !allowed_hosts.contains(&host)
        {
            allowed_hosts.push(host);
        }
        Self {
            allowed_origins: vec![
                origin(&endpoint.public_url),
                origin(&gateway.public_url),
                "http://localhost:*".to_owned(),
                "http://127.0.0.1:*".to_owned(),
            ],
            endpoint,
            backend_url: backend.public_url.clone(),
            backend_timeout: defaults::MCP_BACKEND_TIMEOUT,
            client_id: defaults::MCP_CLIENT_ID.to_owned(),
            client_secret: None,
            allowed_hosts,
            trusted_actors: vec![defaults::MCP_TRUSTED_ACTORS.to_owned()],
            report_step_delay: defaults::MCP_REPORT_STEP_DELAY,
            caps: McpCaps::default(),
        }
    }
}

impl GatewaySettings {
    pub fn new(endpoint: Endpoint) -> Self {
        Self {
            endpoint,
            llm: None,
            system_prompt: None,
            file: GatewayFile::default(),
            mcp_url: None,
            mcp_client_secret: None,
            max_iterations: defaults::MAX_ITERATIONS,
            tool_output_cap: defaults::TOOL_OUTPUT_CAP,
            approval_timeout: defaults::APPROVAL_TIMEOUT,
            input_timeout: defaults::INPUT_TIMEOUT,
            question_limit: defaults::QUESTION_LIMIT,
            context_budget: defaults::CONTEXT_BUDGET,
            stream_grace: defaults::STREAM_GRACE,
            sse_keepalive: defaults::SSE_KEEPALIVE,
            offline_fragment_delay: defaults::OFFLINE_FRAGMENT_DELAY,
            offline_grounding: GroundingMode::Flag,
            ui_dir: None,
            redis: None,
            answer_lease: defaults::ANSWER_LEASE,
            resume_answers: true,
            resume_max: defaults::RESUME_MAX,
            tasks_per_person: defaults::TASKS_PER_PERSON,
            tasks_per_server: defaults::TASKS_PER_SERVER,
            task_give_up: defaults::TASK_GIVE_UP,
            account_keys: None,
            connect_timeout: defaults::CONNECT_TIMEOUT,
            sign_ins_per_person: defaults::SIGN_INS_PER_PERSON,
        }
    }
}

impl Settings {
    /// Dev-mode settings for roles on loopback, for tests and benchmarks. Port 0 is
    /// any free port: the app binds first and the public URLs follow.
    pub fn local(data_dir: PathBuf, database_url: String) -> Self {
        let backend = Endpoint::local("127.0.0.1", 0);
        let gateway = Endpoint::local("127.0.0.1", 0);
        let mcp = Endpoint::local("127.0.0.1", 0);
        Self {
            mode: Mode::Dev,
            data_dir,
            database_url: database_url.into(),
            bind: std::net::Ipv4Addr::LOCALHOST.into(),
            trusted_proxies: TrustedProxies::default(),
            trace_callers: TraceCallers::default(),
            plain_http_origins: Vec::new(),
            timeouts: HttpTimeouts::default(),
            metrics_token: None,
            identity: IdentitySettings::default(),
            mcp: McpSettings::new(mcp, &backend, &gateway),
            backend: BackendSettings::new(backend),
            gateway: GatewaySettings::new(gateway),
        }
    }

    /// The ports the listeners got: derived public URLs and what follows from them
    /// (the MCP role's backend URL, hosts and origins) follow too.
    pub fn bound(&mut self, backend: Option<u16>, mcp: Option<u16>, gateway: Option<u16>) {
        let before = (self.backend.endpoint.clone(), self.gateway.endpoint.clone());
        let old_mcp = self.mcp.endpoint.clone();
        if let Some(port) = backend {
            self.backend.endpoint.bound_to(port);
        }
        if let Some(port) = gateway {
            self.gateway.endpoint.bound_to(port);
        }
        if let Some(port) = mcp {
            self.mcp.endpoint.bound_to(port);
        }
        let derived = McpSettings::new(old_mcp, &before.0, &before.1);
        let now = McpSettings::new(
            self.mcp.endpoint.clone(),
            &self.backend.endpoint,
            &self.gateway.endpoint,
        );
        if self.mcp.backend_url == derived.backend_url {
            self.mcp.backend_url = now.backend_url;
        }
        if self.mcp.allowed_hosts == derived.allowed_hosts {
            self.mcp.allowed_hosts = now.allowed_hosts;
        }
        if self.mcp.allowed_origins == derived.allowed_origins {
            self.mcp.allowed_origins = now.allowed_origins;
        }
    }

    pub fn database_url(&self) -> &str {
        self.database_url.expose_secret()
    }

    /// The issuer every role trusts: the external one, or the backend's built-in one.
    pub fn issuer(&self) -> &str {
        self.identity
            .external_issuer
            .as_deref()
            .unwrap_or(&self.backend.endpoint.public_url)
    }

    /// The issuer, with where this process reaches it.
    pub fn issuer_location(&self) -> Issuer {
        Issuer::new(self.issuer(), self.identity.internal_url.as_deref())
            .with_policy(self.url_policy())
    }

    /// Which URLs may carry tokens, here and in what is discovered at run time.
    pub fn url_policy(&self) -> UrlPolicy {
        match self.mode {
            Mode::Dev => UrlPolicy::permissive(),
            Mode::Production => UrlPolicy::production(&self.plain_http_origins),
        }
    }

    pub fn builtin_identity(&self) -> bool {
        self.identity.external_issuer.is_none()
    }

    /// Audience of tokens for the backend API (RFC 8707 resource).
    pub fn backend_resource(&self) -> String {
        format!("{}{API_PREFIX}", self.backend.endpoint.public_url)
    }

    /// Audience of tokens for the chat gateway.
    pub fn gateway_resource(&self) -> String {
        self.gateway.endpoint.public_url.clone()
    }

    /// Audience of tokens for the MCP server: the canonical URL of its endpoint.
    pub fn mcp_resource(&self) -> String {
        format!("{}/mcp", self.mcp.endpoint.public_url)
    }

    /// What a production deployment must not run with.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.mode == Mode::Production && self.builtin_identity() {
            let identity = &self.identity.file;
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
                    Some(self.backend.endpoint.public_url.as_str()),
                ),
                (
                    "MAITRED_GATEWAY_URL",
                    Some(self.gateway.endpoint.public_url.as_str()),
                ),
                (
                    "MAITRED_MCP_URL",
                    Some(self.mcp.endpoint.public_url.as_str()),
                ),
                (
                    "MAITRED_OIDC_ISSUER",
                    self.identity.external_issuer.as_deref(),
                ),
            ];
            for (name, url) in public {
                if let Some(url) = url.filter(|u| !urls::secure_or_loopback(u)) {
                    bail!(
                        "{name} is {url}: production mode needs https public URLs (over plain http, cookies lose Secure and tokens cross the network in the clear); only loopback may use http"
                    );
                }
            }
            // The model gets the API key and every question and answer.
            let models = self
                .gateway
                .llm
                .iter()
                .map(|llm| ("MAITRED_LLM_BASE_URL", llm.base_url.as_str()))
                .chain(
                    self.gateway
                        .file
                        .fallbacks
                        .iter()
                        .map(|f| ("a [[fallbacks]] base_url", f.base_url.as_str())),
                );
            for (name, url) in models {
                if !urls::secure_or_loopback(url) {
                    bail!(
                        "{name} is {url}: production mode needs an https model URL (over plain http, the API key and every conversation cross the network in the clear); only loopback may use http"
                    );
                }
            }
            let policy = self.url_policy();
            for (what, url) in self.token_carriers() {
                policy.check(&what, &url)?;
            }
        }
        Ok(())
    }

    /// Every configured URL a token or client secret is sent to: where the roles reach
    /// the issuer, each other, and the gateway's MCP servers and their issuers. (A
    /// `user_oauth` server's authorization server is discovered at run time and
    /// checked then.)
    fn token_carriers(&self) -> Vec<(String, String)> {
        let mut urls = vec![(
            "MAITRED_MCP_BACKEND_URL".to_owned(),
            self.mcp.backend_url.clone(),
        )];
        if let Some(url) = &self.identity.internal_url {
            urls.push(("MAITRED_ISSUER_INTERNAL_URL".to_owned(), url.clone()));
        }
        if let Some(url) = &self.gateway.mcp_url {
            urls.push(("MAITRED_GATEWAY_MCP_URL".to_owned(), url.clone()));
        }
        for server in &self.gateway.file.mcp_servers {
            let name = &server.name;
            urls.push((format!("MCP server {name}: url"), server.url.clone()));
            if let mcp_servers::AuthConfig::ClientCredentials(auth)
            | mcp_servers::AuthConfig::TokenExchange(auth) = &server.auth
            {
                if let Some(issuer) = &auth.issuer {
                    urls.push((format!("MCP server {name}: auth.issuer"), issuer.clone()));
                }
                if let Some(token_url) = &auth.token_url {
                    urls.push((
                        format!("MCP server {name}: auth.token_url"),
                        token_url.clone(),
                    ));
                }
            }
        }
        urls
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Production mode on this machine, with the smallest identity it accepts.
    fn production() -> Settings {
        let mut settings = Settings::local(PathBuf::from("data"), "sqlite::memory:".into());
        settings.mode = Mode::Production;
        settings.identity.file = toml::from_str(
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
        settings
    }

    #[test]
    fn production_refuses_plain_http_public_urls_except_loopback() {
        let mut settings = production();
        assert!(settings.check().is_ok(), "{:?}", settings.check());
        settings.gateway.endpoint.public_url = "http://chat.example.com".into();
        let refused = settings.check().unwrap_err().to_string();
        assert!(refused.contains("MAITRED_GATEWAY_URL"), "{refused}");
        settings.gateway.endpoint.public_url = "https://chat.example.com".into();
        assert!(settings.check().is_ok());
        settings.identity.external_issuer = Some("http://id.example.com".into());
        assert!(settings.check().is_err());
        settings.identity.external_issuer = Some("http://[::1]:9000".into());
        assert!(settings.check().is_ok());
        settings.mode = Mode::Dev;
        settings.identity.external_issuer = Some("http://id.example.com".into());
        assert!(settings.check().is_ok(), "dev mode takes plain http");
    }

    /// The model's URL gets the API key and every conversation: in production mode,
    /// plain http is refused for it as for the public URLs, loopback aside.
    #[test]
    fn production_refuses_a_plain_http_model_except_loopback() {
        let mut settings = production();
        let model = |base_url: &str| LlmSettings {
            base_url: base_url.to_owned(),
            api_key: Some("sk-secret".into()),
            model: "gpt-4o-mini".into(),
            temperature: None,
            max_tokens: None,
            tool_calls: Default::default(),
            profile: Default::default(),
        };
        for refused in [
            "http://api.example.com/v1",
            "http://10.0.0.7:11434/v1",
            "http://ollama:11434/v1",
            "HTTP://api.example.com/v1",
            "ftp://api.example.com/v1",
        ] {
            settings.gateway.llm = Some(model(refused));
            let error = settings.check().unwrap_err().to_string();
            assert!(
                error.contains("MAITRED_LLM_BASE_URL") && !error.contains("sk-secret"),
                "{refused}: {error}"
            );
        }
        for allowed in [
            "https://api.example.com/v1",
            "http://localhost:11434/v1",
            "http://127.0.0.1:8000/v1",
            "http://[::1]:8000/v1",
        ] {
            settings.gateway.llm = Some(model(allowed));
            assert!(
                settings.check().is_ok(),
                "{allowed}: {:?}",
                settings.check()
            );
        }
        // A fallback is checked the same way.
        settings.gateway.file.fallbacks = toml::from_str::<GatewayFile>(
            "[[fallbacks]]\nbase_url = \"http://api.example.com/v1\"\nmodel = \"m\"\n",
        )
        .unwrap()
        .fallbacks;
        let error = settings.check().unwrap_err().to_string();
        assert!(error.contains("fallbacks"), "{error}");
        // Dev mode takes plain http, as before.
        settings.mode = Mode::Dev;
        settings.gateway.llm = Some(model("http://api.example.com/v1"));
        assert!(settings.check().is_ok());
    }

    /// Every URL a person's or the gateway's token travels to: in production, plain
    /// http is refused for each unless it is loopback or its origin was acknowledged.
    #[test]
    fn production_refuses_plain_http_for_every_url_that_carries_tokens() {
        let servers = |url: &str, auth: &str| {
            toml::from_str::<GatewayFile>(&format!(
                "[[mcp_servers]]\nname = \"far\"\nurl = \"{url}\"\n[mcp_servers.auth]\n{auth}\n"
            ))
            .unwrap()
            .mcp_servers
        };
        let exchange = |issuer: &str| {
            format!(
                "type = \"token_exchange\"\nclient_id = \"gw\"\nclient_secret = \"s\"\nissuer = \"{issuer}\""
            )
        };
        let token_url = "type = \"client_credentials\"\nclient_id = \"gw\"\nclient_secret = \"s\"\ntoken_url = \"http://id.internal:9000/token\"";
        type Tweak = Box<dyn Fn(&mut Settings)>;
        let cases: Vec<(&str, Tweak)> = vec![
            (
                "MCP server far: url",
                Box::new(move |s| {
                    s.gateway.file.mcp_servers =
                        servers("http://tools.example.com/mcp", "type = \"none\"")
                }),
            ),
            (
                "MCP server far: auth.issuer",
                Box::new(move |s| {
                    s.gateway.file.mcp_servers = servers(
                        "https://tools.example.com/mcp",
                        &exchange("http://id.example.com"),
                    )
                }),
            ),
            (
                "MCP server far: auth.token_url",
                Box::new(move |s| {
                    s.gateway.file.mcp_servers = servers("https://tools.example.com/mcp", token_url)
                }),
            ),
            (
                "MCP server far: url",
                Box::new(move |s| {
                    s.gateway.file.mcp_servers =
                        servers("http://notes.example.com/mcp", "type = \"user_oauth\"")
                }),
            ),
            (
                "MAITRED_ISSUER_INTERNAL_URL",
                Box::new(move |s| s.identity.internal_url = Some("http://backend:8080".into())),
            ),
            (
                "MAITRED_GATEWAY_MCP_URL",
                Box::new(move |s| s.gateway.mcp_url = Some("http://mcp:8082/mcp".into())),
            ),
            (
                "MAITRED_MCP_BACKEND_URL",
                Box::new(move |s| s.mcp.backend_url = "http://backend:8080".into()),
            ),
        ];
        for (name, set) in &cases {
            let mut settings = production();
            set(&mut settings);
            let error = settings.check().unwrap_err().to_string();
            assert!(error.contains(name), "{name}: {error}");
            // The operator's acknowledgement of exactly that origin lets it through.
            settings.plain_http_origins = [
                "http://tools.example.com",
                "http://id.example.com",
                "http://id.internal:9000",
                "http://notes.example.com",
                "http://backend:8080",
                "http://mcp:8082",
            ]
            .map(|o| plain_http_origin(o).unwrap())
            .to_vec();
            assert!(settings.check().is_ok(), "{name}: {:?}", settings.check());
            // Another origin is not acknowledged by it.
            settings.plain_http_origins = vec![plain_http_origin("http://other:8080").unwrap()];
            assert!(settings.check().is_err(), "{name}");
            // Dev mode takes plain http, as before.
            settings.mode = Mode::Dev;
            assert!(settings.check().is_ok(), "{name}");
        }
        // Loopback is this machine: allowed without acknowledgement.
        let mut settings = production();
        settings.gateway.file.mcp_servers = servers(
            "http://127.0.0.1:9100/mcp",
            &exchange("http://localhost:9000"),
        );
        settings.identity.internal_url = Some("http://[::1]:8080".into());
        assert!(settings.check().is_ok(), "{:?}", settings.check());
        // An acknowledgement changes nothing for the public URLs: browsers use them.
        settings.plain_http_origins = vec![plain_http_origin("http://chat.example.com").unwrap()];
        settings.gateway.endpoint.public_url = "http://chat.example.com".into();
        assert!(settings.check().is_err());
    }

    #[test]
    fn secrets_never_print() {
        let mut settings = Settings::local(
            PathBuf::from("data"),
            "postgres://maitred:hunter2-db@db/maitred".into(),
        );
        settings.mcp.client_secret = Some("hunter2-mcp".into());
        settings.gateway.mcp_client_secret = Some("hunter2-gateway".into());
        settings.gateway.llm = Some(LlmSettings {
            base_url: "https://api.example.com/v1".into(),
            api_key: Some("sk-hunter2".into()),
            model: "m".into(),
            temperature: None,
            max_tokens: None,
            tool_calls: ToolCallMode::Auto,
            profile: Default::default(),
        });
        settings.gateway.redis = Some(RedisSettings {
            url: "redis://:hunter2-redis@cache:6379".into(),
            prefix: "maitred".into(),
        });
        let printed = format!("{settings:?}");
        assert!(!printed.contains("hunter2"), "{printed}");
    }

    #[test]
    fn binding_port_zero_moves_every_derived_url() {
        let mut settings = Settings::local(PathBuf::from("data"), "sqlite::memory:".into());
        settings.bound(Some(4001), Some(4002), Some(4003));
        assert_eq!(settings.issuer(), "http://127.0.0.1:4001");
        assert_eq!(settings.mcp_resource(), "http://127.0.0.1:4002/mcp");
        assert_eq!(settings.gateway_resource(), "http://127.0.0.1:4003");
        assert_eq!(settings.mcp.backend_url, "http://127.0.0.1:4001");
        assert!(
            settings
                .mcp
                .allowed_origins
                .contains(&"http://127.0.0.1:4003".to_owned())
        );
    }
}
