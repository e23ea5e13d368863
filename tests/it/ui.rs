//! The web UI served by the gateway: files with cache headers, the app for its own
//! routes, and API paths that stay API 404s.

use reqwest::StatusCode;
use reqwest::header::{CACHE_CONTROL, CONTENT_TYPE};

use crate::helpers::{Database, TestApp};

const INDEX: &str = "<!doctype html><div id=root></div><script src=/assets/app-3f9a.js></script>";

async fn app_with_ui() -> (TestApp, tempfile::TempDir) {
    let ui = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(ui.path().join("assets")).expect("assets dir");
    std::fs::write(ui.path().join("index.html"), INDEX).expect("index");
    std::fs::write(ui.path().join("assets/app-3f9a.js"), "console.log(1)").expect("asset");
    std::fs::write(ui.path().join("favicon.svg"), "<svg/>").expect("icon");
    let dir = ui.path().to_owned();
    let app = TestApp::spawn_with(&Database::Sqlite, move |settings| {
        settings.gateway_role.ui_dir = Some(dir);
    })
    .await;
    (app, ui)
}

#[tokio::test]
async fn the_ui_is_served_with_cache_headers_and_client_routes() {
    let (app, _ui) = app_with_ui().await;
    let get = |path: &str| app.http.get(format!("{}{path}", app.gateway_url)).send();

    let index = get("/").await.expect("index");
    assert_eq!(index.status(), StatusCode::OK);
    assert_eq!(index.headers()[CACHE_CONTROL], "no-cache");
    assert_eq!(index.headers()[CONTENT_TYPE], "text/html");
    assert_eq!(index.text().await.expect("body"), INDEX);

    let asset = get("/assets/app-3f9a.js").await.expect("asset");
    assert_eq!(asset.status(), StatusCode::OK);
    assert_eq!(
        asset.headers()[CACHE_CONTROL],
        "public, max-age=31536000, immutable"
    );
    assert_eq!(asset.headers()[CONTENT_TYPE], "text/javascript");

    let icon = get("/favicon.svg").await.expect("icon");
    assert_eq!(icon.headers()[CONTENT_TYPE], "image/svg+xml");
    assert_eq!(icon.headers()[CACHE_CONTROL], "no-cache");

    // A conversation's address loads the app, which routes itself.
    let route = get("/c/01J9ZX").await.expect("client route");
    assert_eq!(route.status(), StatusCode::OK);
    assert_eq!(route.text().await.expect("body"), INDEX);
}

#[tokio::test]
async fn missing_files_and_api_paths_are_not_the_app() {
    let (app, _ui) = app_with_ui().await;
    let get = |path: &str| app.http.get(format!("{}{path}", app.gateway_url)).send();

    for path in [
        "/assets/gone-1234.js",
        "/robots.txt",
        "/api/v1/resos/nothing",
        "/assets/%2e%2e/%2e%2e/Cargo.toml",
        "/%2e%2e/Cargo.toml",
    ] {
        let response = get(path).await.expect("response");
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
        let body = response.text().await.expect("body");
        assert!(!body.contains("<div id=root>"), "{path} answered the app");
    }
    // Writes to an unknown path are not answered with a page either.
    let post = app
        .http
        .post(format!("{}/c/01J9ZX", app.gateway_url))
        .send()
        .await
        .expect("post");
    assert!(post.status().is_client_error());
}
