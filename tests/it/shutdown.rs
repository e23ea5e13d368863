//! SIGTERM to a real `maitred all` process in the middle of answers: a short answer
//! finishes within the grace period, a long one is interrupted, both viewers get
//! `done`, the process exits cleanly and the store holds every token either sent.

use std::net::{Ipv4Addr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use maitred::config::sqlite_url;
use maitred::db::Db;
use maitred::identity::dev::DevCredentials;
use maitred::scripted_llm::{Script, ScriptedLlm, Turn};
use serde_json::{Value, json};

use crate::helpers::{SseEvent, SseReader, answer};

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Kills the process if the test fails before it exits by itself.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn ready(http: &reqwest::Client, url: &str) {
    for _ in 0..300 {
        if let Ok(response) = http.get(format!("{url}/readyz")).send().await
            && response.status() == 200
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{url} did not become ready");
}

fn paced(n: usize, prefix: &str) -> Turn {
    Turn::text_fragments((0..n).map(|i| format!("{prefix}{i} "))).paced(Duration::from_millis(40))
}

async fn ask(http: &reqwest::Client, gateway: &str, token: &str, question: &str) -> SseReader {
    let response = http
        .post(format!("{gateway}/api/v1/resos/stream/chat"))
        .bearer_auth(token)
        .json(&json!({ "question": question }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    SseReader::new(response)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_short_answers_interrupts_long_ones_and_loses_nothing() {
    let llm = ScriptedLlm::start(Script::new([paced(200, "long"), paced(15, "short")]))
        .await
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("gateway.toml");
    std::fs::write(&config, "[resilience]\nshutdown_grace_secs = 2.0\n").unwrap();
    let (backend_port, gateway_port, mcp_port) = (free_port(), free_port(), free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_maitred"))
        .arg("all")
        .env_remove("DATABASE_URL")
        .env("MAITRED_DATA_DIR", data.path())
        .env("MAITRED_BACKEND_PORT", backend_port.to_string())
        .env("MAITRED_GATEWAY_PORT", gateway_port.to_string())
        .env("MAITRED_MCP_PORT", mcp_port.to_string())
        .env("MAITRED_LLM_BASE_URL", llm.base_url())
        .env("MAITRED_LLM_MODEL", "scripted")
        .env("MAITRED_GATEWAY_CONFIG", &config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut process = Process(child);
    let http = maitred::http_client::new().unwrap();
    let backend = format!("http://127.0.0.1:{backend_port}");
    let gateway = format!("http://127.0.0.1:{gateway_port}");
    ready(&http, &backend).await;
    ready(&http, &gateway).await;
    let secret = DevCredentials::load(data.path())
        .unwrap()
        .client_secret("maitred-cli")
        .unwrap()
        .to_owned();
    let token: Value = http
        .post(format!("{backend}/oauth2/token"))
        .basic_auth("maitred-cli", Some(secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = token["access_token"].as_str().unwrap();

    let mut long = ask(&http, &gateway, token, "Talk a long while").await;
    let mut long_events = long.until("token").await;
    let mut short = ask(&http, &gateway, token, "Say a little").await;
    let mut short_events = short.until("token").await;

    let pid = process.0.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());

    let (long_rest, short_rest) = tokio::join!(long.rest(), short.rest());
    long_events.extend(long_rest);
    short_events.extend(short_rest);
    let last = |events: &[SseEvent]| events.last().unwrap().data["finish_reason"].clone();
    assert_eq!(
        last(&short_events),
        "stop",
        "the short answer finished in the grace period"
    );
    assert_eq!(last(&long_events), "error");
    let error = long_events.iter().find(|e| e.event == "error").unwrap();
    assert_eq!(error.data["code"], "interrupted");
    assert!(
        answer(&long_events).split_whitespace().count() > 10,
        "it ran on during the grace"
    );

    let mut exited = None;
    for _ in 0..200 {
        if let Some(status) = process.0.try_wait().unwrap() {
            exited = Some(status);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = exited.expect("maitred exited after the grace period");
    assert!(status.success(), "{status}");

    let db = Db::connect(&sqlite_url(&data.path().join("maitred.db")))
        .await
        .unwrap();
    let stored: Vec<(String, String)> = sqlx::query_as(
        "SELECT status, content FROM chat_messages WHERE role = 'assistant' ORDER BY content",
    )
    .fetch_all(db.pool())
    .await
    .unwrap();
    assert_eq!(
        stored,
        [
            ("interrupted".to_owned(), answer(&long_events)),
            ("complete".to_owned(), answer(&short_events)),
        ]
    );
    db.close().await;
    llm.stop().await;
}
