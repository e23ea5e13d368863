//! `/userinfo`: the signed-in user's claims, for a token of ours that carries `openid`.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use jsonwebtoken::{Algorithm, Validation, decode, decode_header};
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
    let invalid = || OAuthError::invalid_token("the access token is invalid or expired");
    let header = decode_header(token).map_err(|_| invalid())?;
    if header.alg != Algorithm::EdDSA {
        return Err(invalid());
    }
    let key = header
        .kid
        .as_deref()
        .and_then(|kid| identity.tokens.keys.decoding_key(kid))
        .ok_or_else(invalid)?;
    let mut validation = Validation::new(Algorithm::EdDSA);
    validation.set_issuer(&[identity.issuer()]);
    // Any audience of ours: userinfo belongs to the issuer, not to one resource.
    validation.validate_aud = false;
    validation.leeway = 30;
    let claims = decode::<Claims>(token, &key, &validation)
        .map_err(|_| invalid())?
        .claims;
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
