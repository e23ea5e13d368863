//! Security issue #22, finding 3: no role had HTTP timeouts, so a connection that sent
//! nothing, half a request head, or a body a byte every few seconds stayed open for as
//! long as the client liked, `/oauth2/token` included. Each attack is made here on
//! real sockets against every role, with the timeouts set short; and what honest
//! clients do (a chat answer streamed for longer than any timeout, an MCP event
//! stream, a slow but steady upload) still works.

use std::time::{Duration, Instant};

use maitred::settings::HttpTimeouts;
use maitred_scripted_llm::{Script, Turn};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;

use crate::helpers::{Database, Llm, TestApp, answer};

const HEADER_READ: Duration = Duration::from_secs(1);
const BODY_IDLE: Duration = Duration::from_secs(1);
const BODY_READ: Duration = Duration::from_secs(3);
const REQUEST: Duration = Duration::from_secs(4);
/// How late a close may come on a busy test machine.
const SLACK: Duration = Duration::from_secs(3);

fn short(settings: &mut maitred::settings::Settings) {
    settings.timeouts = HttpTimeouts {
        header_read: HEADER_READ,
        body_idle: BODY_IDLE,
        body_read: BODY_READ,
        request: REQUEST,
    };
}

fn ports(app: &TestApp) -> [(&'static str, u16); 3] {
    [
        ("backend", app.settings.backend.endpoint.port),
        ("gateway", app.settings.gateway.endpoint.port),
        ("mcp", app.settings.mcp.endpoint.port),
    ]
}

/// Reads until the server closes the connection: what it sent, and how long after
/// `opened` it closed.
async fn until_closed(
    stream: &mut (impl AsyncRead + Unpin),
    opened: Instant,
) -> (String, Duration) {
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(20), stream.read(&mut buffer)).await {
            Err(_) => panic!(
                "the connection is still open after 20 s; it sent {:?}",
                String::from_utf8_lossy(&seen)
            ),
            Ok(Ok(0) | Err(_)) => {
                return (
                    String::from_utf8_lossy(&seen).into_owned(),
                    opened.elapsed(),
                );
            }
            Ok(Ok(read)) => seen.extend_from_slice(&buffer[..read]),
        }
    }
}

/// Writes `bytes` one at a time, `gap` apart, until done or the server hangs up.
fn trickle(mut writer: OwnedWriteHalf, bytes: Vec<u8>, gap: Duration) {
    tokio::spawn(async move {
        for byte in bytes {
            tokio::time::sleep(gap).await;
            if writer.write_all(&[byte]).await.is_err() {
                return;
            }
        }
        // Keep the write side open: only the server may end this connection.
        std::future::pending::<()>().await;
    });
}

fn closed_by_the_timeout(what: &str, after: Duration, timeout: Duration) {
    assert!(
        after >= timeout.mul_f32(0.8) && after <= timeout + SLACK,
        "{what}: closed after {after:?}, the timeout is {timeout:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_sends_nothing_is_closed_on_every_role() {
    let app = TestApp::spawn_with(&Database::Sqlite, short).await;
    let silent = ports(&app).map(|(role, port)| async move {
        let opened = Instant::now();
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let (_, after) = until_closed(&mut stream, opened).await;
        closed_by_the_timeout(role, after, HEADER_READ);
    });
    futures::future::join_all(silent).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_a_request_head_is_closed_after_the_header_timeout() {
    let app = TestApp::spawn_with(&Database::Sqlite, short).await;
    let attacks = ports(&app).map(|(role, port)| async move {
        let path = match role {
            "backend" => "/oauth2/token",
            "gateway" => "/api/v1/resos/stream/chat",
            _ => "/mcp",
        };
        let opened = Instant::now();
        let stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let (mut reader, mut writer) = stream.into_split();
        writer
            .write_all(format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n").as_bytes())
            .await
            .unwrap();
        // More of the head, a byte every 200 ms: bytes keep coming, the head never ends.
        trickle(writer, b"X-Slow: ".repeat(20), Duration::from_millis(200));
        let (sent, after) = until_closed(&mut reader, opened).await;
        closed_by_the_timeout(&format!("{role} {path}"), after, HEADER_READ);
        assert!(
            sent.is_empty() || sent.starts_with("HTTP/1.1 408"),
            "{role}: {sent}"
        );
    });
    futures::future::join_all(attacks).await;
    app.stop().await;
}

/// A request head with a body announced, as raw bytes.
fn head(port: u16, path: &str, headers: &[(&str, &str)], length: usize) -> Vec<u8> {
    let mut head = format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {length}\r\n\r\n"));
    head.into_bytes()
}

/// Sends `head` at once, then the body a byte every `gap`, and reads until closed.
async fn dribble(port: u16, head: Vec<u8>, body: Vec<u8>, gap: Duration) -> (String, Duration) {
    let opened = Instant::now();
    let stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    writer.write_all(&head).await.unwrap();
    trickle(writer, body, gap);
    until_closed(&mut reader, opened).await
}

fn answered_408(what: &str, sent: &str) {
    assert!(sent.starts_with("HTTP/1.1 408"), "{what}: {sent}");
    assert!(sent.contains("REQUEST_TIMEOUT"), "{what}: {sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_or_dribbled_body_is_answered_408_and_closed() {
    let app = TestApp::spawn_with(&Database::Sqlite, short).await;
    let backend = app.settings.backend.endpoint.port;
    let form = [("Content-Type", "application/x-www-form-urlencoded")];
    let token = head(backend, "/oauth2/token", &form, 200);

    // The token endpoint: a few bytes of the form, then silence.
    let opened = Instant::now();
    let stream = TcpStream::connect(("127.0.0.1", backend)).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    writer.write_all(&token).await.unwrap();
    writer.write_all(b"grant_type=").await.unwrap();
    let (sent, after) = until_closed(&mut reader, opened).await;
    answered_408("stalled /oauth2/token", &sent);
    closed_by_the_timeout("stalled /oauth2/token", after, BODY_IDLE);
    drop(writer);

    // The token endpoint, a byte every 400 ms: never idle for a second, but the whole
    // body is not there after three.
    let (sent, after) = dribble(backend, token, vec![b'a'; 200], Duration::from_millis(400)).await;
    answered_408("dribbled /oauth2/token", &sent);
    closed_by_the_timeout("dribbled /oauth2/token", after, BODY_READ);

    // The chat, by a signed-in caller, and the resOS API: the same.
    let chat_token = app.chat_token().await;
    let bearer = format!("Bearer {chat_token}");
    let gateway = app.settings.gateway.endpoint.port;
    let chat = head(
        gateway,
        "/api/v1/resos/stream/chat",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &bearer),
        ],
        200,
    );
    let backend_token = app.backend_token().await;
    let bearer = format!("Bearer {backend_token}");
    let bookings = head(
        backend,
        "/api/v1/resos/bookings",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &bearer),
        ],
        200,
    );
    let slow = [("chat", gateway, chat), ("bookings", backend, bookings)].map(
        |(what, port, head)| async move {
            let (sent, after) =
                dribble(port, head, vec![b' '; 200], Duration::from_millis(400)).await;
            answered_408(what, &sent);
            closed_by_the_timeout(what, after, BODY_READ);
        },
    );
    futures::future::join_all(slow).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_but_steady_upload_within_the_limits_succeeds() {
    let app = TestApp::spawn_with(&Database::Sqlite, short).await;
    let backend = app.settings.backend.endpoint.port;
    let body = b"grant_type=client_credentials&scope=chat.read".to_vec();
    let credentials = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        format!("maitred-cli:{}", app.secret("maitred-cli")),
    );
    let basic = format!("Basic {credentials}");
    let head = head(
        backend,
        "/oauth2/token",
        &[
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Authorization", &basic),
            ("Connection", "close"),
        ],
        body.len(),
    );
    let opened = Instant::now();
    let stream = TcpStream::connect(("127.0.0.1", backend)).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    writer.write_all(&head).await.unwrap();
    // Four pieces 400 ms apart: longer than the header timeout, never idle for a
    // second, whole well before the body's three.
    for piece in body.chunks(body.len().div_ceil(4)) {
        tokio::time::sleep(Duration::from_millis(400)).await;
        writer.write_all(piece).await.unwrap();
    }
    let (sent, after) = until_closed(&mut reader, opened).await;
    assert!(sent.starts_with("HTTP/1.1 200"), "{sent}");
    assert!(sent.contains("access_token"), "{sent}");
    assert!(after > HEADER_READ, "the upload took {after:?}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_answer_streams_for_longer_than_every_timeout() {
    // The model is silent for longer than the request timeout before it answers; the
    // stream has no keep-alive in that time either (it comes every 15 s).
    let slow = Turn::text_fragments(["Still ", "here."])
        .first_token_delay(REQUEST + Duration::from_secs(1))
        .paced(Duration::from_millis(200));
    let app =
        TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(Script::new([slow])), short).await;
    let token = app.chat_token().await;
    let started = Instant::now();
    let events = app.ask(&token, "Are you there?", None).await.rest().await;
    assert!(started.elapsed() > REQUEST, "{:?}", started.elapsed());
    assert_eq!(answer(&events), "Still here.", "{events:?}");
    let done = events.last().unwrap();
    assert_eq!(
        (done.event.as_str(), &done.data["finish_reason"]),
        ("done", &json!("stop")),
        "{events:?}"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_event_stream_stays_open_past_every_timeout() {
    let app = TestApp::spawn_with(&Database::Sqlite, short).await;
    let token = app.token("maitred-gateway", &[]).await;
    let post = |session: Option<String>, body: Value| {
        let mut request = app
            .http
            .post(&app.mcp_url)
            .bearer_auth(&token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .json(&body);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let initialized = post(
        None,
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": { "name": "raw", "version": "1" } } }),
    )
    .await
    .unwrap();
    assert_eq!(initialized.status(), 200);
    let session = initialized.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let notified = post(
        Some(session.clone()),
        json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
    )
    .await
    .unwrap();
    assert!(notified.status().is_success(), "{}", notified.status());

    // The server-to-client stream: open, and quiet.
    let mut stream = reqwest::Client::new()
        .get(&app.mcp_url)
        .bearer_auth(&token)
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let open_until = Instant::now() + REQUEST + Duration::from_secs(1);
    while Instant::now() < open_until {
        let left = open_until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.chunk()).await {
            Err(_) | Ok(Ok(Some(_))) => {}
            Ok(ended) => panic!("the MCP event stream ended early: {ended:?}"),
        }
    }
    drop(stream);
    app.stop().await;
}
