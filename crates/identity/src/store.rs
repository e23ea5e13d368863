//! Authorization codes and refresh tokens, stored by their SHA-256 so a database
//! dump holds nothing a thief could present.

use sha2::{Digest, Sha256};
use sqlx::{FromRow, Row};

use maitred_core::db::Db;

pub(super) fn hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

#[derive(Debug, Clone, FromRow)]
pub(super) struct CodeGrant {
    pub client_id: String,
    pub subject: String,
    pub redirect_uri: String,
    pub scope: String,
    pub resource: Option<String>,
    pub code_challenge: Option<String>,
    pub nonce: Option<String>,
    /// The refresh-token family this login starts; revoked if the code is replayed.
    pub family_id: String,
    pub expires_at: i64,
}

#[derive(Debug, Clone, FromRow)]
pub(super) struct RefreshGrant {
    pub family_id: String,
    pub client_id: String,
    pub subject: String,
    pub scope: String,
    pub resource: Option<String>,
    pub expires_at: i64,
    pub revoked: i64,
}

pub(super) enum Redeemed<T> {
    Fresh(T),
    /// Presented before: a sign of theft.
    Reused(T),
    Unknown,
}

pub(super) async fn insert_code(db: &Db, code: &str, grant: &CodeGrant) -> Result<(), sqlx::Error> {
    let now = chrono::Utc::now().timestamp();
    sqlx::query("DELETE FROM authorization_codes WHERE expires_at < $1")
        .bind(now - 3600)
        .execute(db.pool())
        .await?;
    sqlx::query(
        "INSERT INTO authorization_codes (code_hash, client_id, subject, redirect_uri, scope, resource, code_challenge, nonce, family_id, expires_at, used) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 0)",
    )
    .bind(hash(code))
    .bind(&grant.client_id)
    .bind(&grant.subject)
    .bind(&grant.redirect_uri)
    .bind(&grant.scope)
    .bind(&grant.resource)
    .bind(&grant.code_challenge)
    .bind(&grant.nonce)
    .bind(&grant.family_id)
    .bind(grant.expires_at)
    .execute(db.pool())
    .await?;
    Ok(())
}

/// Marks the code used; exactly one concurrent redeemer sees `Fresh`.
pub(super) async fn redeem_code(db: &Db, code: &str) -> Result<Redeemed<CodeGrant>, sqlx::Error> {
    let code_hash = hash(code);
    let Some(grant) = sqlx::query_as::<_, CodeGrant>(
        "SELECT client_id, subject, redirect_uri, scope, resource, code_challenge, nonce, family_id, expires_at FROM authorization_codes WHERE code_hash = $1",
    )
    .bind(&code_hash)
    .fetch_optional(db.pool())
    .await?
    else {
        return Ok(Redeemed::Unknown);
    };
    let claimed =
        sqlx::query("UPDATE authorization_codes SET used = 1 WHERE code_hash = $1 AND used = 0")
            .bind(&code_hash)
            .execute(db.pool())
            .await?
            .rows_affected();
    Ok(if claimed == 1 {
        Redeemed::Fresh(grant)
    } else {
        Redeemed::Reused(grant)
    })
}

pub(super) struct NewRefresh<'a> {
    pub family_id: &'a str,
    pub client_id: &'a str,
    pub subject: &'a str,
    pub scope: &'a str,
    pub resource: Option<&'a str>,
    pub expires_at: i64,
}

pub(super) async fn insert_refresh(
    db: &Db,
    token: &str,
    new: &NewRefresh<'_>,
) -> Result<(), sqlx::Error> {
    let now = chrono::Utc::now().timestamp();
    let mut conn = db.pool().acquire().await?;
    insert_refresh_on(&mut conn, token, new, now).await
}

async fn insert_refresh_on(
    conn: &mut sqlx::AnyConnection,
    token: &str,
    new: &NewRefresh<'_>,
    now: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO refresh_tokens (token_hash, family_id, client_id, subject, scope, resource, expires_at, used_at, revoked, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, NULL, 0, $8)",
    )
    .bind(hash(token))
    .bind(new.family_id)
    .bind(new.client_id)
    .bind(new.subject)
    .bind(new.scope)
    .bind(new.resource)
    .bind(new.expires_at)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}

/// A refresh token as stored, looked up without spending it: the token endpoint runs
/// every check first, so a refused request leaves the token as it was.
pub(super) async fn find_refresh(
    db: &Db,
    token: &str,
) -> Result<Option<StoredRefresh>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT family_id, client_id, subject, scope, resource, expires_at, revoked, used_at FROM refresh_tokens WHERE token_hash = $1",
    )
    .bind(hash(token))
    .fetch_optional(db.pool())
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    Ok(Some(StoredRefresh {
        grant: RefreshGrant::from_row(&row)?,
        used: row.try_get::<Option<i64>, _>("used_at")?.is_some(),
    }))
}

pub(super) struct StoredRefresh {
    pub grant: RefreshGrant,
    /// Spent by an earlier refresh: presenting it again is a sign of theft.
    pub used: bool,
}

/// Rotation, once every check has passed: spends `presented` and stores `next` in one
/// transaction. The spend is a compare-and-set on "not used, not revoked", so of
/// concurrent rotations of one token exactly one returns `true`; the others (and a
/// token used or revoked since it was looked up) get `false` and store nothing.
pub(super) async fn rotate_refresh(
    db: &Db,
    presented: &str,
    next: &str,
    new: &NewRefresh<'_>,
) -> Result<bool, sqlx::Error> {
    let now = chrono::Utc::now().timestamp();
    let mut tx = db.begin_write().await?;
    let claimed = sqlx::query(
        "UPDATE refresh_tokens SET used_at = $1 WHERE token_hash = $2 AND used_at IS NULL AND revoked = 0",
    )
    .bind(now)
    .bind(hash(presented))
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if claimed != 1 {
        tx.rollback().await?;
        return Ok(false);
    }
    insert_refresh_on(&mut tx, next, new, now).await?;
    tx.commit().await?;
    Ok(true)
}

/// Revokes every refresh token of a family (a login session).
pub(super) async fn revoke_family(db: &Db, family_id: &str) -> Result<u64, sqlx::Error> {
    Ok(
        sqlx::query("UPDATE refresh_tokens SET revoked = 1 WHERE family_id = $1")
            .bind(family_id)
            .execute(db.pool())
            .await?
            .rows_affected(),
    )
}

pub(super) async fn family_revoked(db: &Db, family_id: &str) -> Result<bool, sqlx::Error> {
    let row =
        sqlx::query("SELECT COUNT(*) FROM refresh_tokens WHERE family_id = $1 AND revoked = 1")
            .bind(family_id)
            .fetch_one(db.pool())
            .await?;
    Ok(row.try_get::<i64, _>(0)? > 0)
}
