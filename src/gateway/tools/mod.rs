//! The gateway's MCP side: the configured servers, the catalogue of their tools as
//! offered to the model, and calling them.

pub mod config;
mod http;
mod hub;
pub mod schema;

pub use hub::{CallOutcome, Catalogue, RegisteredTool, ToolHub};
