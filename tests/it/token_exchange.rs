//! RFC 8693 token exchange at the built-in issuer: a person's token traded, hop by
//! hop, for short-lived tokens that name the person as `sub` and the clients acting
//! for them in `act`; and every refusal the grant owes.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use maitred::identity::dev::DevCredentials;
use maitred::identity::{ClientConfig, Grant};
use maitred::settings::Settings;
use secrecy::SecretString;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::helpers::{Database, TestApp};
use crate::on_both_databases;

const GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS: &str = "urn:ietf:params:oauth:token-type:access_token";

/// A client that may exchange tokens for the MCP server and the backend, and may get
/// tokens for the MCP server and the gateway: for the refusals the demo clients'
/// configuration cannot even reach.
const RELAY: &str = "relay";
const RELAY_SECRET: &str = "relay-secret-0123456789";

fn with_relay(settings: &mut Settings) {
    let dev = DevCredentials::load_or_create(&settings.data_dir).unwrap();
    let mut identity = dev.identity_config(settings);
    identity.clients.push(ClientConfig {
        id: RELAY.into(),
        secret: Some(SecretString::from(RELAY_SECRET.to_owned())),
        public: false,
        grants: vec![Grant::TokenExchange],
        scopes: vec!["chat.read".into()],
        audiences: vec!["mcp".into(), "gateway".into()],
        redirect_uris: Vec::new(),
        subject_audiences: vec!["mcp".into(), "backend".into()],
    });
    settings.identity.file = identity;
}

/// The claims of a JWT, unverified: what the test asserts on.
pub(crate) fn claims_of(token: &str) -> Value {
    let payload = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

/// `username` signs in at the login page through the web client with `scope`; the
/// token response (access and refresh token) for the gateway's audience.
pub(crate) async fn person_tokens(app: &TestApp, username: &str, scope: &str) -> Value {
    let redirect = format!(
        "{}/login/callback",
        app.settings.gateway.endpoint.public_url
    );
    let password = app.credentials().users[username].password.clone();
    person_tokens_at(&app.http, &app.url, &redirect, username, &password, scope).await
}

/// The same at an issuer anywhere (`issuer`: where its login page is reached), the
/// web client's redirect being `redirect`.
pub(crate) async fn person_tokens_at(
    http: &reqwest::Client,
    issuer: &str,
    redirect: &str,
    username: &str,
    password: &str,
    scope: &str,
) -> Value {
    let login = Login {
        issuer,
        client: "maitred-web",
        secret: None,
        redirect,
        scope,
        resource: None,
        username,
        password,
    };
    let (status, tokens) = login.tokens(http).await;
    assert_eq!(status, 200, "{tokens}");
    tokens
}

/// A sign-in at the issuer's login page, as a person in a browser does it for a
/// client, then the code redeemed by that client (PKCE S256).
pub(crate) struct Login<'a> {
    pub issuer: &'a str,
    pub client: &'a str,
    /// A confidential client's secret, for the code's redemption.
    pub secret: Option<&'a str>,
    pub redirect: &'a str,
    pub scope: &'a str,
    pub resource: Option<&'a str>,
    pub username: &'a str,
    pub password: &'a str,
}

impl Login<'_> {
    /// The token endpoint's answer to the redeemed code.
    pub(crate) async fn tokens(&self, http: &reqwest::Client) -> (u16, Value) {
        let issuer = self.issuer;
        let browser = reqwest::Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let verifier = maitred::random::token(48);
        let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
        let mut query = vec![
            ("response_type", "code"),
            ("client_id", self.client),
            ("redirect_uri", self.redirect),
            ("scope", self.scope),
            ("state", "st"),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
        ];
        if let Some(resource) = self.resource {
            query.push(("resource", resource));
        }
        let page = browser
            .get(format!("{issuer}/oauth2/authorize"))
            .query(&query)
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), 200);
        let html = page.text().await.unwrap();
        let csrf = {
            let marker = "name=\"csrf_token\" value=\"";
            let start = html.find(marker).unwrap() + marker.len();
            let end = html[start..].find('"').unwrap() + start;
            html[start..end].to_owned()
        };
        let mut form: Vec<(String, String)> = query
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        form.push(("csrf_token".into(), csrf));
        form.push(("username".into(), self.username.into()));
        form.push(("password".into(), self.password.into()));
        let signed_in = browser
            .post(format!("{issuer}/oauth2/authorize"))
            .header("origin", issuer)
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(signed_in.status(), 303);
        let location = url::Url::parse(signed_in.headers()["location"].to_str().unwrap()).unwrap();
        let code = location
            .query_pairs()
            .find(|(k, _)| k == "code")
            .map(|(_, v)| v.into_owned())
            .expect("a code in the redirect");
        let mut redeem = http.post(format!("{issuer}/oauth2/token"));
        let mut fields = vec![
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", self.redirect),
            ("code_verifier", verifier.as_str()),
        ];
        match self.secret {
            Some(secret) => redeem = redeem.basic_auth(self.client, Some(secret)),
            None => fields.push(("client_id", self.client)),
        }
        let response = redeem.form(&fields).send().await.unwrap();
        (response.status().as_u16(), response.json().await.unwrap())
    }
}

/// A token exchange by `client` (with its secret) of `subject` for `extra`.
async fn exchange(
    app: &TestApp,
    client: &str,
    secret: &str,
    subject: &str,
    extra: &[(&str, &str)],
) -> (u16, Value) {
    let mut form = vec![
        ("grant_type", GRANT),
        ("subject_token", subject),
        ("subject_token_type", ACCESS),
    ];
    form.extend_from_slice(extra);
    let response = app
        .http
        .post(format!("{}/oauth2/token", app.url))
        .basic_auth(client, Some(secret))
        .form(&form)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

pub(crate) async fn exchange_as(
    app: &TestApp,
    client: &str,
    subject: &str,
    extra: &[(&str, &str)],
) -> (u16, Value) {
    exchange(app, client, &app.secret(client), subject, extra).await
}

fn refused(result: &(u16, Value), error: &str, says: &str) {
    let (status, body) = result;
    assert_eq!(*status, 400, "{body}");
    assert_eq!(body["error"], error, "{body}");
    let description = body["error_description"].as_str().unwrap_or_default();
    assert!(description.contains(says), "{description:?} lacks {says:?}");
}

/// A token signed with the issuer's own key, with the claims given: for subject
/// tokens the issuer would never issue (expired, too deep a chain).
pub(crate) async fn signed(app: &TestApp, claims: &Value) -> String {
    let (kid, private): (String, String) =
        sqlx::query_as("SELECT kid, private_key FROM signing_keys ORDER BY created_at LIMIT 1")
            .fetch_one(app.db.pool())
            .await
            .unwrap();
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(kid);
    let key = EncodingKey::from_ed_der(&STANDARD.decode(private).unwrap());
    jsonwebtoken::encode(&header, claims, &key).unwrap()
}

on_both_databases!(a_persons_token_goes_two_hops_naming_every_actor);

async fn a_persons_token_goes_two_hops_naming_every_actor(database: &Database) {
    let app = TestApp::spawn(database).await;
    let discovery: Value = app
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
    assert!(
        discovery["grant_types_supported"]
            .as_array()
            .unwrap()
            .contains(&json!(GRANT)),
        "{discovery}"
    );

    let person = person_tokens(&app, "operator", "openid profile chat.read chat.write").await;
    let person_token = person["access_token"].as_str().unwrap();
    let person_claims = claims_of(person_token);
    assert_eq!(person_claims["aud"], app.settings.gateway_resource());

    // The gateway, for the MCP server.
    let (status, hop1) = exchange_as(
        &app,
        "maitred-gateway",
        person_token,
        &[("resource", &app.settings.mcp_resource())],
    )
    .await;
    assert_eq!(status, 200, "{hop1}");
    assert_eq!(hop1["issued_token_type"], ACCESS);
    assert_eq!(hop1["token_type"], "Bearer");
    assert_eq!(hop1["scope"], "mcp.read mcp.write");
    assert!(hop1.get("refresh_token").is_none());
    let hop1_token = hop1["access_token"].as_str().unwrap();
    let c1 = claims_of(hop1_token);
    assert_eq!(c1["sub"], "operator");
    assert_eq!(c1["act"], json!({"sub": "maitred-gateway"}));
    assert_eq!(c1["aud"], app.settings.mcp_resource());
    assert_eq!(c1["client_id"], "maitred-gateway");
    assert_eq!(c1["roles"], json!(["OPERATOR"]));
    assert_eq!(c1["scope"], "mcp.read mcp.write");
    assert_eq!(c1["sid"], person_claims["sid"]);
    let now = chrono::Utc::now().timestamp();
    let exp = c1["exp"].as_i64().unwrap();
    assert!(
        exp <= now + 300,
        "a delegated token lives at most 5 minutes"
    );
    assert!(exp <= person_claims["exp"].as_i64().unwrap());
    assert!(hop1["expires_in"].as_u64().unwrap() <= 300);

    // The MCP server, for the backend: the chain grows, the person stays.
    let (status, hop2) = exchange_as(
        &app,
        "maitred-mcp",
        hop1_token,
        &[("resource", &app.settings.backend_resource())],
    )
    .await;
    assert_eq!(status, 200, "{hop2}");
    let hop2_token = hop2["access_token"].as_str().unwrap();
    let c2 = claims_of(hop2_token);
    assert_eq!(c2["sub"], "operator");
    assert_eq!(
        c2["act"],
        json!({"sub": "maitred-mcp", "act": {"sub": "maitred-gateway"}})
    );
    assert_eq!(c2["aud"], app.settings.backend_resource());
    assert_eq!(c2["scope"], "backend.read backend.write");
    assert_eq!(c2["roles"], json!(["OPERATOR"]));
    assert!(c2["exp"].as_i64().unwrap() <= exp);

    // The backend takes it: the person reaches the row.
    let customers = app.get("/customers?limit=1", hop2_token).await;
    assert_eq!(customers.status(), 200);
    // The MCP server's token is not the backend's (audience).
    assert_eq!(
        app.get("/customers?limit=1", hop1_token).await.status(),
        401
    );

    // A curl user's client-credentials token has no person: the subject is the client.
    let cli = app.token("maitred-cli", &[]).await;
    let (status, body) = exchange_as(&app, "maitred-gateway", &cli, &[]).await;
    assert_eq!(status, 200, "{body}");
    let c = claims_of(body["access_token"].as_str().unwrap());
    assert_eq!(c["sub"], "maitred-cli");
    assert_eq!(c["act"], json!({"sub": "maitred-gateway"}));
    assert!(c.get("roles").is_none(), "{c}");
    app.stop().await;
}

on_both_databases!(a_delegated_token_is_never_wider_than_the_person);

async fn a_delegated_token_is_never_wider_than_the_person(database: &Database) {
    let app = TestApp::spawn(database).await;
    // A person who let the web client only read.
    let reader = person_tokens(&app, "operator", "openid chat.read").await;
    let token = reader["access_token"].as_str().unwrap();
    let (status, body) = exchange_as(&app, "maitred-gateway", token, &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["scope"], "mcp.read");
    refused(
        &exchange_as(&app, "maitred-gateway", token, &[("scope", "mcp.write")]).await,
        "invalid_scope",
        "mcp.write",
    );
    // Nothing the person gave covers what the client may ask for.
    let profile = person_tokens(&app, "operator", "openid profile").await;
    refused(
        &exchange_as(
            &app,
            "maitred-gateway",
            profile["access_token"].as_str().unwrap(),
            &[],
        )
        .await,
        "invalid_scope",
        "allows nothing",
    );
    app.stop().await;
}

on_both_databases!(every_refusal_the_grant_owes);

async fn every_refusal_the_grant_owes(database: &Database) {
    let app = TestApp::spawn_with(database, with_relay).await;
    let person = person_tokens(&app, "operator", "openid chat.read chat.write").await;
    let token = person["access_token"].as_str().unwrap();
    let mcp = app.settings.mcp_resource();
    let backend = app.settings.backend_resource();
    let gateway = app.settings.gateway_resource();

    // An audience the client may not get tokens for.
    refused(
        &exchange_as(&app, "maitred-gateway", token, &[("resource", &backend)]).await,
        "invalid_target",
        "may not get tokens for",
    );
    // A token the client is not a recipient of: the backend's client presenting the
    // person's token for the gateway.
    refused(
        &exchange_as(&app, "maitred-mcp", token, &[]).await,
        "invalid_grant",
        "may not exchange tokens issued for",
    );
    // Clients without the grant, and the public web client.
    let (status, body) = exchange_as(&app, "maitred-cli", token, &[]).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("unauthorized_client")),
        "{body}"
    );
    let response = app
        .http
        .post(format!("{}/oauth2/token", app.url))
        .form(&[
            ("grant_type", GRANT),
            ("client_id", "maitred-web"),
            ("subject_token", token),
            ("subject_token_type", ACCESS),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"], "unauthorized_client", "{body}");
    // A wrong secret is no client at all.
    let (status, body) =
        exchange(&app, "maitred-gateway", "not-the-secret-at-all", token, &[]).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("invalid_client")),
        "{body}"
    );

    // Foreign and malformed subject tokens, and the wrong token type.
    let now = chrono::Utc::now().timestamp();
    let foreign = {
        let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
        use ed25519_dalek::pkcs8::EncodePrivateKey;
        let der = key.to_pkcs8_der().unwrap();
        let mut header = Header::new(Algorithm::EdDSA);
        // Our key's id, another key's signature.
        header.kid = jsonwebtoken::decode_header(token).unwrap().kid;
        jsonwebtoken::encode(
            &header,
            &json!({"iss": app.url, "sub": "operator", "aud": gateway, "exp": now + 600, "scope": "chat.read chat.write"}),
            &EncodingKey::from_ed_der(der.as_bytes()),
        )
        .unwrap()
    };
    for bad in [foreign.as_str(), "not-a-token", &format!("{token}x")] {
        refused(
            &exchange_as(&app, "maitred-gateway", bad, &[]).await,
            "invalid_grant",
            "not a valid access token of this issuer",
        );
    }
    let other_issuer = signed(
        &app,
        &json!({"iss": "https://elsewhere.example", "sub": "operator", "aud": gateway, "exp": now + 600, "scope": "chat.read"}),
    )
    .await;
    refused(
        &exchange_as(&app, "maitred-gateway", &other_issuer, &[]).await,
        "invalid_grant",
        "not a valid access token of this issuer",
    );
    let response = app
        .http
        .post(format!("{}/oauth2/token", app.url))
        .basic_auth("maitred-gateway", Some(app.secret("maitred-gateway")))
        .form(&[
            ("grant_type", GRANT),
            ("subject_token", token),
            (
                "subject_token_type",
                "urn:ietf:params:oauth:token-type:id_token",
            ),
        ])
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    refused(
        &(status, response.json().await.unwrap()),
        "invalid_request",
        "subject_token_type",
    );

    // Expired.
    let expired = signed(
        &app,
        &json!({"iss": app.url, "sub": "operator", "aud": gateway, "exp": now - 5, "iat": now - 905, "scope": "chat.read chat.write", "client_id": "maitred-web"}),
    )
    .await;
    refused(
        &exchange_as(&app, "maitred-gateway", &expired, &[]).await,
        "invalid_grant",
        "has expired",
    );

    // A chain already two actors deep.
    let deep = signed(
        &app,
        &json!({"iss": app.url, "sub": "operator", "aud": backend, "exp": now + 200, "scope": "backend.read",
                "client_id": "maitred-mcp", "act": {"sub": "maitred-mcp", "act": {"sub": "maitred-gateway"}}}),
    )
    .await;
    refused(
        &exchange(&app, RELAY, RELAY_SECRET, &deep, &[("resource", &gateway)]).await,
        "invalid_grant",
        "at most 2",
    );

    // A token exchanged for its own audience.
    let (status, hop1) = exchange_as(&app, "maitred-gateway", token, &[]).await;
    assert_eq!(status, 200, "{hop1}");
    let hop1_token = hop1["access_token"].as_str().unwrap();
    refused(
        &exchange(&app, RELAY, RELAY_SECRET, hop1_token, &[("resource", &mcp)]).await,
        "invalid_target",
        "its own audience",
    );
    // The same token for another audience the relay may serve goes through.
    let (status, body) = exchange(
        &app,
        RELAY,
        RELAY_SECRET,
        hop1_token,
        &[("audience", &gateway)],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["scope"], "chat.read");

    // Revoked: a replayed refresh token revokes the login, and with it every
    // exchange of its access tokens.
    let refresh = person["refresh_token"].as_str().unwrap();
    let redeem = || async {
        app.http
            .post(format!("{}/oauth2/token", app.url))
            .form(&[
                ("grant_type", "refresh_token"),
                ("client_id", "maitred-web"),
                ("refresh_token", refresh),
            ])
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(redeem().await, 200);
    assert_eq!(redeem().await, 400, "a replay revokes the login");
    refused(
        &exchange_as(&app, "maitred-gateway", token, &[]).await,
        "invalid_grant",
        "login has been revoked",
    );
    // A second hop of that login is refused too.
    refused(
        &exchange_as(&app, "maitred-mcp", hop1_token, &[("resource", &backend)]).await,
        "invalid_grant",
        "login has been revoked",
    );
    app.stop().await;
}
