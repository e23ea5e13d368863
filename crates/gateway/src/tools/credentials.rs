//! Where the tokens for an MCP server come from, as its configuration says: none, a
//! fixed one, the gateway's own (client credentials), or, for a server that acts for
//! the person, the person's token exchanged for it (RFC 8693) besides the gateway's;
//! or, where each person signs in at the server, that person's own token.

use std::sync::Arc;

use maitred_core::delegation::{ExchangeClient, Exchanger};
use maitred_core::issuer::Issuer;
use maitred_core::oauth_client::{ClientCredentials, TokenFetchLabels, TokenSource};
use maitred_core::settings::mcp_servers::{AuthConfig, ClientAuth, ServerConfig, secret};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use secrecy::{ExposeSecret, SecretString};

use super::error::HubError;
use crate::accounts::Accounts;

pub(super) enum Credentials {
    Anonymous,
    Static(SecretString),
    Issued(Box<TokenSource>),
    /// The gateway's own token, and each person's exchanged one for their calls.
    Delegated {
        own: Box<TokenSource>,
        exchanger: Box<Exchanger>,
    },
    /// One person's own token at a server where each person signs in.
    Account {
        accounts: Arc<Accounts>,
        owner: String,
        server: String,
    },
}

impl Credentials {
    /// What `config` says; fails when a secret it names cannot be read.
    pub(super) fn of(
        config: &ServerConfig,
        http: &reqwest::Client,
        issuer: &Issuer,
        token_requests: &Family<TokenFetchLabels, Counter>,
    ) -> anyhow::Result<Self> {
        Ok(match &config.auth {
            // The server's own session carries no token: a person's session does
            // (`Credentials::Account`).
            AuthConfig::None | AuthConfig::UserOauth(_) => Self::Anonymous,
            AuthConfig::Bearer { token, token_env } => Self::Static(secret(
                token,
                token_env,
                &format!("MCP server {} token", config.name),
            )?),
            AuthConfig::ClientCredentials(auth) => Self::Issued(Box::new(
                own_tokens(http, issuer, &config.name, auth)?.with_metrics(token_requests.clone()),
            )),
            AuthConfig::TokenExchange(auth) => Self::Delegated {
                own: Box::new(
                    own_tokens(http, issuer, &config.name, auth)?
                        .with_metrics(token_requests.clone()),
                ),
                exchanger: Box::new(Exchanger::new(
                    http.clone(),
                    issuer_of(issuer, auth),
                    ExchangeClient {
                        token_url: auth.token_url.clone().unwrap_or_default(),
                        client_id: auth.client_id.clone(),
                        client_secret: client_secret(&config.name, auth)?,
                        resource: auth.resource.clone(),
                        scopes: auth.scopes.clone(),
                    },
                )),
            },
        })
    }

    /// The token for a request made for `person` (a person's token), or for nobody.
    pub(super) async fn token(
        &self,
        person: Option<&SecretString>,
    ) -> Result<Option<String>, HubError> {
        match (self, person) {
            (Credentials::Anonymous, _) => Ok(None),
            (Credentials::Static(token), _) => Ok(Some(token.expose_secret().to_owned())),
            (Credentials::Issued(source), _)
            | (Credentials::Delegated { own: source, .. }, None) => {
                source.token().await.map(Some).map_err(HubError::OwnToken)
            }
            (Credentials::Delegated { exchanger, .. }, Some(person)) => exchanger
                .token_for(person.expose_secret())
                .await
                .map(Some)
                .map_err(HubError::PersonToken),
            (
                Credentials::Account {
                    accounts,
                    owner,
                    server,
                },
                _,
            ) => accounts
                .access_token(owner, server)
                .await
                .map(|token| Some(token.expose_secret().to_owned()))
                .map_err(|error| HubError::Account {
                    server: server.clone(),
                    error,
                }),
        }
    }

    /// A fresh token after `rejected` was refused; `None` when nothing can change.
    pub(super) async fn refresh(
        &self,
        person: Option<&SecretString>,
        rejected: &str,
    ) -> Option<String> {
        match (self, person) {
            (Credentials::Issued(source), _)
            | (Credentials::Delegated { own: source, .. }, None) => {
                source.refresh(rejected).await.ok()
            }
            (Credentials::Delegated { exchanger, .. }, Some(person)) => exchanger
                .refresh(person.expose_secret(), rejected)
                .await
                .ok(),
            (
                Credentials::Account {
                    accounts,
                    owner,
                    server,
                },
                _,
            ) => accounts
                .after_rejection(owner, server, rejected)
                .await
                .map(|token| token.expose_secret().to_owned())
                .ok(),
            _ => None,
        }
    }
}

/// Where a server's client authenticates: its own issuer, or maitred's; either way
/// what its metadata names is held to the deployment's rule for token URLs.
fn issuer_of(issuer: &Issuer, auth: &ClientAuth) -> Issuer {
    auth.issuer.as_deref().map_or_else(
        || issuer.clone(),
        |i| Issuer::new(i, None).with_policy(issuer.policy.clone()),
    )
}

fn client_secret(server: &str, auth: &ClientAuth) -> anyhow::Result<SecretString> {
    secret(
        &auth.client_secret,
        &auth.client_secret_env,
        &format!("MCP server {server} client secret"),
    )
}

/// The gateway's own client-credentials token for a server.
fn own_tokens(
    http: &reqwest::Client,
    issuer: &Issuer,
    server: &str,
    auth: &ClientAuth,
) -> anyhow::Result<TokenSource> {
    Ok(TokenSource::new(
        http.clone(),
        issuer_of(issuer, auth),
        ClientCredentials {
            token_url: auth.token_url.clone().unwrap_or_default(),
            client_id: auth.client_id.clone(),
            client_secret: client_secret(server, auth)?,
            scopes: auth.scopes.clone(),
            resource: auth.resource.clone(),
        },
    ))
}
