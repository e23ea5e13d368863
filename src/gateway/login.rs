//! The browser login's HTTP side: `/login` sends the browser to the identity
//! provider, `/login/callback` brings it back with a session cookie, `/logout` ends
//! it, and `/api/auth/*` tells the web UI who is signed in.

use axum::Json;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum_extra::extract::CookieJar;
use axum_extra::extract::cookie::{Cookie, SameSite};
use serde::Deserialize;
use serde_json::{Value, json};

use super::GatewayState;
use super::auth::{ChatUser, Via};
use super::error::GatewayError;
use super::session::COOKIE;

pub fn routes() -> Router<GatewayState> {
    Router::new()
        .route("/login", get(login))
        .route("/login/callback", get(callback))
        .route("/logout", post(logout))
        .route("/api/auth/status", get(status))
        .route("/api/auth/user", get(user))
}

#[derive(Deserialize)]
struct LoginQuery {
    return_to: Option<String>,
}

/// Only paths on this site: an open redirect would hand a phisher our login.
fn local_path(path: Option<&str>) -> String {
    match path {
        Some(p) if p.starts_with('/') && !p.starts_with("//") && !p.contains('\\') => p.to_owned(),
        _ => "/".to_owned(),
    }
}

async fn login(
    State(state): State<GatewayState>,
    Query(query): Query<LoginQuery>,
) -> Result<Redirect, GatewayError> {
    let to = state
        .sessions
        .begin(&local_path(query.return_to.as_deref()))
        .await?;
    Ok(Redirect::to(&to))
}

#[derive(Deserialize)]
struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

async fn callback(
    State(state): State<GatewayState>,
    jar: CookieJar,
    Query(callback): Query<Callback>,
) -> Result<Response, GatewayError> {
    if let Some(error) = callback.error {
        return Err(GatewayError::InvalidRequest(format!(
            "the sign-in was refused: {error} {}",
            callback.error_description.unwrap_or_default()
        )));
    }
    let (Some(code), Some(login_state)) = (callback.code, callback.state) else {
        return Err(GatewayError::InvalidRequest(
            "the sign-in came back without a code or state".into(),
        ));
    };
    let (value, return_to) = state
        .sessions
        .finish(&code, &login_state)
        .await
        .map_err(|e| GatewayError::InvalidRequest(format!("the sign-in failed: {e:#}")))?;
    let cookie = Cookie::build((COOKIE, value))
        .path("/")
        .http_only(true)
        .secure(state.sessions.secure_cookies)
        .same_site(SameSite::Lax)
        .build();
    Ok((jar.add(cookie), Redirect::to(&return_to)).into_response())
}

async fn logout(
    State(state): State<GatewayState>,
    user: ChatUser,
    jar: CookieJar,
) -> Result<Response, GatewayError> {
    if user.via == Via::Session
        && let Some(cookie) = jar.get(COOKIE)
    {
        state.sessions.end(cookie.value()).await?;
        tracing::info!(subject = %user.subject, "browser signed out");
    }
    let jar = jar.remove(Cookie::build(COOKIE).path("/"));
    Ok((jar, Json(json!({ "signed_out": true }))).into_response())
}

/// Whether a browser is signed in, and the CSRF token its writes must carry.
async fn status(
    State(state): State<GatewayState>,
    jar: CookieJar,
) -> Result<Json<Value>, GatewayError> {
    let session = match jar.get(COOKIE) {
        Some(cookie) => state.sessions.lookup(cookie.value()).await?,
        None => None,
    };
    Ok(Json(match session {
        Some(session) => json!({
            "authenticated": true,
            "csrf_token": session.csrf_token,
            "user": { "subject": session.subject, "name": session.name, "email": session.email, "roles": session.roles() },
            "model": state.agent.models.primary(),
        }),
        None => {
            json!({ "authenticated": false, "login_url": "/login", "model": state.agent.models.primary() })
        }
    }))
}

async fn user(user: ChatUser) -> Json<Value> {
    Json(json!({
        "subject": user.subject,
        "name": user.name,
        "email": user.email,
        "roles": user.roles,
    }))
}

#[cfg(test)]
mod tests {
    use super::local_path;

    #[test]
    fn only_local_paths_are_returned_to() {
        assert_eq!(local_path(Some("/chat?c=1")), "/chat?c=1");
        assert_eq!(local_path(Some("//evil.example")), "/");
        assert_eq!(local_path(Some("https://evil.example")), "/");
        assert_eq!(local_path(Some("/\\evil.example")), "/");
        assert_eq!(local_path(None), "/");
    }
}
