//! The gateway's one error type, rendered as `{"code", "message", "details"}` (the
//! same envelope as the backend's, built by the same [`Envelope`]); see
//! [`maitred_core::http::error`] for the rule it follows.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use maitred_core::auth::AuthError;
use maitred_core::http::error::{DbFailure, Envelope, ErrorDetail, auth_status_and_code};

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("{0}")]
    InvalidRequest(String),
    #[error("the question is longer than {limit} characters")]
    QuestionTooLong { limit: usize },
    #[error("the request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// An answer to a tool's form that does not fit it: each problem names its field.
    #[error("the answer does not fit the form: {}", problems.join("; "))]
    InvalidInput { problems: Vec<String> },
    #[error("{what} {id} not found")]
    NotFound { what: &'static str, id: String },
    #[error("{0}")]
    Conflict(String),
    #[error("sign in first: this request needs a session or a bearer token")]
    NotSignedIn,
    #[error("the request's CSRF token is missing or wrong; reload the page")]
    Csrf,
    /// Signed in, but without the role the request needs.
    #[error("{0}")]
    Forbidden(String),
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error("too many requests: {reason}; retry in {retry_after} s")]
    RateLimited { reason: String, retry_after: u64 },
    #[error("the server is shutting down; ask again in a moment")]
    ShuttingDown,
    #[error(
        "your sign-in cannot be renewed right now (the identity provider is busy); retry in {retry_after} s"
    )]
    SessionUnavailable { retry_after: u64 },
    #[error("the database is unavailable")]
    Unavailable(#[source] sqlx::Error),
    /// Where running answers live (Redis, or the database's event log) failed.
    #[error("running answers cannot be reached right now; try again shortly")]
    LiveUnavailable(String),
    /// An MCP server the request needed could not be reached (a task's server).
    #[error("{0}")]
    ToolServer(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl GatewayError {
    pub fn not_found(what: &'static str, id: impl Into<String>) -> Self {
        Self::NotFound {
            what,
            id: id.into(),
        }
    }

    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            Self::InvalidRequest(_) | Self::InvalidInput { .. } => {
                (StatusCode::BAD_REQUEST, "INVALID_REQUEST")
            }
            Self::QuestionTooLong { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "INVALID_REQUEST"),
            Self::PayloadTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "INVALID_REQUEST"),
            Self::UnsupportedMediaType(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "INVALID_REQUEST")
            }
            Self::NotFound { .. } => (StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND"),
            Self::Conflict(_) => (StatusCode::CONFLICT, "CONFLICT"),
            Self::NotSignedIn => (StatusCode::UNAUTHORIZED, "AUTHENTICATION_ERROR"),
            Self::Csrf | Self::Forbidden(_) => (StatusCode::FORBIDDEN, "AUTHORIZATION_ERROR"),
            Self::Auth(error) => auth_status_and_code(error),
            Self::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "RATE_LIMIT_EXCEEDED"),
            Self::Unavailable(_)
            | Self::LiveUnavailable(_)
            | Self::ShuttingDown
            | Self::SessionUnavailable { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "SERVICE_UNAVAILABLE")
            }
            Self::ToolServer(_) => (StatusCode::BAD_GATEWAY, "UPSTREAM_ERROR"),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL_ERROR"),
        }
    }
}

impl From<sqlx::Error> for GatewayError {
    fn from(error: sqlx::Error) -> Self {
        match DbFailure::from(error) {
            DbFailure::Unavailable(error) => Self::Unavailable(error),
            DbFailure::Internal(error) => Self::Internal(error),
        }
    }
}

impl IntoResponse for GatewayError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        let envelope = match &self {
            Self::Internal(cause) => return Envelope::internal(cause).into_response(),
            Self::Unavailable(cause) => return Envelope::db_unavailable(cause).into_response(),
            Self::Auth(error) => return Envelope::auth(error).into_response(),
            Self::LiveUnavailable(cause) => Envelope::new(status, code, self.to_string())
                .logged(ErrorDetail::new("live state unavailable", cause)),
            other => Envelope::new(status, code, other.to_string()),
        };
        let envelope = match self {
            Self::NotFound { what, id } => {
                envelope.field("details", json!({ "resource": what, "id": id }))
            }
            Self::InvalidInput { problems } => {
                envelope.field("details", json!({ "problems": problems }))
            }
            Self::NotSignedIn => envelope.header(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"maitred\""),
            ),
            Self::RateLimited { retry_after, .. } | Self::SessionUnavailable { retry_after } => {
                envelope.retry_after(retry_after)
            }
            Self::LiveUnavailable(_) | Self::ShuttingDown => envelope.retry_after(5),
            _ => envelope,
        };
        envelope.into_response()
    }
}
