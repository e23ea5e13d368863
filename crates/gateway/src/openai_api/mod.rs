//! The OpenAI-compatible API: `POST /v1/chat/completions` and `GET /v1/models`, so
//! the openai SDKs, LangChain, Open WebUI and their kin can use maitred as a model;
//! and OpenAI's Responses API (`/v1/responses`, in [`responses`]).
//! Model `maitred` is the whole gateway: the same answer loop, tools, limits, stored
//! conversations and live state as the chat API (an answer starts through
//! `chat::start`), with its answer in OpenAI's wire format. Nobody can approve a
//! write on `/v1/chat/completions`, so a call that needs approval is refused there
//! unless a remembered approval covers it. See `docs/openai-api.md`.

mod auth;
pub mod chunks;
mod errors;
mod handler;
pub mod request;
pub mod responses;

use axum::Router;
use axum::routing::{get, post};

use super::GatewayState;

/// What the model is told when a call needs an approval nobody can give here.
pub const NO_APPROVALS: &str = "approvals are not possible on the OpenAI-compatible API";

pub fn routes() -> Router<GatewayState> {
    Router::new()
        .route("/v1/chat/completions", post(handler::completions))
        .route("/v1/models", get(handler::models))
        .merge(responses::routes())
}
