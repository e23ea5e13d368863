//! The gateway's MCP side: the configured servers, the catalogue of their tools as
//! offered to the model, and calling them.

pub mod breaker;
mod call;
mod catalogue;
mod client_handler;
mod connection;
mod credentials;
mod discovery;
mod error;
mod http;
mod hub;
mod input_rounds;
pub mod interaction;
mod people;
pub mod policy;
mod request;
mod routes;
pub mod search;
mod spans;
mod tasks;

pub use call::{CallContext, CallOutcome, StartedTask, idempotency_key};
pub(crate) use catalogue::humanize;
pub use catalogue::{Catalogue, InvalidArguments, Offering, RegisteredTool};
pub use error::HubError;
pub use hub::{HubWiring, ToolHub};
pub use interaction::{AskKind, CallEvent, CallLink, InputAsk, InputReply, Progress};
pub use tasks::TaskState;
