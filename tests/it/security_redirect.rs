//! The second round of attacks on the browser login (issue 22, finding 1): a
//! `return_to` whose dot segments resolve to another host. Performed as an attacker
//! would, and shown to fail.

use reqwest::Url;

use crate::browser::Browser;
use crate::helpers::{Database, TestApp};

/// Where a browser goes with `location` from the gateway: resolved as it resolves it.
fn followed(app: &TestApp, location: &str) -> Url {
    Url::parse(&app.gateway_url)
        .unwrap()
        .join(location)
        .unwrap()
}

/// Finding 1: `return_to=/..//evil.example/phish`, then a real sign-in. The value was
/// checked for a leading `//` before its dot segments were resolved, and returned
/// after, as `Location: //evil.example/phish`. Now the callback sends the browser to
/// the gateway's home page, signed in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_return_to_that_resolves_to_another_host_lands_on_the_gateway() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let ours = Url::parse(&app.gateway_url).unwrap().origin();
    for return_to in [
        "/..//evil.example/phish",
        "/.//evil.example/phish",
        "/a/..//evil.example/phish",
        "/%2e%2e//evil.example/phish",
        "/%2E%2E//evil.example/phish",
        "/%2e%2E//evil.example/phish",
        "/.%2e//evil.example/phish",
        "/%2e//evil.example/phish",
        "/a/%2e%2e//evil.example/phish",
        "/..%2f/evil.example/phish",
        "/%2e%2e%2f%2fevil.example/phish",
        "/%252e%252e//evil.example/phish",
        "/..\\evil.example/phish",
        "/%5C%5Cevil.example/phish",
    ] {
        let browser = Browser::new();
        let callback = browser
            .sign_in_until_callback(&app, "user", Some(return_to))
            .await;
        let landed = browser.get(&callback).await;
        assert_eq!(landed.status(), 303, "return_to {return_to:?}");
        let location = landed.headers()["location"].to_str().unwrap().to_owned();
        assert_eq!(location, "/", "return_to {return_to:?}");
        assert_eq!(
            followed(&app, &location).origin(),
            ours,
            "return_to {return_to:?}"
        );
        assert_eq!(browser.status(&app).await["authenticated"], true);
    }

    // Dot segments that stay on the site still take the person where they asked.
    let browser = Browser::new();
    let callback = browser
        .sign_in_until_callback(&app, "user", Some("/c/x/../%2e%2e/c/abc?y=1"))
        .await;
    let landed = browser.get(&callback).await;
    assert_eq!(landed.headers()["location"], "/c/abc?y=1");
    app.stop().await;
}

/// The value is checked again on the way out: a login attempt whose stored
/// `return_to` names another host (written before this check existed, or by anything
/// else) still lands on the gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_return_to_is_checked_again_at_the_callback() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let browser = Browser::new();
    let callback = browser
        .sign_in_until_callback(&app, "user", Some("/c/abc"))
        .await;
    sqlx::query("UPDATE login_attempts SET return_to = $1")
        .bind("//evil.example/phish")
        .execute(app.db.pool())
        .await
        .unwrap();
    let landed = browser.get(&callback).await;
    assert_eq!(landed.status(), 303);
    assert_eq!(landed.headers()["location"], "/");
    app.stop().await;
}
