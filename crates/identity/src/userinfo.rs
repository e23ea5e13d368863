//! `/userinfo`: the signed-in user's claims, for a token of ours that carries `openid`.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{OAuthError, SharedIdentity};

#[derive(Deserialize)]
struct Claims {
    sub: String,
    #[serde(default)]
    scope: String,
}

pub(super) async fn userinfo(
    State(identity): State<SharedIdentity>,
    headers: HeaderMap,
) -> Result<Json<Value>, OAuthError> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .ok_or_else(|| OAuthError::invalid_token("a bearer access token is required"))?;
    let claims: Claims = identity
        .tokens
        .verify(token)
        .map_err(|_| OAuthError::invalid_token("the access token is invalid or expired"))?;
    if !claims.scope.split_whitespace().any(|s| s == "openid") {
        return Err(OAuthError::invalid_token(
            "the access token was not issued with the openid scope",
        ));
    }
    let user = identity
        .registry()
        .user(&claims.sub)
        .ok_or_else(|| OAuthError::invalid_token("the token's subject is not a user"))?;
    Ok(Json(json!({
        "sub": user.username,
        "name": user.name,
        "preferred_username": user.username,
        "email": user.email,
        "roles": user.roles.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
    })))
}
