//! Who is asking: a bearer token for the gateway's audience (curl, other services)
//! or a browser session cookie. Cookie-authenticated writes must also carry the
//! session's CSRF token in `X-CSRF-Token`, which a cross-site page cannot read.

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{Method, header};
use axum_extra::extract::CookieJar;
use subtle::ConstantTimeEq;

use super::GatewayState;
use super::error::GatewayError;
use super::ids::Subject;
use crate::auth::{AuthErrorKind, authenticate};

pub(super) const CSRF_HEADER: &str = "x-csrf-token";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    Bearer,
    Session,
}

/// The person or client behind a chat request. `subject` owns conversations.
#[derive(Debug, Clone)]
pub struct ChatUser {
    pub subject: Subject,
    pub name: Option<String>,
    pub email: Option<String>,
    pub roles: Vec<String>,
    pub via: Via,
}

impl<S> FromRequestParts<S> for ChatUser
where
    S: Send + Sync,
    GatewayState: FromRef<S>,
{
    type Rejection = GatewayError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        if let Some(user) = parts.extensions.get::<ChatUser>() {
            return Ok(user.clone());
        }
        let state = GatewayState::from_ref(state);
        let writes = !matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS);
        let user = if parts.headers.contains_key(header::AUTHORIZATION) {
            let principal = authenticate(parts, &state.verifier).await?;
            let scope = if writes { "chat.write" } else { "chat.read" };
            // chat.write implies reading one's own conversations.
            if !principal.has_scope(scope) && !principal.has_scope("chat.write") {
                return Err(state
                    .verifier
                    .error(
                        AuthErrorKind::InsufficientScope {
                            required: scope.to_owned(),
                        },
                        format!("this request needs the scope {scope}"),
                    )
                    .into());
            }
            ChatUser {
                subject: Subject::new(principal.subject),
                name: principal.name,
                email: principal.email,
                roles: principal.roles,
                via: Via::Bearer,
            }
        } else {
            let jar = CookieJar::from_headers(&parts.headers);
            let cookie = jar
                .get(state.sessions.cookies.session)
                .ok_or(GatewayError::NotSignedIn)?;
            let session = state
                .sessions
                .lookup(cookie.value())
                .await?
                .ok_or(GatewayError::NotSignedIn)?;
            if writes {
                let presented = parts
                    .headers
                    .get(CSRF_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default();
                if !bool::from(presented.as_bytes().ct_eq(session.csrf_token.as_bytes())) {
                    return Err(GatewayError::Csrf);
                }
            }
            ChatUser {
                roles: session.roles(),
                subject: Subject::new(session.subject),
                name: session.name,
                email: session.email,
                via: Via::Session,
            }
        };
        parts.extensions.insert(user.clone());
        Ok(user)
    }
}
