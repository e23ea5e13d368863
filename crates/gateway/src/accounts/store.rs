//! The accounts' rows: connected accounts, sign-ins under way, and the gateway's
//! registrations at authorization servers. Values that are secrets arrive here
//! sealed; nothing in this file sees a token.

use maitred_core::db::{Db, canonical_now};
use sha2::{Digest, Sha256};

/// A connected account as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct AccountRow {
    pub(crate) owner: String,
    pub(crate) server: String,
    pub(crate) client_id: String,
    pub(crate) scopes: String,
    pub(crate) credentials: String,
    pub(crate) generation: i64,
    pub(crate) expires_at: Option<i64>,
    pub(crate) connected_at: String,
    pub(crate) refreshed_at: Option<String>,
}

const ACCOUNT_COLUMNS: &str = "owner, server, client_id, scopes, credentials, generation, expires_at, connected_at, refreshed_at";

/// A sign-in under way as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct AuthorizationRow {
    pub(crate) owner: String,
    pub(crate) server: String,
    pub(crate) tool_call_id: Option<String>,
    pub(crate) sealed: String,
    /// The client it was started with; it is finished with the same.
    pub(crate) client_id: String,
    pub(crate) expires_at: i64,
    pub(crate) used_at: Option<String>,
}

/// A registration at an authorization server.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct ClientRow {
    pub(crate) kind: String,
    pub(crate) client_id: String,
    pub(crate) secret: Option<String>,
}

/// The key of a sign-in: the SHA-256 of its `state`, which is never stored.
pub(crate) fn state_hash(state: &str) -> String {
    hex::encode(Sha256::digest(state.as_bytes()))
}

pub(crate) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[derive(Clone)]
pub(crate) struct Rows {
    db: Db,
}

/// What a connect or refresh writes.
pub(crate) struct Saved<'a> {
    pub(crate) owner: &'a str,
    pub(crate) server: &'a str,
    pub(crate) issuer: Option<&'a str>,
    pub(crate) client_id: &'a str,
    pub(crate) scopes: &'a str,
    pub(crate) credentials: &'a str,
    pub(crate) key_id: &'a str,
    pub(crate) expires_at: Option<i64>,
}

impl Rows {
    pub(crate) fn new(db: Db) -> Self {
        Self { db }
    }

    pub(crate) async fn account(
        &self,
        owner: &str,
        server: &str,
    ) -> Result<Option<AccountRow>, sqlx::Error> {
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {ACCOUNT_COLUMNS} FROM connected_accounts WHERE owner = $1 AND server = $2"
        )))
        .bind(owner)
        .bind(server)
        .fetch_optional(self.db.pool())
        .await
    }

    pub(crate) async fn accounts_of(&self, owner: &str) -> Result<Vec<AccountRow>, sqlx::Error> {
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {ACCOUNT_COLUMNS} FROM connected_accounts WHERE owner = $1 ORDER BY server"
        )))
        .bind(owner)
        .fetch_all(self.db.pool())
        .await
    }

    pub(crate) async fn all_accounts(&self) -> Result<Vec<AccountRow>, sqlx::Error> {
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {ACCOUNT_COLUMNS} FROM connected_accounts ORDER BY owner, server"
        )))
        .fetch_all(self.db.pool())
        .await
    }

    /// A new sign-in replaces what the person had at the server.
    pub(crate) async fn connect(&self, saved: &Saved<'_>) -> Result<(), sqlx::Error> {
        let now = canonical_now();
        sqlx::query(
            "INSERT INTO connected_accounts (owner, server, issuer, client_id, scopes, credentials, key_id, \
             generation, expires_at, connected_at, refreshed_at, refresh_lease_until) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $9, NULL, 0) \
             ON CONFLICT (owner, server) DO UPDATE SET issuer = excluded.issuer, \
             client_id = excluded.client_id, scopes = excluded.scopes, \
             credentials = excluded.credentials, key_id = excluded.key_id, \
             generation = connected_accounts.generation + 1, expires_at = excluded.expires_at, \
             connected_at = excluded.connected_at, refreshed_at = NULL, refresh_lease_until = 0, \
             refresh_lease_owner = NULL",
        )
        .bind(saved.owner)
        .bind(saved.server)
        .bind(saved.issuer)
        .bind(saved.client_id)
        .bind(saved.scopes)
        .bind(saved.credentials)
        .bind(saved.key_id)
        .bind(saved.expires_at)
        .bind(&now)
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    /// A refresh's result, written only over the generation it refreshed; releases
    /// the lease. `false`: the row changed meanwhile (a new sign-in, a disconnect).
    pub(crate) async fn refreshed(
        &self,
        saved: &Saved<'_>,
        generation: i64,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE connected_accounts SET credentials = $1, key_id = $2, scopes = $3, expires_at = $4, \
             generation = generation + 1, refreshed_at = $5, refresh_lease_until = 0, \
             refresh_lease_owner = NULL WHERE owner = $6 AND server = $7 AND generation = $8",
        )
        .bind(saved.credentials)
        .bind(saved.key_id)
        .bind(saved.scopes)
        .bind(saved.expires_at)
        .bind(canonical_now())
        .bind(saved.owner)
        .bind(saved.server)
        .bind(generation)
        .execute(self.db.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The right to refresh generation `generation`, cluster-wide, until `until`
    /// (unix ms); `false` while another replica holds it.
    pub(crate) async fn claim_refresh(
        &self,
        owner: &str,
        server: &str,
        generation: i64,
        until: i64,
        by: &str,
    ) -> Result<bool, sqlx::Error> {
        let claimed = sqlx::query(
            "UPDATE connected_accounts SET refresh_lease_until = $1, refresh_lease_owner = $2 \
             WHERE owner = $3 AND server = $4 AND generation = $5 AND refresh_lease_until < $6",
        )
        .bind(until)
        .bind(by)
        .bind(owner)
        .bind(server)
        .bind(generation)
        .bind(now_ms())
        .execute(self.db.pool())
        .await?;
        Ok(claimed.rows_affected() == 1)
    }

    pub(crate) async fn release_refresh(
        &self,
        owner: &str,
        server: &str,
        by: &str,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "UPDATE connected_accounts SET refresh_lease_until = 0, refresh_lease_owner = NULL \
             WHERE owner = $1 AND server = $2 AND refresh_lease_owner = $3",
        )
        .bind(owner)
        .bind(server)
        .bind(by)
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    /// Forgets the account; with `generation`, only if it is still that one (a
    /// refused refresh must not delete a sign-in made since).
    pub(crate) async fn forget(
        &self,
        owner: &str,
        server: &str,
        generation: Option<i64>,
    ) -> Result<bool, sqlx::Error> {
        let gone = match generation {
            Some(generation) => {
                sqlx::query(
                    "DELETE FROM connected_accounts WHERE owner = $1 AND server = $2 AND generation = $3",
                )
                .bind(owner)
                .bind(server)
                .bind(generation)
                .execute(self.db.pool())
                .await?
            }
            None => {
                sqlx::query("DELETE FROM connected_accounts WHERE owner = $1 AND server = $2")
                    .bind(owner)
                    .bind(server)
                    .execute(self.db.pool())
                    .await?
            }
        };
        Ok(gone.rows_affected() > 0)
    }

    /// Rows sealed under another key than `current`, a batch at a time.
    pub(crate) async fn sealed_under_other_keys(
        &self,
        current: &str,
    ) -> Result<Vec<AccountRow>, sqlx::Error> {
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {ACCOUNT_COLUMNS} FROM connected_accounts WHERE key_id <> $1 LIMIT 100"
        )))
        .bind(current)
        .fetch_all(self.db.pool())
        .await
    }

    /// The same credentials sealed again, if the row has not changed meanwhile.
    pub(crate) async fn resealed(
        &self,
        row: &AccountRow,
        credentials: &str,
        key_id: &str,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE connected_accounts SET credentials = $1, key_id = $2 \
             WHERE owner = $3 AND server = $4 AND generation = $5",
        )
        .bind(credentials)
        .bind(key_id)
        .bind(&row.owner)
        .bind(&row.server)
        .bind(row.generation)
        .execute(self.db.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Dynamic registrations' secrets sealed under another key than `current`.
    pub(crate) async fn client_secrets_under_other_keys(
        &self,
        current: &str,
    ) -> Result<Vec<(String, String, String)>, sqlx::Error> {
        sqlx::query_as(
            "SELECT server, issuer, secret FROM account_clients \
             WHERE secret IS NOT NULL AND key_id <> $1",
        )
        .bind(current)
        .fetch_all(self.db.pool())
        .await
    }

    pub(crate) async fn reseal_client_secret(
        &self,
        server: &str,
        issuer: &str,
        before: &str,
        secret: &str,
        key_id: &str,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE account_clients SET secret = $1, key_id = $2 \
             WHERE server = $3 AND issuer = $4 AND secret = $5",
        )
        .bind(secret)
        .bind(key_id)
        .bind(server)
        .bind(issuer)
        .bind(before)
        .execute(self.db.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records a sign-in under way, unless its owner has `cap` already (unused and
    /// unexpired): `false` then, and nothing is recorded. The count and the insert
    /// are one statement.
    pub(crate) async fn start_authorization(
        &self,
        state: &str,
        row: &AuthorizationRow,
        key_id: &str,
        cap: usize,
    ) -> Result<bool, sqlx::Error> {
        // Sign-ins long over are of no use to anyone: cleared as new ones start.
        sqlx::query("DELETE FROM account_authorizations WHERE expires_at < $1")
            .bind(now_ms() - 24 * 3600 * 1000)
            .execute(self.db.pool())
            .await?;
        let started = sqlx::query(
            "INSERT INTO account_authorizations (state_hash, owner, server, tool_call_id, sealed, key_id, \
             client_id, created_at, expires_at) SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9 \
             WHERE (SELECT COUNT(*) FROM account_authorizations \
                    WHERE owner = $2 AND used_at IS NULL AND expires_at >= $10) < $11",
        )
        .bind(state_hash(state))
        .bind(&row.owner)
        .bind(&row.server)
        .bind(&row.tool_call_id)
        .bind(&row.sealed)
        .bind(key_id)
        .bind(&row.client_id)
        .bind(canonical_now())
        .bind(row.expires_at)
        .bind(now_ms())
        .bind(i64::try_from(cap).unwrap_or(i64::MAX))
        .execute(self.db.pool())
        .await?;
        Ok(started.rows_affected() == 1)
    }

    pub(crate) async fn authorization(
        &self,
        state: &str,
    ) -> Result<Option<AuthorizationRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT owner, server, tool_call_id, sealed, client_id, expires_at, used_at \
             FROM account_authorizations WHERE state_hash = $1",
        )
        .bind(state_hash(state))
        .fetch_optional(self.db.pool())
        .await
    }

    /// Marks a sign-in used, once: of two returns with the same `state` (a replay,
    /// a double submit) exactly one gets `true`.
    pub(crate) async fn use_authorization(&self, state: &str) -> Result<bool, sqlx::Error> {
        let used = sqlx::query(
            "UPDATE account_authorizations SET used_at = $1 WHERE state_hash = $2 AND used_at IS NULL",
        )
        .bind(canonical_now())
        .bind(state_hash(state))
        .execute(self.db.pool())
        .await?;
        Ok(used.rows_affected() == 1)
    }

    pub(crate) async fn client(
        &self,
        server: &str,
        issuer: &str,
    ) -> Result<Option<ClientRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT kind, client_id, secret FROM account_clients WHERE server = $1 AND issuer = $2",
        )
        .bind(server)
        .bind(issuer)
        .fetch_optional(self.db.pool())
        .await
    }

    /// Records a registration unless another replica recorded one first; either
    /// way, returns the one that stands.
    pub(crate) async fn record_client(
        &self,
        server: &str,
        issuer: &str,
        client: &ClientRow,
        key_id: Option<&str>,
    ) -> Result<ClientRow, sqlx::Error> {
        sqlx::query(
            "INSERT INTO account_clients (server, issuer, kind, client_id, secret, key_id, registered_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (server, issuer) DO NOTHING",
        )
        .bind(server)
        .bind(issuer)
        .bind(&client.kind)
        .bind(&client.client_id)
        .bind(&client.secret)
        .bind(key_id)
        .bind(canonical_now())
        .execute(self.db.pool())
        .await?;
        Ok(self
            .client(server, issuer)
            .await?
            .unwrap_or_else(|| client.clone()))
    }
}
