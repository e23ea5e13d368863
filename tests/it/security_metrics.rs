//! `/metrics` tells anyone who can read it how the service is used (routes, rates,
//! model errors, who is connected where in counts). With `MAITRED_METRICS_TOKEN` set,
//! every role answers a scrape only with that bearer token; unset (the default run),
//! it stays open for a scrape network, as before.

use crate::helpers::{Database, TestApp};

const SCRAPE_TOKEN: &str = "scrape-token-0123456789abcdef";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_scrape_token_metrics_answer_only_the_scraper() {
    let app = TestApp::spawn_with(&Database::Sqlite, |s| {
        s.metrics_token = Some(SCRAPE_TOKEN.to_owned().into());
    })
    .await;
    let mcp_base = app.mcp_url.trim_end_matches("/mcp").to_owned();
    for base in [&app.url, &app.gateway_url, &mcp_base] {
        let url = format!("{base}/metrics");
        for (what, bearer) in [
            ("no token", None),
            ("a wrong token", Some("scrape-token-0123456789abcdeX")),
            ("a prefix of it", Some("scrape-token")),
        ] {
            let mut request = app.http.get(&url);
            if let Some(bearer) = bearer {
                request = request.bearer_auth(bearer);
            }
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 401, "{url} with {what}");
            let body = response.text().await.unwrap();
            assert!(!body.contains("maitred_"), "{url} with {what}: {body}");
        }
        let response = app
            .http
            .get(&url)
            .bearer_auth(SCRAPE_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{url}");
        let body = response.text().await.unwrap();
        assert!(body.contains("maitred_http_requests"), "{url}: {body}");
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_scrape_token_metrics_stay_open_for_the_default_run() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let response = app
        .http
        .get(format!("{}/metrics", app.gateway_url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    app.stop().await;
}
