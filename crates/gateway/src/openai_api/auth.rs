//! Who is asking: the chat API's bearer token (`chat.write` to ask, `chat.read` to
//! list models), as OpenAI's API key. No session cookies here: OpenAI clients do not
//! have them, and a browser page must not be able to ask in someone's name.

use axum::extract::{FromRef, FromRequestParts};
use axum::http::header;
use axum::http::request::Parts;

use super::errors::OpenAiError;
use crate::{ChatUser, GatewayState};

pub(super) struct ApiUser(pub ChatUser);

impl<S> FromRequestParts<S> for ApiUser
where
    S: Send + Sync,
    GatewayState: FromRef<S>,
{
    type Rejection = OpenAiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        if !parts.headers.contains_key(header::AUTHORIZATION) {
            return Err(OpenAiError::no_token());
        }
        Ok(Self(ChatUser::from_request_parts(parts, state).await?))
    }
}
