//! Life behind a reverse proxy: the client address comes from the forwarding header
//! only when the TCP peer is a trusted proxy.

use maitred::http::client_ip::{ForwardedHeader, TrustedProxies};

use crate::helpers::{Database, TestApp};

/// Token requests with a wrong secret from `forwarded_for`: their statuses.
async fn token_attempts(app: &TestApp, forwarded_for: &[&str]) -> Vec<u16> {
    let mut statuses = Vec::new();
    for address in forwarded_for {
        let response = app
            .http
            .post(format!("{}/oauth2/token", app.url))
            .header("x-forwarded-for", *address)
            .basic_auth("maitred-cli", Some("a wrong secret"))
            .form(&[("grant_type", "client_credentials")])
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    statuses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_auth_rate_limit_is_per_forwarded_client_only_behind_a_trusted_proxy() {
    // One request a minute, a burst of five: the sixth from one address is refused.
    let behind_proxy = TestApp::spawn_with(&Database::Sqlite, |s| {
        s.identity.rate_limit_per_minute = 1;
        s.trusted_proxies =
            TrustedProxies::parse(&["127.0.0.1".into()], ForwardedHeader::XForwardedFor).unwrap();
    })
    .await;
    let first = token_attempts(&behind_proxy, &["198.51.100.1"; 6]).await;
    assert_eq!(first, [401, 401, 401, 401, 401, 429]);
    // Another client behind the same proxy has its own budget; a client prepending an
    // address of its choice is still itself.
    assert_eq!(
        token_attempts(&behind_proxy, &["198.51.100.2"]).await,
        [401]
    );
    assert_eq!(
        token_attempts(&behind_proxy, &["203.0.113.5, 198.51.100.1"]).await,
        [429]
    );
    behind_proxy.stop().await;

    // With no trusted proxy, a client rotating X-Forwarded-For is one address (which
    // the roles' own token requests at start-up share: it may be refused earlier).
    let direct = TestApp::spawn_with(&Database::Sqlite, |s| {
        s.identity.rate_limit_per_minute = 1;
    })
    .await;
    let spoofed = [
        "198.51.100.1",
        "198.51.100.2",
        "198.51.100.3",
        "198.51.100.4",
        "198.51.100.5",
        "198.51.100.6",
    ];
    let statuses = token_attempts(&direct, &spoofed).await;
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    direct.stop().await;
}
