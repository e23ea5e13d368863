//! The backend's one error type, rendered as the resOS error envelope
//! `{"code", "message", "details"}`; see [`maitred_core::http::error`] for the rule it
//! follows (internal causes are logged once, by the common layer, never sent).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};

use maitred_core::auth::AuthError;
use maitred_core::http::error::{DbFailure, Envelope, auth_status_and_code};

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
    /// An `Idempotency-Key` sent again with another request.
    #[error("{0}")]
    IdempotencyKeyReused(String),
    /// An `Idempotency-Key` whose first request has not finished.
    #[error("{message}")]
    IdempotencyKeyInFlight { message: String, retry_after: u64 },
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
            Self::IdempotencyKeyReused(_) => {
                (StatusCode::UNPROCESSABLE_ENTITY, "IDEMPOTENCY_KEY_REUSED")
            }
            Self::IdempotencyKeyInFlight { .. } => {
                (StatusCode::CONFLICT, "IDEMPOTENCY_KEY_IN_FLIGHT")
            }
            Self::PayloadTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "INVALID_REQUEST"),
            Self::UnsupportedMediaType(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "INVALID_REQUEST")
            }
            Self::MethodNotAllowed(_) => (StatusCode::METHOD_NOT_ALLOWED, "INVALID_REQUEST"),
            Self::Auth(error) => auth_status_and_code(error),
            Self::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "SERVICE_UNAVAILABLE"),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL_ERROR"),
        }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(error: sqlx::Error) -> Self {
        match DbFailure::from(error) {
            DbFailure::Unavailable(error) => Self::Unavailable(error),
            DbFailure::Internal(error) => Self::Internal(error),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let envelope = match &self {
            Self::Internal(cause) => Envelope::internal(cause),
            Self::Unavailable(cause) => Envelope::db_unavailable(cause),
            Self::Auth(error) => Envelope::auth(error),
            other => {
                let (status, code) = other.status_and_code();
                Envelope::new(status, code, other.to_string())
            }
        };
        let envelope = match self {
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
            } => envelope.field("details", details),
            Self::Validation { fields, .. } => {
                // resOS's ValidationError carries `fields` at the top level.
                envelope
                    .field("fields", json!(fields))
                    .field("details", json!({ "fields": fields }))
            }
            Self::NotFound { resource, id } => {
                envelope.field("details", json!({ "resource": resource, "id": id }))
            }
            Self::IdempotencyKeyReused(_) => {
                envelope.field("details", json!({ "header": "Idempotency-Key" }))
            }
            Self::IdempotencyKeyInFlight { retry_after, .. } => envelope
                .field("details", json!({ "header": "Idempotency-Key" }))
                .retry_after(retry_after),
            _ => envelope,
        };
        envelope.into_response()
    }
}
