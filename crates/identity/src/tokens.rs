//! What the issuer signs: access tokens for one audience, and OIDC ID tokens; and
//! the check of a token of its own that comes back (userinfo, token exchange).

use std::time::Duration;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation, decode, decode_header};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::keys::KeyRing;
use super::registry::User;
use maitred_core::auth::{SUBJECT_CLIENT, SUBJECT_PERSON};

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
    /// Who `sub` is, `client` or `person`, so a resource server never has to guess
    /// from the roles (a person may have none): a delegated token's `sub` is not its
    /// `client_id` whoever it is about.
    subject_type: &'static str,
    /// RFC 8693 §4.1: the clients acting for `sub`, the newest outermost.
    #[serde(skip_serializing_if = "Option::is_none")]
    act: Option<&'a Actor>,
    /// The login (refresh-token family) a person's token descends from, so a token
    /// exchange can refuse it once that login is revoked.
    #[serde(skip_serializing_if = "Option::is_none")]
    sid: Option<&'a str>,
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
    /// Another client, for which the token's client acts: a client-credentials
    /// token (a curl user's) exchanged by the gateway has no person behind it.
    OtherClient(&'a str),
}

/// An actor of RFC 8693 §4.1: who acts, and for a second hop, for whom it acted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Actor {
    pub sub: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub act: Option<Box<Actor>>,
}

impl Actor {
    /// How many clients the chain names.
    pub(super) fn depth(&self) -> usize {
        1 + self.act.as_deref().map_or(0, Actor::depth)
    }
}

/// What an access token says beyond its subject, audience and scopes.
#[derive(Default)]
pub(super) struct Extras<'a> {
    pub sid: Option<&'a str>,
    pub act: Option<&'a Actor>,
    /// An expiry sooner than the configured lifetime (delegated tokens); never later.
    pub expires_at: Option<i64>,
}

/// Why a token of ours that came back was refused.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refused {
    Expired,
    /// Not ours, not signed by a key of ours, malformed, or not yet valid.
    Invalid,
}

pub(super) struct Issued {
    pub token: String,
    pub expires_in: u64,
}

pub(super) struct TokenIssuer {
    pub issuer: String,
    pub keys: KeyRing,
    pub access_ttl: Duration,
    /// A token exchange's token lives at most this long.
    pub delegated_ttl: Duration,
}

impl TokenIssuer {
    pub(super) fn access_token(
        &self,
        subject: &Subject<'_>,
        client_id: &str,
        audience: &str,
        scopes: &[String],
    ) -> anyhow::Result<Issued> {
        self.access_token_with(subject, client_id, audience, scopes, &Extras::default())
    }

    pub(super) fn access_token_with(
        &self,
        subject: &Subject<'_>,
        client_id: &str,
        audience: &str,
        scopes: &[String],
        extras: &Extras<'_>,
    ) -> anyhow::Result<Issued> {
        let now = chrono::Utc::now().timestamp();
        let ttl = i64::try_from(self.access_ttl.as_secs()).unwrap_or(i64::MAX / 2);
        let exp = extras.expires_at.map_or(now + ttl, |at| at.min(now + ttl));
        let (user, sub) = match subject {
            Subject::User(user) => (Some(*user), user.username.as_str()),
            Subject::Client => (None, client_id),
            Subject::OtherClient(id) => (None, *id),
        };
        let subject_type = if user.is_some() {
            SUBJECT_PERSON
        } else {
            SUBJECT_CLIENT
        };
        let claims = AccessClaims {
            iss: &self.issuer,
            sub,
            aud: audience,
            exp,
            iat: now,
            nbf: now,
            jti: uuid::Uuid::now_v7().to_string(),
            scope: scopes.join(" "),
            client_id,
            subject_type,
            act: extras.act,
            sid: extras.sid,
            roles: user.map_or_else(Vec::new, |u| u.roles.iter().map(|r| r.as_str()).collect()),
            name: user.map(|u| u.name.as_str()),
            email: user.and_then(|u| u.email.as_deref()),
            preferred_username: user.map(|u| u.username.as_str()),
        };
        Ok(Issued {
            token: self.keys.sign(&claims)?,
            expires_in: u64::try_from(exp - now).unwrap_or(0),
        })
    }

    /// Checks a token this issuer signed: signature by a key of ours, `iss`, expiry
    /// (no leeway: an expired token is not traded for a fresh one), any audience.
    pub(super) fn verify<C: DeserializeOwned>(&self, token: &str) -> Result<C, Refused> {
        let header = decode_header(token).map_err(|_| Refused::Invalid)?;
        if header.alg != Algorithm::EdDSA {
            return Err(Refused::Invalid);
        }
        let key = header
            .kid
            .as_deref()
            .and_then(|kid| self.keys.decoding_key(kid))
            .ok_or(Refused::Invalid)?;
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.set_issuer(&[&self.issuer]);
        validation.validate_aud = false;
        validation.validate_nbf = true;
        validation.leeway = 0;
        match decode::<C>(token, &key, &validation) {
            Ok(data) => Ok(data.claims),
            Err(error) if *error.kind() == ErrorKind::ExpiredSignature => Err(Refused::Expired),
            Err(_) => Err(Refused::Invalid),
        }
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
