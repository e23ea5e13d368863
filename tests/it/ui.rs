//! The web UI served by the gateway: files with cache headers and security headers,
//! the app for its own routes, and API paths that stay API 404s.

use std::collections::HashMap;

use reqwest::StatusCode;
use reqwest::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HeaderMap, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS,
};

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
        settings.gateway.ui_dir = Some(dir);
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

/// A Content-Security-Policy as directive name -> its sources, names lower-cased.
fn directives(headers: &HeaderMap) -> HashMap<String, Vec<String>> {
    let csp = headers
        .get(CONTENT_SECURITY_POLICY)
        .expect("a Content-Security-Policy header")
        .to_str()
        .expect("an ASCII policy");
    let mut map = HashMap::new();
    for directive in csp.split(';').map(str::trim).filter(|d| !d.is_empty()) {
        let mut parts = directive.split_ascii_whitespace();
        let name = parts.next().expect("a directive name").to_ascii_lowercase();
        let sources: Vec<String> = parts.map(str::to_owned).collect();
        assert!(
            map.insert(name.clone(), sources).is_none(),
            "{name} twice in {csp}: browsers ignore the second"
        );
    }
    map
}

/// The security headers every UI response carries (security finding #4): a strict
/// policy so that nothing in an answer can load or send anything off this origin.
fn assert_hardened(what: &str, headers: &HeaderMap) {
    let csp = directives(headers);
    let sources = |name: &str| -> Vec<&str> {
        csp.get(name)
            .unwrap_or_else(|| panic!("{what}: no {name} in {csp:?}"))
            .iter()
            .map(String::as_str)
            .collect()
    };
    // Anything not allowed below is refused.
    assert_eq!(sources("default-src"), ["'none'"], "{what}");
    assert_eq!(sources("script-src"), ["'self'"], "{what}");
    assert_eq!(sources("style-src"), ["'self'"], "{what}");
    // No remote images and no data: images: a URL in an answer is never fetched.
    assert_eq!(sources("img-src"), ["'self'"], "{what}");
    assert_eq!(sources("connect-src"), ["'self'"], "{what}");
    assert_eq!(sources("object-src"), ["'none'"], "{what}");
    assert_eq!(sources("base-uri"), ["'none'"], "{what}");
    assert_eq!(sources("form-action"), ["'none'"], "{what}");
    assert_eq!(sources("frame-ancestors"), ["'none'"], "{what}");
    for (name, list) in &csp {
        for source in list {
            assert!(
                !matches!(
                    source.as_str(),
                    "*" | "'unsafe-inline'" | "'unsafe-eval'" | "data:" | "http:" | "https:"
                ),
                "{what}: {name} allows {source}"
            );
        }
    }
    assert_eq!(headers[X_CONTENT_TYPE_OPTIONS], "nosniff", "{what}");
    assert_eq!(headers[REFERRER_POLICY], "no-referrer", "{what}");
}

#[tokio::test]
async fn every_ui_response_has_a_strict_csp_nosniff_and_no_referrer() {
    let (app, _ui) = app_with_ui().await;
    let get = |path: &str| app.http.get(format!("{}{path}", app.gateway_url)).send();

    for path in [
        "/",
        "/index.html",
        "/c/01J9ZX",
        "/assets/app-3f9a.js",
        "/favicon.svg",
    ] {
        let response = get(path).await.expect("response");
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert_hardened(path, response.headers());
    }
}

#[tokio::test]
async fn the_not_built_page_is_hardened_too() {
    // A binary with no UI answers a page of its own; it gets the same policy.
    let empty = tempfile::tempdir().expect("temp dir");
    let dir = empty.path().to_owned();
    let app = TestApp::spawn_with(&Database::Sqlite, move |settings| {
        settings.gateway.ui_dir = Some(dir);
    })
    .await;
    let response = app
        .http
        .get(format!("{}/", app.gateway_url))
        .send()
        .await
        .expect("response");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_hardened("the not-built page", response.headers());
    assert!(response.text().await.expect("body").contains("not built"));
}
