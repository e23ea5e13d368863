//! Connected accounts: each person's own sign-in at a third-party MCP server that
//! runs its own authorization server (`auth.type = "user_oauth"`,
//! docs/connected-accounts.md).
//!
//! The OAuth client is rmcp's (discovery by RFC 9728 and RFC 8414, registration,
//! PKCE, `resource`, the RFC 9207 `iss` check); what is ours is where its state
//! lives: in the database, sealed (`sealed.rs`), so any replica can finish a sign-in
//! another started and all of them share one refresh (`refresh.rs`).
//!
//! - `connect.rs`: a sign-in, from its start (a call's card, or the panel) to the
//!   gateway's callback;
//! - `oauth.rs`: the server's authorization server as discovered, and how the gateway
//!   is registered there (a configured client, its client metadata document, or
//!   dynamic registration);
//! - `revoke.rs`: disconnecting (RFC 7009);
//! - `routes.rs`: the person's and the admin's API, the callback, the document.

mod connect;
mod error;
mod metadata_document;
mod oauth;
mod refresh;
mod revoke;
pub mod routes;
mod sealed;
mod states;
mod store;
pub mod view;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use maitred_core::db::Db;
use maitred_core::settings::UrlPolicy;
use maitred_core::settings::mcp_servers::{AuthConfig, ServerConfig, UserOAuth};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use rmcp::transport::auth::StoredCredentials;

pub use connect::{Begun, Completed};
pub use error::AccountError;
pub use sealed::KeyRing;
pub(crate) use sealed::{Purpose as SealedFor, key_id as sealed_key_id};

use crate::metrics::AccountLabels;
use oauth::Discovered;
use sealed::Purpose;
use store::{AccountRow, Rows};

/// Where the gateway's sign-in pages are, under its public URL.
pub const CALLBACK_PATH: &str = "/oauth/callback";
pub const METADATA_DOCUMENT_PATH: &str = "/oauth/client-metadata.json";

/// A `user_oauth` server as the accounts know it.
pub(crate) struct AccountServer {
    pub(crate) name: String,
    pub(crate) url: String,
    pub(crate) description: Option<String>,
    pub(crate) auth: UserOAuth,
    /// Its authorization server, once discovered.
    discovered: tokio::sync::Mutex<Option<Arc<Discovered>>>,
}

impl AccountServer {
    pub(crate) fn host(&self) -> String {
        host_of(&self.url)
    }
}

pub(crate) fn host_of(url: &str) -> String {
    url::Url::parse(url)
        .ok()
        .and_then(|u| {
            u.host_str().map(|h| match u.port() {
                Some(port) => format!("{h}:{port}"),
                None => h.to_owned(),
            })
        })
        .unwrap_or_default()
}

/// The accounts of every person at every `user_oauth` server.
pub struct Accounts {
    rows: Rows,
    http: reqwest::Client,
    keys: KeyRing,
    servers: HashMap<String, Arc<AccountServer>>,
    /// The gateway's public URL: its callback and its client metadata document are
    /// under it.
    public_url: String,
    connect_timeout: Duration,
    /// Sign-ins one person may have under way at once.
    sign_ins_per_person: usize,
    /// Held while a sign-in is counted and recorded, so a burst in this replica
    /// cannot pass the cap between the count and the insert.
    starting: Arc<tokio::sync::Mutex<()>>,
    /// Development: authorization servers and the gateway itself on http loopback.
    loopback_http: bool,
    /// Which of a discovered authorization server's endpoints may be used: each
    /// gets a person's code, refresh token or the gateway's client secret.
    url_policy: UrlPolicy,
    events: Family<AccountLabels, Counter>,
    /// This replica, as the holder of refresh leases.
    replica: String,
    /// One refresh per person and server at a time in this replica; the database
    /// lease makes it one across replicas.
    refreshing: Mutex<RefreshLocks>,
}

/// A lock per person and server.
type RefreshLocks = HashMap<(String, String), Arc<tokio::sync::Mutex<()>>>;

/// What `Accounts::new` needs.
pub struct AccountSettings<'a> {
    pub http: reqwest::Client,
    /// Where sign-ins, refreshes and disconnects are counted.
    pub events: Family<AccountLabels, Counter>,
    pub public_url: &'a str,
    pub keys: KeyRing,
    pub connect_timeout: Duration,
    pub sign_ins_per_person: usize,
    pub loopback_http: bool,
    pub url_policy: UrlPolicy,
}

impl Accounts {
    pub fn new(db: Db, servers: &[ServerConfig], settings: AccountSettings<'_>) -> Arc<Self> {
        let servers = servers
            .iter()
            .filter(|s| s.enabled)
            .filter_map(|s| match &s.auth {
                AuthConfig::UserOauth(auth) => Some((
                    s.name.clone(),
                    Arc::new(AccountServer {
                        name: s.name.clone(),
                        url: s.url.clone(),
                        description: s.description.clone(),
                        auth: auth.clone(),
                        discovered: tokio::sync::Mutex::default(),
                    }),
                )),
                _ => None,
            })
            .collect();
        Arc::new(Self {
            rows: Rows::new(db),
            http: settings.http,
            events: settings.events,
            keys: settings.keys,
            servers,
            public_url: settings.public_url.trim_end_matches('/').to_owned(),
            connect_timeout: settings.connect_timeout,
            sign_ins_per_person: settings.sign_ins_per_person,
            starting: Arc::default(),
            loopback_http: settings.loopback_http,
            url_policy: settings.url_policy,
            replica: maitred_core::random::token(9),
            refreshing: Mutex::default(),
        })
    }

    /// The key ring `MAITRED_ACCOUNT_KEYS` names, or in development one kept in the
    /// data dir. It seals connected accounts' tokens and browser sessions' tokens
    /// alike, so every gateway needs one; replicas need the same.
    pub fn key_ring(
        keys: Option<&secrecy::SecretString>,
        dev_data_dir: Option<&std::path::Path>,
    ) -> anyhow::Result<KeyRing> {
        match (keys, dev_data_dir) {
            (Some(keys), _) => KeyRing::parse(keys),
            (None, Some(dir)) => KeyRing::in_data_dir(dir),
            (None, None) => anyhow::bail!(
                "set MAITRED_ACCOUNT_KEYS (id:base64 of 32 random bytes, the same on every gateway replica): it seals the people's tokens the gateway keeps, in browser sessions and connected accounts"
            ),
        }
    }

    pub(crate) fn count(&self, server: &str, event: &'static str) {
        self.events
            .get_or_create(&AccountLabels {
                server: server.to_owned(),
                event,
            })
            .inc();
    }

    pub(crate) fn server(&self, name: &str) -> Result<&Arc<AccountServer>, AccountError> {
        self.servers
            .get(name)
            .ok_or_else(|| AccountError::UnknownServer(name.to_owned()))
    }

    /// Whether `name` is a server where each person signs in.
    pub fn is_user_oauth(&self, name: &str) -> bool {
        self.servers.contains_key(name)
    }

    pub(crate) fn servers(&self) -> impl Iterator<Item = &Arc<AccountServer>> {
        let mut servers: Vec<_> = self.servers.values().collect();
        servers.sort_by(|a, b| a.name.cmp(&b.name));
        servers.into_iter()
    }

    /// Whether `owner` has an account at `server` (valid or not: a refresh decides).
    pub async fn connected(&self, owner: &str, server: &str) -> Result<bool, AccountError> {
        Ok(self.rows.account(owner, server).await?.is_some())
    }

    pub(crate) fn redirect_uri(&self) -> String {
        format!("{}{CALLBACK_PATH}", self.public_url)
    }

    pub(crate) fn metadata_document_url(&self) -> String {
        format!("{}{METADATA_DOCUMENT_PATH}", self.public_url)
    }

    /// A row's credentials, opened.
    fn credentials(&self, row: &AccountRow) -> Result<StoredCredentials, AccountError> {
        let plain = self
            .keys
            .open(
                &row.credentials,
                Purpose::Credentials,
                &row.owner,
                &row.server,
            )
            .map_err(AccountError::Unsealable)?;
        serde_json::from_slice(&plain)
            .map_err(|e| AccountError::Unsealable(sealed::Unsealable::corrupt(e)))
    }

    fn seal_credentials(
        &self,
        owner: &str,
        server: &str,
        credentials: &StoredCredentials,
    ) -> String {
        let plain = serde_json::to_vec(credentials).unwrap_or_default();
        self.keys.seal(&plain, Purpose::Credentials, owner, server)
    }

    /// Seals again, under the first key, what older keys sealed (after a rotation).
    /// A value no configured key opens is left as it is: during a rollout it may be
    /// sealed under a key only the newer replicas know. Its owner is asked to
    /// connect again when it is used (`access_token`), which replaces it.
    pub async fn reseal(&self) -> Result<usize, AccountError> {
        let mut count = self.reseal_client_secrets().await?;
        let mut skipped = std::collections::HashSet::new();
        loop {
            let rows = self
                .rows
                .sealed_under_other_keys(self.keys.current())
                .await?;
            let mut progressed = false;
            for row in rows {
                if skipped.contains(&(row.owner.clone(), row.server.clone())) {
                    continue;
                }
                let credentials = match self.credentials(&row) {
                    Ok(credentials) => credentials,
                    Err(error) => {
                        tracing::warn!(owner = %row.owner, server = %row.server, %error, "a connected account cannot be opened with the configured keys; left as it is (its owner is asked to connect again when it is used)");
                        skipped.insert((row.owner.clone(), row.server.clone()));
                        continue;
                    }
                };
                let sealed = self.seal_credentials(&row.owner, &row.server, &credentials);
                if self
                    .rows
                    .resealed(&row, &sealed, self.keys.current())
                    .await?
                {
                    count += 1;
                    progressed = true;
                }
            }
            if !progressed {
                return Ok(count);
            }
        }
    }
}
