//! The second round of attacks on the browser login (issue 22, findings 1 and 6d):
//! a `return_to` whose dot segments resolve to another host, and words of an
//! attacker's choosing on the sign-in error page. Each performed as an attacker
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

/// Finding 6d: anyone can send a person to `/login/callback?error=…` with words of
/// their choosing, and the page showed them under the gateway's name. Now it shows a
/// fixed text of ours for the error code, and none of the sender's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sign_in_error_page_shows_none_of_the_senders_words() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let lure = "Your account is locked. Call +1 555 0100 or visit evil.example to unlock it";
    for (error, expected) in [
        ("access_denied", "The sign-in was cancelled or refused."),
        (
            "temporarily_unavailable",
            "The identity provider could not complete the sign-in just now; try again shortly.",
        ),
        (
            "login_required",
            "The identity provider needs you to sign in again.",
        ),
        (lure, "The identity provider did not complete the sign-in."),
    ] {
        let mut url = Url::parse(&format!("{}/login/callback", app.gateway_url)).unwrap();
        url.query_pairs_mut()
            .append_pair("error", error)
            .append_pair("error_description", lure)
            .append_pair("state", "whatever");
        let page = Browser::new().get(url.as_str()).await;
        assert_eq!(page.status(), 400, "{error}");
        assert_eq!(page.headers()["cache-control"], "no-store");
        let body = page.text().await.unwrap();
        assert!(body.contains(expected), "{error}: {body}");
        assert!(body.contains("Start the sign-in again"), "{body}");
        for word in ["locked", "555", "evil.example", "unlock"] {
            assert!(!body.contains(word), "{error}: {word:?} shown in {body}");
        }
    }
    app.stop().await;
}
