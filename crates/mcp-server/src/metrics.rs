//! The MCP role's own series, beside the HTTP ones every role has.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Unit;

use maitred_core::metrics::{LatencyFamily, Metrics, latency_family};
use maitred_core::oauth_client::TokenFetchLabels;

/// How a tool call ended, as logged and counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A result.
    Ok,
    /// An `isError` result from the backend's refusal (not found, taken, invalid…).
    ToolError,
    /// An `isError` result because the backend was down, slow or failing.
    Unavailable,
    /// A JSON-RPC error: an unknown tool or arguments that do not fit its schema.
    Invalid,
    /// An `isError` result because the caller's token lacks the tool's scope.
    Refused,
    /// A 2026-07-28 `InputRequiredResult`: the call waits for a person's answer.
    InputRequired,
    /// A `CreateTaskResult`: the call goes on as a task (counted in `mcp_tasks` when it ends).
    Task,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::ToolError => "tool_error",
            Outcome::Unavailable => "unavailable",
            Outcome::Invalid => "invalid",
            Outcome::Refused => "refused",
            Outcome::InputRequired => "input_required",
            Outcome::Task => "task",
        }
    }
}

/// `tool` is a catalogue name, or `unknown` for any other (a client chooses the name).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolLabels {
    pub tool: String,
    pub outcome: &'static str,
}

/// A task's tool and how it ended: `completed`, `failed` or `cancelled`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TaskLabels {
    pub tool: &'static str,
    pub status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BackendLabels {
    pub method: &'static str,
    /// `2xx`…`5xx`, `error` (no answer: refused connection, reset…) or `timeout`.
    pub status: &'static str,
}

#[derive(Clone)]
pub struct McpMetrics {
    pub tool_calls: Family<ToolLabels, Counter>,
    pub tool_duration: LatencyFamily<ToolLabels>,
    pub backend_requests: Family<BackendLabels, Counter>,
    pub token_requests: Family<TokenFetchLabels, Counter>,
    pub tasks: Family<TaskLabels, Counter>,
}

impl McpMetrics {
    pub fn register(metrics: &Metrics) -> Self {
        let this = Self {
            tool_calls: Family::default(),
            tool_duration: latency_family(),
            backend_requests: Family::default(),
            token_requests: Family::default(),
            tasks: Family::default(),
        };
        metrics.register(
            "mcp_tool_calls",
            "MCP tools/call requests handled, by tool and outcome (ok, tool_error, unavailable, invalid, refused, \
input_required, task: it goes on as a task)",
            this.tool_calls.clone(),
        );
        metrics.register_with_unit(
            "mcp_tool_call_duration",
            "Time to run an MCP tool call, backend requests included, by tool and outcome",
            Unit::Seconds,
            this.tool_duration.clone(),
        );
        metrics.register(
            "mcp_backend_requests",
            "HTTP requests the MCP role made to the backend API, by method and status class \
(error: no answer; timeout: none within the backend timeout)",
            this.backend_requests.clone(),
        );
        metrics.register(
            "mcp_backend_token_requests",
            "Client-credentials token requests the MCP role made to the issuer for its backend token, \
by reason (first, expiring, rejected: after a 401) and outcome",
            this.token_requests.clone(),
        );
        metrics.register(
            "mcp_tasks",
            "MCP tool calls run as tasks (the tasks extension), by tool and how they ended (completed, \
failed, cancelled)",
            this.tasks.clone(),
        );
        this
    }

    pub fn record_call(&self, tool: &str, outcome: Outcome, seconds: f64) {
        let labels = ToolLabels {
            tool: tool.to_owned(),
            outcome: outcome.as_str(),
        };
        self.tool_calls.get_or_create(&labels).inc();
        self.tool_duration.get_or_create(&labels).observe(seconds);
    }
}
