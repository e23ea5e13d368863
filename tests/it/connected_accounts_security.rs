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

use std::time::Duration;

use maitred::settings::Settings;
use maitred_scripted_llm::{ToolCallSpec, Turn};
use serde_json::{Value, json};

use crate::connected_accounts::{
    Lab, Started, ask_until_card, call, card_url, connect_then, landed, person, until_card,
};
use crate::helpers::{Database, SseEvent, TestApp, of};
use crate::token_exchange::claims_of;

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

/// `lab.py revoke`: revokes `user`'s refresh tokens for `client` at nanoidp; how many.
fn lab_revoke(lab: &Lab, user: &str, client: &str) -> usize {
    lab.run("revoke", &["--user", user, "--client", client])
        .parse()
        .unwrap()
}

fn results(events: &[SseEvent]) -> Vec<&Value> {
    of(events, "tool_result")
}

/// Authorization codes `client` brought to nanoidp's token endpoint, exchanged or not.
fn codes_redeemed(lab: &Lab, client: &str) -> usize {
    token_requests(lab, client, "authorization_code", "success")
        + token_requests(lab, client, "authorization_code", "failed")
}

/// What the callback page says when the response names another issuer (RFC 9207).
const ANOTHER_ISSUER: &[&str] = &["another authorization server", "iss"];
/// What it says when the response names none.
const NO_ISSUER: &[&str] = &["without naming its authorization server (iss)"];

/// The callback `url`, in the person's browser, is refused with `status` and a page
/// that says each of `says`.
async fn assert_refused(chat: &Started, url: &str, status: u16, says: &[&str]) {
    let (landed, page) = chat.landed(url).await;
    assert_eq!(landed, status, "{page}");
    assert!(says.iter().all(|s| page.contains(s)), "{page}");
}

/// The tool call ended without success (`result`), its summary saying `says`.
fn assert_ended(result: &Value, says: &str) {
    assert_ne!(result["status"], "ok", "{result}");
    let summary = result["summary"].as_str().unwrap();
    assert!(summary.contains(says), "{result}");
}

/// 1a. The person answers the "Connect notes" card with decline: the call ends, the
/// model is told they chose not to connect, and nothing is connected.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn declining_the_card_ends_the_call_and_tells_the_model() {
    let Some(lab) = Lab::from_env() else { return };
    let script = connect_then([Turn::text("Fine, without notes.")]);
    let mut chat = Started::new(&lab, script, "My notes?").await;
    let card = &chat.card;
    assert_eq!(card["connect"]["reason"], "connect", "{card}");
    let (status, body) = answer_card(
        &chat.app,
        &chat.token,
        card["id"].as_str().unwrap(),
        "decline",
    )
    .await;
    assert_eq!(
        (status, &body["status"]),
        (200, &json!("declined")),
        "{body}"
    );

    let events = chat.stream.rest().await;
    assert_eq!(of(&events, "input_resolved")[0]["action"], "decline");
    let result = results(&events)[0];
    assert_eq!(result["id"], chat.card["tool_call_id"], "{result}");
    assert_ended(result, "chose not to connect");
    let told = told_model(&chat.app, "c1");
    assert!(
        told.contains("the person chose not to connect their account at notes"),
        "{told}"
    );
    assert_eq!(accounts(&chat.app).await, vec![], "nothing connected");
    chat.app.stop().await;
}

/// 1b. The authorization server sends the person back with `error=access_denied`
/// (RFC 6749 §4.1.2.1, with its `iss`): the page says it was not connected, the card
/// settles as declined, nothing is connected, and the sign-in is over.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn access_denied_at_the_authorization_server_declines_the_card() {
    let Some(lab) = Lab::from_env() else { return };
    let script = connect_then([Turn::text("Fine, without notes.")]);
    let mut chat = Started::new(&lab, script, "My notes?").await;
    let url = chat.url();
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
    let (status, page) = chat.landed(denied.as_str()).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("notes was not connected"), "{page}");

    let events = chat.stream.rest().await;
    assert_eq!(of(&events, "input_resolved")[0]["action"], "decline");
    let result = results(&events)[0];
    assert_ended(result, "chose not to connect");
    assert_eq!(accounts(&chat.app).await, vec![], "nothing connected");

    // The sign-in is over: the same state cannot connect afterwards.
    let callback = chat.sign_in(&lab, "alice").await;
    assert_refused(&chat, &callback, 400, &["already used"]).await;
    assert_eq!(accounts(&chat.app).await, vec![]);
    chat.app.stop().await;
}

/// 2. A `state` the gateway never issued is refused (400). The real one brought back
/// in another maitred person's browser is refused (403) and ends the sign-in: the same
/// link forwarded back to the person who started it connects nothing (else that
/// person's account would be tied to the third-party account of whoever signed in),
/// and the call that waited is told it was not connected.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn a_forged_state_or_another_persons_browser_is_refused() {
    let Some(lab) = Lab::from_env() else { return };
    let script = connect_then([Turn::text("Fine, without notes.")]);
    // The owner ("operator") asks; another person ("user") has a token of their own.
    let mut chat = Started::new(&lab, script, "Who am I at notes?").await;
    let other = person(&chat.app, "user").await;
    let callback = chat.sign_in(&lab, "alice").await;

    let forged_state = uuid::Uuid::now_v7().simple().to_string();
    let forged = with_param(&callback, "state", Some(&forged_state));
    assert_refused(&chat, &forged, 400, &["this sign-in link is unknown"]).await;
    assert_eq!(accounts(&chat.app).await, vec![]);

    let (status, page) = landed(&chat.app, &callback, &other).await;
    assert_eq!(status, 403, "{page}");
    assert!(page.contains("started by someone else"), "{page}");
    assert_eq!(
        accounts(&chat.app).await,
        vec![],
        "nothing connected for anyone"
    );

    // The forwarded link, in the starter's own browser: the sign-in is over.
    assert_refused(&chat, &callback, 400, &["already used"]).await;
    assert_eq!(accounts(&chat.app).await, vec![], "still nothing connected");
    let client = client_id(&chat.app).await;
    assert_eq!(
        codes_redeemed(&lab, &client),
        0,
        "the code never reached nanoidp"
    );
    let events = chat.stream.rest().await;
    assert_eq!(of(&events, "input_resolved")[0]["action"], "decline");
    assert_ended(results(&events)[0], "chose not to connect");
    chat.app.stop().await;
}

/// 3. The legitimate callback used twice: the second is refused before it reaches the
/// authorization server, and the account stays the one the first made.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn a_replayed_callback_is_refused_and_changes_nothing() {
    let Some(lab) = Lab::from_env() else { return };
    let script = connect_then([Turn::text("Connected.")]);
    let mut chat = Started::new(&lab, script, "Connect notes").await;
    let callback = chat.sign_in(&lab, "alice").await;
    let (status, page) = chat.landed(&callback).await;
    assert_eq!(status, 200, "{page}");
    let events = chat.stream.rest().await;
    assert_eq!(results(&events)[0]["status"], "ok", "{events:?}");
    let first = accounts(&chat.app).await;
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0].generation, 1);
    let client = client_id(&chat.app).await;
    assert_eq!(
        token_requests(&lab, &client, "authorization_code", "success"),
        1
    );

    assert_refused(&chat, &callback, 400, &["already used"]).await;
    assert_eq!(
        accounts(&chat.app).await,
        first,
        "the account is the first one"
    );
    assert_eq!(
        codes_redeemed(&lab, &client),
        1,
        "the replayed code never reached nanoidp"
    );
    chat.app.stop().await;
}

/// 4. RFC 9207: a callback naming another issuer, or none (nanoidp advertises
/// `authorization_response_iss_parameter_supported`), is refused without spending
/// the sign-in (the `iss` is checked before the state is consumed): the untouched
/// callback then connects.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn a_callback_from_another_issuer_or_none_is_refused() {
    let Some(lab) = Lab::from_env() else { return };
    let script = connect_then([call("c2", "notes__whoami"), Turn::text("Done.")]);
    let mut chat = Started::new(&lab, script, "Who am I at notes?").await;
    let callback = chat.sign_in(&lab, "alice").await;
    let issuer = lab.info["issuer"].as_str().unwrap();
    assert_eq!(param(&callback, "iss").as_deref(), Some(issuer));

    let elsewhere = with_param(&callback, "iss", Some("https://idp.attacker.example"));
    assert_refused(&chat, &elsewhere, 400, ANOTHER_ISSUER).await;
    let (_, page) = chat.landed(&elsewhere).await;
    assert!(
        !page.contains("attacker.example"),
        "the page never repeats what a link brought: {page}"
    );
    assert_eq!(accounts(&chat.app).await, vec![]);

    let nameless = with_param(&callback, "iss", None);
    assert_refused(&chat, &nameless, 400, NO_ISSUER).await;
    assert_eq!(accounts(&chat.app).await, vec![]);
    let client = client_id(&chat.app).await;
    assert_eq!(codes_redeemed(&lab, &client), 0, "neither reached nanoidp");

    let (status, page) = chat.landed(&callback).await;
    assert_eq!(status, 200, "{page}");
    let events = chat.stream.rest().await;
    let results = results(&events);
    assert_eq!(results.len(), 2, "{events:?}");
    assert!(results.iter().all(|r| r["status"] == "ok"), "{events:?}");
    assert_eq!(accounts(&chat.app).await.len(), 1);
    chat.app.stop().await;
}

/// 4b. RFC 9207 covers error responses too (§2: "including error responses"; §2.4:
/// the client rejects a response with another `iss`, or none where the server
/// advertises it): an `access_denied` naming another issuer, or none, is refused and
/// does not end the person's sign-in, which then connects.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn a_denial_from_another_issuer_is_refused() {
    let Some(lab) = Lab::from_env() else { return };
    let script = connect_then([Turn::text("Connected.")]);
    let mut chat = Started::new(&lab, script, "Connect notes").await;
    let url = chat.url();
    let callback = chat.sign_in(&lab, "alice").await;
    let mut denied = url::Url::parse(&param(url, "redirect_uri").unwrap()).unwrap();
    denied
        .query_pairs_mut()
        .append_pair("error", "access_denied")
        .append_pair("state", &param(url, "state").unwrap());
    let nameless = denied.to_string();
    let elsewhere = with_param(&nameless, "iss", Some("https://idp.attacker.example"));
    assert_refused(&chat, &elsewhere, 400, ANOTHER_ISSUER).await;
    assert_refused(&chat, &nameless, 400, NO_ISSUER).await;

    let (status, page) = chat.landed(&callback).await;
    assert_eq!(status, 200, "the sign-in goes on: {page}");
    let events = chat.stream.rest().await;
    assert_eq!(of(&events, "input_resolved")[0]["action"], "accept");
    assert_eq!(results(&events)[0]["status"], "ok", "{events:?}");
    chat.app.stop().await;
}

/// 4c. A code the authorization server does not redeem (here: one it never issued,
/// with the right `state` and `iss`): the sign-in is over, the page says so in its
/// own words (never the authorization server's, which a link can steer), and the
/// call that waited is told. The real callback afterwards connects nothing.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn a_code_not_redeemed_ends_the_sign_in_with_a_safe_page() {
    let Some(lab) = Lab::from_env() else { return };
    let script = connect_then([Turn::text("Fine, without notes.")]);
    let mut chat = Started::new(&lab, script, "Connect notes").await;
    let callback = chat.sign_in(&lab, "alice").await;
    let bogus = with_param(&callback, "code", Some("not-a-code-nanoidp-issued"));
    let (status, page) = chat.landed(&bogus).await;
    assert_eq!(status, 502, "{page}");
    assert!(page.contains("did not accept the sign-in"), "{page}");
    for leaked in ["invalid_grant", "not-a-code", "Server returned"] {
        assert!(!page.contains(leaked), "{leaked:?} on the page: {page}");
    }
    let events = chat.stream.rest().await;
    assert_eq!(of(&events, "input_resolved")[0]["action"], "decline");
    assert_refused(&chat, &callback, 400, &["already used"]).await;
    assert_eq!(accounts(&chat.app).await, vec![], "nothing connected");
    chat.app.stop().await;
}

/// 4d. One person starting sign-in after sign-in from the accounts panel: past
/// `MAITRED_SIGN_INS_PER_PERSON` under way, the next is refused (429) and records
/// nothing; another person is not held back; one that comes back frees a place.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn sign_ins_under_way_are_capped_per_person() {
    let Some(lab) = Lab::from_env() else { return };
    let app = crate::connected_accounts::app_with(&lab, &Database::Sqlite, connect_then([]), |s| {
        s.gateway.sign_ins_per_person = 3
    })
    .await;
    let operator = person(&app, "operator").await;
    let start = |token: String| {
        let app = &app;
        async move {
            let response = app
                .gateway_post("/api/v1/resos/accounts/notes/connect", &token, &json!({}))
                .await;
            let status = response.status().as_u16();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let burst: Vec<(u16, Value)> =
        futures::future::join_all((0..8).map(|_| start(operator.clone()))).await;
    let started: Vec<&Value> = burst
        .iter()
        .filter(|(s, _)| *s == 200)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(started.len(), 3, "{burst:?}");
    let refused = burst.iter().find(|(s, _)| *s != 200).unwrap();
    assert_eq!(refused.0, 429, "{refused:?}");
    let (rows,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM account_authorizations WHERE used_at IS NULL")
            .fetch_one(app.db.pool())
            .await
            .unwrap();
    assert_eq!(rows, 3);
    // Someone else starts theirs.
    let (status, body) = start(person(&app, "user").await).await;
    assert_eq!(status, 200, "{body}");
    // One of the operator's comes back: a place is free again.
    let url = started[0]["authorization_url"].as_str().unwrap();
    let callback = lab.sign_in(url, "alice").await;
    let (status, page) = crate::connected_accounts::landed(&app, &callback, &operator).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(start(operator.clone()).await.0, 200);
    assert_eq!(start(operator.clone()).await.0, 429);
    app.stop().await;
}

/// 5. A sign-in link used after `MAITRED_CONNECT_TIMEOUT`: refused as expired before
/// the code is exchanged, and nothing is connected.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn an_expired_sign_in_is_refused() {
    let Some(lab) = Lab::from_env() else { return };
    let script = connect_then([Turn::text("Not connected.")]);
    let expiring = |s: &mut Settings| {
        s.gateway.connect_timeout = Duration::from_secs(1);
        // The card itself waits a little longer, then ends the call.
        s.gateway.input_timeout = Duration::from_secs(6);
    };
    let mut chat = Started::with(&lab, &Database::Sqlite, script, expiring, "Connect notes").await;
    let callback = chat.sign_in(&lab, "alice").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_refused(&chat, &callback, 400, &["expired"]).await;
    assert_eq!(accounts(&chat.app).await, vec![]);
    let client = client_id(&chat.app).await;
    assert_eq!(
        codes_redeemed(&lab, &client),
        0,
        "the code was not exchanged"
    );

    let events = chat.stream.rest().await;
    let result = results(&events)[0];
    assert_ended(result, "did not finish signing in");
    assert_eq!(accounts(&chat.app).await, vec![]);
    chat.app.stop().await;
}

/// 6. The person's refresh token is revoked at nanoidp: the next refresh is refused,
/// the call pauses on a "reconnect" card, and after signing in again it goes on.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn a_revoked_refresh_token_asks_the_person_to_reconnect() {
    let Some(lab) = Lab::from_env() else { return };
    let script = connect_then([
        Turn::text("Connected."),
        call("c2", "notes__whoami"),
        Turn::text("You are alice."),
    ]);
    let mut chat = Started::new(&lab, script, "Connect notes").await;
    chat.connect(&lab, "alice").await;
    let events = chat.stream.rest().await;
    assert_eq!(results(&events)[0]["status"], "ok", "{events:?}");

    let (app, token) = (&chat.app, chat.token.as_str());
    let client = client_id(app).await;
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

    let (mut stream, _, card) = ask_until_card(app, token, "Who am I at notes?").await;
    assert_eq!(card["connect"]["reason"], "reconnect", "{card}");
    assert_eq!(card["tool"], "whoami", "{card}");
    assert_eq!(
        token_requests(&lab, &client, "refresh_token", "failed"),
        failed_before + 1,
        "nanoidp refused one refresh"
    );
    assert_eq!(accounts(app).await, vec![], "the dead account is forgotten");

    let callback = lab.sign_in(card_url(&card), "alice").await;
    assert_eq!(landed(app, &callback, token).await.0, 200);
    let events = stream.rest().await;
    let result = results(&events)[0];
    assert_eq!(result["status"], "ok", "{events:?}");
    assert_eq!(accounts(app).await.len(), 1);
    chat.app.stop().await;
}

/// 7. A tool that needs more than was granted (nanoidp's 403 `insufficient_scope`):
/// a "more access" card asking for `notes:write`, and after the person signs in
/// again the same call goes on with the new scope.
#[tokio::test]
#[ignore = "needs the connected-accounts lab: run by scripts/check-connected-accounts"]
async fn a_tool_needing_more_scope_steps_up_and_goes_on() {
    let Some(lab) = Lab::from_env() else { return };
    let script = connect_then([
        Turn::tool_calls([ToolCallSpec::new(
            "c2",
            "notes__add_note",
            r#"{"text":"x"}"#,
        )]),
        Turn::text("Noted."),
    ]);
    // Nothing reaches notes before the person signs in, so counting from the card
    // counts every call of this test.
    let mut chat = Started::new(&lab, script, "Note x").await;
    let calls_before = lab.log("calls_log").len();
    let scope = param(chat.url(), "scope").unwrap();
    assert!(!scope.contains("notes:write"), "{scope}");
    chat.connect(&lab, "bob").await;
    let (app, token, stream) = (&chat.app, chat.token.as_str(), &mut chat.stream);

    // add_note writes: the person approves it first.
    let approval = stream.until("approval_required").await;
    let id = approval.last().unwrap().data["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let approved = app
        .gateway_post(
            &format!("/api/v1/resos/chat/approvals/{id}"),
            token,
            &json!({ "approve": true }),
        )
        .await;
    assert_eq!(approved.status(), 200);

    let (_, card) = until_card(stream).await;
    assert_eq!(card["connect"]["reason"], "more_access", "{card}");
    assert_eq!(card["tool"], "add_note", "{card}");
    let url = card["url"].as_str().unwrap();
    let scope = param(url, "scope").unwrap();
    assert!(scope.split(' ').any(|s| s == "notes:write"), "{scope}");
    assert!(scope.split(' ').any(|s| s == "notes:read"), "{scope}");
    let callback = lab.sign_in(url, "bob").await;
    assert_eq!(landed(app, &callback, token).await.0, 200);

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
    chat.app.stop().await;
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
    let script = connect_then([
        call("c2", "notes__whoami"),
        Turn::text("You are alice at notes."),
    ]);
    let mut chat = Started::new(&lab, script, "Who am I at notes?").await;
    let page = chat.connect(&lab, "alice").await;
    assert!(!leaks(&page), "{page}");
    let mut events = std::mem::take(&mut chat.events);
    events.extend(chat.stream.rest().await);
    let (app, token) = (&chat.app, chat.token.as_str());
    assert!(
        results(&events).iter().all(|r| r["status"] == "ok"),
        "{events:?}"
    );
    for event in &events {
        let body = event.data.to_string();
        assert!(!leaks(&body), "{}: {body}", event.event);
    }

    let list = app.gateway_get("/api/v1/resos/accounts", token).await;
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
            token,
        )
        .await;
    assert_eq!(view.status(), 200);
    let view = view.text().await.unwrap();
    assert!(view.contains("whoami"), "{view}");
    assert!(!leaks(&view), "{view}");

    let admin = person(app, "admin").await;
    let everyone = app
        .gateway_get("/api/v1/resos/admin/accounts", &admin)
        .await;
    assert_eq!(everyone.status(), 200);
    let everyone = everyone.text().await.unwrap();
    assert!(everyone.contains(&subject_of(token)), "{everyone}");
    assert!(!leaks(&everyone), "{everyone}");
    chat.app.stop().await;
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
    let script = connect_then([
        Turn::text("Connected."),
        call("c2", "notes__connect"),
        Turn::text("Connect first."),
    ]);
    // Alice is the person "operator" connects as; bob, the person "user".
    let mut chat = Started::with(lab, database, script, |_| {}, "Connect notes").await;
    let bob = person(&chat.app, "user").await;
    chat.connect(lab, "alice").await;
    chat.stream.rest().await;
    let (app, alice) = (&chat.app, chat.token.as_str());

    let stored = accounts(app).await;
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
    .bind(subject_of(alice))
    .execute(app.db.pool())
    .await
    .unwrap();
    let calls_before = lab.log("calls_log").len();

    let (mut stream, _, card) = ask_until_card(app, &bob, "My notes?").await;
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
    let (status, _) = answer_card(app, &bob, card["id"].as_str().unwrap(), "decline").await;
    assert_eq!(status, 200);
    stream.rest().await;
    assert_eq!(
        lab.log("calls_log").len(),
        calls_before,
        "nothing was called at notes for bob"
    );
    let after = accounts(app).await;
    let alices = after.iter().find(|r| r.owner == subject_of(alice));
    assert_eq!(alices, Some(&stored[0]), "alice's account is untouched");
    chat.app.stop().await;
}
