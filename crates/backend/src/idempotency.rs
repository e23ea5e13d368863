//! Idempotent writes: a write sent with an `Idempotency-Key` header (the IETF
//! httpapi draft's name) runs once; a repeat gets the stored response.
//!
//! One layer around the API's routes does it all, so the write handlers know
//! nothing of it. For a write (POST, PUT, PATCH, DELETE) with a key:
//!
//! * The key is 1 to 255 visible ASCII characters, else 400.
//! * The caller is the token's subject and client: two callers' keys never meet.
//! * The request is claimed by INSERTing a pending row under the primary key
//!   (subject, client, key). The database decides who wins, so this holds across
//!   connections and backend replicas, on SQLite and PostgreSQL alike.
//! * The winner runs the write and stores its status and body; a 5xx deletes the
//!   row instead, so a retry runs again. A 4xx is stored like a success.
//! * A repeat with the same method, path and body (its SHA-256) gets the stored
//!   status and body and `Idempotent-Replayed: true`; with another method, path or
//!   body, 422 `IDEMPOTENCY_KEY_REUSED`. A repeat while the first still runs waits
//!   for it up to the configured wait (`MAITRED_IDEMPOTENCY_WAIT`, 10 s), then gets
//!   409 `IDEMPOTENCY_KEY_IN_FLIGHT` with `Retry-After`.
//! * Rows live for the configured TTL (`MAITRED_IDEMPOTENCY_TTL`); expired rows are
//!   deleted when a new key is claimed, and an expired key runs again. A pending row
//!   older than the request timeout (plus a margin) belonged to a request that never
//!   finished (its client went away, or its replica died): it is taken over.

use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::BackendState;
use super::author::Writer;
use super::error::ApiError;
use super::extract::BodyLimit;
use maitred_core::db::{Db, canonical, is_unique_violation, parse_canonical};
use maitred_core::http::error::ErrorDetail;

/// The request header that names a write.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
/// Set on a response that was stored, not made now.
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// The longest key accepted.
pub const MAX_KEY_LEN: usize = 255;

/// A key the backend accepts: 1 to [`MAX_KEY_LEN`] visible ASCII characters.
pub fn is_usable_key(key: &[u8]) -> bool {
    (1..=MAX_KEY_LEN).contains(&key.len()) && key.iter().all(u8::is_ascii_graphic)
}
/// Between looks at a pending row.
const POLL: Duration = Duration::from_millis(25);
/// What a 409 in flight tells the client to wait, in seconds.
const RETRY_AFTER: u64 = 1;
/// Past the request timeout, a pending row whose request never finished is free.
const ABANDON_MARGIN: Duration = Duration::from_secs(30);

/// How the layer is set up: from the backend's settings.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Config {
    /// How long a key and its response are kept.
    pub ttl: Duration,
    /// How long a repeat waits for the first request to finish before a 409.
    pub wait: Duration,
    /// How old a pending row must be to count as abandoned.
    pub abandoned_after: Duration,
}

impl Config {
    pub(crate) fn new(ttl: Duration, wait: Duration, request_timeout: Duration) -> Self {
        Self {
            ttl,
            wait,
            abandoned_after: request_timeout + ABANDON_MARGIN,
        }
    }
}

/// The layer: writes with a key run once; everything else passes through.
pub(crate) async fn layer(
    State((state, config)): State<(BackendState, Config)>,
    request: Request,
    next: Next,
) -> Response {
    match run(&state, config, request, next).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn run(
    state: &BackendState,
    config: Config,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let is_write = matches!(
        *request.method(),
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    if !is_write {
        return Ok(next.run(request).await);
    }
    let Some(key) = key_of(request.headers())? else {
        return Ok(next.run(request).await);
    };
    let (mut parts, body) = request.into_parts();
    // Who asks decides whose key it is; a caller who may not write is refused here,
    // as the handler would refuse it, and nothing is stored.
    let writer = Writer::from_request_parts(&mut parts, state).await?;
    let limit = parts
        .extensions
        .get::<BodyLimit>()
        .map_or(usize::MAX, |limit| limit.0);
    let bytes = read_body(body, limit).await?;
    let claim = Claim {
        subject: writer.principal.subject.clone(),
        client: writer
            .principal
            .client_id
            .clone()
            .or_else(|| writer.principal.actors.first().cloned())
            .unwrap_or_default(),
        key,
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_owned(), ToString::to_string),
        body_hash: hex::encode(Sha256::digest(&bytes)),
    };
    let store = Store {
        db: &state.db,
        config,
    };
    let created_at = match store.claim(&claim).await? {
        Outcome::Run(created_at) => created_at,
        Outcome::Replay(response) => return Ok(response),
    };

    let mut response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    if response.status().is_server_error() {
        // Nothing was done, or nothing we can vouch for: a retry runs again.
        if let Err(error) = store.remove(&claim, &created_at).await {
            response.extensions_mut().insert(ErrorDetail::new(
                "releasing an idempotency key after a failed write",
                error,
            ));
        }
        return Ok(response);
    }
    let (mut parts, body) = response.into_parts();
    let body = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(body) => body,
        Err(error) => {
            let _ = store.remove(&claim, &created_at).await;
            return Err(ApiError::Internal(
                anyhow::Error::new(error).context("reading a write's response to store it"),
            ));
        }
    };
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Err(error) = store
        .complete(&claim, &created_at, parts.status, content_type, &body)
        .await
    {
        // The write is done; its answer goes out even though it could not be kept.
        parts.extensions.insert(ErrorDetail::new(
            "storing a write's response under its idempotency key",
            error,
        ));
    }
    Ok(Response::from_parts(parts, Body::from(body)))
}

/// The key, if one was sent; a malformed one is a 400 naming the header.
fn key_of(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let mut values = headers.get_all(&IDEMPOTENCY_KEY).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    let invalid = |why: &str| ApiError::InvalidRequest {
        message: format!(
            "the Idempotency-Key header {why}: send one key of 1 to {MAX_KEY_LEN} visible ASCII characters"
        ),
        details: Some(json!({ "header": "Idempotency-Key" })),
    };
    if values.next().is_some() {
        return Err(invalid("is sent more than once"));
    }
    let bytes = value.as_bytes();
    if !is_usable_key(bytes) {
        return Err(invalid(if bytes.is_empty() {
            "is empty"
        } else if bytes.len() > MAX_KEY_LEN {
            "is too long"
        } else {
            "has characters that are not visible ASCII"
        }));
    }
    Ok(Some(String::from_utf8_lossy(bytes).into_owned()))
}

async fn read_body(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    use http_body_util::BodyExt;
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => {
            Err(ApiError::PayloadTooLarge { limit })
        }
        Err(error) => Err(ApiError::invalid(format!(
            "the request body could not be read: {error}"
        ))),
    }
}

/// One write's key and what identifies the request made with it.
struct Claim {
    subject: String,
    client: String,
    key: String,
    method: String,
    path: String,
    body_hash: String,
}

/// The row another request with the same key left.
struct Stored {
    method: String,
    path: String,
    body_hash: String,
    status: Option<i64>,
    content_type: Option<String>,
    body: Option<String>,
    created_at: String,
    expires_at: String,
}

enum Outcome {
    /// This request holds the key (its row's `created_at`): run the write.
    Run(String),
    /// The answer, without running anything.
    Replay(Response),
}

struct Store<'a> {
    db: &'a Db,
    config: Config,
}

impl Store<'_> {
    /// Claims the key, or answers from (or about) the row that holds it.
    async fn claim(&self, claim: &Claim) -> Result<Outcome, ApiError> {
        let deadline = Instant::now() + self.config.wait;
        self.purge().await?;
        loop {
            let now = Utc::now();
            let created_at = canonical(now);
            if self.insert(claim, &created_at, now).await? {
                return Ok(Outcome::Run(created_at));
            }
            let Some(stored) = self.load(claim).await? else {
                // Released or purged since the insert failed: try again.
                continue;
            };
            if stored.method != claim.method
                || stored.path != claim.path
                || stored.body_hash != claim.body_hash
            {
                let what = if stored.method == claim.method && stored.path == claim.path {
                    "with another body"
                } else {
                    "on another request"
                };
                return Err(ApiError::IdempotencyKeyReused(format!(
                    "this Idempotency-Key was used {what} ({} {}); a key names one request: send a new key for a different one",
                    stored.method, stored.path
                )));
            }
            let expired = parse_canonical(&stored.expires_at).is_none_or(|at| at <= now);
            let abandoned = stored.status.is_none()
                && parse_canonical(&stored.created_at)
                    .is_none_or(|at| at + self.config.abandoned_after <= now);
            if expired || abandoned {
                self.remove(claim, &stored.created_at).await?;
                continue;
            }
            if let Some(status) = stored.status {
                return Ok(Outcome::Replay(replay(status, stored)?));
            }
            if Instant::now() >= deadline {
                return Err(ApiError::IdempotencyKeyInFlight {
                    message: format!(
                        "a request with this Idempotency-Key is still running after {:?}; try again shortly for its response",
                        self.config.wait
                    ),
                    retry_after: RETRY_AFTER,
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Deletes every expired key.
    async fn purge(&self) -> Result<(), sqlx::Error> {
        sqlx::query("DELETE FROM idempotency_keys WHERE expires_at <= $1")
            .bind(canonical(Utc::now()))
            .execute(self.db.pool())
            .await
            .map(|_| ())
    }

    /// True when this request now holds the key.
    async fn insert(
        &self,
        claim: &Claim,
        created_at: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, sqlx::Error> {
        let ttl = chrono::Duration::from_std(self.config.ttl).unwrap_or(chrono::Duration::MAX);
        let expires_at = now
            .checked_add_signed(ttl)
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        let result = sqlx::query(
            "INSERT INTO idempotency_keys (subject, client, idem_key, method, path, body_hash, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&claim.subject)
        .bind(&claim.client)
        .bind(&claim.key)
        .bind(&claim.method)
        .bind(&claim.path)
        .bind(&claim.body_hash)
        .bind(created_at)
        .bind(canonical(expires_at))
        .execute(self.db.pool())
        .await;
        match result {
            Ok(_) => Ok(true),
            Err(error) if is_unique_violation(&error) => Ok(false),
            Err(error) => Err(error),
        }
    }

    async fn load(&self, claim: &Claim) -> Result<Option<Stored>, sqlx::Error> {
        type Row = (
            String,
            String,
            String,
            Option<i64>,
            Option<String>,
            Option<String>,
            String,
            String,
        );
        let row: Option<Row> = sqlx::query_as(
            "SELECT method, path, body_hash, status, content_type, response_body, created_at, expires_at \
             FROM idempotency_keys WHERE subject = $1 AND client = $2 AND idem_key = $3",
        )
        .bind(&claim.subject)
        .bind(&claim.client)
        .bind(&claim.key)
        .fetch_optional(self.db.pool())
        .await?;
        Ok(row.map(
            |(method, path, body_hash, status, content_type, body, created_at, expires_at)| {
                Stored {
                    method,
                    path,
                    body_hash,
                    status,
                    content_type,
                    body,
                    created_at,
                    expires_at,
                }
            },
        ))
    }

    /// Deletes the row made at `created_at` (not one a later claim made since).
    async fn remove(&self, claim: &Claim, created_at: &str) -> Result<(), sqlx::Error> {
        sqlx::query(
            "DELETE FROM idempotency_keys \
             WHERE subject = $1 AND client = $2 AND idem_key = $3 AND created_at = $4",
        )
        .bind(&claim.subject)
        .bind(&claim.client)
        .bind(&claim.key)
        .bind(created_at)
        .execute(self.db.pool())
        .await
        .map(|_| ())
    }

    async fn complete(
        &self,
        claim: &Claim,
        created_at: &str,
        status: StatusCode,
        content_type: Option<String>,
        body: &Bytes,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "UPDATE idempotency_keys SET status = $1, content_type = $2, response_body = $3 \
             WHERE subject = $4 AND client = $5 AND idem_key = $6 AND created_at = $7",
        )
        .bind(i64::from(status.as_u16()))
        .bind(content_type)
        .bind(String::from_utf8_lossy(body).into_owned())
        .bind(&claim.subject)
        .bind(&claim.client)
        .bind(&claim.key)
        .bind(created_at)
        .execute(self.db.pool())
        .await
        .map(|_| ())
    }
}

/// The stored answer, marked as replayed.
fn replay(status: i64, stored: Stored) -> Result<Response, ApiError> {
    let status = u16::try_from(status)
        .ok()
        .and_then(|s| StatusCode::from_u16(s).ok())
        .ok_or_else(|| {
            ApiError::Internal(anyhow::anyhow!(
                "a stored idempotent response has the status {status}"
            ))
        })?;
    let mut response = (status, stored.body.unwrap_or_default()).into_response();
    let headers = response.headers_mut();
    match stored
        .content_type
        .as_deref()
        .and_then(|v| HeaderValue::from_str(v).ok())
    {
        Some(content_type) => {
            headers.insert(header::CONTENT_TYPE, content_type);
        }
        None => {
            headers.remove(header::CONTENT_TYPE);
        }
    }
    headers.insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&[u8]]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(
                IDEMPOTENCY_KEY,
                HeaderValue::from_bytes(value).expect("a header value"),
            );
        }
        headers
    }

    #[test]
    fn a_key_is_one_to_255_visible_ascii_characters() {
        assert_eq!(key_of(&HeaderMap::new()).ok(), Some(None));
        assert_eq!(
            key_of(&headers(&[b"a-1_B.c:~"])).ok(),
            Some(Some("a-1_B.c:~".to_owned()))
        );
        let longest = "k".repeat(255);
        assert!(key_of(&headers(&[longest.as_bytes()])).is_ok());
        let too_long = "k".repeat(256);
        for bad in [
            &b""[..],
            b"with space",
            b"tab\there",
            "caf\u{e9}".as_bytes(),
            too_long.as_bytes(),
        ] {
            let error = key_of(&headers(&[bad])).expect_err("a bad key");
            assert!(error.to_string().contains("Idempotency-Key"), "{error}");
        }
        assert!(key_of(&headers(&[b"one", b"two"])).is_err());
    }

    /// The rule the MCP role applies to a caller's `_meta` key before passing it on.
    #[test]
    fn a_usable_key_is_one_to_255_visible_ascii_characters() {
        assert!(is_usable_key(b"mtd-0123abcd"));
        assert!(is_usable_key(b"k"));
        assert!(is_usable_key("k".repeat(255).as_bytes()));
        assert!(!is_usable_key(b""));
        assert!(!is_usable_key("k".repeat(256).as_bytes()));
        assert!(!is_usable_key(b"two words"));
        assert!(!is_usable_key(b"tab\there"));
        assert!(!is_usable_key("cl\u{e9}".as_bytes()));
    }
}
