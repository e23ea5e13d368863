//! Disconnecting: the authorization server is asked to revoke the person's tokens
//! (RFC 7009) where it offers revocation, and they are deleted here either way.

use oauth2::TokenResponse;

use super::Accounts;
use super::error::AccountError;
use super::view::Disconnected;

impl Accounts {
    pub async fn disconnect(
        &self,
        owner: &str,
        server: &str,
    ) -> Result<Disconnected, AccountError> {
        let server = self.server(server)?.clone();
        let row = self
            .rows
            .account(owner, &server.name)
            .await?
            .ok_or_else(|| AccountError::NotConnected(server.name.clone()))?;
        let revoked = match self.revoke(&server, &row).await {
            Ok(revoked) => revoked,
            Err(error) => {
                // The person asked to be disconnected: that happens here even when
                // their authorization server cannot be told.
                tracing::warn!(server = %server.name, %error, "could not revoke a person's tokens at the authorization server; deleted here only");
                false
            }
        };
        self.rows.forget(owner, &server.name, None).await?;
        tracing::info!(server = %server.name, revoked, "an account was disconnected");
        self.count(&server.name, "disconnected");
        Ok(Disconnected {
            server: server.name.clone(),
            revoked_at_server: revoked,
        })
    }

    /// Revokes the refresh token (which takes its access tokens with it at most
    /// servers), then the access token; `false` without a revocation endpoint.
    async fn revoke(
        &self,
        server: &super::AccountServer,
        row: &super::store::AccountRow,
    ) -> Result<bool, AccountError> {
        let discovered = self.discovered(server, None).await?;
        let Some(endpoint) = discovered.revocation_endpoint() else {
            return Ok(false);
        };
        let credentials = self.credentials(row)?;
        let Some(tokens) = credentials.token_response else {
            return Ok(false);
        };
        let client = self
            .client_with_id(server, &discovered, &row.client_id)
            .await?;
        let mut revoke: Vec<(&str, String)> = Vec::new();
        if let Some(refresh) = tokens.refresh_token() {
            revoke.push(("refresh_token", refresh.secret().clone()));
        }
        revoke.push(("access_token", tokens.access_token().secret().clone()));
        for (hint, token) in revoke {
            let mut form = vec![("token", token), ("token_type_hint", hint.to_owned())];
            let mut request = self.http.post(endpoint);
            match &client.config.client_secret {
                Some(secret) => {
                    request = request.basic_auth(&client.config.client_id, Some(secret));
                }
                None => form.push(("client_id", client.config.client_id.clone())),
            }
            let response = request.form(&form).send().await.map_err(|e| {
                AccountError::AuthorizationServer {
                    server: server.name.clone(),
                    detail: format!("revocation: {e}"),
                }
            })?;
            // RFC 7009: 200 also for a token already invalid.
            if !response.status().is_success() {
                return Err(AccountError::AuthorizationServer {
                    server: server.name.clone(),
                    detail: format!("revocation answered {}", response.status()),
                });
            }
        }
        Ok(true)
    }
}
