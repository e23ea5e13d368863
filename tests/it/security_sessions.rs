//! A browser session keeps the person's refresh and access tokens server-side: at
//! rest they are sealed with the keys that seal connected accounts, bound to their
//! row, so the database (a dump, a backup, a read-only SQL injection elsewhere) holds
//! no token anyone can use; and tokens an earlier version kept in clear are sealed
//! at the next start.

use serde_json::{Value, json};

use crate::browser::Browser;
use crate::helpers::{Database, SseReader, TestApp, answer};
use crate::on_both_databases;

on_both_databases!(a_sessions_tokens_are_sealed_at_rest);

async fn tokens_at_rest(app: &TestApp) -> Vec<(Option<String>, Option<String>)> {
    sqlx::query_as("SELECT refresh_token, access_token FROM browser_sessions")
        .fetch_all(app.db.pool())
        .await
        .unwrap()
}

fn sealed(value: Option<&String>) -> bool {
    value.is_some_and(|v| v.starts_with("v1.") && !v.contains("eyJ"))
}

async fn a_sessions_tokens_are_sealed_at_rest(database: &Database) {
    let app = TestApp::spawn(database).await;
    let signed_in = Browser::new().sign_in(&app, "operator").await;
    let rows = tokens_at_rest(&app).await;
    assert_eq!(rows.len(), 1);
    let (refresh, access) = &rows[0];
    assert!(sealed(refresh.as_ref()), "{refresh:?}");
    assert!(sealed(access.as_ref()), "{access:?}");

    // The session works, down to a tool call made with the person's own token.
    let ask = |browser: &Browser, csrf: String| {
        let http = browser.http.clone();
        let url = format!("{}/api/v1/resos/stream/chat", app.gateway_url);
        async move {
            let response = http
                .post(url)
                .header("x-csrf-token", csrf)
                .json(&json!({ "question": "How many tables are there?" }))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            SseReader::new(response).rest().await
        }
    };
    let events = ask(&signed_in.browser, signed_in.csrf.clone()).await;
    assert!(answer(&events).contains("20"), "{}", answer(&events));

    // A session an earlier version stored with its tokens in clear is sealed at the
    // next start, and still stands.
    sqlx::query("UPDATE browser_sessions SET refresh_token = $1")
        .bind("legacy-refresh-token-in-clear")
        .execute(app.db.pool())
        .await
        .unwrap();
    let app = app.restart().await;
    let rows = tokens_at_rest(&app).await;
    assert_eq!(rows.len(), 1);
    let (refresh, access) = &rows[0];
    assert!(sealed(refresh.as_ref()), "{refresh:?}");
    assert!(
        !refresh.as_ref().unwrap().contains("legacy-refresh"),
        "{refresh:?}"
    );
    assert!(sealed(access.as_ref()), "{access:?}");
    let status: Value = signed_in
        .browser
        .get(&format!("{}/api/auth/status", app.gateway_url))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(status["authenticated"], true, "{status}");
    app.stop().await;
}
