//! What a person may make the gateway do: tools by role, read-only servers, and the
//! per-person limits on questions, running answers and tool calls.

use std::collections::BTreeMap;
use std::time::Duration;

use maitred::settings::gateway_file::RolePolicy;
use maitred_scripted_llm::{Script, ToolCallSpec, Turn};
use serde_json::{Value, json};

use crate::helpers::{Database, Llm, TestApp, of, own_mcp_server};

fn offered_tools(app: &TestApp) -> Vec<String> {
    let requests = app.llm.as_ref().unwrap().requests();
    requests[0].body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn booking(id: &str, guest: &str) -> ToolCallSpec {
    let date = (chrono::Utc::now().date_naive() + chrono::Duration::days(3)).to_string();
    ToolCallSpec::new(
        id,
        "resos__createBooking",
        json!({ "date": date, "time": "18:00", "people": 2, "guestName": guest, "guestEmail": crate::chat::email(guest) }).to_string(),
    )
}

async fn bookings_for(app: &TestApp, guest: &str) -> usize {
    let token = app.backend_token().await;
    app.get_json(
        &format!("/bookings?customQuery=guest.name = '{guest}'"),
        &token,
    )
    .await
    .as_array()
    .unwrap()
    .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_policy_hides_tools_and_refuses_them_if_called_anyway() {
    let script = Script::new([
        Turn::tool_calls([booking("b1", "Policy Pete")]),
        Turn::text("I may not book."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        // Client-credentials callers have no role: the "*" policy is theirs.
        s.gateway.file.policy = BTreeMap::from([(
            "*".to_owned(),
            RolePolicy {
                write_tools: false,
                deny: vec!["resos__getFeedback*".into()],
            },
        )]);
    })
    .await;
    let token = app.chat_token().await;
    let events = app.ask(&token, "Book Pete in", None).await.rest().await;

    let offered = offered_tools(&app);
    assert!(
        offered.contains(&"resos__getTables".to_owned()),
        "{offered:?}"
    );
    for hidden in [
        "resos__createBooking",
        "resos__updateBooking",
        "resos__addBookingNote",
        "resos__getFeedback",
        "resos__getFeedbackById",
    ] {
        assert!(!offered.contains(&hidden.to_owned()), "{hidden} offered");
    }
    assert!(of(&events, "approval_required").is_empty());
    let result = of(&events, "tool_result")[0];
    assert_eq!(result["status"], "denied");
    assert!(
        result["summary"]
            .as_str()
            .unwrap()
            .contains("may not use tools that change data"),
        "{result}"
    );
    assert_eq!(bookings_for(&app, "Policy Pete").await, 0);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_server_is_never_sent_a_write_call() {
    let script = Script::new([
        Turn::tool_calls([booking("b1", "Readonly Rita")]),
        Turn::text("That server is read-only."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        let mut server = own_mcp_server(s, "resos");
        server.read_only = true;
        s.gateway.file.mcp_servers = vec![server];
    })
    .await;
    let token = app.chat_token().await;
    let events = app.ask(&token, "Book Rita in", None).await.rest().await;
    let offered = offered_tools(&app);
    assert!(
        offered.contains(&"resos__getBookings".to_owned()),
        "{offered:?}"
    );
    assert!(
        !offered
            .iter()
            .any(|t| t.contains("create") || t.contains("update"))
    );
    let result = of(&events, "tool_result")[0];
    assert_ne!(result["status"], "ok", "{result}");
    assert!(of(&events, "approval_required").is_empty());
    assert_eq!(bookings_for(&app, "Readonly Rita").await, 0);
    app.stop().await;
}

async fn ask_status(app: &TestApp, token: &str) -> (u16, Option<String>, Value) {
    let response = app
        .gateway_post(
            "/api/v1/resos/stream/chat",
            token,
            &json!({ "question": "Again?" }),
        )
        .await;
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = if status == 200 {
        drop(response);
        Value::Null
    } else {
        response.json().await.unwrap()
    };
    (status, retry_after, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_person_limits_refuse_with_retry_after_and_store_nothing() {
    let long: Vec<String> = (0..200).map(|i| format!("w{i} ")).collect();
    let script = Script::new([
        Turn::text_fragments(long).paced(Duration::from_millis(30)),
        Turn::text("two"),
        Turn::text("three"),
        Turn::text("four"),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        s.gateway.file.limits.concurrent_generations = 1;
        s.gateway.file.limits.requests_per_minute = 3;
    })
    .await;
    let token = app.chat_token().await;
    let mut running = app.ask(&token, "Talk a while", None).await;
    let message_id = running.next().await.unwrap().data["message_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let (status, retry_after, body) = ask_status(&app, &token).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(retry_after.as_deref(), Some("5"));
    assert_eq!(body["code"], "RATE_LIMIT_EXCEEDED");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("answers running"),
        "{body}"
    );

    app.gateway_post(
        &format!("/api/v1/resos/chat/{message_id}/cancel"),
        &token,
        &json!({}),
    )
    .await;
    running.rest().await;
    for _ in 0..2 {
        let events = app.ask(&token, "Again?", None).await.rest().await;
        assert_eq!(events.last().unwrap().data["finish_reason"], "stop");
    }
    let (status, retry_after, body) = ask_status(&app, &token).await;
    assert_eq!(status, 429, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("3 questions a minute"),
        "{body}"
    );
    let wait: u64 = retry_after.unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait));

    // The refused questions left nothing behind.
    let conversations: Value = app
        .gateway_get("/api/v1/resos/conversations", &token)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(conversations.as_array().unwrap().len(), 3);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_past_the_per_question_cap_are_refused() {
    let calls = (0..3).map(|i| ToolCallSpec::new(format!("c{i}"), "resos__getTables", "{}"));
    let script = Script::new([Turn::tool_calls(calls), Turn::text("Enough tables.")]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        s.gateway.file.limits.tool_calls_per_question = 2;
    })
    .await;
    let token = app.chat_token().await;
    let events = app
        .ask(&token, "Tables, three times", None)
        .await
        .rest()
        .await;
    // The calls of one turn run at once: the refused one may finish first.
    let mut statuses: Vec<&str> = of(&events, "tool_result")
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    statuses.sort_unstable();
    assert_eq!(statuses, ["denied", "ok", "ok"]);
    let refused = *of(&events, "tool_result")
        .iter()
        .find(|r| r["status"] == "denied")
        .unwrap();
    assert!(
        refused["summary"]
            .as_str()
            .unwrap()
            .contains("limit of 2 tool calls"),
        "{refused}"
    );
    assert_eq!(events.last().unwrap().data["finish_reason"], "stop");
    app.stop().await;
}
