//! Users and clients as an operator writes them in the config file.

use secrecy::SecretString;
use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityConfig {
    #[serde(default)]
    pub users: Vec<UserConfig>,
    #[serde(default)]
    pub clients: Vec<ClientConfig>,
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
}

impl Grant {
    pub fn as_str(self) -> &'static str {
        match self {
            Grant::ClientCredentials => "client_credentials",
            Grant::AuthorizationCode => "authorization_code",
            Grant::RefreshToken => "refresh_token",
        }
    }
}
