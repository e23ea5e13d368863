//! Calling a tool: what is refused before the server is asked (an unknown server,
//! a write to a read-only one, an open breaker), acting for the person where the
//! server takes delegated tokens, the call's `_meta`, and what its result is for the
//! model.

use maitred_core::delegation::ExchangeError;
use maitred_protocol::ids::{MessageId, ToolCallId};
use maitred_protocol::meta;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, CreateTaskResult, JsonObject, RequestMetaObject,
};
use secrecy::SecretString;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tracing::Instrument;

use super::catalogue::RegisteredTool;
use super::connection::{Line, Server};
use super::error::HubError;
use super::hub::ToolHub;
use super::input_rounds::Answered;
use super::interaction::CallLink;

/// The idempotency key of one call: minted by the gateway, never by the model, from
/// the answer and the gateway's id for the call (stored with the call), so it is the
/// same each time that call is sent: `mtd-` and the first 32 hex digits of the SHA-256
/// of the message id followed by the call id (each has its prefix, `msg_` and `tc_`).
pub fn idempotency_key(message: &MessageId, call: &ToolCallId) -> String {
    let mut hash = Sha256::new();
    hash.update(message.as_str().as_bytes());
    hash.update(call.as_str().as_bytes());
    let mut hex = hex::encode(hash.finalize());
    hex.truncate(32);
    format!("mtd-{hex}")
}

/// Who a call is made for, and the trace it belongs to (both go in `_meta`), and
/// where what the server says on the way (progress, requests for input) goes.
#[derive(Debug, Clone, Copy)]
pub struct CallContext<'a> {
    pub end_user: &'a str,
    /// The person's own token, for servers that take delegated tokens.
    pub person: Option<&'a SecretString>,
    pub tool_call_id: &'a str,
    /// The call's idempotency key (`idempotency_key`), for a tool that writes; none
    /// for a read.
    pub idempotency_key: Option<&'a str>,
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
    /// The server runs the call as a task: its result comes later, through
    /// `tasks/get` (`crate::tasks` follows it).
    Task(StartedTask),
}

/// A task as its server created it.
#[derive(Debug, Clone)]
pub struct StartedTask {
    /// The server's id for it.
    pub task_id: String,
    pub status_message: Option<String>,
    /// How often the server would have it polled.
    pub poll_interval_ms: Option<u64>,
}

impl From<CreateTaskResult> for StartedTask {
    fn from(created: CreateTaskResult) -> Self {
        Self {
            task_id: created.task.task_id,
            status_message: created.task.status_message,
            poll_interval_ms: created.task.poll_interval_ms,
        }
    }
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
            Ok(Answered::Result(result)) => completed(result),
            Ok(Answered::Task(task)) => CallOutcome::Task(task.into()),
            Err(error) => error.into(),
        }
    }

    async fn call_through_breaker(
        &self,
        tool: &RegisteredTool,
        arguments: JsonObject,
        context: CallContext<'_>,
    ) -> Result<Answered, HubError> {
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
    ) -> Result<Answered, HubError> {
        let link = context
            .link
            .clone()
            .allowing_loopback_http(self.loopback_http);
        let params = call_params(tool, arguments, &context);
        if self.accounts.is_user_oauth(&server.config.name) {
            return self
                .call_as_person(server, tool, params, &context, &link)
                .await;
        }
        let (connection, routes) = server.connection_and_routes().await?;
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
        // One question is one trace: the MCP server continues it (SEP-414).
        let span = super::spans::tools_call(&tool.server, &tool.tool, &connection);
        let params = with_trace(params, &span, context.traceparent);
        let line = Line {
            server,
            session: &server.session,
            connection: &connection,
            routes: &routes,
        };
        self.until_answered(line, tool, &link, params)
            .instrument(span)
            .await
    }
}

/// The request of a call: its arguments, and in `_meta` who it is for, the call's
/// id and its idempotency key.
fn call_params(
    tool: &RegisteredTool,
    arguments: JsonObject,
    context: &CallContext<'_>,
) -> CallToolRequestParams {
    let mut meta = RequestMetaObject::default();
    meta.insert(meta::END_USER.to_owned(), Value::from(context.end_user));
    meta.insert(
        meta::TOOL_CALL.to_owned(),
        Value::from(context.tool_call_id),
    );
    if let Some(key) = context.idempotency_key {
        meta.insert(meta::IDEMPOTENCY_KEY.to_owned(), Value::from(key));
    }
    let mut params = CallToolRequestParams::new(tool.tool.clone()).with_arguments(arguments);
    params.meta = Some(meta);
    params
}

/// The call's trace in its `_meta`: the client span's when traces are exported,
/// else the question's.
pub(super) fn with_trace(
    mut params: CallToolRequestParams,
    span: &tracing::Span,
    traceparent: &str,
) -> CallToolRequestParams {
    let meta = params.meta.get_or_insert_with(RequestMetaObject::default);
    match maitred_core::otel::trace_of(span) {
        Some(client) => meta.set_traceparent(client.header_value()),
        None => meta.set_traceparent(traceparent),
    }
    params
}

/// What a call's result is for the model.
pub(crate) fn completed(result: CallToolResult) -> CallOutcome {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calls_key_is_the_same_each_time_and_no_other_calls() {
        let message = MessageId::new();
        let call = ToolCallId::new();
        let key = idempotency_key(&message, &call);
        assert_eq!(key, idempotency_key(&message, &call));
        assert_eq!(key.len(), 4 + 32);
        assert!(key.starts_with("mtd-"));
        assert!(
            key[4..]
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_ne!(key, idempotency_key(&message, &ToolCallId::new()));
        assert_ne!(key, idempotency_key(&MessageId::new(), &call));
    }
}
