//! Users and clients of the built-in identity provider, as an operator writes them in
//! the config file (`MAITRED_CONFIG`, under `[[identity.users]]` and
//! `[[identity.clients]]`).

use std::path::Path;

use anyhow::Context;
use secrecy::SecretString;
use serde::Deserialize;

/// The config file: only its `[identity]` part exists today.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    identity: IdentityFile,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityFile {
    #[serde(default)]
    pub users: Vec<UserConfig>,
    #[serde(default)]
    pub clients: Vec<ClientConfig>,
}

impl IdentityFile {
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config file {}", path.display()))?;
        let file: ConfigFile = toml::from_str(&text)
            .with_context(|| format!("parsing config file {}", path.display()))?;
        Ok(file.identity)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    pub username: String,
    /// An argon2 PHC string (`$argon2id$v=19$…`); plain passwords are never configured.
    pub password_hash: String,
    #[serde(default)]
    pub roles: Vec<Role>,
    pub name: Option<String>,
    pub email: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    pub id: String,
    /// Required unless `public = true`.
    pub secret: Option<SecretString>,
    #[serde(default)]
    pub public: bool,
    pub grants: Vec<Grant>,
    pub scopes: Vec<String>,
    /// Resources (audiences) the client may get tokens for; `backend`, `gateway` and
    /// `mcp` stand for this deployment's own. The first is the default.
    pub audiences: Vec<String>,
    #[serde(default)]
    pub redirect_uris: Vec<String>,
    /// For `token_exchange`: the audiences of the person's tokens this client may
    /// trade (the resource it serves), named like `audiences`.
    #[serde(default)]
    pub subject_audiences: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Role {
    User,
    Operator,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "USER",
            Role::Operator => "OPERATOR",
            Role::Admin => "ADMIN",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Grant {
    ClientCredentials,
    AuthorizationCode,
    RefreshToken,
    /// RFC 8693: act for a person whose token the client presents.
    TokenExchange,
}

impl Grant {
    pub fn as_str(self) -> &'static str {
        match self {
            Grant::ClientCredentials => "client_credentials",
            Grant::AuthorizationCode => "authorization_code",
            Grant::RefreshToken => "refresh_token",
            Grant::TokenExchange => "urn:ietf:params:oauth:grant-type:token-exchange",
        }
    }
}
