//! Attacks on the identity provider, token checks, local state and the query
//! filter (security issue #10), each performed over real HTTP and shown to fail.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use maitred::identity::dev::DevCredentials;
use maitred::identity::{ClientConfig, Grant};
use maitred::settings::Settings;
use secrecy::SecretString;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::helpers::{Database, TestApp};
use crate::on_both_databases;

const WEB: &str = "maitred-web";
/// A confidential authorization-code client that may get tokens for two services.
const PARTNER: &str = "partner-app";
const PARTNER_SECRET: &str = "partner-secret-0123456789";
const PARTNER_REDIRECT: &str = "http://127.0.0.1:9/partner/callback";

/// The demo identity plus `PARTNER`, as an operator would configure them.
fn with_partner(settings: &mut Settings) {
    let dev = DevCredentials::load_or_create(&settings.data_dir).unwrap();
    let mut identity = dev.identity_config(settings);
    identity.clients.push(ClientConfig {
        id: PARTNER.into(),
        secret: Some(SecretString::from(PARTNER_SECRET.to_owned())),
        public: false,
        grants: vec![Grant::AuthorizationCode, Grant::RefreshToken],
        scopes: vec!["openid".into(), "chat.read".into()],
        audiences: vec!["gateway".into(), "mcp".into()],
        redirect_uris: vec![PARTNER_REDIRECT.into()],
        subject_audiences: Vec::new(),
    });
    settings.identity.file = identity;
}

/// A browser-like client: keeps cookies, never follows redirects.
fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn pkce() -> (String, String) {
    let verifier = maitred::random::token(48);
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

fn hidden_field(html: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker)? + marker.len();
    let end = html[start..].find('"')? + start;
    Some(
        html[start..end]
            .replace("&#x2f;", "/")
            .replace("&#47;", "/")
            .replace("&#x3a;", ":")
            .replace("&amp;", "&"),
    )
}

fn query_of(response: &reqwest::Response) -> HashMap<String, String> {
    let location = url::Url::parse(response.headers()["location"].to_str().unwrap()).unwrap();
    location.query_pairs().into_owned().collect()
}

/// Signs `username` in at the login page for `client_id`; returns the response to the
/// form's POST (a redirect with a code, or the form again).
async fn sign_in(
    app: &TestApp,
    client_id: &str,
    redirect_uri: &str,
    challenge: &str,
    resource: Option<&str>,
    username: &str,
    password: &str,
) -> reqwest::Response {
    let browser = browser();
    let mut query = vec![
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", redirect_uri),
        ("scope", "openid chat.read"),
        ("state", "st"),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
    ];
    if let Some(resource) = resource {
        query.push(("resource", resource));
    }
    let page = browser
        .get(format!("{}/oauth2/authorize", app.url))
        .query(&query)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    let mut form: Vec<(String, String)> = query
        .iter()
        .map(|(name, _)| ((*name).to_owned(), hidden_field(&html, name).unwrap()))
        .collect();
    form.push((
        "csrf_token".into(),
        hidden_field(&html, "csrf_token").unwrap(),
    ));
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

/// A code for `PARTNER`, signed in as the demo user.
async fn partner_code(app: &TestApp, challenge: &str, resource: Option<&str>) -> String {
    let password = app.credentials().users["user"].password.clone();
    let response = sign_in(
        app,
        PARTNER,
        PARTNER_REDIRECT,
        challenge,
        resource,
        "user",
        &password,
    )
    .await;
    assert_eq!(response.status(), 303);
    query_of(&response)["code"].clone()
}

async fn token_request(
    app: &TestApp,
    basic: Option<(&str, &str)>,
    form: &[(&str, &str)],
) -> (u16, Value) {
    let mut request = app
        .http
        .post(format!("{}/oauth2/token", app.url))
        .form(form);
    if let Some((id, secret)) = basic {
        request = request.basic_auth(id, Some(secret));
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

fn audience(access_token: &str) -> Value {
    let payload = access_token.split('.').nth(1).unwrap();
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    claims["aud"].clone()
}

// ------------------------------------------------------------------ #3

/// Finding #3: one address flooding the token endpoint spent the budget every
/// client behind that address shares (the identity side: confidential clients such
/// as the gateway's and the MCP role's got 429 too).
async fn a_flood_from_one_address_does_not_lock_out_clients_that_prove_themselves(
    database: &Database,
) {
    // Five at once, then one a minute: nothing is refilled while the test runs.
    let app = TestApp::spawn_with(database, |s| s.identity.rate_limit_per_minute = 1).await;

    // The attack: unauthenticated requests from this address until it is refused.
    let mut flood = Vec::new();
    for n in 0..40 {
        let (status, _) = if n % 2 == 0 {
            token_request(&app, None, &[("grant_type", "client_credentials")]).await
        } else {
            token_request(
                &app,
                None,
                &[
                    ("grant_type", "refresh_token"),
                    ("client_id", WEB),
                    ("refresh_token", "forged"),
                ],
            )
            .await
        };
        flood.push(status);
        if status == 429 {
            break;
        }
    }
    assert_eq!(flood.last(), Some(&429), "the flood is limited: {flood:?}");

    // Confidential clients with their secrets, from the same address, still get tokens.
    for client in ["maitred-gateway", "maitred-cli", "maitred-mcp"] {
        let (status, body) = app.try_token(client, &[]).await;
        assert_eq!(status, 200, "{client} was locked out by the flood: {body}");
    }
    // What proves nothing is still refused: a public client has no secret, so its
    // requests stay on the address's budget.
    let (status, _) = token_request(
        &app,
        None,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", WEB),
            ("refresh_token", "forged"),
        ],
    )
    .await;
    assert_eq!(status, 429);

    // Guessing a secret stays slow: a spent address does not turn into an oracle.
    // Wrong secrets are still checked for a few tries, then not at all, so even the
    // right one is refused from this address for a while…
    let mut guesses = Vec::new();
    for n in 0..6 {
        let (status, _) = token_request(
            &app,
            Some(("maitred-cli", &format!("guess-{n}-not-the-secret"))),
            &[("grant_type", "client_credentials")],
        )
        .await;
        guesses.push(status);
    }
    assert!(guesses.iter().all(|s| *s == 429), "{guesses:?}");
    let (status, _) = app.try_token("maitred-cli", &[]).await;
    assert_eq!(
        status, 429,
        "after the guesses the secret is not even checked"
    );
    // …while other clients behind the same address are unaffected.
    let (status, body) = app.try_token("maitred-gateway", &[]).await;
    assert_eq!(status, 200, "{body}");
    app.stop().await;
}

// ------------------------------------------------------------------ #5

/// Finding #5: a confidential client could skip PKCE, and a verifier was accepted
/// for a code that had no challenge (a downgrade).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pkce_is_required_and_cannot_be_downgraded() {
    let app = TestApp::spawn_with(&Database::Sqlite, with_partner).await;
    let browser = browser();

    // A confidential client asking for a code without a challenge is sent back.
    let response = browser
        .get(format!("{}/oauth2/authorize", app.url))
        .query(&[
            ("response_type", "code"),
            ("client_id", PARTNER),
            ("redirect_uri", PARTNER_REDIRECT),
            ("scope", "chat.read"),
            ("state", "st"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    let query = query_of(&response);
    assert_eq!(query["error"], "invalid_request");
    assert!(
        query["error_description"].contains("PKCE is required"),
        "{query:?}"
    );
    assert_eq!(query["state"], "st");
    assert!(!query.contains_key("code"));

    // With its challenge it gets a code, and redeems it with its verifier and secret.
    let (verifier, challenge) = pkce();
    let code = partner_code(&app, &challenge, None).await;
    let (status, body) = token_request(
        &app,
        Some((PARTNER, PARTNER_SECRET)),
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", PARTNER_REDIRECT),
            ("code_verifier", &verifier),
        ],
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // Codes stored without a challenge (as the old authorize endpoint issued them to
    // confidential clients, or a downgraded request got): presenting some verifier
    // does not make them PKCE codes, for the confidential client nor the public one.
    for (client, redirect, basic) in [
        (
            PARTNER,
            PARTNER_REDIRECT.to_owned(),
            Some((PARTNER, PARTNER_SECRET)),
        ),
        (
            WEB,
            format!(
                "{}/login/callback",
                app.settings.gateway.endpoint.public_url
            ),
            None,
        ),
    ] {
        for with_verifier in [true, false] {
            let code = maitred::random::token(32);
            sqlx::query(
                "INSERT INTO authorization_codes (code_hash, client_id, subject, redirect_uri, scope, resource, code_challenge, nonce, family_id, expires_at, used) \
                 VALUES ($1, $2, 'user', $3, 'chat.read', NULL, NULL, NULL, $4, $5, 0)",
            )
            .bind(hex::encode(Sha256::digest(code.as_bytes())))
            .bind(client)
            .bind(&redirect)
            .bind(uuid::Uuid::now_v7().to_string())
            .bind(chrono::Utc::now().timestamp() + 120)
            .execute(app.db.pool())
            .await
            .unwrap();
            let verifier = pkce().0;
            let mut form = vec![
                ("grant_type", "authorization_code"),
                ("client_id", client),
                ("code", code.as_str()),
                ("redirect_uri", redirect.as_str()),
            ];
            if with_verifier {
                form.push(("code_verifier", verifier.as_str()));
            }
            let (status, body) = token_request(&app, basic, &form).await;
            assert_eq!(
                (status, body["error"].as_str()),
                (400, Some("invalid_grant")),
                "{client} redeemed a code without PKCE (verifier sent: {with_verifier}): {body}"
            );
        }
    }
    app.stop().await;
}

// ------------------------------------------------------------------ #6

/// Finding #6: a code authorized for one audience could be redeemed, and then
/// refreshed, for another audience of the same client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_cannot_switch_its_audience() {
    let app = TestApp::spawn_with(&Database::Sqlite, with_partner).await;
    let gateway = app.settings.gateway_resource();
    let mcp = app.settings.mcp_resource();
    let partner = Some((PARTNER, PARTNER_SECRET));
    let redeem = |code: String, verifier: String, resource: Option<String>| {
        let app = &app;
        async move {
            let mut form = vec![
                ("grant_type", "authorization_code".to_owned()),
                ("code", code),
                ("redirect_uri", PARTNER_REDIRECT.to_owned()),
                ("code_verifier", verifier),
            ];
            form.extend(resource.map(|r| ("resource", r)));
            let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
            token_request(app, partner, &form).await
        }
    };

    // The user authorized the gateway; the client asks for an MCP token with the code.
    let (verifier, challenge) = pkce();
    let code = partner_code(&app, &challenge, Some(&gateway)).await;
    let (status, body) = redeem(code, verifier, Some(mcp.clone())).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_target")),
        "{body}"
    );

    // Redeemed as authorized, it gives a gateway token and a refresh token…
    let (verifier, challenge) = pkce();
    let code = partner_code(&app, &challenge, Some(&gateway)).await;
    let (status, tokens) = redeem(code, verifier, None).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(audience(tokens["access_token"].as_str().unwrap()), gateway);
    let refresh = tokens["refresh_token"].as_str().unwrap().to_owned();
    // …which refreshes for the gateway, named or not…
    let (status, refreshed) = token_request(
        &app,
        partner,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", &refresh),
            ("resource", &gateway),
        ],
    )
    .await;
    assert_eq!(status, 200, "{refreshed}");
    assert_eq!(
        audience(refreshed["access_token"].as_str().unwrap()),
        gateway
    );
    let refresh = refreshed["refresh_token"].as_str().unwrap().to_owned();
    // …but not for the MCP server.
    let (status, body) = token_request(
        &app,
        partner,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", &refresh),
            ("resource", &mcp),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_target")),
        "{body}"
    );

    // An MCP token needs the user's authorization for the MCP server.
    let (verifier, challenge) = pkce();
    let code = partner_code(&app, &challenge, Some(&mcp)).await;
    let (status, tokens) = redeem(code, verifier, Some(mcp.clone())).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(audience(tokens["access_token"].as_str().unwrap()), mcp);
    app.stop().await;
}

// ------------------------------------------------------------------ #9

/// Finding #9: the data directory was 0755 and the SQLite files 0644, while they
/// hold the signing key, refresh tokens, conversations and the dev passwords.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_state_is_private_to_the_service_user() {
    use std::os::unix::fs::PermissionsExt;

    let mut data_dir = None;
    let app = TestApp::spawn_with(&Database::Sqlite, |s| {
        // A data directory that does not exist yet, as on a first start.
        let fresh = s.data_dir.join("fresh").join("state");
        s.database_url = maitred::settings::sqlite_url(&fresh.join("maitred.db")).into();
        s.data_dir = fresh.clone();
        data_dir = Some(fresh);
    })
    .await;
    let data_dir = data_dir.unwrap();
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data_dir), 0o700, "{}", data_dir.display());
    assert_eq!(
        mode(data_dir.parent().unwrap()),
        0o700,
        "created parents too"
    );
    let mut files = BTreeSet::new();
    for entry in std::fs::read_dir(&data_dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(mode(&path), 0o600, "{name} is readable by others");
        files.insert(name);
    }
    for expected in [
        "maitred.db",
        "maitred.db-wal",
        "maitred.db-shm",
        "dev-credentials.json",
    ] {
        assert!(
            files.contains(expected),
            "{expected} missing from {files:?}"
        );
    }
    app.stop().await;
}

// ------------------------------------------------------------------ #12

/// Log records, captured for one test.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Finding #12: a failed sign-in logged the typed user name, which is often a
/// password typed into the wrong field.
// One thread, so the roles' tasks log into this test's subscriber.
#[tokio::test(flavor = "current_thread")]
async fn a_failed_sign_in_does_not_log_what_was_typed() {
    let logs = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::TRACE)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let app = TestApp::spawn(&Database::Sqlite).await;
    let (_, challenge) = pkce();
    let redirect = format!(
        "{}/login/callback",
        app.settings.gateway.endpoint.public_url
    );
    let response = sign_in(
        &app,
        WEB,
        &redirect,
        &challenge,
        None,
        "hunter2-secret",
        "also-typed",
    )
    .await;
    assert_eq!(response.status(), 401);
    let credentials = app.credentials();
    app.stop().await;

    let logged = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        logged.contains("failed sign-in"),
        "the failure is still logged: {logged}"
    );
    assert!(!logged.contains("hunter2-secret"), "{logged}");
    assert!(!logged.contains("also-typed"), "{logged}");
    // A short hash still tells repeated attempts at one name apart from others.
    let hash = hex::encode(Sha256::digest(b"hunter2-secret"));
    assert!(logged.contains(&hash[..12]), "{logged}");
    // No dev secret reaches the log either (the banner is printed, not logged).
    for user in credentials.users.values() {
        assert!(!logged.contains(&user.password));
    }
    for secret in credentials.clients.values() {
        assert!(!logged.contains(secret.as_str()));
    }
}

// ------------------------------------------------------------------ #14

/// Names of the customers the LIKE tests look for (after the common prefix).
const LIKE_NAMES: &[&str] = &[
    r"abc\", r"a\b", r"a\\b", "100%", "100x", "a_b", "axb", r"\", r"\%", "%", "_", "ab", r"b\",
];
const PREFIX: &str = "LikeTest ";

/// The documented LIKE rule, as a reference: `%` any run, `_` one character, `\%`
/// `\_` `\\` the character itself, any other backslash a literal backslash;
/// case-insensitive (ASCII).
fn reference_like(pattern: &str, text: &str) -> bool {
    enum Token {
        Any,
        One,
        Char(char),
    }
    let mut tokens = Vec::new();
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        tokens.push(match c {
            '%' => Token::Any,
            '_' => Token::One,
            '\\' => match chars.peek() {
                Some(&next @ ('%' | '_' | '\\')) => {
                    chars.next();
                    Token::Char(next)
                }
                _ => Token::Char('\\'),
            },
            c => Token::Char(c),
        });
    }
    fn matches(tokens: &[Token], text: &[char]) -> bool {
        match tokens.split_first() {
            None => text.is_empty(),
            Some((Token::Any, rest)) => (0..=text.len()).any(|i| matches(rest, &text[i..])),
            Some((Token::One, rest)) => !text.is_empty() && matches(rest, &text[1..]),
            Some((Token::Char(c), rest)) => text
                .first()
                .is_some_and(|t| t.eq_ignore_ascii_case(c) && matches(rest, &text[1..])),
        }
    }
    let text: Vec<char> = text.chars().collect();
    matches(&tokens, &text)
}

/// A LIKE pattern written as quoted text in a `customQuery`.
fn quoted(value: &str) -> String {
    format!("'{}'", value.replace('\\', r"\\").replace('\'', "''"))
}

/// Finding #14: on PostgreSQL a LIKE pattern ending in a backslash was a 500.
async fn like_patterns_with_backslashes_never_fail(database: &Database) {
    let app = TestApp::spawn(database).await;
    let token = app.backend_token().await;
    for (n, name) in LIKE_NAMES.iter().enumerate() {
        sqlx::query(
            "INSERT INTO customers (id, name, created_at, booking_count, total_spent) VALUES ($1, $2, $3, 0, 0)",
        )
        .bind(format!("like-test-{n}"))
        .bind(format!("{PREFIX}{name}"))
        .bind("2026-01-01T00:00:00.000Z")
        .execute(app.db.pool())
        .await
        .unwrap();
    }
    let search = |filter: String| {
        let app = &app;
        let token = &token;
        async move {
            let response = app
                .http
                .get(format!("{}/customers", app.api))
                .query(&[(
                    "customQuery",
                    format!("name LIKE 'liketest %' AND ({filter})"),
                )])
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap();
            (status, body)
        }
    };
    let names = |body: &Value| -> BTreeSet<String> {
        body.as_array()
            .unwrap()
            .iter()
            .map(|c| {
                c["name"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches(PREFIX)
                    .to_owned()
            })
            .collect()
    };

    // The finding's patterns, written as a client writes them.
    for (filter, expected) in [
        (r"name LIKE '%abc\\'", vec![r"abc\"]),
        (r"name LIKE '%\\'", vec![r"abc\", r"\", r"b\"]),
        (r"name LIKE 'a\\'", vec![]),
        (r"name LIKE '%\%'", vec!["100%", r"\%", "%"]),
        (r"name LIKE '%a\b'", vec![r"a\b"]),
        (r"name LIKE '%a\\\\b'", vec![r"a\b"]),
        (r"name LIKE '%a\_b'", vec!["a_b"]),
        (r"name LIKE '% \\\\\%'", vec![r"\%"]),
    ] {
        let (status, body) = search(filter.to_owned()).await;
        assert_eq!(status, 200, "{filter}: {body}");
        let expected: BTreeSet<String> = expected.into_iter().map(str::to_owned).collect();
        assert_eq!(names(&body), expected, "{filter}");
    }
    // `\'` escapes the quote: these never close, and say how to write a backslash.
    for filter in [r"name LIKE 'abc\'", r"name LIKE '\'"] {
        let (status, body) = search(filter.to_owned()).await;
        assert_eq!(status, 400, "{filter}: {body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains("for a backslash at the end"), "{message}");
    }

    // Random patterns of the troublesome characters: never a 500, always the rule.
    let alphabet = ['a', 'b', 'x', '\\', '%', '_', '\''];
    let mut seed: u64 = 0x5eed_1234;
    for _ in 0..150 {
        let mut pattern = String::from("%");
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        for k in 0..(seed >> 60) % 6 {
            pattern.push(alphabet[((seed >> (k * 8)) % alphabet.len() as u64) as usize]);
        }
        let (status, body) = search(format!("name LIKE {}", quoted(&pattern))).await;
        assert_eq!(status, 200, "{pattern:?}: {body}");
        let expected: BTreeSet<String> = LIKE_NAMES
            .iter()
            .filter(|name| reference_like(&pattern, &format!("{PREFIX}{name}")))
            .map(|name| (*name).to_owned())
            .collect();
        assert_eq!(names(&body), expected, "pattern {pattern:?}");
    }
    app.stop().await;
}

on_both_databases!(
    a_flood_from_one_address_does_not_lock_out_clients_that_prove_themselves,
    like_patterns_with_backslashes_never_fail,
);
