//! What the issuer signs: access tokens for one audience, and OIDC ID tokens.

use std::time::Duration;

use serde::Serialize;

use super::keys::KeyRing;
use super::registry::User;

#[derive(Debug, Serialize)]
struct AccessClaims<'a> {
    iss: &'a str,
    sub: &'a str,
    aud: &'a str,
    exp: i64,
    iat: i64,
    nbf: i64,
    jti: String,
    scope: String,
    client_id: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    roles: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    email: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    preferred_username: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct IdClaims<'a> {
    iss: &'a str,
    sub: &'a str,
    aud: &'a str,
    exp: i64,
    iat: i64,
    auth_time: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    nonce: Option<&'a str>,
    name: &'a str,
    preferred_username: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    email: Option<&'a str>,
    roles: Vec<&'static str>,
}

/// Who a token is about: a user (authorization code) or the client itself.
pub(super) enum Subject<'a> {
    User(&'a User),
    Client,
}

pub(super) struct Issued {
    pub token: String,
    pub expires_in: u64,
}

pub(super) struct TokenIssuer {
    pub issuer: String,
    pub keys: KeyRing,
    pub access_ttl: Duration,
}

impl TokenIssuer {
    pub(super) fn access_token(
        &self,
        subject: &Subject<'_>,
        client_id: &str,
        audience: &str,
        scopes: &[String],
    ) -> anyhow::Result<Issued> {
        let now = chrono::Utc::now().timestamp();
        let ttl = i64::try_from(self.access_ttl.as_secs()).unwrap_or(i64::MAX / 2);
        let user = match subject {
            Subject::User(user) => Some(*user),
            Subject::Client => None,
        };
        let claims = AccessClaims {
            iss: &self.issuer,
            sub: user.map_or(client_id, |u| u.username.as_str()),
            aud: audience,
            exp: now + ttl,
            iat: now,
            nbf: now,
            jti: uuid::Uuid::now_v7().to_string(),
            scope: scopes.join(" "),
            client_id,
            roles: user.map_or_else(Vec::new, |u| u.roles.iter().map(|r| r.as_str()).collect()),
            name: user.map(|u| u.name.as_str()),
            email: user.and_then(|u| u.email.as_deref()),
            preferred_username: user.map(|u| u.username.as_str()),
        };
        Ok(Issued {
            token: self.keys.sign(&claims)?,
            expires_in: self.access_ttl.as_secs(),
        })
    }

    pub(super) fn id_token(
        &self,
        user: &User,
        client_id: &str,
        nonce: Option<&str>,
        auth_time: i64,
    ) -> anyhow::Result<String> {
        let now = chrono::Utc::now().timestamp();
        self.keys.sign(&IdClaims {
            iss: &self.issuer,
            sub: &user.username,
            aud: client_id,
            exp: now + 3600,
            iat: now,
            auth_time,
            nonce,
            name: &user.name,
            preferred_username: &user.username,
            email: user.email.as_deref(),
            roles: user.roles.iter().map(|r| r.as_str()).collect(),
        })
    }
}
