//! The gateway's own series, beside the HTTP ones every role has: answers and their
//! viewers, time to first token, the model upstream's errors, retries and fallbacks,
//! tool calls, circuit breakers and approvals. Labels never carry a person or a
//! question: only models, servers, tools and outcomes, which the operator configures.

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Unit;

use super::tools::ToolHub;
use maitred_core::metrics::{LatencyFamily, Metrics, latency_family};
use maitred_core::oauth_client::TokenFetchLabels;
use maitred_llm::ModelError;

/// Time to first token, in seconds: 50 ms to two minutes (a tool-using first turn
/// of a large model is slow).
/// A small local model reads 50-100 prompt tokens a second: 2,000 is half a minute.
const PROMPT_BUCKETS: [f64; 10] = [
    250.0, 500.0, 1_000.0, 1_500.0, 2_000.0, 2_500.0, 4_000.0, 8_000.0, 16_000.0, 32_000.0,
];

const TTFT_BUCKETS: [f64; 12] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FinishLabels {
    pub finish_reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabels {
    pub model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelErrorLabels {
    pub model: String,
    /// `rate_limited`, `http_4xx`, `http_5xx`, `connection`, `protocol`, `timeout`, `busy`.
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PromptPartLabels {
    pub model: String,
    /// `system`, `user`, `assistant`, `tool` (results), `tools` (definitions) or
    /// `total`.
    pub part: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FallbackLabels {
    pub from: String,
    pub to: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AccountLabels {
    pub server: String,
    /// sign_in_started, connected, declined, refused (a callback that failed),
    /// refreshed, refresh_refused (the person must sign in again), disconnected.
    pub event: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolLabels {
    pub server: String,
    /// A tool of the catalogue, or `unknown` (the model chooses the name).
    pub tool: String,
    pub status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenKindLabels {
    /// `prompt` or `completion`, as the model reported its usage.
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorCodeLabels {
    /// The `error` event's code: `model_*`, `storage` or `interrupted`.
    pub code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    /// `limited` (the person's rate or running answers) or `shutting_down`.
    pub reason: &'static str,
}

#[derive(Clone)]
pub struct GatewayMetrics {
    pub generations_active: Gauge,
    pub generations: Family<FinishLabels, Counter>,
    pub answer_errors: Family<ErrorCodeLabels, Counter>,
    pub viewers: Gauge,
    pub time_to_first_token: Histogram,
    pub tokens_streamed: Counter,
    pub usage_tokens: Family<TokenKindLabels, Counter>,
    pub model_errors: Family<ModelErrorLabels, Counter>,
    pub model_retries: Family<ModelLabels, Counter>,
    pub prompt_tokens: Family<PromptPartLabels, Histogram, fn() -> Histogram>,
    pub model_fallbacks: Family<FallbackLabels, Counter>,
    pub tool_calls: Family<ToolLabels, Counter>,
    pub tool_duration: LatencyFamily<ToolLabels>,
    pub approvals_waiting: Gauge,
    pub inputs_waiting: Gauge,
    pub questions_refused: Family<RefusalLabels, Counter>,
    pub token_requests: Family<TokenFetchLabels, Counter>,
    pub account_events: Family<AccountLabels, Counter>,
}

impl GatewayMetrics {
    pub fn register(metrics: &Metrics) -> Self {
        let this = Self {
            generations_active: Gauge::default(),
            generations: Family::default(),
            answer_errors: Family::default(),
            viewers: Gauge::default(),
            time_to_first_token: Histogram::new(TTFT_BUCKETS),
            tokens_streamed: Counter::default(),
            usage_tokens: Family::default(),
            model_errors: Family::default(),
            model_retries: Family::default(),
            prompt_tokens: Family::new_with_constructor(|| Histogram::new(PROMPT_BUCKETS)),
            model_fallbacks: Family::default(),
            tool_calls: Family::default(),
            tool_duration: latency_family(),
            approvals_waiting: Gauge::default(),
            inputs_waiting: Gauge::default(),
            questions_refused: Family::default(),
            token_requests: Family::default(),
            account_events: Family::default(),
        };
        metrics.register(
            "gateway_account_events",
            "Connected accounts: sign-ins started, connected, declined and refused, refreshes and refused refreshes, disconnects, by MCP server",
            this.account_events.clone(),
        );
        metrics.register(
            "gateway_generations_active",
            "Answers being produced now",
            this.generations_active.clone(),
        );
        metrics.register(
            "gateway_generations",
            "Answers finished, by finish_reason (stop, cancelled, max_iterations, error)",
            this.generations.clone(),
        );
        metrics.register(
            "gateway_answer_errors",
            "Answers that ended with an error event, by its code (model_*, storage, interrupted)",
            this.answer_errors.clone(),
        );
        metrics.register(
            "gateway_stream_viewers",
            "Open SSE connections watching an answer",
            this.viewers.clone(),
        );
        metrics.register_with_unit(
            "gateway_time_to_first_token",
            "Time from a question's arrival to its first token event",
            Unit::Seconds,
            this.time_to_first_token.clone(),
        );
        metrics.register(
            "gateway_tokens_streamed",
            "Token events sent to viewers (fragments of answers)",
            this.tokens_streamed.clone(),
        );
        metrics.register(
            "gateway_model_usage_tokens",
            "Tokens the model reported using, by kind",
            this.usage_tokens.clone(),
        );
        metrics.register(
            "gateway_model_errors",
            "Failed model requests, by model and kind, whether retried or not",
            this.model_errors.clone(),
        );
        metrics.register(
            "gateway_prompt_tokens_estimated",
            "Estimated tokens of each model request's prompt, by model and part, as sent",
            this.prompt_tokens.clone(),
        );
        metrics.register(
            "gateway_model_retries",
            "Model requests retried before their first token, by model",
            this.model_retries.clone(),
        );
        metrics.register(
            "gateway_model_fallbacks",
            "Questions handed from one model to the next",
            this.model_fallbacks.clone(),
        );
        metrics.register(
            "gateway_tool_calls",
            "Tool calls, by MCP server, tool and status (ok, error, denied, unavailable)",
            this.tool_calls.clone(),
        );
        metrics.register_with_unit(
            "gateway_tool_call_duration",
            "Tool calls' time from start to result, approvals included",
            Unit::Seconds,
            this.tool_duration.clone(),
        );
        metrics.register(
            "gateway_approvals_waiting",
            "Write tool calls waiting for a person's approval",
            this.approvals_waiting.clone(),
        );
        metrics.register(
            "gateway_inputs_waiting",
            "Tool calls waiting for a person's answer to their MCP server's request for input",
            this.inputs_waiting.clone(),
        );
        metrics.register(
            "gateway_questions_refused",
            "Questions refused before they started, by reason",
            this.questions_refused.clone(),
        );
        metrics.register(
            "gateway_mcp_token_requests",
            "Token requests the gateway made for its MCP servers, by reason and outcome",
            this.token_requests.clone(),
        );
        this
    }

    pub fn model_error(&self, model: &str, error: &ModelError) {
        self.model_errors
            .get_or_create(&ModelErrorLabels {
                model: model.to_owned(),
                kind: error_kind(error),
            })
            .inc();
    }

    pub fn refused(&self, reason: &'static str) {
        self.questions_refused
            .get_or_create(&RefusalLabels { reason })
            .inc();
    }

    /// Circuit breaker states, read from the hub at each scrape.
    pub fn watch_breakers(metrics: &Metrics, hub: Arc<ToolHub>) {
        metrics.register_collector(Breakers(hub));
    }
}

fn error_kind(error: &ModelError) -> &'static str {
    match error {
        ModelError::RateLimited { .. } => "rate_limited",
        ModelError::Upstream { status, .. } if *status >= 500 => "http_5xx",
        ModelError::Upstream { .. } => "http_4xx",
        ModelError::Connection(_) => "connection",
        ModelError::Protocol(_) => "protocol",
        ModelError::Timeout(_) => "timeout",
        ModelError::Busy(_) => "busy",
    }
}

struct Breakers(Arc<ToolHub>);

impl std::fmt::Debug for Breakers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Breakers")
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    server: String,
}

impl Collector for Breakers {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "gateway_circuit_breaker_state",
            "Each MCP server's circuit breaker: 0 closed, 1 open, 2 half-open",
            None,
            MetricType::Gauge,
        )?;
        for (server, state) in self.0.breakers() {
            let labels = ServerLabels { server };
            let gauge = ConstGauge::new(state.as_number());
            gauge.encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}
