//! The hub's one error type: what can go wrong between the gateway and an MCP
//! server, from getting a token to the last round of a call.
//!
//! No hub failure reaches an HTTP response: its edge is the tool's result the model
//! reads (and tells the person). There a failure becomes a [`CallOutcome`]: a server
//! out of reach is "unavailable", which counts against its breaker and which the
//! model is told not to retry; anything else is the tool's error. So each message
//! names the server and what to do where that helps, and the texts are the ones the
//! model has always read.

use std::time::Duration;

use maitred_core::delegation::ExchangeError;
use rmcp::ErrorData;
use rmcp::ServiceError;
use rmcp::service::ClientInitializeError;

use super::call::CallOutcome;
use super::input_rounds::MAX_INPUT_ROUNDS;

#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// A tool of a server the configuration no longer has.
    #[error("the MCP server {server} is not configured")]
    NotConfigured { server: String },
    #[error("{tool} changes data, and the server {server} is read-only here")]
    ReadOnly { server: String, tool: String },
    #[error(
        "{server} failed repeatedly and is not called for now (next try in {} s)",
        wait.as_secs().max(1)
    )]
    BreakerOpen { server: String, wait: Duration },
    /// The transport and the protocol's greeting took longer than the server's timeout.
    #[error("no answer within {} s", timeout.as_secs_f64())]
    ConnectTimeout { timeout: Duration },
    /// The server answered, but no session came of it (`initialize`, `server/discover`).
    #[error(transparent)]
    Initialise(Box<ClientInitializeError>),
    #[error("tools/list took longer than {} s", timeout.as_secs_f64())]
    ListTimeout { timeout: Duration },
    #[error(transparent)]
    Listing(ServiceError),
    /// The gateway's own token for the server could not be had.
    #[error("{0:#}")]
    OwnToken(anyhow::Error),
    /// The person's token could not be exchanged for the server's.
    #[error(transparent)]
    PersonToken(ExchangeError),
    /// The issuer refused to exchange the person's token: their sign-in is over.
    #[error("{server} cannot be called for you: {refused}; sign in again")]
    NotForYou {
        server: String,
        refused: ExchangeError,
    },
    /// The exchange for the person's token failed otherwise (the issuer out of reach).
    #[error("{server}: {error}")]
    Exchange {
        server: String,
        error: ExchangeError,
    },
    /// A server that takes only delegated tokens, and a request without a person.
    #[error(
        "{server} acts only for a signed-in person, and this request carries no sign-in to act on; sign in again"
    )]
    NoPerson { server: String },
    #[error("{server} did not answer within {} s", timeout.as_secs_f64())]
    CallTimeout { server: String, timeout: Duration },
    /// The server answered the call with a JSON-RPC error.
    #[error("the tool refused the call: {}", .0.message)]
    Refused(ErrorData),
    /// The connection failed under the call; it is made anew for the next one.
    #[error("{server}: {error}")]
    Transport { server: String, error: ServiceError },
    #[error("the tool asked the gateway to sample a model, which it does not offer")]
    SamplingAsked,
    #[error("the tool asked for an input this gateway does not offer (only the person's)")]
    InputNotOffered,
    /// The person's answer could not be put into the next round's request.
    #[error(transparent)]
    Answer(serde_json::Error),
    #[error("{tool} asked for input more than {MAX_INPUT_ROUNDS} times in one call")]
    TooManyRounds { tool: String },
    /// The server no longer knows a task (it ended long ago, or the server restarted).
    #[error("{server} no longer knows this task ({detail})")]
    TaskGone { server: String, detail: String },
    #[error("{server} answered tools/call with something else than a result")]
    NotAResult { server: String },
    /// A person's own sign-in at the server could not be used or had.
    #[error("{error}")]
    Account {
        server: String,
        error: crate::accounts::AccountError,
    },
    #[error(
        "the person chose not to connect their account at {server}, so its tools cannot be used for them; nothing was done there. Tell them they can connect it from Connected accounts, or by asking again"
    )]
    ConnectDeclined { server: String },
    #[error(
        "the person did not finish signing in at {server} (the sign-in was not completed in time, or the answer stopped); nothing was done there"
    )]
    ConnectUnfinished { server: String },
}

impl HubError {
    /// Whether the server is out of reach (rather than the call being wrong): what
    /// the breaker counts, and what the model is told to report and not retry.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::NotConfigured { .. }
            | Self::BreakerOpen { .. }
            | Self::ConnectTimeout { .. }
            | Self::Initialise(_)
            | Self::ListTimeout { .. }
            | Self::Listing(_)
            | Self::OwnToken(_)
            | Self::PersonToken(_)
            | Self::Exchange { .. }
            | Self::CallTimeout { .. }
            | Self::Transport { .. } => true,
            Self::ReadOnly { .. }
            | Self::NotForYou { .. }
            | Self::NoPerson { .. }
            | Self::Refused(_)
            | Self::SamplingAsked
            | Self::InputNotOffered
            | Self::Answer(_)
            | Self::TooManyRounds { .. }
            | Self::TaskGone { .. }
            | Self::NotAResult { .. }
            | Self::Account { .. }
            | Self::ConnectDeclined { .. }
            | Self::ConnectUnfinished { .. } => false,
        }
    }
}

impl From<HubError> for CallOutcome {
    fn from(error: HubError) -> Self {
        if error.is_unavailable() {
            Self::Unavailable(error.to_string())
        } else {
            Self::ToolError(error.to_string())
        }
    }
}
