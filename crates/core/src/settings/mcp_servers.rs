//! The MCP servers the gateway uses, as an operator writes them in the gateway's
//! config file (TOML):
//!
//! ```toml
//! [[mcp_servers]]
//! name = "resos"                       # tools are offered as resos__<tool>
//! url = "https://mcp.example.com/mcp"
//! read_only = false                    # true: write tools are never offered nor called
//! timeout_secs = 30
//! trust_annotations = false            # believe the server's readOnlyHint (maitred's own server: true)
//! read_only_tools = ["list*", "get*"]  # tools the operator vouches change nothing
//! require_approval = ["cancel*"]       # tools that always wait for the person's approval
//! offer = "auto"                       # or "always", "deferred", "never" (docs/tool-search.md)
//! pinned = ["getCustomers"]            # always sent, even when the others are searched for
//! [mcp_servers.auth]
//! type = "token_exchange"              # or "client_credentials", "bearer" (token / token_env), "none"
//! client_id = "maitred-gateway"
//! client_secret_env = "MCP_SECRET"     # or client_secret = "…"
//! scopes = ["mcp.read", "mcp.write"]
//! resource = "https://mcp.example.com/mcp"
//! issuer = "https://id.example.com"    # or token_url = "…/oauth2/token"
//! ```
//!
//! A server that runs its own authorization server and wants each person's own
//! sign-in (docs/connected-accounts.md):
//!
//! ```toml
//! [[mcp_servers]]
//! name = "notes"
//! url = "https://notes.example.com/mcp"
//! description = "The person's notes"   # what the model knows of it before they connect
//! [mcp_servers.auth]
//! type = "user_oauth"
//! scopes = ["notes:read"]              # default: what the server's challenge or metadata asks
//! registration = "auto"                # or "metadata_document", "dynamic", "preregistered"
//! client_id = "…"                      # with "preregistered" (and client_secret_env if confidential)
//! ```

use std::time::Duration;

use anyhow::{Context, bail};
use secrecy::SecretString;
use serde::Deserialize;

use super::tool_search::Offer;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    pub name: String,
    pub url: String,
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default)]
    pub read_only: bool,
    /// Seconds, or humantime text under `timeout`.
    #[serde(
        default = "default_timeout",
        rename = "timeout_secs",
        alias = "timeout",
        deserialize_with = "super::span::deserialize"
    )]
    pub timeout: Duration,
    #[serde(default)]
    pub auth: AuthConfig,
    /// Whether the server's own `readOnlyHint` decides that a tool changes nothing.
    /// A third-party server could otherwise skip every approval by calling all its
    /// tools read-only, so only servers the operator trusts get this.
    #[serde(default)]
    pub trust_annotations: bool,
    /// Tool names (bare, `*` as a wildcard) the operator declares read-only, whatever
    /// the server says: the operator's word comes before the server's.
    #[serde(default)]
    pub read_only_tools: Vec<String>,
    /// Tool names (bare, `*` as a wildcard) that always wait for approval, read-only
    /// or not.
    #[serde(default)]
    pub require_approval: Vec<String>,
    /// What the server is for, told to the model while a person has not connected
    /// their account to it (its tools are hidden until then).
    #[serde(default)]
    pub description: Option<String>,
    /// How its tools reach the model: with every question, or found by search.
    #[serde(default)]
    pub offer: Offer,
    /// Tool names (bare, `*` as a wildcard) sent with every question whatever
    /// `offer` says.
    #[serde(default)]
    pub pinned: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum AuthConfig {
    #[default]
    None,
    Bearer {
        token: Option<SecretString>,
        token_env: Option<String>,
    },
    /// The gateway's own token for the server: every call reaches it as the gateway,
    /// with the person named in `_meta` for audit only.
    ClientCredentials(ClientAuth),
    /// Each person's token exchanged (RFC 8693) for one that names them and the
    /// gateway: calls reach the server as the person. The gateway's own token is
    /// used for what no person asks for (initialize, tools/list).
    TokenExchange(ClientAuth),
    /// Each person signs in at the server's own authorization server (OAuth 2
    /// authorization code with PKCE, the MCP authorization spec); calls carry their
    /// token, and the server's tools are listed for each person with theirs.
    UserOauth(UserOAuth),
}

/// How the gateway signs people in at a `user_oauth` server.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserOAuth {
    /// Asked for at the first sign-in; none: what the server's challenge or
    /// protected-resource metadata names.
    #[serde(default)]
    pub scopes: Vec<String>,
    #[serde(default)]
    pub registration: Registration,
    /// A client the operator registered at the authorization server.
    pub client_id: Option<String>,
    pub client_secret: Option<SecretString>,
    pub client_secret_env: Option<String>,
}

/// How the gateway is known to a server's authorization server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Registration {
    /// A configured client first, then the gateway's client metadata document where
    /// the authorization server accepts one, else dynamic registration.
    #[default]
    Auto,
    MetadataDocument,
    Dynamic,
    Preregistered,
}

/// The gateway's client at the server's issuer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientAuth {
    pub client_id: String,
    pub client_secret: Option<SecretString>,
    pub client_secret_env: Option<String>,
    #[serde(default)]
    pub scopes: Vec<String>,
    pub resource: Option<String>,
    /// Where to discover the token endpoint; default: maitred's issuer.
    pub issuer: Option<String>,
    pub token_url: Option<String>,
}

fn yes() -> bool {
    true
}

fn default_timeout() -> Duration {
    Duration::from_secs(30)
}

impl ServerConfig {
    /// Whether `tool` changes nothing: the operator's list first, then the server's
    /// annotation if the server is trusted; otherwise it is treated as a write.
    pub fn tool_is_read_only(&self, tool: &str, read_only_hint: Option<bool>) -> bool {
        self.read_only_tools.iter().any(|p| wildcard(p, tool))
            || (self.trust_annotations && read_only_hint == Some(true))
    }

    /// Whether `tool` is sent with every question whatever `offer` says.
    pub fn tool_is_pinned(&self, tool: &str) -> bool {
        self.pinned.iter().any(|p| wildcard(p, tool))
    }

    /// Whether a call of `tool` waits for the person's approval.
    pub fn tool_needs_approval(&self, tool: &str, read_only: bool) -> bool {
        !read_only || self.require_approval.iter().any(|p| wildcard(p, tool))
    }

    fn check(&self) -> anyhow::Result<()> {
        let valid = !self.name.is_empty()
            && self.name.len() <= 24
            && !self.name.contains("__")
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            bail!(
                "MCP server name {:?}: use 1 to 24 letters, digits, - or _ (and no __)",
                self.name
            );
        }
        url::Url::parse(&self.url).with_context(|| format!("MCP server {}: url", self.name))?;
        if let AuthConfig::UserOauth(auth) = &self.auth
            && auth.registration == Registration::Preregistered
            && auth.client_id.is_none()
        {
            bail!(
                "MCP server {}: registration = \"preregistered\" needs its client_id",
                self.name
            );
        }
        if self.pinned.iter().any(|p| p.is_empty()) {
            bail!("MCP server {}: pinned names a tool with \"\"", self.name);
        }
        if self.timeout.is_zero() || self.timeout > Duration::from_secs(600) {
            bail!(
                "MCP server {}: timeout_secs must be between 0 and 600",
                self.name
            );
        }
        Ok(())
    }
}

/// `*` matches any run of characters; everything else matches itself.
pub fn wildcard(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Reads a secret that is given inline or named by an environment variable.
pub fn secret(
    inline: &Option<SecretString>,
    env: &Option<String>,
    what: &str,
) -> anyhow::Result<SecretString> {
    match (inline, env) {
        (Some(value), _) => Ok(value.clone()),
        (None, Some(name)) => std::env::var(name)
            .map(SecretString::from)
            .with_context(|| format!("{what}: the environment variable {name} is not set")),
        (None, None) => bail!("{what}: give it inline or with an _env variable"),
    }
}

/// Every server valid, and no name twice.
pub fn check_servers(servers: &[ServerConfig]) -> anyhow::Result<()> {
    let mut names = std::collections::BTreeSet::new();
    for server in servers {
        server.check()?;
        if !names.insert(&server.name) {
            bail!("MCP server {} is configured twice", server.name);
        }
    }
    Ok(())
}
