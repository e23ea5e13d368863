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
    /// The callback came to another person's browser. The sign-in is over: its
    /// `state` and code cannot be brought to the right browser afterwards (a
    /// forwarded link would connect the starter's account to whoever signed in).
    /// `call` waited for it, for `owner`, and is told it was declined.
    #[error(
        "this sign-in was started by someone else; sign in to maitred as yourself and start again"
    )]
    NotYours { owner: String, call: Option<String> },
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
    /// The authorization server did not trade the code for tokens. The sign-in is
    /// over (its `state` was spent before the code was sent), and `call`, if one
    /// waited for it, is told.
    #[error("{server}'s authorization server did not accept the sign-in: {detail}")]
    NotRedeemed {
        server: String,
        call: Option<String>,
        detail: String,
    },
    #[error("a stored account cannot be opened: {0}")]
    Unsealable(#[source] Unsealable),
    /// The person has as many sign-ins under way as they may.
    #[error(
        "you have as many sign-ins under way as you may; finish one, or wait until one expires, then connect again"
    )]
    TooManySignIns,
    #[error("the database is unavailable")]
    Database(#[from] sqlx::Error),
}

impl AccountError {
    /// What the callback page says: never the authorization server's own words nor
    /// the `iss` a callback brought (anyone can write those into a link), only what
    /// happened and what the person can do. The whole error is logged instead.
    pub(crate) fn for_page(&self) -> String {
        const AGAIN: &str = "start again from the chat or the accounts panel";
        match self {
            Self::Discovery { server, .. } => {
                format!("{server}'s authorization server cannot be used right now; try again later")
            }
            Self::Registration { server, .. } => format!(
                "maitred cannot register at {server}'s authorization server right now; try again later"
            ),
            Self::AuthorizationServer { server, .. } => {
                format!("{server}'s authorization server did not answer as expected; {AGAIN}")
            }
            Self::NotRedeemed { server, .. } => {
                format!("{server}'s authorization server did not accept the sign-in; {AGAIN}")
            }
            Self::WrongIssuer { server, .. } => format!(
                "the sign-in came back naming another authorization server (iss) than {server}'s; it was refused"
            ),
            Self::BadCallback(_) => format!("the sign-in came back incomplete; {AGAIN}"),
            Self::Unsealable(_) => "a stored account cannot be opened".to_owned(),
            other => other.to_string(),
        }
    }

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
            AuthError::CredentialStoreError(detail) if detail == super::states::TOO_MANY => {
                Self::TooManySignIns
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
            AccountError::NotYours { .. } => GatewayError::Forbidden(error.to_string()),
            AccountError::Database(error) => GatewayError::Unavailable(error),
            AccountError::Discovery { .. }
            | AccountError::Registration { .. }
            | AccountError::AuthorizationServer { .. }
            | AccountError::NotRedeemed { .. }
            | AccountError::RefreshBusy(_) => GatewayError::ToolServer(error.to_string()),
            AccountError::Unsealable(_) => GatewayError::Internal(anyhow::anyhow!("{error}")),
            // A sign-in expires within the connect timeout, which is not known here;
            // a minute is a fair first wait.
            AccountError::TooManySignIns => GatewayError::RateLimited {
                reason: error.to_string(),
                retry_after: 60,
            },
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
