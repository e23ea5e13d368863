//! The accounts' one error type. It reaches two edges: the person's API and the
//! callback page (through [`GatewayError`]), and a tool call (through the hub's
//! error, as text the model reads). Each message says what the person can do.

use rmcp::transport::auth::AuthError;

use super::sealed::Unsealable;
use crate::error::GatewayError;

#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("no MCP server {0} needs a sign-in of its own here")]
    UnknownServer(String),
    /// The person has not connected the server (or their sign-in was forgotten).
    #[error("you have not connected {0}")]
    NotConnected(String),
    /// The authorization server refused the refresh token: the person signs in again.
    #[error("your sign-in at {0} has ended; connect it again")]
    SignInEnded(String),
    #[error("the server {server}'s authorization server cannot be used: {detail}")]
    Discovery { server: String, detail: String },
    #[error("maitred cannot register at {server}'s authorization server: {detail}")]
    Registration { server: String, detail: String },
    #[error("{server}'s authorization server did not answer as expected: {detail}")]
    AuthorizationServer { server: String, detail: String },
    /// Another replica's refresh took too long.
    #[error("your access to {0} is being renewed; try again in a moment")]
    RefreshBusy(String),
    // The callback's failures, each a sign-in that does not go on.
    #[error("this sign-in link is unknown; start again from the chat or the accounts panel")]
    UnknownState,
    #[error("this sign-in link was already used; start again from the chat or the accounts panel")]
    StateUsed,
    #[error(
        "this sign-in was started by someone else; sign in to maitred as yourself and start again"
    )]
    NotYours,
    #[error(
        "this sign-in took too long and has expired; start again from the chat or the accounts panel"
    )]
    Expired,
    #[error(
        "the sign-in came back from another authorization server than {server}'s (iss {received}); it was refused"
    )]
    WrongIssuer { server: String, received: String },
    #[error(
        "the sign-in came back without naming its authorization server (iss), which {server}'s requires; it was refused"
    )]
    MissingIssuer { server: String },
    #[error("the sign-in came back incomplete: {0}")]
    BadCallback(String),
    #[error("a stored account cannot be opened: {0}")]
    Unsealable(#[source] Unsealable),
    #[error("the database is unavailable")]
    Database(#[from] sqlx::Error),
}

impl AccountError {
    /// An rmcp OAuth failure at `server`'s authorization server.
    pub(crate) fn at(server: &str, error: AuthError) -> Self {
        match error {
            AuthError::AuthorizationServerMismatch {
                received_issuer, ..
            } => Self::WrongIssuer {
                server: server.to_owned(),
                received: received_issuer,
            },
            AuthError::AuthorizationServerMissingIssuer { .. } => Self::MissingIssuer {
                server: server.to_owned(),
            },
            AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_) => {
                Self::SignInEnded(server.to_owned())
            }
            AuthError::CredentialStoreError(detail) if detail == super::states::USED => {
                Self::StateUsed
            }
            AuthError::CredentialStoreError(detail) => Self::AuthorizationServer {
                server: server.to_owned(),
                detail,
            },
            error @ (AuthError::MetadataError(_)
            | AuthError::NoAuthorizationSupport
            | AuthError::PkceUnsupported
            | AuthError::UrlError(_)) => Self::Discovery {
                server: server.to_owned(),
                detail: error.to_string(),
            },
            AuthError::RegistrationFailed(detail) => Self::Registration {
                server: server.to_owned(),
                detail,
            },
            error => Self::AuthorizationServer {
                server: server.to_owned(),
                detail: error.to_string(),
            },
        }
    }
}

impl From<AccountError> for GatewayError {
    fn from(error: AccountError) -> Self {
        match error {
            AccountError::UnknownServer(server) => {
                GatewayError::not_found("MCP server with sign-in", server)
            }
            AccountError::NotConnected(server) => {
                GatewayError::not_found("connected account at", server)
            }
            AccountError::NotYours => GatewayError::Forbidden(error.to_string()),
            AccountError::Database(error) => GatewayError::Unavailable(error),
            AccountError::Discovery { .. }
            | AccountError::Registration { .. }
            | AccountError::AuthorizationServer { .. }
            | AccountError::RefreshBusy(_) => GatewayError::ToolServer(error.to_string()),
            AccountError::Unsealable(_) => GatewayError::Internal(anyhow::anyhow!("{error}")),
            AccountError::SignInEnded(_)
            | AccountError::UnknownState
            | AccountError::StateUsed
            | AccountError::Expired
            | AccountError::WrongIssuer { .. }
            | AccountError::MissingIssuer { .. }
            | AccountError::BadCallback(_) => GatewayError::InvalidRequest(error.to_string()),
        }
    }
}
