//! Bad input gets the resOS envelope with the right status, and loses nothing.

use serde_json::{Value, json};

use crate::helpers::{Database, TestApp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_the_resos_envelope() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let token = app.backend_token().await;
    let send = |body: &'static str, content_type: &'static str| {
        app.http
            .post(format!("{}/bookings", app.api))
            .bearer_auth(&token)
            .header("content-type", content_type)
            .body(body)
    };
    let cases: Vec<(reqwest::RequestBuilder, u16, &str, &str)> = vec![
        (
            send("{\"date\": ", "application/json"),
            400,
            "INVALID_REQUEST",
            "not valid JSON",
        ),
        (
            send("{\"date\" \"x\"}", "application/json"),
            400,
            "INVALID_REQUEST",
            "not valid JSON",
        ),
        (
            send("[1, 2]", "application/json"),
            400,
            "VALIDATION_ERROR",
            "expected",
        ),
        (
            send(
                r#"{"date":"2030-01-01","time":"19:00","people":"two","guest":{"name":"Ann"}}"#,
                "application/json",
            ),
            400,
            "VALIDATION_ERROR",
            "people",
        ),
        (
            send(
                r#"{"date":"2030-01-01","time":"19:00","people":2}"#,
                "application/json",
            ),
            400,
            "VALIDATION_ERROR",
            "guest",
        ),
        (
            send(
                r#"{"date":"tomorrow","time":"7pm","people":0,"guest":{"name":"A","phone":"123"}}"#,
                "application/json",
            ),
            400,
            "VALIDATION_ERROR",
            "fields are invalid",
        ),
        (
            send(r#"{"date":"2030-01-01"}"#, "text/plain"),
            415,
            "INVALID_REQUEST",
            "application/json",
        ),
    ];
    for (request, status, code, message) in cases {
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), status);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], code, "{body}");
        assert!(
            body["message"].as_str().unwrap().contains(message),
            "{body}"
        );
    }

    let invalid = send(
        r#"{"date":"tomorrow","time":"7pm","people":0,"guest":{"name":"A","phone":"123"}}"#,
        "application/json",
    )
    .send()
    .await
    .unwrap()
    .json::<Value>()
    .await
    .unwrap();
    let fields: Vec<&str> = invalid["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        ["date", "time", "people", "guest.name", "guest.phone"]
    );

    let oversized = format!(
        r#"{{"date":"2030-01-01","comment":"{}"}}"#,
        "x".repeat(100_000)
    );
    let response = app
        .http
        .post(format!("{}/bookings", app.api))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(oversized)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], "INVALID_REQUEST");
    assert!(
        body["message"].as_str().unwrap().contains("65536"),
        "{body}"
    );

    for path in [
        "/customers/nope",
        "/bookings/nope",
        "/feedback/nope",
        "/opening-hours/nope",
    ] {
        let response = app.get(path, &token).await;
        assert_eq!(response.status(), 404, "{path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], "RESOURCE_NOT_FOUND", "{body}");
    }
    let missing = app
        .put_json("/bookings/nope", &token, &json!({ "status": "approved" }))
        .await;
    assert_eq!(missing.status(), 404);

    let no_route = app.get("/nothing-here", &token).await;
    assert_eq!(no_route.status(), 404);
    assert_eq!(
        no_route.json::<Value>().await.unwrap()["code"],
        "RESOURCE_NOT_FOUND"
    );
    let wrong_method = app
        .http
        .delete(format!("{}/customers", app.api))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_method.status(), 405);
    assert_eq!(
        wrong_method.json::<Value>().await.unwrap()["code"],
        "INVALID_REQUEST"
    );

    // Nothing was written by any of it.
    let bookings = app
        .get_json("/bookings?customQuery=date = 2030-01-01", &token)
        .await;
    assert_eq!(bookings, json!([]));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_readiness() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let health: Value = app
        .http
        .get(format!("{}/healthz", app.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");
    let ready = app
        .http
        .get(format!("{}/readyz", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    assert!(ready.headers().contains_key("x-request-id"));
    app.db.close().await;
    let unready = app
        .http
        .get(format!("{}/readyz", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(unready.status(), 503);
    app.stop().await;
}

/// An error that echoes input must never be read as HTML: every role's answers, JSON
/// and streams alike, say `nosniff`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_answers_with_nosniff() {
    let app = TestApp::spawn_with(&Database::Sqlite, |_| {}).await;
    for url in [
        format!("{}/customers/<script>", app.api),
        format!("{}/mcp", app.mcp_url.trim_end_matches("/mcp")),
        format!("{}/healthz", app.url),
        format!("{}/api/v1/resos/conversations", app.gateway_url),
    ] {
        let response = app.http.get(&url).send().await.unwrap();
        assert_eq!(
            response.headers()["x-content-type-options"],
            "nosniff",
            "{url}"
        );
    }
    app.stop().await;
}
