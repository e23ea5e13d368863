//! The gateway's JSON body, whose rejections are the gateway's errors: malformed JSON,
//! wrong types, a missing content type and an oversized body each say what is wrong.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRef, FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use super::GatewayState;
use super::error::GatewayError;

pub(crate) struct GatewayJson<T>(pub T);

impl<S, T> FromRequest<S> for GatewayJson<T>
where
    S: Send + Sync,
    GatewayState: FromRef<S>,
    T: DeserializeOwned,
{
    type Rejection = GatewayError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(rejected(
                rejection,
                GatewayState::from_ref(state).body_limit,
            )),
        }
    }
}

fn rejected(rejection: JsonRejection, limit: usize) -> GatewayError {
    match rejection {
        JsonRejection::MissingJsonContentType(_) => GatewayError::UnsupportedMediaType(
            "send the body as JSON with Content-Type: application/json".into(),
        ),
        rejection if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            GatewayError::PayloadTooLarge { limit }
        }
        JsonRejection::JsonSyntaxError(e) => GatewayError::InvalidRequest(format!(
            "the body is not valid JSON: {}",
            e.body_text().split_once("JSON: ").map_or("", |(_, r)| r)
        )),
        rejection => GatewayError::InvalidRequest(rejection.body_text()),
    }
}
