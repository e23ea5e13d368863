//! Who is asking: a bearer token for the gateway's audience (curl, other services)
//! or a browser session cookie. Cookie-authenticated writes must also carry the
//! session's CSRF token in `X-CSRF-Token`, which a cross-site page cannot read.

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{Method, header};
use axum_extra::extract::CookieJar;
use secrecy::SecretString;
use subtle::ConstantTimeEq;

use super::GatewayState;
use super::error::GatewayError;
use maitred_core::auth::{AuthErrorKind, Principal, authenticate, bearer_token};
use maitred_protocol::ids::Subject;

pub(super) const CSRF_HEADER: &str = "x-csrf-token";

/// How the owner key of a client acting for no person begins: `client:<client id>`.
/// A person's key is their `sub` as it is, and no person's may begin so, so a person
/// whose name is a client's id shares nothing with the client.
pub(crate) const CLIENT_OWNER: &str = "client:";

/// Who owns what `principal` asks for: a client-credentials token (its `sub` is its
/// own client id) owns as `client:<id>`; anyone else as their `sub`. `None` for a
/// person whose `sub` takes the clients' prefix.
fn owner_of(principal: &Principal) -> Option<Subject> {
    if principal.client_id.as_deref() == Some(principal.subject.as_str()) {
        Some(Subject::new(format!("{CLIENT_OWNER}{}", principal.subject)))
    } else {
        person(principal.subject.clone())
    }
}

/// A person's owner key: their `sub`, unless it looks like a client's.
fn person(subject: String) -> Option<Subject> {
    (!subject.starts_with(CLIENT_OWNER)).then(|| Subject::new(subject))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    Bearer,
    Session,
}

/// The person or client behind a chat request. `subject` owns conversations: a
/// person's `sub`, or `client:<id>` for a client acting for no person.
#[derive(Debug, Clone)]
pub struct ChatUser {
    pub subject: Subject,
    pub name: Option<String>,
    pub email: Option<String>,
    pub roles: Vec<String>,
    pub via: Via,
    /// The person's own access token (the bearer token, or the browser session's),
    /// which tools that act for the person exchange for theirs. Never logged.
    pub credential: Option<SecretString>,
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
            // A token of a revoked login (a replayed refresh token revokes the whole
            // login) is refused now, not when it expires.
            if let Some(login) = &principal.login
                && state.sessions.login_revoked(login).await?
            {
                tracing::info!(subject = ?principal.subject, "refused a bearer token of a revoked login");
                return Err(state
                    .verifier
                    .error(
                        AuthErrorKind::InvalidToken,
                        "the token's login has been revoked; sign in again",
                    )
                    .into());
            }
            let subject = owner_of(&principal).ok_or_else(|| {
                state.verifier.error(
                    AuthErrorKind::InvalidToken,
                    "the token's subject is in the namespace kept for clients",
                )
            })?;
            let credential = bearer_token(parts)
                .ok()
                .map(|token| SecretString::from(token.to_owned()));
            ChatUser {
                subject,
                name: principal.name,
                email: principal.email,
                roles: principal.roles,
                via: Via::Bearer,
                credential,
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
            let roles = session.roles();
            // A browser session is always a person's.
            let subject = person(session.subject).ok_or(GatewayError::NotSignedIn)?;
            ChatUser {
                roles,
                subject,
                name: session.name,
                email: session.email,
                via: Via::Session,
                credential: session.access_token.map(SecretString::from),
            }
        };
        parts.extensions.insert(user.clone());
        Ok(user)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(subject: &str, client_id: Option<&str>) -> Principal {
        Principal {
            subject: subject.to_owned(),
            client_id: client_id.map(str::to_owned),
            scopes: vec!["chat.write".to_owned()],
            ..Principal::default()
        }
    }

    fn owner(subject: &str, client_id: Option<&str>) -> Option<String> {
        owner_of(&principal(subject, client_id)).map(|s| s.as_str().to_owned())
    }

    #[test]
    fn a_client_and_a_person_of_the_same_name_own_apart() {
        // maitred-cli's client-credentials token, and a person called maitred-cli
        // signed in through another client (an external issuer that allows it).
        let client = owner("maitred-cli", Some("maitred-cli")).unwrap();
        let person = owner("maitred-cli", Some("maitred-web")).unwrap();
        assert_eq!(client, "client:maitred-cli");
        assert_eq!(person, "maitred-cli", "people keep the key they always had");
        assert_ne!(client, person);
        assert_eq!(owner("ann", None).unwrap(), "ann");
    }

    #[test]
    fn no_person_takes_a_clients_key() {
        assert_eq!(owner("client:maitred-cli", Some("maitred-web")), None);
        assert_eq!(owner("client:maitred-cli", None), None);
        assert!(person("client:x".to_owned()).is_none());
        assert!(person("clientele".to_owned()).is_some());
    }
}
