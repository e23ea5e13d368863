//! The browser's login, as a backend-for-frontend: the gateway runs the authorization
//! code + PKCE flow with the identity provider itself, keeps the tokens server-side,
//! and gives the browser only an HttpOnly session cookie. The refresh token is used
//! whenever the access token lapses, so a login revoked at the issuer ends here too.
//!
//! Both tokens are sealed at rest with the keys that seal connected accounts
//! (`MAITRED_ACCOUNT_KEYS`), bound to their session's row: a database dump or a
//! backup holds no usable token, and a sealed value copied into another session's
//! row does not open there.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use sqlx::FromRow;
use tokio::sync::OnceCell;

use subtle::ConstantTimeEq;

use super::accounts::{KeyRing, SealedFor, sealed_key_id};
use super::error::GatewayError;
use maitred_core::auth::{Principal, TokenVerifier};
use maitred_core::db::Db;
use maitred_core::issuer::Issuer;

/// A browser login lasts this long at most (the issuer's refresh tokens last as long).
const SESSION_SECS: i64 = 14 * 24 * 3600;
/// An unfinished login (the user never came back from the login page) is forgotten.
pub const LOGIN_ATTEMPT_SECS: i64 = 15 * 60;
const SCOPES: &str = "openid profile email offline_access chat.read chat.write";
/// Longest one refresh may hold a session's claim; a replica that died holding it
/// frees it after this.
const REFRESH_CLAIM_SECS: i64 = 15;
/// How often a request waiting for another's refresh looks at its result.
const REFRESH_POLL: Duration = Duration::from_millis(50);
/// What a browser is told to wait when the issuer cannot refresh its session now.
const RETRY_REFRESH_SECS: u64 = 5;

/// The cookies of the browser login. Over https they carry the `__Host-` prefix, so
/// the browser refuses them unless they are Secure, host-only and for the whole site:
/// a sibling subdomain cannot plant or overwrite them.
#[derive(Debug, Clone, Copy)]
pub struct CookieNames {
    pub session: &'static str,
    /// Binds a login to the browser that started it (against login CSRF).
    pub login: &'static str,
    pub secure: bool,
}

impl CookieNames {
    pub fn for_url(public_url: &str) -> Self {
        if public_url.starts_with("https://") {
            Self {
                session: "__Host-maitred_session",
                login: "__Host-maitred_login",
                secure: true,
            }
        } else {
            Self {
                session: "maitred_session",
                login: "maitred_login",
                secure: false,
            }
        }
    }
}

/// A session as it is used: its tokens opened.
#[derive(Debug, Clone, FromRow)]
pub struct Session {
    pub subject: String,
    pub name: Option<String>,
    pub email: Option<String>,
    pub roles: String,
    pub scopes: String,
    pub refresh_token: Option<String>,
    /// The person's access token, for tools that act for them (token exchange).
    pub access_token: Option<String>,
    pub access_expires_at: i64,
    pub csrf_token: String,
    pub expires_at: i64,
}

/// Which of a session's tokens a sealed value is: part of what it is bound to.
#[derive(Debug, Clone, Copy)]
enum Held {
    Refresh,
    Access,
}

impl Held {
    fn label(self) -> &'static str {
        match self {
            Self::Refresh => "refresh",
            Self::Access => "access",
        }
    }
}

impl Session {
    pub fn roles(&self) -> Vec<String> {
        self.roles.split_whitespace().map(str::to_owned).collect()
    }
}

#[derive(Deserialize)]
struct Endpoints {
    authorization_endpoint: String,
    token_endpoint: String,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    refresh_token: Option<String>,
    expires_in: Option<i64>,
}

/// Why the issuer did not give a token.
#[derive(Debug, thiserror::Error)]
enum TokenError {
    /// The issuer said no (`invalid_grant` and the like): the login is over.
    #[error("the issuer refused: {0}")]
    Refused(String),
    /// Busy, failing or unreachable: the login may well still stand.
    #[error("the issuer is unavailable: {reason}")]
    Unavailable { reason: String, retry_after: u64 },
}

/// Why a sign-in could not be finished; the browser is told to start again.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error(
        "this sign-in was not started in this browser, or it took too long; start the sign-in again"
    )]
    NotThisBrowser,
    #[error("this sign-in link is unknown, expired or already used; start the sign-in again")]
    UnknownAttempt,
    #[error("the identity provider did not complete the sign-in: {0}")]
    Issuer(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

pub struct Sessions {
    db: Db,
    http: reqwest::Client,
    issuer: Issuer,
    verifier: Arc<TokenVerifier>,
    client_id: String,
    redirect_uri: String,
    resource: String,
    /// The gateway's public URL: sign-ins return only to paths under it.
    pub public_url: String,
    pub cookies: CookieNames,
    endpoints: OnceCell<Endpoints>,
    keys: KeyRing,
    /// Whether the issuer's revocations are in this database (the built-in issuer,
    /// whose database the gateway shares): a bearer token of a revoked login is then
    /// refused at once, not only once it expires.
    sees_revocations: bool,
}

fn hash(value: &str) -> String {
    hex::encode(Sha256::digest(value.as_bytes()))
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

impl Sessions {
    pub fn new(
        db: Db,
        http: reqwest::Client,
        issuer: Issuer,
        verifier: Arc<TokenVerifier>,
        gateway_url: &str,
        resource: String,
        keys: KeyRing,
    ) -> Self {
        Self {
            db,
            http,
            issuer,
            verifier,
            client_id: "maitred-web".to_owned(),
            redirect_uri: format!("{gateway_url}/login/callback"),
            resource,
            public_url: gateway_url.to_owned(),
            cookies: CookieNames::for_url(gateway_url),
            endpoints: OnceCell::new(),
            keys,
            sees_revocations: false,
        }
    }

    /// Refuse bearer tokens of logins the built-in issuer has revoked (it shares this
    /// database).
    #[must_use]
    pub fn seeing_revocations(mut self, sees: bool) -> Self {
        self.sees_revocations = sees;
        self
    }

    /// Whether the login `sid` has been revoked at the issuer (a replayed refresh
    /// token, say). `false` when the issuer's revocations are not visible here.
    pub async fn login_revoked(&self, sid: &str) -> Result<bool, GatewayError> {
        if !self.sees_revocations {
            return Ok(false);
        }
        let (revoked,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM refresh_tokens WHERE family_id = $1 AND revoked = 1",
        )
        .bind(sid)
        .fetch_one(self.db.pool())
        .await?;
        Ok(revoked > 0)
    }

    fn seal(&self, id_hash: &str, held: Held, token: &str) -> String {
        self.keys
            .seal(token.as_bytes(), SealedFor::Session, id_hash, held.label())
    }

    /// A sealed token of the session `id_hash`; `None` if it does not open (a key
    /// dropped from `MAITRED_ACCOUNT_KEYS`, a value moved from another row).
    fn open(&self, id_hash: &str, held: Held, sealed: &str) -> Option<String> {
        let plain = self
            .keys
            .open(sealed, SealedFor::Session, id_hash, held.label())
            .ok()?;
        String::from_utf8(plain).ok()
    }

    /// At start: every session's tokens sealed under the first key, those sealed
    /// under an older one and those an earlier version kept in clear. A session whose
    /// tokens open under no configured key is ended (its person signs in again).
    pub async fn seal_at_rest(&self) -> Result<usize, GatewayError> {
        let current = format!("v1.{}.", self.keys.current());
        let rows: Vec<(String, Option<String>, Option<String>)> = sqlx::query_as(
            "SELECT id_hash, refresh_token, access_token FROM browser_sessions \
             WHERE (refresh_token IS NOT NULL AND refresh_token NOT LIKE $1) \
             OR (access_token IS NOT NULL AND access_token NOT LIKE $1)",
        )
        .bind(format!("{current}%"))
        .fetch_all(self.db.pool())
        .await?;
        let mut count = 0;
        for (id_hash, refresh, access) in rows {
            let reseal = |held: Held, value: Option<String>| -> Result<Option<String>, ()> {
                let Some(value) = value else { return Ok(None) };
                let plain = if sealed_key_id(&value).is_some() && value.starts_with("v1.") {
                    self.open(&id_hash, held, &value).ok_or(())?
                } else {
                    // Kept in clear by an earlier version.
                    value
                };
                Ok(Some(self.seal(&id_hash, held, &plain)))
            };
            match (
                reseal(Held::Refresh, refresh.clone()),
                reseal(Held::Access, access.clone()),
            ) {
                (Ok(new_refresh), Ok(new_access)) => {
                    // Unless a refresh (here or on another replica) wrote new tokens
                    // meanwhile: those are sealed already.
                    let done = sqlx::query(
                        "UPDATE browser_sessions SET refresh_token = $1, access_token = $2 WHERE id_hash = $3 \
                         AND COALESCE(refresh_token, '') = $4 AND COALESCE(access_token, '') = $5",
                    )
                    .bind(new_refresh)
                    .bind(new_access)
                    .bind(&id_hash)
                    .bind(refresh.unwrap_or_default())
                    .bind(access.unwrap_or_default())
                    .execute(self.db.pool())
                    .await?;
                    count += usize::try_from(done.rows_affected()).unwrap_or(0);
                }
                _ => {
                    tracing::warn!(
                        "a browser session's tokens open under no configured key; the session is ended"
                    );
                    sqlx::query("DELETE FROM browser_sessions WHERE id_hash = $1")
                        .bind(&id_hash)
                        .execute(self.db.pool())
                        .await?;
                }
            }
        }
        Ok(count)
    }

    async fn endpoints(&self) -> anyhow::Result<&Endpoints> {
        self.endpoints
            .get_or_try_init(|| async {
                let mut last = anyhow!("the issuer publishes no metadata");
                for url in self.issuer.metadata_urls() {
                    match self.http.get(&url).send().await {
                        Ok(response) if response.status().is_success() => {
                            let found: Endpoints = response.json().await?;
                            // The browser goes to the public authorization endpoint;
                            // the gateway itself talks to the internal token endpoint.
                            // Both carry secrets (a password, a code and the refresh
                            // token): production holds them to https.
                            self.issuer.policy.check(
                                "the issuer's authorization_endpoint",
                                &found.authorization_endpoint,
                            )?;
                            return Ok(Endpoints {
                                authorization_endpoint: found.authorization_endpoint,
                                token_endpoint: self.issuer.endpoint(
                                    "the issuer's token_endpoint",
                                    &found.token_endpoint,
                                )?,
                            });
                        }
                        Ok(response) => last = anyhow!("GET {url}: HTTP {}", response.status()),
                        Err(error) => last = anyhow!("GET {url}: {error}"),
                    }
                }
                Err(last)
            })
            .await
    }

    /// Starts a login: remembers the PKCE verifier and returns the issuer URL to send
    /// the browser to, and the `state` the browser must hold in its login cookie.
    pub async fn begin(&self, return_to: &str) -> anyhow::Result<(String, String)> {
        let state = maitred_core::random::token(24);
        let verifier = maitred_core::random::token(48);
        let nonce = maitred_core::random::token(16);
        let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
        sqlx::query("DELETE FROM login_attempts WHERE created_at < $1")
            .bind(now() - LOGIN_ATTEMPT_SECS)
            .execute(self.db.pool())
            .await?;
        sqlx::query(
            "INSERT INTO login_attempts (state, code_verifier, nonce, return_to, created_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&state)
        .bind(&verifier)
        .bind(&nonce)
        .bind(return_to)
        .bind(now())
        .execute(self.db.pool())
        .await?;
        let endpoints = self.endpoints().await?;
        let mut url = url::Url::parse(&endpoints.authorization_endpoint)
            .context("the issuer's authorization endpoint")?;
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.client_id)
            .append_pair("redirect_uri", &self.redirect_uri)
            .append_pair("scope", SCOPES)
            .append_pair("state", &state)
            .append_pair("nonce", &nonce)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("resource", &self.resource);
        Ok((url.into(), state))
    }

    /// Finishes a login: exchanges the code, checks the token, stores the session.
    /// `bound` is the state from the browser's login cookie: a callback opened in any
    /// other browser than the one that started the login is refused, so nobody can
    /// sign a victim in to the attacker's account by sending them a callback URL.
    /// Returns the new cookie value and where to send the browser.
    pub async fn finish(
        &self,
        code: &str,
        state: &str,
        bound: Option<&str>,
    ) -> Result<(String, String), LoginError> {
        let same_browser =
            bound.is_some_and(|bound| bool::from(bound.as_bytes().ct_eq(state.as_bytes())));
        if !same_browser {
            return Err(LoginError::NotThisBrowser);
        }
        let attempt: Option<(String, String)> = sqlx::query_as(
            "DELETE FROM login_attempts WHERE state = $1 AND created_at >= $2 RETURNING code_verifier, return_to",
        )
        .bind(state)
        .bind(now() - LOGIN_ATTEMPT_SECS)
        .fetch_optional(self.db.pool())
        .await
        .context("reading the login attempt")?;
        let (verifier, return_to) = attempt.ok_or(LoginError::UnknownAttempt)?;
        let answer = self
            .token_request(&[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("redirect_uri", &self.redirect_uri),
                ("client_id", &self.client_id),
                ("code_verifier", &verifier),
            ])
            .await
            .map_err(|e| LoginError::Issuer(e.to_string()))?;
        let principal = self
            .verifier
            .verify(&answer.access_token)
            .await
            .map_err(|e| LoginError::Issuer(e.to_string()))?;
        let cookie = maitred_core::random::token(32);
        let id_hash = hash(&cookie);
        sqlx::query(
            "INSERT INTO browser_sessions (id_hash, subject, name, email, roles, scopes, refresh_token, access_expires_at, csrf_token, created_at, expires_at, access_token) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(&id_hash)
        .bind(&principal.subject)
        .bind(&principal.name)
        .bind(&principal.email)
        .bind(principal.roles.join(" "))
        .bind(principal.scopes.join(" "))
        .bind(
            answer
                .refresh_token
                .as_deref()
                .map(|t| self.seal(&id_hash, Held::Refresh, t)),
        )
        .bind(principal.expires_at)
        .bind(maitred_core::random::token(24))
        .bind(now())
        .bind(now() + SESSION_SECS)
        .bind(self.seal(&id_hash, Held::Access, &answer.access_token))
        .execute(self.db.pool())
        .await
        .context("storing the session")?;
        tracing::info!(subject = ?principal.subject, "browser signed in");
        Ok((cookie, return_to))
    }

    /// The session `id_hash` with its tokens opened. A token that does not open
    /// reads as none: the session then ends at its next refresh.
    async fn read(&self, id_hash: &str) -> Result<Option<Session>, GatewayError> {
        let session: Option<Session> = sqlx::query_as(
            "SELECT subject, name, email, roles, scopes, refresh_token, access_token, access_expires_at, csrf_token, expires_at \
             FROM browser_sessions WHERE id_hash = $1",
        )
        .bind(id_hash)
        .fetch_optional(self.db.pool())
        .await?;
        Ok(session.map(|session| Session {
            refresh_token: session
                .refresh_token
                .as_deref()
                .and_then(|sealed| self.open(id_hash, Held::Refresh, sealed)),
            access_token: session
                .access_token
                .as_deref()
                .and_then(|sealed| self.open(id_hash, Held::Access, sealed)),
            ..session
        }))
    }

    /// The session behind a cookie, refreshed at the issuer when its access token
    /// lapsed. Only a refusal by the issuer ends a session: while the issuer is busy
    /// or down the session stands and the request is answered 503 with Retry-After,
    /// so nobody can sign others out by exhausting the issuer's rate limit.
    pub async fn lookup(&self, cookie: &str) -> Result<Option<Session>, GatewayError> {
        let id_hash = hash(cookie);
        let waited_since = tokio::time::Instant::now();
        loop {
            let Some(session) = self.read(&id_hash).await? else {
                return Ok(None);
            };
            if session.expires_at < now() {
                self.end(cookie).await?;
                return Ok(None);
            }
            if session.access_expires_at > now() {
                return Ok(Some(session));
            }
            if self.claim_refresh(&id_hash).await? {
                return self.refresh(cookie, &id_hash, session).await;
            }
            // Another request (here or on another replica) is refreshing this session:
            // using the same refresh token too would look like theft to the issuer.
            if waited_since.elapsed() > Duration::from_secs(REFRESH_CLAIM_SECS as u64) {
                return Err(GatewayError::SessionUnavailable {
                    retry_after: RETRY_REFRESH_SECS,
                });
            }
            tokio::time::sleep(REFRESH_POLL).await;
        }
    }

    /// Takes this session's refresh for this request, unless another holds it.
    async fn claim_refresh(&self, id_hash: &str) -> Result<bool, GatewayError> {
        let claimed = sqlx::query(
            "UPDATE browser_sessions SET refreshing_until = $1 \
             WHERE id_hash = $2 AND access_expires_at <= $3 \
             AND (refreshing_until IS NULL OR refreshing_until < $3)",
        )
        .bind(now() + REFRESH_CLAIM_SECS)
        .bind(id_hash)
        .bind(now())
        .execute(self.db.pool())
        .await?;
        Ok(claimed.rows_affected() == 1)
    }

    async fn release_refresh(&self, id_hash: &str) -> Result<(), GatewayError> {
        sqlx::query("UPDATE browser_sessions SET refreshing_until = NULL WHERE id_hash = $1")
            .bind(id_hash)
            .execute(self.db.pool())
            .await?;
        Ok(())
    }

    async fn refresh(
        &self,
        cookie: &str,
        id_hash: &str,
        session: Session,
    ) -> Result<Option<Session>, GatewayError> {
        let Some(refresh) = &session.refresh_token else {
            self.end(cookie).await?;
            return Ok(None);
        };
        let answer = match self
            .token_request(&[
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh),
                ("client_id", &self.client_id),
            ])
            .await
        {
            Ok(answer) => answer,
            Err(TokenError::Refused(reason)) => {
                tracing::info!(subject = ?session.subject, reason = ?reason, "session ended: the issuer refused its refresh");
                self.end(cookie).await?;
                return Ok(None);
            }
            Err(TokenError::Unavailable {
                reason,
                retry_after,
            }) => {
                tracing::warn!(subject = ?session.subject, reason = ?reason, "session kept: its refresh failed for now");
                self.release_refresh(id_hash).await?;
                return Err(GatewayError::SessionUnavailable { retry_after });
            }
        };
        let principal: Principal = match self.verifier.verify(&answer.access_token).await {
            Ok(principal) => principal,
            Err(error) => {
                self.release_refresh(id_hash).await?;
                return Err(error.into());
            }
        };
        let access_expires_at = answer
            .expires_in
            .map_or(principal.expires_at, |secs| now() + secs);
        sqlx::query(
            "UPDATE browser_sessions SET refresh_token = COALESCE($1, refresh_token), access_expires_at = $2, roles = $3, scopes = $4, refreshing_until = NULL, access_token = $6 WHERE id_hash = $5",
        )
        .bind(
            answer
                .refresh_token
                .as_deref()
                .map(|t| self.seal(id_hash, Held::Refresh, t)),
        )
        .bind(access_expires_at)
        .bind(principal.roles.join(" "))
        .bind(principal.scopes.join(" "))
        .bind(id_hash)
        .bind(self.seal(id_hash, Held::Access, &answer.access_token))
        .execute(self.db.pool())
        .await?;
        Ok(Some(Session {
            refresh_token: answer.refresh_token.or(session.refresh_token.clone()),
            access_token: Some(answer.access_token),
            access_expires_at,
            roles: principal.roles.join(" "),
            scopes: principal.scopes.join(" "),
            ..session
        }))
    }

    pub async fn end(&self, cookie: &str) -> Result<(), GatewayError> {
        sqlx::query("DELETE FROM browser_sessions WHERE id_hash = $1")
            .bind(hash(cookie))
            .execute(self.db.pool())
            .await?;
        Ok(())
    }

    async fn token_request(&self, form: &[(&str, &str)]) -> Result<TokenAnswer, TokenError> {
        let unavailable = |reason: String| TokenError::Unavailable {
            reason,
            retry_after: RETRY_REFRESH_SECS,
        };
        let endpoints = self
            .endpoints()
            .await
            .map_err(|e| unavailable(format!("{e:#}")))?;
        let response = self
            .http
            .post(&endpoints.token_endpoint)
            .form(form)
            .send()
            .await
            .map_err(|e| unavailable(format!("cannot reach the token endpoint: {e}")))?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(RETRY_REFRESH_SECS)
            .clamp(1, 300);
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        let described = || {
            format!(
                "{} {}",
                body["error"].as_str().unwrap_or("error"),
                body["error_description"].as_str().unwrap_or_default()
            )
        };
        if status == reqwest::StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            return Err(TokenError::Unavailable {
                reason: format!("HTTP {status}: {}", described()),
                retry_after,
            });
        }
        if !status.is_success() {
            return Err(TokenError::Refused(described()));
        }
        serde_json::from_value(body)
            .map_err(|e| unavailable(format!("the issuer's token answer: {e}")))
    }
}
