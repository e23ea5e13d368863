//! Answers you can check: a scripted model reads the tool results the gateway sends
//! it (the backend's own data) and answers right, misreads them or invents figures;
//! the gateway's `grounding` event traces each figure to the call that returned it or
//! marks it, in native and text mode, on the chat API and `/v1/chat/completions`, and
//! a reload shows the same. Then the `correct` and `facts` settings end to end, and an
//! answer whose only call failed.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::{Duration, NaiveDate};
use maitred::settings::{GroundingMode, ToolCallMode};
use maitred_scripted_llm::{ScriptedLlm, ToolCallSpec, Turn};
use serde_json::{Value, json};

use crate::helpers::{Database, Llm, SseEvent, SseReader, TestApp, of};

const MISREAD: &str = "How many customers do we have?";
const INVENTED: &str = "How many customers do we have, and how many booked this week?";
const RIGHT: &str = "How many customers are there in all?";
const TWICE: &str = "Count our customers in two lists.";
const DATE: &str = "When is the first booking?";
const LENGTH: &str = "How many customers are on file?";
const FAILED: &str = "How many guests came last month?";

const RESULT_PREFIX: &str = "Result of tool call";
const CORRECTION: &str = "Your answer states";

/// What the model has been sent since the person's question.
struct Seen {
    question: String,
    /// Tool results that are JSON, in order.
    results: Vec<Value>,
    answered: bool,
    correcting: bool,
}

fn content(m: &Value) -> &str {
    m["content"].as_str().unwrap_or_default()
}

fn seen(body: &Value) -> Seen {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let is_question = |m: &Value| {
        m["role"] == "user"
            && !content(m).starts_with(RESULT_PREFIX)
            && !content(m).starts_with(CORRECTION)
    };
    let at = messages.iter().rposition(is_question).expect("a question");
    let after = &messages[at + 1..];
    let is_result = |m: &Value| {
        m["role"] == "tool" || (m["role"] == "user" && content(m).starts_with(RESULT_PREFIX))
    };
    let results = after
        .iter()
        .filter(|m| is_result(m))
        .filter_map(|m| {
            let text = content(m);
            let start = text.find('{')?;
            let end = text.rfind('}')?;
            serde_json::from_str(&text[start..=end]).ok()
        })
        .collect();
    Seen {
        question: content(&messages[at]).to_owned(),
        results,
        answered: after.iter().any(is_result),
        correcting: messages
            .last()
            .is_some_and(|m| m["role"] == "user" && content(m).starts_with(CORRECTION)),
    }
}

fn calls_for(question: &str) -> Vec<(&'static str, Value)> {
    match question {
        TWICE => vec![
            ("resos__getCustomers", json!({ "limit": 2 })),
            ("resos__getCustomers", json!({ "limit": 3 })),
        ],
        DATE => vec![("resos__getBookings", json!({ "limit": 1 }))],
        // Past the tool's maximum of 100: the call fails its schema.
        FAILED => vec![("resos__getCustomers", json!({ "limit": 500 }))],
        _ => vec![("resos__getCustomers", json!({ "limit": 5 }))],
    }
}

/// Every number a result holds, anywhere.
fn numbers(value: &Value, out: &mut Vec<f64>) {
    match value {
        Value::Number(n) => out.extend(n.as_f64()),
        Value::Array(items) => items.iter().for_each(|v| numbers(v, out)),
        Value::Object(fields) => fields.values().for_each(|v| numbers(v, out)),
        _ => {}
    }
}

/// A figure no result holds: what a model that invents one writes.
fn invented(results: &[Value]) -> u64 {
    let mut held = Vec::new();
    results.iter().for_each(|r| numbers(r, &mut held));
    (977..).find(|n| !held.contains(&(*n as f64))).unwrap()
}

fn total(results: &[Value]) -> u64 {
    results[0]["total"].as_u64().expect("a list's total")
}

/// "19:30" → "7:30 pm"
fn twelve_hour(time: &str) -> String {
    let (h, m) = time.split_once(':').unwrap();
    let h: u32 = h.parse().unwrap();
    let half = if h >= 12 { "pm" } else { "am" };
    let h12 = if h.is_multiple_of(12) { 12 } else { h % 12 };
    format!("{h12}:{m} {half}")
}

/// The model's answer to `question` from `results`, as a model that reads them
/// right or wrong (by the question) writes it.
fn answer_for(question: &str, results: &[Value]) -> String {
    match question {
        MISREAD => format!("We have {} customers.", total(results) - 20),
        INVENTED => format!(
            "We have {} customers, and {} of them booked this week.",
            total(results),
            invented(results)
        ),
        RIGHT => format!("There are {} customers.", total(results)),
        TWICE => format!("Both lists say {} customers.", total(results)),
        DATE => {
            let booking = &results[0]["items"][0];
            let date =
                NaiveDate::parse_from_str(booking["date"].as_str().unwrap(), "%Y-%m-%d").unwrap();
            // Far from any date the results hold (bookings, and when they were made).
            let wrong = date + Duration::days(4000);
            format!(
                "The first booking is on {} at {}; the next is on {}.",
                date.format("%-d %B %Y"),
                twelve_hour(booking["time"].as_str().unwrap()),
                wrong.format("%d/%m/%Y")
            )
        }
        LENGTH => format!(
            "We have {} customers.",
            results[0]["items"].as_array().unwrap().len()
        ),
        FAILED => "We had 40 guests last month.".to_owned(),
        other => panic!("no answer scripted for {other:?}"),
    }
}

/// A model in `mode` that calls the tools each question needs, then answers from
/// what they returned; asked to correct itself, it answers right.
fn model(mode: ToolCallMode) -> impl Fn(&Value) -> Turn + Send + Sync + 'static {
    let next = Arc::new(AtomicUsize::new(0));
    move |body| {
        let seen = seen(body);
        if seen.correcting {
            return Turn::text(format!("There are {} customers.", total(&seen.results)));
        }
        if seen.answered {
            return Turn::text(answer_for(&seen.question, &seen.results));
        }
        let calls = calls_for(&seen.question);
        match mode {
            ToolCallMode::Text => Turn::text(
                calls
                    .iter()
                    .map(|(name, arguments)| {
                        format!(
                            "<tool_call>{}</tool_call>",
                            json!({ "name": name, "arguments": arguments })
                        )
                    })
                    .collect::<String>(),
            ),
            ToolCallMode::Native | ToolCallMode::Auto => {
                Turn::tool_calls(calls.iter().map(|(name, arguments)| {
                    let n = next.fetch_add(1, Ordering::SeqCst);
                    ToolCallSpec::new(format!("call_{n}"), *name, arguments.to_string())
                }))
            }
        }
    }
}

async fn app(database: &Database, mode: ToolCallMode, grounding: GroundingMode) -> TestApp {
    let llm = ScriptedLlm::start_responding(model(mode)).await.unwrap();
    TestApp::spawn_chat(database, Llm::Started(llm), |settings| {
        let llm = settings.gateway.llm.as_mut().unwrap();
        llm.tool_calls = mode;
        llm.profile.grounding = grounding;
    })
    .await
}

/// How many customers the backend holds, asked with its own client's token.
async fn customers(app: &TestApp) -> u64 {
    let token = app.backend_token().await;
    let response = app.get("/customers?limit=1", &token).await;
    response.headers()["x-total-count"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// The text of the answer's final turn: the tokens after its last tool activity.
fn final_text(events: &[SseEvent]) -> String {
    let after = events
        .iter()
        .rposition(|e| e.event == "tool_result" || e.event == "tool_call")
        .map_or(0, |i| i + 1);
    crate::helpers::answer(&events[after..])
}

fn span(text: &str, claim: &Value) -> String {
    let (start, end) = (
        claim["start"].as_u64().unwrap() as usize,
        claim["end"].as_u64().unwrap() as usize,
    );
    text.chars().skip(start).take(end - start).collect()
}

/// A claim as the tests compare it: its kind, value, status and call.
fn brief(claim: &Value) -> (String, String, String, Value) {
    (
        claim["kind"].as_str().unwrap().to_owned(),
        claim["value"].as_str().unwrap().to_owned(),
        claim["status"].as_str().unwrap().to_owned(),
        claim["tool_call_id"].clone(),
    )
}

fn c(
    kind: &str,
    value: impl ToString,
    status: &str,
    call: Value,
) -> (String, String, String, Value) {
    (kind.to_owned(), value.to_string(), status.to_owned(), call)
}

const UNSUPPORTED: &str = "unsupported";
const SUPPORTED: &str = "supported";

/// One question on the chat API: its events, its final text, its claims (each span
/// checked against the text) and its calls' ids.
struct Asked {
    events: Vec<SseEvent>,
    text: String,
    claims: Vec<Value>,
    calls: Vec<Value>,
    conversation: String,
}

async fn ask(app: &TestApp, token: &str, question: &str) -> Asked {
    let events = app.ask(token, question, None).await.rest().await;
    let names: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    let grounding = names
        .iter()
        .position(|n| *n == "grounding")
        .unwrap_or_else(|| panic!("no grounding event: {names:?}"));
    let last_token = names.iter().rposition(|n| *n == "token").unwrap();
    assert!(last_token < grounding, "{names:?}");
    for later in ["usage", "done"] {
        if let Some(at) = names.iter().position(|n| *n == later) {
            assert!(grounding < at, "grounding after {later}: {names:?}");
        }
    }
    let text = final_text(&events);
    let claims = of(&events, "grounding")[0]["claims"]
        .as_array()
        .unwrap()
        .clone();
    for claim in &claims {
        assert_eq!(span(&text, claim), claim["text"], "{text:?} {claim}");
    }
    let calls = of(&events, "tool_call")
        .iter()
        .map(|c| c["id"].clone())
        .collect();
    let conversation = of(&events, "meta")[0]["conversation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    Asked {
        events,
        text,
        claims,
        calls,
        conversation,
    }
}

/// The same question on `/v1/chat/completions`, streamed: the answer's content and
/// the claims on the extra field, each span checked against the content.
async fn ask_openai(app: &TestApp, token: &str, question: &str) -> (String, Vec<Value>) {
    let response = app
        .http
        .post(format!("{}/v1/chat/completions", app.gateway_url))
        .bearer_auth(token)
        .json(&json!({
            "model": "maitred",
            "stream": true,
            "messages": [{ "role": "user", "content": question }]
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut reader = SseReader::new(response);
    let mut text = String::new();
    let mut claims = None;
    while let Some(event) = reader.next().await {
        let chunk = event.data;
        if chunk == json!("[DONE]") {
            break;
        }
        if let Some(delta) = chunk["choices"][0]["delta"]["content"].as_str() {
            assert!(claims.is_none(), "text after the grounding: {delta:?}");
            text.push_str(delta);
        }
        if let Some(grounding) = chunk["maitred"].get("grounding") {
            claims = Some(grounding["claims"].as_array().unwrap().clone());
        }
    }
    let claims = claims.expect("the claims on the extra field");
    for claim in &claims {
        assert_eq!(span(&text, claim), claim["text"], "{text:?} {claim}");
    }
    (text, claims)
}

/// Every must-show case in `flag` mode, in `mode`, on both front doors; then a
/// reload of two of them.
async fn flag_mode(database: &Database, mode: ToolCallMode) {
    let app = app(database, mode, GroundingMode::Flag).await;
    let token = app.chat_token().await;
    let total = customers(&app).await;
    let null = Value::Null;

    let misread = ask(&app, &token, MISREAD).await;
    let expected = vec![c("count", total - 20, UNSUPPORTED, null.clone())];
    assert_eq!(
        misread.claims.iter().map(brief).collect::<Vec<_>>(),
        expected
    );

    let invented = ask(&app, &token, INVENTED).await;
    let briefs: Vec<_> = invented.claims.iter().map(brief).collect();
    assert_eq!(briefs.len(), 2, "{briefs:?}");
    assert_eq!(
        briefs[0],
        c("count", total, SUPPORTED, invented.calls[0].clone())
    );
    assert_eq!(briefs[1].2, UNSUPPORTED, "{briefs:?}");

    let right = ask(&app, &token, RIGHT).await;
    assert_eq!(
        right.claims.iter().map(brief).collect::<Vec<_>>(),
        vec![c("count", total, SUPPORTED, right.calls[0].clone())]
    );

    let twice = ask(&app, &token, TWICE).await;
    assert_eq!(twice.calls.len(), 2);
    assert_eq!(
        twice.claims.iter().map(brief).collect::<Vec<_>>(),
        vec![c("count", total, SUPPORTED, twice.calls[0].clone())],
        "the first call that returned it"
    );

    let date = ask(&app, &token, DATE).await;
    let briefs: Vec<_> = date.claims.iter().map(brief).collect();
    assert_eq!(briefs.len(), 3, "{briefs:?} in {:?}", date.text);
    assert_eq!(
        (briefs[0].0.as_str(), briefs[0].2.as_str()),
        ("date", SUPPORTED)
    );
    assert_eq!(briefs[0].3, date.calls[0]);
    assert_eq!(
        (briefs[1].0.as_str(), briefs[1].2.as_str()),
        ("time", SUPPORTED)
    );
    assert_eq!(
        (briefs[2].0.as_str(), briefs[2].2.as_str()),
        ("date", UNSUPPORTED)
    );

    let length = ask(&app, &token, LENGTH).await;
    assert_eq!(
        length.claims.iter().map(brief).collect::<Vec<_>>(),
        vec![c("count", 5, UNSUPPORTED, null.clone())],
        "a page of 5 is not how many customers there are"
    );

    // A reload shows the same marks, on the turn that holds the final text.
    for asked in [&misread, &right] {
        let stored = app.stored_messages(&token, &asked.conversation).await;
        let last = stored.last().unwrap();
        assert_eq!(last["content"].as_str().unwrap(), asked.text);
        assert_eq!(&last["grounding"], of(&asked.events, "grounding")[0]);
    }

    // The same on /v1/chat/completions, where offsets count in `content`.
    let (_, claims) = ask_openai(&app, &token, MISREAD).await;
    assert_eq!(
        claims.iter().map(brief).collect::<Vec<_>>(),
        vec![c("count", total - 20, UNSUPPORTED, null.clone())]
    );
    let (_, claims) = ask_openai(&app, &token, RIGHT).await;
    assert_eq!(claims.len(), 1);
    assert_eq!(brief(&claims[0]).2, SUPPORTED);
    assert!(
        claims[0]["tool_call_id"]
            .as_str()
            .unwrap()
            .starts_with("tc_")
    );
    let (_, claims) = ask_openai(&app, &token, LENGTH).await;
    assert_eq!(brief(&claims[0]), c("count", 5, UNSUPPORTED, null.clone()));
    let (_, claims) = ask_openai(&app, &token, DATE).await;
    let statuses: Vec<String> = claims.iter().map(|c| brief(c).2).collect();
    assert_eq!(statuses, [SUPPORTED, SUPPORTED, UNSUPPORTED]);
    app.stop().await;
}

async fn flag_mode_native(database: &Database) {
    flag_mode(database, ToolCallMode::Native).await;
}

async fn flag_mode_text(database: &Database) {
    flag_mode(database, ToolCallMode::Text).await;
}

/// `correct`: the misread answer is held back, the model asked once more with the
/// figure named and the total given, and the person sees only the corrected answer
/// with a note.
async fn correct_mode(database: &Database) {
    let app = app(database, ToolCallMode::Native, GroundingMode::Correct).await;
    let token = app.chat_token().await;
    let total = customers(&app).await;
    let asked = ask(&app, &token, MISREAD).await;
    let shown = crate::helpers::answer(&asked.events);
    assert_eq!(
        shown,
        format!(
            "There are {total} customers.\n\n_Checked against the tool results and corrected before it was shown._"
        )
    );
    assert!(!shown.contains(&(total - 20).to_string()), "{shown}");
    assert_eq!(
        asked.claims.iter().map(brief).collect::<Vec<_>>(),
        vec![c("count", total, SUPPORTED, asked.calls[0].clone())]
    );
    let requests = app.llm.as_ref().unwrap().requests();
    let correction = requests.last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let told = content(&correction);
    assert!(told.contains(&format!("\"{}\"", total - 20)), "{told}");
    assert!(told.contains(&format!("total {total}")), "{told}");
    // The right answer is not asked again.
    let before = app.llm.as_ref().unwrap().requests().len();
    let right = ask(&app, &token, RIGHT).await;
    assert_eq!(app.llm.as_ref().unwrap().requests().len(), before + 2);
    assert_eq!(
        crate::helpers::answer(&right.events),
        format!("There are {total} customers.")
    );
    let stored = app.stored_messages(&token, &asked.conversation).await;
    assert_eq!(stored.last().unwrap()["content"].as_str().unwrap(), shown);
    app.stop().await;
}

/// `facts`: the misread count is written from the list's total, and the invented
/// figure's clause is left out; nothing unsupported reaches the person.
async fn facts_mode(database: &Database) {
    let app = app(database, ToolCallMode::Native, GroundingMode::Facts).await;
    let token = app.chat_token().await;
    let total = customers(&app).await;
    let asked = ask(&app, &token, INVENTED).await;
    assert_eq!(
        crate::helpers::answer(&asked.events),
        format!("We have {total} customers.")
    );
    assert_eq!(
        asked.claims.iter().map(brief).collect::<Vec<_>>(),
        vec![c("count", total, SUPPORTED, asked.calls[0].clone())]
    );
    let misread = ask(&app, &token, MISREAD).await;
    assert_eq!(
        crate::helpers::answer(&misread.events),
        format!("We have {total} customers.")
    );
    app.stop().await;
}

/// A call that fails its schema is told how to call the tool; an answer whose calls
/// all failed says it could not get the data instead of stating a figure.
async fn failed_calls(database: &Database) {
    let app = app(database, ToolCallMode::Native, GroundingMode::Flag).await;
    let token = app.chat_token().await;
    let asked = ask(&app, &token, FAILED).await;
    let statuses: Vec<&str> = of(&asked.events, "tool_result")
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["error"]);
    let shown = crate::helpers::answer(&asked.events);
    assert!(shown.starts_with("I could not get the data"), "{shown}");
    assert!(!shown.contains("40"), "{shown}");
    let requests = app.llm.as_ref().unwrap().requests();
    let told = requests.last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .map(|m| content(m).to_owned())
        .unwrap();
    assert!(told.contains("do not fit its input schema"), "{told}");
    assert!(told.contains("limit (integer, 1 to 100)"), "{told}");
    assert!(told.contains("Filter with customQuery"), "{told}");
    assert!(
        told.contains("A call that fits: resos__getCustomers {"),
        "{told}"
    );
    app.stop().await;
}

crate::on_both_databases!(
    flag_mode_native,
    flag_mode_text,
    correct_mode,
    facts_mode,
    failed_calls
);
