//! The gateway's MCP side: the configured servers, the catalogue of their tools as
//! offered to the model, and calling them.

pub mod breaker;
mod http;
mod hub;
pub mod interaction;
pub mod policy;
mod routes;

pub use hub::{CallContext, CallOutcome, Catalogue, InvalidArguments, RegisteredTool, ToolHub};
pub use interaction::{AskKind, CallEvent, CallLink, InputAsk, InputReply, Progress};
