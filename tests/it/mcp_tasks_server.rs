//! Our MCP server's long tool, getMonthReport, as a task (the tasks extension of
//! 2026-07-28: tasks/get, tasks/update, tasks/cancel, each caller seeing only its own
//! tasks) and as a plain call with progress to clients that did not declare it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{Datelike, Months, NaiveDate};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ClientConfig, CreateTaskResult, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, ErrorCode, FormElicitationCapability, GetTaskParams, GetTaskResult,
    Implementation, InputRequest, InputResponses, NumberOrString, ProgressNotificationParam,
    ProgressToken, ProtocolVersion, RequestParamsMeta, TaskPayload, TaskStatus, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, ServiceError};
use serde_json::{Value, json};

use crate::helpers::{Database, TestApp};

const LEGACY: ProtocolVersion = ProtocolVersion::V_2025_11_25;
const MODERN: ProtocolVersion = ProtocolVersion::V_2026_07_28;

/// The client: whether it declares the tasks extension, the month it answers a form
/// with (none: it shows no forms), and the progress it saw.
#[derive(Clone)]
struct Caller {
    version: ProtocolVersion,
    tasks: bool,
    month: Option<String>,
    forms: Arc<Mutex<Vec<Value>>>,
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl Caller {
    fn new(version: ProtocolVersion, tasks: bool) -> Self {
        Self {
            version,
            tasks,
            month: None,
            forms: Arc::default(),
            progress: Arc::default(),
        }
    }

    fn answering(mut self, month: &str) -> Self {
        self.month = Some(month.to_owned());
        self
    }
}

impl ClientHandler for Caller {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.month.is_some() {
            capabilities.elicitation =
                Some(ElicitationCapability::new().with_form(FormElicitationCapability::new()));
        }
        if self.tasks {
            capabilities.extensions = ClientCapabilities::builder()
                .enable_tasks()
                .build()
                .extensions;
        }
        ClientConfig::new(capabilities, Implementation::new("maitred-tests", "1"))
            .with_protocol_version(self.version.clone())
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.forms
            .lock()
            .unwrap()
            .push(serde_json::to_value(&request).unwrap());
        Ok(ElicitResult::new(ElicitationAction::Accept)
            .with_content(json!({ "month": self.month.clone().unwrap_or_default() })))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

type Client = RunningService<RoleClient, Caller>;

async fn connect(app: &TestApp, token: &str, caller: Caller) -> Client {
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(app.mcp_url.clone()).auth_header(token),
    );
    let mode = if caller.version == LEGACY {
        ClientLifecycleMode::Initialize
    } else {
        ClientLifecycleMode::Discover {
            preferred_versions: vec![caller.version.clone()],
        }
    };
    caller
        .serve_with_lifecycle(transport, mode)
        .await
        .expect("connect to the MCP server")
}

async fn spawn(step_delay: Duration) -> TestApp {
    TestApp::spawn_with(&Database::Sqlite, |settings| {
        settings.mcp.report_step_delay = step_delay;
    })
    .await
}

fn report_call(month: Option<&str>) -> CallToolRequestParams {
    let arguments = match month {
        Some(month) => json!({ "month": month }),
        None => json!({}),
    };
    CallToolRequestParams::new("getMonthReport")
        .with_arguments(arguments.as_object().cloned().unwrap())
}

async fn start(client: &Client, month: Option<&str>) -> CreateTaskResult {
    match client.call_tool_once(report_call(month)).await.unwrap() {
        CallToolResponse::Task(created) => created,
        other => panic!("expected a CreateTaskResult, got {other:?}"),
    }
}

async fn get(client: &Client, id: &str) -> GetTaskResult {
    client
        .peer()
        .get_task(GetTaskParams::new(id.to_owned()))
        .await
        .expect("tasks/get")
}

/// Polls the task until `done` holds, keeping every status message seen.
async fn poll_until(
    client: &Client,
    id: &str,
    messages: &mut Vec<String>,
    done: impl Fn(&GetTaskResult) -> bool,
) -> GetTaskResult {
    for _ in 0..600 {
        let got = get(client, id).await;
        if let Some(message) = &got.task.task.status_message
            && messages.last() != Some(message)
        {
            messages.push(message.clone());
        }
        if done(&got) {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the task never got there; it said {messages:?}");
}

/// The day a status message names: "Day 12 of 30 (…): …" is 12.
fn day_of(message: &str) -> u32 {
    message
        .strip_prefix("Day ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a step message: {message:?}"))
}

fn ended(got: &GetTaskResult) -> bool {
    got.task.status().is_terminal()
}

fn completed_report(got: GetTaskResult) -> Value {
    let TaskPayload::Completed { result } = got.task.payload else {
        panic!("expected a completed task, got {:?}", got.task);
    };
    let result: CallToolResult = serde_json::from_value(Value::Object(result)).unwrap();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    result.structured_content.expect("a structured report")
}

/// This month, as YYYY-MM, and its days: the seeded bookings fall in it.
fn this_month() -> (String, NaiveDate, NaiveDate) {
    let today = chrono::Utc::now().date_naive();
    let first = today.with_day(1).unwrap();
    let last = first.checked_add_months(Months::new(1)).unwrap() - chrono::Duration::days(1);
    (first.format("%Y-%m").to_string(), first, last)
}

/// The month's numbers as the backend lists them: bookings, covers, no-shows,
/// cancellations.
async fn from_the_backend(app: &TestApp, first: NaiveDate, last: NaiveDate) -> [u64; 4] {
    let token = app.backend_token().await;
    let mut all = Vec::new();
    loop {
        let page = app
            .get_json(
                &format!(
                    "/bookings?fromDateTime={first}&toDateTime={last}&limit=100&skip={}",
                    all.len()
                ),
                &token,
            )
            .await;
        let page = page.as_array().unwrap().clone();
        let got = page.len();
        all.extend(page);
        if got < 100 {
            break;
        }
    }
    let status = |b: &Value| b["status"].as_str().unwrap().to_owned();
    let covers = all
        .iter()
        .filter(|b| !["canceled", "declined", "no_show", "waitlist"].contains(&status(b).as_str()))
        .map(|b| b["people"].as_u64().unwrap())
        .sum();
    let count = |s: &str| all.iter().filter(|b| status(b) == s).count() as u64;
    [
        all.len() as u64,
        covers,
        count("no_show"),
        count("canceled"),
    ]
}

fn numbers(report: &Value) -> [u64; 4] {
    ["bookings", "covers", "noShows", "cancellations"].map(|k| report[k].as_u64().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_month_report_runs_as_a_task_and_agrees_with_the_backend() {
    let app = spawn(Duration::from_millis(40)).await;
    let token = app.token("maitred-gateway", &[]).await;
    let client = connect(&app, &token, Caller::new(MODERN, true)).await;
    let declared = client.peer_info().unwrap().capabilities.supports_tasks();
    assert!(declared, "the server declares the tasks extension");
    let (month, first, last) = this_month();
    let days = (last - first).num_days() + 1;

    let created = start(&client, Some(&month)).await;
    assert_eq!(created.task.status, TaskStatus::Working);
    assert_eq!(created.task.poll_interval_ms, Some(750));
    assert!(created.task.ttl_ms.is_some_and(|ttl| ttl >= 60_000));
    let mut messages = Vec::new();
    let got = poll_until(&client, &created.task.task_id, &mut messages, ended).await;
    assert_eq!(got.task.status(), TaskStatus::Completed, "{messages:?}");
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("Day ") && m.contains(&format!(" of {days} ("))),
        "a status message per day: {messages:?}"
    );
    let report = completed_report(got);
    assert_eq!(report["month"], month.as_str());
    assert_eq!(report["daysCounted"], days);
    assert_eq!(report["days"].as_array().unwrap().len() as i64, days);
    let expected = from_the_backend(&app, first, last).await;
    assert!(expected[0] > 0, "the seed books this month");
    assert_eq!(numbers(&report), expected);
    let per_weekday: u64 = report["perWeekday"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["covers"].as_u64().unwrap())
        .sum();
    assert_eq!(per_weekday, expected[1]);
    let busiest = &report["busiestDay"];
    let most = report["days"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["covers"].as_u64().unwrap())
        .max()
        .unwrap();
    assert_eq!(busiest["covers"].as_u64().unwrap(), most);
    client.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_task_stops_at_its_next_step() {
    let app = spawn(Duration::from_millis(300)).await;
    let token = app.token("maitred-gateway", &[]).await;
    let client = connect(&app, &token, Caller::new(MODERN, true)).await;
    let (month, ..) = this_month();
    let created = start(&client, Some(&month)).await;
    let id = created.task.task_id;
    let mut messages = Vec::new();
    let reached = poll_until(&client, &id, &mut messages, |got| {
        got.task
            .task
            .status_message
            .as_deref()
            .is_some_and(|m| m.starts_with("Day 2 of"))
    })
    .await;
    let at_cancel = day_of(reached.task.task.status_message.as_deref().unwrap());
    client
        .peer()
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .unwrap();
    let got = poll_until(&client, &id, &mut messages, ended).await;
    assert_eq!(got.task.status(), TaskStatus::Cancelled, "{messages:?}");
    let last = messages.last().unwrap();
    // The day being read when the cancel came may still report; no later one does.
    assert!(
        (at_cancel..=at_cancel + 1).contains(&day_of(last)),
        "it stopped at the next step: {messages:?}"
    );
    // It stays cancelled: no later day is read.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let later = get(&client, &id).await;
    assert_eq!(later.task.status(), TaskStatus::Cancelled);
    assert_eq!(later.task.task.status_message.as_ref(), Some(last));
    client.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_without_a_month_asks_for_it_and_goes_on_with_the_answer() {
    let app = spawn(Duration::ZERO).await;
    let token = app.token("maitred-gateway", &[]).await;
    let client = connect(&app, &token, Caller::new(MODERN, true)).await;
    let (month, first, last) = this_month();
    let created = start(&client, None).await;
    let id = created.task.task_id;
    let mut messages = Vec::new();
    let asking = poll_until(&client, &id, &mut messages, |got| {
        got.task.status() == TaskStatus::InputRequired
    })
    .await;
    let TaskPayload::InputRequired { input_requests } = asking.task.payload else {
        unreachable!()
    };
    let Some(InputRequest::Elicitation(form)) = input_requests.get("month") else {
        panic!("expected a form for the month, got {input_requests:?}");
    };
    let form = serde_json::to_value(&form.params).unwrap();
    assert!(
        form["message"].as_str().unwrap().contains("Which month"),
        "{form}"
    );
    assert_eq!(form["requestedSchema"]["required"], json!(["month"]));

    let answer =
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({ "month": month }));
    client
        .peer()
        .update_task(UpdateTaskParams::new(
            id.clone(),
            InputResponses::from([("month".to_owned(), serde_json::to_value(answer).unwrap())]),
        ))
        .await
        .unwrap();
    let got = poll_until(&client, &id, &mut messages, ended).await;
    let report = completed_report(got);
    assert_eq!(report["month"], month.as_str());
    assert_eq!(numbers(&report), from_the_backend(&app, first, last).await);

    // A person who declines ends the task with a tool error that says what to do.
    let created = start(&client, None).await;
    let id = created.task.task_id;
    poll_until(&client, &id, &mut messages, |got| {
        got.task.status() == TaskStatus::InputRequired
    })
    .await;
    let declined = serde_json::to_value(ElicitResult::new(ElicitationAction::Decline)).unwrap();
    client
        .peer()
        .update_task(UpdateTaskParams::new(
            id.clone(),
            InputResponses::from([("month".to_owned(), declined)]),
        ))
        .await
        .unwrap();
    let got = poll_until(&client, &id, &mut messages, ended).await;
    let TaskPayload::Completed { result } = got.task.payload else {
        panic!("expected a completed task, got {:?}", got.task);
    };
    assert_eq!(result["isError"], true);
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("declined to say which month")
    );
    client.cancel().await.unwrap();
    app.stop().await;
}

/// A second, equally valid caller: a token the issuer's own key signed for "stranger".
async fn stranger_token(app: &TestApp) -> String {
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

fn unknown_task(result: Result<impl std::fmt::Debug, ServiceError>, id: &str) {
    match result {
        Err(ServiceError::McpError(error)) => {
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
            assert_eq!(error.message, format!("unknown task: {id}"));
        }
        other => panic!("expected -32602 unknown task, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_caller_can_neither_read_nor_answer_nor_cancel_a_task() {
    let app = spawn(Duration::from_millis(300)).await;
    let token = app.token("maitred-gateway", &[]).await;
    let owner = connect(&app, &token, Caller::new(MODERN, true)).await;
    let stranger = connect(&app, &stranger_token(&app).await, Caller::new(MODERN, true)).await;
    let (month, ..) = this_month();
    let created = start(&owner, Some(&month)).await;
    let id = created.task.task_id;

    unknown_task(
        stranger
            .peer()
            .get_task(GetTaskParams::new(id.clone()))
            .await,
        &id,
    );
    unknown_task(
        stranger
            .peer()
            .cancel_task(CancelTaskParams::new(id.clone()))
            .await,
        &id,
    );
    unknown_task(
        stranger
            .peer()
            .update_task(UpdateTaskParams::new(id.clone(), InputResponses::new()))
            .await,
        &id,
    );
    // The stranger's cancel did nothing: the owner's task goes on, and is the owner's to stop.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(get(&owner, &id).await.task.status(), TaskStatus::Working);
    owner
        .peer()
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .unwrap();
    let got = poll_until(&owner, &id, &mut Vec::new(), ended).await;
    assert_eq!(got.task.status(), TaskStatus::Cancelled);
    owner.cancel().await.unwrap();
    stranger.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_the_extension_gets_the_report_in_the_call_with_progress() {
    let app = spawn(Duration::ZERO).await;
    let token = app.token("maitred-gateway", &[]).await;
    let (month, first, last) = this_month();
    let days = (last - first).num_days() as usize + 1;
    let expected = from_the_backend(&app, first, last).await;
    for version in [LEGACY, MODERN] {
        // A 2025-11-25 client is never given a task, even if it names the extension.
        let caller = Caller::new(version.clone(), version == LEGACY);
        let client = connect(&app, &token, caller.clone()).await;
        let mut request = report_call(Some(&month));
        request.set_progress_token(ProgressToken(NumberOrString::Number(7)));
        let result = client.call_tool(request).await.unwrap();
        assert_eq!(result.is_error, Some(false), "{version}: {result:?}");
        let report = result.structured_content.unwrap();
        assert_eq!(numbers(&report), expected, "{version}");
        for _ in 0..50 {
            if caller.progress.lock().unwrap().len() >= days {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let progress = caller.progress.lock().unwrap().clone();
        assert_eq!(progress.len(), days, "{version}: a notification per day");
        let last_step = progress.last().unwrap();
        assert_eq!(last_step.progress, days as f64);
        assert_eq!(last_step.total, Some(days as f64));
        assert!(
            last_step
                .message
                .as_deref()
                .unwrap()
                .starts_with(&format!("Day {days} of {days} (")),
            "{last_step:?}"
        );

        // Without a month and without forms: what to do instead.
        let refused = client.call_tool(report_call(None)).await.unwrap();
        assert_eq!(refused.is_error, Some(true));
        let text = serde_json::to_string(&refused.content).unwrap();
        assert!(text.contains("month is missing"), "{version}: {text}");
        client.cancel().await.unwrap();

        // With forms: the person is asked (mid-call, or in a round trip on 2026-07-28).
        let asked = Caller::new(version.clone(), false).answering(&month);
        let client = connect(&app, &token, asked.clone()).await;
        let result = client.call_tool(report_call(None)).await.unwrap();
        assert_eq!(result.is_error, Some(false), "{version}: {result:?}");
        assert_eq!(result.structured_content.unwrap()["month"], month.as_str());
        assert_eq!(asked.forms.lock().unwrap().len(), 1, "{version}: one form");
        client.cancel().await.unwrap();
    }
    app.stop().await;
}

/// Finding 5 of the third security round: one person started 15 month reports in a
/// tenth of a second. Past `MAITRED_MCP_TASKS_PER_CALLER` a call that would start a
/// task is a tool error and starts nothing; another caller still starts theirs, up
/// to `MAITRED_MCP_TASKS_IN_ALL` together; a task that ends frees its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_are_capped_per_caller_and_in_all() {
    let app = TestApp::spawn_with(&Database::Sqlite, |settings| {
        // Slow enough that every report is still running while the next starts.
        settings.mcp.report_step_delay = Duration::from_secs(2);
        settings.mcp.caps.tasks_per_caller = 3;
        settings.mcp.caps.tasks_in_all = 4;
    })
    .await;
    let token = app.token("maitred-gateway", &[]).await;
    let owner = connect(&app, &token, Caller::new(MODERN, true)).await;
    let (month, ..) = this_month();
    let burst =
        futures::future::join_all((0..8).map(|_| owner.call_tool_once(report_call(Some(&month)))))
            .await;
    let mut started = Vec::new();
    let mut refused = Vec::new();
    for response in burst {
        match response.unwrap() {
            CallToolResponse::Task(created) => started.push(created.task.task_id),
            CallToolResponse::Complete(result) => refused.push(result),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(started.len(), 3, "{refused:?}");
    assert_eq!(refused.len(), 5);
    for result in &refused {
        assert_eq!(result.is_error, Some(true), "{result:?}");
        let text = serde_json::to_string(&result.content).unwrap();
        assert!(text.contains("3 tasks running already"), "{text}");
    }

    // Another caller (a person, through the gateway): one more place in all, then none.
    let operator = crate::delegation::mcp_token_of(&app, "operator").await;
    let stranger = connect(&app, &operator, Caller::new(MODERN, true)).await;
    start(&stranger, Some(&month)).await;
    match stranger
        .call_tool_once(report_call(Some(&month)))
        .await
        .unwrap()
    {
        CallToolResponse::Complete(result) => {
            assert_eq!(result.is_error, Some(true));
            let text = serde_json::to_string(&result.content).unwrap();
            assert!(text.contains("as many tasks as it runs at once"), "{text}");
        }
        other => panic!("expected a tool error, got {other:?}"),
    }

    // One of the owner's ends: a place is free again.
    owner
        .peer()
        .cancel_task(CancelTaskParams::new(started[0].clone()))
        .await
        .unwrap();
    for _ in 0..100 {
        if get(&owner, &started[0]).await.task.status() == TaskStatus::Cancelled {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    start(&owner, Some(&month)).await;
    app.stop().await;
}
