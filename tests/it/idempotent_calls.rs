//! Nothing runs twice: the gateway mints an idempotency key for each call of a tool
//! that writes (never the model), stores it with the call before sending it, and
//! sends it in the call's `_meta`; our MCP server passes it to the backend as
//! `Idempotency-Key` on the write. Reads carry none. A recording proxy in front of
//! the backend shows what the MCP role sent; the backend answers a repeat with the
//! first response.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use maitred::protocol::meta;
use maitred_scripted_llm::{Script, ToolCallSpec, Turn};
use rmcp::model::{CallToolRequestParams, CallToolResult, RequestMetaObject};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::helpers::{Database, Llm, TestApp, of, serve};
use crate::mcp::{Client, MODERN, connect, open_day, text};
use crate::on_both_databases;

on_both_databases!(a_write_from_the_chat_carries_the_key_stored_with_its_call);

/// One request the MCP role made to the backend.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    method: String,
    path: String,
    pub(crate) idempotency_key: Option<String>,
}

/// Stands between the MCP role and the backend, and notes each request.
#[derive(Clone, Default)]
pub(crate) struct RecordingProxy {
    target: Arc<Mutex<String>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl RecordingProxy {
    async fn start(&self) -> String {
        serve(
            axum::Router::new()
                .fallback(forward)
                .with_state(self.clone()),
        )
        .await
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The writes to `path` (POST or PUT), in order.
    pub(crate) fn writes_to(&self, path: &str) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.method != "GET" && s.path == path)
            .collect()
    }
}

async fn forward(State(proxy): State<RecordingProxy>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    proxy.seen.lock().unwrap().push(Seen {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        idempotency_key: parts
            .headers
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    });
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let target = format!("{}{path}", proxy.target.lock().unwrap());
    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    let mut upstream = maitred::http_client::new()
        .unwrap()
        .request(parts.method, target);
    for (name, value) in &parts.headers {
        if name != "host" && name != "content-length" {
            upstream = upstream.header(name, value);
        }
    }
    let answer = upstream.body(body).send().await.unwrap();
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if name != "content-length" && name != "transfer-encoding" {
            response = response.header(name, value);
        }
    }
    response
        .body(Body::from(answer.bytes().await.unwrap()))
        .unwrap()
}

/// All three roles, the MCP role reaching the backend through `proxy`.
pub(crate) async fn spawn_behind(proxy: &RecordingProxy, database: &Database, llm: Llm) -> TestApp {
    let proxy_url = proxy.start().await;
    TestApp::spawn_chat(database, llm, |s| {
        *proxy.target.lock().unwrap() = format!("http://127.0.0.1:{}", s.backend.endpoint.port);
        s.mcp.backend_url = proxy_url;
    })
    .await
}

pub(crate) const BOOKINGS: &str = "/api/v1/resos/bookings";

/// The key the gateway mints for call `call` of answer `message`.
pub(crate) fn expected_key(message: &str, call: &str) -> String {
    let digest = Sha256::digest(format!("{message}{call}").as_bytes());
    format!("mtd-{}", &hex::encode(digest)[..32])
}

async fn a_write_from_the_chat_carries_the_key_stored_with_its_call(database: &Database) {
    let guest = "Keyed Kim";
    let script = Script::new([
        Turn::tool_calls([ToolCallSpec::new("call_read", "resos__getTables", "{}")]),
        Turn::tool_calls([ToolCallSpec::new(
            "call_write",
            "resos__createBooking",
            json!({ "date": open_day(4), "time": "18:00", "people": 2, "guestName": guest, "guestEmail": crate::chat::email(guest) })
                .to_string(),
        )]),
        Turn::text("Booked."),
    ]);
    let proxy = RecordingProxy::default();
    let app = spawn_behind(&proxy, database, Llm::Scripted(script)).await;
    // A person who may book (a chat-only client never writes: security_subjects.rs).
    let token = crate::delegation::chat_token_of(&app, "operator").await;

    let events = app.ask_and_approve(&token, "Book Kim in").await;
    let results: Vec<&str> = of(&events, "tool_result")
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["ok", "ok"], "{events:?}");
    let message = of(&events, "meta")[0]["message_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The key is the gateway's and the backend's business: never in the stream.
    for call in of(&events, "tool_call") {
        assert!(!call.to_string().contains("mtd-"), "{call}");
    }

    let rows: Vec<(String, String, Option<String>)> = sqlx::query_as(
        "SELECT id, tool, idempotency_key FROM tool_calls WHERE message_id = $1 ORDER BY created_at",
    )
    .bind(&message)
    .fetch_all(app.db.pool())
    .await
    .unwrap();
    let read = rows.iter().find(|r| r.1 == "getTables").unwrap();
    assert_eq!(read.2, None, "a read has no key");
    let write = rows.iter().find(|r| r.1 == "createBooking").unwrap();
    let key = write.2.clone().expect("the write's key is stored");
    assert_eq!(key, expected_key(&message, &write.0));

    // The MCP role sent that key with the write, and no key with any read.
    let writes = proxy.writes_to(BOOKINGS);
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(writes[0].method, "POST");
    assert_eq!(writes[0].idempotency_key.as_deref(), Some(key.as_str()));
    let reads: Vec<Seen> = proxy
        .seen()
        .into_iter()
        .filter(|s| s.method == "GET")
        .collect();
    assert!(!reads.is_empty());
    assert!(
        reads.iter().all(|s| s.idempotency_key.is_none()),
        "{reads:?}"
    );
    app.stop().await;
}

/// A tools/call to our MCP server with `meta` in its `_meta`.
async fn call_with(
    client: &Client,
    tool: &str,
    arguments: Value,
    meta: RequestMetaObject,
) -> CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_owned())
        .with_arguments(arguments.as_object().cloned().unwrap_or_default());
    params.meta = Some(meta);
    client.call_tool(params).await.expect("tools/call")
}

fn keyed(key: Value) -> RequestMetaObject {
    let mut meta = RequestMetaObject::default();
    meta.insert(meta::IDEMPOTENCY_KEY.to_owned(), key);
    meta
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_mcp_server_passes_a_usable_key_to_the_backend_on_writes_only() {
    let proxy = RecordingProxy::default();
    let app = spawn_behind(&proxy, &Database::Sqlite, Llm::Offline).await;
    let client = connect(&app, &app.token("maitred-gateway", &[]).await, MODERN).await;
    let date = open_day(5);
    let times = crate::mcp::call(
        &client,
        "getAvailableTimes",
        json!({ "date": date, "people": 2 }),
    )
    .await;
    let times: Vec<String> = times.structured_content.unwrap()["times"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect();
    assert!(times.len() >= 5, "{times:?}");
    let booking = |guest: &str, time: &str| json!({ "date": date, "time": time, "people": 2, "guestName": guest, "guestEmail": crate::chat::email(guest) });

    // A read given a key sends none.
    let read = call_with(&client, "getTables", json!({}), keyed(json!("it-read-1"))).await;
    assert_eq!(read.is_error, Some(false), "{}", text(&read));
    assert!(proxy.seen().iter().all(|s| s.idempotency_key.is_none()));

    // A write with a usable key, one with a key that is not one (spaces, too long,
    // not a string), and one with none: only the first carries a header.
    let sent = [
        (json!("it-write-1"), Some("it-write-1")),
        (json!("two words"), None),
        (json!("k".repeat(256)), None),
        (json!(42), None),
    ];
    for (i, (key, expected)) in sent.iter().enumerate() {
        let guest = format!("Keyed Guest {i}");
        let created = call_with(
            &client,
            "createBooking",
            booking(&guest, &times[i]),
            keyed(key.clone()),
        )
        .await;
        assert_eq!(created.is_error, Some(false), "{}", text(&created));
        let last = proxy.writes_to(BOOKINGS).pop().unwrap();
        assert_eq!(last.idempotency_key.as_deref(), *expected, "{key}");
    }
    let plain = crate::mcp::call(
        &client,
        "createBooking",
        booking("Keyless Guest", &times[4]),
    )
    .await;
    assert_eq!(plain.is_error, Some(false), "{}", text(&plain));
    assert_eq!(
        proxy.writes_to(BOOKINGS).pop().unwrap().idempotency_key,
        None
    );

    client.cancel().await.unwrap();
    app.stop().await;
}

/// End to end: the same createBooking sent twice with one key (as the gateway would
/// send a call again) is answered with the first booking, and one booking is made;
/// the same key with another booking is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_sent_again_with_its_key_books_once() {
    let proxy = RecordingProxy::default();
    let app = spawn_behind(&proxy, &Database::Sqlite, Llm::Offline).await;
    let client = connect(&app, &app.token("maitred-gateway", &[]).await, MODERN).await;
    let date = open_day(6);
    let times = crate::mcp::call(
        &client,
        "getAvailableTimes",
        json!({ "date": date, "people": 2 }),
    )
    .await;
    let times = times.structured_content.unwrap()["times"].clone();
    let guest = "Once Only Olga";
    let booking = |time: &Value| json!({ "date": date, "time": time, "people": 2, "guestName": guest, "guestEmail": crate::chat::email(guest) });
    let key = json!("mtd-0123456789abcdef0123456789abcdef");

    let first = call_with(
        &client,
        "createBooking",
        booking(&times[0]),
        keyed(key.clone()),
    )
    .await;
    let again = call_with(
        &client,
        "createBooking",
        booking(&times[0]),
        keyed(key.clone()),
    )
    .await;
    assert_eq!(first.is_error, Some(false), "{}", text(&first));
    assert_eq!(again.is_error, Some(false), "{}", text(&again));
    let id = |result: &CallToolResult| result.structured_content.as_ref().unwrap()["_id"].clone();
    assert_eq!(id(&first), id(&again));
    let other = call_with(&client, "createBooking", booking(&times[1]), keyed(key)).await;
    assert_eq!(other.is_error, Some(true), "{}", text(&other));

    let writes = proxy.writes_to(BOOKINGS);
    assert_eq!(writes.len(), 3, "{writes:?}");
    let found = crate::mcp::call(
        &client,
        "getBookings",
        json!({ "fromDate": date, "toDate": date, "customQuery": format!("guest.name = '{guest}'") }),
    )
    .await;
    assert_eq!(found.structured_content.unwrap()["total"], 1);
    client.cancel().await.unwrap();
    app.stop().await;
}
