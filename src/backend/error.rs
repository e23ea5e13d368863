//! The backend's one error type, rendered as the resOS error envelope
//! `{"code", "message", "details"}`. Internal causes are logged once, never sent.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};

use crate::auth::{AuthError, AuthErrorKind};

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{message}")]
    InvalidRequest {
        message: String,
        details: Option<Value>,
    },
    #[error("{message}")]
    Validation {
        message: String,
        fields: Vec<FieldError>,
    },
    #[error("{resource} {id} not found")]
    NotFound { resource: &'static str, id: String },
    #[error("{message}")]
    Conflict {
        message: String,
        details: Option<Value>,
    },
    #[error("{message}")]
    Unprocessable {
        message: String,
        details: Option<Value>,
    },
    #[error("the request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{0}")]
    NoRoute(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error("the database is unavailable")]
    Unavailable(#[source] sqlx::Error),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl ApiError {
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::InvalidRequest {
            message: message.into(),
            details: None,
        }
    }

    pub fn validation(fields: Vec<FieldError>) -> Self {
        let message = match fields.as_slice() {
            [one] => format!("{}: {}", one.field, one.message),
            _ => format!("{} fields are invalid", fields.len()),
        };
        Self::Validation { message, fields }
    }

    pub fn not_found(resource: &'static str, id: impl Into<String>) -> Self {
        Self::NotFound {
            resource,
            id: id.into(),
        }
    }

    pub fn conflict(message: impl Into<String>, details: Option<Value>) -> Self {
        Self::Conflict {
            message: message.into(),
            details,
        }
    }

    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            Self::InvalidRequest { .. } => (StatusCode::BAD_REQUEST, "INVALID_REQUEST"),
            Self::Validation { .. } => (StatusCode::BAD_REQUEST, "VALIDATION_ERROR"),
            Self::NotFound { .. } | Self::NoRoute(_) => {
                (StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND")
            }
            Self::Conflict { .. } => (StatusCode::CONFLICT, "CONFLICT"),
            Self::Unprocessable { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR"),
            Self::PayloadTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "INVALID_REQUEST"),
            Self::UnsupportedMediaType(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "INVALID_REQUEST")
            }
            Self::MethodNotAllowed(_) => (StatusCode::METHOD_NOT_ALLOWED, "INVALID_REQUEST"),
            Self::Auth(error) => match error.kind {
                AuthErrorKind::MissingToken | AuthErrorKind::InvalidToken => {
                    (StatusCode::UNAUTHORIZED, "AUTHENTICATION_ERROR")
                }
                AuthErrorKind::InsufficientScope { .. } => {
                    (StatusCode::FORBIDDEN, "AUTHORIZATION_ERROR")
                }
                AuthErrorKind::IssuerUnavailable => {
                    (StatusCode::SERVICE_UNAVAILABLE, "SERVICE_UNAVAILABLE")
                }
            },
            Self::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "SERVICE_UNAVAILABLE"),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL_ERROR"),
        }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(error: sqlx::Error) -> Self {
        match error {
            sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
                Self::Unavailable(error)
            }
            other => Self::Internal(anyhow::Error::new(other).context("database query")),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        let message = match &self {
            Self::Internal(cause) => {
                tracing::error!(cause = format!("{cause:#}"), "internal error");
                "internal error; the request id in x-request-id identifies it in the logs"
                    .to_owned()
            }
            Self::Unavailable(cause) => {
                tracing::error!(%cause, "database unavailable");
                "the database is unavailable; try again shortly".to_owned()
            }
            other => other.to_string(),
        };
        let mut body = json!({ "code": code, "message": message });
        match &self {
            Self::InvalidRequest {
                details: Some(details),
                ..
            }
            | Self::Conflict {
                details: Some(details),
                ..
            }
            | Self::Unprocessable {
                details: Some(details),
                ..
            } => body["details"] = details.clone(),
            Self::Validation { fields, .. } => {
                // resOS's ValidationError carries `fields` at the top level.
                body["fields"] = json!(fields);
                body["details"] = json!({ "fields": fields });
            }
            Self::NotFound { resource, id } => {
                body["details"] = json!({ "resource": resource, "id": id });
            }
            _ => {}
        }
        let mut response = (status, Json(body)).into_response();
        if let Self::Auth(error) = &self {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, error.challenge.clone());
        }
        if matches!(self, Self::Unavailable(_)) {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        response
    }
}
