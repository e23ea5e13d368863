//! Every default, once: the command line shows these in `--help` and the settings
//! structs start from them, so the two can never disagree.

use std::time::Duration;

pub const DATA_DIR: &str = "data";
pub const BIND: &str = "127.0.0.1";
pub const BACKEND_PORT: u16 = 8080;
pub const GATEWAY_PORT: u16 = 8081;
pub const MCP_PORT: u16 = 8082;

pub const BODY_LIMIT: usize = 64 * 1024;
/// How long the backend keeps a write's `Idempotency-Key` and its response: a day
/// covers any retry a client or a person makes of one action.
pub const IDEMPOTENCY_TTL: Duration = Duration::from_secs(24 * 3600);
/// How long a repeat of a write that is still running waits for its response before
/// a 409: most writes take milliseconds, and a client's own timeout is longer.
pub const IDEMPOTENCY_WAIT: Duration = Duration::from_secs(10);
/// A request's head comes in one or two packets; ten seconds is plenty even on a bad
/// mobile link, and short enough that idle sockets do not pile up.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Ten seconds without a byte of a body that has begun is a stalled or hostile client.
pub const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// A whole body (at most the 64 KiB body limit) in 30 s: about 2 KiB/s, slower than
/// any honest client; one dribbling a byte every few seconds is cut.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Above the body's 30 s, so a slow body shows as 408, and far above what the handlers
/// take (calls between the roles time out after 30 s); event streams are exempt.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
pub const AUTH_RATE_LIMIT_PER_MINUTE: u32 = 120;
/// Loopback: the roles of `maitred all` calling each other (and a laptop's own tools).
pub const TRUSTED_TRACE_CALLERS: &str = "127.0.0.0/8,::1";
pub const ACCESS_TOKEN_TTL: Duration = Duration::from_secs(900);
/// A delegated (token exchange) token's longest life: how long a person whose login
/// was revoked may still reach the tools through one already issued.
pub const DELEGATED_TOKEN_TTL: Duration = Duration::from_secs(300);

pub const MCP_BACKEND_TIMEOUT: Duration = Duration::from_secs(5);
pub const MCP_CLIENT_ID: &str = "maitred-mcp";
/// The clients the MCP role takes delegated tokens from: the gateway's.
pub const MCP_TRUSTED_ACTORS: &str = "maitred-gateway";
/// The pause between the days `getMonthReport` reads: a month then takes some
/// seconds, long enough to watch it run, poll it and cancel it.
pub const MCP_REPORT_STEP_DELAY: Duration = Duration::from_millis(200);
/// Tasks one caller (a person, or a client for itself) may have running at the MCP
/// role at once, and all callers together.
pub const MCP_TASKS_PER_CALLER: usize = 5;
pub const MCP_TASKS_IN_ALL: usize = 200;
/// Sessions (2025-11-25 revision) one caller may hold open at the MCP role at once,
/// and all callers together. The gateway holds one per replica for everyone.
pub const MCP_SESSIONS_PER_CALLER: usize = 16;
pub const MCP_SESSIONS_IN_ALL: usize = 1000;

pub const LLM_MODEL: &str = "gpt-4o-mini";
pub const MAX_ITERATIONS: u32 = 10;
pub const TOOL_OUTPUT_CAP: usize = 16 * 1024;
pub const APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);
/// As long as an approval: both wait for the same person.
pub const INPUT_TIMEOUT: Duration = Duration::from_secs(300);
// As long as the card that asks for the sign-in waits (MAITRED_INPUT_TIMEOUT).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(300);
/// Sign-ins at connected accounts' servers one person may have under way at once.
pub const SIGN_INS_PER_PERSON: usize = 5;
pub const QUESTION_LIMIT: usize = 4000;
pub const CONTEXT_BUDGET: usize = 24_000;
pub const STREAM_GRACE: Duration = Duration::from_secs(30);
pub const SSE_KEEPALIVE: Duration = Duration::from_secs(15);
pub const REDIS_PREFIX: &str = "maitred";
pub const ANSWER_LEASE: Duration = Duration::from_secs(15);
/// How many times one answer may be taken over after its server stopped.
pub const RESUME_MAX: u32 = 3;
/// Background tasks (MCP tasks) one person, and one server, may have running at once.
pub const TASKS_PER_PERSON: usize = 5;
pub const TASKS_PER_SERVER: usize = 100;
/// How long a background task may run before the gateway gives up on it.
pub const TASK_GIVE_UP: Duration = Duration::from_secs(3600);
/// The offline model's pause between text fragments, so streaming is visible.
pub const OFFLINE_FRAGMENT_DELAY: Duration = Duration::from_millis(15);
