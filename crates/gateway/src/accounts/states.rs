//! rmcp's OAuth client keeps its state through two traits; here they are rows of
//! the database, sealed, for one person and one server, so a sign-in started on one
//! replica can end on another and every replica sees the same tokens.

use async_trait::async_trait;
use rmcp::transport::auth::{
    AuthError, CredentialStore, StateStore, StoredAuthorizationState, StoredCredentials,
};

use super::sealed::{KeyRing, Purpose};
use super::store::{AuthorizationRow, Rows, Saved, now_ms};

/// A second use of the same `state` (a replay, a double submit).
pub(crate) const USED: &str = "the sign-in was already used";
/// A sign-in refused because the person has as many under way as they may.
pub(crate) const TOO_MANY: &str = "too many sign-ins under way";

fn store_error(error: impl std::fmt::Display) -> AuthError {
    AuthError::CredentialStoreError(error.to_string())
}

/// One person's credentials at one server, as one operation sees them.
pub(crate) struct RowCredentials {
    pub(crate) rows: Rows,
    pub(crate) keys: KeyRing,
    pub(crate) owner: String,
    pub(crate) server: String,
    /// What the row held when the operation started; a refresh reads it.
    pub(crate) loaded: Option<StoredCredentials>,
    /// The generation a refresh replaces; `None`: a new sign-in.
    pub(crate) generation: Option<i64>,
}

/// When to refresh a token that lives `lifetime_secs`: a little before it expires,
/// so a request does not leave with a token about to lapse.
pub(crate) fn refresh_at(lifetime_secs: Option<u64>) -> Option<i64> {
    let lifetime = i64::try_from(lifetime_secs?).ok()?.saturating_mul(1000);
    let margin = (lifetime / 2).min(30_000);
    Some(now_ms() + lifetime - margin)
}

#[async_trait]
impl CredentialStore for RowCredentials {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(self.loaded.clone())
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        use oauth2::TokenResponse;
        let plain = serde_json::to_vec(&credentials).map_err(store_error)?;
        let sealed = self
            .keys
            .seal(&plain, Purpose::Credentials, &self.owner, &self.server);
        let scopes = credentials.granted_scopes.join(" ");
        let expires_at = credentials
            .token_response
            .as_ref()
            .and_then(|t| refresh_at(t.expires_in().map(|d| d.as_secs())));
        let saved = Saved {
            owner: &self.owner,
            server: &self.server,
            issuer: credentials.issuer.as_deref(),
            client_id: &credentials.client_id,
            scopes: &scopes,
            credentials: &sealed,
            key_id: self.keys.current(),
            expires_at,
        };
        match self.generation {
            None => self.rows.connect(&saved).await.map_err(store_error),
            Some(generation) => {
                if self
                    .rows
                    .refreshed(&saved, generation)
                    .await
                    .map_err(store_error)?
                {
                    Ok(())
                } else {
                    Err(store_error(
                        "the account changed while it was being refreshed",
                    ))
                }
            }
        }
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.rows
            .forget(&self.owner, &self.server, self.generation)
            .await
            .map(drop)
            .map_err(store_error)
    }

    /// The refresh token is dead (revoked, expired, or replayed after a rotation):
    /// the account is forgotten, unless a new sign-in replaced it meanwhile.
    async fn on_refresh_token_rejected(
        &self,
        _credentials: &StoredCredentials,
    ) -> Result<(), AuthError> {
        self.clear().await
    }
}

/// The sign-ins one person starts or finishes at one server.
pub(crate) struct PendingStates {
    pub(crate) rows: Rows,
    pub(crate) keys: KeyRing,
    pub(crate) owner: String,
    pub(crate) server: String,
    /// The call that waits for the sign-in, if one does.
    pub(crate) call: Option<String>,
    pub(crate) expires_at: i64,
    pub(crate) client_id: String,
    /// Sign-ins the person may have under way at once.
    pub(crate) cap: usize,
    pub(crate) starting: std::sync::Arc<tokio::sync::Mutex<()>>,
}

#[async_trait]
impl StateStore for PendingStates {
    async fn save(
        &self,
        csrf_token: &str,
        state: StoredAuthorizationState,
    ) -> Result<(), AuthError> {
        let plain = serde_json::to_vec(&state).map_err(store_error)?;
        let row = AuthorizationRow {
            owner: self.owner.clone(),
            server: self.server.clone(),
            tool_call_id: self.call.clone(),
            sealed: self
                .keys
                .seal(&plain, Purpose::Authorization, &self.owner, &self.server),
            client_id: self.client_id.clone(),
            expires_at: self.expires_at,
            used_at: None,
        };
        let _counting = self.starting.lock().await;
        if self
            .rows
            .start_authorization(csrf_token, &row, self.keys.current(), self.cap)
            .await
            .map_err(store_error)?
        {
            Ok(())
        } else {
            Err(AuthError::CredentialStoreError(TOO_MANY.to_owned()))
        }
    }

    /// Only this person's sign-in at this server, unused and in time.
    async fn load(&self, csrf_token: &str) -> Result<Option<StoredAuthorizationState>, AuthError> {
        let Some(row) = self
            .rows
            .authorization(csrf_token)
            .await
            .map_err(store_error)?
        else {
            return Ok(None);
        };
        if row.owner != self.owner
            || row.server != self.server
            || row.used_at.is_some()
            || row.expires_at < now_ms()
        {
            return Ok(None);
        }
        let plain = self
            .keys
            .open(&row.sealed, Purpose::Authorization, &row.owner, &row.server)
            .map_err(store_error)?;
        serde_json::from_slice(&plain)
            .map(Some)
            .map_err(store_error)
    }

    /// Used once: the second caller is refused, whatever it brings.
    async fn delete(&self, csrf_token: &str) -> Result<(), AuthError> {
        if self
            .rows
            .use_authorization(csrf_token)
            .await
            .map_err(store_error)?
        {
            Ok(())
        } else {
            Err(AuthError::CredentialStoreError(USED.to_owned()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_renewed_a_little_before_it_expires() {
        let now = now_ms();
        // An hour: renewed 30 s early.
        let hour = refresh_at(Some(3600)).unwrap() - now;
        assert!((3_569_000..=3_571_000).contains(&hour), "{hour}");
        // A token that lives 20 s is not renewed at once: at half its life.
        let short = refresh_at(Some(20)).unwrap() - now;
        assert!((9_000..=11_000).contains(&short), "{short}");
        assert_eq!(refresh_at(None), None);
    }
}
