//! SIGTERM to a real `maitred all` process in the middle of answers: a short answer
//! finishes within the grace period, a long one is interrupted, both viewers get
//! `done`, the process exits cleanly and the store holds every token either sent.

use std::time::Duration;

use maitred::db::Db;
use maitred::settings::sqlite_url;
use maitred_scripted_llm::{Script, ScriptedLlm, Turn};

use crate::helpers::{SseEvent, answer};
use crate::process::{Maitred, Ports, ask};

fn paced(n: usize, prefix: &str) -> Turn {
    Turn::text_fragments((0..n).map(|i| format!("{prefix}{i} "))).paced(Duration::from_millis(40))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_short_answers_interrupts_long_ones_and_loses_nothing() {
    let llm = ScriptedLlm::start(Script::new([paced(200, "long"), paced(15, "short")]))
        .await
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("gateway.toml");
    std::fs::write(&config, "[resilience]\nshutdown_grace_secs = 2.0\n").unwrap();
    let ports = Ports::free();
    let mut env = ports.env();
    env.extend([
        ("MAITRED_LLM_BASE_URL", llm.base_url()),
        ("MAITRED_LLM_MODEL", "scripted".to_owned()),
        ("MAITRED_GATEWAY_CONFIG", config.display().to_string()),
    ]);
    let (backend, gateway) = (ports.backend_url(), ports.gateway_url());
    let mut process = Maitred::start(&["all"], data.path(), &env, &[&backend, &gateway]).await;
    // The answer streams for longer than a request/response client allows a whole
    // exchange (30 s) when the machine is busy; the reader bounds each wait itself.
    let http = maitred::http_client::streaming().unwrap();
    let token = &process.token(&backend, "maitred-cli").await;

    let mut long = ask(&http, &gateway, token, "Talk a long while").await;
    let mut long_events = long.until("token").await;
    let mut short = ask(&http, &gateway, token, "Say a little").await;
    let mut short_events = short.until("token").await;

    let exited = tokio::spawn(async move {
        let status = process.terminate().await;
        (process, status)
    });

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

    let (_process, status) = exited.await.unwrap();
    assert!(
        status.success(),
        "maitred exited after the grace period: {status}"
    );

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
