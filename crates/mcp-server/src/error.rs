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
        }
    }
}
