//! Nothing runs twice: a write sent again with its `Idempotency-Key` gets the stored
//! response, however many copies arrive and however close together.

use std::time::Duration;

use chrono::{DateTime, Datelike, Utc, Weekday};
use maitred::db::canonical;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::helpers::{Database, TestApp};
use crate::on_both_databases;
use crate::token_exchange::{exchange_as, person_tokens};

on_both_databases!(
    a_repeat_gets_the_stored_response_and_writes_nothing,
    the_same_key_with_another_body_is_refused,
    concurrent_repeats_run_once,
    an_expired_key_runs_again,
    another_callers_key_does_not_replay,
    a_malformed_key_is_refused,
    a_failed_write_releases_its_key,
    a_repeat_of_a_running_write_waits_then_gets_409,
    a_repeat_gets_what_another_replica_stores_while_it_waits,
    an_unfinished_claim_is_taken_over,
);

fn booking(name: &str, days_ahead: i64) -> Value {
    let mut date = Utc::now().date_naive() + chrono::Duration::days(days_ahead);
    if date.weekday() == Weekday::Mon {
        date += chrono::Duration::days(1);
    }
    json!({ "date": date.to_string(), "time": "19:00", "people": 2,
            "guest": { "name": name, "email": "guest@example.net" } })
}

async fn post(app: &TestApp, path: &str, token: &str, key: &str, body: &Value) -> Answer {
    let response = app
        .http
        .post(format!("{}{path}", app.api))
        .bearer_auth(token)
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
        .unwrap();
    Answer::of(response).await
}

#[derive(Debug, PartialEq)]
struct Answer {
    status: u16,
    replayed: bool,
    body: Value,
}

impl Answer {
    async fn of(response: reqwest::Response) -> Self {
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        let replayed = header("idempotent-replayed").as_deref() == Some("true");
        let body = response.json().await.unwrap();
        Self {
            status,
            replayed,
            body,
        }
    }
}

async fn bookings_of(app: &TestApp, guest: &str) -> i64 {
    let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM bookings WHERE guest_name = $1")
        .bind(guest)
        .fetch_one(app.db.pool())
        .await
        .unwrap();
    count
}

async fn a_repeat_gets_the_stored_response_and_writes_nothing(db: &Database) {
    let app = TestApp::spawn(db).await;
    let token = app.backend_token().await;
    let body = booking("Ida Once", 4);
    let first = post(&app, "/bookings", &token, "create-ida-1", &body).await;
    assert_eq!(first.status, 200, "{first:?}");
    assert!(!first.replayed);
    let again = post(&app, "/bookings", &token, "create-ida-1", &body).await;
    assert_eq!(again.status, 200, "{again:?}");
    assert!(again.replayed, "a repeat says it is replayed");
    assert_eq!(again.body, first.body);
    assert_eq!(bookings_of(&app, "Ida Once").await, 1);

    // A refusal (4xx) is stored as well: the repeat is answered, not re-judged.
    let past = json!({ "date": "2020-01-07", "time": "19:00", "people": 2,
                       "guest": { "name": "Ida Late", "email": "guest@example.net" } });
    let refused = post(&app, "/bookings", &token, "create-ida-late", &past).await;
    assert_eq!(refused.status, 400, "{refused:?}");
    let again = post(&app, "/bookings", &token, "create-ida-late", &past).await;
    assert_eq!((again.status, again.replayed), (400, true), "{again:?}");
    assert_eq!(again.body, refused.body);

    // A write without a key runs every time.
    let plain = |body: Value| {
        let app = &app;
        let token = &token;
        async move { app.post_json("/bookings", token, &body).await.status() }
    };
    let body = booking("Ida Twice", 5);
    assert_eq!(plain(body.clone()).await, 200);
    assert_eq!(plain(body).await, 200);
    assert_eq!(bookings_of(&app, "Ida Twice").await, 2);
    app.stop().await;
}

async fn the_same_key_with_another_body_is_refused(db: &Database) {
    let app = TestApp::spawn(db).await;
    let token = app.backend_token().await;
    let first = post(&app, "/bookings", &token, "k-1", &booking("Jon First", 4)).await;
    assert_eq!(first.status, 200, "{first:?}");
    let other = post(&app, "/bookings", &token, "k-1", &booking("Jon Other", 4)).await;
    assert_eq!(other.status, 422, "{other:?}");
    assert_eq!(other.body["code"], "IDEMPOTENCY_KEY_REUSED", "{other:?}");
    assert!(
        other.body["message"]
            .as_str()
            .unwrap()
            .contains("Idempotency-Key"),
        "{other:?}"
    );
    assert!(!other.replayed);
    assert_eq!(bookings_of(&app, "Jon Other").await, 0);

    // The same key on another path is another request too.
    let id = first.body["_id"].as_str().unwrap();
    let comment = post(
        &app,
        &format!("/bookings/{id}/comment"),
        &token,
        "k-1",
        &json!({ "text": "window seat" }),
    )
    .await;
    assert_eq!(comment.status, 422, "{comment:?}");
    app.stop().await;
}

async fn concurrent_repeats_run_once(db: &Database) {
    let app = TestApp::spawn(db).await;
    let token = app.backend_token().await;
    let body = booking("Kim Racer", 6);
    let attempts = (0..8).map(|_| post(&app, "/bookings", &token, "race-1", &body));
    let answers = futures::future::join_all(attempts).await;
    assert_eq!(bookings_of(&app, "Kim Racer").await, 1);
    let first = &answers[0];
    assert_eq!(first.status, 200, "{answers:?}");
    for answer in &answers {
        assert_eq!(
            (answer.status, &answer.body),
            (first.status, &first.body),
            "{answers:?}"
        );
    }
    let replays = answers.iter().filter(|a| a.replayed).count();
    assert_eq!(replays, 7, "one ran, seven were replayed: {answers:?}");
    app.stop().await;
}

async fn an_expired_key_runs_again(db: &Database) {
    let app = TestApp::spawn_with(db, |settings| {
        settings.backend.idempotency_ttl = Duration::from_secs(1);
    })
    .await;
    let token = app.backend_token().await;
    let booking = app
        .post_json("/bookings", &token, &booking("Lea Later", 4))
        .await;
    assert_eq!(booking.status(), 200);
    let id = booking.json::<Value>().await.unwrap()["_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/bookings/{id}/comment");
    let note = json!({ "text": "birthday" });
    let first = post(&app, &path, &token, "note-1", &note).await;
    assert_eq!(first.status, 200, "{first:?}");
    let again = post(&app, &path, &token, "note-1", &note).await;
    assert!(again.replayed, "{again:?}");
    assert_eq!(again.body, first.body);
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let later = post(&app, &path, &token, "note-1", &note).await;
    assert_eq!(later.status, 200, "{later:?}");
    assert!(!later.replayed, "an expired key runs again: {later:?}");
    assert_ne!(later.body, first.body, "a new comment, with its own id");
    let (rows,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM idempotency_keys WHERE idem_key = 'note-1'")
            .fetch_one(app.db.pool())
            .await
            .unwrap();
    assert_eq!(rows, 1, "the expired row is gone, the new one kept");
    app.stop().await;
}

/// The operator's token for the backend, as the MCP role gets it (two exchanges).
async fn operator_token(app: &TestApp) -> String {
    let person = person_tokens(app, "operator", "openid chat.read chat.write").await;
    let (status, hop1) = exchange_as(
        app,
        "maitred-gateway",
        person["access_token"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(status, 200, "{hop1}");
    let (status, hop2) = exchange_as(
        app,
        "maitred-mcp",
        hop1["access_token"].as_str().unwrap(),
        &[("resource", &app.settings.backend_resource())],
    )
    .await;
    assert_eq!(status, 200, "{hop2}");
    hop2["access_token"].as_str().unwrap().to_owned()
}

async fn another_callers_key_does_not_replay(db: &Database) {
    let app = TestApp::spawn(db).await;
    let client = app.backend_token().await;
    let operator = operator_token(&app).await;
    let created = app
        .post_json("/bookings", &client, &booking("Max Shared", 4))
        .await;
    assert_eq!(created.status(), 200);
    let id = created.json::<Value>().await.unwrap()["_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/bookings/{id}/comment");
    let note = json!({ "text": "allergic to nuts" });
    let mine = post(&app, &path, &client, "shared-key", &note).await;
    let theirs = post(&app, &path, &operator, "shared-key", &note).await;
    assert_eq!((mine.status, theirs.status), (200, 200), "{theirs:?}");
    assert!(!theirs.replayed, "{theirs:?}");
    assert_ne!(theirs.body, mine.body, "two comments");
    // Each caller still gets their own back.
    let again = post(&app, &path, &operator, "shared-key", &note).await;
    assert!(again.replayed);
    assert_eq!(again.body, theirs.body);
    app.stop().await;
}

async fn a_malformed_key_is_refused(db: &Database) {
    let app = TestApp::spawn(db).await;
    let token = app.backend_token().await;
    let too_long = "k".repeat(256);
    for key in ["", "two words", too_long.as_str()] {
        let answer = post(&app, "/bookings", &token, key, &booking("Ned Bad", 4)).await;
        assert_eq!(answer.status, 400, "{key:?}: {answer:?}");
        assert_eq!(answer.body["code"], "INVALID_REQUEST", "{answer:?}");
        assert_eq!(answer.body["details"]["header"], "Idempotency-Key");
        assert!(
            answer.body["message"]
                .as_str()
                .unwrap()
                .contains("Idempotency-Key"),
            "{answer:?}"
        );
    }
    assert_eq!(bookings_of(&app, "Ned Bad").await, 0);
    // The longest key is fine.
    let longest = "k".repeat(255);
    let answer = post(&app, "/bookings", &token, &longest, &booking("Ned Good", 4)).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    app.stop().await;
}

async fn a_failed_write_releases_its_key(db: &Database) {
    let app = TestApp::spawn(db).await;
    let token = app.backend_token().await;
    let body = booking("Ola Retry", 4);
    // The write fails for real: its table is gone.
    sqlx::query("ALTER TABLE bookings RENAME TO bookings_away")
        .execute(app.db.pool())
        .await
        .unwrap();
    let failed = post(&app, "/bookings", &token, "retry-1", &body).await;
    sqlx::query("ALTER TABLE bookings_away RENAME TO bookings")
        .execute(app.db.pool())
        .await
        .unwrap();
    assert!((500..600).contains(&failed.status), "{failed:?}");
    assert!(!failed.replayed);
    assert_eq!(rows_of(&app, "retry-1").await, 0, "a 5xx keeps nothing");
    let retry = post(&app, "/bookings", &token, "retry-1", &body).await;
    assert_eq!(retry.status, 200, "the retry runs the write: {retry:?}");
    assert!(!retry.replayed, "{retry:?}");
    assert_eq!(retry.body["guest"]["name"], "Ola Retry", "{retry:?}");
    assert_eq!(bookings_of(&app, "Ola Retry").await, 1);
    let again = post(&app, "/bookings", &token, "retry-1", &body).await;
    assert_eq!((again.status, again.replayed), (200, true), "{again:?}");
    assert_eq!(again.body, retry.body);
    app.stop().await;
}

async fn a_repeat_of_a_running_write_waits_then_gets_409(db: &Database) {
    let app = TestApp::spawn_with(db, |settings| {
        settings.backend.idempotency_wait = Duration::from_millis(200);
    })
    .await;
    let token = app.backend_token().await;
    let caller = caller_of(&app, &token).await;
    let body = booking("Pia Pending", 4);
    // The first request's claim, as if it were still running.
    claim(&app, &caller, "running-1", &body, Utc::now()).await;
    let started = std::time::Instant::now();
    let response = app
        .http
        .post(format!("{}/bookings", app.api))
        .bearer_auth(&token)
        .header("Idempotency-Key", "running-1")
        .json(&body)
        .send()
        .await
        .unwrap();
    let waited = started.elapsed();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let answer = Answer::of(response).await;
    assert_eq!(answer.status, 409, "{answer:?}");
    assert_eq!(
        answer.body["code"], "IDEMPOTENCY_KEY_IN_FLIGHT",
        "{answer:?}"
    );
    assert_eq!(retry_after.as_deref(), Some("1"), "{answer:?}");
    assert!(!answer.replayed);
    assert!(
        waited >= Duration::from_millis(200),
        "it waited for the first request: {waited:?}"
    );
    assert_eq!(bookings_of(&app, "Pia Pending").await, 0);
    // The claim is still the first request's.
    let (status,): (Option<i64>,) =
        sqlx::query_as("SELECT status FROM idempotency_keys WHERE idem_key = 'running-1'")
            .fetch_one(app.db.pool())
            .await
            .unwrap();
    assert_eq!(status, None);
    app.stop().await;
}

async fn a_repeat_gets_what_another_replica_stores_while_it_waits(db: &Database) {
    // The default wait (10 s) is far longer than the test needs.
    let app = TestApp::spawn(db).await;
    let token = app.backend_token().await;
    let caller = caller_of(&app, &token).await;
    let body = booking("Quin Elsewhere", 4);
    claim(&app, &caller, "elsewhere-1", &body, Utc::now()).await;
    let repeat = tokio::spawn({
        let http = app.http.clone();
        let url = format!("{}/bookings", app.api);
        let token = token.clone();
        let body = body.clone();
        async move {
            let response = http
                .post(url)
                .bearer_auth(token)
                .header("Idempotency-Key", "elsewhere-1")
                .json(&body)
                .send()
                .await
                .unwrap();
            Answer::of(response).await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !repeat.is_finished(),
        "the repeat waits for the first request"
    );
    // Another replica finishes the first request and stores its response.
    let stored =
        json!({ "_id": "booked-by-another-replica", "guest": { "name": "Quin Elsewhere" } });
    sqlx::query(
        "UPDATE idempotency_keys SET status = 201, content_type = 'application/json', \
         response_body = $1 WHERE idem_key = 'elsewhere-1'",
    )
    .bind(stored.to_string())
    .execute(app.db.pool())
    .await
    .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), repeat)
        .await
        .expect("the repeat answers once the response is stored")
        .unwrap();
    assert_eq!(answer.status, 201, "{answer:?}");
    assert!(answer.replayed, "{answer:?}");
    assert_eq!(answer.body, stored);
    assert_eq!(
        bookings_of(&app, "Quin Elsewhere").await,
        0,
        "nothing ran here"
    );
    app.stop().await;
}

async fn an_unfinished_claim_is_taken_over(db: &Database) {
    let app = TestApp::spawn(db).await;
    let token = app.backend_token().await;
    let caller = caller_of(&app, &token).await;
    let body = booking("Rui Abandoned", 4);
    // Older than the request timeout plus its margin: its request never finished.
    let long_ago = Utc::now()
        - chrono::Duration::from_std(app.settings.timeouts.request).unwrap()
        - chrono::Duration::minutes(5);
    claim(&app, &caller, "abandoned-1", &body, long_ago).await;
    let answer = post(&app, "/bookings", &token, "abandoned-1", &body).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(!answer.replayed, "the write ran: {answer:?}");
    assert_eq!(bookings_of(&app, "Rui Abandoned").await, 1);
    let (status, response_body, created_at): (Option<i64>, Option<String>, String) =
        sqlx::query_as(
            "SELECT status, response_body, created_at FROM idempotency_keys \
             WHERE idem_key = 'abandoned-1'",
        )
        .fetch_one(app.db.pool())
        .await
        .unwrap();
    assert_eq!(status, Some(200));
    let response_body: Value = serde_json::from_str(&response_body.unwrap()).unwrap();
    assert_eq!(response_body, answer.body, "its response is stored");
    assert_ne!(created_at, canonical(long_ago), "under a claim of its own");
    let again = post(&app, "/bookings", &token, "abandoned-1", &body).await;
    assert_eq!((again.status, again.replayed), (200, true), "{again:?}");
    assert_eq!(again.body, answer.body);
    assert_eq!(bookings_of(&app, "Rui Abandoned").await, 1);
    app.stop().await;
}

async fn rows_of(app: &TestApp, key: &str) -> i64 {
    let (count,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM idempotency_keys WHERE idem_key = $1")
            .bind(key)
            .fetch_one(app.db.pool())
            .await
            .unwrap();
    count
}

/// Whom the backend files a token's keys under, and the path it stores for
/// `POST /bookings`: read from the row of a refused booking made for the purpose.
struct Caller {
    subject: String,
    client: String,
    path: String,
}

async fn caller_of(app: &TestApp, token: &str) -> Caller {
    let past = json!({ "date": "2020-01-07", "time": "19:00", "people": 2,
                       "guest": { "name": "Probe", "email": "guest@example.net" } });
    let refused = post(app, "/bookings", token, "probe", &past).await;
    assert_eq!(refused.status, 400, "{refused:?}");
    let (subject, client, path): (String, String, String) = sqlx::query_as(
        "SELECT subject, client, path FROM idempotency_keys WHERE idem_key = 'probe'",
    )
    .fetch_one(app.db.pool())
    .await
    .unwrap();
    Caller {
        subject,
        client,
        path,
    }
}

/// A pending row for `key`, as a request's claim leaves it while the write runs.
async fn claim(app: &TestApp, caller: &Caller, key: &str, body: &Value, created_at: DateTime<Utc>) {
    let body_hash = hex::encode(Sha256::digest(serde_json::to_vec(body).unwrap()));
    sqlx::query(
        "INSERT INTO idempotency_keys (subject, client, idem_key, method, path, body_hash, created_at, expires_at) \
         VALUES ($1, $2, $3, 'POST', $4, $5, $6, $7)",
    )
    .bind(&caller.subject)
    .bind(&caller.client)
    .bind(key)
    .bind(&caller.path)
    .bind(body_hash)
    .bind(canonical(created_at))
    .bind(canonical(Utc::now() + chrono::Duration::hours(1)))
    .execute(app.db.pool())
    .await
    .unwrap();
}
