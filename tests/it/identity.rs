//! The built-in identity provider: discovery, the authorization code + PKCE flow
//! through the login form, refresh-token rotation and reuse detection, and the
//! limits on what a client may ask for.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::helpers::{Database, TestApp};

const WEB: &str = "maitred-web";

fn redirect_uri(app: &TestApp) -> String {
    format!(
        "{}/login/callback",
        app.settings.gateway.endpoint.public_url
    )
}

/// A browser-like client: keeps cookies, never follows redirects.
fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn hidden_field(html: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker)? + marker.len();
    let end = html[start..].find('"')? + start;
    Some(
        html[start..end]
            .replace("&#x2f;", "/")
            .replace("&#47;", "/")
            .replace("&amp;", "&"),
    )
}

struct Pkce {
    verifier: String,
    challenge: String,
}

fn pkce() -> Pkce {
    let verifier = maitred::random::token(48);
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    Pkce {
        verifier,
        challenge,
    }
}

/// Signs `username` in through the login page; returns the code from the redirect.
async fn sign_in(
    app: &TestApp,
    browser: &reqwest::Client,
    pkce: &Pkce,
    username: &str,
    password: &str,
) -> reqwest::Response {
    let redirect = redirect_uri(app);
    let page = browser
        .get(format!("{}/oauth2/authorize", app.url))
        .query(&[
            ("response_type", "code"),
            ("client_id", WEB),
            ("redirect_uri", redirect.as_str()),
            ("scope", "openid profile chat.read chat.write"),
            ("state", "s-123"),
            ("nonce", "n-456"),
            ("code_challenge", pkce.challenge.as_str()),
            ("code_challenge_method", "S256"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["x-frame-options"], "DENY");
    // The post's redirect back to the client is a form action too (Chromium enforces it).
    let csp = page.headers()["content-security-policy"].to_str().unwrap();
    let origin = url::Url::parse(&redirect)
        .unwrap()
        .origin()
        .ascii_serialization();
    assert!(
        csp.contains(&format!("form-action 'self' {origin};")),
        "{csp}"
    );
    let html = page.text().await.unwrap();
    assert!(html.contains("Sign in to maitred"), "{html}");
    let csrf = hidden_field(&html, "csrf_token").expect("a CSRF token in the form");
    let mut form: Vec<(String, String)> = [
        "response_type",
        "client_id",
        "redirect_uri",
        "scope",
        "state",
        "nonce",
        "code_challenge",
        "code_challenge_method",
    ]
    .iter()
    .map(|name| {
        (
            (*name).to_owned(),
            hidden_field(&html, name).unwrap_or_else(|| panic!("hidden {name}")),
        )
    })
    .collect();
    form.push(("csrf_token".into(), csrf));
    form.push(("username".into(), username.into()));
    form.push(("password".into(), password.into()));
    browser
        .post(format!("{}/oauth2/authorize", app.url))
        .header("origin", &app.url)
        .form(&form)
        .send()
        .await
        .unwrap()
}

fn code_from(response: &reqwest::Response) -> (String, url::Url) {
    assert_eq!(
        response.status(),
        303,
        "expected a redirect back to the client"
    );
    let location = url::Url::parse(response.headers()["location"].to_str().unwrap()).unwrap();
    let query: std::collections::HashMap<_, _> = location.query_pairs().into_owned().collect();
    (query["code"].clone(), location)
}

async fn token_request(app: &TestApp, form: &[(&str, &str)]) -> (u16, Value) {
    let response = app
        .http
        .post(format!("{}/oauth2/token", app.url))
        .form(form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["cache-control"], "no-store");
    (response.status().as_u16(), response.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_code_with_pkce_then_refresh_rotation_and_reuse_revocation() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let password = app.credentials().users["operator"].password.clone();
    let browser = browser();
    let pkce = pkce();

    let wrong = sign_in(&app, &browser, &pkce, "operator", "not-the-password").await;
    assert_eq!(wrong.status(), 401);
    assert!(
        wrong
            .text()
            .await
            .unwrap()
            .contains("Wrong username or password")
    );

    let response = sign_in(&app, &browser, &pkce, "operator", &password).await;
    let (code, location) = code_from(&response);
    assert!(location.as_str().starts_with(&redirect_uri(&app)));
    let query: std::collections::HashMap<_, _> = location.query_pairs().into_owned().collect();
    assert_eq!(query["state"], "s-123");
    assert_eq!(query["iss"], app.url);

    let redirect = redirect_uri(&app);
    // The wrong verifier is refused, and burns the code.
    let (status, body) = token_request(
        &app,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", WEB),
            ("code", &code),
            ("redirect_uri", &redirect),
            ("code_verifier", &self::pkce().verifier),
        ],
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"], "invalid_grant");

    let pkce = self::pkce();
    let (code, _) = code_from(&sign_in(&app, &browser, &pkce, "operator", &password).await);
    let (status, tokens) = token_request(
        &app,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", WEB),
            ("code", &code),
            ("redirect_uri", &redirect),
            ("code_verifier", &pkce.verifier),
        ],
    )
    .await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(tokens["token_type"], "Bearer");
    let access = tokens["access_token"].as_str().unwrap();
    let claims: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(access.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["sub"], "operator");
    assert_eq!(claims["aud"], app.settings.gateway_resource());
    assert_eq!(claims["iss"], app.url);
    assert_eq!(claims["roles"], serde_json::json!(["OPERATOR"]));
    assert!(claims["jti"].is_string() && claims["exp"].as_i64() > claims["iat"].as_i64());
    let id_token = tokens["id_token"].as_str().unwrap();
    let id_claims: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(id_token.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(id_claims["aud"], WEB);
    assert_eq!(id_claims["nonce"], "n-456");

    let me: Value = app
        .http
        .get(format!("{}/userinfo", app.url))
        .bearer_auth(access)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(me["preferred_username"], "operator");
    assert_eq!(me["roles"], serde_json::json!(["OPERATOR"]));

    // Rotation: each refresh gives a new refresh token.
    let first = tokens["refresh_token"].as_str().unwrap().to_owned();
    let (status, refreshed) = token_request(
        &app,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", WEB),
            ("refresh_token", &first),
        ],
    )
    .await;
    assert_eq!(status, 200, "{refreshed}");
    let second = refreshed["refresh_token"].as_str().unwrap().to_owned();
    assert_ne!(first, second);

    // Presenting the spent one again revokes the whole family, the new one included.
    let (status, reuse) = token_request(
        &app,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", WEB),
            ("refresh_token", &first),
        ],
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(reuse["error"], "invalid_grant");
    assert!(
        reuse["error_description"]
            .as_str()
            .unwrap()
            .contains("revoked")
    );
    let (status, after) = token_request(
        &app,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", WEB),
            ("refresh_token", &second),
        ],
    )
    .await;
    assert_eq!(status, 400, "{after}");
    assert_eq!(after["error"], "invalid_grant");

    // Replaying a code fails, and revokes the refresh token it was exchanged for.
    let pkce = self::pkce();
    let (code, _) = code_from(&sign_in(&app, &browser, &pkce, "operator", &password).await);
    let exchange = [
        ("grant_type", "authorization_code"),
        ("client_id", WEB),
        ("code", &code),
        ("redirect_uri", &redirect),
        ("code_verifier", &pkce.verifier),
    ];
    let (status, tokens) = token_request(&app, &exchange).await;
    assert_eq!(status, 200, "{tokens}");
    let (status, body) = token_request(&app, &exchange).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    let refresh = tokens["refresh_token"].as_str().unwrap();
    let (status, body) = token_request(
        &app,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", WEB),
            ("refresh_token", refresh),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authorize_endpoint_checks_its_request() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let browser = browser();
    let redirect = redirect_uri(&app);
    let authorize = |params: Vec<(&'static str, String)>| {
        browser
            .get(format!("{}/oauth2/authorize", app.url))
            .query(&params)
            .send()
    };
    let challenge = pkce().challenge;

    // An unregistered redirect URI is shown, never redirected to.
    let response = authorize(vec![
        ("response_type", "code".into()),
        ("client_id", WEB.into()),
        ("redirect_uri", "https://evil.example/cb".into()),
        ("code_challenge", challenge.clone()),
        ("code_challenge_method", "S256".into()),
    ])
    .await
    .unwrap();
    assert_eq!(response.status(), 400);
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("not a registered redirect URI")
    );

    // Other errors go back to the client with state.
    for (params, error) in [
        (
            vec![
                ("code_challenge", challenge.clone()),
                ("code_challenge_method", "S256".to_owned()),
            ],
            "unsupported_response_type",
        ),
        (
            vec![("response_type", "code".to_owned())],
            "invalid_request",
        ),
        (
            vec![
                ("response_type", "code".to_owned()),
                ("code_challenge", challenge.clone()),
                ("code_challenge_method", "plain".to_owned()),
            ],
            "invalid_request",
        ),
        (
            vec![
                ("response_type", "code".to_owned()),
                ("code_challenge", challenge.clone()),
                ("code_challenge_method", "S256".to_owned()),
                ("scope", "backend.write".to_owned()),
            ],
            "invalid_scope",
        ),
        (
            vec![
                ("response_type", "code".to_owned()),
                ("code_challenge", challenge.clone()),
                ("code_challenge_method", "S256".to_owned()),
                ("resource", "http://elsewhere.example".to_owned()),
            ],
            "invalid_target",
        ),
    ] {
        let mut all: Vec<(&'static str, String)> = vec![
            ("client_id", WEB.into()),
            ("redirect_uri", redirect.clone()),
            ("state", "st".into()),
        ];
        all.extend(params);
        let response = authorize(all).await.unwrap();
        assert_eq!(response.status(), 303, "{error}");
        let location = url::Url::parse(response.headers()["location"].to_str().unwrap()).unwrap();
        let query: std::collections::HashMap<_, _> = location.query_pairs().into_owned().collect();
        assert_eq!(query["error"], error);
        assert_eq!(query["state"], "st");
    }

    // A login POST without the form's CSRF cookie is refused.
    let pkce = pkce();
    let response = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(format!("{}/oauth2/authorize", app.url))
        .form(&[
            ("response_type", "code"),
            ("client_id", WEB),
            ("redirect_uri", redirect.as_str()),
            ("code_challenge", pkce.challenge.as_str()),
            ("code_challenge_method", "S256"),
            ("csrf_token", "forged"),
            ("username", "admin"),
            (
                "password",
                app.credentials().users["admin"].password.as_str(),
            ),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);

    // A cross-site POST is refused by its Sec-Fetch-Site header alone.
    let response = browser
        .post(format!("{}/oauth2/authorize", app.url))
        .header("sec-fetch-site", "cross-site")
        .header("origin", "https://evil.example")
        .form(&[("client_id", WEB), ("username", "admin"), ("password", "x")])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_attempts_are_rate_limited() {
    let app =
        TestApp::spawn_with(&Database::Sqlite, |s| s.identity.rate_limit_per_minute = 5).await;
    let browser = browser();
    let pkce = pkce();
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(
            sign_in(&app, &browser, &pkce, "admin", "guess")
                .await
                .status()
                .as_u16(),
        );
    }
    // The budget is per address: the gateway's own token request at start-up may
    // take one of the five.
    assert!(statuses.starts_with(&[401, 401, 401, 401]), "{statuses:?}");
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_get_only_what_they_are_registered_for() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let discovery: Value = app
        .http
        .get(format!("{}/.well-known/openid-configuration", app.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(discovery["issuer"], app.url);
    assert_eq!(
        discovery["code_challenge_methods_supported"],
        serde_json::json!(["S256"])
    );
    let metadata: Value = app
        .http
        .get(format!(
            "{}/.well-known/oauth-authorization-server",
            app.url
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        metadata["token_endpoint"],
        format!("{}/oauth2/token", app.url)
    );
    let jwks: Value = app
        .http
        .get(format!("{}/oauth2/jwks", app.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(jwks["keys"][0]["kty"], "OKP");
    assert!(jwks["keys"][0]["kid"].is_string());
    assert!(jwks["keys"][0].get("d").is_none(), "never the private key");

    let (status, body) = app
        .try_token("maitred-mcp", &[("scope", "mcp.write")])
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_scope"))
    );
    let (status, body) = app
        .try_token("maitred-mcp", &[("resource", &app.settings.mcp_resource())])
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_target"))
    );
    let (status, body) = app
        .try_token(
            "maitred-cli",
            &[("resource", &app.settings.gateway_resource())],
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // Its registration: the chat, and the tools' reads its exchanged tokens may carry.
    assert_eq!(body["scope"], "chat.read chat.write mcp.read backend.read");

    // client_secret_post works as well as Basic; a wrong secret is invalid_client.
    let post = app
        .http
        .post(format!("{}/oauth2/token", app.url))
        .form(&[
            ("grant_type", "client_credentials"),
            ("client_id", "maitred-cli"),
            ("client_secret", &app.secret("maitred-cli")),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 200);
    let wrong = app
        .http
        .post(format!("{}/oauth2/token", app.url))
        .basic_auth("maitred-cli", Some("wrong-secret"))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(
        wrong.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Basic")
    );
    assert_eq!(
        wrong.json::<Value>().await.unwrap()["error"],
        "invalid_client"
    );

    // The public web client cannot use client credentials; unknown grants are named.
    let (status, body) = token_request(
        &app,
        &[("grant_type", "client_credentials"), ("client_id", WEB)],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("unauthorized_client"))
    );
    let (status, body) =
        token_request(&app, &[("grant_type", "password"), ("client_id", WEB)]).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("unsupported_grant_type"))
    );
    let (status, body) = token_request(
        &app,
        &[
            ("grant_type", "client_credentials"),
            ("client_id", "nobody"),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("invalid_client"))
    );
    let (status, body) = token_request(
        &app,
        &[
            ("grant_type", "refresh_token"),
            ("grant_type", "refresh_token"),
            ("client_id", WEB),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_request"))
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn production_mode_takes_its_identity_from_the_config_file_only() {
    use maitred::settings::{IdentityFile, Mode};

    // No configured users or clients: production refuses to start rather than invent them.
    let data_dir = tempfile::tempdir().unwrap();
    let mut settings = crate::helpers::test_settings(
        data_dir.path().to_owned(),
        maitred::settings::sqlite_url(&data_dir.path().join("prod.db")),
    );
    settings.mode = Mode::Production;
    let refused = settings.check().unwrap_err().to_string();
    assert!(refused.contains("production mode"), "{refused}");
    let db = maitred::app::open_database(&settings, true).await.unwrap();
    let http = maitred::http_client::new().unwrap();
    assert!(
        maitred::app::backend_router(&settings, db.clone(), http.clone())
            .await
            .is_err()
    );
    assert!(
        !data_dir.path().join("dev-credentials.json").exists(),
        "no secrets generated"
    );
    let (customers,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM customers")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(customers, 0, "production mode seeds nothing");

    // With a config file, its users and clients are the identity.
    use argon2::password_hash::PasswordHasher;
    let hash = argon2::Argon2::default()
        .hash_password(b"correct horse battery")
        .unwrap()
        .to_string();
    let config = format!(
        r#"
        [[identity.users]]
        username = "alice"
        password_hash = "{hash}"
        roles = ["ADMIN"]

        [[identity.clients]]
        id = "reporting"
        secret = "a-long-enough-secret-value"
        grants = ["client_credentials"]
        scopes = ["backend.read"]
        audiences = ["backend"]
        "#
    );
    let path = data_dir.path().join("maitred.toml");
    std::fs::write(&path, config).unwrap();
    settings.identity.file = IdentityFile::load(&path).unwrap();
    settings.check().unwrap();
    assert!(
        maitred::app::backend_router(&settings, db.clone(), http)
            .await
            .is_ok()
    );

    let too_short = "[[identity.clients]]\nid = \"x\"\nsecret = \"short\"\ngrants = [\"client_credentials\"]\nscopes = []\naudiences = [\"backend\"]\n";
    std::fs::write(&path, too_short).unwrap();
    settings.identity.file = IdentityFile::load(&path).unwrap();
    let db2 = db.clone();
    let error = maitred::app::backend_router(&settings, db2, maitred::http_client::new().unwrap())
        .await
        .err()
        .unwrap();
    assert!(format!("{error:#}").contains("at least 16"), "{error:#}");
    std::fs::write(&path, "[identity]\nusers = 3\n").unwrap();
    assert!(IdentityFile::load(&path).is_err());
    db.close().await;
}
