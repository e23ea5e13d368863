//! The backend decides by the person: a delegated token (the person as `sub`, the
//! clients acting for them in `act`) may write only if the person's role may, and
//! every write records who it was for and through whom, in the booking and in the
//! append-only audit.

use chrono::{Datelike, Duration, Utc, Weekday};
use serde_json::{Value, json};

use std::collections::BTreeMap;

use maitred::settings::gateway_file::RolePolicy;
use maitred_scripted_llm::{Script, ToolCallSpec, Turn};
use rmcp::model::{
    CallToolRequestParams, ReadResourceRequestParams, RequestMetaObject, ResourceContents,
};

use crate::helpers::{Database, Llm, TestApp, of};
use crate::mcp::{MODERN, call, connect, initialize, open_day, post, text};
use crate::on_both_databases;
use crate::token_exchange::{exchange_as, person_tokens, signed};

on_both_databases!(
    the_backend_writes_only_as_a_person_who_may,
    an_admins_mcp_client_reads_the_write_audit,
    only_trusted_clients_may_bring_delegated_tokens,
    our_mcp_server_reaches_the_backend_as_the_person,
);

/// `username`'s token for the backend, as the MCP role would get it: the person's
/// token exchanged by the gateway for the MCP server, then by the MCP role for the
/// backend.
async fn backend_token_of(app: &TestApp, username: &str) -> String {
    let hop1 = mcp_token_of(app, username).await;
    let (status, hop2) = exchange_as(
        app,
        "maitred-mcp",
        &hop1,
        &[("resource", &app.settings.backend_resource())],
    )
    .await;
    assert_eq!(status, 200, "{hop2}");
    hop2["access_token"].as_str().unwrap().to_owned()
}

fn booking(name: &str) -> Value {
    let mut date = Utc::now().date_naive() + Duration::days(4);
    if date.weekday() == Weekday::Mon {
        date += Duration::days(1);
    }
    json!({ "date": date.to_string(), "time": "19:00", "people": 2,
            "guest": { "name": name, "email": "guest@example.net" } })
}

async fn audit(app: &TestApp, token: &str, query: &str) -> reqwest::Response {
    app.get(&format!("/audit{query}"), token).await
}

async fn the_backend_writes_only_as_a_person_who_may(database: &Database) {
    let app = TestApp::spawn(database).await;

    // A USER's delegated token reads, and is refused every write by the backend itself.
    let user = backend_token_of(&app, "user").await;
    assert_eq!(app.get("/customers?limit=1", &user).await.status(), 200);
    let refused = app
        .post_json("/bookings", &user, &booking("Uma's Guest"))
        .await;
    assert_eq!(refused.status(), 403);
    let challenge = refused.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        challenge.contains("error=\"insufficient_scope\""),
        "{challenge}"
    );
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["code"], "AUTHORIZATION_ERROR", "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("user may read but not write"),
        "{body}"
    );

    // An OPERATOR's writes are made, and say for whom and through whom.
    let operator = backend_token_of(&app, "operator").await;
    let created = app
        .http
        .post(format!("{}/bookings", app.api))
        .bearer_auth(&operator)
        .header("maitred-tool-call-id", "call_7f3a")
        .json(&booking("Oscar's Guest"))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 200);
    let created: Value = created.json().await.unwrap();
    let id = created["_id"].as_str().unwrap().to_owned();
    let updated = app
        .put_json(
            &format!("/bookings/{id}"),
            &operator,
            &json!({ "people": 3 }),
        )
        .await;
    assert_eq!(updated.status(), 200);
    let (created_by, created_via, updated_by, updated_via): (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    ) = sqlx::query_as(
        "SELECT created_by, created_via, updated_by, updated_via FROM bookings WHERE id = $1",
    )
    .bind(&id)
    .fetch_one(app.db.pool())
    .await
    .unwrap();
    assert_eq!(created_by.as_deref(), Some("operator"));
    assert_eq!(created_via.as_deref(), Some("maitred-mcp maitred-gateway"));
    assert_eq!(updated_by.as_deref(), Some("operator"));
    assert_eq!(updated_via.as_deref(), Some("maitred-mcp maitred-gateway"));

    // The MCP role acting as itself (client credentials) still writes, as itself.
    let own = app.backend_token().await;
    let mine = app
        .post_json("/bookings", &own, &booking("Client Guest"))
        .await;
    assert_eq!(mine.status(), 200);
    let mine: Value = mine.json().await.unwrap();

    // The audit: ADMIN only, newest first, every write with its person and actors.
    let admin = backend_token_of(&app, "admin").await;
    assert_eq!(audit(&app, &operator, "").await.status(), 403);
    assert_eq!(audit(&app, &own, "").await.status(), 403);
    let rows: Value = audit(&app, &admin, &format!("?resourceId={id}"))
        .await
        .json()
        .await
        .unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0]["action"], "booking.update");
    assert_eq!(rows[1]["action"], "booking.create");
    for row in rows {
        assert_eq!(row["person"], "operator");
        assert_eq!(row["actors"], json!(["maitred-mcp", "maitred-gateway"]));
        assert_eq!(row["resourceType"], "booking");
        assert_eq!(row["resourceId"], id.as_str());
    }
    assert_eq!(rows[1]["toolCallId"], "call_7f3a");
    assert_eq!(rows[0]["toolCallId"], Value::Null);
    let by_client: Value = audit(&app, &admin, "?person=maitred-mcp")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(by_client[0]["resourceId"], mine["_id"]);
    assert_eq!(by_client[0]["actors"], json!([]));
    // A refused write left no row.
    let by_user: Value = audit(&app, &admin, "?person=user")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(by_user, json!([]));

    // Append-only, whoever asks the database.
    for statement in [
        "UPDATE write_audit SET person = 'someone else'",
        "DELETE FROM write_audit",
    ] {
        let result = sqlx::query(statement).execute(app.db.pool()).await;
        assert!(result.is_err(), "{statement} must be refused");
    }
    let count: (i64,) = sqlx::query_as("SELECT COUNT(*) FROM write_audit")
        .fetch_one(app.db.pool())
        .await
        .unwrap();
    assert_eq!(count.0, 3);
    app.stop().await;
}

/// The gateway's token for the MCP server, acting for `username`.
pub(crate) async fn mcp_token_of(app: &TestApp, username: &str) -> String {
    let person = person_tokens(app, username, "openid chat.read chat.write").await;
    let (status, hop1) = exchange_as(
        app,
        "maitred-gateway",
        person["access_token"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(status, 200, "{hop1}");
    hop1["access_token"].as_str().unwrap().to_owned()
}

async fn authors(app: &TestApp, id: &str) -> (Option<String>, Option<String>) {
    sqlx::query_as("SELECT created_by, created_via FROM bookings WHERE id = $1")
        .bind(id)
        .fetch_one(app.db.pool())
        .await
        .unwrap()
}

async fn our_mcp_server_reaches_the_backend_as_the_person(database: &Database) {
    let app = TestApp::spawn(database).await;
    let date = open_day(5);
    let booking = |name: &str, time: &str| json!({ "date": date, "time": time, "people": 2, "guestName": name, "guestEmail": "guest@example.org" });

    // The operator, through the gateway's delegated token: the booking is theirs.
    let operator = connect(&app, &mcp_token_of(&app, "operator").await, MODERN).await;
    let times = call(
        &operator,
        "getAvailableTimes",
        json!({ "date": date, "people": 2 }),
    )
    .await;
    let times = times.structured_content.unwrap()["times"]
        .as_array()
        .unwrap()
        .clone();
    let time = |i: usize| times[i].as_str().unwrap().to_owned();
    let mut meta = RequestMetaObject::default();
    meta.insert("maitred/toolCallId".to_owned(), json!("call_mcp_1"));
    let mut params = CallToolRequestParams::new("createBooking").with_arguments(
        booking("Operator's Guest", &time(0))
            .as_object()
            .cloned()
            .unwrap(),
    );
    params.meta = Some(meta);
    let created = operator.call_tool(params).await.unwrap();
    assert_eq!(created.is_error, Some(false), "{}", text(&created));
    let id = created.structured_content.unwrap()["_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        authors(&app, &id).await,
        (
            Some("operator".into()),
            Some("maitred-mcp maitred-gateway".into())
        )
    );
    let admin = backend_token_of(&app, "admin").await;
    let rows: Value = audit(&app, &admin, &format!("?resourceId={id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(rows[0]["toolCallId"], "call_mcp_1", "{rows}");
    assert_eq!(rows[0]["actors"], json!(["maitred-mcp", "maitred-gateway"]));

    // A USER's delegated token passes the MCP server (it has mcp.write), and the
    // backend itself refuses the write.
    let user = connect(&app, &mcp_token_of(&app, "user").await, MODERN).await;
    let refused = call(&user, "createBooking", booking("User's Guest", &time(1))).await;
    assert_eq!(refused.is_error, Some(true), "{}", text(&refused));
    assert!(
        text(&refused).contains("may read but not write"),
        "{}",
        text(&refused)
    );
    let read = call(&user, "getTables", json!({})).await;
    assert_eq!(read.is_error, Some(false), "{}", text(&read));

    // The gateway as itself (client credentials): the MCP role writes as itself.
    let own = connect(&app, &app.token("maitred-gateway", &[]).await, MODERN).await;
    let created = call(&own, "createBooking", booking("Client's Guest", &time(2))).await;
    assert_eq!(created.is_error, Some(false), "{}", text(&created));
    let id = created.structured_content.unwrap()["_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(authors(&app, &id).await, (Some("maitred-mcp".into()), None));
    for client in [operator, user, own] {
        client.cancel().await.unwrap();
    }
    app.stop().await;
}

/// A person's token for the chat API: they signed in at the web client.
pub(crate) async fn chat_token_of(app: &TestApp, username: &str) -> String {
    person_tokens(app, username, "openid profile chat.read chat.write").await["access_token"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn booking_call(id: &str, guest: &str) -> ToolCallSpec {
    ToolCallSpec::new(
        id,
        "resos__createBooking",
        json!({ "date": open_day(6), "time": "18:00", "people": 2, "guestName": guest, "guestEmail": crate::chat::email(guest) })
            .to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_booking_asked_for_in_the_chat_is_made_as_the_person() {
    let script = Script::new([
        Turn::tool_calls([booking_call("call_1", "Delegated Dora")]),
        Turn::text("Booked."),
        Turn::tool_calls([booking_call("call_2", "Refused Rita")]),
        Turn::text("I could not book."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        // The gateway's policy opened: a USER may call write tools.
        s.gateway.file.policy = BTreeMap::from([(
            "USER".to_owned(),
            RolePolicy {
                write_tools: true,
                deny: Vec::new(),
            },
        )]);
    })
    .await;

    let operator = chat_token_of(&app, "operator").await;
    let events = app.ask_and_approve(&operator, "Book Dora in").await;
    let result = &of(&events, "tool_result")[0];
    assert_eq!(result["status"], "ok", "{events:?}");
    let admin = backend_token_of(&app, "admin").await;
    let rows: Value = audit(&app, &admin, "?person=operator")
        .await
        .json()
        .await
        .unwrap();
    let row = &rows.as_array().unwrap()[0];
    assert_eq!(row["action"], "booking.create");
    assert_eq!(row["actors"], json!(["maitred-mcp", "maitred-gateway"]));
    // The card says whom the call is made as.
    assert_eq!(of(&events, "tool_call")[0]["acting_as"], "Oscar Operator");
    // The tool call id the gateway gave the call reaches the backend's audit.
    assert_eq!(row["toolCallId"], of(&events, "tool_call")[0]["id"]);
    let id = row["resourceId"].as_str().unwrap();
    assert_eq!(
        authors(&app, id).await,
        (
            Some("operator".into()),
            Some("maitred-mcp maitred-gateway".into())
        )
    );

    // A USER, past the opened gateway policy: the backend itself refuses.
    let user = chat_token_of(&app, "user").await;
    let events = app.ask_and_approve(&user, "Book Rita in").await;
    let result = &of(&events, "tool_result")[0];
    assert_eq!(result["status"], "error", "{events:?}");
    assert!(
        result["summary"]
            .as_str()
            .unwrap()
            .contains("may read but not write"),
        "{result}"
    );
    let rita: Value = app
        .get_json(
            "/bookings?customQuery=guest.name = 'Refused Rita'",
            &app.backend_token().await,
        )
        .await;
    assert_eq!(rita, json!([]));
    app.stop().await;
}

async fn only_trusted_clients_may_bring_delegated_tokens(database: &Database) {
    let app = TestApp::spawn(database).await;
    let now = chrono::Utc::now().timestamp();
    let delegated = |actor: &str| {
        json!({ "iss": app.url, "sub": "operator", "aud": app.mcp_url, "exp": now + 120, "iat": now,
                "scope": "mcp.read mcp.write", "roles": ["OPERATOR"], "client_id": actor,
                "act": { "sub": actor } })
    };
    // The gateway (trusted by default) is let in; a client the role does not trust is
    // not, however valid its token.
    let trusted = signed(&app, &delegated("maitred-gateway")).await;
    assert_eq!(
        post(&app, Some(&trusted), None, initialize())
            .await
            .status(),
        200
    );
    let intruder = signed(&app, &delegated("some-other-app")).await;
    let refused = post(&app, Some(&intruder), None, initialize()).await;
    assert_eq!(refused.status(), 401);
    let challenge = refused.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(challenge.contains("invalid_token"), "{challenge}");
    assert!(challenge.contains("maitred-gateway"), "{challenge}");
    app.stop().await;
}

/// Two people asking at once, each several questions: every write reaches the
/// backend as the person whose answer made it. The gateway keeps exchanged tokens per
/// subject token, so a mix-up would show as a row audited for the other person.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn people_asking_at_once_reach_the_backend_as_themselves() {
    const PER_PERSON: usize = 3;
    let people = ["operator", "admin"];
    let mut turns = Vec::new();
    for i in 0..PER_PERSON * people.len() {
        let guest = format!("Concurrent Guest {i}");
        turns.push(Turn::tool_calls([ToolCallSpec::new(
            format!("call_{i}"),
            "resos__createBooking",
            json!({ "date": open_day(3 + i64::try_from(i).unwrap()), "time": "18:00", "people": 2,
                    "guestName": guest, "guestEmail": crate::chat::email(&guest) })
            .to_string(),
        )]));
    }
    for _ in 0..PER_PERSON * people.len() {
        turns.push(Turn::text("Done."));
    }
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(Script::new(turns)), |s| {
        // No approvals to click through: the operator vouches for the tool (the
        // answers take the script's turns in whatever order they come).
        let mut server = crate::helpers::own_mcp_server(s, "resos");
        server.read_only_tools = vec!["createBooking".into()];
        s.gateway.file.mcp_servers = vec![server];
    })
    .await;
    let mut tokens = Vec::new();
    for person in people {
        tokens.push((person, chat_token_of(&app, person).await));
    }
    let shared = &app;
    let mut asks = Vec::new();
    for (person, token) in &tokens {
        for _ in 0..PER_PERSON {
            asks.push(async move {
                let events = shared.ask(token, "Book one more", None).await.rest().await;
                (*person, events)
            });
        }
    }
    let answers = futures::future::join_all(asks).await;

    let admin = backend_token_of(&app, "admin").await;
    let rows: Value = audit(&app, &admin, "").await.json().await.unwrap();
    let person_of_call = |id: &Value| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["toolCallId"] == *id)
            .map(|r| r["person"].as_str().unwrap().to_owned())
    };
    let mut writes = 0;
    for (person, events) in &answers {
        for call in of(events, "tool_call") {
            assert_eq!(
                person_of_call(&call["id"]).as_deref(),
                Some(*person),
                "the call {} of {person}'s answer",
                call["id"]
            );
            writes += 1;
        }
    }
    assert_eq!(writes, PER_PERSON * people.len());
    app.stop().await;
}

/// A person whose login is revoked asks nothing more, though their own access token
/// has minutes left: the gateway refuses the token, and the issuer the exchange the
/// tools would need (the delegated tokens already issued lapse within
/// `MAITRED_DELEGATED_TOKEN_TTL`, 2 s here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_login_stops_reaching_the_tools_within_the_delegated_lifetime() {
    let tables = || {
        Turn::tool_calls([ToolCallSpec::new(
            "call_t",
            "resos__getTables",
            "{}".to_owned(),
        )])
    };
    let script = Script::new([
        tables(),
        Turn::text("Here are the tables."),
        tables(),
        Turn::text("I could not look."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        s.identity.delegated_token_ttl = std::time::Duration::from_secs(2);
    })
    .await;
    let person = person_tokens(&app, "operator", "openid profile chat.read chat.write").await;
    let token = person["access_token"].as_str().unwrap();
    let first = app.ask(token, "Which tables?", None).await.rest().await;
    assert_eq!(of(&first, "tool_result")[0]["status"], "ok", "{first:?}");

    // The login is revoked at the issuer: its refresh token replayed.
    let refresh = person["refresh_token"].as_str().unwrap();
    for expected in [200, 400] {
        let status = app
            .http
            .post(format!("{}/oauth2/token", app.url))
            .form(&[
                ("grant_type", "refresh_token"),
                ("client_id", "maitred-web"),
                ("refresh_token", refresh),
            ])
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status.as_u16(), expected);
    }
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;

    // The gateway shares the issuer's database: the revoked login's token is refused
    // at the door (issue 37, finding 9), before any tool is reached.
    let second = app
        .http
        .post(format!("{}/api/v1/resos/stream/chat", app.gateway_url))
        .bearer_auth(token)
        .json(&serde_json::json!({ "question": "Which tables now?" }))
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 401);
    let body: Value = second.json().await.unwrap();
    assert!(body.to_string().contains("revoked"), "{body}");
    // And the exchange the tools would need is refused by the issuer itself.
    let (status, refused) = exchange_as(&app, "maitred-gateway", token, &[]).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused.to_string().contains("revoked"), "{refused}");
    app.stop().await;
}

/// The write audit is an MCP resource too, read as the caller's person: an ADMIN's MCP
/// client reads it, an OPERATOR's is refused by the backend.
async fn an_admins_mcp_client_reads_the_write_audit(database: &Database) {
    let app = TestApp::spawn(database).await;
    let operator = connect(&app, &mcp_token_of(&app, "operator").await, MODERN).await;
    let date = open_day(5);
    let times = call(
        &operator,
        "getAvailableTimes",
        json!({ "date": date, "people": 2 }),
    )
    .await;
    let time = times.structured_content.unwrap()["times"][0].clone();
    let created = call(
        &operator,
        "createBooking",
        json!({ "date": date, "time": time, "people": 2, "guestName": "Audited Guest", "guestEmail": "audited@example.org" }),
    )
    .await;
    assert_eq!(created.is_error, Some(false), "{}", text(&created));
    let id = created.structured_content.unwrap()["_id"].clone();

    let listed = operator.list_all_resources().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].uri, "maitred://audit/writes");
    let refused = operator
        .read_resource(ReadResourceRequestParams::new("maitred://audit/writes"))
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("ADMIN"), "{refused}");

    let admin = connect(&app, &mcp_token_of(&app, "admin").await, MODERN).await;
    let read = admin
        .read_resource(ReadResourceRequestParams::new("maitred://audit/writes"))
        .await
        .unwrap();
    let ResourceContents::TextResourceContents {
        text, mime_type, ..
    } = &read.contents[0]
    else {
        panic!("{read:?}")
    };
    assert_eq!(mime_type.as_deref(), Some("application/json"));
    let rows: Value = serde_json::from_str(text).unwrap();
    assert_eq!(rows[0]["resourceId"], id);
    assert_eq!(rows[0]["person"], "operator");
    let missing = admin
        .read_resource(ReadResourceRequestParams::new("maitred://nothing"))
        .await
        .unwrap_err()
        .to_string();
    assert!(missing.contains("no resource"), "{missing}");
    for client in [operator, admin] {
        client.cancel().await.unwrap();
    }
    app.stop().await;
}
