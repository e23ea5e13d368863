//! A person's access token for a server, renewed with their refresh token when it is
//! about to expire or the server refused it: once per person and server at a time,
//! across every replica. In a replica, one caller at a time looks (a local lock);
//! across replicas, the one that takes the row's lease refreshes, and the others
//! wait for the row's next generation and use what it wrote. A refresh token is
//! never sent twice, so a rotating authorization server never sees a replay (which
//! would revoke the whole token family).

use std::sync::Arc;
use std::time::Duration;

use oauth2::TokenResponse;
use rmcp::transport::auth::StoredCredentials;
use secrecy::{ExposeSecret, SecretString};

use super::Accounts;
use super::error::AccountError;
use super::states::RowCredentials;
use super::store::{AccountRow, now_ms};

/// How long a replica may hold the right to refresh before another may take it:
/// longer than the OAuth client's 30 s timeout, so a refresh still under way is
/// never sent again by another replica.
const LEASE: Duration = Duration::from_secs(45);
/// How often a waiting replica looks whether the refresh is done.
const POLL: Duration = Duration::from_millis(50);

fn access_token(credentials: &StoredCredentials) -> Option<SecretString> {
    credentials
        .token_response
        .as_ref()
        .map(|t| SecretString::from(t.access_token().secret().clone()))
}

fn fresh(row: &AccountRow) -> bool {
    row.expires_at.is_none_or(|at| at > now_ms())
}

impl Accounts {
    /// `owner`'s access token at `server`, renewed first if it is about to expire.
    pub async fn access_token(
        &self,
        owner: &str,
        server: &str,
    ) -> Result<SecretString, AccountError> {
        let row = self
            .rows
            .account(owner, server)
            .await?
            .ok_or_else(|| AccountError::NotConnected(server.to_owned()))?;
        if fresh(&row) {
            return self.token_of(&row);
        }
        self.renew(owner, server, None).await
    }

    /// A token other than `rejected`, which the server refused: renewed unless
    /// another caller renewed it already.
    pub async fn after_rejection(
        &self,
        owner: &str,
        server: &str,
        rejected: &str,
    ) -> Result<SecretString, AccountError> {
        self.renew(owner, server, Some(rejected)).await
    }

    fn token_of(&self, row: &AccountRow) -> Result<SecretString, AccountError> {
        access_token(&self.opened(row)?)
            .ok_or_else(|| AccountError::NotConnected(row.server.clone()))
    }

    /// A row's credentials; one no configured key opens (a lost key, a value moved
    /// from another row) is a sign-in that has ended: its owner connects again,
    /// which replaces it.
    fn opened(&self, row: &AccountRow) -> Result<StoredCredentials, AccountError> {
        self.credentials(row).map_err(|error| {
            tracing::warn!(server = %row.server, %error, "a connected account cannot be opened; its owner is asked to connect again");
            AccountError::SignInEnded(row.server.clone())
        })
    }

    fn local_lock(&self, owner: &str, server: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self
            .refreshing
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // A lock nobody holds or waits for is dropped as others are taken.
        locks.retain(|_, lock| Arc::strong_count(lock) > 1);
        locks
            .entry((owner.to_owned(), server.to_owned()))
            .or_default()
            .clone()
    }

    async fn renew(
        &self,
        owner: &str,
        server: &str,
        rejected: Option<&str>,
    ) -> Result<SecretString, AccountError> {
        let lock = self.local_lock(owner, server);
        let _one_here = lock.lock().await;
        let gone = || AccountError::NotConnected(server.to_owned());
        let first = self.rows.account(owner, server).await?.ok_or_else(gone)?;
        let deadline = tokio::time::Instant::now() + LEASE + Duration::from_secs(5);
        let mut row = first.clone();
        loop {
            // Someone renewed it since we looked (or since the server refused ours).
            let renewed = row.generation != first.generation
                || match rejected {
                    Some(rejected) => {
                        self.token_of(&row)?.expose_secret() != rejected && fresh(&row)
                    }
                    None => fresh(&row),
                };
            if renewed {
                return self.token_of(&row);
            }
            let until = now_ms() + i64::try_from(LEASE.as_millis()).unwrap_or(30_000);
            if self
                .rows
                .claim_refresh(owner, server, row.generation, until, &self.replica)
                .await?
            {
                let refreshed = self.refresh_now(&row).await;
                // A refresh the authorization server answered with an error may be
                // tried again at once. One that got no answer may have rotated the
                // token there: the lease stays until it runs out, so nobody sends
                // the old refresh token again meanwhile (a replay revokes the family).
                match &refreshed {
                    Ok(_) => {}
                    Err(AccountError::AuthorizationServer { .. }) => {
                        tracing::warn!(%server, "a refresh got no usable answer; the next try waits for its lease to end");
                    }
                    Err(_) => {
                        self.rows
                            .release_refresh(owner, server, &self.replica)
                            .await?;
                    }
                }
                return refreshed;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(AccountError::RefreshBusy(server.to_owned()));
            }
            tokio::time::sleep(POLL).await;
            row = self.rows.account(owner, server).await?.ok_or_else(gone)?;
        }
    }

    /// Refreshes `row` now: this replica holds its lease.
    async fn refresh_now(&self, row: &AccountRow) -> Result<SecretString, AccountError> {
        let server = self.server(&row.server)?.clone();
        let loaded = self.opened(row)?;
        let discovered = self.discovered(&server, None).await?;
        let client = self
            .client_with_id(&server, &discovered, &row.client_id)
            .await?;
        let credentials = RowCredentials {
            rows: self.rows.clone(),
            keys: self.keys.clone(),
            owner: row.owner.clone(),
            server: row.server.clone(),
            loaded: Some(loaded),
            generation: Some(row.generation),
        };
        let manager = self
            .manager(&server, &discovered, &client, credentials, None)
            .await?;
        match manager.refresh_token().await {
            Ok(token) => {
                tracing::info!(server = %server.name, "renewed a person's access at the MCP server");
                self.count(&server.name, "refreshed");
                Ok(SecretString::from(token.access_token().secret().clone()))
            }
            Err(error) => {
                let error = AccountError::at(&server.name, error);
                if matches!(error, AccountError::SignInEnded(_)) {
                    self.count(&server.name, "refresh_refused");
                    tracing::info!(server = %server.name, "the authorization server refused a person's refresh token; they will be asked to connect again");
                }
                Err(error)
            }
        }
    }
}
