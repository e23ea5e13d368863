//! The MCP role's HTTP-level refusals (before a request reaches the MCP protocol):
//! RFC 6750 bodies and challenges, so any OAuth-aware MCP client knows what to do.

use axum::Json;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::auth::{AuthError, AuthErrorKind};

#[derive(Debug, thiserror::Error)]
pub enum McpHttpError {
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
                    Json(json!({ "error": code, "error_description": error.message })),
                )
                    .into_response()
            }
            McpHttpError::ForeignSession => (
                StatusCode::FORBIDDEN,
                Json(json!({
                    "error": "forbidden",
                    "error_description": "this MCP session was started by another subject; start your own with initialize",
                })),
            )
                .into_response(),
            McpHttpError::Body(detail) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                Json(json!({ "error": "invalid_request", "error_description": detail })),
            )
                .into_response(),
        }
    }
}
