//! The Responses API's own refusals, in OpenAI's error shape (the gateway's errors
//! are translated as on `/v1/chat/completions`). A refusal is never a 5xx: a spent
//! budget is a 429 with when to come back, a response that is not the caller's a 404.

use axum::http::StatusCode;
use chrono::{Datelike, Duration, NaiveTime, TimeZone, Utc};

use super::super::errors::OpenAiError;
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

/// How long a client waits before asking again when a budget that never renews by
/// itself (`total`) is spent: an administrator may raise it meanwhile.
const NOT_RENEWING: u64 = 3600;

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
