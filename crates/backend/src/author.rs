//! Who makes a write, and whether they may: the person a token is about (its `sub`),
//! the clients acting for them (its `act` chain), and the tool call that asked.
//!
//! The backend decides by the person, whatever the caller in front of it decided: a
//! token about a person must carry a role that may write, and a person without roles
//! (an external issuer that sends none) may not write. Whether the subject is a
//! person or a client is what the token says (`subject_type`, or `sub == client_id`),
//! never read from the absence of roles. A client acting for no person writes with
//! what its registration grants (`backend.write`), which the issuer gives a client
//! for this audience only if its registration holds it.

use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;

use super::WriteScope;
use super::error::ApiError;
use maitred_core::auth::{AuthErrorKind, Principal, RequiredScope, Scoped, TokenVerifier};
use maitred_core::delegation::TOOL_CALL_HEADER;

/// The roles that may write. The gateway's default policy says the same (USER reads,
/// OPERATOR and ADMIN write); here it holds even if that policy is opened.
pub(super) const WRITING_ROLES: &[&str] = &["OPERATOR", "ADMIN"];

/// Longer or stranger tool call ids are not ours; they are not recorded.
const MAX_TOOL_CALL_ID: usize = 128;

#[derive(Debug, Clone)]
pub struct Author {
    /// The person (or, for no person, the client) the write is made for.
    pub person: String,
    /// The clients acting for them, the newest first.
    pub actors: Vec<String>,
    pub tool_call_id: Option<String>,
}

impl Author {
    fn of(principal: &Principal, parts: &Parts) -> Self {
        let tool_call_id = parts
            .headers
            .get(TOOL_CALL_HEADER)
            .and_then(|v| v.to_str().ok())
            .filter(|id| {
                !id.is_empty()
                    && id.len() <= MAX_TOOL_CALL_ID
                    && id
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
            })
            .map(str::to_owned);
        Self {
            person: principal.subject.clone(),
            actors: principal.actors.clone(),
            tool_call_id,
        }
    }

    /// The acting clients as stored beside a booking: space-separated, newest first.
    pub(super) fn via(&self) -> Option<String> {
        (!self.actors.is_empty()).then(|| self.actors.join(" "))
    }
}

/// A caller whose token carries `backend.write` and whose person may write.
pub struct Writer {
    pub principal: Principal,
    pub author: Author,
}

impl<S> FromRequestParts<S> for Writer
where
    S: Send + Sync,
    Arc<TokenVerifier>: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let scoped = Scoped::<WriteScope, ApiError>::from_request_parts(parts, state).await?;
        let principal = scoped.principal;
        let roles = &principal.roles;
        if !principal.is_client() && !WRITING_ROLES.iter().any(|r| principal.has_role(r)) {
            let verifier = Arc::<TokenVerifier>::from_ref(state);
            return Err(verifier
                .error(
                    AuthErrorKind::InsufficientScope {
                        required: WriteScope::SCOPE.to_owned(),
                    },
                    format!(
                        "{} may read but not write: writes need the role {} (the token's roles: {})",
                        principal.subject,
                        WRITING_ROLES.join(" or "),
                        if roles.is_empty() {
                            "none".to_owned()
                        } else {
                            roles.join(", ")
                        }
                    ),
                )
                .into());
        }
        let author = Author::of(&principal, parts);
        Ok(Self { principal, author })
    }
}
