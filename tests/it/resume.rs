//! Answers that go on after a crash: a real `maitred all` (one process, SQLite, no
//! Redis) killed with `kill -9` in the middle of an answer and started again takes
//! the answer over from what it stored. Its viewer comes back and sees `resumed`,
//! the rest of the answer and `done` (`stop`); a booking made before the crash is
//! not made again, an approval that was waiting still waits, the text shown before
//! the crash stays in the stored answer, and the model is told where its reply was
//! cut off.

use std::time::Duration;

use maitred::db::Db;
use maitred::settings::sqlite_url;
use maitred_scripted_llm::{Script, ScriptedLlm, ToolCallSpec, Turn};
use serde_json::{Value, json};

use crate::helpers::{SseEvent, SseReader, answer};
use crate::mcp::open_day;
use crate::process::{Maitred, Ports, ask};

/// A `maitred all` on `llm`, with its URLs and a chat token.
struct One {
    maitred: Maitred,
    _data: tempfile::TempDir,
    backend: String,
    gateway: String,
    token: String,
    http: reqwest::Client,
}

impl One {
    async fn start(llm: &ScriptedLlm, extra: &[(&'static str, String)]) -> Self {
        let data = tempfile::tempdir().unwrap();
        let ports = Ports::free();
        let mut env = ports.env();
        env.extend([
            ("MAITRED_LLM_BASE_URL", llm.base_url()),
            ("MAITRED_LLM_MODEL", "scripted".to_owned()),
        ]);
        env.extend(extra.iter().cloned());
        let (backend, gateway) = (ports.backend_url(), ports.gateway_url());
        let maitred = Maitred::start(
            &["all"],
            data.path(),
            &env,
            &[backend.as_str(), gateway.as_str()],
        )
        .await;
        // A person who may book: a chat-only client's writes are refused downstream
        // (issue 37, finding 2).
        let password = maitred::identity::dev::DevCredentials::load(data.path())
            .unwrap()
            .users["operator"]
            .password
            .clone();
        let tokens = crate::token_exchange::person_tokens_at(
            &reqwest::Client::new(),
            &backend,
            // The web client's redirect as registered: the gateway's public URL.
            &format!(
                "{}/login/callback",
                gateway.replace("127.0.0.1", "localhost")
            ),
            "operator",
            &password,
            "openid profile chat.read chat.write",
        )
        .await;
        let token = tokens["access_token"].as_str().unwrap().to_owned();
        Self {
            maitred,
            _data: data,
            backend,
            gateway,
            token,
            http: maitred::http_client::streaming().unwrap(),
        }
    }

    async fn crash_and_restart(&mut self) {
        self.maitred.kill();
        let ready = [self.backend.clone(), self.gateway.clone()];
        let ready: Vec<&str> = ready.iter().map(String::as_str).collect();
        self.maitred.restart(&ready).await;
    }

    async fn db(&self) -> Db {
        Db::connect(&sqlite_url(&self.maitred.data.join("maitred.db")))
            .await
            .unwrap()
    }

    /// Watches `message` again after event `last_seen`, to its end.
    async fn watch_again(&self, message: &str, last_seen: u64) -> Vec<SseEvent> {
        let response = self
            .http
            .get(format!(
                "{}/api/v1/resos/stream/chat/{message}",
                self.gateway
            ))
            .bearer_auth(&self.token)
            .header("last-event-id", last_seen.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{}", self.maitred.log());
        SseReader::new(response).rest().await
    }

    async fn approve(&self, id: &str) {
        let approved = self
            .http
            .post(format!("{}/api/v1/resos/chat/approvals/{id}", self.gateway))
            .bearer_auth(&self.token)
            .json(&json!({ "approve": true }))
            .send()
            .await
            .unwrap();
        assert_eq!(approved.status(), 200, "{}", self.maitred.log());
    }
}

fn booking(id: &str, guest: &str) -> ToolCallSpec {
    ToolCallSpec::new(
        id,
        "resos__createBooking",
        json!({ "date": open_day(5), "time": "19:00", "people": 2, "guestName": guest, "guestEmail": crate::chat::email(guest) })
            .to_string(),
    )
}

async fn bookings_of(db: &Db, guest: &str) -> i64 {
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM bookings WHERE guest_name = $1")
        .bind(guest)
        .fetch_one(db.pool())
        .await
        .unwrap();
    n
}

/// Reads events until `stop` says so; what was read.
async fn read_until(stream: &mut SseReader, stop: impl Fn(&[SseEvent]) -> bool) -> Vec<SseEvent> {
    let mut seen = Vec::new();
    while !stop(&seen) {
        seen.push(stream.next().await.expect("an event"));
    }
    seen
}

fn names(events: &[SseEvent]) -> Vec<&str> {
    events.iter().map(|e| e.event.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_cut_off_mid_turn_goes_on_after_a_restart_and_books_once() {
    let guest = "Resumed Rosa";
    let words = (0..400).map(|i| format!("w{i} "));
    let llm = ScriptedLlm::start(Script::new([
        Turn::tool_calls([booking("call_book", guest)]),
        Turn::text_fragments(words).paced(Duration::from_millis(20)),
        Turn::text("and that is all."),
    ]))
    .await
    .unwrap();
    let mut one = One::start(&llm, &[]).await;
    let mut stream = ask(&one.http, &one.gateway, &one.token, "Book Rosa and talk").await;
    let mut seen = read_until(&mut stream, |seen| {
        seen.last().is_some_and(|e| e.event == "approval_required")
    })
    .await;
    let message = seen[0].data["message_id"].as_str().unwrap().to_owned();
    let approval = seen.last().unwrap().data["id"].as_str().unwrap().to_owned();
    one.approve(&approval).await;
    seen.extend(
        read_until(&mut stream, |seen| {
            seen.iter().filter(|e| e.event == "token").count() >= 30
        })
        .await,
    );
    assert!(names(&seen).contains(&"tool_result"), "{seen:?}");
    one.crash_and_restart().await;
    // What the client got before the process died.
    while let Some(event) = tokio::time::timeout(Duration::from_millis(200), stream.next())
        .await
        .ok()
        .flatten()
    {
        seen.push(event);
    }
    assert!(!names(&seen).contains(&"done"));
    let shown = answer(&seen);
    let last_seen = seen.last().unwrap().id.unwrap();

    let rest = one.watch_again(&message, last_seen).await;
    let log = one.maitred.log();
    assert_eq!(rest.first().unwrap().id, Some(last_seen + 1), "{log}");
    assert_eq!(rest[0].event, "resumed", "{rest:?}\n{log}");
    assert_eq!(rest[0].data["attempt"], 1);
    assert!(!names(&rest).contains(&"error"), "{rest:?}");
    assert!(
        !names(&rest).contains(&"tool_call"),
        "nothing runs again: {rest:?}"
    );
    let done = rest.last().unwrap();
    assert_eq!(done.event, "done");
    assert_eq!(done.data["finish_reason"], "stop", "{rest:?}\n{log}");
    let mut whole = seen.clone();
    whole.extend(rest);
    let text = answer(&whole);
    assert!(
        text.starts_with(&shown) && text.ends_with("and that is all."),
        "{text:?}"
    );

    // The model was asked again with what was shown, and told it was cut off there.
    let requests = llm.requests();
    assert_eq!(requests.len(), 3, "{requests:?}");
    let messages = requests[2].body["messages"].as_array().unwrap();
    let cut = &messages[messages.len() - 2];
    assert_eq!(cut["role"], "assistant");
    assert_eq!(cut["content"].as_str().unwrap(), shown, "{messages:?}");
    let note = messages.last().unwrap();
    assert_eq!(note["role"], "system");
    assert!(
        note["content"].as_str().unwrap().contains("cut off"),
        "{note}"
    );

    let db = one.db().await;
    assert_eq!(bookings_of(&db, guest).await, 1, "booked once");
    let stored: Vec<(String, String)> = sqlx::query_as(
        "SELECT status, content FROM chat_messages WHERE message_id = $1 AND role = 'assistant' ORDER BY seq",
    )
    .bind(&message)
    .fetch_all(db.pool())
    .await
    .unwrap();
    let statuses: Vec<&str> = stored.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(
        statuses,
        ["complete", "interrupted", "complete"],
        "{stored:?}"
    );
    let kept: String = stored.iter().map(|(_, c)| c.as_str()).collect();
    assert_eq!(kept, text, "the stream and the store agree");
    let (status,): (String,) = sqlx::query_as("SELECT status FROM answers WHERE id = $1")
        .bind(&message)
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(status, "finished");
    let (askers,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM answer_askers")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(
        askers, 0,
        "who asked (and their token) is not kept after the end"
    );
    db.close().await;
    llm.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_waiting_at_a_crash_still_waits_after_it() {
    let guest = "Waiting Wanda";
    let llm = ScriptedLlm::start(Script::new([
        Turn::tool_calls([booking("call_book", guest)]),
        Turn::text("Booked Wanda."),
    ]))
    .await
    .unwrap();
    let mut one = One::start(&llm, &[]).await;
    let mut stream = ask(&one.http, &one.gateway, &one.token, "Book Wanda").await;
    let seen = read_until(&mut stream, |seen| {
        seen.last().is_some_and(|e| e.event == "approval_required")
    })
    .await;
    let message = seen[0].data["message_id"].as_str().unwrap().to_owned();
    let approval = seen.last().unwrap().data["id"].as_str().unwrap().to_owned();
    let last_seen = seen.last().unwrap().id.unwrap();
    one.crash_and_restart().await;

    let response = one
        .http
        .get(format!(
            "{}/api/v1/resos/stream/chat/{message}",
            one.gateway
        ))
        .bearer_auth(&one.token)
        .header("last-event-id", last_seen.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut again = SseReader::new(response);
    let resumed = again.next().await.expect("resumed");
    assert_eq!(resumed.event, "resumed", "{}", one.maitred.log());
    // The card again, with the same id (a viewer may never have seen it).
    let again_shown = again.next().await.expect("approval_required");
    assert_eq!(again_shown.event, "approval_required");
    assert_eq!(again_shown.data["id"], Value::from(approval.as_str()));
    // The approval given after the crash lets the call run, once.
    one.approve(&approval).await;
    let rest = again.rest().await;
    assert_eq!(
        names(&rest),
        [
            "tool_result",
            "token",
            "token",
            "grounding",
            "usage",
            "done"
        ],
        "{rest:?}\n{}",
        one.maitred.log()
    );
    assert_eq!(rest[0].data["id"], Value::from(approval.as_str()));
    assert_eq!(rest[0].data["status"], "ok", "{rest:?}");
    assert_eq!(rest.last().unwrap().data["finish_reason"], "stop");
    let db = one.db().await;
    assert_eq!(bookings_of(&db, guest).await, 1);
    db.close().await;
    llm.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_resuming_switched_off_a_crash_ends_the_answer_as_interrupted() {
    let words = (0..400).map(|i| format!("w{i} "));
    let llm = ScriptedLlm::start(Script::new([
        Turn::text_fragments(words).paced(Duration::from_millis(20))
    ]))
    .await
    .unwrap();
    let mut one = One::start(&llm, &[("MAITRED_RESUME_ANSWERS", "false".to_owned())]).await;
    let mut stream = ask(&one.http, &one.gateway, &one.token, "Talk").await;
    let seen = read_until(&mut stream, |seen| {
        seen.iter().filter(|e| e.event == "token").count() >= 10
    })
    .await;
    let message = seen[0].data["message_id"].as_str().unwrap().to_owned();
    let last_seen = seen.last().unwrap().id.unwrap();
    one.crash_and_restart().await;
    let rest = one.watch_again(&message, last_seen).await;
    assert!(!names(&rest).contains(&"resumed"), "{rest:?}");
    let error = rest.iter().find(|e| e.event == "error").expect("an error");
    assert_eq!(error.data["code"], "interrupted");
    assert_eq!(rest.last().unwrap().event, "done");
    assert_eq!(llm.requests().len(), 1, "the model is not asked again");
    let db = one.db().await;
    let (askers,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM answer_askers")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(
        askers, 0,
        "who asked an ended answer (and their token) is not kept"
    );
    db.close().await;
    llm.stop().await;
}
