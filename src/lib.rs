//! maitred: a streaming chat gateway for tool-using LLMs. This crate is the binary's
//! wiring: [`app::App::bind`] starts any set of roles in one process, for `main` and
//! for the tests alike. Each role is its own crate, re-exported here under the name
//! the tests and benches use:
//!
//! - [`protocol`]: the chat stream's ids and events (depends on no crate of ours);
//! - [`core`](maitred_core): settings, HTTP serving, token checks, the database;
//! - [`identity`], [`backend`], [`mcp`] and [`gateway`]: the roles;
//! - [`llm`]: the model port and the OpenAI-compatible client the gateway drives.

pub mod app;
pub mod eval;

pub use maitred_backend as backend;
pub use maitred_core::{
    auth, cli, db, delegation, http, http_client, issuer, metrics, oauth_client, otel, random,
    settings, shutdown, telemetry, trace_context,
};
pub use maitred_gateway as gateway;
pub use maitred_identity as identity;
pub use maitred_llm as llm;
pub use maitred_mcp_server as mcp;
pub use maitred_protocol as protocol;
