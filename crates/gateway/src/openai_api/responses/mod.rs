//! OpenAI's Responses API, the front door of the OpenAI Agents SDK, Codex and the
//! `openai` SDKs' `client.responses`: `POST /v1/responses`, `GET
//! /v1/responses/{id}` (`?stream=true&starting_after=N`), `POST
//! /v1/responses/{id}/cancel`, `DELETE /v1/responses/{id}`. A response is one answer
//! of the gateway's, started as every answer is and kept in its conversation (which
//! the web UI shows); its id is the answer's (`ids`), its stream and its object a
//! projection of the answer's logged events (`projection`), which any replica can
//! make, so a stream continues anywhere. The gateway's tool calls are `mcp_call`
//! items; a write that needs approval ends the response with an
//! `mcp_approval_request`, answered by a new response (`decisions`). See
//! `docs/openai-api.md`.

mod begin;
pub mod book;
mod decisions;
mod errors;
mod handlers;
pub mod ids;
pub mod objects;
pub mod projection;
pub mod request;
mod stream;

use axum::Router;
use axum::routing::{get, post};

use crate::GatewayState;

pub(super) fn routes() -> Router<GatewayState> {
    Router::new()
        .route("/v1/responses", post(handlers::create))
        .route(
            "/v1/responses/{id}",
            get(handlers::retrieve).delete(handlers::delete),
        )
        .route("/v1/responses/{id}/cancel", post(handlers::cancel))
}
