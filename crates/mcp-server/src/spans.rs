//! The `tools/call` server span in the MCP semantic conventions: a child of the
//! caller's span (its `_meta.traceparent`, SEP-414, else the HTTP request's), so the
//! backend's spans under it join the question's one trace. Without trace export it is
//! the same `tool_call` log span as ever.

use rmcp::RoleServer;
use rmcp::model::JsonObject;
use rmcp::service::RequestContext;
use tracing::Span;

use maitred_core::http::middleware::TraceTrust;
use maitred_core::otel;
use maitred_core::trace_context::TraceContext;

/// `_meta.traceparent` (SEP-414), valid and from a caller whose trace is continued:
/// over HTTP, one the common middleware trusts (the gateway of this deployment, not
/// any MCP client on the internet, which would otherwise pick the trace id and its
/// sampling); over stdio, the desktop client that started us.
pub(crate) fn meta_traceparent(ctx: &RequestContext<RoleServer>) -> Option<TraceContext> {
    let trusted = ctx
        .extensions
        .get::<axum::http::request::Parts>()
        .is_none_or(|parts| {
            parts
                .extensions
                .get::<TraceTrust>()
                .is_some_and(|trust| trust.0)
        });
    if !trusted {
        return None;
    }
    ctx.meta.get_traceparent().and_then(TraceContext::parse)
}

/// The tool call's span, and its place in the trace (the parent of its backend calls).
pub(crate) fn tool_call(
    ctx: &RequestContext<RoleServer>,
    tool: &str,
    arguments: Option<&JsonObject>,
) -> (Span, TraceContext) {
    let span = tracing::info_span!(
        "tool_call",
        tool = %tool,
        trace_id = tracing::field::Empty,
        span_id = tracing::field::Empty,
        otel.name = tracing::field::Empty,
        otel.kind = tracing::field::Empty,
    );
    if otel::enabled() {
        span.record("otel.name", format!("tools/call {tool}"));
        span.record("otel.kind", "server");
        otel::set_attribute(&span, "mcp.method.name", "tools/call");
        otel::set_attribute(&span, "gen_ai.operation.name", "execute_tool");
        otel::set_attribute(&span, "gen_ai.tool.name", tool.to_owned());
        otel::set_attribute(&span, "jsonrpc.request.id", ctx.id.to_string());
        let header = |name: &str| {
            ctx.extensions
                .get::<axum::http::request::Parts>()
                .and_then(|parts| parts.headers.get(name))
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        if let Some(session) = header("mcp-session-id") {
            otel::set_attribute(&span, "mcp.session.id", session);
        }
        let version = header("mcp-protocol-version").or_else(|| {
            ctx.peer
                .peer_info()
                .map(|info| info.protocol_version.to_string())
        });
        if let Some(version) = version {
            otel::set_attribute(&span, "mcp.protocol.version", version);
        }
        if otel::capture_content()
            && let Some(arguments) = arguments
            && let Ok(json) = serde_json::to_string(arguments)
        {
            otel::set_attribute(&span, "gen_ai.tool.call.arguments", json);
        }
    }
    let trace = otel::continue_trace(&span, caller(ctx), Some("mcp"));
    span.record("trace_id", tracing::field::display(trace.trace_id()));
    span.record("span_id", tracing::field::display(trace.span_id()));
    (span, trace)
}

/// The caller's span: `_meta.traceparent` when it is valid and the caller is trusted,
/// else the HTTP request's (over stdio: none).
fn caller(ctx: &RequestContext<RoleServer>) -> Option<TraceContext> {
    meta_traceparent(ctx).or_else(|| {
        ctx.extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<TraceContext>())
            .copied()
    })
}
