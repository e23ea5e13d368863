//! The answer's spans in the OpenTelemetry GenAI conventions, made only when traces
//! are exported (otherwise no span, and the log lines are as they were): `chat
//! {model}` for each model turn, `execute_tool {tool}` for each tool call.

use tracing::Span;
use tracing::field::Empty;

use maitred_core::otel;
use maitred_llm::{FinishReason, Usage};

/// A model turn's span, before the model is asked.
pub(super) fn chat(model: &str) -> Span {
    if !otel::enabled() {
        return Span::none();
    }
    let span = tracing::info_span!("chat", otel.name = Empty, otel.kind = "client");
    span.record("otel.name", format!("chat {model}"));
    otel::set_attribute(&span, "gen_ai.operation.name", "chat");
    otel::set_attribute(&span, "gen_ai.request.model", model.to_owned());
    span
}

/// What the turn came to, on its span (the current one: `model_turn` runs in it).
pub(super) fn replied(model: &str, usage: Usage, finished: Option<&FinishReason>) {
    if !otel::enabled() {
        return;
    }
    let span = Span::current();
    otel::set_attribute(&span, "gen_ai.response.model", model.to_owned());
    otel::set_attribute(
        &span,
        "gen_ai.usage.input_tokens",
        count(usage.prompt_tokens),
    );
    otel::set_attribute(
        &span,
        "gen_ai.usage.output_tokens",
        count(usage.completion_tokens),
    );
    let reason = match finished {
        Some(FinishReason::Stop) => "stop",
        Some(FinishReason::ToolCalls) => "tool_calls",
        Some(FinishReason::Length) => "length",
        Some(FinishReason::ContentFilter) => "content_filter",
        Some(FinishReason::Other(other)) => other.as_str(),
        // Cut short: the stream ended before the model said why.
        None => "error",
    };
    otel::set_strings(&span, "gen_ai.response.finish_reasons", &[reason]);
}

/// A tool call's span, from the model's request to the result it is given.
pub(super) fn execute_tool(tool: &str, model_call_id: &str, arguments: &serde_json::Value) -> Span {
    if !otel::enabled() {
        return Span::none();
    }
    let span = tracing::info_span!("execute_tool", otel.name = Empty, otel.kind = "internal");
    span.record("otel.name", format!("execute_tool {tool}"));
    otel::set_attribute(&span, "gen_ai.operation.name", "execute_tool");
    otel::set_attribute(&span, "gen_ai.tool.name", tool.to_owned());
    otel::set_attribute(&span, "gen_ai.tool.call.id", model_call_id.to_owned());
    otel::set_attribute(&span, "gen_ai.tool.type", "extension");
    if otel::capture_content() {
        otel::set_attribute(&span, "gen_ai.tool.call.arguments", arguments.to_string());
    }
    span
}

/// How the call ended, on its span; the result itself only when content is captured.
pub(super) fn tool_finished(span: &Span, status: &impl std::fmt::Display, result: &str) {
    if !otel::enabled() {
        return;
    }
    let status = status.to_string();
    if status != "ok" {
        otel::set_attribute(span, "error.type", status);
    }
    if otel::capture_content() {
        otel::set_attribute(span, "gen_ai.tool.call.result", result.to_owned());
    }
}

fn count(tokens: u64) -> i64 {
    i64::try_from(tokens).unwrap_or(i64::MAX)
}
