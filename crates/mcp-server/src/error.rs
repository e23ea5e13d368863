//! The MCP role's HTTP-level refusals (before a request reaches the MCP protocol):
//! RFC 6750 bodies and challenges, so any OAuth-aware MCP client knows what to do.
//! See [`maitred_core::http::error`] for the rule every role's error follows.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use maitred_core::auth::{AuthError, AuthErrorKind};
use maitred_core::http::error::oauth_body;

#[derive(Debug, thiserror::Error)]
pub(super) enum McpHttpError {
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error("this session belongs to another subject")]
    ForeignSession,
    #[error("the request body is not readable: {0}")]
    Body(String),
    #[error("too many MCP sessions open")]
    TooManySessions(super::access::SessionsCapped),
}

impl IntoResponse for McpHttpError {
    fn into_response(self) -> Response {
        match self {
            McpHttpError::Auth(error) => {
                let code = match error.kind {
                    AuthErrorKind::InsufficientScope { .. } => "insufficient_scope",
                    AuthErrorKind::IssuerUnavailable => "temporarily_unavailable",
                    AuthErrorKind::MissingToken | AuthErrorKind::InvalidToken => "invalid_token",
                };
                (
                    error.status(),
                    [(header::WWW_AUTHENTICATE, error.challenge.clone())],
                    oauth_body(code, &error.message),
                )
                    .into_response()
            }
            McpHttpError::ForeignSession => (
                StatusCode::FORBIDDEN,
                oauth_body(
                    "forbidden",
                    "this MCP session was started by another subject; start your own with initialize",
                ),
            )
                .into_response(),
            McpHttpError::Body(detail) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                oauth_body("invalid_request", &detail),
            )
                .into_response(),
            // A session idles out within five minutes: the soonest a place frees
            // itself unless the caller closes one (DELETE).
            McpHttpError::TooManySessions(capped) => {
                let text = match capped {
                    super::access::SessionsCapped::Caller(cap) => format!(
                        "you hold {cap} MCP sessions open already, as many as one caller may; close one (DELETE with its Mcp-Session-Id) or reuse it"
                    ),
                    super::access::SessionsCapped::Everyone(cap) => format!(
                        "this MCP server holds as many sessions as it keeps at once ({cap}); try again in a few minutes"
                    ),
                };
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    [(header::RETRY_AFTER, "60")],
                    oauth_body("too_many_sessions", &text),
                )
                    .into_response()
            }
        }
    }
}
