//! Errors in OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, so the
//! SDKs raise their usual exceptions (by status: 401 AuthenticationError, 404
//! NotFoundError, 429 RateLimitError…). The gateway's own errors are translated here;
//! their internal causes are logged once, as the gateway's envelope does.

use axum::Json;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{Datelike, Duration, NaiveTime, TimeZone, Utc};
use serde::Serialize;

use crate::error::GatewayError;
use maitred_core::auth::AuthErrorKind;

/// Boxed: it is the `Err` of every handler step, and small results stay cheap.
#[derive(Debug)]
pub struct OpenAiError(Box<Parts>);

#[derive(Debug)]
struct Parts {
    status: StatusCode,
    body: ErrorBody,
    headers: HeaderMap,
}

/// The `error` object, as OpenAI sends it (also inside a stream that fails).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorBody {
    pub message: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub param: Option<&'static str>,
    pub code: Option<String>,
}

#[derive(Serialize)]
struct Envelope<'a> {
    error: &'a ErrorBody,
}

impl OpenAiError {
    pub(super) fn new(status: StatusCode, kind: &'static str, code: &str, message: String) -> Self {
        Self(Box::new(Parts {
            status,
            body: ErrorBody {
                message,
                kind,
                param: None,
                code: Some(code.to_owned()),
            },
            headers: HeaderMap::new(),
        }))
    }

    /// With `Retry-After: seconds`.
    pub(super) fn retry_after(mut self, seconds: u64) -> Self {
        self.0
            .headers
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        self
    }

    /// With `param` naming the field at fault.
    pub(super) fn param(mut self, param: &'static str) -> Self {
        self.0.body.param = Some(param);
        self
    }

    /// 400 for a request this API cannot take; `param` names the field.
    pub fn invalid(param: &'static str, message: impl Into<String>) -> Self {
        let mut error = Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "invalid_value",
            message.into(),
        );
        error.0.body.param = Some(param);
        error
    }

    pub fn model_not_found(model: &str) -> Self {
        let mut error = Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "model_not_found",
            format!(
                "The model `{model}` does not exist; GET /v1/models lists the ones this gateway serves."
            ),
        );
        error.0.body.param = Some("model");
        error
    }

    /// No bearer token: this API has no sessions.
    pub fn no_token() -> Self {
        let mut error = Self::new(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            "invalid_api_key",
            "Send an access token for the gateway as the API key (Authorization: Bearer …)."
                .to_owned(),
        );
        error.0.headers.insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"maitred\""),
        );
        error
    }

    /// An answer that failed once it had begun (non-streaming: nothing was sent yet).
    pub fn answer_failed(code: &str, message: String) -> Self {
        let status = match code {
            "interrupted" | "model_busy" | "model_rate_limited" => StatusCode::SERVICE_UNAVAILABLE,
            "storage" => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_GATEWAY,
        };
        Self::new(status, "server_error", code, message)
    }
}

impl From<GatewayError> for OpenAiError {
    fn from(error: GatewayError) -> Self {
        use GatewayError as E;
        let (status, kind, code) = match &error {
            E::InvalidRequest(_) | E::InvalidInput { .. } => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_request",
            ),
            E::QuestionTooLong { .. } | E::PayloadTooLarge { .. } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                "request_too_large",
            ),
            E::UnsupportedMediaType(_) => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "invalid_request_error",
                "unsupported_media_type",
            ),
            E::NotFound { .. } => (StatusCode::NOT_FOUND, "invalid_request_error", "not_found"),
            E::Conflict(_) => (StatusCode::CONFLICT, "invalid_request_error", "conflict"),
            E::ToolServer(_) => (StatusCode::BAD_GATEWAY, "server_error", "upstream_error"),
            E::Forbidden(_) => (
                StatusCode::FORBIDDEN,
                "permission_error",
                "insufficient_permissions",
            ),
            E::NotSignedIn | E::Csrf => (
                StatusCode::UNAUTHORIZED,
                "invalid_request_error",
                "invalid_api_key",
            ),
            E::Auth(auth) => match auth.kind {
                AuthErrorKind::MissingToken | AuthErrorKind::InvalidToken => (
                    StatusCode::UNAUTHORIZED,
                    "invalid_request_error",
                    "invalid_api_key",
                ),
                AuthErrorKind::InsufficientScope { .. } => (
                    StatusCode::FORBIDDEN,
                    "invalid_request_error",
                    "insufficient_scope",
                ),
                AuthErrorKind::IssuerUnavailable => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "server_error",
                    "service_unavailable",
                ),
            },
            E::RateLimited { .. } => (
                StatusCode::TOO_MANY_REQUESTS,
                "requests",
                "rate_limit_exceeded",
            ),
            E::ShuttingDown
            | E::SessionUnavailable { .. }
            | E::Unavailable(_)
            | E::LiveUnavailable(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "service_unavailable",
            ),
            E::Internal(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "internal_error",
            ),
        };
        let message = match &error {
            E::Internal(cause) => {
                tracing::error!(cause = format!("{cause:#}"), "internal error");
                "internal error; the request id in x-request-id identifies it in the logs"
                    .to_owned()
            }
            E::Unavailable(cause) => {
                tracing::error!(%cause, "database unavailable");
                "the database is unavailable; try again shortly".to_owned()
            }
            E::LiveUnavailable(cause) => {
                tracing::error!(%cause, "live state unavailable");
                error.to_string()
            }
            other => other.to_string(),
        };
        let mut translated = Self::new(status, kind, code, message);
        let headers = &mut translated.0.headers;
        match &error {
            E::Auth(auth) => {
                headers.insert(header::WWW_AUTHENTICATE, auth.challenge.clone());
            }
            E::NotSignedIn | E::Csrf => {
                headers.insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"maitred\""),
                );
            }
            E::RateLimited { retry_after, .. } | E::SessionUnavailable { retry_after } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(*retry_after));
            }
            E::Unavailable(_) | E::LiveUnavailable(_) | E::ShuttingDown => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            }
            _ => {}
        }
        translated
    }
}

/// How long a client waits before asking again when a budget that never renews by
/// itself (`total`) is spent: an administrator may raise it meanwhile.
const NOT_RENEWING: u64 = 3600;

/// The answer was refused for a spent budget: 429, with the seconds until the
/// budget's `window` renews.
pub(super) fn budget_spent(message: &str, window: Option<&str>) -> OpenAiError {
    OpenAiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "requests",
        "rate_limit_exceeded",
        message.to_owned(),
    )
    .retry_after(until_renewed(window, Utc::now()))
}

/// Seconds from `now` until a budget of `window` renews (UTC days and months).
fn until_renewed(window: Option<&str>, now: chrono::DateTime<Utc>) -> u64 {
    let today = now.date_naive();
    let next = match window {
        Some("daily") => today.succ_opt(),
        Some("monthly") => {
            let (year, month) = if today.month() == 12 {
                (today.year() + 1, 1)
            } else {
                (today.year(), today.month() + 1)
            };
            chrono::NaiveDate::from_ymd_opt(year, month, 1)
        }
        _ => None,
    };
    next.map(|day| Utc.from_utc_datetime(&day.and_time(NaiveTime::MIN)))
        .and_then(|at| u64::try_from((at - now).max(Duration::seconds(1)).num_seconds()).ok())
        .unwrap_or(NOT_RENEWING)
}

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        let Parts {
            status,
            body,
            headers,
        } = *self.0;
        let mut response = (status, Json(Envelope { error: &body })).into_response();
        response.headers_mut().extend(headers);
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_renews_at_the_next_utc_day_or_month() {
        let now = Utc.with_ymd_and_hms(2026, 12, 31, 23, 0, 0).unwrap();
        assert_eq!(until_renewed(Some("daily"), now), 3600);
        assert_eq!(until_renewed(Some("monthly"), now), 3600);
        let mid_month = Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap();
        assert_eq!(until_renewed(Some("monthly"), mid_month), 86_400);
        assert_eq!(until_renewed(Some("total"), now), NOT_RENEWING);
        assert_eq!(until_renewed(None, now), NOT_RENEWING);
    }
}
