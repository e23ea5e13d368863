//! The chat gateway end to end: the browser/curl-facing SSE contract, the tool loop
//! against the real MCP role and backend, with the offline model or a scripted
//! OpenAI-compatible upstream.

use std::time::Duration;

use maitred_scripted_llm::{Script, ToolCallSpec, Turn};
use serde_json::{Value, json};

use crate::browser::Browser;
use crate::helpers::{Database, Llm, SseEvent, TestApp, answer};

fn names(events: &[SseEvent]) -> Vec<&str> {
    events.iter().map(|e| e.event.as_str()).collect()
}

fn of<'a>(events: &'a [SseEvent], name: &str) -> Vec<&'a SseEvent> {
    events.iter().filter(|e| e.event == name).collect()
}

fn open_day(days: i64) -> String {
    let mut date = chrono::Utc::now().date_naive() + chrono::Duration::days(days);
    if chrono::Datelike::weekday(&date) == chrono::Weekday::Mon {
        date += chrono::Duration::days(1);
    }
    date.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offline_model_counts_the_customers() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let token = app.chat_token().await;
    let events = app
        .ask(&token, "How many customers do we have?", None)
        .await
        .rest()
        .await;
    let kinds = names(&events);
    assert_eq!(kinds.first(), Some(&"meta"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"done"), "{kinds:?}");
    assert!(
        kinds.contains(&"tool_call") && kinds.contains(&"tool_result") && kinds.contains(&"token"),
        "{kinds:?}"
    );
    let meta = &events[0].data;
    assert!(
        meta["model"].as_str().unwrap().contains("offline"),
        "{meta}"
    );
    assert!(meta["conversation_id"].is_string() && meta["message_id"].is_string());
    let call = of(&events, "tool_call")[0];
    assert_eq!(call.data["server"], "resos");
    assert_eq!(call.data["tool"], "getCustomers");
    assert!(!call.data["title"].as_str().unwrap().is_empty());
    assert_eq!(of(&events, "tool_result")[0].data["status"], "ok");
    let text = answer(&events);
    assert!(text.contains("60"), "{text}");
    assert_eq!(events.last().unwrap().data["finish_reason"], "stop");
    // Ids are sequence numbers, in order, from 1.
    let ids: Vec<u64> = events.iter().map(|e| e.id.unwrap()).collect();
    assert_eq!(ids, (1..=events.len() as u64).collect::<Vec<_>>());
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_parallel_tool_calls_with_fragmented_arguments() {
    let script = Script::new([
        Turn::tool_calls([
            ToolCallSpec::new("call_a", "resos__getCustomers", r#"{"limit":1}"#),
            ToolCallSpec::new(
                "call_b",
                "resos__getTables",
                r#"{"limit":2,"sort":"name:asc"}"#,
            ),
        ])
        .argument_pieces(4),
        Turn::text("We have 60 customers and 20 tables."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |_| {}).await;
    let token = app.chat_token().await;
    let events = app
        .ask(&token, "How many customers and tables?", None)
        .await
        .rest()
        .await;
    let calls = of(&events, "tool_call");
    assert_eq!(calls.len(), 2, "{:?}", names(&events));
    assert_eq!(calls[0].data["tool"], "getCustomers");
    assert_eq!(
        calls[1].data["arguments"],
        json!({ "limit": 2, "sort": "name:asc" })
    );
    let results = of(&events, "tool_result");
    assert!(
        results.iter().all(|r| r.data["status"] == "ok"),
        "{results:?}"
    );
    assert_eq!(answer(&events), "We have 60 customers and 20 tables.");

    // What the model was sent back: both results, each answering its own call.
    let requests = app.llm.as_ref().unwrap().requests();
    assert_eq!(requests.len(), 2);
    let first = &requests[0].body;
    assert_eq!(first["stream"], true);
    assert_eq!(first["stream_options"]["include_usage"], true);
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered.len(), 16);
    assert_eq!(offered[0], "resos__getCustomers");
    let messages = requests[1].body["messages"].as_array().unwrap();
    let tool_messages: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_messages.len(), 2);
    assert_eq!(tool_messages[0]["tool_call_id"], "call_a");
    let customers: Value =
        serde_json::from_str(tool_messages[0]["content"].as_str().unwrap()).unwrap();
    assert_eq!(customers["total"], 60);
    assert_eq!(tool_messages[1]["tool_call_id"], "call_b");
    assert!(of(&events, "usage").len() == 1);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_turn_conversation_uses_its_history() {
    let script = Script::new([
        Turn::text("Hello Ada."),
        Turn::text("You asked me your name."),
        Turn::text("Your name is Ada."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |_| {}).await;
    let token = app.chat_token().await;
    let first = app.ask(&token, "Hi, I am Ada.", None).await.rest().await;
    let conversation = first[0].data["conversation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.ask(&token, "What did I just ask?", Some(&conversation))
        .await
        .rest()
        .await;
    let third = app
        .ask(&token, "What is my name?", Some(&conversation))
        .await
        .rest()
        .await;
    assert_eq!(third[0].data["conversation_id"], conversation.as_str());
    assert_eq!(answer(&third), "Your name is Ada.");

    let sent = &app.llm.as_ref().unwrap().requests()[2].body["messages"];
    let turns: Vec<(String, String)> = sent
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        turns,
        [
            ("user".into(), "Hi, I am Ada.".into()),
            ("assistant".into(), "Hello Ada.".into()),
            ("user".into(), "What did I just ask?".into()),
            ("assistant".into(), "You asked me your name.".into()),
            ("user".into(), "What is my name?".into()),
        ]
    );
    let stored: Value = app
        .gateway_get(
            &format!("/api/v1/resos/conversations/{conversation}"),
            &token,
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(stored["messages"].as_array().unwrap().len(), 6);
    let list: Value = app
        .gateway_get("/api/v1/resos/conversations", &token)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(list[0]["id"], conversation.as_str());
    assert_eq!(list[0]["title"], "Hi, I am Ada.");
    app.stop().await;
}

/// A guest's email, so that a booking has the contact details our MCP server needs
/// and goes through without asking for them with a form.
pub(crate) fn email(guest: &str) -> String {
    format!("{}@example.com", guest.to_lowercase().replace(' ', "."))
}

fn booking_call(id: &str, guest: &str, date: &str) -> ToolCallSpec {
    ToolCallSpec::new(
        id,
        "resos__createBooking",
        json!({ "date": date, "time": "18:00", "people": 2, "guestName": guest, "guestEmail": email(guest) }).to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_booking_waits_for_approval_and_a_denial_writes_nothing() {
    let date = open_day(4);
    let script = Script::new([
        Turn::tool_calls([booking_call("call_1", "Denied Dora", &date)]),
        Turn::text("Understood, I did not book it."),
        Turn::tool_calls([booking_call("call_2", "Approved Ada", &date)]),
        Turn::text("Booked."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |_| {}).await;
    // A person who may book: a chat-only client's writes are refused downstream
    // (tests/it/security_subjects.rs).
    let token = crate::delegation::chat_token_of(&app, "operator").await;
    let backend = app.backend_token().await;

    let mut stream = app.ask(&token, "Book a table for Dora", None).await;
    let before = stream.until("approval_required").await;
    let approval = before.last().unwrap().data.clone();
    assert_eq!(approval["tool"], "createBooking");
    assert!(approval["expires_at"].is_string());
    assert_eq!(of(&before, "tool_call")[0].data["id"], approval["id"]);
    let id = approval["id"].as_str().unwrap();
    let denied = app
        .gateway_post(
            &format!("/api/v1/resos/chat/approvals/{id}"),
            &token,
            &json!({ "approve": false }),
        )
        .await;
    assert_eq!(denied.status(), 200);
    let rest = stream.rest().await;
    assert_eq!(of(&rest, "tool_result")[0].data["status"], "denied");
    assert_eq!(answer(&rest), "Understood, I did not book it.");
    let dora = app
        .get_json("/bookings?customQuery=guest.name = 'Denied Dora'", &backend)
        .await;
    assert_eq!(dora, json!([]));
    let told = &app.llm.as_ref().unwrap().requests()[1].body["messages"];
    let result = told
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("did not allow"),
        "{result}"
    );
    // Answering twice is a 404: the approval no longer waits.
    let again = app
        .gateway_post(
            &format!("/api/v1/resos/chat/approvals/{id}"),
            &token,
            &json!({ "approve": true }),
        )
        .await;
    assert_eq!(again.status(), 404);

    let mut stream = app.ask(&token, "Book a table for Ada", None).await;
    let approval = stream
        .until("approval_required")
        .await
        .last()
        .unwrap()
        .data
        .clone();
    let id = approval["id"].as_str().unwrap();
    let ok = app
        .gateway_post(
            &format!("/api/v1/resos/chat/approvals/{id}"),
            &token,
            &json!({ "approve": true, "remember_minutes": 10 }),
        )
        .await;
    assert_eq!(ok.status(), 200);
    let rest = stream.rest().await;
    assert_eq!(of(&rest, "tool_result")[0].data["status"], "ok", "{rest:?}");
    let ada = app
        .get_json(
            "/bookings?customQuery=guest.name = 'Approved Ada'",
            &backend,
        )
        .await;
    assert_eq!(ada.as_array().unwrap().len(), 1);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_closes_the_upstream_at_once_and_keeps_the_partial_answer() {
    let words: Vec<String> = (0..200).map(|i| format!("word{i} ")).collect();
    let script = Script::new([Turn::text_fragments(words).paced(Duration::from_millis(50))]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |_| {}).await;
    let token = app.chat_token().await;
    let mut stream = app.ask(&token, "Tell me a long story", None).await;
    let meta = stream.next().await.unwrap();
    let message_id = meta.data["message_id"].as_str().unwrap().to_owned();
    let conversation = meta.data["conversation_id"].as_str().unwrap().to_owned();
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let event = stream.next().await.unwrap();
        if event.event == "token" {
            seen.push(event);
        }
    }
    let llm = app.llm.as_ref().unwrap();
    assert_eq!(llm.open_streams(), 1);
    let cancelled = app
        .gateway_post(
            &format!("/api/v1/resos/chat/{message_id}/cancel"),
            &token,
            &json!({}),
        )
        .await;
    assert_eq!(cancelled.status(), 200);
    let rest = stream.rest().await;
    assert_eq!(rest.last().unwrap().data["finish_reason"], "cancelled");
    // The upstream request is closed promptly, not left to run to its end.
    for _ in 0..50 {
        if llm.open_streams() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(llm.open_streams(), 0);
    assert_eq!(llm.closed_early(), 1);

    let stored: Value = app
        .gateway_get(
            &format!("/api/v1/resos/conversations/{conversation}"),
            &token,
        )
        .await
        .json()
        .await
        .unwrap();
    let reply = stored["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap()
        .clone();
    assert_eq!(reply["status"], "cancelled");
    assert!(
        reply["content"]
            .as_str()
            .unwrap()
            .starts_with("word0 word1 word2"),
        "{reply}"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_stops_at_max_iterations() {
    let script = Script::repeat(Turn::tool_calls([ToolCallSpec::new(
        "call",
        "resos__getTables",
        r#"{"limit":1}"#,
    )]));
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        s.gateway.max_iterations = 3
    })
    .await;
    let token = app.chat_token().await;
    let events = app.ask(&token, "Loop forever", None).await.rest().await;
    assert_eq!(of(&events, "tool_call").len(), 3);
    assert_eq!(
        events.last().unwrap().data["finish_reason"],
        "max_iterations"
    );
    assert_eq!(app.llm.as_ref().unwrap().requests().len(), 3);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_calls_go_back_to_the_model_and_big_results_are_capped() {
    let script = Script::new([
        Turn::tool_calls([
            ToolCallSpec::new("big", "resos__getCustomers", r#"{"limit":100}"#),
            ToolCallSpec::new("bad", "resos__getCustomers", r#"{"limit":"ten"}"#),
            ToolCallSpec::new("nope", "resos__dropTables", "{}"),
            ToolCallSpec::new("broken", "resos__getTables", r#"{"limit":"#),
        ]),
        Turn::text("Done."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        s.gateway.tool_output_cap = 1024
    })
    .await;
    let token = app.chat_token().await;
    let events = app.ask(&token, "Try things", None).await.rest().await;
    let statuses: Vec<&str> = of(&events, "tool_result")
        .iter()
        .map(|r| r.data["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses.len(), 4);
    assert_eq!(
        statuses.iter().filter(|s| **s == "ok").count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(events.last().unwrap().data["finish_reason"], "stop");
    let sent = app.llm.as_ref().unwrap().requests()[1].body["messages"].clone();
    let result = |id: &str| -> String {
        sent.as_array()
            .unwrap()
            .iter()
            .find(|m| m["tool_call_id"] == id)
            .unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let big = result("big");
    assert!(
        big.contains("[output truncated") && big.len() < 1400,
        "{}",
        big.len()
    );
    assert!(
        result("bad").contains("do not fit its input schema"),
        "{}",
        result("bad")
    );
    assert!(
        result("nope").contains("no tool named resos__dropTables"),
        "{}",
        result("nope")
    );
    assert!(
        result("broken").contains("not valid JSON"),
        "{}",
        result("broken")
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_breaks_mid_stream_is_an_error_and_keeps_what_was_said() {
    let script = Script::new([Turn::text("The first part of the answer, and then").cut_after(4)]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |_| {}).await;
    let token = app.chat_token().await;
    let events = app.ask(&token, "Answer me", None).await.rest().await;
    let kinds = names(&events);
    assert_eq!(&kinds[kinds.len() - 2..], ["error", "done"], "{kinds:?}");
    assert_eq!(events.last().unwrap().data["finish_reason"], "error");
    let error = &of(&events, "error")[0].data;
    assert_eq!(error["code"], "model_unreachable");
    assert!(
        !error["message"].as_str().unwrap().contains("127.0.0.1"),
        "no internals: {error}"
    );
    let partial = answer(&events);
    assert!(!partial.is_empty());
    let conversation = events[0].data["conversation_id"].as_str().unwrap();
    let stored: Value = app
        .gateway_get(
            &format!("/api/v1/resos/conversations/{conversation}"),
            &token,
        )
        .await
        .json()
        .await
        .unwrap();
    let messages = stored["messages"].as_array().unwrap();
    assert_eq!(messages[0]["content"], "Answer me");
    assert_eq!(messages[1]["status"], "error");
    assert_eq!(messages[1]["content"], partial.as_str());
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_clearly() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let url = format!("{}/api/v1/resos/stream/chat", app.gateway_url);
    let token = app.chat_token().await;
    let anonymous = app
        .http
        .post(&url)
        .json(&json!({ "question": "hi" }))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    assert!(anonymous.headers().contains_key("www-authenticate"));
    let forged = app
        .http
        .post(&url)
        .bearer_auth("not.a.token")
        .json(&json!({ "question": "hi" }))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
    let wrong_audience = app.backend_token().await;
    let response = app
        .http
        .post(&url)
        .bearer_auth(&wrong_audience)
        .json(&json!({ "question": "hi" }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let read_only = app.token("maitred-cli", &[("scope", "chat.read")]).await;
    let response = app
        .http
        .post(&url)
        .bearer_auth(&read_only)
        .json(&json!({ "question": "hi" }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);

    for (body, status, needle) in [
        (json!({ "question": "   " }).to_string(), 400, "empty"),
        (
            json!({ "question": "x".repeat(4001) }).to_string(),
            413,
            "4000",
        ),
        ("{\"question\": ".to_owned(), 400, "not valid JSON"),
        (json!({ "question": 42 }).to_string(), 400, "question"),
        (
            json!({ "question": "x".repeat(70_000) }).to_string(),
            413,
            "larger",
        ),
    ] {
        let response = app
            .http
            .post(&url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{needle}");
        let error: Value = response.json().await.unwrap();
        assert!(
            error["message"].as_str().unwrap().contains(needle),
            "{error}"
        );
    }

    // Another subject's conversation and generation are not found, not forbidden.
    let events = app
        .ask(&token, "How many tables are there?", None)
        .await
        .rest()
        .await;
    let conversation = events[0].data["conversation_id"].as_str().unwrap();
    let message = events[0].data["message_id"].as_str().unwrap();
    let (kid, private): (String, String) =
        sqlx::query_as("SELECT kid, private_key FROM signing_keys LIMIT 1")
            .fetch_one(app.db.pool())
            .await
            .unwrap();
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
    header.kid = Some(kid);
    let now = chrono::Utc::now().timestamp();
    let other = jsonwebtoken::encode(
        &header,
        &json!({ "iss": app.url, "sub": "someone-else", "aud": app.settings.gateway_resource(), "exp": now + 300, "iat": now, "scope": "chat.read chat.write" }),
        &jsonwebtoken::EncodingKey::from_ed_der(&base64::Engine::decode(&base64::engine::general_purpose::STANDARD, private).unwrap()),
    )
    .unwrap();
    for path in [
        format!("/api/v1/resos/conversations/{conversation}"),
        format!("/api/v1/resos/stream/chat/{message}"),
    ] {
        assert_eq!(app.gateway_get(&path, &other).await.status(), 404, "{path}");
    }
    let continued = app
        .gateway_post(
            "/api/v1/resos/stream/chat",
            &other,
            &json!({ "question": "more", "conversation_id": conversation }),
        )
        .await;
    assert_eq!(continued.status(), 404);
    assert_eq!(
        app.gateway_post(
            "/api/v1/resos/chat/approvals/tc_nothing",
            &other,
            &json!({ "approve": true })
        )
        .await
        .status(),
        404
    );
    let deleted = app
        .http
        .delete(format!(
            "{}/api/v1/resos/conversations/{conversation}",
            app.gateway_url
        ))
        .bearer_auth(&other)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 404);
    let deleted = app
        .http
        .delete(format!(
            "{}/api/v1/resos/conversations/{conversation}",
            app.gateway_url
        ))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    assert_eq!(
        app.gateway_get(
            &format!("/api/v1/resos/conversations/{conversation}"),
            &token
        )
        .await
        .status(),
        404
    );
    app.stop().await;
}

/// A remembered approval covers the call the person saw, not the tool: a different
/// booking slipped in later (say, by a prompt-injected tool result) asks again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remembered_approval_covers_only_the_call_the_person_saw() {
    let date = open_day(5);
    let script = Script::new([
        Turn::tool_calls([booking_call("call_1", "First Fay", &date)]),
        Turn::text("Booked Fay."),
        Turn::tool_calls([booking_call("call_2", "Mallory Injected", &date)]),
        Turn::text("Not booked."),
        Turn::tool_calls([booking_call("call_3", "First Fay", &date)]),
        Turn::text("Booked Fay again."),
        Turn::tool_calls([booking_call("call_4", "Third Tess", &date)]),
        Turn::text("Booked Tess."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |_| {}).await;
    let token = app.chat_token().await;
    let mut stream = app.ask(&token, "Book for Fay", None).await;
    let before = stream.until("approval_required").await;
    let conversation = before[0].data["conversation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let id = before.last().unwrap().data["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // A day-long standing permission is more than the person can be offered.
    let too_long = app
        .gateway_post(
            &format!("/api/v1/resos/chat/approvals/{id}"),
            &token,
            &json!({ "approve": true, "remember_minutes": 1440 }),
        )
        .await;
    assert_eq!(too_long.status(), 400);
    let approved = app
        .gateway_post(
            &format!("/api/v1/resos/chat/approvals/{id}"),
            &token,
            &json!({ "approve": true, "remember_minutes": 10 }),
        )
        .await;
    assert_eq!(approved.status(), 200);
    stream.rest().await;

    // The same tool with other arguments, in the same conversation: asked again.
    let mut stream = app
        .ask(&token, "And for Mallory", Some(&conversation))
        .await;
    let asked = stream.until("approval_required").await;
    assert_eq!(asked.last().unwrap().event, "approval_required");
    assert_eq!(
        asked.last().unwrap().data["arguments"]["guestName"],
        "Mallory Injected"
    );
    let id = asked.last().unwrap().data["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.gateway_post(
        &format!("/api/v1/resos/chat/approvals/{id}"),
        &token,
        &json!({ "approve": false }),
    )
    .await;
    let events = stream.rest().await;
    assert_eq!(of(&events, "tool_result")[0].data["status"], "denied");

    // The very call the person approved: no question asked.
    let events = app
        .ask(&token, "Fay again, please", Some(&conversation))
        .await
        .rest()
        .await;
    assert!(
        of(&events, "approval_required").is_empty(),
        "{:?}",
        names(&events)
    );
    assert_eq!(of(&events, "tool_result").len(), 1);

    // Another conversation asks again.
    let mut stream = app.ask(&token, "Book for Tess", None).await;
    let asked = stream.until("approval_required").await;
    assert_eq!(asked.last().unwrap().event, "approval_required");
    let id = asked.last().unwrap().data["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.gateway_post(
        &format!("/api/v1/resos/chat/approvals/{id}"),
        &token,
        &json!({ "approve": true }),
    )
    .await;
    stream.rest().await;
    let (recorded,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM approvals WHERE status = 'remembered'")
            .fetch_one(app.db.pool())
            .await
            .unwrap();
    assert_eq!(recorded, 1, "the remembered pass is on record too");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_signs_in_through_the_gateway_and_chats_with_its_session() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let browser = reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let status: Value = browser
        .get(format!("{}/api/auth/status", app.gateway_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["authenticated"], false);

    let callback = Browser {
        http: browser.clone(),
    }
    .sign_in_until_callback(&app, "user", Some("/chat"))
    .await;
    let landed = browser.get(&callback).send().await.unwrap();
    assert_eq!(landed.status(), 303);
    assert_eq!(landed.headers()["location"], "/chat");
    let cookie = landed
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|c| c.to_str().unwrap().to_owned())
        .find(|c| c.starts_with("maitred_session="))
        .unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"),
        "{cookie}"
    );
    // The sign-in link works once.
    let again = browser.get(&callback).send().await.unwrap();
    assert_eq!(again.status(), 400);
    assert!(
        again
            .text()
            .await
            .unwrap()
            .contains("Start the sign-in again")
    );

    let status: Value = browser
        .get(format!("{}/api/auth/status", app.gateway_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["authenticated"], true, "{status}");
    assert_eq!(status["user"]["roles"], json!(["USER"]));
    let csrf = status["csrf_token"].as_str().unwrap().to_owned();
    let me: Value = browser
        .get(format!("{}/api/auth/user", app.gateway_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(me["name"], "Uma User");

    let chat = format!("{}/api/v1/resos/stream/chat", app.gateway_url);
    let forged = browser
        .post(&chat)
        .json(&json!({ "question": "How many tables are there?" }))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403, "a cookie alone cannot write");
    let response = browser
        .post(&chat)
        .header("x-csrf-token", &csrf)
        .json(&json!({ "question": "How many tables are there?" }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let events = crate::helpers::SseReader::new(response).rest().await;
    assert!(answer(&events).contains("20"), "{}", answer(&events));
    let mine: Value = browser
        .get(format!("{}/api/v1/resos/conversations", app.gateway_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(mine.as_array().unwrap().len(), 1);

    let out = browser
        .post(format!("{}/logout", app.gateway_url))
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 200);
    let status: Value = browser
        .get(format!("{}/api/auth/status", app.gateway_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["authenticated"], false);
    assert_eq!(
        browser
            .get(format!("{}/api/v1/resos/conversations", app.gateway_url))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    app.stop().await;
}
