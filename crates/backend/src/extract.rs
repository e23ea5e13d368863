//! Extractors whose rejections speak the backend's error envelope.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::{ApiError, FieldError};

/// A JSON body; malformed JSON, wrong types, a missing content type and an oversized
/// body each get their own clear error.
pub(super) struct AppJson<T>(pub T);

impl<S, T> FromRequest<S> for AppJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let limit = req
            .extensions()
            .get::<BodyLimit>()
            .map_or(0, |limit| limit.0);
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(json_rejection(rejection, limit)),
        }
    }
}

/// The configured body limit, for the 413 message.
#[derive(Clone, Copy)]
pub(super) struct BodyLimit(pub usize);

fn json_rejection(rejection: JsonRejection, limit: usize) -> ApiError {
    match rejection {
        JsonRejection::JsonDataError(error) => {
            // serde_path_to_error's text: "path: what went wrong at line L column C".
            let text = error.body_text();
            let detail = after(&text, "target type: ").to_owned();
            let (field, message) = match detail.split_once(": ") {
                Some((path, message)) if !path.contains(' ') => {
                    (path.to_owned(), message.to_owned())
                }
                _ => ("body".to_owned(), detail),
            };
            ApiError::validation(vec![FieldError::new(field, message)])
        }
        JsonRejection::JsonSyntaxError(error) => {
            let text = error.body_text();
            let detail = after(&text, "JSON: ");
            ApiError::invalid(format!("the body is not valid JSON: {detail}"))
        }
        JsonRejection::MissingJsonContentType(_) => ApiError::UnsupportedMediaType(
            "send the body as JSON with Content-Type: application/json".to_owned(),
        ),
        other if other.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::PayloadTooLarge { limit }
        }
        other => ApiError::invalid(other.body_text()),
    }
}

/// Query parameters; a value of the wrong type is a 400 that names the parameter.
pub(super) struct ApiQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Self(value)),
            Err(QueryRejection::FailedToDeserializeQueryString(error)) => {
                let text = error.body_text();
                let detail = after(&text, "query string: ");
                Err(ApiError::invalid(format!(
                    "invalid query parameter: {detail}"
                )))
            }
            Err(other) => Err(ApiError::invalid(other.body_text())),
        }
    }
}

/// What an error text from serde says after `marker` (its own words, without the
/// prefix axum puts before them), or all of it.
fn after<'t>(text: &'t str, marker: &str) -> &'t str {
    text.split_once(marker).map_or(text, |(_, rest)| rest)
}
