//! The MCP role asking a person through the client: createBooking's guest form
//! (elicitation mid-call on 2025-11-25, an input round trip on 2026-07-28) and
//! findAvailability's progress, with rmcp's client declaring what it supports.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    FormElicitationCapability, Implementation, InputRequest, NumberOrString,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, RequestParamsMeta,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData};
use serde_json::{Value, json};

use crate::helpers::{Database, TestApp};

const LEGACY: ProtocolVersion = ProtocolVersion::V_2025_11_25;
const MODERN: ProtocolVersion = ProtocolVersion::V_2026_07_28;

type Answerer = Arc<dyn Fn(&Value) -> ElicitResult + Send + Sync>;

/// The person behind the client: answers each form with `answer` (given the form as
/// JSON) and keeps the forms and progress notifications it saw.
#[derive(Clone)]
struct Person {
    version: ProtocolVersion,
    shows_forms: bool,
    answer: Answerer,
    forms: Arc<Mutex<Vec<Value>>>,
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl Person {
    fn new(
        version: ProtocolVersion,
        answer: impl Fn(&Value) -> ElicitResult + Send + Sync + 'static,
    ) -> Self {
        Self {
            version,
            shows_forms: true,
            answer: Arc::new(answer),
            forms: Arc::default(),
            progress: Arc::default(),
        }
    }

    fn without_forms(version: ProtocolVersion) -> Self {
        let mut person = Self::new(version, |_| ElicitResult::new(ElicitationAction::Cancel));
        person.shows_forms = false;
        person
    }

    fn forms(&self) -> Vec<Value> {
        self.forms.lock().unwrap().clone()
    }
}

impl ClientHandler for Person {
    fn get_info(&self) -> ClientConfig {
        let capabilities = if self.shows_forms {
            ClientCapabilities::builder()
                .enable_elicitation_with(
                    ElicitationCapability::new().with_form(FormElicitationCapability::new()),
                )
                .build()
        } else {
            ClientCapabilities::default()
        };
        ClientConfig::new(capabilities, Implementation::new("maitred-tests", "1"))
            .with_protocol_version(self.version.clone())
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let form = serde_json::to_value(&request).unwrap();
        self.forms.lock().unwrap().push(form.clone());
        Ok((self.answer)(&form))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

type Client = RunningService<RoleClient, Person>;

async fn connect(app: &TestApp, token: &str, person: Person) -> Client {
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(app.mcp_url.clone()).auth_header(token),
    );
    let mode = if person.version == LEGACY {
        ClientLifecycleMode::Initialize
    } else {
        ClientLifecycleMode::Discover {
            preferred_versions: vec![person.version.clone()],
        }
    };
    person
        .serve_with_lifecycle(transport, mode)
        .await
        .expect("connect to the MCP server")
}

fn params(tool: &str, arguments: &Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_owned())
        .with_arguments(arguments.as_object().cloned().unwrap_or_default())
}

async fn call(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    client
        .call_tool(params(tool, &arguments))
        .await
        .expect("tools/call")
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn accept(content: Value) -> ElicitResult {
    ElicitResult::new(ElicitationAction::Accept).with_content(content)
}

/// A day the restaurant is open, `days` from now, and its first free time for two.
async fn free_slot(client: &Client, days: i64) -> (String, String) {
    let mut date = chrono::Utc::now().date_naive() + chrono::Duration::days(days);
    if chrono::Datelike::weekday(&date) == chrono::Weekday::Mon {
        date += chrono::Duration::days(1);
    }
    let date = date.to_string();
    let times = call(
        client,
        "getAvailableTimes",
        json!({ "date": date, "people": 2 }),
    )
    .await;
    let time = times.structured_content.unwrap()["times"][0]
        .as_str()
        .expect("a free time on an open day")
        .to_owned();
    (date, time)
}

async fn bookings_on(client: &Client, date: &str) -> u64 {
    let found = call(
        client,
        "getBookings",
        json!({ "fromDate": date, "toDate": date, "limit": 1 }),
    )
    .await;
    found.structured_content.unwrap()["total"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_booking_without_the_guest_asks_for_them_with_a_form_in_both_revisions() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let token = app.token("maitred-gateway", &[]).await;
    let backend_token = app.backend_token().await;
    for (round, version) in [LEGACY, MODERN].into_iter().enumerate() {
        let email = format!("ida.holm{round}@example.org");
        let person = Person::new(version.clone(), {
            let email = email.clone();
            move |_| accept(json!({ "guestName": "Ida Holm", "guestEmail": email }))
        });
        let client = connect(&app, &token, person.clone()).await;
        let (date, time) = free_slot(&client, 2 + round as i64).await;

        let created = call(
            &client,
            "createBooking",
            json!({ "date": date, "time": time, "people": 2 }),
        )
        .await;
        assert_eq!(
            created.is_error,
            Some(false),
            "{version}: {}",
            text(&created)
        );
        let forms = person.forms();
        assert_eq!(forms.len(), 1, "{version}: one form");
        let form = &forms[0];
        assert_eq!(form["mode"], "form");
        assert!(
            form["message"]
                .as_str()
                .unwrap()
                .starts_with(&format!("Who is the booking for? Give the guest's name and an email address or phone number for the table for 2 on {date} at {time}")),
            "{form}"
        );
        let schema = &form["requestedSchema"];
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["guestName"]));
        assert_eq!(schema["properties"]["guestEmail"]["format"], "email");
        assert_eq!(schema["properties"]["guestName"]["title"], "Name");

        let id = created.structured_content.unwrap()["_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let stored = app
            .get_json(&format!("/bookings/{id}"), &backend_token)
            .await;
        assert_eq!(stored["guest"]["name"], "Ida Holm", "{version}");
        assert_eq!(stored["guest"]["email"], email.as_str(), "{version}");
        assert_eq!(stored["date"], date.as_str());
        client.cancel().await.unwrap();
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declined_or_cancelled_form_books_nothing_and_says_what_to_do() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let token = app.token("maitred-gateway", &[]).await;
    for version in [LEGACY, MODERN] {
        for (action, says) in [
            (
                ElicitationAction::Decline,
                "declined to give the guest's details",
            ),
            (ElicitationAction::Cancel, "cancelled the form"),
        ] {
            let person = Person::new(version.clone(), move |_| ElicitResult::new(action.clone()));
            let client = connect(&app, &token, person.clone()).await;
            let (date, time) = free_slot(&client, 4).await;
            let before = bookings_on(&client, &date).await;
            let refused = call(
                &client,
                "createBooking",
                json!({ "date": date, "time": time, "people": 2 }),
            )
            .await;
            assert_eq!(refused.is_error, Some(true), "{version}");
            let message = text(&refused);
            assert!(
                message.contains(says) && message.contains("nothing was booked"),
                "{version}: {message}"
            );
            assert_eq!(person.forms().len(), 1);
            assert_eq!(
                bookings_on(&client, &date).await,
                before,
                "{version}: no booking"
            );
            client.cancel().await.unwrap();
        }
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_two_customers_share_is_a_choice_that_does_not_show_their_details() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let token = app.token("maitred-gateway", &[]).await;
    let backend_token = app.backend_token().await;
    let setup = connect(&app, &token, Person::without_forms(MODERN)).await;
    let (date, time) = free_slot(&setup, 5).await;
    // Two customers called Kim Lund, told apart by email.
    for (email, people) in [("kim@north.example.org", 2), ("kim@south.example.org", 3)] {
        let made = call(
            &setup,
            "createBooking",
            json!({ "date": date, "time": time, "people": people, "guestName": "Kim Lund", "guestEmail": email }),
        )
        .await;
        assert_eq!(made.is_error, Some(false), "{}", text(&made));
    }
    setup.cancel().await.unwrap();

    for version in [LEGACY, MODERN] {
        // The person picks the one at south.example.org by what the form shows.
        let person = Person::new(version.clone(), |form| {
            let options = form["requestedSchema"]["properties"]["guest"]["oneOf"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let south = options
                .iter()
                .find(|o| {
                    o["title"]
                        .as_str()
                        .is_some_and(|t| t.contains("k•••@south.example.org"))
                })
                .map(|o| o["const"].clone())
                .unwrap_or(Value::Null);
            accept(json!({ "guest": south }))
        });
        let client = connect(&app, &token, person.clone()).await;
        let (date, time) = free_slot(&client, 6).await;
        let created = call(
            &client,
            "createBooking",
            json!({ "date": date, "time": time, "people": 2, "guestName": "kim lund" }),
        )
        .await;
        assert_eq!(
            created.is_error,
            Some(false),
            "{version}: {}",
            text(&created)
        );
        let form = person.forms().pop().unwrap();
        assert!(
            form["message"]
                .as_str()
                .unwrap()
                .starts_with("More than one guest is called kim lund")
        );
        let options = form["requestedSchema"]["properties"]["guest"]["oneOf"]
            .as_array()
            .unwrap();
        assert_eq!(options.len(), 3, "{form}");
        assert_eq!(options[2]["const"], "new");
        let shown = form.to_string();
        assert!(
            !shown.contains("kim@") && !shown.contains("north.example.org\""),
            "{shown}"
        );
        let id = created.structured_content.unwrap()["_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let stored = app
            .get_json(&format!("/bookings/{id}"), &backend_token)
            .await;
        assert_eq!(
            stored["guest"]["email"], "kim@south.example.org",
            "{version}"
        );
        assert_eq!(stored["guest"]["name"], "Kim Lund");
        client.cancel().await.unwrap();
    }
    app.stop().await;
}

/// A second, equally valid caller: a token the issuer's own key signed for "stranger".
async fn other_subject(app: &TestApp) -> String {
    let (kid, private): (String, String) =
        sqlx::query_as("SELECT kid, private_key FROM signing_keys LIMIT 1")
            .fetch_one(app.db.pool())
            .await
            .unwrap();
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(kid);
    let now = chrono::Utc::now().timestamp();
    let key = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, private).unwrap();
    jsonwebtoken::encode(
        &header,
        &json!({ "iss": app.url, "sub": "stranger", "aud": app.mcp_url, "exp": now + 300, "iat": now, "scope": "mcp.read mcp.write" }),
        &EncodingKey::from_ed_der(&key),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_state_only_answers_the_call_it_was_issued_for() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let token = app.token("maitred-gateway", &[]).await;
    let person = Person::new(MODERN, |_| ElicitResult::new(ElicitationAction::Cancel));
    let client = connect(&app, &token, person).await;
    let (date, time) = free_slot(&client, 7).await;
    let arguments = json!({ "date": date, "time": time, "people": 2 });

    let first = client
        .call_tool_once(params("createBooking", &arguments))
        .await
        .unwrap();
    let CallToolResponse::InputRequired(asked) = first else {
        panic!("expected an InputRequiredResult, got {first:?}");
    };
    let requests = asked.input_requests.unwrap();
    assert!(matches!(
        requests.get("guest"),
        Some(InputRequest::Elicitation(_))
    ));
    let state = asked.request_state.unwrap();
    let answer = serde_json::to_value(accept(
        json!({ "guestName": "Eve Replay", "guestEmail": "eve@example.org" }),
    ))
    .unwrap();
    let retry = |arguments: &Value, state: &str| {
        params("createBooking", arguments)
            .with_request_state(state.to_owned())
            .with_input_responses([("guest".to_owned(), answer.clone())].into())
    };
    let before = bookings_on(&client, &date).await;

    // The same state for other arguments, or changed by one character: refused.
    let other = json!({ "date": date, "time": time, "people": 6 });
    let mut tampered = state.clone().into_bytes();
    let at = tampered.len() / 2;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    for (what, attempt) in [
        ("other arguments", retry(&other, &state)),
        ("a changed state", retry(&arguments, &tampered)),
    ] {
        let error = client.call_tool_once(attempt).await.expect_err(what);
        let message = error.to_string();
        assert!(
            message.contains("requestState does not belong to this call"),
            "{what}: {message}"
        );
    }
    // Another caller with a valid token of its own cannot use it either.
    let stranger = connect(
        &app,
        &other_subject(&app).await,
        Person::without_forms(MODERN),
    )
    .await;
    let error = stranger
        .call_tool_once(retry(&arguments, &state))
        .await
        .expect_err("another caller's retry");
    assert!(
        error
            .to_string()
            .contains("requestState does not belong to this call"),
        "{error}"
    );
    stranger.cancel().await.unwrap();
    assert_eq!(
        bookings_on(&client, &date).await,
        before,
        "nothing booked by a refused retry"
    );

    // The state with the call it was issued for books.
    let booked = client
        .call_tool_once(retry(&arguments, &state))
        .await
        .unwrap();
    let CallToolResponse::Complete(booked) = booked else {
        panic!("expected the booking, got {booked:?}");
    };
    assert_eq!(booked.is_error, Some(false), "{}", text(&booked));
    let booked = booked.structured_content.unwrap();
    assert_eq!(booked["guest"]["name"], "Eve Replay");

    // Finding 9 of the third security round: one state booked three tables. Sent
    // again (concurrently, too), the same state and answer get the same booking back,
    // never another; with another answer, a refusal.
    let again =
        futures::future::join_all((0..3).map(|_| client.call_tool_once(retry(&arguments, &state))))
            .await;
    for response in again {
        let CallToolResponse::Complete(result) = response.unwrap() else {
            panic!("expected a result");
        };
        if result.is_error == Some(false) {
            assert_eq!(result.structured_content.unwrap()["_id"], booked["_id"]);
        } else {
            // A repeat that found the first still in flight.
            assert!(text(&result).contains("Idempotency"), "{}", text(&result));
        }
    }
    assert_eq!(
        bookings_on(&client, &date).await,
        before + 1,
        "one state, one booking"
    );
    let other_answer = serde_json::to_value(accept(
        json!({ "guestName": "Mallory Replay", "guestEmail": "mallory@example.org" }),
    ))
    .unwrap();
    let replayed = client
        .call_tool_once(
            params("createBooking", &arguments)
                .with_request_state(state.clone())
                .with_input_responses([("guest".to_owned(), other_answer)].into()),
        )
        .await
        .unwrap();
    let CallToolResponse::Complete(replayed) = replayed else {
        panic!("expected a result, got {replayed:?}");
    };
    assert_eq!(replayed.is_error, Some(true), "{}", text(&replayed));
    assert_eq!(
        bookings_on(&client, &date).await,
        before + 1,
        "one state, one booking"
    );
    client.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_forms_gets_an_error_result_as_before() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let token = app.token("maitred-gateway", &[]).await;
    for version in [LEGACY, MODERN] {
        let client = connect(&app, &token, Person::without_forms(version.clone())).await;
        let (date, time) = free_slot(&client, 8).await;
        let before = bookings_on(&client, &date).await;
        let refused = call(
            &client,
            "createBooking",
            json!({ "date": date, "time": time, "people": 2 }),
        )
        .await;
        assert_eq!(refused.is_error, Some(true), "{version}");
        assert!(
            text(&refused).contains("guestName is missing: ask the guest for their name"),
            "{}",
            text(&refused)
        );
        assert_eq!(bookings_on(&client, &date).await, before);
        client.cancel().await.unwrap();
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_availability_reports_each_day_and_finds_what_each_day_has() {
    let app = TestApp::spawn(&Database::Sqlite).await;
    let token = app.token("maitred-gateway", &[]).await;
    let today = chrono::Utc::now().date_naive();
    let from = today + chrono::Duration::days(1);
    let to = today + chrono::Duration::days(4);
    for version in [LEGACY, MODERN] {
        let person = Person::without_forms(version.clone());
        let client = connect(&app, &token, person.clone()).await;
        let mut request = params(
            "findAvailability",
            &json!({ "from": from.to_string(), "to": to.to_string(), "people": 4, "fromTime": "18:00", "toTime": "21:00" }),
        );
        request.set_progress_token(ProgressToken(NumberOrString::Number(42)));
        let started = std::time::Instant::now();
        let found = client.call_tool(request).await.unwrap();
        let took = started.elapsed();
        assert_eq!(found.is_error, Some(false), "{}", text(&found));
        let found = found.structured_content.unwrap();
        let days = found["days"].as_array().unwrap();
        assert_eq!(days.len(), 4);

        // Each day agrees with getAvailableTimes for that day, within the window.
        let mut expected_messages = Vec::new();
        for (i, day) in days.iter().enumerate() {
            let date = from + chrono::Duration::days(i as i64);
            assert_eq!(day["date"], date.to_string().as_str());
            let times = call(
                &client,
                "getAvailableTimes",
                json!({ "date": date.to_string(), "people": 4 }),
            )
            .await;
            let within: Vec<Value> = times.structured_content.unwrap()["times"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| ("18:00".."21:01").contains(&t.as_str().unwrap()))
                .cloned()
                .collect();
            assert_eq!(day["times"].as_array().unwrap(), &within, "{date}");
            let count = match within.len() {
                0 => "no free times".to_owned(),
                1 => "1 free time".to_owned(),
                n => format!("{n} free times"),
            };
            expected_messages.push(format!("Checked {}: {count}", date.format("%a %-d %b")));
        }
        assert!(
            days.iter()
                .any(|d| !d["times"].as_array().unwrap().is_empty()),
            "some day has free times"
        );

        // The notifications may be handled just after the result: wait a moment for them.
        for _ in 0..50 {
            if person.progress.lock().unwrap().len() >= 4 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let progress = person.progress.lock().unwrap().clone();
        let steps: Vec<(f64, Option<f64>, String)> = progress
            .iter()
            .map(|p| (p.progress, p.total, p.message.clone().unwrap_or_default()))
            .collect();
        let expected: Vec<(f64, Option<f64>, String)> = expected_messages
            .into_iter()
            .enumerate()
            .map(|(i, m)| ((i + 1) as f64, Some(4.0), m))
            .collect();
        assert_eq!(steps, expected, "{version}");
        // rmcp's client may put a token of its own on the wire; one call, one token.
        let token = &progress[0].progress_token;
        assert!(
            progress.iter().all(|p| &p.progress_token == token),
            "{progress:?}"
        );
        println!("findAvailability over 4 days on {version}: {took:?}");

        let wrong = call(
            &client,
            "findAvailability",
            json!({ "from": to.to_string(), "to": from.to_string(), "people": 2 }),
        )
        .await;
        assert_eq!(wrong.is_error, Some(true));
        assert!(text(&wrong).contains("is after to"), "{}", text(&wrong));
        let too_long = call(
            &client,
            "findAvailability",
            json!({ "from": from.to_string(), "to": (from + chrono::Duration::days(40)).to_string(), "people": 2 }),
        )
        .await;
        assert!(
            text(&too_long).contains("at most 31 days"),
            "{}",
            text(&too_long)
        );
        let bad_date = call(
            &client,
            "findAvailability",
            json!({ "from": "24/11/2026", "to": to.to_string(), "people": 2 }),
        )
        .await;
        assert!(
            text(&bad_date).contains("from must be a date as YYYY-MM-DD"),
            "{}",
            text(&bad_date)
        );
        client.cancel().await.unwrap();
    }
    app.stop().await;
}
