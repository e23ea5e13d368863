//! Calling a tool: what is refused before the server is asked (an unknown server,
//! a write to a read-only one, an open breaker), acting for the person where the
//! server takes delegated tokens, the call's `_meta`, and what its result is for the
//! model.

use maitred_core::delegation::ExchangeError;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject, RequestMetaObject};
use secrecy::SecretString;
use serde_json::Value;

use super::catalogue::RegisteredTool;
use super::connection::Server;
use super::error::HubError;
use super::hub::ToolHub;
use super::interaction::CallLink;

/// The `_meta` key naming the end user a call is made for (audit only).
const END_USER_META: &str = "maitred/endUserId";
/// The `_meta` key naming the gateway's tool call: the server's audit records it, and
/// the transport finds the call's person by it.
pub(super) const TOOL_CALL_META: &str = "maitred/toolCallId";

/// Who a call is made for, and the trace it belongs to (both go in `_meta`), and
/// where what the server says on the way (progress, requests for input) goes.
#[derive(Debug, Clone, Copy)]
pub struct CallContext<'a> {
    pub end_user: &'a str,
    /// The person's own token, for servers that take delegated tokens.
    pub person: Option<&'a SecretString>,
    pub tool_call_id: &'a str,
    /// The W3C `traceparent` of the question's span.
    pub traceparent: &'a str,
    pub link: &'a CallLink,
}

/// What a tool call came to.
#[derive(Debug, Clone)]
pub enum CallOutcome {
    /// The result as text for the model (structured content as compact JSON).
    Ok {
        text: String,
        structured: Option<Value>,
    },
    /// The tool ran and reported a failure (`isError`), or refused the call.
    ToolError(String),
    /// The server could not be reached, or did not answer in time.
    Unavailable(String),
}

impl ToolHub {
    /// Calls a tool on its server, within the server's timeout.
    pub async fn call(
        &self,
        tool: &RegisteredTool,
        arguments: JsonObject,
        context: CallContext<'_>,
    ) -> CallOutcome {
        match self.call_through_breaker(tool, arguments, context).await {
            Ok(result) => completed(result),
            Err(error) => error.into(),
        }
    }

    async fn call_through_breaker(
        &self,
        tool: &RegisteredTool,
        arguments: JsonObject,
        context: CallContext<'_>,
    ) -> Result<CallToolResult, HubError> {
        let Some(server) = self.servers.iter().find(|s| s.config.name == tool.server) else {
            return Err(HubError::NotConfigured {
                server: tool.server.clone(),
            });
        };
        if server.config.read_only && !tool.read_only {
            return Err(HubError::ReadOnly {
                server: tool.server.clone(),
                tool: tool.tool.clone(),
            });
        }
        let attempt = server
            .breaker
            .attempt()
            .map_err(|wait| HubError::BreakerOpen {
                server: tool.server.clone(),
                wait,
            })?;
        let called = self.call_server(server, tool, arguments, context).await;
        match &called {
            Err(error) if error.is_unavailable() => attempt.failed(),
            _ => attempt.succeeded(),
        }
        called
    }

    async fn call_server(
        &self,
        server: &Server,
        tool: &RegisteredTool,
        arguments: JsonObject,
        context: CallContext<'_>,
    ) -> Result<CallToolResult, HubError> {
        let (connection, routes) = server.connection_and_routes().await?;
        let link = context
            .link
            .clone()
            .allowing_loopback_http(self.loopback_http);
        // A server that takes delegated tokens is called as the person, never as the
        // gateway in their stead.
        let _acting = match (server.http.delegates(), context.person) {
            (false, _) => None,
            (true, Some(person)) => {
                server
                    .http
                    .exchange_for(person)
                    .await
                    .map_err(|error| match error {
                        refused @ ExchangeError::Refused { .. } => HubError::NotForYou {
                            server: tool.server.clone(),
                            refused,
                        },
                        error => HubError::Exchange {
                            server: tool.server.clone(),
                            error,
                        },
                    })?;
                Some(server.http.acting_for(context.tool_call_id, person.clone()))
            }
            (true, None) => {
                return Err(HubError::NoPerson {
                    server: tool.server.clone(),
                });
            }
        };
        let mut meta = RequestMetaObject::default();
        meta.insert(END_USER_META.to_owned(), Value::from(context.end_user));
        meta.insert(TOOL_CALL_META.to_owned(), Value::from(context.tool_call_id));
        // One question is one trace: the MCP server continues it (SEP-414).
        meta.set_traceparent(context.traceparent);
        let mut params = CallToolRequestParams::new(tool.tool.clone()).with_arguments(arguments);
        params.meta = Some(meta);
        self.until_answered(server, tool, &connection, &routes, &link, params)
            .await
    }
}

/// What a call's result is for the model.
fn completed(result: CallToolResult) -> CallOutcome {
    let text: String = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    if result.is_error == Some(true) {
        CallOutcome::ToolError(text)
    } else {
        let text = match &result.structured_content {
            Some(structured) => structured.to_string(),
            None => text,
        };
        CallOutcome::Ok {
            text,
            structured: result.structured_content,
        }
    }
}
