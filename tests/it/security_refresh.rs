//! Security issue #22, finding 4: a refresh refused for an extra scope, another
//! resource or another client spent the refresh token before its checks, so the next
//! honest refresh looked like a replay and revoked the whole login. Each attack is
//! performed over real HTTP: the bad refresh is refused and the token still works;
//! a real replay still revokes the login; of concurrent refreshes, one wins.

use maitred::identity::dev::DevCredentials;
use maitred::identity::{ClientConfig, Grant};
use maitred::settings::Settings;
use secrecy::SecretString;
use serde_json::Value;

use crate::helpers::{Database, TestApp};
use crate::on_both_databases;
use crate::token_exchange::Login;

/// A confidential client whose logins the user authorizes for the gateway.
const PARTNER: &str = "refresh-partner";
const PARTNER_SECRET: &str = "refresh-partner-secret-0123456789";
const PARTNER_REDIRECT: &str = "http://127.0.0.1:9/partner/callback";
/// The web login, a public client that may refresh too: "another client".
const WEB: &str = "maitred-web";

fn with_partner(settings: &mut Settings) {
    let dev = DevCredentials::load_or_create(&settings.data_dir).unwrap();
    let mut identity = dev.identity_config(settings);
    identity.clients.push(ClientConfig {
        id: PARTNER.into(),
        secret: Some(SecretString::from(PARTNER_SECRET.to_owned())),
        public: false,
        grants: vec![Grant::AuthorizationCode, Grant::RefreshToken],
        scopes: vec!["openid".into(), "chat.read".into(), "chat.write".into()],
        audiences: vec!["gateway".into(), "mcp".into()],
        redirect_uris: vec![PARTNER_REDIRECT.into()],
        subject_audiences: Vec::new(),
    });
    settings.identity.file = identity;
}

/// Signs the demo user in for `PARTNER` (scopes `openid chat.read`, the gateway as
/// resource) and redeems the code: the login's first refresh token.
async fn partner_login(app: &TestApp) -> String {
    let gateway = app.settings.gateway_resource();
    let password = app.credentials().users["user"].password.clone();
    let login = Login {
        issuer: &app.url,
        client: PARTNER,
        secret: Some(PARTNER_SECRET),
        redirect: PARTNER_REDIRECT,
        scope: "openid chat.read",
        resource: Some(&gateway),
        username: "user",
        password: &password,
    };
    let (status, tokens) = login.tokens(&app.http).await;
    assert_eq!(status, 200, "{tokens}");
    tokens["refresh_token"].as_str().unwrap().to_owned()
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

/// The partner's plain refresh: `(status, body)`.
async fn refresh(app: &TestApp, token: &str) -> (u16, Value) {
    token_request(
        app,
        Some((PARTNER, PARTNER_SECRET)),
        &[("grant_type", "refresh_token"), ("refresh_token", token)],
    )
    .await
}

/// The partner's refresh that must work: the next refresh token.
async fn refreshed(app: &TestApp, token: &str) -> String {
    let (status, body) = refresh(app, token).await;
    assert_eq!(status, 200, "an honest refresh was refused: {body}");
    body["refresh_token"].as_str().unwrap().to_owned()
}

/// A refresh the token endpoint must refuse, and the OAuth error it must give.
struct Attack<'a> {
    what: &'a str,
    /// Basic credentials; none: a public client naming itself in `extra`.
    client: Option<(&'a str, &'a str)>,
    extra: Vec<(&'a str, &'a str)>,
    error: &'a str,
}

async fn rejected_refreshes_leave_the_token_usable(database: &Database) {
    let app = TestApp::spawn_with(database, with_partner).await;
    let mcp = app.settings.mcp_resource();
    let partner = Some((PARTNER, PARTNER_SECRET));
    let cases = [
        // A scope the client may have, but this login was not granted.
        Attack {
            what: "an extra scope",
            client: partner,
            extra: vec![("scope", "chat.read chat.write")],
            error: "invalid_scope",
        },
        // A resource the client may use, but this login was not authorized for.
        Attack {
            what: "another resource",
            client: partner,
            extra: vec![("resource", mcp.as_str())],
            error: "invalid_target",
        },
        // Another client that may refresh, presenting the partner's token.
        Attack {
            what: "another client",
            client: None,
            extra: vec![("client_id", WEB)],
            error: "invalid_grant",
        },
    ];
    for Attack {
        what: attack,
        client,
        extra,
        error,
    } in cases
    {
        let token = partner_login(&app).await;
        let mut form = vec![
            ("grant_type", "refresh_token"),
            ("refresh_token", token.as_str()),
        ];
        form.extend(extra.iter().copied());
        let (status, body) = token_request(&app, client, &form).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some(error)),
            "{attack}: {body}"
        );
        // The refused request spent nothing: the same token refreshes, and the login
        // goes on (its next token works too, so nothing was revoked).
        let next = refreshed(&app, &token).await;
        let after = refreshed(&app, &next).await;
        assert_ne!(after, next, "{attack}");
    }
    app.stop().await;
}

async fn a_replayed_refresh_token_still_revokes_the_login(database: &Database) {
    let app = TestApp::spawn_with(database, with_partner).await;
    let first = partner_login(&app).await;
    let second = refreshed(&app, &first).await;
    let (status, body) = refresh(&app, &first).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("revoked"),
        "{body}"
    );
    // Every token of the login is revoked, the one the replay's victim holds included.
    let (status, body) = refresh(&app, &second).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );
    app.stop().await;
}

async fn concurrent_refreshes_of_one_token_have_one_winner(database: &Database) {
    let app = TestApp::spawn_with(database, with_partner).await;
    let token = partner_login(&app).await;
    let attempts = futures::future::join_all((0..8).map(|_| refresh(&app, &token))).await;
    let winners: Vec<&Value> = attempts
        .iter()
        .filter(|(status, _)| *status == 200)
        .map(|(_, body)| body)
        .collect();
    assert_eq!(winners.len(), 1, "{attempts:?}");
    for (status, body) in attempts.iter().filter(|(status, _)| *status != 200) {
        assert_eq!(
            (*status, body["error"].as_str()),
            (400, Some("invalid_grant")),
            "{body}"
        );
    }
    app.stop().await;
}

on_both_databases!(
    rejected_refreshes_leave_the_token_usable,
    a_replayed_refresh_token_still_revokes_the_login,
    concurrent_refreshes_of_one_token_have_one_winner,
    a_revoked_logins_access_token_is_refused_at_the_gateway,
);

/// Finding 9 of the third security round: an access token outlived its revoked
/// login by up to its 15 minutes at the gateway. The gateway shares the built-in
/// issuer's database and now refuses a bearer token of a revoked login at once.
async fn a_revoked_logins_access_token_is_refused_at_the_gateway(database: &Database) {
    let app = TestApp::spawn_with(database, with_partner).await;
    let gateway = app.settings.gateway_resource();
    let password = app.credentials().users["user"].password.clone();
    let login = Login {
        issuer: &app.url,
        client: PARTNER,
        secret: Some(PARTNER_SECRET),
        redirect: PARTNER_REDIRECT,
        scope: "openid chat.read",
        resource: Some(&gateway),
        username: "user",
        password: &password,
    };
    let (status, tokens) = login.tokens(&app.http).await;
    assert_eq!(status, 200, "{tokens}");
    let access = tokens["access_token"].as_str().unwrap();
    let first = tokens["refresh_token"].as_str().unwrap();
    let conversations = "/api/v1/resos/conversations";
    assert_eq!(app.gateway_get(conversations, access).await.status(), 200);

    // A stolen refresh token replayed after its owner used it: the login is revoked.
    refreshed(&app, first).await;
    let (status, _) = refresh(&app, first).await;
    assert_eq!(status, 400);
    let refused = app.gateway_get(conversations, access).await;
    assert_eq!(refused.status(), 401);
    let body: Value = refused.json().await.unwrap();
    assert!(body.to_string().contains("revoked"), "{body}");
    app.stop().await;
}
