//! Budgets reserved before they are spent: a question whose next model turn cannot
//! be reserved stops with the typed `budget` error, every turn is settled with what
//! the model reported and the rest refunded, and the ledger adds up, also with many
//! questions at once against one team's cap.

use std::time::Duration;

use maitred::settings::prices::Price;
use maitred_scripted_llm::{Script, Turn};
use serde_json::{Value, json};

use crate::helpers::{Database, Llm, SseEvent, TestApp, of};
use crate::token_exchange::person_tokens;

/// What the scripted model says it used, per turn.
pub(crate) const PROMPT: u64 = 100;
pub(crate) const COMPLETION: u64 = 20;

pub(crate) async fn app(database: &Database, turn: Turn) -> TestApp {
    TestApp::spawn_chat(database, Llm::Scripted(Script::repeat(turn)), |s| {
        s.gateway.file.prices.insert(
            "scripted".to_owned(),
            Price {
                input_per_million: 1.0,
                output_per_million: 2.0,
            },
        );
        s.gateway.file.budgets.max_output_tokens = 200;
        s.gateway.file.limits.requests_per_minute = 1_000;
        s.gateway.file.limits.concurrent_generations = 100;
        s.gateway.file.limits.concurrent_viewers = 200;
    })
    .await
}

pub(crate) async fn token_of(app: &TestApp, username: &str) -> String {
    person_tokens(app, username, "openid profile chat.read chat.write").await["access_token"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Where budgets are set and questions asked: one gateway, or several replicas.
#[derive(Clone, Copy)]
pub(crate) struct At<'a> {
    pub http: &'a reqwest::Client,
    pub gateway: &'a str,
}

impl<'a> From<&'a TestApp> for At<'a> {
    fn from(app: &'a TestApp) -> Self {
        At {
            http: &app.http,
            gateway: &app.gateway_url,
        }
    }
}

pub(crate) async fn admin(
    at: impl Into<At<'_>>,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let at = at.into();
    let mut request = at
        .http
        .request(
            method,
            format!("{}/api/v1/resos/admin/budgets{path}", at.gateway),
        )
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

pub(crate) async fn set_budget(at: impl Into<At<'_>>, admin_token: &str, path: &str, body: Value) {
    let (status, set) = admin(at, reqwest::Method::PUT, path, admin_token, Some(body)).await;
    assert_eq!(status, 200, "{set}");
}

async fn ledger(at: impl Into<At<'_>>, admin_token: &str, query: &str) -> Value {
    let (status, ledger) = admin(
        at,
        reqwest::Method::GET,
        &format!("/ledger{query}"),
        admin_token,
        None,
    )
    .await;
    assert_eq!(status, 200, "{ledger}");
    ledger
}

pub(crate) fn finish(events: &[SseEvent]) -> String {
    of(events, "done")[0]["finish_reason"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Every closed row: reserved = settled + refunded; none open.
fn reconciles(ledger: &Value) {
    assert_eq!(ledger["open"], 0, "{ledger}");
    for row in ledger["rows"].as_array().unwrap() {
        assert_eq!(row["status"], "settled", "{row}");
        let reserved = row["reserved_tokens"].as_i64().unwrap();
        let settled = row["settled_tokens"].as_i64().unwrap();
        let refunded = row["refunded_tokens"].as_i64().unwrap();
        assert_eq!(reserved, settled + refunded, "{row}");
        let cost = row["reserved_cost"].as_f64().unwrap()
            - row["settled_cost"].as_f64().unwrap()
            - row["refunded_cost"].as_f64().unwrap();
        assert!(cost.abs() < 1e-9, "{row}");
    }
}

async fn a_spent_budget_refuses_the_next_question_with_the_typed_error(database: &Database) {
    let app = app(
        database,
        Turn::text("Here you are.").usage(PROMPT as u32, COMPLETION as u32),
    )
    .await;
    let admin_token = token_of(&app, "admin").await;
    let user_token = token_of(&app, "user").await;

    // Only an ADMIN sets budgets.
    let (status, refused) = admin(&app, reqwest::Method::GET, "", &user_token, None).await;
    assert_eq!(status, 403, "{refused}");

    set_budget(
        &app,
        &admin_token,
        "/person/*",
        json!({ "window": "daily", "max_tokens": 1_000_000 }),
    )
    .await;
    let events = app
        .ask(&user_token, "How many tables?", None)
        .await
        .rest()
        .await;
    assert_eq!(finish(&events), "stop");
    let budget = of(&events, "budget");
    assert_eq!(budget.len(), 1, "{events:?}");
    assert_eq!(budget[0]["scope"], "person");
    assert_eq!(budget[0]["window"], "daily");
    assert_eq!(
        budget[0]["remaining_tokens"],
        1_000_000 - PROMPT - COMPLETION
    );
    let message = of(&events, "meta")[0]["message_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let first = ledger(&app, &admin_token, &format!("?message_id={message}")).await;
    reconciles(&first);
    let row = &first["rows"][0];
    // Reserved: the estimated prompt plus the output cap; settled: what was reported.
    let reserved = row["reserved_tokens"].as_i64().unwrap();
    assert!(reserved > 200, "{row}");
    assert_eq!(row["settled_tokens"], PROMPT + COMPLETION);
    assert_eq!(
        row["refunded_tokens"],
        reserved - (PROMPT + COMPLETION) as i64
    );
    // 100 in at $1/M and 20 out at $2/M: 140 micro-dollars.
    assert!(
        (row["settled_cost"].as_f64().unwrap() - 0.000_14).abs() < 1e-12,
        "{row}"
    );
    // The model was told the cap it was reserved for.
    let requests = app.llm.as_ref().unwrap().requests();
    assert_eq!(requests[0].body["max_tokens"], 200);

    // The person's own budget wins over the default: room for one more turn, not two.
    let subject = row["subject"].as_str().unwrap().to_owned();
    let cap = (PROMPT + COMPLETION) as i64 + reserved + 50;
    set_budget(
        &app,
        &admin_token,
        &format!("/person/{subject}"),
        json!({ "window": "daily", "max_tokens": cap }),
    )
    .await;
    let second = app
        .ask(&user_token, "How many tables?", None)
        .await
        .rest()
        .await;
    assert_eq!(finish(&second), "stop", "{second:?}");
    let third = app
        .ask(&user_token, "How many tables?", None)
        .await
        .rest()
        .await;
    assert_eq!(finish(&third), "error", "{third:?}");
    let error = of(&third, "error");
    assert_eq!(error[0]["code"], "budget");
    assert!(
        error[0]["message"].as_str().unwrap().contains("budget"),
        "{error:?}"
    );
    let left = of(&third, "budget");
    assert_eq!(left[0]["scope"], "person");
    assert!(of(&third, "token").is_empty());
    // The refused question reached no model.
    assert_eq!(app.llm.as_ref().unwrap().requests().len(), 2);

    let all = ledger(
        &app,
        &admin_token,
        &format!("?scope=person&subject={subject}"),
    )
    .await;
    reconciles(&all);
    assert_eq!(all["rows"].as_array().unwrap().len(), 2);
    assert_eq!(all["settled_tokens"], 2 * (PROMPT + COMPLETION));
    let (status, read) = admin(
        &app,
        reqwest::Method::GET,
        &format!("/person/{subject}"),
        &admin_token,
        None,
    )
    .await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read["spent_tokens"], 2 * (PROMPT + COMPLETION));
    assert_eq!(read["max_tokens"], cap);
}

/// Many questions at once from one team, against a cap that lets about a quarter of
/// their turns be reserved: the ledger never passes the cap, every reservation is
/// closed, and every refused question got the typed error. The questions go round
/// the gateways in `gateways`; budgets are set at the first.
pub(crate) async fn questions_at_once_against_a_team_cap(
    gateways: &[At<'_>],
    admin_token: &str,
    operator: &str,
    questions: usize,
) {
    let first = gateways[0];
    // One question's reservation, measured with a budget far from its cap.
    set_budget(
        first,
        admin_token,
        "/role/OPERATOR",
        json!({ "window": "total", "max_tokens": 1_000_000_000 }),
    )
    .await;
    let events = ask(first, operator).await;
    assert_eq!(finish(&events), "stop", "{events:?}");
    let measured = ledger(first, admin_token, "?scope=role&subject=OPERATOR").await;
    let reserved = measured["rows"][0]["reserved_tokens"].as_i64().unwrap();
    let already = measured["settled_tokens"].as_i64().unwrap();
    let cap = already + reserved * (questions as i64 / 4);
    set_budget(
        first,
        admin_token,
        "/role/OPERATOR",
        json!({ "window": "total", "max_tokens": cap }),
    )
    .await;

    let running = (0..questions).map(|i| ask(gateways[i % gateways.len()], operator));
    let answers = futures::future::join_all(running).await;
    let mut answered = 0;
    let mut refused = 0;
    for events in &answers {
        match finish(events).as_str() {
            "stop" => answered += 1,
            "error" => {
                assert_eq!(of(events, "error")[0]["code"], "budget", "{events:?}");
                assert!(!of(events, "budget").is_empty(), "{events:?}");
                refused += 1;
            }
            other => panic!("finished {other}: {events:?}"),
        }
    }
    let after = ledger(first, admin_token, "?scope=role&subject=OPERATOR").await;
    reconciles(&after);
    let settled = after["settled_tokens"].as_i64().unwrap();
    eprintln!(
        "{questions} questions against a cap of {cap} tokens ({reserved} reserved a question): {answered} answered, {refused} refused, {settled} tokens settled"
    );
    assert!(settled <= cap, "{settled} > {cap}");
    assert_eq!(after["rows"].as_array().unwrap().len(), answered + 1);
    assert!(
        refused > 0 && answered >= questions / 4,
        "{answered} answered, {refused} refused"
    );
    assert_eq!(answered + refused, questions);
    assert_eq!(
        settled,
        already + answered as i64 * (PROMPT + COMPLETION) as i64
    );
}

/// One question, its stream to the end.
async fn ask(at: At<'_>, token: &str) -> Vec<SseEvent> {
    crate::process::ask(at.http, at.gateway, token, "How many tables?")
        .await
        .rest()
        .await
}

async fn many_questions_from_one_team_on_one_process(database: &Database) {
    // Slow first tokens: the questions all reserve before any settles.
    let turn = Turn::text("Here you are.")
        .usage(PROMPT as u32, COMPLETION as u32)
        .first_token_delay(Duration::from_millis(800));
    let app = app(database, turn).await;
    let admin_token = token_of(&app, "admin").await;
    let operator = token_of(&app, "operator").await;
    questions_at_once_against_a_team_cap(&[At::from(&app)], &admin_token, &operator, 40).await;
}

crate::on_both_databases!(
    a_spent_budget_refuses_the_next_question_with_the_typed_error,
    many_questions_from_one_team_on_one_process,
);
