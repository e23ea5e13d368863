//! The MCP client span of a `tools/call` (MCP semantic conventions), made only when
//! traces are exported: the server's span is its child, through `_meta.traceparent`
//! and the request's `traceparent` header.

use tracing::Span;
use tracing::field::Empty;

use maitred_core::otel;

use super::connection::Connection;

pub(super) fn tools_call(server: &str, tool: &str, connection: &Connection) -> Span {
    if !otel::enabled() {
        return Span::none();
    }
    let span = tracing::info_span!("mcp_call", otel.name = Empty, otel.kind = "client");
    span.record("otel.name", format!("tools/call {tool}"));
    otel::set_attribute(&span, "mcp.method.name", "tools/call");
    otel::set_attribute(&span, "gen_ai.operation.name", "execute_tool");
    otel::set_attribute(&span, "gen_ai.tool.name", tool.to_owned());
    otel::set_attribute(&span, "server.address", server.to_owned());
    if let Some(info) = connection.peer_info() {
        otel::set_attribute(
            &span,
            "mcp.protocol.version",
            info.protocol_version.to_string(),
        );
    }
    span
}
