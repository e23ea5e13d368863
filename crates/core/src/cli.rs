//! The command line and the environment, parsed and nothing more: every setting has a
//! flag and an environment variable, each subcommand takes only the settings it uses,
//! and `settings::resolve` makes the settings tree out of them. Defaults come from
//! `settings::defaults`, so `--help` shows the ones the roles run with.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::http::client_ip::ForwardedHeader;
use crate::settings::defaults;
use crate::settings::span::Span;
pub use crate::settings::{GroundingMode, LogFormat, Mode, ToolCallMode};

#[derive(Debug, Parser)]
#[command(
    name = "maitred",
    version,
    about = "A streaming chat gateway for tool-using LLMs, with a resOS-compatible reservation backend and a built-in identity provider",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// Log format.
    #[arg(long, env = "MAITRED_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    /// Without a subcommand: every role in one process, as `maitred all`.
    #[command(flatten)]
    pub all: Box<AllArgs>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run every role in one process (the default).
    All(Box<AllArgs>),
    /// Run the backend role: the resOS API and the built-in identity provider.
    Backend(BackendCommand),
    /// Run the MCP role: the restaurant's tools over Streamable HTTP (or stdio).
    Mcp(McpCommand),
    /// Run the gateway role: the chat API (SSE), conversations and the browser login.
    Gateway(Box<GatewayCommand>),
    /// Apply the database migrations and exit.
    Migrate(StateArgs),
    /// Get an access token with a client's credentials and print only the token.
    Token(TokenCommand),
    /// Measure the model a running maitred answers with: ask a set of questions through
    /// the chat API and write report.json and report.md (docs/eval.md).
    Eval(Box<EvalCommand>),
}

#[derive(Debug, Clone, Args)]
pub struct AllArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub identity: IdentityArgs,
    #[command(flatten)]
    pub backend: BackendArgs,
    #[command(flatten)]
    pub mcp: McpArgs,
    #[command(flatten)]
    pub gateway: GatewayArgs,
}

#[derive(Debug, Clone, Args)]
pub struct BackendCommand {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub identity: IdentityArgs,
    #[command(flatten)]
    pub backend: BackendArgs,
}

#[derive(Debug, Clone, Args)]
pub struct McpCommand {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub mcp: McpArgs,
    /// Serve the tools over stdin/stdout (for desktop clients) instead of HTTP. The
    /// backend credentials come from the environment (MAITRED_MCP_CLIENT_ID/SECRET).
    #[arg(long)]
    pub stdio: bool,
}

#[derive(Debug, Clone, Args)]
pub struct GatewayCommand {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub gateway: GatewayArgs,
}

/// Where local state and the database are.
#[derive(Debug, Clone, Args)]
pub struct StateArgs {
    /// Directory for all local state (SQLite database, generated dev credentials).
    #[arg(long, env = "MAITRED_DATA_DIR", default_value = defaults::DATA_DIR)]
    pub data_dir: PathBuf,

    /// Database URL (sqlite://… or postgres://…); default: SQLite under the data dir.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
}

/// Who issues tokens, and where the backend (the built-in issuer) is.
#[derive(Debug, Clone, Args)]
pub struct IssuerArgs {
    /// Port of the backend role.
    #[arg(long, env = "MAITRED_BACKEND_PORT", default_value_t = defaults::BACKEND_PORT)]
    pub backend_port: u16,

    /// Public URL of the backend role (default http://localhost:<backend-port>).
    #[arg(long, env = "MAITRED_BACKEND_URL")]
    pub backend_url: Option<String>,

    /// An external OIDC issuer (Keycloak, Auth0, Entra…). When set, the built-in
    /// identity provider is off and every role validates tokens against this issuer.
    #[arg(long, env = "MAITRED_OIDC_ISSUER")]
    pub oidc_issuer: Option<String>,

    /// Where the roles reach the issuer from inside a deployment, when its public URL
    /// does not resolve there (e.g. http://backend:8080 in docker-compose).
    #[arg(long, env = "MAITRED_ISSUER_INTERNAL_URL")]
    pub issuer_internal_url: Option<String>,
}

/// What every serving role needs: the mode, state, and where each role is.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    #[command(flatten)]
    pub state: StateArgs,

    #[command(flatten)]
    pub issuer: IssuerArgs,

    /// dev (demo data and credentials) or production (refuses them).
    #[arg(long, env = "MAITRED_MODE", value_enum, default_value_t = Mode::Dev)]
    pub mode: Mode,

    /// Address every role listens on.
    #[arg(long, env = "MAITRED_BIND", default_value = defaults::BIND)]
    pub bind: IpAddr,

    /// Port of the gateway role.
    #[arg(long, env = "MAITRED_GATEWAY_PORT", default_value_t = defaults::GATEWAY_PORT)]
    pub gateway_port: u16,

    /// Port of the MCP role.
    #[arg(long, env = "MAITRED_MCP_PORT", default_value_t = defaults::MCP_PORT)]
    pub mcp_port: u16,

    /// Public URL of the gateway role (default http://localhost:<gateway-port>).
    #[arg(long, env = "MAITRED_GATEWAY_URL")]
    pub gateway_url: Option<String>,

    /// Public URL of the MCP role (default http://localhost:<mcp-port>).
    #[arg(long, env = "MAITRED_MCP_URL")]
    pub mcp_url: Option<String>,

    /// Reverse proxies whose forwarding header names the client, comma-separated
    /// addresses or CIDR networks (default: none; the TCP peer is the client).
    #[arg(long, env = "MAITRED_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<String>,

    /// A token (16 characters or more) every role's `GET /metrics` then requires as
    /// `Authorization: Bearer <token>`; unset, `/metrics` answers anyone who reaches
    /// the port (keep it off public routes).
    #[arg(long, env = "MAITRED_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,

    /// The header the trusted proxies write: x-forwarded-for or forwarded (RFC 7239).
    #[arg(
        long,
        env = "MAITRED_FORWARDED_HEADER",
        value_enum,
        default_value_t = ForwardedHeader::XForwardedFor
    )]
    pub forwarded_header: ForwardedHeader,

    /// Callers whose W3C traceparent is continued, comma-separated addresses or CIDR
    /// networks: the roles of this deployment calling each other. Anyone else's
    /// request starts a new trace (theirs kept as a link). Empty: nobody.
    #[arg(
        long,
        env = "MAITRED_TRUSTED_TRACE_CALLERS",
        value_delimiter = ',',
        default_value = defaults::TRUSTED_TRACE_CALLERS
    )]
    pub trusted_trace_callers: Vec<String>,

    /// Production mode: plain-http origins that may still carry tokens,
    /// comma-separated (e.g. http://backend:8080,http://mcp:8082): services inside
    /// the deployment's own network only. Every other URL that carries a token must
    /// be https or loopback.
    #[arg(long, env = "MAITRED_PLAIN_HTTP_ORIGINS", value_delimiter = ',')]
    pub plain_http_origins: Vec<String>,

    #[command(flatten)]
    pub timeouts: TimeoutArgs,
}

/// How long a slow client may hold a connection (every role).
#[derive(Debug, Clone, Args)]
pub struct TimeoutArgs {
    /// Longest a client may take to send a request's head (also how long a kept-alive
    /// connection may sit idle); then the connection is closed.
    #[arg(long, env = "MAITRED_HEADER_READ_TIMEOUT", default_value_t = Span(defaults::HEADER_READ_TIMEOUT))]
    pub header_read_timeout: Span,

    /// Longest pause while a request body arrives; then 408 and the connection closes.
    #[arg(long, env = "MAITRED_BODY_IDLE_TIMEOUT", default_value_t = Span(defaults::BODY_IDLE_TIMEOUT))]
    pub body_idle_timeout: Span,

    /// Longest a whole request body may take to arrive after its head; then 408.
    #[arg(long, env = "MAITRED_BODY_READ_TIMEOUT", default_value_t = Span(defaults::BODY_READ_TIMEOUT))]
    pub body_read_timeout: Span,

    /// Longest from a request's head to the end of its response, event streams (SSE)
    /// aside; then 503.
    #[arg(long, env = "MAITRED_REQUEST_TIMEOUT", default_value_t = Span(defaults::REQUEST_TIMEOUT))]
    pub request_timeout: Span,
}

/// The built-in identity provider (served with the backend).
#[derive(Debug, Clone, Args)]
pub struct IdentityArgs {
    /// TOML file with users and clients of the built-in identity provider.
    #[arg(long, env = "MAITRED_CONFIG")]
    pub config: Option<PathBuf>,

    /// Requests per minute one client may make to the token endpoint and the login form.
    #[arg(long, env = "MAITRED_AUTH_RATE_LIMIT", default_value_t = defaults::AUTH_RATE_LIMIT_PER_MINUTE)]
    pub auth_rate_limit: u32,

    /// Lifetime of access tokens (`15m`, or seconds).
    #[arg(long, env = "MAITRED_ACCESS_TOKEN_TTL", default_value_t = Span(defaults::ACCESS_TOKEN_TTL))]
    pub access_token_ttl: Span,

    /// Longest life of a token issued by token exchange (acting for a person), at
    /// most 5 minutes; never past the person's own token.
    #[arg(long, env = "MAITRED_DELEGATED_TOKEN_TTL", default_value_t = Span(defaults::DELEGATED_TOKEN_TTL))]
    pub delegated_token_ttl: Span,
}

#[derive(Debug, Clone, Args)]
pub struct BackendArgs {
    /// Largest request body the backend accepts, in bytes.
    #[arg(long, env = "MAITRED_BODY_LIMIT", default_value_t = defaults::BODY_LIMIT)]
    pub body_limit: usize,

    /// How long a write's `Idempotency-Key` and its stored response are kept
    /// (`24h`, or seconds): a repeat within it gets the stored response.
    #[arg(long, env = "MAITRED_IDEMPOTENCY_TTL", default_value_t = Span(defaults::IDEMPOTENCY_TTL))]
    pub idempotency_ttl: Span,

    /// How long a repeat of a write that is still running waits for its response
    /// (`10s`) before a 409 `IDEMPOTENCY_KEY_IN_FLIGHT`.
    #[arg(long, env = "MAITRED_IDEMPOTENCY_WAIT", default_value_t = Span(defaults::IDEMPOTENCY_WAIT))]
    pub idempotency_wait: Span,
}

#[derive(Debug, Clone, Args)]
pub struct McpArgs {
    /// Where the MCP role reaches the backend (default: the backend's public URL).
    #[arg(long, env = "MAITRED_MCP_BACKEND_URL")]
    pub mcp_backend_url: Option<String>,

    /// How long the MCP role waits for the backend before a tool call is "unavailable".
    #[arg(long, env = "MAITRED_MCP_BACKEND_TIMEOUT", default_value_t = Span(defaults::MCP_BACKEND_TIMEOUT))]
    pub mcp_backend_timeout: Span,

    /// The MCP role's client id at the issuer (for its backend token).
    #[arg(long, env = "MAITRED_MCP_CLIENT_ID", default_value = defaults::MCP_CLIENT_ID)]
    pub mcp_client_id: String,

    /// The MCP role's client secret (default in dev mode: the generated one).
    #[arg(long, env = "MAITRED_MCP_CLIENT_SECRET", hide_env_values = true)]
    pub mcp_client_secret: Option<String>,

    /// Host names the MCP endpoint answers to, comma-separated (default: its public
    /// URL's host and loopback). Other Host headers are refused (DNS rebinding).
    #[arg(long, env = "MAITRED_MCP_ALLOWED_HOSTS", value_delimiter = ',')]
    pub mcp_allowed_hosts: Vec<String>,

    /// Browser origins allowed to call the MCP endpoint, comma-separated, with scheme
    /// (default: the MCP and gateway public URLs and http://localhost:*).
    #[arg(long, env = "MAITRED_MCP_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub mcp_allowed_origins: Vec<String>,

    /// Clients whose delegated tokens (a person's token they exchanged, naming them in
    /// `act`) the MCP role takes, comma-separated; others are refused.
    #[arg(long, env = "MAITRED_MCP_TRUSTED_ACTORS", value_delimiter = ',', default_value = defaults::MCP_TRUSTED_ACTORS)]
    pub mcp_trusted_actors: Vec<String>,

    /// The pause between the steps (days) of the `getMonthReport` tool, e.g. `200ms`;
    /// 0 runs it as fast as the backend answers.
    #[arg(long, env = "MAITRED_MCP_REPORT_STEP_DELAY", default_value_t = Span(defaults::MCP_REPORT_STEP_DELAY))]
    pub mcp_report_step_delay: Span,

    /// Tasks one caller (a person, or a client calling for itself) may have running
    /// at once; past it, a call that would start one is answered with a tool error.
    #[arg(long, env = "MAITRED_MCP_TASKS_PER_CALLER", default_value_t = defaults::MCP_TASKS_PER_CALLER)]
    pub mcp_tasks_per_caller: usize,

    /// Tasks every caller together may have running at once.
    #[arg(long, env = "MAITRED_MCP_TASKS_IN_ALL", default_value_t = defaults::MCP_TASKS_IN_ALL)]
    pub mcp_tasks_in_all: usize,

    /// Sessions (2025-11-25 revision) one caller may hold open at once; past it,
    /// `initialize` is refused with 429 until one is closed or idles out.
    #[arg(long, env = "MAITRED_MCP_SESSIONS_PER_CALLER", default_value_t = defaults::MCP_SESSIONS_PER_CALLER)]
    pub mcp_sessions_per_caller: usize,

    /// Sessions every caller together may hold open at once.
    #[arg(long, env = "MAITRED_MCP_SESSIONS_IN_ALL", default_value_t = defaults::MCP_SESSIONS_IN_ALL)]
    pub mcp_sessions_in_all: usize,
}

#[derive(Debug, Clone, Args)]
pub struct GatewayArgs {
    /// Base URL of an OpenAI-compatible API (https://api.openai.com/v1, Groq, OpenRouter,
    /// Ollama's /v1, vLLM, llama.cpp server…). Unset: the built-in offline model.
    #[arg(long, env = "MAITRED_LLM_BASE_URL")]
    pub llm_base_url: Option<String>,

    /// API key for the LLM endpoint.
    #[arg(long, env = "MAITRED_LLM_API_KEY", hide_env_values = true)]
    pub llm_api_key: Option<String>,

    /// Model name at the LLM endpoint.
    #[arg(long, env = "MAITRED_LLM_MODEL", default_value = defaults::LLM_MODEL)]
    pub llm_model: String,

    /// Sampling temperature (default: the provider's).
    #[arg(long, env = "MAITRED_LLM_TEMPERATURE")]
    pub llm_temperature: Option<f32>,

    /// Most tokens one model turn may produce (default: the provider's).
    #[arg(long, env = "MAITRED_LLM_MAX_TOKENS")]
    pub llm_max_tokens: Option<u32>,

    /// How the model's tool calls are read: `auto` (native, and a call written as
    /// text is taken too), `native`, or `text` (the tools are described in the
    /// system prompt; for models served without tool calling).
    #[arg(long, env = "MAITRED_LLM_TOOL_CALLS", value_enum, default_value_t = ToolCallMode::Auto)]
    pub llm_tool_calls: ToolCallMode,

    /// A small local model: compact tool definitions within a prompt budget.
    #[arg(long, env = "MAITRED_LLM_SMALL", default_value_t = false, action = clap::ArgAction::Set)]
    pub llm_small: bool,

    /// Tokens the model takes in all (prompt and answer), if known.
    #[arg(long, env = "MAITRED_LLM_CONTEXT_WINDOW")]
    pub llm_context_window: Option<u32>,

    /// Most tokens the tool definitions may take (default: none; 2,000 for a small model).
    #[arg(long, env = "MAITRED_LLM_TOOL_BUDGET")]
    pub llm_tool_budget: Option<u32>,
    /// Most estimated tokens one tool result may take in the model's prompt: long
    /// lists are cut, saying how many items are not shown (default: none; 600 for a
    /// small model).
    #[arg(long, env = "MAITRED_LLM_RESULT_BUDGET")]
    pub llm_result_budget: Option<u32>,

    /// Ask for a tool call on each question's first turn (tool_choice "required").
    #[arg(long, env = "MAITRED_LLM_REQUIRE_TOOL_CALL", default_value_t = false, action = clap::ArgAction::Set)]
    pub llm_require_tool_call: bool,

    /// At start, send the model the prompt every question begins with, for one token:
    /// a local server keeps what it read, and the first question does not wait for it.
    #[arg(long, env = "MAITRED_LLM_WARM_UP", default_value_t = false, action = clap::ArgAction::Set)]
    pub llm_warm_up: bool,

    /// How long to wait for this model's first token (default: the resilience setting).
    #[arg(long, env = "MAITRED_LLM_FIRST_TOKEN_TIMEOUT")]
    pub llm_first_token_timeout: Option<Span>,

    /// What becomes of answer figures no tool result states: `flag` (marked),
    /// `correct` (the answer is asked again once) or `facts` (the gateway writes the
    /// figures from the results). See docs/grounding.md.
    #[arg(long, env = "MAITRED_LLM_GROUNDING", value_enum, default_value_t = GroundingMode::Flag)]
    pub llm_grounding: GroundingMode,

    /// A file whose text replaces the built-in system prompt ({today} becomes the date).
    #[arg(long, env = "MAITRED_SYSTEM_PROMPT_FILE")]
    pub system_prompt_file: Option<PathBuf>,

    /// The gateway's TOML file: MCP servers (default: maitred's own), fallback models,
    /// resilience settings, per-user limits, per-role tool policy.
    #[arg(long, env = "MAITRED_GATEWAY_CONFIG")]
    pub gateway_config: Option<PathBuf>,

    /// Most model turns one question may take.
    #[arg(long, env = "MAITRED_MAX_ITERATIONS", default_value_t = defaults::MAX_ITERATIONS)]
    pub max_iterations: u32,

    /// Most bytes of one tool result given to the model; the rest is cut, with a marker.
    #[arg(long, env = "MAITRED_TOOL_OUTPUT_CAP", default_value_t = defaults::TOOL_OUTPUT_CAP)]
    pub tool_output_cap: usize,

    /// How long a write tool waits for the user's approval before it counts as denied.
    #[arg(long, env = "MAITRED_APPROVAL_TIMEOUT", default_value_t = Span(defaults::APPROVAL_TIMEOUT))]
    pub approval_timeout: Span,

    /// How long an MCP server's request for the user's input waits for an answer before it counts as cancelled.
    #[arg(long, env = "MAITRED_INPUT_TIMEOUT", default_value_t = Span(defaults::INPUT_TIMEOUT))]
    pub input_timeout: Span,

    /// Longest question accepted, in characters.
    #[arg(long, env = "MAITRED_QUESTION_LIMIT", default_value_t = defaults::QUESTION_LIMIT)]
    pub question_limit: usize,

    /// Characters of earlier conversation given to the model with a new question.
    #[arg(long, env = "MAITRED_CONTEXT_BUDGET", default_value_t = defaults::CONTEXT_BUDGET)]
    pub context_budget: usize,

    /// Where the gateway reaches maitred's MCP role (default: its public URL).
    #[arg(long, env = "MAITRED_GATEWAY_MCP_URL")]
    pub gateway_mcp_url: Option<String>,

    /// The gateway's client secret for the MCP server (default in dev mode: the generated one).
    #[arg(long, env = "MAITRED_GATEWAY_CLIENT_SECRET", hide_env_values = true)]
    pub gateway_client_secret: Option<String>,

    /// How long an answer nobody is watching keeps running before it is cancelled.
    #[arg(long, env = "MAITRED_STREAM_GRACE", default_value_t = Span(defaults::STREAM_GRACE))]
    pub stream_grace: Span,

    /// Redis (or Valkey) that gateway replicas share their running answers through
    /// (`redis://host:6379/0`); none: everything live stays in this process.
    #[arg(long, env = "MAITRED_REDIS_URL", hide_env_values = true)]
    pub redis_url: Option<String>,

    /// Start of every Redis key and channel maitred uses.
    #[arg(long, env = "MAITRED_REDIS_PREFIX", default_value = defaults::REDIS_PREFIX)]
    pub redis_prefix: String,

    /// How long a replica's claim on a running answer lasts unless renewed; after it,
    /// another replica ends the answer of a replica that died.
    #[arg(long, env = "MAITRED_ANSWER_LEASE", default_value_t = Span(defaults::ANSWER_LEASE))]
    pub answer_lease: Span,

    /// Go on with an answer whose server stopped (a replica that died, or this
    /// process at its next start) from what was stored, instead of ending it as
    /// interrupted.
    #[arg(long, env = "MAITRED_RESUME_ANSWERS", default_value_t = true, action = clap::ArgAction::Set)]
    pub resume_answers: bool,

    /// How many times one answer may be taken over; past it, it ends as interrupted.
    #[arg(long, env = "MAITRED_RESUME_MAX", default_value_t = defaults::RESUME_MAX)]
    pub resume_max: u32,

    /// Background tasks (tool calls a server runs as MCP tasks) one person may have
    /// running at once; past it, a new one is cancelled and the model told why.
    #[arg(long, env = "MAITRED_TASKS_PER_PERSON", default_value_t = defaults::TASKS_PER_PERSON)]
    pub tasks_per_person: usize,

    /// Background tasks one MCP server may have running at once, for everyone.
    #[arg(long, env = "MAITRED_TASKS_PER_SERVER", default_value_t = defaults::TASKS_PER_SERVER)]
    pub tasks_per_server: usize,

    /// How long a background task may run before the gateway gives up on it (cancels
    /// it at its server and posts that it failed).
    #[arg(long, env = "MAITRED_TASK_GIVE_UP", default_value_t = Span(defaults::TASK_GIVE_UP))]
    pub task_give_up: Span,

    /// The keys that seal people's tokens for connected accounts (AEAD, XChaCha20-Poly1305):
    /// `id:base64-of-32-bytes`, comma-separated, the first sealing and all of them
    /// opening (rotation: put the new key first, keep the old until resealed; see
    /// docs/connected-accounts.md). Dev mode generates one in the data dir.
    #[arg(long, env = "MAITRED_ACCOUNT_KEYS", hide_env_values = true)]
    pub account_keys: Option<String>,

    /// How long a sign-in at a connected account's server may take, from the card
    /// or the panel to its return.
    #[arg(long, env = "MAITRED_CONNECT_TIMEOUT", default_value_t = Span(defaults::CONNECT_TIMEOUT))]
    pub connect_timeout: Span,

    /// Sign-ins at connected accounts' servers one person may have under way at once
    /// (started and not yet back or expired); past it, a new one is refused until one
    /// ends or expires.
    #[arg(long, env = "MAITRED_SIGN_INS_PER_PERSON", default_value_t = defaults::SIGN_INS_PER_PERSON)]
    pub sign_ins_per_person: usize,

    /// Serve the web UI from this folder (a `frontend/dist` build) instead of the
    /// copy embedded in the binary at compile time.
    #[arg(long, env = "MAITRED_UI_DIR")]
    pub ui_dir: Option<PathBuf>,

    /// Between keep-alive comments (`: ping`) on a quiet chat stream, so proxies and
    /// browsers do not close it as idle.
    #[arg(long, env = "MAITRED_SSE_KEEPALIVE", default_value_t = Span(defaults::SSE_KEEPALIVE))]
    pub sse_keepalive: Span,
}

#[derive(Debug, Clone, Args)]
pub struct TokenCommand {
    /// Directory of the generated dev credentials.
    #[arg(long, env = "MAITRED_DATA_DIR", default_value = defaults::DATA_DIR)]
    pub data_dir: PathBuf,
    #[command(flatten)]
    pub issuer: IssuerArgs,
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

#[derive(Debug, Clone, Args)]
pub struct EvalCommand {
    /// The gateway's base URL (default http://localhost:<gateway-port>).
    #[arg(long)]
    pub url: Option<String>,
    /// Port of the local gateway, for the default --url.
    #[arg(long, env = "MAITRED_GATEWAY_PORT", default_value_t = defaults::GATEWAY_PORT)]
    pub gateway_port: u16,
    /// A bearer token for the chat API; default: one for --client, as `maitred token` gets it.
    #[arg(long, env = "MAITRED_EVAL_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The client whose token asks the questions (when no --token is given).
    #[arg(long, default_value = "maitred-cli")]
    pub client: String,
    /// The client whose token counts the truths at the backend (scope backend.read).
    #[arg(long, default_value = "maitred-mcp")]
    pub backend_client: String,
    /// A bearer token for the backend's API instead of one for --backend-client.
    #[arg(long, env = "MAITRED_EVAL_BACKEND_TOKEN", hide_env_values = true)]
    pub backend_token: Option<String>,
    /// Directory of the generated dev credentials (the clients' secrets).
    #[arg(long, env = "MAITRED_DATA_DIR", default_value = defaults::DATA_DIR)]
    pub data_dir: PathBuf,
    #[command(flatten)]
    pub issuer: IssuerArgs,
    /// Questions, one JSON object a line (docs/eval.md); default: the built-in set.
    #[arg(long)]
    pub questions: Option<PathBuf>,
    /// Where report.json and report.md go (default ./eval-<timestamp>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Ask each question this many times, to see how consistently it is answered.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// The model the gateway must answer with; the run stops if it answers with another
    /// (the gateway's configuration chooses its model, not the chat API).
    #[arg(long)]
    pub model: Option<String>,
    /// Longest wait for one answer.
    #[arg(long, default_value = "5m")]
    pub timeout: Span,
    /// Deny the write tools' approvals instead of approving them (the built-in set
    /// books and changes bookings: run it against a demo instance).
    #[arg(long)]
    pub deny_writes: bool,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    /// Each subcommand's help lists what it uses: `token` knows nothing of models.
    #[test]
    fn each_subcommand_takes_only_its_own_options() {
        let mut cli = Cli::command();
        let help = |cli: &mut clap::Command, name: &str| {
            cli.find_subcommand_mut(name)
                .unwrap()
                .render_long_help()
                .to_string()
        };
        let token = help(&mut cli, "token");
        for absent in [
            "--llm-model",
            "--sse-keepalive",
            "--body-limit",
            "--mcp-port",
        ] {
            assert!(!token.contains(absent), "token --help lists {absent}");
        }
        assert!(token.contains("--client") && token.contains("--oidc-issuer"));
        let mcp = help(&mut cli, "mcp");
        assert!(mcp.contains("--mcp-backend-url") && !mcp.contains("--llm-model"));
        let gateway = help(&mut cli, "gateway");
        assert!(gateway.contains("--llm-model") && !gateway.contains("--mcp-client-secret"));
        let migrate = help(&mut cli, "migrate");
        assert!(migrate.contains("--database-url") && !migrate.contains("--bind"));
    }

    #[test]
    fn durations_take_seconds_or_units() {
        let cli = Cli::try_parse_from(["maitred", "gateway", "--approval-timeout", "2m"]).unwrap();
        let Some(Command::Gateway(gateway)) = cli.command else {
            panic!("a gateway command")
        };
        assert_eq!(gateway.gateway.approval_timeout.0.as_secs(), 120);
        let cli = Cli::try_parse_from(["maitred", "--approval-timeout", "45"]).unwrap();
        assert_eq!(cli.all.gateway.approval_timeout.0.as_secs(), 45);
        assert!(Cli::try_parse_from(["maitred", "--approval-timeout", "soon"]).is_err());
    }
}
