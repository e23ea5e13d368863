//! The browser's login, as a backend-for-frontend: the gateway runs the authorization
//! code + PKCE flow with the identity provider itself, keeps the tokens server-side,
//! and gives the browser only an HttpOnly session cookie. The refresh token is used
//! whenever the access token lapses, so a login revoked at the issuer ends here too.

use std::sync::Arc;

use anyhow::{Context, anyhow};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use sqlx::FromRow;
use tokio::sync::OnceCell;

use crate::auth::{Principal, TokenVerifier};
use crate::db::Db;
use crate::issuer::Issuer;

pub const COOKIE: &str = "maitred_session";
/// A browser login lasts this long at most (the issuer's refresh tokens last as long).
const SESSION_SECS: i64 = 14 * 24 * 3600;
/// An unfinished login (the user never came back from the login page) is forgotten.
const LOGIN_ATTEMPT_SECS: i64 = 15 * 60;
const SCOPES: &str = "openid profile email offline_access chat.read chat.write";

#[derive(Debug, Clone, FromRow)]
pub struct Session {
    pub subject: String,
    pub name: Option<String>,
    pub email: Option<String>,
    pub roles: String,
    pub scopes: String,
    pub refresh_token: Option<String>,
    pub access_expires_at: i64,
    pub csrf_token: String,
    pub expires_at: i64,
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

pub struct Sessions {
    db: Db,
    http: reqwest::Client,
    issuer: Issuer,
    verifier: Arc<TokenVerifier>,
    client_id: String,
    redirect_uri: String,
    resource: String,
    pub secure_cookies: bool,
    endpoints: OnceCell<Endpoints>,
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
    ) -> Self {
        Self {
            db,
            http,
            issuer,
            verifier,
            client_id: "maitred-web".to_owned(),
            redirect_uri: format!("{gateway_url}/login/callback"),
            resource,
            secure_cookies: gateway_url.starts_with("https://"),
            endpoints: OnceCell::new(),
        }
    }

    async fn endpoints(&self) -> anyhow::Result<&Endpoints> {
        self.endpoints
            .get_or_try_init(|| async {
                let mut last = anyhow!("the issuer publishes no metadata");
                for url in self.issuer.metadata_urls() {
                    match self.http.get(&url).send().await {
                        Ok(response) if response.status().is_success() => {
                            let found: Endpoints = response.json().await?;
                            return Ok(Endpoints {
                                // The browser goes to the public authorization endpoint;
                                // the gateway itself talks to the internal token endpoint.
                                authorization_endpoint: found.authorization_endpoint,
                                token_endpoint: self.issuer.internalize(&found.token_endpoint),
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
    /// the browser to.
    pub async fn begin(&self, return_to: &str) -> anyhow::Result<String> {
        let state = crate::random::token(24);
        let verifier = crate::random::token(48);
        let nonce = crate::random::token(16);
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
        Ok(url.into())
    }

    /// Finishes a login: exchanges the code, checks the token, stores the session.
    /// Returns the new cookie value and where to send the browser.
    pub async fn finish(&self, code: &str, state: &str) -> anyhow::Result<(String, String)> {
        let attempt: Option<(String, String)> = sqlx::query_as(
            "DELETE FROM login_attempts WHERE state = $1 AND created_at >= $2 RETURNING code_verifier, return_to",
        )
        .bind(state)
        .bind(now() - LOGIN_ATTEMPT_SECS)
        .fetch_optional(self.db.pool())
        .await?;
        let (verifier, return_to) =
            attempt.ok_or_else(|| anyhow!("this sign-in link is unknown or expired"))?;
        let answer = self
            .token_request(&[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("redirect_uri", &self.redirect_uri),
                ("client_id", &self.client_id),
                ("code_verifier", &verifier),
            ])
            .await?;
        let principal = self.verifier.verify(&answer.access_token).await?;
        let cookie = crate::random::token(32);
        sqlx::query(
            "INSERT INTO browser_sessions (id_hash, subject, name, email, roles, scopes, refresh_token, access_expires_at, csrf_token, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(hash(&cookie))
        .bind(&principal.subject)
        .bind(&principal.name)
        .bind(&principal.email)
        .bind(principal.roles.join(" "))
        .bind(principal.scopes.join(" "))
        .bind(&answer.refresh_token)
        .bind(principal.expires_at)
        .bind(crate::random::token(24))
        .bind(now())
        .bind(now() + SESSION_SECS)
        .execute(self.db.pool())
        .await?;
        tracing::info!(subject = %principal.subject, "browser signed in");
        Ok((cookie, return_to))
    }

    /// The session behind a cookie, refreshed at the issuer when its access token lapsed.
    pub async fn lookup(&self, cookie: &str) -> anyhow::Result<Option<Session>> {
        let id_hash = hash(cookie);
        let session: Option<Session> = sqlx::query_as(
            "SELECT subject, name, email, roles, scopes, refresh_token, access_expires_at, csrf_token, expires_at \
             FROM browser_sessions WHERE id_hash = $1",
        )
        .bind(&id_hash)
        .fetch_optional(self.db.pool())
        .await?;
        let Some(session) = session else {
            return Ok(None);
        };
        if session.expires_at < now() {
            self.end(cookie).await?;
            return Ok(None);
        }
        if session.access_expires_at > now() {
            return Ok(Some(session));
        }
        // The access token lapsed: ask the issuer whether this login still stands.
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
            Err(error) => {
                tracing::info!(subject = %session.subject, error = format!("{error:#}"), "session ended: refresh refused");
                self.end(cookie).await?;
                return Ok(None);
            }
        };
        let principal: Principal = self.verifier.verify(&answer.access_token).await?;
        let access_expires_at = answer
            .expires_in
            .map_or(principal.expires_at, |secs| now() + secs);
        sqlx::query(
            "UPDATE browser_sessions SET refresh_token = COALESCE($1, refresh_token), access_expires_at = $2, roles = $3, scopes = $4 WHERE id_hash = $5",
        )
        .bind(&answer.refresh_token)
        .bind(access_expires_at)
        .bind(principal.roles.join(" "))
        .bind(principal.scopes.join(" "))
        .bind(&id_hash)
        .execute(self.db.pool())
        .await?;
        Ok(Some(Session {
            refresh_token: answer.refresh_token.or(session.refresh_token.clone()),
            access_expires_at,
            roles: principal.roles.join(" "),
            scopes: principal.scopes.join(" "),
            ..session
        }))
    }

    pub async fn end(&self, cookie: &str) -> anyhow::Result<()> {
        sqlx::query("DELETE FROM browser_sessions WHERE id_hash = $1")
            .bind(hash(cookie))
            .execute(self.db.pool())
            .await?;
        Ok(())
    }

    async fn token_request(&self, form: &[(&str, &str)]) -> anyhow::Result<TokenAnswer> {
        let endpoints = self.endpoints().await?;
        let response = self
            .http
            .post(&endpoints.token_endpoint)
            .form(form)
            .send()
            .await
            .context("cannot reach the issuer's token endpoint")?;
        let status = response.status();
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        if !status.is_success() {
            return Err(anyhow!(
                "the issuer refused: {} {}",
                body["error"].as_str().unwrap_or("error"),
                body["error_description"].as_str().unwrap_or_default()
            ));
        }
        serde_json::from_value(body).context("the issuer's token answer")
    }
}
