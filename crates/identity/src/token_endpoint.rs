//! `POST /oauth2/token`: the client_credentials, authorization_code (PKCE),
//! refresh_token and token exchange (RFC 8693) grants.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;

use super::error::OAuthError;
use super::form::Params;
use super::registry::{Client, User};
use super::store::{self, NewRefresh, Redeemed};
use super::tokens::{Extras, Issued, Subject};
use super::{Grant, Identity, SharedIdentity, exchange, pkce, policy};
use maitred_core::http::client_ip::ClientIp;

/// A login (refresh-token family) lasts this long, however often it is refreshed.
const REFRESH_LIFETIME_SECS: i64 = 14 * 24 * 3600;

#[derive(Serialize)]
pub(super) struct TokenResponse {
    access_token: String,
    token_type: &'static str,
    expires_in: u64,
    scope: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    refresh_token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id_token: Option<String>,
    /// RFC 8693 §2.2.1: what a token exchange issued.
    #[serde(skip_serializing_if = "Option::is_none")]
    issued_token_type: Option<&'static str>,
}

impl IntoResponse for TokenResponse {
    fn into_response(self) -> Response {
        (
            [
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
                (header::PRAGMA, HeaderValue::from_static("no-cache")),
            ],
            Json(self),
        )
            .into_response()
    }
}

pub(super) async fn token(
    State(identity): State<SharedIdentity>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    body: Bytes,
) -> Result<TokenResponse, OAuthError> {
    let limits = &identity.rate_limit;
    // A request that fails before its client has proven itself is the address's to
    // pay for, and once that budget is spent the answer is 429 whatever the failure.
    let unproven = |error: OAuthError| match limits.address(ip) {
        Ok(()) => error,
        Err(limited) => limited,
    };
    let params = Params::from_form(&headers, &body).map_err(unproven)?;
    let (client, by_secret) =
        authenticate_client(&identity, ip, &headers, &params).map_err(unproven)?;
    // Behind one address (the gateway, a proxy) many share its budget, and anyone
    // there can spend it; a client that proved itself with its secret spends its own.
    if by_secret {
        limits.client(&client.id)?;
    } else {
        limits.address(ip)?;
    }
    let grant_type = params.required("grant_type")?;
    let grant = match grant_type {
        "client_credentials" => Grant::ClientCredentials,
        "authorization_code" => Grant::AuthorizationCode,
        "refresh_token" => Grant::RefreshToken,
        exchange::GRANT_TYPE => Grant::TokenExchange,
        other => {
            return Err(OAuthError::unsupported_grant_type(format!(
                "grant_type {other} is not supported; use client_credentials, authorization_code, refresh_token or {}",
                exchange::GRANT_TYPE
            )));
        }
    };
    if !client.allows(grant) {
        return Err(OAuthError::unauthorized_client(format!(
            "client {} may not use the {grant_type} grant",
            client.id
        )));
    }
    let response = match grant {
        Grant::ClientCredentials => client_credentials(&identity, client, &params)?,
        Grant::AuthorizationCode => authorization_code(&identity, client, &params).await?,
        Grant::RefreshToken => refresh_token(&identity, client, &params).await?,
        Grant::TokenExchange => {
            let exchanged = exchange::token_exchange(&identity, client, &params).await?;
            TokenResponse {
                access_token: exchanged.access.token,
                token_type: "Bearer",
                expires_in: exchanged.access.expires_in,
                scope: exchanged.scopes.join(" "),
                refresh_token: None,
                id_token: None,
                issued_token_type: Some(exchange::ACCESS_TOKEN_TYPE),
            }
        }
    };
    tracing::info!(client_id = %client.id, grant = grant_type, "token issued");
    Ok(response)
}

/// client_secret_basic, client_secret_post, or (public clients) just `client_id`.
/// Returns the client and whether it proved itself with its secret.
fn authenticate_client<'a>(
    identity: &'a SharedIdentity,
    ip: std::net::IpAddr,
    headers: &HeaderMap,
    params: &Params,
) -> Result<(&'a Client, bool), OAuthError> {
    let basic = basic_credentials(headers)?;
    let posted_secret = params.one("client_secret")?;
    let (client_id, secret, via_basic) = match (basic, posted_secret) {
        (Some(_), Some(_)) => {
            return Err(OAuthError::invalid_request(
                "use one client authentication method, not both Basic and client_secret",
            ));
        }
        (Some((id, secret)), None) => {
            if params
                .one("client_id")?
                .is_some_and(|form_id| form_id != id)
            {
                return Err(OAuthError::invalid_request(
                    "client_id differs from the Basic credentials",
                ));
            }
            (id, Some(secret), true)
        }
        (None, secret) => {
            let id = params.one("client_id")?.ok_or_else(|| {
                OAuthError::invalid_client("no client authentication was given", false)
            })?;
            (id.to_owned(), secret.map(str::to_owned), false)
        }
    };
    let unknown = || OAuthError::invalid_client("unknown client or wrong secret", via_basic);
    let client = identity.registry.client(&client_id).ok_or_else(unknown)?;
    match secret {
        Some(secret) => {
            identity.rate_limit.may_check_secret(&client.id, ip)?;
            if client.secret_matches(&secret) {
                Ok((client, true))
            } else {
                if !client.is_public() {
                    identity.rate_limit.wrong_secret(&client.id, ip);
                }
                Err(unknown())
            }
        }
        None if client.is_public() => Ok((client, false)),
        None => Err(OAuthError::invalid_client(
            format!("client {client_id} must authenticate with its secret"),
            via_basic,
        )),
    }
}

/// RFC 6749 §2.3.1: id and secret are form-urlencoded before base64.
fn basic_credentials(headers: &HeaderMap) -> Result<Option<(String, String)>, OAuthError> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let malformed = || OAuthError::invalid_client("malformed Basic credentials", true);
    let value = value.to_str().map_err(|_| malformed())?;
    let Some((scheme, encoded)) = value.split_once(' ') else {
        return Err(malformed());
    };
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(malformed());
    }
    let decoded = STANDARD.decode(encoded.trim()).map_err(|_| malformed())?;
    let decoded = String::from_utf8(decoded).map_err(|_| malformed())?;
    let (id, secret) = decoded.split_once(':').ok_or_else(malformed)?;
    let unescape = |s: &str| {
        url::form_urlencoded::parse(format!("x={s}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    Ok(Some((unescape(id), unescape(secret))))
}

fn client_credentials(
    identity: &SharedIdentity,
    client: &Client,
    params: &Params,
) -> Result<TokenResponse, OAuthError> {
    let scopes = policy::scopes(params.one("scope")?, client)?;
    let audience = policy::audience(&params.all("resource"), client)?;
    let access = identity
        .tokens
        .access_token(&Subject::Client, &client.id, &audience, &scopes)?;
    Ok(TokenResponse {
        access_token: access.token,
        token_type: "Bearer",
        expires_in: access.expires_in,
        scope: scopes.join(" "),
        refresh_token: None,
        id_token: None,
        issued_token_type: None,
    })
}

async fn authorization_code(
    identity: &SharedIdentity,
    client: &Client,
    params: &Params,
) -> Result<TokenResponse, OAuthError> {
    let code = params.required("code")?;
    let redirect_uri = params.required("redirect_uri")?;
    let verifier = params.one("code_verifier")?;
    let grant = match store::redeem_code(&identity.db, code).await? {
        Redeemed::Fresh(grant) => grant,
        Redeemed::Reused(grant) => {
            // RFC 6749 §4.1.2: a replayed code revokes what it was exchanged for.
            store::revoke_family(&identity.db, &grant.family_id).await?;
            tracing::warn!(client_id = %client.id, "authorization code replayed; its tokens are revoked");
            return Err(OAuthError::invalid_grant(
                "the authorization code was already used",
            ));
        }
        Redeemed::Unknown => {
            return Err(OAuthError::invalid_grant("unknown authorization code"));
        }
    };
    if grant.client_id != client.id {
        return Err(OAuthError::invalid_grant(
            "the authorization code was issued to another client",
        ));
    }
    if grant.expires_at < chrono::Utc::now().timestamp() {
        return Err(OAuthError::invalid_grant(
            "the authorization code has expired",
        ));
    }
    if grant.redirect_uri != redirect_uri {
        return Err(OAuthError::invalid_grant(
            "redirect_uri differs from the authorization request",
        ));
    }
    match (&grant.code_challenge, verifier) {
        (Some(challenge), Some(verifier)) if pkce::verify(verifier, challenge) => {}
        (Some(_), Some(_)) => {
            return Err(OAuthError::invalid_grant(
                "code_verifier does not match the code_challenge",
            ));
        }
        (Some(_), None) => {
            return Err(OAuthError::invalid_request("code_verifier is missing"));
        }
        // A verifier for a code that had no challenge proves nothing: accepting it would
        // let a PKCE-less (downgraded) authorization pass for a PKCE one.
        (None, Some(_)) => {
            return Err(OAuthError::invalid_grant(
                "a code_verifier was sent, but the authorization request had no code_challenge",
            ));
        }
        // Every code is issued with a challenge now; one without is from before that.
        (None, None) => {
            return Err(OAuthError::invalid_grant(
                "the authorization code was issued without PKCE; sign in again",
            ));
        }
    }
    let audience =
        policy::granted_audience(&params.all("resource"), grant.resource.as_deref(), client)?;
    let scopes: Vec<String> = grant.scope.split_whitespace().map(str::to_owned).collect();
    let (access, user) = person_access(
        identity,
        client,
        &grant.subject,
        &grant.family_id,
        &audience,
        &scopes,
    )?;
    let now = chrono::Utc::now().timestamp();
    let refresh_token = if client.allows(Grant::RefreshToken) {
        let token = maitred_core::random::token(32);
        store::insert_refresh(
            &identity.db,
            &token,
            &NewRefresh {
                family_id: &grant.family_id,
                client_id: &client.id,
                subject: &user.username,
                scope: &grant.scope,
                resource: Some(&audience),
                expires_at: now + REFRESH_LIFETIME_SECS,
            },
        )
        .await?;
        Some(token)
    } else {
        None
    };
    let id_token = if scopes.iter().any(|s| s == "openid") {
        Some(
            identity
                .tokens
                .id_token(user, &client.id, grant.nonce.as_deref(), now)?,
        )
    } else {
        None
    };
    Ok(TokenResponse {
        access_token: access.token,
        token_type: "Bearer",
        expires_in: access.expires_in,
        scope: grant.scope,
        refresh_token,
        id_token,
        issued_token_type: None,
    })
}

/// An access token for the person `subject`, for `client`, and the person (who must
/// still exist). `sid` ties the token to its login (`family_id`), so a token exchange
/// refuses it once the login is revoked.
fn person_access<'i>(
    identity: &'i Identity,
    client: &Client,
    subject: &str,
    family_id: &str,
    audience: &str,
    scopes: &[String],
) -> Result<(Issued, &'i User), OAuthError> {
    let user = identity
        .registry
        .user(subject)
        .ok_or_else(|| OAuthError::invalid_grant("the user no longer exists"))?;
    let access = identity.tokens.access_token_with(
        &Subject::User(user),
        &client.id,
        audience,
        scopes,
        &Extras {
            sid: Some(family_id),
            ..Extras::default()
        },
    )?;
    Ok((access, user))
}

async fn refresh_token(
    identity: &SharedIdentity,
    client: &Client,
    params: &Params,
) -> Result<TokenResponse, OAuthError> {
    let presented = params.required("refresh_token")?;
    // Check first, then spend: a request refused here (another client's token, a
    // scope or resource beyond the grant) leaves the token as it was, so the next
    // honest refresh still works instead of looking like a replay.
    let Some(stored) = store::find_refresh(&identity.db, presented).await? else {
        return Err(OAuthError::invalid_grant("unknown refresh token"));
    };
    let grant = stored.grant;
    if stored.used {
        return Err(replayed(identity, client, &grant).await?);
    }
    if grant.client_id != client.id {
        return Err(OAuthError::invalid_grant(
            "the refresh token was issued to another client",
        ));
    }
    if grant.revoked != 0 || store::family_revoked(&identity.db, &grant.family_id).await? {
        return Err(OAuthError::invalid_grant(
            "the refresh token has been revoked",
        ));
    }
    let now = chrono::Utc::now().timestamp();
    if grant.expires_at < now {
        return Err(OAuthError::invalid_grant("the refresh token has expired"));
    }
    let allowed: Vec<String> = grant.scope.split_whitespace().map(str::to_owned).collect();
    let scopes = policy::scopes_within(params.one("scope")?, &allowed, &client.id)?;
    let audience =
        policy::granted_audience(&params.all("resource"), grant.resource.as_deref(), client)?;
    let (access, _) = person_access(
        identity,
        client,
        &grant.subject,
        &grant.family_id,
        &audience,
        &scopes,
    )?;
    // Every check passed: spend the token and store its successor at once. A
    // concurrent refresh of the same token that spent it first makes this one a
    // replay, so exactly one of them gets tokens.
    let next = maitred_core::random::token(32);
    let rotated = store::rotate_refresh(
        &identity.db,
        presented,
        &next,
        &NewRefresh {
            family_id: &grant.family_id,
            client_id: &client.id,
            subject: &grant.subject,
            scope: &grant.scope,
            resource: Some(&audience),
            expires_at: grant.expires_at,
        },
    )
    .await?;
    if !rotated {
        return Err(replayed(identity, client, &grant).await?);
    }
    Ok(TokenResponse {
        access_token: access.token,
        token_type: "Bearer",
        expires_in: access.expires_in,
        scope: scopes.join(" "),
        refresh_token: Some(next),
        id_token: None,
        issued_token_type: None,
    })
}

/// A spent refresh token presented again is a sign of theft: every token of its login
/// (family) is revoked, and the answer says so.
async fn replayed(
    identity: &SharedIdentity,
    client: &Client,
    grant: &store::RefreshGrant,
) -> Result<OAuthError, OAuthError> {
    let revoked = store::revoke_family(&identity.db, &grant.family_id).await?;
    tracing::warn!(
        client_id = %client.id,
        subject = %grant.subject,
        revoked,
        "refresh token reused; revoking its whole family"
    );
    Ok(OAuthError::invalid_grant(
        "the refresh token was already used; every token of this login is revoked, sign in again",
    ))
}
