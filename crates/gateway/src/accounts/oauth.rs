//! A `user_oauth` server's authorization server, as rmcp discovers it (the server's
//! protected-resource metadata, RFC 9728, from its challenge or the well-known URL;
//! then RFC 8414 or OpenID discovery), and how the gateway is registered there:
//!
//! 1. a client the operator configured;
//! 2. the gateway's client metadata document, where the authorization server
//!    accepts one (`client_id_metadata_document_supported`): its URL is the client id;
//! 3. dynamic registration (RFC 7591), once per server for all replicas (the
//!    registration is a row every replica reads).

use std::sync::Arc;
use std::time::{Duration, Instant};

use maitred_core::settings::mcp_servers::{Registration, secret};
use rmcp::transport::auth::{
    AuthorizationManager, AuthorizationMetadata, CredentialStore, OAuthClientConfig,
};
use secrecy::ExposeSecret;

use super::error::AccountError;
use super::sealed::Purpose;
use super::states::PendingStates;
use super::store::ClientRow;
use super::view::ClientKind;
use super::{AccountServer, Accounts};

/// How long discovered metadata is trusted before it is read again.
const METADATA_TTL: Duration = Duration::from_secs(3600);

/// A server's authorization server, as discovered.
pub(crate) struct Discovered {
    pub(crate) metadata: AuthorizationMetadata,
    /// Its issuer: the key of the gateway's registration there.
    pub(crate) issuer: String,
    /// What a first sign-in asks for.
    pub(crate) scopes: Vec<String>,
    at: Instant,
}

impl Discovered {
    /// Its revocation endpoint (RFC 7009), if it has one.
    pub(crate) fn revocation_endpoint(&self) -> Option<&str> {
        self.metadata
            .additional_fields
            .get("revocation_endpoint")
            .and_then(|v| v.as_str())
    }

    fn accepts_metadata_documents(&self) -> bool {
        self.metadata
            .additional_fields
            .get("client_id_metadata_document_supported")
            .and_then(|v| v.as_bool())
            .unwrap_or(false)
    }
}

/// The gateway's client at a server's authorization server.
pub(crate) struct Client {
    pub(crate) kind: ClientKind,
    pub(crate) config: OAuthClientConfig,
}

impl Accounts {
    async fn bare_manager(
        &self,
        server: &AccountServer,
    ) -> Result<AuthorizationManager, AccountError> {
        // The server's URL decides which addresses its metadata may name: loopback
        // only for a loopback server. Private addresses are for deployments whose
        // authorization server is inside the network, as the gateway is.
        AuthorizationManager::new_allowing_private_addresses(server.url.as_str())
            .await
            .map_err(|e| AccountError::at(&server.name, e))
    }

    /// The server's authorization server, discovered once an hour (or now, from a
    /// challenge, when nothing is known yet).
    pub(crate) async fn discovered(
        &self,
        server: &AccountServer,
        challenge: Option<&str>,
    ) -> Result<Arc<Discovered>, AccountError> {
        let mut slot = server.discovered.lock().await;
        if let Some(known) = slot.as_ref()
            && known.at.elapsed() < METADATA_TTL
        {
            return Ok(known.clone());
        }
        let mut manager = self.bare_manager(server).await?;
        let resolution = manager
            .resolve_metadata_from_challenge(challenge)
            .await
            .map_err(|e| AccountError::at(&server.name, e))?;
        if !resolution.source.is_discovered() {
            return Err(AccountError::Discovery {
                server: server.name.clone(),
                detail: "it publishes neither protected-resource metadata (RFC 9728) nor authorization server metadata (RFC 8414)".to_owned(),
            });
        }
        let metadata = resolution.metadata;
        self.endpoints_allowed(server, &metadata)?;
        manager.set_metadata(metadata.clone());
        let scopes = if server.auth.scopes.is_empty() {
            manager.select_initial_scopes(&[]).await
        } else {
            let mut scopes = server.auth.scopes.clone();
            let offers_offline = metadata
                .scopes_supported
                .as_ref()
                .is_some_and(|s| s.iter().any(|s| s == "offline_access"));
            if offers_offline && !scopes.iter().any(|s| s == "offline_access") {
                scopes.push("offline_access".to_owned());
            }
            scopes
        };
        let issuer = metadata
            .issuer
            .clone()
            .unwrap_or_else(|| metadata.authorization_endpoint.clone());
        tracing::info!(server = %server.name, %issuer, ?scopes, "discovered the MCP server's authorization server");
        let discovered = Arc::new(Discovered {
            metadata,
            issuer,
            scopes,
            at: Instant::now(),
        });
        *slot = Some(discovered.clone());
        Ok(discovered)
    }

    /// Whether every endpoint the metadata names may be used: production sends a
    /// person's password, code and tokens, and the gateway's client secret, over
    /// https only (loopback and acknowledged origins aside), whatever a server's
    /// metadata says. Checked before any of them is used.
    fn endpoints_allowed(
        &self,
        server: &AccountServer,
        metadata: &AuthorizationMetadata,
    ) -> Result<(), AccountError> {
        let extra = |name: &str| {
            metadata
                .additional_fields
                .get(name)
                .and_then(|v| v.as_str())
        };
        let endpoints = [
            (
                "authorization_endpoint",
                Some(metadata.authorization_endpoint.as_str()),
            ),
            ("token_endpoint", Some(metadata.token_endpoint.as_str())),
            (
                "registration_endpoint",
                metadata.registration_endpoint.as_deref(),
            ),
            ("revocation_endpoint", extra("revocation_endpoint")),
        ];
        for (name, url) in endpoints {
            if let Some(url) = url.filter(|u| !u.is_empty()) {
                self.url_policy
                    .check(&format!("its {name}"), url)
                    .map_err(|refused| AccountError::Discovery {
                        server: server.name.clone(),
                        detail: refused.to_string(),
                    })?;
            }
        }
        Ok(())
    }

    /// The OIDC registration's application type (SEP-837): a gateway on https is a
    /// web client; one on http loopback (development) is registered as native,
    /// whose rules allow a loopback redirect.
    pub(crate) fn application_type(&self) -> &'static str {
        if self.public_url.starts_with("https://") {
            "web"
        } else {
            "native"
        }
    }

    /// Whether the gateway's metadata document can serve as a client id: https, or
    /// http on loopback in development.
    fn metadata_document_usable(&self) -> bool {
        self.public_url.starts_with("https://") || self.loopback_http
    }

    /// The gateway as client `client_id`, with its redirect URI and application type.
    fn public_client(&self, client_id: impl Into<String>) -> OAuthClientConfig {
        OAuthClientConfig::new(client_id, self.redirect_uri())
            .with_application_type(self.application_type())
    }

    /// How the gateway signs people in at `server`: see the module's order.
    pub(crate) async fn client(
        &self,
        server: &AccountServer,
        discovered: &Discovered,
    ) -> Result<Client, AccountError> {
        let registration = server.auth.registration;
        let configured = server.auth.client_id.as_ref();
        let wants = |kind: Registration| registration == Registration::Auto || registration == kind;
        if let (true, Some(client_id)) = (wants(Registration::Preregistered), configured) {
            return self.preregistered(server, client_id);
        }
        if wants(Registration::MetadataDocument)
            && discovered.accepts_metadata_documents()
            && self.metadata_document_usable()
        {
            let url = self.metadata_document_url();
            return Ok(Client {
                kind: ClientKind::MetadataDocument,
                config: self.public_client(url),
            });
        }
        if wants(Registration::Dynamic) && discovered.metadata.registration_endpoint.is_some() {
            return self.dynamic(server, discovered).await;
        }
        Err(AccountError::Registration {
            server: server.name.clone(),
            detail: match registration {
                Registration::MetadataDocument if !self.metadata_document_usable() => {
                    "a client metadata document needs the gateway's public URL on https".to_owned()
                }
                Registration::Auto => "it accepts neither a client metadata document nor dynamic registration; configure a client_id".to_owned(),
                other => format!("it does not offer the configured registration ({other:?})"),
            },
        })
    }

    fn preregistered(
        &self,
        server: &AccountServer,
        client_id: &str,
    ) -> Result<Client, AccountError> {
        let mut config = self.public_client(client_id);
        if server.auth.client_secret.is_some() || server.auth.client_secret_env.is_some() {
            let secret = secret(
                &server.auth.client_secret,
                &server.auth.client_secret_env,
                &format!("MCP server {} client secret", server.name),
            )
            .map_err(|e| AccountError::Registration {
                server: server.name.clone(),
                detail: format!("{e:#}"),
            })?;
            config = config.with_client_secret(secret.expose_secret());
        }
        Ok(Client {
            kind: ClientKind::Preregistered,
            config,
        })
    }

    /// The registration every replica shares, made now if there is none.
    async fn dynamic(
        &self,
        server: &AccountServer,
        discovered: &Discovered,
    ) -> Result<Client, AccountError> {
        if let Some(row) = self.rows.client(&server.name, &discovered.issuer).await?
            && row.kind == ClientKind::Dynamic.as_str()
        {
            return self.registered_client(server, &discovered.issuer, &row);
        }
        let mut manager = self.bare_manager(server).await?;
        manager.set_metadata(discovered.metadata.clone());
        // rmcp registers with the manager's application type, which only a client
        // configuration sets: a placeholder configuration carries it.
        manager
            .configure_client(self.public_client("unregistered"))
            .map_err(|e| AccountError::at(&server.name, e))?;
        // No scope in the registration: some servers limit a client to the scopes
        // it registered with, which would refuse every later step up.
        let registered = manager
            .register_client("maitred", &self.redirect_uri(), &[])
            .await
            .map_err(|e| AccountError::Registration {
                server: server.name.clone(),
                detail: e.to_string(),
            })?;
        tracing::info!(server = %server.name, issuer = %discovered.issuer, "registered at the MCP server's authorization server (dynamic registration)");
        let sealed = registered.client_secret.as_ref().map(|secret| {
            self.keys.seal(
                secret.as_bytes(),
                Purpose::ClientSecret,
                &discovered.issuer,
                &server.name,
            )
        });
        let row = ClientRow {
            kind: ClientKind::Dynamic.as_str().to_owned(),
            client_id: registered.client_id.clone(),
            secret: sealed,
        };
        let standing = self
            .rows
            .record_client(
                &server.name,
                &discovered.issuer,
                &row,
                row.secret.as_ref().map(|_| self.keys.current()),
            )
            .await?;
        self.registered_client(server, &discovered.issuer, &standing)
    }

    fn registered_client(
        &self,
        server: &AccountServer,
        issuer: &str,
        row: &ClientRow,
    ) -> Result<Client, AccountError> {
        let mut config = self.public_client(&row.client_id);
        if let Some(sealed) = &row.secret {
            let secret = self
                .keys
                .open(sealed, Purpose::ClientSecret, issuer, &server.name)
                .map_err(AccountError::Unsealable)?;
            config = config.with_client_secret(String::from_utf8_lossy(&secret).into_owned());
        }
        Ok(Client {
            kind: ClientKind::Dynamic,
            config,
        })
    }

    /// The client that made a sign-in or holds an account: the same id, whatever
    /// the server's current choice is (a dynamic registration made since, say).
    pub(crate) async fn client_with_id(
        &self,
        server: &AccountServer,
        discovered: &Discovered,
        client_id: &str,
    ) -> Result<Client, AccountError> {
        if server.auth.client_id.as_deref() == Some(client_id) {
            return self.preregistered(server, client_id);
        }
        if client_id == self.metadata_document_url() {
            return Ok(Client {
                kind: ClientKind::MetadataDocument,
                config: self.public_client(client_id),
            });
        }
        match self.rows.client(&server.name, &discovered.issuer).await? {
            Some(row) if row.client_id == client_id => {
                self.registered_client(server, &discovered.issuer, &row)
            }
            // A registration since forgotten: a public client has no secret to lose.
            _ => Ok(Client {
                kind: ClientKind::Dynamic,
                config: self.public_client(client_id),
            }),
        }
    }

    /// Seals the dynamic registrations' secrets again under the first key.
    pub(crate) async fn reseal_client_secrets(&self) -> Result<usize, AccountError> {
        let mut count = 0;
        let rows = self
            .rows
            .client_secrets_under_other_keys(self.keys.current())
            .await?;
        for (server, issuer, sealed) in rows {
            let Ok(secret) = self
                .keys
                .open(&sealed, Purpose::ClientSecret, &issuer, &server)
            else {
                tracing::warn!(%server, %issuer, "a registration's secret cannot be opened with the configured keys; left as it is");
                continue;
            };
            let resealed = self
                .keys
                .seal(&secret, Purpose::ClientSecret, &issuer, &server);
            if self
                .rows
                .reseal_client_secret(&server, &issuer, &sealed, &resealed, self.keys.current())
                .await?
            {
                count += 1;
            }
        }
        Ok(count)
    }

    /// An rmcp OAuth client for one operation on `server`, with its state in `stores`.
    pub(crate) async fn manager(
        &self,
        server: &AccountServer,
        discovered: &Discovered,
        client: &Client,
        credentials: impl CredentialStore + 'static,
        states: Option<PendingStates>,
    ) -> Result<AuthorizationManager, AccountError> {
        let mut manager = self.bare_manager(server).await?;
        manager.set_metadata(discovered.metadata.clone());
        manager.set_credential_store(credentials);
        // Only a sign-in has state to keep; a refresh has none.
        if let Some(states) = states {
            manager.set_state_store(states);
        }
        manager
            .configure_client(client.config.clone())
            .map_err(|e| AccountError::at(&server.name, e))?;
        Ok(manager)
    }
}
