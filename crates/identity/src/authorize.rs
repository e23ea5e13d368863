//! `/oauth2/authorize`: the authorization code flow's front door. GET checks the
//! request and shows the login page; POST checks the password and redirects back
//! with a one-time code.

use askama::Template;
use axum::Extension;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum_extra::extract::CookieJar;
use axum_extra::extract::cookie::{Cookie, SameSite};
use subtle::ConstantTimeEq;

use super::form::Params;
use super::registry::Client;
use super::store::{self, CodeGrant};
use super::{Grant, SharedIdentity, pkce, policy};
use maitred_core::http::client_ip::ClientIp;
use maitred_core::http::error::ErrorDetail;

const CSRF_COOKIE: &str = "maitred_login_csrf";
const CODE_TTL_SECS: i64 = 120;

/// The parameters a login form carries through, in order.
const CARRIED: &[&str] = &[
    "response_type",
    "client_id",
    "redirect_uri",
    "scope",
    "state",
    "code_challenge",
    "code_challenge_method",
    "nonce",
    "resource",
];

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage<'a> {
    action: &'a str,
    client_id: &'a str,
    scope: String,
    csrf_token: &'a str,
    hidden: Vec<(&'a str, &'a str)>,
    username: &'a str,
    error: Option<&'a str>,
}

#[derive(Template)]
#[template(path = "message.html")]
struct MessagePage<'a> {
    title: &'a str,
    message: &'a str,
}

/// A checked authorization request.
struct Request<'a> {
    client: &'a Client,
    redirect_uri: String,
    state: Option<String>,
    scopes: Vec<String>,
    code_challenge: String,
    nonce: Option<String>,
    resource: String,
}

/// Errors before the redirect URI is trusted are shown; after, they go back to the client.
enum Rejection {
    Page(StatusCode, String),
    Redirect {
        redirect_uri: String,
        state: Option<String>,
        error: &'static str,
        description: String,
    },
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        match self {
            Rejection::Page(status, message) => {
                message_page(status, "Cannot sign you in", &message)
            }
            Rejection::Redirect {
                redirect_uri,
                state,
                error,
                description,
            } => {
                let mut pairs = vec![
                    ("error", error.to_owned()),
                    ("error_description", description),
                ];
                if let Some(state) = state {
                    pairs.push(("state", state));
                }
                redirect_with(&redirect_uri, &pairs)
            }
        }
    }
}

pub(super) async fn show_login(
    State(identity): State<SharedIdentity>,
    RawQuery(query): RawQuery,
    jar: CookieJar,
) -> Response {
    let params = Params::from_query(query.as_deref());
    let request = match check(&identity, &params) {
        Ok(request) => request,
        Err(rejection) => return rejection.into_response(),
    };
    login_form(&identity, jar, &params, &request, "", None, StatusCode::OK)
}

pub(super) async fn submit_login(
    State(identity): State<SharedIdentity>,
    ClientIp(ip): ClientIp,
    jar: CookieJar,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(limited) = identity.rate_limit.address(ip) {
        let mut response = message_page(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many attempts",
            &limited.description,
        );
        if let Some(seconds) = limited.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, seconds.into());
        }
        return response;
    }
    let params = match Params::from_form(&headers, &body) {
        Ok(params) => params,
        Err(error) => {
            return message_page(StatusCode::BAD_REQUEST, "Bad request", &error.description);
        }
    };
    let request = match check(&identity, &params) {
        Ok(request) => request,
        Err(rejection) => return rejection.into_response(),
    };
    let csrf_ok = match (jar.get(CSRF_COOKIE), params.one("csrf_token")) {
        (Some(cookie), Ok(Some(field))) => {
            bool::from(cookie.value().as_bytes().ct_eq(field.as_bytes()))
        }
        _ => false,
    };
    if !csrf_ok {
        return login_form(
            &identity,
            jar,
            &params,
            &request,
            "",
            Some("The sign-in form expired. Please sign in again."),
            StatusCode::FORBIDDEN,
        );
    }
    let username = params.one("username").ok().flatten().unwrap_or_default();
    let password = params.one("password").ok().flatten().unwrap_or_default();
    if !verify_password(&identity, username, password).await {
        // People type their password into the user name field: log only a short hash,
        // enough to see repeated attempts at one name, never the name.
        tracing::info!(%ip, user = %name_hash(username), "failed sign-in");
        return login_form(
            &identity,
            jar,
            &params,
            &request,
            username,
            Some("Wrong username or password."),
            StatusCode::UNAUTHORIZED,
        );
    }
    let code = maitred_core::random::token(32);
    let grant = CodeGrant {
        client_id: request.client.id.clone(),
        subject: username.to_owned(),
        redirect_uri: request.redirect_uri.clone(),
        scope: request.scopes.join(" "),
        resource: Some(request.resource.clone()),
        code_challenge: Some(request.code_challenge.clone()),
        nonce: request.nonce.clone(),
        family_id: uuid::Uuid::now_v7().to_string(),
        expires_at: chrono::Utc::now().timestamp() + CODE_TTL_SECS,
    };
    if let Err(error) = store::insert_code(&identity.db, &code, &grant).await {
        let mut page = message_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Something went wrong",
            "The sign-in could not be completed. Please try again.",
        );
        page.extensions_mut()
            .insert(ErrorDetail::new("storing an authorization code", error));
        return page;
    }
    tracing::info!(username, client_id = %request.client.id, "signed in");
    let mut pairs = vec![("code", code), ("iss", identity.issuer().to_owned())];
    if let Some(state) = request.state {
        pairs.push(("state", state));
    }
    let jar = jar.remove(Cookie::build(CSRF_COOKIE).path("/oauth2/authorize"));
    (jar, redirect_with(&request.redirect_uri, &pairs)).into_response()
}

/// RFC 6749 §4.1.2.1 order: client and redirect URI first (shown, never redirected to).
fn check<'a>(identity: &'a SharedIdentity, params: &Params) -> Result<Request<'a>, Rejection> {
    let bad = |message: String| Rejection::Page(StatusCode::BAD_REQUEST, message);
    let client_id = params
        .one("client_id")
        .map_err(|e| bad(e.description))?
        .ok_or_else(|| bad("the request names no client (client_id)".into()))?;
    let client = identity
        .registry
        .client(client_id)
        .ok_or_else(|| bad(format!("unknown client {client_id}")))?;
    let redirect_uri = match params.one("redirect_uri").map_err(|e| bad(e.description))? {
        Some(uri) if client.redirect_uris.iter().any(|r| r == uri) => uri.to_owned(),
        Some(uri) => {
            return Err(bad(format!(
                "{uri} is not a registered redirect URI of {client_id}"
            )));
        }
        None => match client.redirect_uris.as_slice() {
            [only] => only.clone(),
            _ => return Err(bad("redirect_uri is missing".into())),
        },
    };
    let state = params.one("state").ok().flatten().map(str::to_owned);
    let back = |error: &'static str, description: String| Rejection::Redirect {
        redirect_uri: redirect_uri.clone(),
        state: state.clone(),
        error,
        description,
    };
    let one = |name: &str| {
        params
            .one(name)
            .map_err(|e| back("invalid_request", e.description))
    };
    if one("response_type")? != Some("code") {
        return Err(back(
            "unsupported_response_type",
            "only response_type=code is supported".into(),
        ));
    }
    if !client.allows(Grant::AuthorizationCode) {
        return Err(back(
            "unauthorized_client",
            format!("client {client_id} may not use the authorization code flow"),
        ));
    }
    let code_challenge = match (one("code_challenge")?, one("code_challenge_method")?) {
        (Some(challenge), Some("S256")) if pkce::well_formed(challenge) => challenge.to_owned(),
        (Some(_), Some("S256")) => {
            return Err(back(
                "invalid_request",
                "code_challenge is malformed".into(),
            ));
        }
        (Some(_), _) => {
            return Err(back(
                "invalid_request",
                "code_challenge_method must be S256".into(),
            ));
        }
        // Confidential clients too, as OAuth 2.1 asks: a client secret does not stop a
        // stolen or injected code from being redeemed by that client; PKCE does.
        (None, _) => {
            return Err(back(
                "invalid_request",
                "PKCE is required: send code_challenge with code_challenge_method=S256".into(),
            ));
        }
    };
    let scopes = policy::scopes(one("scope")?, client).map_err(|e| back(e.error, e.description))?;
    let resource = policy::audience(&params.all("resource"), client)
        .map_err(|e| back(e.error, e.description))?;
    let nonce = one("nonce")?.map(str::to_owned);
    Ok(Request {
        client,
        redirect_uri,
        state,
        scopes,
        code_challenge,
        nonce,
        resource,
    })
}

fn login_form(
    identity: &SharedIdentity,
    jar: CookieJar,
    params: &Params,
    request: &Request<'_>,
    username: &str,
    error: Option<&str>,
    status: StatusCode,
) -> Response {
    let csrf_token = maitred_core::random::token(24);
    let hidden = params
        .pairs()
        .iter()
        .filter(|(k, _)| CARRIED.contains(&k.as_str()))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let page = LoginPage {
        action: "/oauth2/authorize",
        client_id: &request.client.id,
        scope: request.scopes.join(" "),
        csrf_token: &csrf_token,
        hidden,
        username,
        error,
    };
    let cookie = Cookie::build((CSRF_COOKIE, csrf_token.clone()))
        .path("/oauth2/authorize")
        .http_only(true)
        .secure(identity.secure_cookies)
        .same_site(SameSite::Strict)
        .build();
    // Browsers apply form-action to the redirect that follows the post too, so the
    // client's (registered, already checked) redirect origin must be allowed.
    let csp = format!(
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self' {}; frame-ancestors 'none'",
        url::Url::parse(&request.redirect_uri)
            .map(|u| match u.origin() {
                origin @ url::Origin::Tuple(..) => origin.ascii_serialization(),
                // A native app's own scheme (`com.example.app:/cb`) has no origin.
                url::Origin::Opaque(_) => format!("{}:", u.scheme()),
            })
            .unwrap_or_default()
    );
    match page.render() {
        Ok(html) => (
            status,
            jar.add(cookie),
            [
                (header::CACHE_CONTROL, "no-store".to_owned()),
                (header::X_FRAME_OPTIONS, "DENY".to_owned()),
                (header::CONTENT_SECURITY_POLICY, csp),
            ],
            Html(html),
        )
            .into_response(),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Extension(ErrorDetail::new("rendering the login page", error)),
        )
            .into_response(),
    }
}

async fn verify_password(identity: &SharedIdentity, username: &str, password: &str) -> bool {
    let (hash, known) = match identity.registry.user(username) {
        Some(user) => (user.password_hash.clone(), true),
        None => (identity.dummy_hash.clone(), false),
    };
    let password = password.to_owned();
    // argon2 is deliberately slow: keep it off the async workers.
    let verified = tokio::task::spawn_blocking(move || {
        use argon2::password_hash::PasswordVerifier;
        use argon2::password_hash::phc::PasswordHash;
        PasswordHash::new(&hash).is_ok_and(|parsed| {
            argon2::Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
    })
    .await
    .unwrap_or(false);
    verified && known
}

/// The first 12 hex digits of the SHA-256 of a typed user name.
fn name_hash(username: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut hex = hex::encode(Sha256::digest(username.as_bytes()));
    hex.truncate(12);
    hex
}

fn redirect_with(base: &str, pairs: &[(&str, String)]) -> Response {
    match url::Url::parse(base) {
        Ok(mut url) => {
            {
                let mut query = url.query_pairs_mut();
                for (k, v) in pairs {
                    query.append_pair(k, v);
                }
            }
            Redirect::to(url.as_str()).into_response()
        }
        Err(_) => message_page(
            StatusCode::BAD_REQUEST,
            "Cannot sign you in",
            "the redirect URI is not a URL",
        ),
    }
}

fn message_page(status: StatusCode, title: &str, message: &str) -> Response {
    match (MessagePage { title, message }).render() {
        Ok(html) => (status, [(header::CACHE_CONTROL, "no-store")], Html(html)).into_response(),
        Err(_) => (status, message.to_owned()).into_response(),
    }
}
