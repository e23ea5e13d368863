//! The browser login's HTTP side: `/login` sends the browser to the identity
//! provider, `/login/callback` brings it back with a session cookie, `/logout` ends
//! it, and `/api/auth/*` tells the web UI who is signed in.

use askama::Template;
use axum::Json;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum_extra::extract::CookieJar;
use axum_extra::extract::cookie::{Cookie, SameSite};
use serde::Deserialize;
use serde_json::{Value, json};

use super::GatewayState;
use super::auth::{ChatUser, Via};
use super::error::GatewayError;
use super::session::{LOGIN_ATTEMPT_SECS, LoginError};
use maitred_core::http::client_ip::ClientIp;

/// Longer `return_to` values are not a page of ours; they are dropped.
const MAX_RETURN_TO: usize = 2048;

pub(super) fn routes() -> Router<GatewayState> {
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

/// Where to send the browser after sign-in: only a path that, resolved against the
/// gateway's own URL, stays on the gateway's origin. Browsers forgive a lot (a tab or
/// newline is dropped, `\\` is read as `/`), so anything a browser might read as
/// another host is refused outright rather than cleaned: `/\t/evil.example` would
/// otherwise become `//evil.example`. The value checked is the one returned, after its
/// dot segments are resolved: `/..//evil.example` resolves to `//evil.example`.
fn local_path(public_url: &str, path: Option<&str>) -> String {
    let fallback = || "/".to_owned();
    let Some(path) = path else {
        return fallback();
    };
    let Ok(base) = url::Url::parse(public_url) else {
        return fallback();
    };
    if path.len() > MAX_RETURN_TO || !stays_on_origin(&base, path) {
        return fallback();
    }
    match base.join(path) {
        Ok(resolved) if resolved.origin() == base.origin() => {
            let mut local = resolved.path().to_owned();
            if let Some(query) = resolved.query() {
                local.push('?');
                local.push_str(query);
            }
            if let Some(fragment) = resolved.fragment() {
                local.push('#');
                local.push_str(fragment);
            }
            if local.len() <= MAX_RETURN_TO && stays_on_origin(&base, &local) {
                local
            } else {
                fallback()
            }
        }
        _ => fallback(),
    }
}

/// Percent-decodings looked through before a `return_to` is given up on: a value
/// still changing after this many is refused.
const DECODINGS: usize = 3;

/// Whether `path`, given to a browser as a `Location`, names a page of `base`'s
/// origin, and goes on naming one if something on the way (a proxy, the web UI's
/// router) percent-decodes it again: neither it nor any of its decodings, before or
/// after their dot segments are resolved, may start with `//` or `/\\`, or hold a
/// backslash or a control character anywhere.
fn stays_on_origin(base: &url::Url, path: &str) -> bool {
    let mut text = path.to_owned();
    for _ in 0..=DECODINGS {
        if !plainly_local(&text) {
            return false;
        }
        match base.join(&text) {
            Ok(resolved)
                if resolved.origin() == base.origin() && plainly_local(resolved.path()) => {}
            _ => return false,
        }
        let decoded = percent_decoded(&text);
        if decoded == text {
            return true;
        }
        text = decoded;
    }
    false
}

/// One `/`, then no second one or backslash: not a network-path reference, on any
/// browser's reading.
fn plainly_local(path: &str) -> bool {
    path.starts_with('/')
        && !path.starts_with("//")
        && !path.starts_with("/\\")
        && !path.chars().any(|c| c.is_control() || c == '\\')
}

/// `text` with each `%XX` replaced by its byte (as UTF-8, lossily); a `%` not
/// followed by two hex digits stays as it is.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        let hex = bytes
            .get(i + 1..i + 3)
            .filter(|pair| pair.iter().all(u8::is_ascii_hexdigit))
            .and_then(|pair| std::str::from_utf8(pair).ok())
            .and_then(|pair| u8::from_str_radix(pair, 16).ok());
        match (byte, hex) {
            (b'%', Some(decoded)) => {
                out.push(decoded);
                i += 3;
            }
            _ => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn login(
    State(state): State<GatewayState>,
    ClientIp(ip): ClientIp,
    jar: CookieJar,
    Query(query): Query<LoginQuery>,
) -> Result<Response, GatewayError> {
    state.login_limit(ip)?;
    let return_to = local_path(&state.sessions.public_url, query.return_to.as_deref());
    let (to, login_state) = state.sessions.begin(&return_to).await?;
    let names = state.sessions.cookies;
    let binding = Cookie::build((names.login, login_state))
        .path("/")
        .http_only(true)
        .secure(names.secure)
        // Lax: the identity provider sends the browser back with a top-level GET.
        .same_site(SameSite::Lax)
        .max_age(cookie::time::Duration::seconds(LOGIN_ATTEMPT_SECS))
        .build();
    Ok((jar.add(binding), Redirect::to(&to)).into_response())
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
    ClientIp(ip): ClientIp,
    jar: CookieJar,
    Query(callback): Query<Callback>,
) -> Result<Response, GatewayError> {
    state.login_limit(ip)?;
    let names = state.sessions.cookies;
    let bound = jar.get(names.login).map(|c| c.value().to_owned());
    // The binding is spent whatever happens: a login is finished once, in one browser.
    let jar = jar.remove(Cookie::build(names.login).path("/"));
    if let Some(error) = callback.error {
        // Anyone can send a person to this URL with words of their choosing: the page
        // says only what the code means, and the provider's words go to the log.
        tracing::warn!(
            %ip,
            error = ?bounded(&error),
            description = ?callback.error_description.as_deref().map(bounded),
            "the identity provider refused the sign-in"
        );
        let message = provider_refusal(&error);
        return Ok((jar, sign_in_failed(StatusCode::BAD_REQUEST, message)).into_response());
    }
    let (Some(code), Some(login_state)) = (callback.code, callback.state) else {
        let message = "the identity provider sent the browser back without a code or state";
        return Ok((jar, sign_in_failed(StatusCode::BAD_REQUEST, message)).into_response());
    };
    let (value, return_to) = match state
        .sessions
        .finish(&code, &login_state, bound.as_deref())
        .await
    {
        Ok(done) => done,
        Err(LoginError::Internal(cause)) => return Err(GatewayError::Internal(cause)),
        Err(refused) => {
            tracing::warn!(%ip, reason = ?refused.to_string(), "sign-in callback refused");
            let page = sign_in_failed(StatusCode::BAD_REQUEST, &refused.to_string());
            return Ok((jar, page).into_response());
        }
    };
    // Checked again on the way out: whatever was stored, only a page of ours is a
    // Location.
    let return_to = local_path(&state.sessions.public_url, Some(&return_to));
    let cookie = Cookie::build((names.session, value))
        .path("/")
        .http_only(true)
        .secure(names.secure)
        .same_site(SameSite::Lax)
        .build();
    Ok((jar.add(cookie), Redirect::to(&return_to)).into_response())
}

/// Longest part of an identity provider's error that is logged.
const MAX_LOGGED_ERROR: usize = 200;

/// The start of `text`, at most [`MAX_LOGGED_ERROR`] bytes, cut at a character.
fn bounded(text: &str) -> &str {
    text.get(..text.floor_char_boundary(MAX_LOGGED_ERROR))
        .unwrap_or_default()
}

/// What a person is told when the identity provider sends them back with `error`
/// (an OAuth 2 or OpenID Connect error code): a fixed text of ours for each code.
fn provider_refusal(error: &str) -> &'static str {
    match error {
        "access_denied" => "The sign-in was cancelled or refused.",
        "login_required"
        | "interaction_required"
        | "consent_required"
        | "account_selection_required" => "The identity provider needs you to sign in again.",
        "server_error" | "temporarily_unavailable" => {
            "The identity provider could not complete the sign-in just now; try again shortly."
        }
        _ => "The identity provider did not complete the sign-in.",
    }
}

#[derive(Template)]
#[template(path = "sign_in_failed.html")]
struct SignInFailed<'a> {
    message: &'a str,
}

/// A page for a person, not JSON: they arrived here by following a redirect.
fn sign_in_failed(status: StatusCode, message: &str) -> Response {
    match (SignInFailed { message }).render() {
        Ok(html) => (status, [(header::CACHE_CONTROL, "no-store")], Html(html)).into_response(),
        Err(_) => (status, message.to_owned()).into_response(),
    }
}

async fn logout(
    State(state): State<GatewayState>,
    user: ChatUser,
    jar: CookieJar,
) -> Result<Response, GatewayError> {
    let name = state.sessions.cookies.session;
    if user.via == Via::Session
        && let Some(cookie) = jar.get(name)
    {
        state.sessions.end(cookie.value()).await?;
        tracing::info!(subject = ?user.subject, "browser signed out");
    }
    let jar = jar.remove(Cookie::build(name).path("/"));
    Ok((jar, Json(json!({ "signed_out": true }))).into_response())
}

/// Whether a browser is signed in, and the CSRF token its writes must carry.
async fn status(
    State(state): State<GatewayState>,
    jar: CookieJar,
) -> Result<Json<Value>, GatewayError> {
    let session = match jar.get(state.sessions.cookies.session) {
        Some(cookie) => state.sessions.lookup(cookie.value()).await?,
        None => None,
    };
    Ok(Json(match session {
        Some(session) => json!({
            "authenticated": true,
            "csrf_token": session.csrf_token,
            "user": { "subject": session.subject, "name": session.name, "email": session.email, "roles": session.roles() },
            "model": state.answerer.models.primary(),
        }),
        None => {
            json!({ "authenticated": false, "login_url": "/login", "model": state.answerer.models.primary() })
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

    const SITE: &str = "https://chat.example.com";

    #[test]
    fn local_paths_are_returned_to() {
        assert_eq!(local_path(SITE, Some("/chat?c=1")), "/chat?c=1");
        assert_eq!(local_path(SITE, Some("/c/abc#end")), "/c/abc#end");
        assert_eq!(local_path(SITE, Some("/a/../c/x")), "/c/x");
        assert_eq!(local_path(SITE, Some("/c/x?q=50%25")), "/c/x?q=50%25");
        assert_eq!(local_path(SITE, Some("/c/%2e%2e/d")), "/d");
        assert_eq!(local_path(SITE, None), "/");
        // Returned as it is returned to: a second look finds the same page.
        for path in ["/chat?c=1", "/c/abc#end", "/c/x?q=50%25"] {
            assert_eq!(local_path(SITE, Some(&local_path(SITE, Some(path)))), path);
        }
    }

    /// Each of these, given to a browser as a Location, leaves the site (or could).
    #[test]
    fn anything_a_browser_could_read_as_another_host_goes_home() {
        let long = format!("/{}", "a".repeat(4096));
        for hostile in [
            "//evil.example",
            "/\\evil.example",
            "\\/evil.example",
            "/\t/evil.example",
            "/\n/evil.example",
            "/\r\n/evil.example",
            "/\u{0}/evil.example",
            "%2F%2Fevil.example",
            // Dot segments that resolve to a leading `//`, the value returned.
            "/..//evil.example/phish",
            "/.//evil.example/phish",
            "/a/..//evil.example/phish",
            "/a/b/../..//evil.example/phish",
            "/../..//evil.example/phish",
            "/./..//evil.example/phish",
            // ... and the same with the dots percent-encoded, in either case or mixed.
            "/%2e%2e//evil.example/phish",
            "/%2E%2E//evil.example/phish",
            "/%2e%2E//evil.example/phish",
            "/.%2e//evil.example/phish",
            "/%2e.//evil.example/phish",
            "/%2e//evil.example/phish",
            "/%2E//evil.example/phish",
            "/a/%2e%2e//evil.example/phish",
            // ... or the slashes: safe for a browser, but one more decoding (a proxy,
            // the web UI's router) makes them the same.
            "/%2F%2Fx",
            "/%2f%2fevil.example",
            "/%2F/evil.example",
            "/..%2f/evil.example",
            "/..%2F%2Fevil.example",
            "/%2e%2e%2f%2fevil.example",
            "/%2E%2E%2F%2Fevil.example/phish",
            "/%252e%252e//evil.example",
            "/%252F%252Fevil.example",
            "/%25252F%25252Fevil.example",
            // Backslashes and control characters, raw or encoded, anywhere.
            "/..\\evil.example",
            "/..//\\evil.example",
            "/%5Cevil.example",
            "/%5cevil.example",
            "/..%5C%5Cevil.example",
            "/%09/evil.example",
            "/%0a/evil.example",
            "/%0D%0A/evil.example",
            "/c/x?to=%5C%5Cevil.example",
            "https://evil.example",
            "https:evil.example",
            "javascript:alert(1)",
            "evil.example",
            "",
            long.as_str(),
        ] {
            assert_eq!(local_path(SITE, Some(hostile)), "/", "{hostile:?}");
        }
    }
}
