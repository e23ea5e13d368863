//! A sign-in at a server's authorization server, from its start (a tool call that
//! needs it, or the person's Connect in the accounts panel) to the gateway's
//! callback: the authorization code flow with PKCE (S256), `resource` naming the
//! server (RFC 8707), a `state` bound to the person, the server and the waiting
//! call, used once and only in time, and the `iss` of the response checked against
//! the authorization server's (RFC 9207).

use chrono::{TimeZone, Utc};
use maitred_core::db::canonical;
use maitred_protocol::events::ConnectReason;
use rmcp::transport::auth::StoredCredentials;
use serde::Deserialize;

use super::error::AccountError;
use super::states::{PendingStates, RowCredentials};
use super::store::now_ms;
use super::view::ClientKind;
use super::{Accounts, host_of};

/// A sign-in started: where the person goes.
#[derive(Debug, Clone)]
pub struct Begun {
    pub url: String,
    /// The sign-in page's host, shown so the person knows where they go.
    pub host: String,
    pub expires_at: String,
    pub client: ClientKind,
}

/// What the authorization server sends the person back with.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CallbackQuery {
    pub code: Option<String>,
    pub state: Option<String>,
    pub iss: Option<String>,
    pub error: Option<String>,
    pub error_description: Option<String>,
}

/// How a sign-in that came back ended, and the call that waits for it, if any.
#[derive(Debug, Clone)]
pub struct Completed {
    pub server: String,
    pub call: Option<String>,
    /// `false`: the person declined at the authorization server.
    pub connected: bool,
}

impl Accounts {
    /// Starts `owner`'s sign-in at `server`. `call`: the tool call that waits for it.
    /// `challenge`: the server's `WWW-Authenticate`, whose scopes are asked for too
    /// (a step up adds them to what was granted).
    pub async fn begin(
        &self,
        owner: &str,
        server: &str,
        call: Option<&str>,
        reason: ConnectReason,
        challenge: Option<&str>,
    ) -> Result<Begun, AccountError> {
        let server = self.server(server)?.clone();
        let discovered = self.discovered(&server, challenge).await?;
        let client = self.client(&server, &discovered).await?;
        let mut scopes = discovered.scopes.clone();
        if reason == ConnectReason::MoreAccess
            && let Some(row) = self.rows.account(owner, &server.name).await?
        {
            scopes.extend(row.scopes.split_whitespace().map(str::to_owned));
        }
        if let Some(asked) = challenge.and_then(challenge_scope) {
            scopes.extend(asked.split_whitespace().map(str::to_owned));
        }
        let mut seen = std::collections::HashSet::new();
        scopes.retain(|s| seen.insert(s.clone()));
        let timeout = i64::try_from(self.connect_timeout.as_millis()).unwrap_or(i64::MAX);
        let expires_at = now_ms().saturating_add(timeout);
        let states = self.pending_states(
            owner,
            &server.name,
            call.map(str::to_owned),
            expires_at,
            &client.config.client_id,
        );
        let credentials = self.no_credentials(owner, &server.name);
        let manager = self
            .manager(&server, &discovered, &client, credentials, Some(states))
            .await?;
        let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
        let url = manager
            .get_authorization_url(&scope_refs)
            .await
            .map_err(|e| AccountError::at(&server.name, e))?;
        tracing::info!(server = %server.name, client = client.kind.as_str(), ?scopes, "a sign-in started");
        self.count(&server.name, "sign_in_started");
        Ok(Begun {
            host: host_of(&url),
            url,
            expires_at: canonical(
                Utc.timestamp_millis_opt(expires_at)
                    .single()
                    .unwrap_or_else(Utc::now),
            ),
            client: client.kind,
        })
    }

    /// Finishes the sign-in the callback brings back for `owner` (the person signed
    /// in to maitred in this browser).
    pub async fn complete(
        &self,
        owner: &str,
        query: &CallbackQuery,
    ) -> Result<Completed, AccountError> {
        let state = query
            .state
            .as_deref()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| AccountError::BadCallback("no state".to_owned()))?;
        let row = self
            .rows
            .authorization(state)
            .await?
            .ok_or(AccountError::UnknownState)?;
        if row.owner != owner {
            // Ended, not only refused: otherwise the same link, forwarded to the
            // person who started it, would connect their account to the third-party
            // account of whoever signed in.
            let ended = self.rows.use_authorization(state).await?;
            tracing::warn!(server = %row.server, ended, "a sign-in came back in another person's browser; refused and ended");
            self.count(&row.server, "refused");
            return Err(AccountError::NotYours {
                owner: row.owner,
                call: row.tool_call_id.filter(|_| ended),
            });
        }
        if row.used_at.is_some() {
            return Err(AccountError::StateUsed);
        }
        if row.expires_at < now_ms() {
            return Err(AccountError::Expired);
        }
        let server = self.server(&row.server)?.clone();
        let discovered = self.discovered(&server, None).await?;
        if let Some(error) = &query.error {
            // A denial counts only from the server's own authorization server: a
            // forged one must not end someone's sign-in.
            check_issuer(&server.name, &discovered, query.iss.as_deref())?;
            // The person said no (access_denied), or the server could not go on:
            // either way this sign-in is over, and the call is told.
            if !self.rows.use_authorization(state).await? {
                return Err(AccountError::StateUsed);
            }
            tracing::info!(server = %server.name, %error, "a sign-in came back without access");
            self.count(&server.name, "declined");
            return Ok(Completed {
                server: server.name.clone(),
                call: row.tool_call_id,
                connected: false,
            });
        }
        let code = query
            .code
            .as_deref()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| AccountError::BadCallback("neither a code nor an error".to_owned()))?;
        let client = self
            .client_with_id(&server, &discovered, &row.client_id)
            .await?;
        let states = self.pending_states(
            owner,
            &server.name,
            row.tool_call_id.clone(),
            row.expires_at,
            &row.client_id,
        );
        let credentials = self.no_credentials(owner, &server.name);
        let manager = self
            .manager(&server, &discovered, &client, credentials, Some(states))
            .await?;
        if let Err(error) = manager
            .exchange_code_for_token_with_issuer(code, state, query.iss.as_deref())
            .await
        {
            self.count(&server.name, "refused");
            return Err(match error {
                // The state was spent before the code went out: this sign-in is
                // over, whatever the authorization server said.
                rmcp::transport::auth::AuthError::TokenExchangeFailed(detail) => {
                    AccountError::NotRedeemed {
                        server: server.name.clone(),
                        call: row.tool_call_id,
                        detail,
                    }
                }
                other => AccountError::at(&server.name, other),
            });
        }
        tracing::info!(server = %server.name, client = client.kind.as_str(), "an account was connected");
        self.count(&server.name, "connected");
        Ok(Completed {
            server: server.name.clone(),
            call: row.tool_call_id,
            connected: true,
        })
    }

    /// Where `owner`'s sign-in at `server` keeps its state, for `call` (if a call
    /// waits for it) until `expires_at`, made with client `client_id`.
    fn pending_states(
        &self,
        owner: &str,
        server: &str,
        call: Option<String>,
        expires_at: i64,
        client_id: &str,
    ) -> PendingStates {
        PendingStates {
            rows: self.rows.clone(),
            keys: self.keys.clone(),
            owner: owner.to_owned(),
            server: server.to_owned(),
            call,
            expires_at,
            client_id: client_id.to_owned(),
            cap: self.sign_ins_per_person,
            starting: self.starting.clone(),
        }
    }

    /// The store a new sign-in saves into.
    fn no_credentials(&self, owner: &str, server: &str) -> RowCredentials {
        RowCredentials {
            rows: self.rows.clone(),
            keys: self.keys.clone(),
            owner: owner.to_owned(),
            server: server.to_owned(),
            loaded: None::<StoredCredentials>,
            generation: None,
        }
    }
}

/// RFC 9207: a response's `iss` must be the authorization server's, and is required
/// where the server says it sends one. rmcp checks it for a code; this is for an
/// error response, which rmcp never sees.
fn check_issuer(
    server: &str,
    discovered: &super::oauth::Discovered,
    received: Option<&str>,
) -> Result<(), AccountError> {
    let sends_iss = discovered
        .metadata
        .additional_fields
        .get("authorization_response_iss_parameter_supported")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    match (received, discovered.metadata.issuer.as_deref()) {
        (Some(received), Some(expected)) if received != expected => {
            Err(AccountError::WrongIssuer {
                server: server.to_owned(),
                received: received.to_owned(),
            })
        }
        (None, _) if sends_iss => Err(AccountError::MissingIssuer {
            server: server.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// The `scope` a `WWW-Authenticate` challenge asks for.
fn challenge_scope(header: &str) -> Option<String> {
    let base = url::Url::parse("http://unused.invalid/").ok()?;
    rmcp::transport::auth::WWWAuthenticateParams::parse(header, &base).scope
}

#[cfg(test)]
mod tests {
    use super::challenge_scope;

    #[test]
    fn a_step_up_asks_for_the_scopes_its_challenge_names() {
        let header = r#"Bearer error="insufficient_scope", scope="notes:read notes:write", resource_metadata="https://notes.example.com/.well-known/oauth-protected-resource/mcp""#;
        assert_eq!(
            challenge_scope(header).as_deref(),
            Some("notes:read notes:write")
        );
        assert_eq!(challenge_scope("Bearer realm=\"x\""), None);
    }
}
