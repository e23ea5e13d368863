//! The users and clients the identity provider knows, resolved against this
//! deployment's URLs, and checked once at start-up.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use argon2::password_hash::phc::PasswordHash;
use secrecy::{ExposeSecret, SecretString};
use subtle::ConstantTimeEq;

use maitred_core::settings::Settings;
use maitred_core::settings::identity_file::{ClientConfig, Grant, IdentityFile, Role, UserConfig};

#[derive(Debug, Clone)]
pub struct User {
    pub username: String,
    pub password_hash: String,
    pub roles: Vec<Role>,
    pub name: String,
    pub email: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Client {
    pub id: String,
    pub secret: Option<SecretString>,
    pub grants: Vec<Grant>,
    pub scopes: Vec<String>,
    pub audiences: Vec<String>,
    pub redirect_uris: Vec<String>,
    /// The audiences of the tokens it may present in a token exchange.
    pub subject_audiences: Vec<String>,
}

impl Client {
    pub fn is_public(&self) -> bool {
        self.secret.is_none()
    }

    pub fn allows(&self, grant: Grant) -> bool {
        self.grants.contains(&grant)
    }

    pub fn secret_matches(&self, presented: &str) -> bool {
        self.secret.as_ref().is_some_and(|secret| {
            bool::from(
                secret
                    .expose_secret()
                    .as_bytes()
                    .ct_eq(presented.as_bytes()),
            )
        })
    }

    pub fn default_audience(&self) -> Option<&str> {
        self.audiences.first().map(String::as_str)
    }
}

#[derive(Debug, Default)]
pub struct Registry {
    users: BTreeMap<String, User>,
    clients: BTreeMap<String, Client>,
}

impl Registry {
    pub fn from_config(config: &IdentityFile, settings: &Settings) -> anyhow::Result<Self> {
        let mut registry = Self::default();
        for user in &config.users {
            registry.add_user(user)?;
        }
        for client in &config.clients {
            registry.add_client(client, settings)?;
        }
        registry.check_names_apart()?;
        Ok(registry)
    }

    /// A client-credentials token's `sub` is the client's id, a person's is their
    /// username: were one name both, the person and the client would be one subject
    /// to every resource server (one owner of conversations, one audit trail). Such
    /// a configuration is refused, letter case aside.
    fn check_names_apart(&self) -> anyhow::Result<()> {
        for id in self.clients.keys() {
            if let Some(user) = self
                .users
                .keys()
                .find(|username| username.eq_ignore_ascii_case(id))
            {
                bail!(
                    "user {user:?} has the name of client {id:?}: a person and a client cannot share a name (both would be the subject {id:?} of tokens)"
                );
            }
        }
        Ok(())
    }

    fn add_user(&mut self, user: &UserConfig) -> anyhow::Result<()> {
        if user.username.trim().is_empty() {
            bail!("a user has an empty username");
        }
        PasswordHash::new(&user.password_hash).map_err(|e| {
            anyhow::anyhow!(
                "user {}: password_hash is not an argon2 PHC string: {e}",
                user.username
            )
        })?;
        let user = User {
            username: user.username.clone(),
            password_hash: user.password_hash.clone(),
            roles: if user.roles.is_empty() {
                vec![Role::User]
            } else {
                user.roles.clone()
            },
            name: user.name.clone().unwrap_or_else(|| user.username.clone()),
            email: user.email.clone(),
        };
        if self.users.insert(user.username.clone(), user).is_some() {
            bail!("a user is configured twice");
        }
        Ok(())
    }

    fn add_client(&mut self, client: &ClientConfig, settings: &Settings) -> anyhow::Result<()> {
        let id = &client.id;
        match (&client.secret, client.public) {
            (None, false) => bail!("client {id}: needs a secret, or `public = true`"),
            (Some(_), true) => bail!("client {id}: a public client has no secret"),
            (Some(secret), false) if secret.expose_secret().len() < 16 => {
                bail!("client {id}: the secret must be at least 16 characters")
            }
            _ => {}
        }
        if client.public && client.grants.contains(&Grant::ClientCredentials) {
            bail!("client {id}: a public client cannot use client_credentials");
        }
        if client.grants.contains(&Grant::AuthorizationCode) && client.redirect_uris.is_empty() {
            bail!("client {id}: authorization_code needs at least one redirect_uri");
        }
        for uri in &client.redirect_uris {
            url::Url::parse(uri).with_context(|| format!("client {id}: redirect_uri {uri:?}"))?;
        }
        if client.audiences.is_empty() {
            bail!("client {id}: needs at least one audience");
        }
        let exchanges = client.grants.contains(&Grant::TokenExchange);
        if exchanges && client.public {
            bail!("client {id}: a public client cannot use token_exchange");
        }
        if exchanges && client.subject_audiences.is_empty() {
            bail!(
                "client {id}: token_exchange needs subject_audiences, the audiences of the tokens it may exchange"
            );
        }
        if !exchanges && !client.subject_audiences.is_empty() {
            bail!("client {id}: subject_audiences is only for the token_exchange grant");
        }
        let resolve = |names: &[String]| -> Vec<String> {
            names
                .iter()
                .map(|aud| match aud.as_str() {
                    "backend" => settings.backend_resource(),
                    "gateway" => settings.gateway_resource(),
                    "mcp" => settings.mcp_resource(),
                    other => other.to_owned(),
                })
                .collect()
        };
        let client = Client {
            id: id.clone(),
            secret: client.secret.clone(),
            grants: client.grants.clone(),
            scopes: client.scopes.clone(),
            audiences: resolve(&client.audiences),
            redirect_uris: client.redirect_uris.clone(),
            subject_audiences: resolve(&client.subject_audiences),
        };
        if self.clients.insert(id.clone(), client).is_some() {
            bail!("client {id} is configured twice");
        }
        Ok(())
    }

    pub fn user(&self, username: &str) -> Option<&User> {
        self.users.get(username)
    }

    pub fn client(&self, id: &str) -> Option<&Client> {
        self.clients.get(id)
    }

    pub fn clients(&self) -> impl Iterator<Item = &Client> {
        self.clients.values()
    }

    pub fn users(&self) -> impl Iterator<Item = &User> {
        self.users.values()
    }

    /// Every scope some client may ask for, for the discovery document.
    pub fn scopes(&self) -> Vec<String> {
        let mut scopes: Vec<String> = self
            .clients
            .values()
            .flat_map(|c| c.scopes.iter().cloned())
            .collect();
        scopes.sort();
        scopes.dedup();
        scopes
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn identity(username: &str, client: &str) -> IdentityFile {
        use argon2::password_hash::PasswordHasher;
        let hash = argon2::Argon2::default()
            .hash_password(b"correct horse battery")
            .unwrap()
            .to_string();
        toml::from_str(&format!(
            r#"
            [[users]]
            username = "{username}"
            password_hash = "{hash}"
            [[clients]]
            id = "{client}"
            secret = "a-long-random-secret-1"
            grants = ["client_credentials"]
            scopes = ["chat.read", "chat.write"]
            audiences = ["gateway"]
            "#
        ))
        .unwrap()
    }

    #[test]
    fn a_user_may_not_take_a_clients_name() {
        let settings = Settings::local(PathBuf::from("data"), "sqlite::memory:".into());
        assert!(Registry::from_config(&identity("alice", "maitred-cli"), &settings).is_ok());
        for username in ["maitred-cli", "Maitred-CLI"] {
            let refused = Registry::from_config(&identity(username, "maitred-cli"), &settings)
                .unwrap_err()
                .to_string();
            assert!(refused.contains("cannot share a name"), "{refused}");
        }
    }
}
