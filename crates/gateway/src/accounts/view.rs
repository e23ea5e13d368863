//! Connected accounts as the API shows them: to their owner (never a token), and to
//! an admin (who connected what, never a token either).

use serde::Serialize;

/// `GET /api/v1/resos/accounts`: every server that needs the person's own sign-in,
/// connected or not.
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "AccountList"))]
pub struct AccountList {
    pub accounts: Vec<AccountView>,
}

#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "Account"))]
pub struct AccountView {
    /// The MCP server's configured name.
    pub server: String,
    /// What the operator says the server is for.
    pub description: Option<String>,
    /// The host of the MCP server.
    pub host: String,
    pub status: AccountStatus,
    /// The scopes granted, once connected.
    pub scopes: Vec<String>,
    pub connected_at: Option<String>,
    /// When its access was last renewed.
    pub refreshed_at: Option<String>,
    /// How maitred is known to the server's authorization server.
    pub client: Option<ClientKind>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "AccountStatus"))]
#[serde(rename_all = "snake_case")]
pub enum AccountStatus {
    Connected,
    NotConnected,
}

/// How maitred registered at an authorization server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "ClientKind"))]
#[serde(rename_all = "snake_case")]
pub enum ClientKind {
    /// Its client id is the URL of its client metadata document.
    MetadataDocument,
    /// Dynamic client registration (RFC 7591).
    Dynamic,
    /// A client the operator registered and configured.
    Preregistered,
}

impl ClientKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::MetadataDocument => "metadata_document",
            Self::Dynamic => "dynamic",
            Self::Preregistered => "preregistered",
        }
    }
}

/// `POST /api/v1/resos/accounts/{server}/connect`: where the person signs in.
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "ConnectStart"))]
pub struct ConnectStart {
    pub server: String,
    pub authorization_url: String,
    /// The host of the sign-in page.
    pub host: String,
    pub expires_at: String,
}

/// `DELETE /api/v1/resos/accounts/{server}`
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "Disconnected"))]
pub struct Disconnected {
    pub server: String,
    /// Whether the server's authorization server was told to revoke the tokens
    /// (RFC 7009); they are deleted here either way.
    pub revoked_at_server: bool,
}

/// `GET /api/v1/resos/admin/accounts`: who connected which server; no tokens.
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "AdminAccountList"))]
pub struct AdminAccountList {
    pub accounts: Vec<AdminAccountView>,
}

#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "AdminAccount"))]
pub struct AdminAccountView {
    /// The person's subject.
    pub owner: String,
    pub server: String,
    pub scopes: Vec<String>,
    pub client: Option<ClientKind>,
    pub connected_at: String,
    pub refreshed_at: Option<String>,
}
