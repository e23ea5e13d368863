//! Command line and environment: every setting has a flag and an environment variable,
//! and every one has a default that runs on a laptop with nothing configured.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::http::client_ip::ForwardedHeader;

#[derive(Debug, Parser)]
#[command(
    name = "maitred",
    version,
    about = "A streaming chat gateway for tool-using LLMs, with a resOS-compatible reservation backend and a built-in identity provider"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(flatten)]
    pub gateway: GatewayArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run every role in one process (the default).
    All,
    /// Run the backend role: the resOS API and the built-in identity provider.
    Backend,
    /// Run the MCP role: the restaurant's tools over Streamable HTTP (or stdio).
    Mcp(McpArgs),
    /// Run the gateway role: the chat API (SSE), conversations and the browser login.
    Gateway,
    /// Apply the database migrations and exit.
    Migrate,
    /// Get an access token with a client's credentials and print only the token.
    Token(TokenArgs),
    /// Serve a scripted OpenAI-compatible upstream (tests, benchmarks, demos).
    ScriptedLlm(ScriptedLlmArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Seeds demo data, demo users and generated client secrets.
    Dev,
    /// Refuses demo users and generated secrets; identity comes from the config file.
    Production,
}

#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Directory for all local state (SQLite database, generated dev credentials).
    #[arg(long, env = "MAITRED_DATA_DIR", default_value = "data", global = true)]
    pub data_dir: PathBuf,

    /// Database URL (sqlite://… or postgres://…); default: SQLite under the data dir.
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    pub database_url: Option<String>,

    /// Log format.
    #[arg(long, env = "MAITRED_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,

    /// dev (demo data and credentials) or production (refuses them).
    #[arg(long, env = "MAITRED_MODE", value_enum, default_value_t = Mode::Dev, global = true)]
    pub mode: Mode,

    /// TOML file with users and clients of the built-in identity provider.
    #[arg(long, env = "MAITRED_CONFIG", global = true)]
    pub config: Option<PathBuf>,

    /// Address every role listens on.
    #[arg(long, env = "MAITRED_BIND", default_value = "127.0.0.1", global = true)]
    pub bind: IpAddr,

    /// Port of the backend role.
    #[arg(
        long,
        env = "MAITRED_BACKEND_PORT",
        default_value_t = 8080,
        global = true
    )]
    pub backend_port: u16,

    /// Port of the gateway role.
    #[arg(
        long,
        env = "MAITRED_GATEWAY_PORT",
        default_value_t = 8081,
        global = true
    )]
    pub gateway_port: u16,

    /// Port of the MCP role.
    #[arg(long, env = "MAITRED_MCP_PORT", default_value_t = 8082, global = true)]
    pub mcp_port: u16,

    /// Public URL of the backend role (default http://localhost:<backend-port>).
    #[arg(long, env = "MAITRED_BACKEND_URL", global = true)]
    pub backend_url: Option<String>,

    /// Public URL of the gateway role (default http://localhost:<gateway-port>).
    #[arg(long, env = "MAITRED_GATEWAY_URL", global = true)]
    pub gateway_url: Option<String>,

    /// Public URL of the MCP role (default http://localhost:<mcp-port>).
    #[arg(long, env = "MAITRED_MCP_URL", global = true)]
    pub mcp_url: Option<String>,

    /// An external OIDC issuer (Keycloak, Auth0, Entra…). When set, the built-in
    /// identity provider is off and every role validates tokens against this issuer.
    #[arg(long, env = "MAITRED_OIDC_ISSUER", global = true)]
    pub oidc_issuer: Option<String>,

    /// Where the roles reach the issuer from inside a deployment, when its public URL
    /// does not resolve there (e.g. http://backend:8080 in docker-compose).
    #[arg(long, env = "MAITRED_ISSUER_INTERNAL_URL", global = true)]
    pub issuer_internal_url: Option<String>,

    /// Largest request body the backend accepts, in bytes.
    #[arg(long, env = "MAITRED_BODY_LIMIT", default_value_t = 64 * 1024, global = true)]
    pub body_limit: usize,

    /// Requests per minute one client address may make to the token endpoint and the login form.
    #[arg(
        long,
        env = "MAITRED_AUTH_RATE_LIMIT",
        default_value_t = 120,
        global = true
    )]
    pub auth_rate_limit: u32,

    /// Lifetime of access tokens, in seconds.
    #[arg(
        long,
        env = "MAITRED_ACCESS_TOKEN_TTL",
        default_value_t = 900,
        global = true
    )]
    pub access_token_ttl: u64,

    /// Where the MCP role reaches the backend (default: the backend's public URL).
    #[arg(long, env = "MAITRED_MCP_BACKEND_URL", global = true)]
    pub mcp_backend_url: Option<String>,

    /// Seconds the MCP role waits for the backend before a tool call is "unavailable".
    #[arg(
        long,
        env = "MAITRED_MCP_BACKEND_TIMEOUT",
        default_value_t = 5.0,
        global = true
    )]
    pub mcp_backend_timeout: f64,

    /// The MCP role's client id at the issuer (for its backend token).
    #[arg(
        long,
        env = "MAITRED_MCP_CLIENT_ID",
        default_value = "maitred-mcp",
        global = true
    )]
    pub mcp_client_id: String,

    /// The MCP role's client secret (default in dev mode: the generated one).
    #[arg(
        long,
        env = "MAITRED_MCP_CLIENT_SECRET",
        global = true,
        hide_env_values = true
    )]
    pub mcp_client_secret: Option<String>,

    /// Host names the MCP endpoint answers to, comma-separated (default: its public
    /// URL's host and loopback). Other Host headers are refused (DNS rebinding).
    #[arg(
        long,
        env = "MAITRED_MCP_ALLOWED_HOSTS",
        value_delimiter = ',',
        global = true
    )]
    pub mcp_allowed_hosts: Vec<String>,

    /// Browser origins allowed to call the MCP endpoint, comma-separated, with scheme
    /// (default: the MCP and gateway public URLs and http://localhost:*).
    #[arg(
        long,
        env = "MAITRED_MCP_ALLOWED_ORIGINS",
        value_delimiter = ',',
        global = true
    )]
    pub mcp_allowed_origins: Vec<String>,

    /// Reverse proxies whose forwarding header names the client, comma-separated
    /// addresses or CIDR networks (default: none; the TCP peer is the client).
    #[arg(
        long,
        env = "MAITRED_TRUSTED_PROXIES",
        value_delimiter = ',',
        global = true
    )]
    pub trusted_proxies: Vec<String>,

    /// The header the trusted proxies write: x-forwarded-for or forwarded (RFC 7239).
    #[arg(
        long,
        env = "MAITRED_FORWARDED_HEADER",
        value_enum,
        default_value_t = ForwardedHeader::XForwardedFor,
        global = true
    )]
    pub forwarded_header: ForwardedHeader,
}

#[derive(Debug, Clone, Args)]
pub struct GatewayArgs {
    /// Base URL of an OpenAI-compatible API (https://api.openai.com/v1, Groq, OpenRouter,
    /// Ollama's /v1, vLLM, llama.cpp server…). Unset: the built-in offline model.
    #[arg(long, env = "MAITRED_LLM_BASE_URL", global = true)]
    pub llm_base_url: Option<String>,

    /// API key for the LLM endpoint.
    #[arg(
        long,
        env = "MAITRED_LLM_API_KEY",
        global = true,
        hide_env_values = true
    )]
    pub llm_api_key: Option<String>,

    /// Model name at the LLM endpoint.
    #[arg(
        long,
        env = "MAITRED_LLM_MODEL",
        default_value = "gpt-4o-mini",
        global = true
    )]
    pub llm_model: String,

    /// Sampling temperature (default: the provider's).
    #[arg(long, env = "MAITRED_LLM_TEMPERATURE", global = true)]
    pub llm_temperature: Option<f32>,

    /// Most tokens one model turn may produce (default: the provider's).
    #[arg(long, env = "MAITRED_LLM_MAX_TOKENS", global = true)]
    pub llm_max_tokens: Option<u32>,

    /// How the model's tool calls are read: `auto` (native, and a call written as
    /// text is taken too), `native`, or `text` (the tools are described in the
    /// system prompt; for models served without tool calling).
    #[arg(
        long,
        env = "MAITRED_LLM_TOOL_CALLS",
        value_enum,
        default_value_t = crate::gateway::llm::text_calls::ToolCallMode::Auto,
        global = true
    )]
    pub llm_tool_calls: crate::gateway::llm::text_calls::ToolCallMode,

    /// A file whose text replaces the built-in system prompt ({today} becomes the date).
    #[arg(long, env = "MAITRED_SYSTEM_PROMPT_FILE", global = true)]
    pub system_prompt_file: Option<PathBuf>,

    /// The gateway's TOML file: MCP servers (default: maitred's own), fallback models,
    /// resilience settings, per-user limits, per-role tool policy.
    #[arg(long, env = "MAITRED_GATEWAY_CONFIG", global = true)]
    pub gateway_config: Option<PathBuf>,

    /// Most model turns one question may take.
    #[arg(
        long,
        env = "MAITRED_MAX_ITERATIONS",
        default_value_t = 10,
        global = true
    )]
    pub max_iterations: u32,

    /// Most bytes of one tool result given to the model; the rest is cut, with a marker.
    #[arg(long, env = "MAITRED_TOOL_OUTPUT_CAP", default_value_t = 16 * 1024, global = true)]
    pub tool_output_cap: usize,

    /// Seconds a write tool waits for the user's approval before it counts as denied.
    #[arg(
        long,
        env = "MAITRED_APPROVAL_TIMEOUT",
        default_value_t = 300,
        global = true
    )]
    pub approval_timeout: u64,

    /// Longest question accepted, in characters.
    #[arg(
        long,
        env = "MAITRED_QUESTION_LIMIT",
        default_value_t = 4000,
        global = true
    )]
    pub question_limit: usize,

    /// Characters of earlier conversation given to the model with a new question.
    #[arg(
        long,
        env = "MAITRED_CONTEXT_BUDGET",
        default_value_t = 24_000,
        global = true
    )]
    pub context_budget: usize,

    /// Where the gateway reaches maitred's MCP role (default: its public URL).
    #[arg(long, env = "MAITRED_GATEWAY_MCP_URL", global = true)]
    pub gateway_mcp_url: Option<String>,

    /// The gateway's client secret for the MCP server (default in dev mode: the generated one).
    #[arg(
        long,
        env = "MAITRED_GATEWAY_CLIENT_SECRET",
        global = true,
        hide_env_values = true
    )]
    pub gateway_client_secret: Option<String>,

    /// Seconds a generation nobody is watching keeps running before it is cancelled.
    #[arg(
        long,
        env = "MAITRED_STREAM_GRACE",
        default_value_t = 30,
        global = true
    )]
    pub stream_grace: u64,

    /// Redis (or Valkey) that gateway replicas share their running answers through
    /// (`redis://host:6379/0`); none: everything live stays in this process.
    #[arg(long, env = "MAITRED_REDIS_URL", global = true, hide_env_values = true)]
    pub redis_url: Option<String>,

    /// Start of every Redis key and channel maitred uses.
    #[arg(
        long,
        env = "MAITRED_REDIS_PREFIX",
        default_value = "maitred",
        global = true
    )]
    pub redis_prefix: String,

    /// Seconds a replica's claim on a running answer lasts unless renewed; after it,
    /// another replica ends the answer of a replica that died.
    #[arg(
        long,
        env = "MAITRED_ANSWER_LEASE",
        default_value_t = 15,
        global = true
    )]
    pub answer_lease: u64,

    /// Serve the web UI from this folder (a `frontend/dist` build) instead of the
    /// copy embedded in the binary at compile time.
    #[arg(long, env = "MAITRED_UI_DIR", global = true)]
    pub ui_dir: Option<std::path::PathBuf>,

    /// Seconds between keep-alive comments (`: ping`) on a quiet chat stream, so
    /// proxies and browsers do not close it as idle.
    #[arg(
        long,
        env = "MAITRED_SSE_KEEPALIVE",
        default_value_t = 15.0,
        global = true
    )]
    pub sse_keepalive: f64,
}

#[derive(Debug, Clone, Args)]
pub struct ScriptedLlmArgs {
    /// The JSON script (format: the scripted_llm module's documentation).
    #[arg(long)]
    pub script: PathBuf,
    /// Port to listen on (127.0.0.1).
    #[arg(long, default_value_t = 8090)]
    pub port: u16,
}

#[derive(Debug, Clone, Args)]
pub struct McpArgs {
    /// Serve the tools over stdin/stdout (for desktop clients) instead of HTTP. The
    /// backend credentials come from the environment (MAITRED_MCP_CLIENT_ID/SECRET).
    #[arg(long)]
    pub stdio: bool,
}

#[derive(Debug, Clone, Args)]
pub struct TokenArgs {
    /// Client id (its secret comes from the dev credentials in the data dir, or MAITRED_CLIENT_SECRET).
    #[arg(long)]
    pub client: String,
    /// Space-separated scopes (default: every scope the client is registered for).
    #[arg(long)]
    pub scope: Option<String>,
    /// The resource (RFC 8707) the token is for; sets its audience.
    #[arg(long)]
    pub resource: Option<String>,
    /// The client secret; default: read from the dev credentials file.
    #[arg(long, env = "MAITRED_CLIENT_SECRET", hide_env_values = true)]
    pub secret: Option<String>,
}
