//! The MCP side failing under a running gateway: the real MCP role stopped and
//! started again (the circuit breaker), and an MCP server that revokes the gateway's
//! token (one refresh and one retry).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::helpers::{Database, Llm, SseEvent, TestApp, answer, own_mcp_server, serve};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use maitred::settings::mcp_servers::AuthConfig;
use maitred_scripted_llm::{Script, ToolCallSpec, Turn};
use serde_json::Value;

fn tables_then_answer(questions: usize) -> Script {
    Script::new((0..questions).flat_map(|i| {
        [
            Turn::tool_calls([ToolCallSpec::new(format!("t{i}"), "resos__getTables", "{}")]),
            Turn::text(answer_text(i)),
        ]
    }))
}

/// The model's answer to question `i`. It states no figure: one stated after every
/// call failed would be replaced by the gateway's "could not get the data" (grounding).
fn answer_text(i: usize) -> String {
    let letter = char::from(b'a' + u8::try_from(i).unwrap());
    format!("Answer {letter}.")
}

fn tool_result(events: &[SseEvent]) -> &Value {
    &events
        .iter()
        .find(|e| e.event == "tool_result")
        .expect("a tool_result event")
        .data
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_breaker_opens_after_failures_and_closes_when_the_server_returns() {
    let mut app = TestApp::spawn_chat(
        &Database::Sqlite,
        Llm::Scripted(tables_then_answer(5)),
        |s| {
            s.gateway.file.resilience.breaker_failures = 2;
            s.gateway.file.resilience.breaker_cooldown = Duration::from_secs_f64(1.0);
        },
    )
    .await;
    let token = app.chat_token().await;
    let first = app.ask(&token, "Tables?", None).await.rest().await;
    assert_eq!(tool_result(&first)["status"], "ok");

    app.stop_mcp().await;
    let mut summaries = Vec::new();
    for i in 1..=3 {
        let events = app.ask(&token, "Tables?", None).await.rest().await;
        let result = tool_result(&events);
        assert_eq!(result["status"], "unavailable", "{result}");
        summaries.push(result["summary"].as_str().unwrap().to_owned());
        // The answer still completes: the model was told and answered.
        assert_eq!(answer(&events), answer_text(i));
        assert_eq!(events.last().unwrap().data["finish_reason"], "stop");
    }
    // Two failures opened the breaker: the third call was not even tried.
    assert!(
        !summaries[0].contains("not called for now"),
        "{summaries:?}"
    );
    assert!(summaries[2].contains("not called for now"), "{summaries:?}");
    let requests = app.llm.as_ref().unwrap().requests();
    let told = requests[3].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(told["role"], "tool");
    assert!(
        told["content"].as_str().unwrap().contains("unavailable"),
        "{told}"
    );

    app.start_mcp().await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let events = app.ask(&token, "Tables?", None).await.rest().await;
    assert_eq!(
        tool_result(&events)["status"],
        "ok",
        "the trial call closed the breaker"
    );
    app.stop().await;
}

/// Stands in front of the MCP role; once told to, it revokes the next token it sees
/// (answering 401 to it from then on), as a server whose token was revoked would.
#[derive(Clone, Default)]
struct RevokingProxy {
    target: Arc<Mutex<String>>,
    revoke_next: Arc<AtomicBool>,
    revoked: Arc<Mutex<HashSet<String>>>,
    refused: Arc<Mutex<u32>>,
    tokens: Arc<Mutex<Vec<String>>>,
}

impl RevokingProxy {
    async fn start(&self) -> String {
        let router = axum::Router::new()
            .fallback(forward)
            .with_state(self.clone());
        format!("{}/mcp", serve(router).await)
    }
}

async fn forward(State(proxy): State<RevokingProxy>, request: Request) -> Response {
    let token = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_owned();
    {
        let mut tokens = proxy.tokens.lock().unwrap();
        if !tokens.contains(&token) {
            tokens.push(token.clone());
        }
    }
    if proxy.revoke_next.swap(false, Ordering::SeqCst) {
        proxy.revoked.lock().unwrap().insert(token.clone());
    }
    if proxy.revoked.lock().unwrap().contains(&token) {
        *proxy.refused.lock().unwrap() += 1;
        let mut response = StatusCode::UNAUTHORIZED.into_response();
        response.headers_mut().insert(
            "www-authenticate",
            HeaderValue::from_static("Bearer error=\"invalid_token\""),
        );
        return response;
    }
    let target = proxy.target.lock().unwrap().clone();
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    let mut upstream = maitred::http_client::streaming()
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
        response = response.header(name, value);
    }
    response
        .body(Body::from_stream(answer.bytes_stream()))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_mcp_token_is_refreshed_once_and_the_call_retried() {
    let proxy = RevokingProxy::default();
    let proxy_url = proxy.start().await;
    let app = TestApp::spawn_chat(
        &Database::Sqlite,
        Llm::Scripted(tables_then_answer(2)),
        |s| {
            *proxy.target.lock().unwrap() = s.mcp_resource();
            // The gateway's own client-credentials token, for every request.
            let mut server = own_mcp_server(s, "resos");
            if let AuthConfig::TokenExchange(auth) = server.auth {
                server.auth = AuthConfig::ClientCredentials(auth);
            }
            server.url.clone_from(&proxy_url);
            s.gateway.file.mcp_servers = vec![server];
        },
    )
    .await;
    let token = app.chat_token().await;
    let first = app.ask(&token, "Tables?", None).await.rest().await;
    assert_eq!(tool_result(&first)["status"], "ok");
    assert_eq!(proxy.tokens.lock().unwrap().len(), 1);

    proxy.revoke_next.store(true, Ordering::SeqCst);
    let events = app.ask(&token, "Tables?", None).await.rest().await;
    assert_eq!(tool_result(&events)["status"], "ok", "{events:?}");
    assert_eq!(
        *proxy.refused.lock().unwrap(),
        1,
        "one 401, then a fresh token"
    );
    let tokens = proxy.tokens.lock().unwrap().clone();
    assert_eq!(tokens.len(), 2, "the gateway fetched exactly one new token");
    assert_ne!(tokens[0], tokens[1]);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_delegated_token_is_exchanged_again_once_and_the_call_retried() {
    let proxy = RevokingProxy::default();
    let proxy_url = proxy.start().await;
    let app = TestApp::spawn_chat(
        &Database::Sqlite,
        Llm::Scripted(tables_then_answer(2)),
        |s| {
            *proxy.target.lock().unwrap() = s.mcp_resource();
            s.gateway.mcp_url = Some(proxy_url.clone());
        },
    )
    .await;
    let token = app.chat_token().await;
    let first = app.ask(&token, "Tables?", None).await.rest().await;
    assert_eq!(tool_result(&first)["status"], "ok");
    // The gateway's own token listed the tools; the call carried the asker's.
    assert_eq!(proxy.tokens.lock().unwrap().len(), 2);

    // The next request is the call, with the asker's exchanged token (kept): revoked.
    proxy.revoke_next.store(true, Ordering::SeqCst);
    let events = app.ask(&token, "Tables?", None).await.rest().await;
    assert_eq!(tool_result(&events)["status"], "ok", "{events:?}");
    assert_eq!(
        *proxy.refused.lock().unwrap(),
        1,
        "one 401, then a fresh exchange"
    );
    let tokens = proxy.tokens.lock().unwrap().clone();
    assert_eq!(tokens.len(), 3, "exactly one more exchange");
    app.stop().await;
}
