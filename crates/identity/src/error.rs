//! The identity provider's error type: OAuth 2 error responses (RFC 6749 §5.2).
//! See [`maitred_core::http::error`] for the rule every role's error follows.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use maitred_core::http::error::{ErrorDetail, oauth_body};

#[derive(Debug, thiserror::Error)]
#[error("{error}: {description}")]
pub struct OAuthError {
    pub status: StatusCode,
    pub error: &'static str,
    pub description: String,
    /// The client tried HTTP Basic authentication and failed: say so (RFC 6749 §5.2).
    pub basic_challenge: bool,
    pub retry_after: Option<u64>,
    /// What went wrong on our side, for the log (never sent).
    pub detail: Option<ErrorDetail>,
}

impl OAuthError {
    fn new(status: StatusCode, error: &'static str, description: impl Into<String>) -> Self {
        Self {
            status,
            error,
            description: description.into(),
            basic_challenge: false,
            retry_after: None,
            detail: None,
        }
    }

    pub fn invalid_request(description: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", description)
    }

    pub fn invalid_client(description: impl Into<String>, basic: bool) -> Self {
        Self {
            basic_challenge: basic,
            ..Self::new(StatusCode::UNAUTHORIZED, "invalid_client", description)
        }
    }

    pub fn invalid_grant(description: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_grant", description)
    }

    pub fn unauthorized_client(description: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "unauthorized_client", description)
    }

    pub fn unsupported_grant_type(description: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            description,
        )
    }

    pub fn invalid_scope(description: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_scope", description)
    }

    /// RFC 8707: the requested resource is not one this client may get tokens for.
    pub fn invalid_target(description: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_target", description)
    }

    pub fn invalid_token(description: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "invalid_token", description)
    }

    pub fn rate_limited(retry_after: u64) -> Self {
        Self {
            retry_after: Some(retry_after),
            ..Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!("too many requests; retry in {retry_after} s"),
            )
        }
    }

    /// The client learns only that it was our fault; the cause is logged once, by
    /// the common layer.
    pub fn server_error(cause: &dyn std::fmt::Display) -> Self {
        Self {
            detail: Some(ErrorDetail::new("identity provider error", cause)),
            ..Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "the identity provider failed; the request id in x-request-id identifies it in the logs",
            )
        }
    }
}

impl From<sqlx::Error> for OAuthError {
    fn from(error: sqlx::Error) -> Self {
        Self::server_error(&error)
    }
}

impl From<anyhow::Error> for OAuthError {
    fn from(error: anyhow::Error) -> Self {
        Self::server_error(&format!("{error:#}"))
    }
}

impl IntoResponse for OAuthError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            [
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
                (header::PRAGMA, HeaderValue::from_static("no-cache")),
            ],
            oauth_body(self.error, &self.description),
        )
            .into_response();
        let headers = response.headers_mut();
        if self.basic_challenge {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"maitred\""),
            );
        } else if self.error == "invalid_token" {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"maitred\", error=\"invalid_token\""),
            );
        }
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if let Some(detail) = self.detail {
            response.extensions_mut().insert(detail);
        }
        response
    }
}
