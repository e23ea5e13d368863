//! axum extractors: `Principal` for any valid token, `Scoped<S, E>` for a valid token
//! that also has scope `S::SCOPE`, rejecting with the role's own error type `E`.

use std::marker::PhantomData;
use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::response::IntoResponse;

use super::error::{AuthError, AuthErrorKind};
use super::verifier::{Principal, TokenVerifier};

pub trait RequiredScope {
    const SCOPE: &'static str;
}

pub struct Scoped<S, E = AuthError> {
    pub principal: Principal,
    _marker: PhantomData<fn() -> (S, E)>,
}

impl<St, S, E> FromRequestParts<St> for Scoped<S, E>
where
    St: Send + Sync,
    Arc<TokenVerifier>: FromRef<St>,
    S: RequiredScope,
    E: From<AuthError> + IntoResponse,
{
    type Rejection = E;

    async fn from_request_parts(parts: &mut Parts, state: &St) -> Result<Self, Self::Rejection> {
        let verifier = Arc::<TokenVerifier>::from_ref(state);
        let principal = authenticate(parts, &verifier).await?;
        verifier.require_scope(&principal, S::SCOPE)?;
        Ok(Self {
            principal,
            _marker: PhantomData,
        })
    }
}

impl<St> FromRequestParts<St> for Principal
where
    St: Send + Sync,
    Arc<TokenVerifier>: FromRef<St>,
{
    type Rejection = AuthError;

    async fn from_request_parts(parts: &mut Parts, state: &St) -> Result<Self, Self::Rejection> {
        let verifier = Arc::<TokenVerifier>::from_ref(state);
        authenticate(parts, &verifier).await
    }
}

/// Verifies once per request (a second extractor reuses the principal) and leaves
/// the principal in the request's extensions.
pub async fn authenticate(
    parts: &mut Parts,
    verifier: &TokenVerifier,
) -> Result<Principal, AuthError> {
    if let Some(principal) = parts.extensions.get::<Principal>() {
        return Ok(principal.clone());
    }
    let token = bearer_token(parts).map_err(|kind| {
        let message = match kind {
            AuthErrorKind::MissingToken => "this request needs a bearer token",
            _ => "the Authorization header must be `Bearer <token>`",
        };
        verifier.error(kind, message)
    })?;
    let principal = verifier.verify(token).await?;
    parts.extensions.insert(principal.clone());
    Ok(principal)
}

/// The request's bearer token, as sent.
pub fn bearer_token(parts: &Parts) -> Result<&str, AuthErrorKind> {
    let Some(value) = parts.headers.get(AUTHORIZATION) else {
        return Err(AuthErrorKind::MissingToken);
    };
    let value = value.to_str().map_err(|_| AuthErrorKind::InvalidToken)?;
    let (scheme, token) = value.split_once(' ').ok_or(AuthErrorKind::InvalidToken)?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err(AuthErrorKind::InvalidToken);
    }
    Ok(token.trim())
}
