//! Attacks on the gateway's browser login, its sessions and its tool approvals, each
//! performed as an attacker would and shown to fail.

use std::time::Duration;

use maitred::settings::mcp_servers::ServerConfig;
use maitred_scripted_llm::{Script, ToolCallSpec, Turn};
use serde_json::{Value, json};

use crate::browser::{Browser, SignedIn};
use crate::helpers::{Database, Llm, SseEvent, SseReader, TestApp, of, own_mcp_server};

/// Login CSRF: the attacker signs in as themselves, stops before the callback and
/// sends its URL to a victim. The victim's browser did not start that login: refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_url_opened_in_another_browser_signs_nobody_in() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let attacker = Browser::new();
    let callback = attacker.sign_in_until_callback(&app, "user", None).await;

    let victim = Browser::new();
    let opened = victim.get(&callback).await;
    assert_eq!(opened.status(), 400);
    assert!(
        opened
            .headers()
            .get("set-cookie")
            .is_none_or(|c| !c.to_str().unwrap().starts_with("maitred_session=")),
        "no session for the victim"
    );
    let page = opened.text().await.unwrap();
    assert!(page.contains("Start the sign-in again"), "{page}");
    assert_eq!(victim.status(&app).await["authenticated"], false);

    // A victim who had started a sign-in of their own is not fooled either.
    let busy_victim = Browser::new();
    let own = busy_victim.get(&format!("{}/login", app.gateway_url)).await;
    assert_eq!(own.status(), 303);
    assert_eq!(busy_victim.get(&callback).await.status(), 400);
    assert_eq!(busy_victim.status(&app).await["authenticated"], false);

    // The browser that started the sign-in finishes it.
    let landed = attacker.get(&callback).await;
    assert_eq!(landed.status(), 303);
    assert_eq!(attacker.status(&app).await["authenticated"], true);
    app.stop().await;
}

/// `return_to` values that browsers resolve to another origin end at the gateway's
/// home page after sign-in. (The whole table is in the unit tests of `login.rs`; these
/// go through the real sign-in.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_returns_only_to_the_gateways_own_pages() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let long = format!("/{}", "x".repeat(4096));
    for (return_to, expected) in [
        ("/\t/evil.example", "/"),
        ("/\\evil.example", "/"),
        ("//evil.example", "/"),
        ("https:evil.example", "/"),
        ("javascript:alert(1)", "/"),
        (long.as_str(), "/"),
        ("/c/abc?x=1", "/c/abc?x=1"),
    ] {
        let browser = Browser::new();
        let callback = browser
            .sign_in_until_callback(&app, "user", Some(return_to))
            .await;
        let landed = browser.get(&callback).await;
        assert_eq!(landed.status(), 303);
        assert_eq!(
            landed.headers()["location"],
            expected,
            "return_to {return_to:?}"
        );
    }
    app.stop().await;
}

/// Over https the login's cookies carry the `__Host-` prefix: Secure, the whole site,
/// no Domain, so a sibling subdomain cannot plant or overwrite them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_https_the_login_cookies_are_host_only_and_secure() {
    let app = TestApp::spawn_with(&Database::Sqlite, |s| {
        s.gateway.endpoint.public_url = format!("https://127.0.0.1:{}", s.gateway.endpoint.port);
    })
    .await;
    let login = Browser::new()
        .get(&format!("{}/login", app.gateway_url))
        .await;
    assert_eq!(login.status(), 303);
    let cookie = login.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.starts_with("__Host-maitred_login="), "{cookie}");
    for attribute in ["Secure", "HttpOnly", "Path=/", "SameSite=Lax", "Max-Age="] {
        assert!(cookie.contains(attribute), "{attribute} in {cookie}");
    }
    assert!(!cookie.contains("Domain"), "{cookie}");
    app.stop().await;
}

/// Makes the session's access token lapse, so its next use refreshes it.
async fn lapse(app: &TestApp) {
    sqlx::query("UPDATE browser_sessions SET access_expires_at = 0")
        .execute(app.db.pool())
        .await
        .unwrap();
}

async fn sessions(app: &TestApp) -> i64 {
    let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM browser_sessions")
        .fetch_one(app.db.pool())
        .await
        .unwrap();
    count
}

/// Sign-out by flooding: the identity provider's per-address budget is spent by
/// anyone, and the gateway refreshes everybody's sessions from its one address. A
/// refresh answered 429 is temporary: the session stays, the browser is told when to
/// come back, and then it works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flooding_the_identity_provider_signs_nobody_out() {
    // Ten a minute: a burst of five, then one every six seconds, so the flood keeps
    // the budget spent however slowly this machine runs it.
    let app = TestApp::spawn_with(&Database::Sqlite, |s| {
        s.identity.rate_limit_per_minute = 10;
    })
    .await;
    let SignedIn { browser, .. } = Browser::new().sign_in(&app, "user").await;
    lapse(&app).await;

    let mut refused = 0;
    for _ in 0..200 {
        let flood = app
            .http
            .post(format!("{}/oauth2/token", app.url))
            .form(&[
                ("grant_type", "refresh_token"),
                ("client_id", "maitred-web"),
            ])
            .send()
            .await
            .unwrap();
        if flood.status() == 429 {
            refused += 1;
        }
    }
    assert!(refused > 150, "the flood reached the limit ({refused})");

    let during = browser
        .get(&format!("{}/api/v1/resos/conversations", app.gateway_url))
        .await;
    assert_eq!(during.status(), 503);
    let wait: u64 = during.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=300).contains(&wait), "{wait}");
    assert_eq!(sessions(&app).await, 1, "the session is kept");

    // The budget refills (one every six seconds): the session works again.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let after = browser
        .get(&format!("{}/api/v1/resos/conversations", app.gateway_url))
        .await;
    assert_eq!(after.status(), 200);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateways_sign_in_endpoints_are_rate_limited_per_address() {
    let app = TestApp::spawn_with(&Database::Sqlite, |s| {
        s.identity.rate_limit_per_minute = 10;
    })
    .await;
    let browser = Browser::new();
    let mut statuses = Vec::new();
    for _ in 0..40 {
        let response = browser
            .get(&format!(
                "{}/login/callback?code=guess&state=guess",
                app.gateway_url
            ))
            .await;
        statuses.push(response.status().as_u16());
        if response.status() == 429 {
            assert!(response.headers().contains_key("retry-after"));
        }
    }
    assert!(statuses.contains(&429), "{statuses:?}");
    let login = browser.get(&format!("{}/login", app.gateway_url)).await;
    assert_eq!(login.status(), 429, "/login shares the budget");
    app.stop().await;
}

/// Two requests of one browser that both find the access token lapsed refresh it
/// once: the same refresh token used twice looks like theft to the identity provider,
/// which would end the login.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_refresh_a_session_once() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let SignedIn { browser, .. } = Browser::new().sign_in(&app, "user").await;
    let url = format!("{}/api/v1/resos/conversations", app.gateway_url);
    for round in 0..3 {
        lapse(&app).await;
        let requests = (0..8).map(|_| browser.get(&url));
        for response in futures::future::join_all(requests).await {
            assert_eq!(response.status(), 200, "round {round}");
        }
    }
    assert_eq!(browser.status(&app).await["authenticated"], true);
    app.stop().await;
}

fn call(id: &str, tool: &str, arguments: Value) -> ToolCallSpec {
    ToolCallSpec::new(id, tool, arguments.to_string())
}

fn booking() -> ToolCallSpec {
    let date = (chrono::Utc::now().date_naive() + chrono::Duration::days(3)).to_string();
    call(
        "book_1",
        "resos__createBooking",
        json!({ "date": date, "time": "18:00", "people": 2, "guestName": "Rita Role", "guestEmail": "rita.role@example.com" }),
    )
}

async fn ask_as(signed_in: &SignedIn, app: &TestApp, question: &str) -> SseReader {
    let response = signed_in
        .browser
        .http
        .post(format!("{}/api/v1/resos/stream/chat", app.gateway_url))
        .header("x-csrf-token", &signed_in.csrf)
        .json(&json!({ "question": question }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    SseReader::new(response)
}

/// With no policy configured, a person with only the USER role may read but not
/// change data; an OPERATOR may, once they approve the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_users_cannot_write_and_operators_write_with_approval() {
    let script = Script::new([
        Turn::tool_calls([booking()]),
        Turn::text("I could not book."),
        Turn::tool_calls([booking()]),
        Turn::text("Waiting for you."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |_| {}).await;

    let user = Browser::new().sign_in(&app, "user").await;
    let events = ask_as(&user, &app, "Book a table").await.rest().await;
    assert!(of(&events, "approval_required").is_empty());
    let result = of(&events, "tool_result")[0];
    assert_eq!(result["status"], "denied", "{result}");
    let offered = &app.llm.as_ref().unwrap().requests()[0].body["tools"];
    assert!(
        !offered.to_string().contains("resos__createBooking"),
        "not even offered to the model"
    );

    let operator = Browser::new().sign_in(&app, "operator").await;
    let mut stream = ask_as(&operator, &app, "Book a table").await;
    let asked = stream.until("approval_required").await;
    assert_eq!(asked.last().unwrap().event, "approval_required");
    let id = asked.last().unwrap().data["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let denied = operator
        .browser
        .http
        .post(format!(
            "{}/api/v1/resos/chat/approvals/{id}",
            app.gateway_url
        ))
        .header("x-csrf-token", &operator.csrf)
        .json(&json!({ "approve": false }))
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status(), 200);
    stream.rest().await;
    app.stop().await;
}

/// A server whose annotations call a tool read-only: believed only when the operator
/// trusts the server; otherwise every call waits for approval.
fn third_party(app_settings: &maitred::settings::Settings) -> ServerConfig {
    let mut server = own_mcp_server(app_settings, "thirdparty");
    server.trust_annotations = false;
    server
}

async fn ask_for_tables(tweak: impl FnOnce(&mut ServerConfig)) -> Vec<SseEvent> {
    let script = Script::new([
        Turn::tool_calls([call("t1", "thirdparty__getTables", json!({ "limit": 1 }))]),
        Turn::text("Done."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        let mut server = third_party(s);
        tweak(&mut server);
        s.gateway.file.mcp_servers = vec![server];
    })
    .await;
    let token = app.chat_token().await;
    let mut stream = app.ask(&token, "How many tables?", None).await;
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        if event.event == "approval_required" {
            let id = event.data["id"].as_str().unwrap().to_owned();
            app.gateway_post(
                &format!("/api/v1/resos/chat/approvals/{id}"),
                &token,
                &json!({ "approve": false }),
            )
            .await;
        }
        let done = event.event == "done";
        events.push(event);
        if done {
            break;
        }
    }
    app.stop().await;
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_third_party_server_cannot_skip_approval_by_calling_its_tools_read_only() {
    // It says getTables is read-only; nobody vouched for it: the person is asked.
    let events = Box::pin(ask_for_tables(|_| {})).await;
    assert_eq!(of(&events, "approval_required").len(), 1);
    assert_eq!(of(&events, "tool_result")[0]["status"], "denied");

    // The operator vouches for it: it runs without asking.
    let events = Box::pin(ask_for_tables(|s| s.read_only_tools = vec!["get*".into()])).await;
    assert!(of(&events, "approval_required").is_empty());
    assert_eq!(of(&events, "tool_result")[0]["status"], "ok");

    // A trusted server's read-only tool can still be put behind approval.
    let events = Box::pin(ask_for_tables(|s| {
        s.trust_annotations = true;
        s.require_approval = vec!["getTables".into()];
    }))
    .await;
    assert_eq!(of(&events, "approval_required").len(), 1);
}
