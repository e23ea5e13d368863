//! The resource-server check against forged and misdirected tokens.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use crate::helpers::{Database, TestApp};

/// The issuer's own private key and kid, read from its database.
async fn signing_key(app: &TestApp) -> (String, EncodingKey, String) {
    let (kid, private, public): (String, String, String) = sqlx::query_as(
        "SELECT kid, private_key, public_key FROM signing_keys ORDER BY created_at LIMIT 1",
    )
    .fetch_one(app.db.pool())
    .await
    .unwrap();
    (
        kid,
        EncodingKey::from_ed_der(&STANDARD.decode(private).unwrap()),
        public,
    )
}

fn claims(app: &TestApp, overrides: Value) -> Value {
    let now = chrono::Utc::now().timestamp();
    let mut claims = json!({
        "iss": app.url, "sub": "maitred-mcp", "aud": app.settings.backend_resource(),
        "exp": now + 300, "iat": now, "scope": "backend.read backend.write", "client_id": "maitred-mcp",
    });
    for (k, v) in overrides.as_object().unwrap() {
        claims[k] = v.clone();
    }
    claims
}

async fn status_with(app: &TestApp, token: &str) -> (u16, String) {
    let response = app.get("/customers?limit=1", token).await;
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, challenge)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_expired_and_misdirected_tokens_are_rejected() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let (kid, key, public) = signing_key(&app).await;
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(kid.clone());
    let sign = |claims: &Value| jsonwebtoken::encode(&header, claims, &key).unwrap();

    // Sanity: a correctly made token passes, so the rejections below are about one thing each.
    assert_eq!(
        status_with(&app, &sign(&claims(&app, json!({})))).await.0,
        200
    );

    let now = chrono::Utc::now().timestamp();
    let cases = [
        (
            "expired",
            sign(&claims(
                &app,
                json!({ "exp": now - 120, "iat": now - 1000 }),
            )),
        ),
        (
            "not yet valid",
            sign(&claims(&app, json!({ "nbf": now + 600 }))),
        ),
        (
            "wrong issuer",
            sign(&claims(&app, json!({ "iss": "http://evil.example" }))),
        ),
        (
            "wrong audience",
            sign(&claims(&app, json!({ "aud": app.settings.mcp_resource() }))),
        ),
        ("no audience", {
            let mut c = claims(&app, json!({}));
            c.as_object_mut().unwrap().remove("aud");
            sign(&c)
        }),
        ("alg none", {
            let head = URL_SAFE_NO_PAD
                .encode(json!({ "alg": "none", "typ": "JWT", "kid": kid }).to_string());
            let body = URL_SAFE_NO_PAD.encode(claims(&app, json!({})).to_string());
            format!("{head}.{body}.")
        }),
        ("HS256 keyed with the public key", {
            let mut hs = Header::new(Algorithm::HS256);
            hs.kid = Some(kid.clone());
            jsonwebtoken::encode(
                &hs,
                &claims(&app, json!({})),
                &EncodingKey::from_secret(public.as_bytes()),
            )
            .unwrap()
        }),
        ("HS256 keyed with the raw public key", {
            let mut hs = Header::new(Algorithm::HS256);
            hs.kid = Some(kid.clone());
            let raw = URL_SAFE_NO_PAD.decode(&public).unwrap();
            jsonwebtoken::encode(
                &hs,
                &claims(&app, json!({})),
                &EncodingKey::from_secret(&raw),
            )
            .unwrap()
        }),
        ("tampered payload", {
            let token = sign(&claims(&app, json!({})));
            let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
            parts[1] = URL_SAFE_NO_PAD.encode(claims(&app, json!({ "sub": "admin" })).to_string());
            parts.join(".")
        }),
        ("unknown kid", {
            let mut other = Header::new(Algorithm::EdDSA);
            other.kid = Some("not-a-key".into());
            jsonwebtoken::encode(&other, &claims(&app, json!({})), &key).unwrap()
        }),
        ("garbage", "not.a.jwt".to_owned()),
    ];
    for (what, token) in cases {
        let (status, challenge) = status_with(&app, &token).await;
        assert_eq!(status, 401, "{what} was accepted");
        assert!(
            challenge.contains("error=\"invalid_token\""),
            "{what}: {challenge}"
        );
    }

    // A real token for another service: the gateway's token is for the MCP server.
    let gateway_token = app.token("maitred-gateway", &[]).await;
    assert_eq!(status_with(&app, &gateway_token).await.0, 401);
    let cli_token = app.token("maitred-cli", &[]).await;
    assert_eq!(status_with(&app, &cli_token).await.0, 401);
    let wrong_scheme = app
        .http
        .get(format!("{}/customers", app.api))
        .header("authorization", format!("Basic {}", STANDARD.encode("a:b")))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_scheme.status(), 401);
    app.stop().await;
}
