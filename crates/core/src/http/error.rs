//! The one error rule every role follows, and the pieces of it the roles share.
//!
//! # The rule
//!
//! * **The data layer** (`crate::db`, the roles' stores and row readers) returns
//!   `sqlx::Error`, or a small error of its own where it knows more (the identity
//!   store's, the gateway's live state). It never builds an HTTP status or body.
//! * **Handlers and extractors** return their role's one error type: the backend's
//!   `ApiError`, the gateway's `GatewayError`, the MCP role's `McpHttpError` (before a
//!   request reaches the MCP protocol) and the identity provider's `OAuthError`. A
//!   database error becomes one with `?`: every role's `From<sqlx::Error>` goes
//!   through [`DbFailure`], so "the pool is gone" is a 503 with `Retry-After` and any
//!   other query failure an internal error, the same everywhere. A token refusal
//!   ([`AuthError`](crate::auth::AuthError)) maps to status and code through
//!   [`auth_status_and_code`]. Each role's JSON body extractor rejects with that
//!   same error type, so a bad body speaks the role's envelope too.
//! * **Responses.** The backend and the gateway answer with the
//!   `{"code", "message", "details"}` envelope built by [`Envelope`]; the identity
//!   provider and the MCP role answer RFC 6749 / RFC 6750 bodies
//!   (`{"error", "error_description"}`, [`oauth_body`]). A client never sees an
//!   internal cause: the message of an internal error only points at the request id.
//! * **Logging.** An error is logged once, by the [`log_errors`] layer of the common
//!   stack, inside the request's span (so the line carries the request and trace
//!   ids). `into_response` does not log and handlers do not log errors they return:
//!   a response that has something to tell the operator carries it as an
//!   [`ErrorDetail`] extension, which the layer logs and which never reaches the
//!   client.

use std::fmt;
use std::sync::Arc;

use axum::Json;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::auth::{AuthError, AuthErrorKind};

/// The message of every internal error; the cause goes to the log, not the client.
pub const INTERNAL_MESSAGE: &str =
    "internal error; the request id in x-request-id identifies it in the logs";

/// The message of a 503 because the database cannot be reached.
pub const DB_UNAVAILABLE_MESSAGE: &str = "the database is unavailable; try again shortly";

/// What a database error means to a client: the database is out of reach for now
/// (retry), or something is wrong on our side.
#[derive(Debug)]
pub enum DbFailure {
    Unavailable(sqlx::Error),
    Internal(anyhow::Error),
}

impl From<sqlx::Error> for DbFailure {
    fn from(error: sqlx::Error) -> Self {
        match error {
            sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
                Self::Unavailable(error)
            }
            other => Self::Internal(anyhow::Error::new(other).context("database query")),
        }
    }
}

/// The status and envelope code of a token refusal.
pub fn auth_status_and_code(error: &AuthError) -> (StatusCode, &'static str) {
    match error.kind {
        AuthErrorKind::MissingToken | AuthErrorKind::InvalidToken => {
            (StatusCode::UNAUTHORIZED, "AUTHENTICATION_ERROR")
        }
        AuthErrorKind::InsufficientScope { .. } => (StatusCode::FORBIDDEN, "AUTHORIZATION_ERROR"),
        AuthErrorKind::IssuerUnavailable => {
            (StatusCode::SERVICE_UNAVAILABLE, "SERVICE_UNAVAILABLE")
        }
    }
}

/// What the operator should learn of a failed request: carried by the response as
/// an extension, logged once by [`log_errors`], never sent.
#[derive(Debug, Clone)]
pub struct ErrorDetail {
    what: &'static str,
    cause: Arc<str>,
}

impl ErrorDetail {
    pub fn new(what: &'static str, cause: impl fmt::Display) -> Self {
        Self {
            what,
            cause: cause.to_string().into(),
        }
    }

    /// An `anyhow` error with its whole chain of causes.
    pub fn chain(what: &'static str, cause: &anyhow::Error) -> Self {
        Self::new(what, format_args!("{cause:#}"))
    }
}

/// The layer that logs every response's [`ErrorDetail`], in the request's span.
pub async fn log_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if let Some(detail) = response.extensions().get::<ErrorDetail>() {
        tracing::error!(
            status = response.status().as_u16(),
            cause = %detail.cause,
            "{}",
            detail.what
        );
    }
    response
}

/// The `{"code", "message", "details"}` error envelope of the backend and the
/// gateway, with its headers and what to log.
#[must_use]
pub struct Envelope {
    status: StatusCode,
    body: Value,
    headers: Vec<(HeaderName, HeaderValue)>,
    detail: Option<ErrorDetail>,
}

impl Envelope {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            body: json!({ "code": code, "message": message.into() }),
            headers: Vec::new(),
            detail: None,
        }
    }

    /// A 500 that says only where to look; the cause is logged.
    pub fn internal(cause: &anyhow::Error) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "INTERNAL_ERROR",
            INTERNAL_MESSAGE,
        )
        .logged(ErrorDetail::chain("internal error", cause))
    }

    /// A 503 with `Retry-After`: the database is out of reach.
    pub fn db_unavailable(cause: &sqlx::Error) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "SERVICE_UNAVAILABLE",
            DB_UNAVAILABLE_MESSAGE,
        )
        .retry_after(5)
        .logged(ErrorDetail::new("database unavailable", cause))
    }

    /// A token refusal, with its `WWW-Authenticate` challenge.
    pub fn auth(error: &AuthError) -> Self {
        let (status, code) = auth_status_and_code(error);
        Self::new(status, code, error.message.clone())
            .header(header::WWW_AUTHENTICATE, error.challenge.clone())
    }

    /// Sets a top-level field of the body, `details` among them.
    pub fn field(mut self, name: &str, value: Value) -> Self {
        self.body[name] = value;
        self
    }

    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    pub fn retry_after(self, seconds: u64) -> Self {
        self.header(header::RETRY_AFTER, HeaderValue::from(seconds))
    }

    pub fn logged(mut self, detail: ErrorDetail) -> Self {
        self.detail = Some(detail);
        self
    }
}

impl IntoResponse for Envelope {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body)).into_response();
        for (name, value) in self.headers {
            response.headers_mut().insert(name, value);
        }
        if let Some(detail) = self.detail {
            response.extensions_mut().insert(detail);
        }
        response
    }
}

/// An OAuth 2 error body (RFC 6749 §5.2, RFC 6750 §3.1): `{"error", "error_description"}`.
pub fn oauth_body(error: &str, description: &str) -> Json<Value> {
    Json(json!({ "error": error, "error_description": description }))
}
