//! Tools that take minutes: an MCP server answers a call with a task (the Tasks
//! extension, SEP-2663), the answer ends at once, and the gateway follows the task
//! until it ends, then posts its result once as a new answer. A small rmcp server,
//! made here on rmcp's own task runtime, stands for any server that runs tasks.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use maitred::settings::mcp_servers::ServerConfig;
use maitred_scripted_llm::{Script, ToolCallSpec, Turn};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, CreateTaskResult,
    DiscoverResult, ElicitRequest, ElicitRequestParams, ElicitationSchema, GetTaskParams,
    GetTaskResult, InputRequest, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ServerCapabilities, ServerConfig as McpServerConfig, Task, TaskStatus, Tool, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions, current_timestamp};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::helpers::{Database, Llm, TestApp, answer, of, serve};

/// What the lab's tasks did, in order ("cancelled crunch", "asked", …).
pub(crate) type Seen = Arc<Mutex<Vec<String>>>;

/// An MCP server of the 2026-07-28 revision whose every tool runs as a task:
/// `crunch` counts `steps` (a status message per step), `ask_name` asks the person
/// for a name first, `forever` runs until it is cancelled, `vanish` answers with a
/// task the server does not know.
#[derive(Clone)]
struct Lab {
    tasks: Arc<TaskManager>,
    seen: Seen,
    step: Duration,
}

fn name_form() -> ElicitRequestParams {
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: "Whose name goes on the report?".to_owned(),
        requested_schema: serde_json::from_value::<ElicitationSchema>(json!({
            "type": "object",
            "properties": {"name": {"type": "string", "minLength": 2}},
            "required": ["name"],
        }))
        .unwrap(),
    }
}

impl Lab {
    fn run(&self, name: &str, arguments: &Value) -> Option<Task> {
        let (seen, step) = (self.seen.clone(), self.step);
        let options = TaskOptions::new()
            .with_poll_interval_ms(100)
            .with_status_message("starting");
        Some(match name {
            "crunch" => {
                let steps = arguments.get("steps").and_then(Value::as_u64).unwrap_or(5);
                self.tasks.spawn(options, move |ctx| {
                    Box::pin(async move {
                        for n in 1..=steps {
                            if ctx.is_cancel_requested() {
                                return Err(TaskExit::Cancelled);
                            }
                            ctx.set_status_message(format!("step {n} of {steps}"));
                            tokio::time::sleep(step).await;
                        }
                        seen.lock().unwrap().push("crunched".to_owned());
                        Ok(CallToolResult::structured(json!({"crunched": steps})))
                    })
                })
            }
            "ask_name" => self.tasks.spawn(options, move |ctx| {
                Box::pin(async move {
                    let asked = InputRequest::Elicitation(ElicitRequest::new(name_form()));
                    let answer = ctx.request_input("name", asked).await?;
                    seen.lock().unwrap().push(format!("answered {answer}"));
                    let name = answer["content"]["name"].as_str().unwrap_or("nobody");
                    Ok(CallToolResult::structured(
                        json!({"greeting": format!("Hello, {name}")}),
                    ))
                })
            }),
            // Asks the person to open `url` (URL-mode elicitation), then says what
            // they answered.
            "open_page" => {
                let scheme = if arguments.get("secure").and_then(Value::as_bool) == Some(true) {
                    "https"
                } else {
                    "http"
                };
                let url = format!("{scheme}://pay.example.com/deposit?booking=7");
                self.tasks.spawn(options, move |ctx| {
                    Box::pin(async move {
                        let page = ElicitRequestParams::UrlElicitationParams {
                            meta: None,
                            message: "Pay the deposit on this page.".to_owned(),
                            url,
                            elicitation_id: "deposit-1".to_owned(),
                        };
                        let asked = InputRequest::Elicitation(ElicitRequest::new(page));
                        let answer = ctx.request_input("page", asked).await?;
                        seen.lock().unwrap().push(format!("answered {answer}"));
                        Ok(CallToolResult::structured(json!({"answer": answer})))
                    })
                })
            }
            "forever" => self.tasks.spawn(options, move |ctx| {
                Box::pin(async move {
                    ctx.set_status_message("working on it");
                    ctx.cancelled().await;
                    seen.lock().unwrap().push("cancelled forever".to_owned());
                    Err(TaskExit::Cancelled)
                })
            }),
            "vanish" => {
                let now = current_timestamp();
                Task::new("nobody-knows-me", TaskStatus::Working, now.clone(), now)
                    .with_poll_interval_ms(100)
            }
            _ => return None,
        })
    }
}

impl ServerHandler for Lab {
    fn get_info(&self) -> McpServerConfig {
        McpServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(&[ProtocolVersion::V_2026_07_28])
    }

    async fn discover(
        &self,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({"type": "object", "properties": {"steps": {"type": "integer"}}});
        let schema = Arc::new(schema.as_object().unwrap().clone());
        Ok(ListToolsResult::with_all_items(
            ["crunch", "ask_name", "open_page", "forever", "vanish"]
                .into_iter()
                .map(|name| Tool::new(name, format!("The {name} tool"), schema.clone()))
                .collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let task = self
            .run(&request.name, &arguments)
            .ok_or_else(|| ErrorData::invalid_params(format!("no tool {}", request.name), None))?;
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.tasks
            .get_task(&request.task_id)
            .map(GetTaskResult::new)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.seen
            .lock()
            .unwrap()
            .push(format!("cancel {}", request.task_id));
        self.tasks.cancel_task(&request.task_id)
    }
}

/// Serves a [`Lab`] on a free port: its `/mcp` URL and what its tasks did.
pub(crate) async fn lab(step: Duration) -> (String, Seen) {
    let seen = Seen::default();
    let server = Lab {
        tasks: Arc::new(TaskManager::new()),
        seen: seen.clone(),
        step,
    };
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().route_service("/mcp", service);
    (format!("{}/mcp", serve(router).await), seen)
}

fn lab_config(url: &str) -> ServerConfig {
    serde_json::from_value(json!({
        "name": "lab",
        "url": url,
        "timeout": 5,
        "read_only_tools": ["*"],
    }))
    .unwrap()
}

/// The model calls `lab__{tool}` with `arguments`, says it is running, and then
/// (asked again with the task's result) writes `then`.
pub(crate) fn script(tool: &str, arguments: Value, then: &str) -> Script {
    Script::new([
        Turn::tool_calls([ToolCallSpec::new(
            "call_0",
            format!("lab__{tool}"),
            arguments.to_string(),
        )]),
        Turn::text("It is running; I will post the result here."),
        Turn::text(then),
    ])
}

async fn spawn(
    database: &Database,
    step: Duration,
    script: Script,
    tweak: impl FnOnce(&mut maitred::settings::Settings),
) -> (TestApp, Seen) {
    let (url, seen) = lab(step).await;
    let app = TestApp::spawn_chat(database, Llm::Scripted(script), |s| {
        s.gateway.file.mcp_servers = vec![lab_config(&url)];
        tweak(s);
    })
    .await;
    (app, seen)
}

/// A lab whose tasks take `step` a step, a gateway whose model calls `lab__{tool}`
/// (then writes `then` from its result), and the question asked and answered: the
/// app, what the lab saw, a token and the conversation.
async fn asked(
    step: Duration,
    tool: &str,
    then: &str,
    tweak: impl FnOnce(&mut maitred::settings::Settings),
) -> (TestApp, Seen, String, String) {
    let (app, seen) = spawn(
        &Database::Sqlite,
        step,
        script(tool, json!({}), then),
        tweak,
    )
    .await;
    let token = app.chat_token().await;
    let (conversation, _) = ask(&app, &token, &format!("Run {tool}")).await;
    (app, seen, token, conversation)
}

/// Waits (at most 5 s) until the lab has seen `what`.
async fn lab_saw(seen: &Seen, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !seen.lock().unwrap().iter().any(|s| s == what) {
        assert!(
            Instant::now() < deadline,
            "no {what:?} in {:?}",
            seen.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Asks `question`, reads the answer to its end; the conversation's id and the
/// events.
async fn ask(
    app: &TestApp,
    token: &str,
    question: &str,
) -> (String, Vec<crate::helpers::SseEvent>) {
    let events = app.ask(token, question, None).await.rest().await;
    let meta = of(&events, "meta");
    let conversation = meta[0]["conversation_id"].as_str().unwrap().to_owned();
    (conversation, events)
}

async fn tasks(app: &TestApp, token: &str, conversation: &str) -> Vec<Value> {
    let response = app
        .gateway_get(
            &format!("/api/v1/resos/conversations/{conversation}/tasks"),
            token,
        )
        .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    body["tasks"].as_array().cloned().unwrap()
}

/// Polls the conversation's one task until `done` says so (at most `within`); every
/// state seen on the way, in order.
async fn until(
    app: &TestApp,
    token: &str,
    conversation: &str,
    within: Duration,
    done: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let started = Instant::now();
    let mut seen = Vec::new();
    loop {
        let list = tasks(app, token, conversation).await;
        assert_eq!(list.len(), 1, "{list:?}");
        let task = list[0].clone();
        let finished = done(&task);
        seen.push(task);
        if finished {
            return seen;
        }
        assert!(
            started.elapsed() < within,
            "the task did not get there in {within:?}: {:?}",
            seen.last()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn posted(task: &Value) -> bool {
    task["follow_up_message_id"].is_string()
}

async fn a_task_is_followed_and_its_result_posted_once(database: &Database) {
    let (app, seen) = spawn(
        database,
        Duration::from_millis(150),
        script("crunch", json!({"steps": 6}), "Crunched all 6."),
        |_| {},
    )
    .await;
    let token = app.chat_token().await;
    let started = Instant::now();
    let (conversation, events) = ask(&app, &token, "Crunch six, please").await;
    // The answer ended long before the task: it does not hold the answer open.
    let answered_in = started.elapsed();
    assert!(answered_in < Duration::from_millis(900), "{answered_in:?}");
    assert_eq!(of(&events, "tool_result")[0]["status"], "ok");
    assert!(
        of(&events, "tool_result")[0]["summary"]
            .as_str()
            .unwrap()
            .contains("running in the background"),
        "{events:?}"
    );
    assert_eq!(of(&events, "done")[0]["finish_reason"], "stop");
    let llm = app.llm.as_ref().unwrap();
    let told = llm.requests()[1].body["messages"].to_string();
    assert!(told.contains("runs in the background"), "{told}");

    let states = until(&app, &token, &conversation, Duration::from_secs(15), posted).await;
    let messages: Vec<&str> = states
        .iter()
        .filter_map(|t| t["status_message"].as_str())
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("step ") && *m != "step 6 of 6"),
        "progress is shown while it runs: {messages:?}"
    );
    let task = states.last().unwrap();
    assert_eq!(task["status"], "completed");
    assert_eq!(task["server"], "lab");
    assert_eq!(task["tool"], "crunch");
    assert!(task["elapsed_ms"].as_i64().unwrap() >= 6 * 150, "{task}");
    assert!(task["finished_at"].is_string());
    assert_eq!(task["tool_call_id"], of(&events, "tool_call")[0]["id"]);
    let follow_up = task["follow_up_message_id"].as_str().unwrap();

    // Whoever watches the conversation sees it stream; a reload finds it stored.
    let written = app.watch(&token, follow_up, None).await.rest().await;
    assert_eq!(answer(&written), "Crunched all 6.");
    assert_eq!(of(&written, "done")[0]["finish_reason"], "stop");
    let request = &llm.requests()[2].body;
    assert!(
        request
            .get("tools")
            .is_none_or(|t| t.as_array().is_some_and(Vec::is_empty)),
        "no tool is offered: {request}"
    );
    let told = request["messages"].to_string();
    assert!(
        told.contains(r#"{\"crunched\":6}"#),
        "the model reads the result: {told}"
    );

    // Posted once: polls past the end change nothing.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let stored = app.stored_messages(&token, &conversation).await;
    let parts_of_follow_up: Vec<&Value> = stored
        .iter()
        .filter(|m| m["message_id"] == follow_up)
        .collect();
    let questions: Vec<&Value> = parts_of_follow_up
        .iter()
        .copied()
        .filter(|m| m["role"] == "user")
        .collect();
    assert_eq!(questions.len(), 1, "{stored:?}");
    assert!(
        questions[0]["content"]
            .as_str()
            .unwrap()
            .contains("has finished"),
        "{stored:?}"
    );
    assert!(
        parts_of_follow_up
            .iter()
            .all(|m| m["task_id"] == task["id"])
    );
    assert!(
        stored
            .iter()
            .filter(|m| m["message_id"] != follow_up)
            .all(|m| m.get("task_id").is_none())
    );
    assert_eq!(tasks(&app, &token, &conversation).await.len(), 1);
    assert_eq!(llm.requests().len(), 3, "the result was answered once");
    assert_eq!(*seen.lock().unwrap(), ["crunched"]);
    app.stop().await;
}

#[tokio::test]
async fn a_task_is_followed_and_its_result_posted_once_on_sqlite() {
    Box::pin(a_task_is_followed_and_its_result_posted_once(
        &Database::Sqlite,
    ))
    .await;
}

#[tokio::test]
async fn a_task_is_followed_and_its_result_posted_once_on_postgresql() {
    let Some(database) = Database::postgres() else {
        return;
    };
    Box::pin(a_task_is_followed_and_its_result_posted_once(&database)).await;
}

#[tokio::test]
async fn stop_reaches_the_server_and_the_task_ends_cancelled() {
    let (app, seen, token, conversation) = asked(
        Duration::from_millis(100),
        "forever",
        "It was stopped.",
        |_| {},
    )
    .await;
    let running = until(&app, &token, &conversation, Duration::from_secs(5), |t| {
        t["status_message"] == "working on it"
    })
    .await;
    let id = running.last().unwrap()["id"].as_str().unwrap().to_owned();

    let cancel = format!("/api/v1/resos/chat/tasks/{id}/cancel");
    let response = app.gateway_post(&cancel, &token, &json!({})).await;
    assert_eq!(response.status(), 202);
    let states = until(&app, &token, &conversation, Duration::from_secs(10), posted).await;
    let task = states.last().unwrap();
    assert_eq!(task["status"], "cancelled", "{task}");
    assert!(
        seen.lock()
            .unwrap()
            .contains(&"cancelled forever".to_owned()),
        "the cancel reached the task: {:?}",
        seen.lock().unwrap()
    );
    let follow_up = task["follow_up_message_id"].as_str().unwrap();
    let written = app.watch(&token, follow_up, None).await.rest().await;
    assert_eq!(answer(&written), "It was stopped.");
    let told = app.llm.as_ref().unwrap().requests()[2].body["messages"].to_string();
    assert!(told.contains("stopped before it finished"), "{told}");

    let again = app.gateway_post(&cancel, &token, &json!({})).await;
    assert_eq!(again.status(), 409, "it has ended");
    let unknown = app
        .gateway_post(
            "/api/v1/resos/chat/tasks/tsk_0190abcdef0123456789abcdef012345/cancel",
            &token,
            &json!({}),
        )
        .await;
    assert_eq!(unknown.status(), 404);
    app.stop().await;
}

#[tokio::test]
async fn deleting_the_conversation_stops_its_running_task() {
    let (app, seen, token, conversation) =
        asked(Duration::from_millis(50), "forever", "unused", |_| {}).await;
    until(&app, &token, &conversation, Duration::from_secs(5), |t| {
        t["status_message"] == "working on it"
    })
    .await;
    let deleted = app
        .http
        .delete(format!(
            "{}/api/v1/resos/conversations/{conversation}",
            app.gateway_url
        ))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    lab_saw(&seen, "cancelled forever").await;
    let (left,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM tool_tasks")
        .fetch_one(app.db.pool())
        .await
        .unwrap();
    assert_eq!(left, 0);
    app.stop().await;
}

#[tokio::test]
async fn a_tasks_question_is_answered_through_its_card() {
    let (app, seen, token, conversation) = asked(
        Duration::from_millis(50),
        "ask_name",
        "The report greets Ada.",
        |_| {},
    )
    .await;
    let asking = until(&app, &token, &conversation, Duration::from_secs(5), |t| {
        t["status"] == "input_required"
    })
    .await;
    let task = asking.last().unwrap();
    assert_eq!(task["input"]["message"], "Whose name goes on the report?");
    assert_eq!(
        task["input"]["schema"]["properties"]["name"]["minLength"],
        2
    );
    assert!(
        task["input"].get("key").is_none(),
        "the server's key stays inside"
    );
    let input = format!(
        "/api/v1/resos/chat/tasks/{}/input",
        task["id"].as_str().unwrap()
    );
    let wrong = app
        .gateway_post(
            &input,
            &token,
            &json!({"action": "accept", "content": {"name": "A"}}),
        )
        .await;
    assert_eq!(wrong.status(), 400);
    let body: Value = wrong.json().await.unwrap();
    assert_eq!(
        body["details"]["problems"][0],
        "name: must be at least 2 characters long"
    );

    let right = app
        .gateway_post(
            &input,
            &token,
            &json!({"action": "accept", "content": {"name": "Ada"}}),
        )
        .await;
    assert_eq!(right.status(), 202);
    let states = until(&app, &token, &conversation, Duration::from_secs(10), posted).await;
    let task = states.last().unwrap();
    assert_eq!(task["status"], "completed");
    assert!(task["input"].is_null());
    assert_eq!(
        *seen.lock().unwrap(),
        [r#"answered {"action":"accept","content":{"name":"Ada"}}"#]
    );
    let written = app
        .watch(&token, task["follow_up_message_id"].as_str().unwrap(), None)
        .await
        .rest()
        .await;
    assert_eq!(answer(&written), "The report greets Ada.");
    let told = app.llm.as_ref().unwrap().requests()[2].body["messages"].to_string();
    assert!(told.contains("Hello, Ada"), "{told}");
    let late = app
        .gateway_post(&input, &token, &json!({"action": "decline"}))
        .await;
    assert_eq!(late.status(), 409, "it asks nothing now");
    app.stop().await;
}

/// Finding 6 of the third security round: a task's URL-mode question skipped the
/// https rule a call's follows, and an `http:` link reached the UI. Now such a page
/// is never shown: the task is told the person declined, and goes on; an https page
/// is shown as before.
#[tokio::test]
async fn a_tasks_plain_http_page_never_reaches_the_person() {
    for (secure, shown) in [(false, false), (true, true)] {
        let (app, seen) = spawn(
            &Database::Sqlite,
            Duration::from_millis(50),
            script("open_page", json!({ "secure": secure }), "Done."),
            |_| {},
        )
        .await;
        let token = app.chat_token().await;
        let (conversation, events) = ask(&app, &token, "Take the deposit").await;
        assert!(
            !format!("{events:?}").contains("pay.example.com"),
            "{events:?}"
        );
        if shown {
            let asking = until(&app, &token, &conversation, Duration::from_secs(5), |t| {
                t["status"] == "input_required"
            })
            .await;
            assert_eq!(
                asking.last().unwrap()["input"]["url"],
                "https://pay.example.com/deposit?booking=7"
            );
        } else {
            lab_saw(&seen, r#"answered {"action":"decline"}"#).await;
            let states = until(&app, &token, &conversation, Duration::from_secs(10), posted).await;
            for state in &states {
                assert!(
                    !state.to_string().contains("pay.example.com"),
                    "the page reached the API: {state}"
                );
            }
            assert_eq!(states.last().unwrap()["status"], "completed");
        }
        app.stop().await;
    }
}

#[tokio::test]
async fn a_task_its_server_forgot_ends_as_failed() {
    let (app, _, token, conversation) = asked(
        Duration::from_millis(50),
        "vanish",
        "The task was lost.",
        |_| {},
    )
    .await;
    let states = until(&app, &token, &conversation, Duration::from_secs(10), posted).await;
    let task = states.last().unwrap();
    assert_eq!(task["status"], "failed");
    let error = task["error"].as_str().unwrap();
    assert!(error.contains("lab no longer knows this task"), "{error}");
    let written = app
        .watch(&token, task["follow_up_message_id"].as_str().unwrap(), None)
        .await
        .rest()
        .await;
    assert_eq!(answer(&written), "The task was lost.");
    let told = app.llm.as_ref().unwrap().requests()[2].body["messages"].to_string();
    assert!(told.contains("the task failed"), "{told}");
    app.stop().await;
}

#[tokio::test]
async fn a_task_over_the_persons_limit_is_cancelled_at_its_server() {
    let script = Script::new([
        Turn::tool_calls([
            ToolCallSpec::new("call_0", "lab__forever", "{}"),
            ToolCallSpec::new("call_1", "lab__forever", "{}"),
        ]),
        Turn::text("One runs; the other could not."),
    ]);
    let (app, seen) = spawn(&Database::Sqlite, Duration::from_millis(50), script, |s| {
        s.gateway.tasks_per_person = 1;
    })
    .await;
    let token = app.chat_token().await;
    let (conversation, events) = ask(&app, &token, "Two forevers").await;
    let mut statuses: Vec<&str> = of(&events, "tool_result")
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    statuses.sort_unstable();
    assert_eq!(statuses, ["error", "ok"], "{events:?}");
    let told = app.llm.as_ref().unwrap().requests()[1].body["messages"].to_string();
    assert!(
        told.contains("1 background tasks running, the most allowed"),
        "{told}"
    );
    assert_eq!(tasks(&app, &token, &conversation).await.len(), 1);
    lab_saw(&seen, "cancelled forever").await;
    app.stop().await;
}

#[tokio::test]
async fn a_task_that_never_ends_is_given_up() {
    let (app, seen, token, conversation) = asked(
        Duration::from_millis(50),
        "forever",
        "It took too long.",
        |s| s.gateway.task_give_up = Duration::from_secs(1),
    )
    .await;
    let states = until(&app, &token, &conversation, Duration::from_secs(10), posted).await;
    let task = states.last().unwrap();
    assert_eq!(task["status"], "failed");
    assert!(
        task["error"].as_str().unwrap().contains("gave up"),
        "{task}"
    );
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .any(|s| s.starts_with("cancel "))
    );
    app.stop().await;
}

/// maitred's own MCP server runs `getMonthReport` as a task for the gateway, and
/// the offline model writes the follow-up from the report.
#[tokio::test]
async fn the_month_report_runs_as_a_task_end_to_end_with_the_offline_model() {
    let app = TestApp::spawn_with(&Database::Sqlite, |s| {
        s.mcp.report_step_delay = Duration::from_millis(100);
    })
    .await;
    let token = app.chat_token().await;
    let month = chrono::Utc::now().format("%Y-%m").to_string();
    let (conversation, events) = ask(
        &app,
        &token,
        &format!("The month report for {month}, please"),
    )
    .await;
    let calls = of(&events, "tool_call");
    assert_eq!(calls.len(), 1, "{events:?}");
    assert_eq!(calls[0]["tool"], "getMonthReport");
    assert_eq!(calls[0]["arguments"]["month"], month.as_str());
    assert!(
        of(&events, "tool_result")[0]["summary"]
            .as_str()
            .unwrap()
            .contains("running in the background"),
        "{events:?}"
    );
    let states = until(&app, &token, &conversation, Duration::from_secs(30), posted).await;
    let task = states.last().unwrap();
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(task["server"], "resos");
    let messages: Vec<&str> = states
        .iter()
        .filter_map(|t| t["status_message"].as_str())
        .collect();
    assert!(
        messages.iter().any(|m| m.starts_with("Day ")),
        "the day being read is shown: {messages:?}"
    );
    let written = app
        .watch(&token, task["follow_up_message_id"].as_str().unwrap(), None)
        .await
        .rest()
        .await;
    let text = answer(&written);
    assert!(!text.is_empty());
    assert!(text.to_lowercase().contains("booking"), "{text}");
    println!("the offline model's follow-up:\n{text}");
    app.stop().await;
}
