//! The Responses API's own refusals, in OpenAI's error shape (the gateway's errors
//! are translated as on `/v1/chat/completions`). A refusal is never a 5xx: a spent
//! budget is a 429 with when to come back (shared with chat completions), a response
//! that is not the caller's a 404.

use axum::http::StatusCode;

use super::super::errors::OpenAiError;
pub(super) use super::super::errors::budget_spent;
use crate::error::GatewayError;
use crate::live::LiveError;

impl From<sqlx::Error> for OpenAiError {
    fn from(error: sqlx::Error) -> Self {
        GatewayError::from(error).into()
    }
}

impl From<LiveError> for OpenAiError {
    fn from(error: LiveError) -> Self {
        GatewayError::from(error).into()
    }
}

pub(super) fn too_large(message: String) -> OpenAiError {
    OpenAiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "invalid_request_error",
        "request_too_large",
        message,
    )
}

/// No response `id` of the caller's: unknown, another person's, not stored, or
/// deleted are all the same 404.
pub(super) fn not_found(id: &str) -> OpenAiError {
    OpenAiError::new(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        "not_found",
        format!("No response with id '{id}' found."),
    )
}

/// The same for a `previous_response_id`.
pub(super) fn previous_not_found(id: &str) -> OpenAiError {
    not_found(id).param("previous_response_id")
}

/// A request that does not fit the state of the response it names.
pub(super) fn invalid_state(param: &'static str, message: impl Into<String>) -> OpenAiError {
    OpenAiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        "invalid_state",
        message.into(),
    )
    .param(param)
}
