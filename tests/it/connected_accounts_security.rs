//! Connected accounts under attack, against the same lab as `connected_accounts.rs`
//! (nanoidp in front of the notes MCP server): each test performs one attack on the
//! sign-in, or one mishap, and shows exactly how it fails safely.
//!
//! - consent declined (on the card, or by the authorization server's error redirect);
//! - a forged `state`, or one brought back in another person's browser;
//! - a replayed callback;
//! - a callback naming another issuer, or none (RFC 9207 `iss`), also on a denial;
//! - a sign-in link used after it expired;
//! - a refresh token revoked at the authorization server;
//! - a step up to more scopes (HTTP 403 `insufficient_scope`);
//! - no token in any answer the API or the stream gives;
//! - tokens sealed at rest, bound to their owner.
//!
//! `scripts/check-connected-accounts` runs them with the lab in `MAITRED_ACCOUNTS_LAB`.

use std::path::PathBuf;
use std::time::Duration;

use maitred_scripted_llm::{Script, ToolCallSpec, Turn};
use serde_json::{Value, json};

use crate::connected_accounts::{Lab, app_with, come_back, person, until_card};
use crate::helpers::{Database, SseEvent, TestApp, of};
use crate::token_exchange::claims_of;

fn call(id: &str, tool: &str) -> Turn {
    Turn::tool_calls([ToolCallSpec::new(id, tool, "{}")])
}

/// The value of `name` in `url`'s query.
fn param(url: &str, name: &str) -> Option<String> {
    url::Url::parse(url)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// `url` with its query parameter `name` set to `value`, or removed (`None`).
fn with_param(url: &str, name: &str, value: Option<&str>) -> String {
    let mut parsed = url::Url::parse(url).unwrap();
    let pairs: Vec<(String, String)> = parsed
        .query_pairs()
        .filter(|(k, _)| k != name)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    {
        let mut query = parsed.query_pairs_mut();
        query.clear();
        for (k, v) in &pairs {
            query.append_pair(k, v);
        }
        if let Some(value) = value {
            query.append_pair(name, value);
        }
    }
    parsed.to_string()
}

/// The maitred subject a chat token names.
fn subject_of(token: &str) -> String {
    claims_of(token)["sub"].as_str().unwrap().to_owned()
}

/// One connected account as stored.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    owner: String,
    credentials: String,
    generation: i64,
}

async fn accounts(app: &TestApp) -> Vec<Row> {
    let rows: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT owner, credentials, generation FROM connected_accounts ORDER BY owner",
    )
    .fetch_all(app.db.pool())
    .await
    .unwrap();
    rows.into_iter()
        .map(|(owner, credentials, generation)| Row {
            owner,
            credentials,
            generation,
        })
        .collect()
}

/// The gateway's client at nanoidp (a dynamic registration, one per gateway database).
async fn client_id(app: &TestApp) -> String {
    let (id,): (String,) = sqlx::query_as("SELECT client_id FROM account_clients")
        .fetch_one(app.db.pool())
        .await
        .unwrap();
    id
}

/// nanoidp's token requests with `grant` and `status` (`success`, `failed`) from
/// `client`, as its audit log has them.
fn token_requests(lab: &Lab, client: &str, grant: &str, status: &str) -> usize {
    lab.log("audit_log")
        .iter()
        .filter(|e| {
            e["event_type"] == "token_request"
                && e["client_id"] == client
                && e["details"]["grant_type"] == grant
                && e["status"] == status
        })
        .count()
}

/// The callback page's status and text.
async fn landed(app: &TestApp, callback: &str, token: &str) -> (u16, String) {
    let response = come_back(app, callback, token).await;
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// The person's answer to an input request (a card), on the inputs API.
async fn answer_card(app: &TestApp, token: &str, id: &str, action: &str) -> (u16, Value) {
    let response = app
        .gateway_post(
            &format!("/api/v1/resos/chat/inputs/{id}"),
            token,
            &json!({ "action": action }),
        )
        .await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The text the model was given for the call `id` on its next turn.
fn told_model(app: &TestApp, id: &str) -> String {
    app.llm
        .as_ref()
        .unwrap()
        .requests()
        .iter()
        .flat_map(|r| r.body["messages"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .map(|m| m["content"].to_string())
        .next_back()
        .unwrap_or_default()
}

/// The lab's python (`lab.py revoke`), in the virtualenv `scripts/lib.sh` makes.
fn lab_python() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let venvs =
        std::env::var("MAITRED_VENV_DIR").map_or_else(|_| root.join(".venv"), PathBuf::from);
    venvs.join("connected-accounts/bin/python")
}

fn lab_revoke(lab: &Lab, user: &str, client: &str) -> usize {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/connected-accounts/lab.py");
    let out = std::process::Command::new(lab_python())
        .arg(script)
        .args(["revoke", "--state-dir"])
        .arg(&lab.dir)
        .args(["--user", user, "--client", client])
        .output()
        .expect("run lab.py revoke");
    assert!(
        out.status.success(),
        "lab.py revoke: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn results(events: &[SseEvent]) -> Vec<&Value> {
    of(events, "tool_result")
}

/// 1a. The person answers the "Connect notes" card with decline: the call ends, the
/// model is told they chose not to connect, and nothing is connected.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn declining_the_card_ends_the_call_and_tells_the_model() {
    let Some(lab) = Lab::from_env() else { return };
    let script = Script::new([
        call("c1", "notes__connect"),
        Turn::text("Fine, without notes."),
    ]);
    let app = app_with(&lab, &Database::Sqlite, script, |_| {}).await;
    let token = person(&app, "operator").await;

    let mut stream = app.ask(&token, "My notes?", None).await;
    let (_, card) = until_card(&mut stream).await;
    assert_eq!(card["connect"]["reason"], "connect", "{card}");
    let (status, body) = answer_card(&app, &token, card["id"].as_str().unwrap(), "decline").await;
    assert_eq!(
        (status, &body["status"]),
        (200, &json!("declined")),
        "{body}"
    );

    let events = stream.rest().await;
    assert_eq!(of(&events, "input_resolved")[0]["action"], "decline");
    let result = results(&events)[0];
    assert_eq!(result["id"], card["tool_call_id"], "{result}");
    assert_ne!(result["status"], "ok", "{result}");
    let summary = result["summary"].as_str().unwrap();
    assert!(summary.contains("chose not to connect"), "{result}");
    let told = told_model(&app, "c1");
    assert!(
        told.contains("the person chose not to connect their account at notes"),
        "{told}"
    );
    assert_eq!(accounts(&app).await, vec![], "nothing connected");
    app.stop().await;
}

/// 1b. The authorization server sends the person back with `error=access_denied`
/// (RFC 6749 §4.1.2.1, with its `iss`): the page says it was not connected, the card
/// settles as declined, nothing is connected, and the sign-in is over.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn access_denied_at_the_authorization_server_declines_the_card() {
    let Some(lab) = Lab::from_env() else { return };
    let script = Script::new([
        call("c1", "notes__connect"),
        Turn::text("Fine, without notes."),
    ]);
    let app = app_with(&lab, &Database::Sqlite, script, |_| {}).await;
    let token = person(&app, "operator").await;

    let mut stream = app.ask(&token, "My notes?", None).await;
    let (_, card) = until_card(&mut stream).await;
    let url = card["url"].as_str().unwrap();
    let state = param(url, "state").expect("a state");
    let redirect = param(url, "redirect_uri").expect("a redirect_uri");
    let issuer = lab.info["issuer"].as_str().unwrap();
    let mut denied = url::Url::parse(&redirect).unwrap();
    denied
        .query_pairs_mut()
        .append_pair("error", "access_denied")
        .append_pair("error_description", "The user denied the request")
        .append_pair("state", &state)
        .append_pair("iss", issuer);
    let (status, page) = landed(&app, denied.as_str(), &token).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("notes was not connected"), "{page}");

    let events = stream.rest().await;
    assert_eq!(of(&events, "input_resolved")[0]["action"], "decline");
    let result = results(&events)[0];
    assert_ne!(result["status"], "ok", "{result}");
    assert!(
        result["summary"]
            .as_str()
            .unwrap()
            .contains("chose not to connect"),
        "{result}"
    );
    assert_eq!(accounts(&app).await, vec![], "nothing connected");

    // The sign-in is over: the same state cannot connect afterwards.
    let callback = lab.sign_in(url, "alice").await;
    let (status, page) = landed(&app, &callback, &token).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("already used"), "{page}");
    assert_eq!(accounts(&app).await, vec![]);
    app.stop().await;
}

/// 2. A `state` the gateway never issued is refused (400), and the real one brought
/// back by another maitred person is refused (403) without spending it: its owner
/// still finishes the sign-in afterwards.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn a_forged_state_or_another_persons_browser_is_refused() {
    let Some(lab) = Lab::from_env() else { return };
    let script = Script::new([
        call("c1", "notes__connect"),
        call("c2", "notes__whoami"),
        Turn::text("Done."),
    ]);
    let app = app_with(&lab, &Database::Sqlite, script, |_| {}).await;
    let owner = person(&app, "operator").await;
    let other = person(&app, "user").await;

    let mut stream = app.ask(&owner, "Who am I at notes?", None).await;
    let (_, card) = until_card(&mut stream).await;
    let callback = lab.sign_in(card["url"].as_str().unwrap(), "alice").await;

    let forged_state = uuid::Uuid::now_v7().simple().to_string();
    let forged = with_param(&callback, "state", Some(&forged_state));
    let (status, page) = landed(&app, &forged, &owner).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("this sign-in link is unknown"), "{page}");
    assert_eq!(accounts(&app).await, vec![]);

    let (status, page) = landed(&app, &callback, &other).await;
    assert_eq!(status, 403, "{page}");
    assert!(page.contains("started by someone else"), "{page}");
    assert_eq!(accounts(&app).await, vec![], "nothing connected for anyone");

    let (status, page) = landed(&app, &callback, &owner).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Connected notes"), "{page}");
    let events = stream.rest().await;
    assert_eq!(of(&events, "input_resolved")[0]["action"], "accept");
    let results = results(&events);
    assert_eq!(results.len(), 2, "{events:?}");
    assert!(results.iter().all(|r| r["status"] == "ok"), "{events:?}");
    let stored = accounts(&app).await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(stored[0].owner, subject_of(&owner));
    app.stop().await;
}

/// 3. The legitimate callback used twice: the second is refused before it reaches the
/// authorization server, and the account stays the one the first made.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn a_replayed_callback_is_refused_and_changes_nothing() {
    let Some(lab) = Lab::from_env() else { return };
    let script = Script::new([call("c1", "notes__connect"), Turn::text("Connected.")]);
    let app = app_with(&lab, &Database::Sqlite, script, |_| {}).await;
    let token = person(&app, "operator").await;

    let mut stream = app.ask(&token, "Connect notes", None).await;
    let (_, card) = until_card(&mut stream).await;
    let callback = lab.sign_in(card["url"].as_str().unwrap(), "alice").await;
    let (status, page) = landed(&app, &callback, &token).await;
    assert_eq!(status, 200, "{page}");
    let events = stream.rest().await;
    assert_eq!(results(&events)[0]["status"], "ok", "{events:?}");
    let first = accounts(&app).await;
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0].generation, 1);
    let client = client_id(&app).await;
    assert_eq!(
        token_requests(&lab, &client, "authorization_code", "success"),
        1
    );

    let (status, page) = landed(&app, &callback, &token).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("already used"), "{page}");
    assert_eq!(accounts(&app).await, first, "the account is the first one");
    assert_eq!(
        token_requests(&lab, &client, "authorization_code", "success")
            + token_requests(&lab, &client, "authorization_code", "failed"),
        1,
        "the replayed code never reached nanoidp"
    );
    app.stop().await;
}

/// 4. RFC 9207: a callback naming another issuer, or none (nanoidp advertises
/// `authorization_response_iss_parameter_supported`), is refused without spending
/// the sign-in (the `iss` is checked before the state is consumed): the untouched
/// callback then connects.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn a_callback_from_another_issuer_or_none_is_refused() {
    let Some(lab) = Lab::from_env() else { return };
    let script = Script::new([
        call("c1", "notes__connect"),
        call("c2", "notes__whoami"),
        Turn::text("Done."),
    ]);
    let app = app_with(&lab, &Database::Sqlite, script, |_| {}).await;
    let token = person(&app, "operator").await;

    let mut stream = app.ask(&token, "Who am I at notes?", None).await;
    let (_, card) = until_card(&mut stream).await;
    let callback = lab.sign_in(card["url"].as_str().unwrap(), "alice").await;
    let issuer = lab.info["issuer"].as_str().unwrap();
    assert_eq!(param(&callback, "iss").as_deref(), Some(issuer));

    let elsewhere = with_param(&callback, "iss", Some("https://idp.attacker.example"));
    let (status, page) = landed(&app, &elsewhere, &token).await;
    assert_eq!(status, 400, "{page}");
    assert!(
        page.contains("another authorization server") && page.contains("iss"),
        "{page}"
    );
    assert_eq!(accounts(&app).await, vec![]);

    let nameless = with_param(&callback, "iss", None);
    let (status, page) = landed(&app, &nameless, &token).await;
    assert_eq!(status, 400, "{page}");
    assert!(
        page.contains("without naming its authorization server (iss)"),
        "{page}"
    );
    assert_eq!(accounts(&app).await, vec![]);
    let client = client_id(&app).await;
    assert_eq!(
        token_requests(&lab, &client, "authorization_code", "success")
            + token_requests(&lab, &client, "authorization_code", "failed"),
        0,
        "neither reached nanoidp"
    );

    let (status, page) = landed(&app, &callback, &token).await;
    assert_eq!(status, 200, "{page}");
    let events = stream.rest().await;
    let results = results(&events);
    assert_eq!(results.len(), 2, "{events:?}");
    assert!(results.iter().all(|r| r["status"] == "ok"), "{events:?}");
    assert_eq!(accounts(&app).await.len(), 1);
    app.stop().await;
}

/// 4b. RFC 9207 covers error responses too (§2: "including error responses"; §2.4:
/// the client rejects a response with another `iss`, or none where the server
/// advertises it): an `access_denied` naming another issuer, or none, is refused and
/// does not end the person's sign-in, which then connects.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn a_denial_from_another_issuer_is_refused() {
    let Some(lab) = Lab::from_env() else { return };
    let script = Script::new([call("c1", "notes__connect"), Turn::text("Connected.")]);
    let app = app_with(&lab, &Database::Sqlite, script, |_| {}).await;
    let token = person(&app, "operator").await;

    let mut stream = app.ask(&token, "Connect notes", None).await;
    let (_, card) = until_card(&mut stream).await;
    let url = card["url"].as_str().unwrap();
    let callback = lab.sign_in(url, "alice").await;
    let mut denied = url::Url::parse(&param(url, "redirect_uri").unwrap()).unwrap();
    denied
        .query_pairs_mut()
        .append_pair("error", "access_denied")
        .append_pair("state", &param(url, "state").unwrap());
    let nameless = denied.to_string();
    let elsewhere = with_param(&nameless, "iss", Some("https://idp.attacker.example"));
    let (status, page) = landed(&app, &elsewhere, &token).await;
    assert_eq!(status, 400, "{page}");
    assert!(
        page.contains("another authorization server") && page.contains("iss"),
        "{page}"
    );
    let (status, page) = landed(&app, &nameless, &token).await;
    assert_eq!(status, 400, "{page}");
    assert!(
        page.contains("without naming its authorization server (iss)"),
        "{page}"
    );

    let (status, page) = landed(&app, &callback, &token).await;
    assert_eq!(status, 200, "the sign-in goes on: {page}");
    let events = stream.rest().await;
    assert_eq!(of(&events, "input_resolved")[0]["action"], "accept");
    assert_eq!(results(&events)[0]["status"], "ok", "{events:?}");
    app.stop().await;
}

/// 5. A sign-in link used after `MAITRED_CONNECT_TIMEOUT`: refused as expired before
/// the code is exchanged, and nothing is connected.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn an_expired_sign_in_is_refused() {
    let Some(lab) = Lab::from_env() else { return };
    let script = Script::new([call("c1", "notes__connect"), Turn::text("Not connected.")]);
    let app = app_with(&lab, &Database::Sqlite, script, |s| {
        s.gateway.connect_timeout = Duration::from_secs(1);
        // The card itself waits a little longer, then ends the call.
        s.gateway.input_timeout = Duration::from_secs(6);
    })
    .await;
    let token = person(&app, "operator").await;

    let mut stream = app.ask(&token, "Connect notes", None).await;
    let (_, card) = until_card(&mut stream).await;
    let callback = lab.sign_in(card["url"].as_str().unwrap(), "alice").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (status, page) = landed(&app, &callback, &token).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("expired"), "{page}");
    assert_eq!(accounts(&app).await, vec![]);
    let client = client_id(&app).await;
    assert_eq!(
        token_requests(&lab, &client, "authorization_code", "success")
            + token_requests(&lab, &client, "authorization_code", "failed"),
        0,
        "the code was not exchanged"
    );

    let events = stream.rest().await;
    let result = results(&events)[0];
    assert_ne!(result["status"], "ok", "{result}");
    assert!(
        result["summary"]
            .as_str()
            .unwrap()
            .contains("did not finish signing in"),
        "{result}"
    );
    assert_eq!(accounts(&app).await, vec![]);
    app.stop().await;
}

/// 6. The person's refresh token is revoked at nanoidp: the next refresh is refused,
/// the call pauses on a "reconnect" card, and after signing in again it goes on.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn a_revoked_refresh_token_asks_the_person_to_reconnect() {
    let Some(lab) = Lab::from_env() else { return };
    let script = Script::new([
        call("c1", "notes__connect"),
        Turn::text("Connected."),
        call("c2", "notes__whoami"),
        Turn::text("You are alice."),
    ]);
    let app = app_with(&lab, &Database::Sqlite, script, |_| {}).await;
    let token = person(&app, "operator").await;

    let mut stream = app.ask(&token, "Connect notes", None).await;
    let (_, card) = until_card(&mut stream).await;
    let callback = lab.sign_in(card["url"].as_str().unwrap(), "alice").await;
    assert_eq!(landed(&app, &callback, &token).await.0, 200);
    let events = stream.rest().await;
    assert_eq!(results(&events)[0]["status"], "ok", "{events:?}");

    let client = client_id(&app).await;
    let failed_before = token_requests(&lab, &client, "refresh_token", "failed");
    assert!(
        lab_revoke(&lab, "alice", &client) >= 1,
        "a refresh token revoked"
    );
    // The access token is due for renewal now.
    sqlx::query("UPDATE connected_accounts SET expires_at = 0")
        .execute(app.db.pool())
        .await
        .unwrap();

    let mut stream = app.ask(&token, "Who am I at notes?", None).await;
    let (_, card) = until_card(&mut stream).await;
    assert_eq!(card["connect"]["reason"], "reconnect", "{card}");
    assert_eq!(card["tool"], "whoami", "{card}");
    assert_eq!(
        token_requests(&lab, &client, "refresh_token", "failed"),
        failed_before + 1,
        "nanoidp refused one refresh"
    );
    assert_eq!(
        accounts(&app).await,
        vec![],
        "the dead account is forgotten"
    );

    let callback = lab.sign_in(card["url"].as_str().unwrap(), "alice").await;
    assert_eq!(landed(&app, &callback, &token).await.0, 200);
    let events = stream.rest().await;
    let result = results(&events)[0];
    assert_eq!(result["status"], "ok", "{events:?}");
    assert_eq!(accounts(&app).await.len(), 1);
    app.stop().await;
}

/// 7. A tool that needs more than was granted (nanoidp's 403 `insufficient_scope`):
/// a "more access" card asking for `notes:write`, and after the person signs in
/// again the same call goes on with the new scope.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn a_tool_needing_more_scope_steps_up_and_goes_on() {
    let Some(lab) = Lab::from_env() else { return };
    let script = Script::new([
        call("c1", "notes__connect"),
        Turn::tool_calls([ToolCallSpec::new(
            "c2",
            "notes__add_note",
            r#"{"text":"x"}"#,
        )]),
        Turn::text("Noted."),
    ]);
    let app = app_with(&lab, &Database::Sqlite, script, |_| {}).await;
    let token = person(&app, "operator").await;
    let calls_before = lab.log("calls_log").len();

    let mut stream = app.ask(&token, "Note x", None).await;
    let (_, card) = until_card(&mut stream).await;
    let scope = param(card["url"].as_str().unwrap(), "scope").unwrap();
    assert!(!scope.contains("notes:write"), "{scope}");
    let callback = lab.sign_in(card["url"].as_str().unwrap(), "bob").await;
    assert_eq!(landed(&app, &callback, &token).await.0, 200);

    // add_note writes: the person approves it first.
    let approval = stream.until("approval_required").await;
    let id = approval.last().unwrap().data["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let approved = app
        .gateway_post(
            &format!("/api/v1/resos/chat/approvals/{id}"),
            &token,
            &json!({ "approve": true }),
        )
        .await;
    assert_eq!(approved.status(), 200);

    let (_, card) = until_card(&mut stream).await;
    assert_eq!(card["connect"]["reason"], "more_access", "{card}");
    assert_eq!(card["tool"], "add_note", "{card}");
    let url = card["url"].as_str().unwrap();
    let scope = param(url, "scope").unwrap();
    assert!(scope.split(' ').any(|s| s == "notes:write"), "{scope}");
    assert!(scope.split(' ').any(|s| s == "notes:read"), "{scope}");
    let callback = lab.sign_in(url, "bob").await;
    assert_eq!(landed(&app, &callback, &token).await.0, 200);

    let events = stream.rest().await;
    assert_eq!(of(&events, "input_resolved")[0]["action"], "accept");
    let result = results(&events)[0];
    assert_eq!(result["id"], card["tool_call_id"], "{result}");
    assert_eq!(result["status"], "ok", "{events:?}");
    let calls: Vec<Value> = lab.log("calls_log").split_off(calls_before);
    let add: Vec<&Value> = calls
        .iter()
        .filter(|c| c["subject"] == "bob" && c["tool"] == "add_note")
        .collect();
    assert_eq!(add.len(), 2, "refused once, then accepted: {calls:?}");
    assert_eq!(add[0]["status"], "insufficient_scope", "{calls:?}");
    assert_eq!(add[1]["status"], "accepted", "{calls:?}");
    assert!(
        add[1]["scopes"].to_string().contains("notes:write"),
        "{calls:?}"
    );
    app.stop().await;
}

/// Whether `text` holds a token (all of them here are JWTs) or names a refresh token.
fn leaks(text: &str) -> bool {
    text.contains("eyJ") || text.contains("refresh_token")
}

/// 8. No answer carries a token: the person's accounts list, the conversation, the
/// admin's list, the callback page, and every event of the answer.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn no_response_carries_a_token() {
    let Some(lab) = Lab::from_env() else { return };
    let script = Script::new([
        call("c1", "notes__connect"),
        call("c2", "notes__whoami"),
        Turn::text("You are alice at notes."),
    ]);
    let app = app_with(&lab, &Database::Sqlite, script, |_| {}).await;
    let token = person(&app, "operator").await;

    let mut stream = app.ask(&token, "Who am I at notes?", None).await;
    let (mut events, card) = until_card(&mut stream).await;
    let callback = lab.sign_in(card["url"].as_str().unwrap(), "alice").await;
    let (status, page) = landed(&app, &callback, &token).await;
    assert_eq!(status, 200);
    assert!(!leaks(&page), "{page}");
    events.extend(stream.rest().await);
    assert!(
        results(&events).iter().all(|r| r["status"] == "ok"),
        "{events:?}"
    );
    for event in &events {
        let body = event.data.to_string();
        assert!(!leaks(&body), "{}: {body}", event.event);
    }

    let list = app.gateway_get("/api/v1/resos/accounts", &token).await;
    assert_eq!(list.status(), 200);
    let list = list.text().await.unwrap();
    assert!(!leaks(&list), "{list}");
    let list: Value = serde_json::from_str(&list).unwrap();
    let notes = &list["accounts"][0];
    assert_eq!(notes["server"], "notes", "{list}");
    assert_eq!(notes["status"], "connected", "{list}");
    let scopes: Vec<&str> = notes["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(scopes.contains(&"notes:read"), "{list}");

    let conversation = of(&events, "meta")[0]["conversation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let view = app
        .gateway_get(
            &format!("/api/v1/resos/conversations/{conversation}"),
            &token,
        )
        .await;
    assert_eq!(view.status(), 200);
    let view = view.text().await.unwrap();
    assert!(view.contains("whoami"), "{view}");
    assert!(!leaks(&view), "{view}");

    let admin = person(&app, "admin").await;
    let everyone = app
        .gateway_get("/api/v1/resos/admin/accounts", &admin)
        .await;
    assert_eq!(everyone.status(), 200);
    let everyone = everyone.text().await.unwrap();
    assert!(everyone.contains(&subject_of(&token)), "{everyone}");
    assert!(!leaks(&everyone), "{everyone}");
    app.stop().await;
}

/// 9. At rest the credentials are sealed (`v1.<kid>.…`, no JWT in sight), and bound
/// to their owner: alice's sealed value copied into bob's row does not open as his,
/// so bob is asked to connect again, and nothing is called at notes as alice for him.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn sealed_credentials_do_not_open_for_another_owner() {
    let Some(lab) = Lab::from_env() else { return };
    Box::pin(sealed_for_their_owner(&lab, &Database::Sqlite)).await;
    // Not `Database::postgres()`: the lab's CI job need not have PostgreSQL.
    if let Some(url) = std::env::var("TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
    {
        Box::pin(sealed_for_their_owner(&lab, &Database::Postgres(url))).await;
    }
}

async fn sealed_for_their_owner(lab: &Lab, database: &Database) {
    let script = Script::new([
        call("c1", "notes__connect"),
        Turn::text("Connected."),
        call("c2", "notes__connect"),
        Turn::text("Connect first."),
    ]);
    let app = app_with(lab, database, script, |_| {}).await;
    let alice = person(&app, "operator").await;
    let bob = person(&app, "user").await;

    let mut stream = app.ask(&alice, "Connect notes", None).await;
    let (_, card) = until_card(&mut stream).await;
    let callback = lab.sign_in(card["url"].as_str().unwrap(), "alice").await;
    assert_eq!(landed(&app, &callback, &alice).await.0, 200);
    stream.rest().await;

    let stored = accounts(&app).await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    let sealed = &stored[0].credentials;
    assert!(sealed.starts_with("v1."), "{sealed}");
    assert_eq!(sealed.split('.').count(), 3, "v1.<kid>.<b64>: {sealed}");
    assert!(!leaks(sealed), "{sealed}");

    // Alice's sealed value, in a row of bob's own.
    sqlx::query(
        "INSERT INTO connected_accounts (owner, server, issuer, client_id, scopes, credentials, \
         key_id, generation, expires_at, connected_at, refreshed_at, refresh_lease_until) \
         SELECT $1, server, issuer, client_id, scopes, credentials, key_id, 1, expires_at, \
         connected_at, NULL, 0 FROM connected_accounts WHERE owner = $2",
    )
    .bind(subject_of(&bob))
    .bind(subject_of(&alice))
    .execute(app.db.pool())
    .await
    .unwrap();
    let calls_before = lab.log("calls_log").len();

    let mut stream = app.ask(&bob, "My notes?", None).await;
    let (_, card) = until_card(&mut stream).await;
    assert_eq!(card["connect"]["server"], "notes", "{card}");
    // The row is there but is no sign-in of bob's: he is asked to connect again.
    assert_eq!(card["connect"]["reason"], "reconnect", "{card}");
    let offered: Vec<String> = app.llm.as_ref().unwrap().requests().last().unwrap().body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect();
    assert!(offered.iter().any(|t| t == "notes__connect"), "{offered:?}");
    assert!(!offered.iter().any(|t| t == "notes__whoami"), "{offered:?}");
    let (status, _) = answer_card(&app, &bob, card["id"].as_str().unwrap(), "decline").await;
    assert_eq!(status, 200);
    stream.rest().await;
    assert_eq!(
        lab.log("calls_log").len(),
        calls_before,
        "nothing was called at notes for bob"
    );
    let after = accounts(&app).await;
    let alices = after.iter().find(|r| r.owner == subject_of(&alice));
    assert_eq!(alices, Some(&stored[0]), "alice's account is untouched");
    app.stop().await;
}
