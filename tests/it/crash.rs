//! `kill -9` of a real `maitred all` (one process, SQLite, no Redis) in the middle of
//! an answer, and a restart, with taking answers over switched off (`resume.rs` has
//! it on, the default): nothing is left `streaming`, the answer is interrupted
//! and keeps every token the client was shown, and a viewer that comes back gets the
//! rest of the answer's events, its end included.

use std::time::Duration;

use maitred::db::Db;
use maitred::settings::sqlite_url;
use maitred_scripted_llm::{Script, ScriptedLlm, Turn};

use crate::helpers::{SseReader, answer};
use crate::process::{Maitred, Ports, ask};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_answer_loses_nothing_that_was_shown() {
    let words = (0..400).map(|i| format!("w{i} "));
    let llm = ScriptedLlm::start(Script::new([
        Turn::text_fragments(words).paced(Duration::from_millis(20))
    ]))
    .await
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let ports = Ports::free();
    let mut env = ports.env();
    env.extend([
        ("MAITRED_LLM_BASE_URL", llm.base_url()),
        ("MAITRED_LLM_MODEL", "scripted".to_owned()),
        ("MAITRED_RESUME_ANSWERS", "false".to_owned()),
    ]);
    let (backend, gateway) = (ports.backend_url(), ports.gateway_url());
    let ready = [backend.as_str(), gateway.as_str()];
    let mut maitred = Maitred::start(&["all"], data.path(), &env, &ready).await;
    // The answer streams for longer than a request/response client allows a whole
    // exchange (30 s) when the machine is busy; the reader bounds each wait itself.
    let http = maitred::http_client::streaming().unwrap();
    let token = maitred.token(&backend, "maitred-cli").await;

    let mut stream = ask(&http, &gateway, &token, "Talk a long while").await;
    let mut seen = Vec::new();
    while seen
        .iter()
        .filter(|e: &&crate::helpers::SseEvent| e.event == "token")
        .count()
        < 30
    {
        seen.push(stream.next().await.expect("a token"));
    }
    let message_id = seen[0].data["message_id"].as_str().unwrap().to_owned();
    maitred.kill();
    // What the client got before the process died, however much more was in flight.
    while let Some(event) = tokio::time::timeout(Duration::from_millis(200), stream.next())
        .await
        .ok()
        .flatten()
    {
        seen.push(event);
    }
    let shown = answer(&seen);
    let last_seen = seen.last().unwrap().id.unwrap();
    assert!(!seen.iter().any(|e| e.event == "done"));

    maitred.restart(&ready).await;
    let db = Db::connect(&sqlite_url(&data.path().join("maitred.db")))
        .await
        .unwrap();
    // Recovery runs beside the server once it is up: wait for its last step, the
    // answer's own row, not only for the stored message (its first step).
    let (mut stored, mut answer_status) = (Vec::new(), String::new());
    for _ in 0..100 {
        stored = sqlx::query_as::<_, (String, String)>(
            "SELECT status, content FROM chat_messages WHERE role = 'assistant'",
        )
        .fetch_all(db.pool())
        .await
        .unwrap();
        (answer_status,) = sqlx::query_as("SELECT status FROM answers WHERE id = $1")
            .bind(&message_id)
            .fetch_one(db.pool())
            .await
            .unwrap();
        let settled = !stored.is_empty() && stored.iter().all(|(status, _)| status != "streaming");
        if settled && answer_status == "interrupted" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(stored.len(), 1, "{stored:?}\n{}", maitred.log());
    let (status, content) = &stored[0];
    assert_eq!(status, "interrupted");
    assert!(
        content.starts_with(&shown),
        "every token shown is kept: shown {shown:?}, stored {content:?}"
    );
    assert_eq!(answer_status, "interrupted", "{}", maitred.log());

    // The viewer comes back: the rest of what was stored, then how it ended.
    let response = http
        .get(format!("{gateway}/api/v1/resos/stream/chat/{message_id}"))
        .bearer_auth(&token)
        .header("last-event-id", last_seen.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let rest = SseReader::new(response).rest().await;
    assert_eq!(rest.first().unwrap().id, Some(last_seen + 1));
    let error = rest.iter().find(|e| e.event == "error").unwrap();
    assert_eq!(error.data["code"], "interrupted");
    assert_eq!(rest.last().unwrap().event, "done");
    let mut whole = seen.clone();
    whole.extend(rest);
    assert_eq!(&answer(&whole), content, "the stream and the store agree");
    db.close().await;
    llm.stop().await;
}
