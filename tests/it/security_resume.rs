//! The second security review's finding 2, performed and shown to fail: a resume at
//! or past an answer's last event must end instead of holding the connection with
//! keep-alives; a `Last-Event-ID` too large for 63 bits (or not a number at all) must
//! never be read as 0 and replay the whole answer; and one person cannot hold answer
//! streams open without bound. Each attack runs with the in-process live state and
//! with the Redis one (two replicas sharing the Redis on this machine).

use std::time::{Duration, Instant};

use maitred::settings::RedisSettings;
use maitred_scripted_llm::{Script, Turn};
use serde_json::Value;

use crate::helpers::{Database, Llm, SseEvent, SseReader, TestApp};

/// 2^63: the first id that wrapped negative in the database's `seq > $2`.
const TWO_POW_63: &str = "9223372036854775808";
/// Ids that are not a `u64` at all: each is refused, never read as 0.
const NOT_AN_ID: [&str; 4] = ["18446744073709551621", "-1", "abc", "1e3"];

#[derive(Clone, Copy, Debug)]
enum Mode {
    Memory,
    Redis,
}

/// The gateway under test, and in Redis mode a second replica sharing its Redis and
/// database, where viewers also go.
struct Setup {
    app: TestApp,
    second: Option<Replica>,
}

impl Setup {
    /// Where the `n`th viewer goes: alternately each replica, in Redis mode.
    fn base(&self, n: usize) -> &str {
        match &self.second {
            Some(second) if n % 2 == 1 => &second.url,
            _ => &self.app.gateway_url,
        }
    }

    async fn stop(self) {
        if let Some(second) = self.second {
            second.app.stop().await;
        }
        self.app.stop().await;
    }
}

struct Replica {
    url: String,
    app: maitred::app::App,
    _data_dir: tempfile::TempDir,
}

/// `None`: Redis mode with no Redis here (outside CI), so the test is skipped.
async fn setup(mode: Mode, script: Script, viewers: usize) -> Option<Setup> {
    let redis = match mode {
        Mode::Memory => None,
        Mode::Redis => Some(RedisSettings {
            url: shared_redis().await?.into(),
            // Keys of its own, so the test shares the Redis with anything else.
            prefix: format!("maitred-test-resume-{}", uuid::Uuid::now_v7().simple()),
        }),
    };
    let app = TestApp::spawn_chat(&Database::Sqlite, Llm::Scripted(script), |s| {
        s.gateway.file.limits.concurrent_viewers = viewers;
        s.gateway.redis = redis.clone();
    })
    .await;
    let second = match mode {
        Mode::Memory => None,
        Mode::Redis => Some(second_replica(&app).await),
    };
    Some(Setup { app, second })
}

/// The Redis on this machine (`MAITRED_TEST_REDIS_URL`, else the default port); CI
/// must have it, a laptop may not.
async fn shared_redis() -> Option<String> {
    let url = std::env::var("MAITRED_TEST_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_owned());
    let reachable = match redis::Client::open(url.as_str()) {
        Ok(client) => client.get_multiplexed_async_connection().await.is_ok(),
        Err(_) => false,
    };
    if reachable {
        return Some(url);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI must have a Redis at {url} (or set MAITRED_TEST_REDIS_URL)");
    }
    eprintln!("no Redis at {url}: skipping the Redis-mode test");
    None
}

/// A second gateway replica beside `app`'s: its own port and data dir, the same
/// database, Redis, issuer, public URL (tokens are for it) and model.
async fn second_replica(app: &TestApp) -> Replica {
    let mut settings = app.settings.clone();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        app.data_dir().join("dev-credentials.json"),
        dir.path().join("dev-credentials.json"),
    )
    .unwrap();
    settings.data_dir = dir.path().to_owned();
    settings.gateway.endpoint =
        maitred::settings::Endpoint::new(0, Some(&settings.gateway.endpoint.public_url.clone()))
            .unwrap();
    let bound = maitred::app::App::bind(settings, &[maitred::app::Role::Gateway])
        .await
        .unwrap();
    let app = bound
        .start(tokio_util::sync::CancellationToken::new())
        .await
        .unwrap();
    Replica {
        url: format!("http://127.0.0.1:{}", app.settings().gateway.endpoint.port),
        app,
        _data_dir: dir,
    }
}

fn words(n: usize, prefix: &str) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i} ")).collect()
}

/// `GET /stream/chat/{id}` on `base` with `Last-Event-ID: last` as given, unchecked.
async fn resume(
    app: &TestApp,
    base: &str,
    token: &str,
    message_id: &str,
    last: Option<&str>,
) -> reqwest::Response {
    let mut request = app
        .http
        .get(format!("{base}/api/v1/resos/stream/chat/{message_id}"))
        .bearer_auth(token);
    if let Some(last) = last {
        request = request.header("last-event-id", last);
    }
    request.send().await.unwrap()
}

/// A resume that must be a stream.
async fn stream(
    app: &TestApp,
    base: &str,
    token: &str,
    message_id: &str,
    last: Option<&str>,
) -> SseReader {
    let response = resume(app, base, token, message_id, last).await;
    assert_eq!(
        response.status(),
        200,
        "resume after {last:?}: {}",
        response.text().await.unwrap_or_default()
    );
    SseReader::new(response)
}

/// Every event until the stream closes; panics if it is still open after `within`
/// (a stream that only sends keep-alives never closes).
async fn until_closed(mut reader: SseReader, within: Duration) -> Vec<SseEvent> {
    tokio::time::timeout(within, async {
        let mut events = Vec::new();
        while let Some(event) = reader.next().await {
            events.push(event);
        }
        events
    })
    .await
    .unwrap_or_else(|_| panic!("the stream was still open after {within:?}"))
}

/// Asks, reads the whole answer, and gives its message id and events.
async fn finished_answer(setup: &Setup, token: &str) -> (String, Vec<SseEvent>) {
    let events = setup
        .app
        .ask(token, "Say ten words", None)
        .await
        .rest()
        .await;
    assert_eq!(events.last().unwrap().event, "done");
    let message_id = events[0].data["message_id"].as_str().unwrap().to_owned();
    (message_id, events)
}

/// The resumes of a finished answer: at its `done` and past it, nothing and the end at
/// once; before it, the rest and the end; a garbage id, 400.
async fn resumes_of(setup: &Setup, token: &str, message_id: &str, events: &[SseEvent]) {
    let done = events.last().unwrap().id.unwrap();
    for n in 0..2 {
        let base = setup.base(n);
        let at_done = done.to_string();
        for last in [at_done.as_str(), TWO_POW_63, "18446744073709551615"] {
            let started = Instant::now();
            let reader = stream(&setup.app, base, token, message_id, Some(last)).await;
            let replayed = until_closed(reader, Duration::from_secs(5)).await;
            assert!(
                replayed.is_empty(),
                "after {last}, nothing is replayed: {replayed:?}"
            );
            let took = started.elapsed();
            assert!(took < Duration::from_secs(2), "after {last}: {took:?}");
        }

        let reader = stream(&setup.app, base, token, message_id, Some("3")).await;
        let rest = until_closed(reader, Duration::from_secs(5)).await;
        let ids: Vec<u64> = rest.iter().map(|e| e.id.unwrap()).collect();
        assert_eq!(
            ids,
            (4..=done).collect::<Vec<_>>(),
            "the rest after 3, once"
        );
        assert_eq!(rest.last().unwrap().event, "done");

        for last in NOT_AN_ID {
            let response = resume(&setup.app, base, token, message_id, Some(last)).await;
            assert_eq!(response.status(), 400, "Last-Event-ID {last}");
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["code"], "INVALID_REQUEST", "{body}");
            assert!(
                body["message"].as_str().unwrap().contains("Last-Event-ID"),
                "{body}"
            );
        }
    }
}

async fn a_finished_answer_resumed_at_or_past_its_end_ends_at_once(mode: Mode) {
    let script = Script::repeat(Turn::text_fragments(words(10, "w")));
    let Some(setup) = setup(mode, script, 20).await else {
        return;
    };
    let token = setup.app.chat_token().await;
    let (message_id, events) = finished_answer(&setup, &token).await;
    resumes_of(&setup, &token, &message_id, &events).await;

    if let Mode::Memory = mode {
        // After a restart the answer is in the database only: the same holds.
        let Setup { app, second } = setup;
        let setup = Setup {
            app: Box::pin(app.restart()).await,
            second,
        };
        resumes_of(&setup, &token, &message_id, &events).await;
        Box::pin(setup.stop()).await;
    } else {
        Box::pin(setup.stop()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_answer_resumed_at_or_past_its_end_ends_at_once_in_process() {
    Box::pin(a_finished_answer_resumed_at_or_past_its_end_ends_at_once(
        Mode::Memory,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_answer_resumed_at_or_past_its_end_ends_at_once_with_redis() {
    Box::pin(a_finished_answer_resumed_at_or_past_its_end_ends_at_once(
        Mode::Redis,
    ))
    .await;
}

/// Viewers that join while the answer runs: one past its end gets nothing and ends
/// with the answer; one from an earlier id gets the rest and ends.
async fn a_running_answer_resumed_past_its_end_ends_with_it(mode: Mode) {
    let script =
        Script::repeat(Turn::text_fragments(words(40, "r")).paced(Duration::from_millis(25)));
    let Some(setup) = setup(mode, script, 20).await else {
        return;
    };
    let token = setup.app.chat_token().await;
    let mut asker = setup.app.ask(&token, "Say forty words", None).await;
    let meta = asker.next().await.unwrap();
    let message_id = meta.data["message_id"].as_str().unwrap().to_owned();

    let past = stream(
        &setup.app,
        setup.base(1),
        &token,
        &message_id,
        Some(TWO_POW_63),
    )
    .await;
    let early = stream(&setup.app, setup.base(0), &token, &message_id, Some("1")).await;
    let asked = asker.rest().await;
    let done = asked.last().unwrap().id.unwrap();
    let (past, early) = tokio::join!(
        until_closed(past, Duration::from_secs(10)),
        until_closed(early, Duration::from_secs(10)),
    );
    assert!(past.is_empty(), "past the end, nothing: {past:?}");
    let ids: Vec<u64> = early.iter().map(|e| e.id.unwrap()).collect();
    assert_eq!(ids, (2..=done).collect::<Vec<_>>());
    Box::pin(setup.stop()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_answer_resumed_past_its_end_ends_with_it_in_process() {
    Box::pin(a_running_answer_resumed_past_its_end_ends_with_it(
        Mode::Memory,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_answer_resumed_past_its_end_ends_with_it_with_redis() {
    Box::pin(a_running_answer_resumed_past_its_end_ends_with_it(
        Mode::Redis,
    ))
    .await;
}

/// A 429 in the error envelope, with when to come back.
async fn assert_too_many(response: reqwest::Response) {
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "5");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], "RATE_LIMIT_EXCEEDED", "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("3 answer streams open"),
        "{body}"
    );
}

/// Three streams allowed: the asker's and two resumes (on either replica) fill them;
/// a fourth resume and a new question are refused; one closed frees its slot.
async fn one_person_cannot_hold_more_streams_than_the_cap(mode: Mode) {
    let script =
        Script::repeat(Turn::text_fragments(words(400, "v")).paced(Duration::from_millis(20)));
    let Some(setup) = setup(mode, script, 3).await else {
        return;
    };
    let token = setup.app.chat_token().await;
    let mut asker = setup.app.ask(&token, "Say many words", None).await;
    let meta = asker.next().await.unwrap();
    let message_id = meta.data["message_id"].as_str().unwrap().to_owned();
    let id = Some("1");

    let mut second = stream(&setup.app, setup.base(1), &token, &message_id, id).await;
    let mut third = stream(&setup.app, setup.base(0), &token, &message_id, id).await;
    assert!(second.next().await.is_some() && third.next().await.is_some());

    for n in 0..2 {
        assert_too_many(resume(&setup.app, setup.base(n), &token, &message_id, id).await).await;
    }
    let asked = setup
        .app
        .http
        .post(format!("{}/api/v1/resos/stream/chat", setup.base(1)))
        .bearer_auth(&token)
        .json(&serde_json::json!({ "question": "One more" }))
        .send()
        .await
        .unwrap();
    assert_too_many(asked).await;

    // A viewer leaves: its slot is free again (across replicas, once its replica
    // has told Redis).
    drop(second);
    let started = Instant::now();
    let mut fourth = loop {
        let response = resume(&setup.app, setup.base(1), &token, &message_id, id).await;
        if response.status() == 200 {
            break SseReader::new(response);
        }
        assert_eq!(response.status(), 429);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the closed stream's slot was not freed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(fourth.next().await.is_some());
    assert_too_many(resume(&setup.app, setup.base(0), &token, &message_id, id).await).await;

    let cancelled = setup
        .app
        .gateway_post(
            &format!("/api/v1/resos/chat/{message_id}/cancel"),
            &token,
            &serde_json::json!({}),
        )
        .await;
    assert_eq!(cancelled.status(), 200);
    for reader in [asker, third, fourth] {
        let rest = until_closed(reader, Duration::from_secs(10)).await;
        assert_eq!(rest.last().unwrap().event, "done");
    }
    Box::pin(setup.stop()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_person_cannot_hold_more_streams_than_the_cap_in_process() {
    Box::pin(one_person_cannot_hold_more_streams_than_the_cap(
        Mode::Memory,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_person_cannot_hold_more_streams_than_the_cap_with_redis() {
    Box::pin(one_person_cannot_hold_more_streams_than_the_cap(
        Mode::Redis,
    ))
    .await;
}
