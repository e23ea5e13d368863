//! OpenAI's Responses API (`/v1/responses`) against the scripted upstream, over real
//! sockets: a response is one answer of the gateway's, streamed with the Responses
//! events (numbered from the answer's logged events, so a stream continues from
//! any `sequence_number`), or returned as one object; background responses run with
//! nobody watching and are read, resumed, cancelled and deleted by id; a write that
//! needs approval ends a response with an `mcp_approval_request`, and a new response
//! that brings the decision runs the call once, with the key it was first given;
//! `previous_response_id` continues the conversation; another person's id is a 404.

use std::time::Duration;

use maitred_scripted_llm::{Script, ToolCallSpec, Turn};
use serde_json::{Value, json};

use crate::helpers::{Database, Llm, SseEvent, SseReader, TestApp};
use crate::idempotent_calls::{BOOKINGS, RecordingProxy, expected_key, spawn_behind};
use crate::mcp::open_day;
use crate::on_both_databases;
use crate::token_exchange::person_tokens;

const QUESTION: &str = "How many tables are there?";

fn tables() -> Script {
    Script::new([
        Turn::tool_calls([ToolCallSpec::new(
            "call_1",
            "resos__getTables",
            r#"{"limit":1}"#,
        )])
        .usage(10, 5),
        Turn::text("There are 20 tables.").usage(20, 3),
    ])
}

/// A long answer, one word every `pace_ms`.
fn slow(words: usize, pace_ms: u64) -> Turn {
    Turn::text_fragments((0..words).map(|i| format!("w{i} "))).paced(Duration::from_millis(pace_ms))
}

async fn post(app: &TestApp, token: &str, body: &Value) -> reqwest::Response {
    app.http
        .post(format!("{}/v1/responses", app.gateway_url))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn object(response: reqwest::Response) -> Value {
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "response", "{body}");
    body
}

async fn get(app: &TestApp, token: &str, path: &str) -> reqwest::Response {
    app.http
        .get(format!("{}/v1/responses/{path}", app.gateway_url))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
}

/// Every event of a Responses stream, to its end.
async fn events(response: reqwest::Response) -> Vec<SseEvent> {
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut reader = SseReader::new(response);
    let mut events = Vec::new();
    while let Some(event) = reader.next().await {
        events.push(event);
    }
    events
}

fn types(events: &[SseEvent]) -> Vec<&str> {
    events.iter().map(|e| e.event.as_str()).collect()
}

fn numbers(events: &[SseEvent]) -> Vec<u64> {
    events
        .iter()
        .map(|e| {
            let number = e.data["sequence_number"].as_u64().unwrap();
            assert_eq!(e.id, Some(number), "the SSE id is the sequence number");
            number
        })
        .collect()
}

/// The text of a response's `message` items.
fn output_text(response: &Value) -> String {
    response["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "message")
        .flat_map(|item| item["content"].as_array().unwrap().iter())
        .map(|part| part["text"].as_str().unwrap())
        .collect()
}

/// The error envelope, with every field OpenAI's has.
async fn error(response: reqwest::Response, status: u16) -> Value {
    assert_eq!(response.status(), status);
    let body: Value = response.json().await.unwrap();
    for field in ["message", "type", "param", "code"] {
        assert!(body["error"].get(field).is_some(), "no {field} in {body}");
    }
    body["error"].clone()
}

/// Another person, signed in at the issuer with their own token.
async fn someone_else(app: &TestApp) -> String {
    person_tokens(app, "user", "openid chat.read chat.write").await["access_token"]
        .as_str()
        .unwrap()
        .to_owned()
}

on_both_databases!(
    a_streamed_response_is_its_answer_projected,
    a_response_in_one_object_is_kept_continued_and_only_its_owners,
    a_background_response_runs_unwatched_and_its_stream_resumes_after_any_event,
    a_write_waits_for_an_approval_response_and_runs_once_with_its_first_key,
);

async fn a_streamed_response_is_its_answer_projected(database: &Database) {
    let app = TestApp::spawn_chat(database, Llm::Scripted(tables()), |_| {}).await;
    let token = app.chat_token().await;
    let stream = events(
        post(
            &app,
            &token,
            &json!({"model": "maitred", "input": QUESTION, "stream": true,
                    "instructions": "Answer in English.", "metadata": {"ticket": "T-1"}}),
        )
        .await,
    )
    .await;
    assert_eq!(
        types(&stream),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.mcp_call.in_progress",
            "response.mcp_call_arguments.delta",
            "response.mcp_call_arguments.done",
            "response.mcp_call.completed",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    assert_eq!(numbers(&stream), (0..18).collect::<Vec<u64>>());
    for event in &stream {
        assert_eq!(event.data["type"], event.event);
    }
    let created = &stream[0].data["response"];
    assert_eq!(created["status"], "in_progress");
    assert_eq!(created["model"], "maitred");
    assert_eq!(created["instructions"], "Answer in English.");
    assert_eq!(created["metadata"], json!({"ticket": "T-1"}));
    let id = created["id"].as_str().unwrap();
    assert!(id.starts_with("resp_"), "{id}");
    let call = &stream[7].data["item"];
    assert_eq!(call["type"], "mcp_call");
    assert_eq!(call["server_label"], "resos");
    assert_eq!(call["name"], "getTables");
    assert_eq!(call["arguments"], r#"{"limit":1}"#);
    assert_eq!(call["status"], "completed");
    assert!(call["output"].as_str().is_some_and(|o| !o.is_empty()));
    assert_eq!(stream[14].data["text"], "There are 20 tables.");
    let done = &stream[17].data["response"];
    assert_eq!(done["id"], id);
    assert_eq!(done["status"], "completed");
    assert_eq!(output_text(done), "There are 20 tables.");
    assert_eq!(
        done["usage"]["total_tokens"], 38,
        "both model turns: {}",
        done["usage"]
    );
    // The instructions reached the model after maitred's own prompt, not stored.
    let first = &app.llm.as_ref().unwrap().requests()[0].body;
    assert_eq!(first["messages"][1]["content"], "Answer in English.");
    // Stored as any conversation, the web UI's too.
    let conversation = done["maitred"]["conversation_id"].as_str().unwrap();
    let stored = app.stored_messages(&token, conversation).await;
    assert_eq!(stored[0]["content"], QUESTION);
    // Read back, it is the object the stream ended with.
    let read = object(get(&app, &token, id).await).await;
    assert_eq!(read, *done);
    app.stop().await;
}

async fn a_response_in_one_object_is_kept_continued_and_only_its_owners(database: &Database) {
    let script = Script::new([
        Turn::text("Hello Ada."),
        Turn::text("You are Ada."),
        Turn::text("Still Ada."),
    ]);
    let app = TestApp::spawn_chat(database, Llm::Scripted(script), |_| {}).await;
    let token = app.chat_token().await;
    let first = object(
        post(
            &app,
            &token,
            &json!({"model": "maitred/scripted", "input": [{"role": "user", "content": "I am Ada."}]}),
        )
        .await,
    )
    .await;
    assert_eq!(first["status"], "completed");
    assert_eq!(first["model"], "maitred/scripted");
    assert_eq!(output_text(&first), "Hello Ada.");
    let id = first["id"].as_str().unwrap();

    // The next response continues the same conversation, its history the model's.
    let second = object(
        post(
            &app,
            &token,
            &json!({"model": "maitred", "input": "Who am I?", "previous_response_id": id}),
        )
        .await,
    )
    .await;
    assert_eq!(second["previous_response_id"], id);
    assert_eq!(
        second["maitred"]["conversation_id"],
        first["maitred"]["conversation_id"]
    );
    let asked = &app.llm.as_ref().unwrap().requests()[1].body["messages"];
    let said: Vec<&str> = asked
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(said, ["I am Ada.", "Hello Ada.", "Who am I?"]);
    let conversation = first["maitred"]["conversation_id"].as_str().unwrap();
    assert_eq!(app.stored_messages(&token, conversation).await.len(), 4);

    // Another person: every id of the owner's is a 404, to read, stream, continue,
    // cancel or delete, exactly as an id that does not exist.
    let other = someone_else(&app).await;
    let unknown = "resp_0190aaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    for path in [
        id.to_owned(),
        format!("{id}?stream=true"),
        unknown.to_owned(),
    ] {
        let refused = error(get(&app, &other, &path).await, 404).await;
        assert_eq!(refused["code"], "not_found");
    }
    let continued = post(
        &app,
        &other,
        &json!({"model": "maitred", "input": "Who is Ada?", "previous_response_id": id}),
    )
    .await;
    assert_eq!(error(continued, 404).await["param"], "previous_response_id");
    for (method, path) in [
        (reqwest::Method::POST, format!("{id}/cancel")),
        (reqwest::Method::DELETE, id.to_owned()),
    ] {
        let response = app
            .http
            .request(method, format!("{}/v1/responses/{path}", app.gateway_url))
            .bearer_auth(&other)
            .send()
            .await
            .unwrap();
        error(response, 404).await;
    }
    assert_eq!(app.llm.as_ref().unwrap().requests().len(), 2);

    // Kept beyond its live log: with the answer's events gone, it reads the same.
    sqlx::query("DELETE FROM answer_events")
        .execute(app.db.pool())
        .await
        .unwrap();
    assert_eq!(object(get(&app, &token, id).await).await, first);

    // Deleted: gone for its owner too, and its answer from the conversation.
    let deleted = app
        .http
        .delete(format!("{}/v1/responses/{id}", app.gateway_url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    let deleted: Value = deleted.json().await.unwrap();
    assert_eq!(
        deleted,
        json!({"id": id, "object": "response.deleted", "deleted": true})
    );
    error(get(&app, &token, id).await, 404).await;
    let left: Vec<String> = app
        .stored_messages(&token, conversation)
        .await
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(left, ["Who am I?", "You are Ada."]);
    app.stop().await;
}

async fn a_background_response_runs_unwatched_and_its_stream_resumes_after_any_event(
    database: &Database,
) {
    let script = Script::new([slow(40, 40)]);
    let app = TestApp::spawn_chat(database, Llm::Scripted(script), |s| {
        s.gateway.stream_grace = Duration::from_millis(300);
    })
    .await;
    let token = app.chat_token().await;
    let begun = object(
        post(
            &app,
            &token,
            &json!({"model": "maitred", "input": "Tell me a long story", "background": true}),
        )
        .await,
    )
    .await;
    assert_eq!(begun["status"], "in_progress");
    assert_eq!(begun["background"], true);
    let id = begun["id"].as_str().unwrap().to_owned();
    // Nobody watches for longer than the grace period: it goes on all the same.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let running = object(get(&app, &token, &id).await).await;
    assert_eq!(running["status"], "in_progress");
    let so_far = output_text(&running);
    assert!(
        !so_far.is_empty() && so_far.split_whitespace().count() < 40,
        "{so_far}"
    );

    // The stream from the first event, cut after a few; then from after the last seen.
    let response = get(&app, &token, &format!("{id}?stream=true")).await;
    let mut reader = SseReader::new(response);
    let mut seen = Vec::new();
    while seen.len() < 8 {
        seen.push(reader.next().await.unwrap());
    }
    drop(reader);
    let last = seen.last().unwrap().data["sequence_number"]
        .as_u64()
        .unwrap();
    let rest = events(
        get(
            &app,
            &token,
            &format!("{id}?stream=true&starting_after={last}"),
        )
        .await,
    )
    .await;
    assert_eq!(rest[0].data["sequence_number"], last + 1);
    seen.extend(rest);
    assert_eq!(numbers(&seen), (0..seen.len() as u64).collect::<Vec<_>>());
    let end = &seen.last().unwrap().data;
    assert_eq!(end["type"], "response.completed");
    assert_eq!(output_text(&end["response"]).split_whitespace().count(), 40);
    // The same, continued with Last-Event-ID as a plain SSE client does.
    let again = app
        .http
        .get(format!("{}/v1/responses/{id}?stream=true", app.gateway_url))
        .bearer_auth(&token)
        .header("last-event-id", last.to_string())
        .send()
        .await
        .unwrap();
    let again = events(again).await;
    assert_eq!(again.len(), seen.len() - (last as usize + 1));
    assert_eq!(again[0].data, seen[last as usize + 1].data);
    // A stream that is past the end ends at once; a position that is no number is refused.
    let past = events(
        get(
            &app,
            &token,
            &format!("{id}?stream=true&starting_after=100000"),
        )
        .await,
    )
    .await;
    assert!(past.is_empty());
    let bad = get(&app, &token, &format!("{id}?stream=true&starting_after=-1")).await;
    assert_eq!(error(bad, 400).await["type"], "invalid_request_error");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_response_is_cancelled_on_request_and_says_so() {
    let app = TestApp::spawn_chat(
        &Database::Sqlite,
        Llm::Scripted(Script::new([slow(400, 20), Turn::text("Next.")])),
        |_| {},
    )
    .await;
    let token = app.chat_token().await;
    let begun = object(
        post(
            &app,
            &token,
            &json!({"model": "maitred", "input": "Talk a lot", "background": true}),
        )
        .await,
    )
    .await;
    let id = begun["id"].as_str().unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let cancelled = object(
        app.http
            .post(format!("{}/v1/responses/{id}/cancel", app.gateway_url))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(cancelled["status"], "cancelled");
    assert!(
        app.upstream_idle().await,
        "the upstream request was stopped"
    );
    assert_eq!(
        object(get(&app, &token, id).await).await["status"],
        "cancelled"
    );
    // Its stream ends with response.incomplete, the object saying why.
    let stream = events(get(&app, &token, &format!("{id}?stream=true")).await).await;
    let last = &stream.last().unwrap().data;
    assert_eq!(last["type"], "response.incomplete");
    assert_eq!(last["response"]["status"], "cancelled");
    // Cancelling again changes nothing; a response can continue a cancelled one.
    let again = object(
        app.http
            .post(format!("{}/v1/responses/{id}/cancel", app.gateway_url))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(again["status"], "cancelled");
    let next = object(
        post(
            &app,
            &token,
            &json!({"model": "maitred", "input": "Go on", "previous_response_id": id}),
        )
        .await,
    )
    .await;
    assert_eq!(output_text(&next), "Next.");
    app.stop().await;
}

async fn a_write_waits_for_an_approval_response_and_runs_once_with_its_first_key(
    database: &Database,
) {
    let guest = "Responses Rita";
    let booking = json!({ "date": open_day(4), "time": "18:00", "people": 2,
                          "guestName": guest, "guestEmail": crate::chat::email(guest) });
    let script = Script::new([
        Turn::tool_calls([
            ToolCallSpec::new("call_read", "resos__getTables", "{}"),
            ToolCallSpec::new("call_write", "resos__createBooking", booking.to_string()),
        ])
        .with_text("Let me book that."),
        Turn::text("Booked Rita."),
    ]);
    let proxy = RecordingProxy::default();
    let app = spawn_behind(&proxy, database, Llm::Scripted(script)).await;
    // A person who may book (a chat-only client never writes: security_subjects.rs).
    let token = crate::delegation::chat_token_of(&app, "operator").await;
    let asked = object(
        post(
            &app,
            &token,
            &json!({"model": "maitred", "input": "Book Rita"}),
        )
        .await,
    )
    .await;
    // The response ends, completed, with the request; the read ran, the write did not.
    assert_eq!(asked["status"], "completed");
    let item = |kind: &str| {
        asked["output"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["type"] == kind)
            .unwrap_or_else(|| panic!("no {kind} in {asked}"))
    };
    assert_eq!(asked["output"][0]["type"], "message");
    assert_eq!(asked["output"].as_array().unwrap().len(), 3, "{asked}");
    assert_eq!(item("mcp_call")["name"], "getTables");
    assert_eq!(item("mcp_call")["status"], "completed");
    let request = item("mcp_approval_request");
    assert_eq!(request["server_label"], "resos");
    assert_eq!(request["name"], "createBooking");
    assert_eq!(
        serde_json::from_str::<Value>(request["arguments"].as_str().unwrap()).unwrap(),
        booking
    );
    assert!(
        proxy.writes_to(BOOKINGS).is_empty(),
        "nothing was booked yet"
    );
    assert_eq!(app.llm.as_ref().unwrap().requests().len(), 1);
    let request_id = request["id"].as_str().unwrap();
    let id = asked["id"].as_str().unwrap();

    // Someone else cannot answer it.
    let other = someone_else(&app).await;
    let answer = |approve: bool| {
        json!({"model": "maitred", "previous_response_id": id, "input": [
            {"type": "mcp_approval_response", "approval_request_id": request_id, "approve": approve}
        ]})
    };
    error(post(&app, &other, &answer(true)).await, 404).await;
    let mut without_previous = answer(true);
    without_previous
        .as_object_mut()
        .unwrap()
        .remove("previous_response_id");
    error(post(&app, &other, &without_previous).await, 400).await;

    // Its owner approves: the call runs in the new response, which names the request.
    let decided = object(post(&app, &token, &answer(true)).await).await;
    assert_eq!(decided["status"], "completed", "{decided}");
    assert_eq!(decided["previous_response_id"], id);
    let call = &decided["output"][0];
    assert_eq!(call["type"], "mcp_call");
    assert_eq!(call["name"], "createBooking");
    assert_eq!(call["approval_request_id"], request_id);
    assert_eq!(call["status"], "completed", "{call}");
    assert_eq!(output_text(&decided), "Booked Rita.");
    // The model saw the turn's two results, the write's after the read's.
    let second = &app.llm.as_ref().unwrap().requests()[1].body["messages"];
    let results: Vec<&str> = second
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["call_read", "call_write"]);
    // One write, with the key the call was given when it was first asked for.
    let writes = proxy.writes_to(BOOKINGS);
    assert_eq!(writes.len(), 1);
    let (call_id,): (String,) =
        sqlx::query_as("SELECT id FROM tool_calls WHERE tool = 'createBooking'")
            .fetch_one(app.db.pool())
            .await
            .unwrap();
    let asked_in = asked["maitred"]["message_id"].as_str().unwrap();
    assert_eq!(
        writes[0].idempotency_key.as_deref(),
        Some(expected_key(asked_in, &call_id).as_str())
    );
    // It cannot be answered twice.
    let twice = error(post(&app, &token, &answer(true)).await, 400).await;
    assert_eq!(twice["code"], "invalid_state");
    assert_eq!(proxy.writes_to(BOOKINGS).len(), 1);
    // The conversation shows it all, as the web UI does.
    let conversation = asked["maitred"]["conversation_id"].as_str().unwrap();
    let stored = app.stored_messages(&token, conversation).await;
    assert_eq!(stored.last().unwrap()["content"], "Booked Rita.");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declined_or_unanswered_write_is_not_made_and_the_model_is_told() {
    let booking = |guest: &str| {
        json!({ "date": open_day(5), "time": "19:00", "people": 2, "guestName": guest,
                "guestEmail": crate::chat::email(guest) })
        .to_string()
    };
    let script = Script::new([
        Turn::tool_calls([ToolCallSpec::new(
            "w1",
            "resos__createBooking",
            booking("Dee Clined"),
        )]),
        Turn::text("I did not book it."),
        Turn::tool_calls([ToolCallSpec::new(
            "w2",
            "resos__createBooking",
            booking("Una Nswered"),
        )]),
        Turn::text("Something else, then."),
    ]);
    let proxy = RecordingProxy::default();
    let app = spawn_behind(&proxy, &Database::Sqlite, Llm::Scripted(script)).await;
    let token = app.chat_token().await;
    let asked = object(
        post(
            &app,
            &token,
            &json!({"model": "maitred", "input": "Book Dee"}),
        )
        .await,
    )
    .await;
    let request_id = asked["output"][0]["id"].as_str().unwrap();
    // Declined, with no previous_response_id: the request names its response.
    let declined = object(
        post(
            &app,
            &token,
            &json!({"model": "maitred", "stream": false, "input": [
                {"type": "mcp_approval_response", "approval_request_id": request_id, "approve": false}
            ]}),
        )
        .await,
    )
    .await;
    assert_eq!(declined["previous_response_id"], asked["id"]);
    assert_eq!(declined["output"][0]["status"], "failed");
    assert_eq!(output_text(&declined), "I did not book it.");
    let told = &app.llm.as_ref().unwrap().requests()[1].body["messages"];
    let told = told.as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap();
    assert!(told.contains("did not allow"), "{told}");

    // Asked again, and the person moves on with a new question instead.
    let asked = object(
        post(
            &app,
            &token,
            &json!({"model": "maitred", "input": "Book Una", "previous_response_id": declined["id"]}),
        )
        .await,
    )
    .await;
    let request_id = asked["output"][0]["id"].as_str().unwrap().to_owned();
    let moved_on = object(
        post(
            &app,
            &token,
            &json!({"model": "maitred", "input": "Never mind", "previous_response_id": asked["id"]}),
        )
        .await,
    )
    .await;
    assert_eq!(output_text(&moved_on), "Something else, then.");
    let told = &app.llm.as_ref().unwrap().requests()[3].body["messages"];
    assert!(
        told.as_array().unwrap().iter().any(|m| m["role"] == "tool"
            && m["content"]
                .as_str()
                .unwrap()
                .contains("did not answer the approval")),
        "{told}"
    );
    // Too late to answer it now.
    let late = post(
        &app,
        &token,
        &json!({"model": "maitred", "input": [
            {"type": "mcp_approval_response", "approval_request_id": request_id, "approve": true}
        ]}),
    )
    .await;
    assert_eq!(error(late, 400).await["code"], "invalid_state");
    assert!(proxy.writes_to(BOOKINGS).is_empty(), "nothing was booked");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_come_in_openais_shape_with_the_status_the_sdks_expect() {
    let app = TestApp::spawn_chat(
        &Database::Sqlite,
        Llm::Scripted(Script::repeat(Turn::text("Hi.").usage(50, 50))),
        |s| s.gateway.file.budgets.max_output_tokens = 100,
    )
    .await;
    let token = app.chat_token().await;
    let refused = |body: Value, status: u16, param: Option<&'static str>| {
        let app = &app;
        let token = token.clone();
        async move {
            let error = error(post(app, &token, &body).await, status).await;
            if let Some(param) = param {
                assert_eq!(error["param"], param, "{body}: {error}");
            }
            error
        }
    };
    refused(json!({"model": "gpt-5", "input": "Hi"}), 404, Some("model")).await;
    refused(
        json!({"model": "maitred", "input": "Hi", "tools": [{"type": "mcp", "server_label": "x", "server_url": "https://x"}]}),
        400,
        Some("tools"),
    )
    .await;
    refused(
        json!({"model": "maitred", "input": "Hi", "background": true, "store": false}),
        400,
        Some("store"),
    )
    .await;
    refused(json!({"model": "maitred"}), 400, Some("input")).await;
    refused(
        json!({"model": "maitred", "input": "Hi", "previous_response_id": "resp_nope"}),
        404,
        Some("previous_response_id"),
    )
    .await;
    let long = "x".repeat(app.settings.gateway.question_limit + 1);
    refused(json!({"model": "maitred", "input": long}), 413, None).await;
    let no_token = app
        .http
        .post(format!("{}/v1/responses", app.gateway_url))
        .json(&json!({"model": "maitred", "input": "Hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(error(no_token, 401).await["code"], "invalid_api_key");
    assert!(app.llm.as_ref().unwrap().requests().is_empty());

    // store: false is answered, and then cannot be read by its id.
    let unstored = object(
        post(
            &app,
            &token,
            &json!({"model": "maitred", "input": "Hi", "store": false}),
        )
        .await,
    )
    .await;
    assert_eq!(unstored["store"], false);
    error(
        get(&app, &token, unstored["id"].as_str().unwrap()).await,
        404,
    )
    .await;

    // A spent budget is a 429 with when to come back, never a 5xx.
    let admin = person_tokens(&app, "admin", "openid chat.read chat.write").await["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let set = app
        .http
        .put(format!(
            "{}/api/v1/resos/admin/budgets/person/*",
            app.gateway_url
        ))
        .bearer_auth(&admin)
        .json(&json!({"window": "daily", "max_tokens": 10}))
        .send()
        .await
        .unwrap();
    assert!(set.status().is_success(), "{}", set.text().await.unwrap());
    let spent = post(
        &app,
        &token,
        &json!({"model": "maitred", "input": "Hi again"}),
    )
    .await;
    let retry_after: u64 = spent.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=86_400).contains(&retry_after), "{retry_after}");
    let spent = error(spent, 429).await;
    assert_eq!(spent["code"], "rate_limit_exceeded");
    // Streamed, the same refusal ends the stream as response.failed.
    let stream = events(
        post(
            &app,
            &token,
            &json!({"model": "maitred", "input": "Hi", "stream": true}),
        )
        .await,
    )
    .await;
    let last = &stream.last().unwrap().data;
    assert_eq!(last["type"], "response.failed");
    assert_eq!(last["response"]["error"]["code"], "rate_limit_exceeded");
    assert_eq!(last["response"]["error"]["type"], "budget");
    app.stop().await;
}
