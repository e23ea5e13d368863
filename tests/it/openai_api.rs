//! The OpenAI-compatible API (`/v1/chat/completions`, `/v1/models`) against the
//! scripted upstream: the same tool loop as the chat API, its answer in OpenAI's wire
//! format, tool activity on the extra `maitred` field, errors in OpenAI's shape, and
//! write tools refused since nobody can approve them here.

use maitred_scripted_llm::{Script, ToolCallSpec, Turn};
use serde_json::{Value, json};

use crate::helpers::{Database, Llm, SseReader, TestApp};

const QUESTION: &str = "How many tables are there?";

fn table_script() -> Script {
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

pub(crate) async fn post(app: &TestApp, token: Option<&str>, body: &Value) -> reqwest::Response {
    let mut request = app
        .http
        .post(format!("{}/v1/chat/completions", app.gateway_url))
        .json(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap()
}

/// Every `data:` of a stream, up to and including `[DONE]`.
pub(crate) async fn chunks(response: reqwest::Response) -> Vec<Value> {
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut reader = SseReader::new(response);
    let mut chunks = Vec::new();
    while let Some(event) = reader.next().await {
        chunks.push(event.data);
    }
    assert_eq!(chunks.last(), Some(&json!("[DONE]")), "{chunks:?}");
    chunks
}

fn extra<'a>(chunks: &'a [Value], field: &str) -> Vec<&'a Value> {
    chunks
        .iter()
        .filter_map(|c| c.get("maitred").and_then(|m| m.get(field)))
        .collect()
}

fn content(chunks: &[Value]) -> String {
    chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect()
}

/// The error envelope, with every field OpenAI's has.
pub(crate) async fn error(response: reqwest::Response, status: u16) -> Value {
    assert_eq!(response.status(), status);
    let body: Value = response.json().await.unwrap();
    let error = body["error"].clone();
    for field in ["message", "type", "param", "code"] {
        assert!(error.get(field).is_some(), "no {field} in {body}");
    }
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()));
    error
}

async fn a_streamed_question_is_answered_with_a_tool_result(database: &Database) {
    let app = TestApp::spawn_chat(database, Llm::Scripted(table_script()), |_| {}).await;
    let token = app.chat_token().await;
    let response = post(
        &app,
        Some(&token),
        &json!({
            "model": "maitred",
            "messages": [
                {"role": "system", "content": "Answer in English."},
                {"role": "user", "content": QUESTION}
            ],
            "stream": true,
            "stream_options": {"include_usage": true}
        }),
    )
    .await;
    let chunks = chunks(response).await;
    let data = &chunks[..chunks.len() - 1];
    let id = data[0]["id"].as_str().unwrap();
    assert!(id.starts_with("chatcmpl-"), "{id}");
    for chunk in data {
        assert_eq!(chunk["id"], id);
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["model"], "maitred");
        assert!(chunk["created"].is_i64());
    }
    assert_eq!(data[0]["choices"][0]["delta"]["role"], "assistant");
    let calls = extra(data, "tool_call");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["tool"], "getTables");
    assert_eq!(calls[0]["server"], "resos");
    assert!(calls[0]["title"].is_string());
    let results = extra(data, "tool_result");
    assert_eq!(results[0]["status"], "ok");
    assert_eq!(results[0]["tool"], "getTables");
    assert_eq!(content(data), "There are 20 tables.");
    let finish = &data[data.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    // Usage comes last, with no choices, and adds up both model turns.
    let usage = data.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(
        usage["usage"],
        json!({"prompt_tokens": 30, "completion_tokens": 8, "total_tokens": 38})
    );
    // The caller's system message reached the model, after maitred's own.
    let first = &app.llm.as_ref().unwrap().requests()[0].body;
    let messages = first["messages"].as_array().unwrap();
    assert_eq!(messages[1]["content"], "Answer in English.");
    assert_eq!(messages.last().unwrap()["content"], QUESTION);
    // Stored like any conversation, the caller's, titled after the question.
    let conversation = data[0]["maitred"]["conversation_id"].as_str().unwrap();
    let list: Value = app
        .gateway_get("/api/v1/resos/conversations", &token)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(list[0]["id"], conversation);
    assert_eq!(list[0]["title"], QUESTION);
    let stored = app.stored_messages(&token, conversation).await;
    assert!(!stored.is_empty());
    app.stop().await;
}

async fn a_question_is_answered_in_one_completion(database: &Database) {
    let app = TestApp::spawn_chat(database, Llm::Scripted(table_script()), |_| {}).await;
    let token = app.chat_token().await;
    let response = post(
        &app,
        Some(&token),
        &json!({
            "model": "maitred/scripted",
            "messages": [{"role": "user", "content": QUESTION}]
        }),
    )
    .await;
    assert_eq!(response.status(), 200);
    let completion: Value = response.json().await.unwrap();
    assert!(completion["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(completion["object"], "chat.completion");
    assert_eq!(completion["model"], "maitred/scripted");
    let choice = &completion["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], "There are 20 tables.");
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(completion["usage"]["total_tokens"], 38);
    let activity = completion["maitred"]["tool_activity"].as_array().unwrap();
    assert_eq!(activity[0]["tool_call"]["tool"], "getTables");
    assert_eq!(activity[1]["tool_result"]["status"], "ok");
    app.stop().await;
}

crate::on_both_databases!(
    a_streamed_question_is_answered_with_a_tool_result,
    a_question_is_answered_in_one_completion,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_models_are_listed_and_errors_come_in_openais_shape() {
    let app = TestApp::spawn_chat(
        &Database::Sqlite,
        Llm::Scripted(Script::repeat(Turn::text("Hi."))),
        |_| {},
    )
    .await;
    let token = app.chat_token().await;

    let models: Value = app
        .gateway_get("/v1/models", &token)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(models["object"], "list");
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["maitred", "maitred/scripted"]);
    assert_eq!(models["data"][0]["object"], "model");
    assert_eq!(models["data"][0]["owned_by"], "maitred");

    let question = json!({"model": "maitred", "messages": [{"role": "user", "content": "Hi"}]});
    // No token, and a token that is not one.
    let response = post(&app, None, &question).await;
    assert!(response.headers().contains_key("www-authenticate"));
    assert_eq!(error(response, 401).await["code"], "invalid_api_key");
    let response = post(&app, Some("not-a-token"), &question).await;
    assert_eq!(error(response, 401).await["code"], "invalid_api_key");
    let response = app
        .http
        .get(format!("{}/v1/models", app.gateway_url))
        .send()
        .await
        .unwrap();
    error(response, 401).await;

    // Not JSON.
    let response = app
        .http
        .post(format!("{}/v1/chat/completions", app.gateway_url))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body("{\"model\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(error(response, 400).await["type"], "invalid_request_error");

    // A model this gateway does not serve.
    let response = post(
        &app,
        Some(&token),
        &json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}]}),
    )
    .await;
    let not_found = error(response, 404).await;
    assert_eq!(not_found["code"], "model_not_found");
    assert_eq!(not_found["param"], "model");

    // Larger than the body limit.
    let long = "x".repeat(app.settings.backend.body_limit + 1);
    let response = post(
        &app,
        Some(&token),
        &json!({"model": "maitred", "messages": [{"role": "user", "content": long}]}),
    )
    .await;
    error(response, 413).await;

    // Client-side tools, which maitred does not run.
    let response = post(
        &app,
        Some(&token),
        &json!({"model": "maitred", "messages": [{"role": "user", "content": "Hi"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}),
    )
    .await;
    assert_eq!(error(response, 400).await["param"], "tools");
    // None of these reached the model.
    assert!(app.llm.as_ref().unwrap().requests().is_empty());
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_persons_limit_a_question_is_a_429_in_openais_shape() {
    let app = TestApp::spawn_chat(
        &Database::Sqlite,
        Llm::Scripted(Script::repeat(Turn::text("Hi."))),
        |s| s.gateway.file.limits.requests_per_minute = 1,
    )
    .await;
    let token = app.chat_token().await;
    let question = json!({"model": "maitred", "messages": [{"role": "user", "content": "Hi"}]});
    assert_eq!(post(&app, Some(&token), &question).await.status(), 200);
    let response = post(&app, Some(&token), &question).await;
    assert!(response.headers().contains_key("retry-after"));
    assert_eq!(error(response, 429).await["code"], "rate_limit_exceeded");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_tool_is_refused_since_nobody_can_approve_it() {
    let date = (chrono::Utc::now().date_naive() + chrono::Duration::days(3)).to_string();
    let booking = json!({ "date": date, "time": "18:00", "people": 2, "guestName": "Ada" });
    let script = Script::new([
        Turn::tool_calls([ToolCallSpec::new(
            "call_1",
            "resos__createBooking",
            booking.to_string(),
        )]),
        Turn::text("I could not book it from here."),
    ]);
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |_| {}).await;
    let token = app.chat_token().await;
    let response = post(
        &app,
        Some(&token),
        &json!({
            "model": "maitred",
            "messages": [{"role": "user", "content": "Book a table for Ada"}],
            "stream": true
        }),
    )
    .await;
    let chunks = chunks(response).await;
    assert_eq!(extra(&chunks, "tool_call")[0]["tool"], "createBooking");
    let result = extra(&chunks, "tool_result")[0];
    assert_eq!(result["status"], "denied");
    assert!(
        result["summary"]
            .as_str()
            .unwrap()
            .contains("approvals are not possible on the OpenAI-compatible API"),
        "{result}"
    );
    assert_eq!(content(&chunks), "I could not book it from here.");
    // The model was told why, in the call's result.
    let second = &app.llm.as_ref().unwrap().requests()[1].body;
    let told = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        told.starts_with("Refused") && told.contains("OpenAI-compatible API"),
        "{told}"
    );
    // Nothing was booked, and nobody was asked.
    let backend = app.backend_token().await;
    let bookings = app
        .get_json("/bookings?customQuery=guest.name = 'Ada'", &backend)
        .await;
    assert_eq!(bookings, json!([]), "{bookings}");
    let (asked,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM approvals")
        .fetch_one(app.db.pool())
        .await
        .unwrap();
    assert_eq!(asked, 0);
    app.stop().await;
}
