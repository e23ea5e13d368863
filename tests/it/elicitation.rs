//! Tools that talk back: an MCP server asks the person for input in the middle of a
//! tool call (elicitation, in the 2025-11-25 protocol by a request, in 2026-07-28 by
//! an `input_required` result) and reports its progress. A small rmcp server, made
//! here, stands for any MCP server; the person answers over the chat API.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use maitred::settings::RedisSettings;
use maitred::settings::mcp_servers::ServerConfig;
use maitred_scripted_llm::{Script, ToolCallSpec, Turn};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientResult, ContentBlock,
    DiscoverRequestMethod, DiscoverResult, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationSchema, InputRequest, InputRequests, InputRequiredResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion, ServerCapabilities,
    ServerConfig as McpServerConfig, ServerRequest, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::browser::Browser;
use crate::helpers::{Database, Llm, SseEvent, SseReader, TestApp, of, serve};

/// Which protocol revision the test server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Revision {
    /// 2025-11-25 only: `initialize`, and requests to the client during a call.
    Legacy,
    /// 2026-07-28: `server/discover`, and `input_required` results.
    Modern,
    /// Knows `server/discover` (an rmcp server) but speaks only 2025-11-25.
    Restricted,
}
use Revision::{Legacy as LEGACY, Modern as MODERN};

/// What the test server was told, by tool call, in order.
type Seen = Arc<Mutex<Vec<Value>>>;

/// An MCP server whose tools ask the person (`reserve`: a form, `open_page`: a URL)
/// or report progress (`crunch`), in whichever protocol revision it speaks.
#[derive(Clone)]
struct Desk {
    revision: Revision,
    seen: Seen,
}

fn form() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 2},
            "party": {"type": "integer", "minimum": 1, "maximum": 12}
        },
        "required": ["name", "party"]
    })
}

fn asking(caller: &str) -> ElicitRequestParams {
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!("Whose table is it, and for how many? (asked by {caller})"),
        requested_schema: serde_json::from_value::<ElicitationSchema>(form()).unwrap(),
    }
}

fn page() -> ElicitRequestParams {
    ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message: "Pay the deposit".into(),
        url: "https://pay.example.com/deposit/42".into(),
        elicitation_id: "deposit-42".into(),
    }
}

fn result(value: Value) -> CallToolResponse {
    let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
    result.structured_content = Some(value);
    result.into()
}

impl Desk {
    fn modern(ctx: &RequestContext<RoleServer>) -> bool {
        ctx.meta
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
    }

    /// Asks, the way the connection's protocol does; the person's answer.
    async fn ask(
        &self,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
        params: ElicitRequestParams,
    ) -> Result<Result<ElicitResult, CallToolResponse>, ErrorData> {
        if Self::modern(ctx) {
            if let Some(answer) = request.input_responses.as_ref().and_then(|r| r.get("q")) {
                assert_eq!(request.request_state.as_deref(), Some("asked-once"));
                return Ok(Ok(serde_json::from_value(answer.clone()).unwrap()));
            }
            let mut requests = InputRequests::new();
            requests.insert(
                "q".to_owned(),
                InputRequest::Elicitation(ElicitRequest::new(params)),
            );
            return Ok(Err(InputRequiredResult::new(
                Some(requests),
                Some("asked-once".to_owned()),
            )
            .into()));
        }
        // The request rides the call's own response stream, as rmcp sends it.
        let answer = ctx
            .peer
            .send_request(ServerRequest::ElicitRequest(ElicitRequest::new(params)))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        match answer {
            ClientResult::ElicitResult(answer) => Ok(Ok(answer)),
            other => panic!("not an elicitation result: {other:?}"),
        }
    }

    fn caller(request: &CallToolRequestParams) -> String {
        request
            .arguments
            .as_ref()
            .and_then(|a| a.get("caller"))
            .and_then(Value::as_str)
            .unwrap_or("nobody")
            .to_owned()
    }
}

impl ServerHandler for Desk {
    fn get_info(&self) -> McpServerConfig {
        McpServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        match self.revision {
            Revision::Restricted => Cow::Borrowed(&[ProtocolVersion::V_2025_11_25]),
            _ => Cow::Borrowed(&[ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2025_11_25]),
        }
    }

    /// A server of the 2025-11-25 era does not know `server/discover`: the client then
    /// falls back to `initialize`, and the connection speaks 2025-11-25.
    async fn discover(
        &self,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        match self.revision {
            Revision::Legacy => Err(ErrorData::method_not_found::<DiscoverRequestMethod>()),
            Revision::Modern | Revision::Restricted => Ok(DiscoverResult::from_server_info(
                self.supported_protocol_versions().into_owned(),
                self.get_info(),
            )),
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({"type": "object", "properties": {"caller": {"type": "string"}}});
        let schema = Arc::new(schema.as_object().unwrap().clone());
        Ok(ListToolsResult::with_all_items(
            ["reserve", "open_page", "crunch", "stray", "nag"]
                .into_iter()
                .map(|name| Tool::new(name, format!("The {name} tool"), schema.clone()))
                .collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let answer = match request.name.as_ref() {
            "reserve" => {
                self.ask(&request, &ctx, asking(&Self::caller(&request)))
                    .await?
            }
            // Asks outside of the call's own stream: a task of its own leaves the
            // request's scope, so rmcp sends it on the session's standalone stream,
            // which says nothing of whose call it is.
            "stray" => {
                let peer = ctx.peer.clone();
                let params = asking(&Self::caller(&request));
                let sent = tokio::spawn(async move {
                    peer.send_request(ServerRequest::ElicitRequest(ElicitRequest::new(params)))
                        .await
                })
                .await
                .unwrap();
                let told = match sent {
                    Ok(ClientResult::ElicitResult(answer)) => json!({"answer": answer}),
                    Ok(other) => json!({"unexpected": format!("{other:?}")}),
                    Err(error) => json!({"error": error.to_string()}),
                };
                self.seen.lock().unwrap().push(told.clone());
                return Ok(result(told));
            }
            "open_page" => self.ask(&request, &ctx, page()).await?,
            // Never done: only ever more state to echo (2026-07-28).
            "nag" => {
                self.seen
                    .lock()
                    .unwrap()
                    .push(json!({"round": request.request_state}));
                return Ok(InputRequiredResult::from_request_state("again").into());
            }
            "crunch" => {
                let token = ctx.meta.get_progress_token().expect("a progress token");
                for step in 1..=20 {
                    let report = ProgressNotificationParam::new(token.clone(), f64::from(step))
                        .with_total(20.0)
                        .with_message(format!("step {step}"));
                    ctx.peer.notify_progress(report).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                return Ok(result(json!({"crunched": 20})));
            }
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        };
        let answer = match answer {
            Ok(answer) => answer,
            Err(input_required) => return Ok(input_required),
        };
        let protocol = if Self::modern(&ctx) {
            "2026-07-28"
        } else {
            "2025-11-25"
        };
        let told =
            json!({"caller": Self::caller(&request), "answer": answer, "protocol": protocol});
        self.seen.lock().unwrap().push(told.clone());
        Ok(result(told))
    }
}

/// Serves a [`Desk`] on a free port; its `/mcp` URL and what it was told.
async fn desk(revision: Revision) -> (String, Seen) {
    let seen = Seen::default();
    let server = Desk {
        revision,
        seen: seen.clone(),
    };
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().route_service("/mcp", service);
    (format!("{}/mcp", serve(router).await), seen)
}

fn desk_config(url: &str) -> ServerConfig {
    serde_json::from_value(json!({
        "name": "desk",
        "url": url,
        "timeout": 5,
        // Asking is not changing: these tools need no approval.
        "read_only_tools": ["*"],
    }))
    .unwrap()
}

/// Each question: the model calls `tool` once, then answers.
fn calls(tool: &str, questions: usize) -> Script {
    Script::new((0..questions).flat_map(|i| {
        [
            Turn::tool_calls([ToolCallSpec::new(
                format!("call_{i}"),
                format!("desk__{tool}"),
                json!({"caller": format!("question {i}")}).to_string(),
            )]),
            Turn::text(format!("Done {i}.")),
        ]
    }))
}

async fn spawn(
    versions: Revision,
    script: Script,
    tweak: impl FnOnce(&mut maitred::settings::Settings),
) -> (TestApp, Seen) {
    spawn_on(&Database::Sqlite, versions, script, tweak).await
}

async fn spawn_on(
    database: &Database,
    versions: Revision,
    script: Script,
    tweak: impl FnOnce(&mut maitred::settings::Settings),
) -> (TestApp, Seen) {
    let (url, seen) = desk(versions).await;
    let app = TestApp::spawn_chat(database, Llm::Scripted(script), |s| {
        s.gateway.file.mcp_servers = vec![desk_config(&url)];
        tweak(s);
    })
    .await;
    (app, seen)
}

/// A token of the gateway's issuer for the person `sub`.
async fn person(app: &TestApp, sub: &str) -> String {
    let (kid, private): (String, String) =
        sqlx::query_as("SELECT kid, private_key FROM signing_keys LIMIT 1")
            .fetch_one(app.db.pool())
            .await
            .unwrap();
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
    header.kid = Some(kid);
    let now = chrono::Utc::now().timestamp();
    let der = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, private).unwrap();
    jsonwebtoken::encode(
        &header,
        &json!({
            "iss": app.url, "sub": sub, "aud": app.settings.gateway_resource(),
            "exp": now + 600, "iat": now, "scope": "chat.read chat.write"
        }),
        &jsonwebtoken::EncodingKey::from_ed_der(&der),
    )
    .unwrap()
}

async fn answer_input(
    app: &TestApp,
    base: &str,
    token: &str,
    id: &str,
    body: Value,
) -> (u16, Value) {
    let response = app
        .http
        .post(format!("{base}/api/v1/resos/chat/inputs/{id}"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The gateway's `maitred_gateway_inputs_waiting` gauge.
async fn inputs_waiting(app: &TestApp) -> f64 {
    let text = app
        .http
        .get(format!("{}/metrics", app.gateway_url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix("maitred_gateway_inputs_waiting "))
        .and_then(|value| value.trim().parse().ok())
        .expect("the gauge is exported")
}

fn only<'a>(events: &'a [SseEvent], name: &str) -> &'a Value {
    let found = of(events, name);
    assert_eq!(found.len(), 1, "one {name} in {events:?}");
    found[0]
}

/// The person is asked for a form; a wrong answer is refused and the request stays
/// open; the right one reaches the server, and is kept with the call.
async fn a_form_is_answered(database: &Database, versions: Revision) {
    let (app, seen) = spawn_on(database, versions, calls("reserve", 1), |_| {}).await;
    let ada = person(&app, "ada").await;
    let mut stream = app.ask(&ada, "A table, please", None).await;
    let before = stream.until("input_required").await;
    let call = only(&before, "tool_call");
    let asked = before.last().unwrap().data.clone();
    let id = asked["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("in_") && id.len() == 35, "{id}");
    assert_eq!(asked["tool_call_id"], call["id"]);
    assert_eq!(asked["server"], "desk");
    assert_eq!(asked["tool"], "reserve");
    assert_eq!(asked["mode"], "form");
    assert_eq!(asked["schema"]["properties"]["party"]["maximum"], 12);
    assert!(asked["message"].as_str().unwrap().contains("question 0"));
    assert!(asked.get("url").is_none());
    assert!(asked["expires_at"].is_string());

    assert_eq!(inputs_waiting(&app).await, 1.0, "counted while it waits");
    let gateway = &app.gateway_url;
    let bob = person(&app, "bob").await;
    let (status, _) = answer_input(
        &app,
        gateway,
        &bob,
        &id,
        json!({"action": "accept", "content": {"name": "Bob", "party": 2}}),
    )
    .await;
    assert_eq!(status, 404, "only the asker can answer");

    let (status, body) = answer_input(
        &app,
        gateway,
        &ada,
        &id,
        json!({"action": "accept", "content": {"name": "A", "party": 40}}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "INVALID_REQUEST");
    let problems = body["details"]["problems"].as_array().unwrap();
    assert!(
        problems.contains(&json!("party: must be at most 12")),
        "{body}"
    );
    assert!(
        problems.contains(&json!("name: must be at least 2 characters long")),
        "{body}"
    );
    let (status, body) = answer_input(&app, gateway, &ada, &id, json!({"action": "accept"})).await;
    assert_eq!(status, 400, "accept of a form needs content: {body}");

    let (status, body) = answer_input(
        &app,
        gateway,
        &ada,
        &id,
        json!({"action": "accept", "content": {"name": "Ada", "party": 4}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"id": id, "status": "accepted"}));
    let rest = stream.rest().await;
    assert_eq!(
        *only(&rest, "input_resolved"),
        json!({"id": id, "action": "accept"})
    );
    assert_eq!(only(&rest, "tool_result")["status"], "ok");
    let told = seen.lock().unwrap().clone();
    assert_eq!(
        told,
        vec![json!({
            "caller": "question 0",
            "answer": {"action": "accept", "content": {"name": "Ada", "party": 4}},
            "protocol": if versions == MODERN { "2026-07-28" } else { "2025-11-25" },
        })]
    );
    let (status, _) = answer_input(&app, gateway, &ada, &id, json!({"action": "decline"})).await;
    assert_eq!(status, 404, "answered already");
    assert_eq!(inputs_waiting(&app).await, 0.0);
    // The stream as it went, for the documentation's example.
    for event in before.iter().chain(&rest) {
        let id = event.id.map(|n| n.to_string()).unwrap_or_default();
        println!("id: {id}\nevent: {}\ndata: {}\n", event.event, event.data);
    }

    let stored: (String, Option<String>, Option<String>, String) = sqlx::query_as(
        "SELECT status, content, decided_by, tool_call_id FROM tool_inputs WHERE id = $1",
    )
    .bind(&id)
    .fetch_one(app.db.pool())
    .await
    .unwrap();
    assert_eq!(stored.0, "accepted");
    assert_eq!(
        serde_json::from_str::<Value>(stored.1.as_deref().unwrap()).unwrap(),
        json!({"name": "Ada", "party": 4})
    );
    assert_eq!(stored.2.as_deref(), Some("ada"));
    assert_eq!(json!(stored.3), call["id"]);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_is_answered_in_the_2025_11_25_protocol() {
    Box::pin(a_form_is_answered(&Database::Sqlite, LEGACY)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_is_answered_in_the_2026_07_28_protocol() {
    Box::pin(a_form_is_answered(&Database::Sqlite, MODERN)).await;
}

/// An rmcp server limited to 2025-11-25 refuses `server/discover`'s version rather
/// than the method; the gateway then greets it the 2025-11-25 way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_is_answered_by_a_server_that_knows_discover_but_speaks_2025_11_25() {
    Box::pin(a_form_is_answered(&Database::Sqlite, Revision::Restricted)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_is_answered_on_postgresql() {
    if let Some(postgres) = Database::postgres() {
        Box::pin(a_form_is_answered(&postgres, LEGACY)).await;
    }
}

/// A decline goes back to the server as a decline; a URL request shows its page.
async fn a_page_is_declined(versions: Revision) {
    let (app, seen) = spawn(versions, calls("open_page", 1), |_| {}).await;
    let token = app.chat_token().await;
    let mut stream = app.ask(&token, "Pay it", None).await;
    let asked = stream
        .until("input_required")
        .await
        .last()
        .unwrap()
        .data
        .clone();
    assert_eq!(asked["mode"], "url");
    assert_eq!(asked["url"], "https://pay.example.com/deposit/42");
    assert!(asked.get("schema").is_none());
    let id = asked["id"].as_str().unwrap();
    let (status, body) = answer_input(
        &app,
        &app.gateway_url,
        &token,
        id,
        json!({"action": "decline"}),
    )
    .await;
    assert_eq!((status, body["status"].clone()), (200, json!("declined")));
    let rest = stream.rest().await;
    assert_eq!(only(&rest, "input_resolved")["action"], "decline");
    assert_eq!(
        seen.lock().unwrap()[0]["answer"],
        json!({"action": "decline"})
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_is_declined_in_both_protocols() {
    Box::pin(a_page_is_declined(LEGACY)).await;
    Box::pin(a_page_is_declined(MODERN)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_request_is_cancelled_after_the_timeout() {
    let (app, seen) = spawn(LEGACY, calls("reserve", 1), |s| {
        s.gateway.input_timeout = Duration::from_secs(1);
    })
    .await;
    let token = app.chat_token().await;
    let started = Instant::now();
    let events = app.ask(&token, "A table", None).await.rest().await;
    let waited = started.elapsed();
    let id = only(&events, "input_required")["id"].clone();
    assert_eq!(
        *only(&events, "input_resolved"),
        json!({"id": id, "action": "cancel"})
    );
    assert_eq!(
        seen.lock().unwrap()[0]["answer"],
        json!({"action": "cancel"})
    );
    assert!(waited >= Duration::from_secs(1), "{waited:?}");
    println!("an unanswered request was cancelled after {waited:?} (timeout 1 s)");
    let (status, _) = answer_input(
        &app,
        &app.gateway_url,
        &token,
        id.as_str().unwrap(),
        json!({"action": "cancel"}),
    )
    .await;
    assert_eq!(status, 404, "expired");
    app.stop().await;
}

/// Stopping the answer ends its open request: stored as cancelled, not shown again,
/// not answerable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_answer_ends_its_open_request() {
    let (app, seen) = spawn(LEGACY, calls("reserve", 1), |_| {}).await;
    let token = app.chat_token().await;
    let mut stream = app.ask(&token, "A table", None).await;
    let before = stream.until("input_required").await;
    let message = before[0].data["message_id"].as_str().unwrap().to_owned();
    let id = before.last().unwrap().data["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let stopped = app
        .gateway_post(
            &format!("/api/v1/resos/chat/{message}/cancel"),
            &token,
            &json!({}),
        )
        .await;
    assert_eq!(stopped.status(), 200);
    let rest = stream.rest().await;
    assert_eq!(rest.last().unwrap().data["finish_reason"], "cancelled");
    let (status,): (String,) = sqlx::query_as("SELECT status FROM tool_inputs WHERE id = $1")
        .bind(&id)
        .fetch_one(app.db.pool())
        .await
        .unwrap();
    assert_eq!(status, "cancelled");
    let again = app.watch(&token, &message, Some(0)).await.rest().await;
    assert_eq!(
        of(&again, "input_required").len(),
        1,
        "the log's own, not re-shown"
    );
    let body = json!({"action": "accept", "content": {"name": "Ada", "party": 2}});
    assert_eq!(
        answer_input(&app, &app.gateway_url, &token, &id, body)
            .await
            .0,
        404
    );
    // The server hears `cancel`, if it still listens (it was told the call is off).
    let told = seen.lock().unwrap().clone();
    assert!(
        told.iter()
            .all(|t| t["answer"] == json!({"action": "cancel"})),
        "{told:?}"
    );
    app.stop().await;
}

/// Coming back to the stream shows a request that is still open once: after it
/// (`Last-Event-ID` past it) as well as before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_stream_shows_an_open_request_exactly_once() {
    let (app, _seen) = spawn(LEGACY, calls("reserve", 1), |_| {}).await;
    let token = app.chat_token().await;
    let mut stream = app.ask(&token, "A table", None).await;
    let before = stream.until("input_required").await;
    let message = before[0].data["message_id"].as_str().unwrap().to_owned();
    let asked = before.last().unwrap();
    let seq = asked.id.unwrap();
    drop(stream);

    for last_seen in [seq, seq - 1, 0] {
        let mut again = app.watch(&token, &message, Some(last_seen)).await;
        let shown = again.until("input_required").await;
        assert_eq!(shown.last().unwrap().data, asked.data, "after {last_seen}");
        let shown_before = shown.iter().filter(|e| e.event == "input_required").count();
        assert_eq!(shown_before, 1);
        if last_seen == seq {
            assert_eq!(shown.len(), 1, "only the request, again");
            assert_eq!(
                shown[0].id, None,
                "a re-shown request does not move Last-Event-ID"
            );
        } else {
            assert_eq!(shown.last().unwrap().id, Some(seq));
        }
        // Nothing else shows it again while it waits.
        let quiet = tokio::time::timeout(Duration::from_millis(300), again.next()).await;
        assert!(quiet.is_err(), "{quiet:?}");
    }
    let id = asked.data["id"].as_str().unwrap();
    let (status, _) = answer_input(
        &app,
        &app.gateway_url,
        &token,
        id,
        json!({"action": "accept", "content": {"name": "Ada", "party": 2}}),
    )
    .await;
    assert_eq!(status, 200);
    let mut after = app.watch(&token, &message, Some(seq)).await;
    let rest = after.rest().await;
    assert!(
        of(&rest, "input_required").is_empty(),
        "answered: not shown again"
    );
    assert_eq!(only(&rest, "input_resolved")["action"], "accept");
    app.stop().await;
}

/// Progress arrives in order, at most 4 events a second, the last value before the result.
async fn progress_is_paced(versions: Revision) {
    let (app, _seen) = spawn(versions, calls("crunch", 1), |_| {}).await;
    let token = app.chat_token().await;
    let mut stream = app.ask(&token, "Crunch", None).await;
    let mut arrivals = Vec::new();
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        if event.event == "tool_progress" {
            arrivals.push(Instant::now());
        }
        let done = event.event == "done";
        events.push(event);
        if done {
            break;
        }
    }
    let progress = of(&events, "tool_progress");
    let call = only(&events, "tool_call")["id"].clone();
    let values: Vec<f64> = progress
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "in order: {values:?}"
    );
    assert_eq!(
        values.last(),
        Some(&20.0),
        "the latest value arrives: {values:?}"
    );
    assert!(
        progress
            .iter()
            .all(|p| p["id"] == call && p["total"] == 20.0)
    );
    assert_eq!(progress.last().unwrap()["message"], "step 20");
    // 20 reports in about half a second: a few shown, most dropped.
    assert!(values.len() >= 2 && values.len() <= 6, "{values:?}");
    let span = arrivals.last().unwrap().duration_since(arrivals[0]);
    assert!(
        span.as_secs_f64() >= 0.2 * (values.len() - 1) as f64,
        "{} events in {span:?}",
        values.len()
    );
    let progress_at = events
        .iter()
        .rposition(|e| e.event == "tool_progress")
        .unwrap();
    let result_at = events
        .iter()
        .position(|e| e.event == "tool_result")
        .unwrap();
    assert!(progress_at < result_at);
    println!("{versions:?}: 20 progress reports shown as {values:?} over {span:?}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_paced_in_the_2025_11_25_protocol() {
    Box::pin(progress_is_paced(LEGACY)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_paced_in_the_2026_07_28_protocol() {
    Box::pin(progress_is_paced(MODERN)).await;
}

/// Two people's calls wait on the same server (one MCP connection) at once: each
/// sees only their own request, answering one does not answer the other, and each
/// answer reaches its own call.
async fn two_people_never_see_each_others_requests(versions: Revision) {
    // Both questions' first turns call the tool before either answers.
    let call = |i: usize| {
        Turn::tool_calls([ToolCallSpec::new(
            format!("call_{i}"),
            "desk__reserve",
            json!({"caller": format!("question {i}")}).to_string(),
        )])
    };
    let script = Script::new([call(0), call(1), Turn::text("Done."), Turn::text("Done.")]);
    let (app, seen) = spawn(versions, script, |_| {}).await;
    let ada = person(&app, "ada").await;
    let bob = person(&app, "bob").await;
    let mut ada_stream = app.ask(&ada, "A table for Ada", None).await;
    let ada_before = ada_stream.until("input_required").await;
    let mut bob_stream = app.ask(&bob, "A table for Bob", None).await;
    let bob_before = bob_stream.until("input_required").await;
    let ada_asked = ada_before.last().unwrap().data.clone();
    let bob_asked = bob_before.last().unwrap().data.clone();
    assert_eq!(
        ada_asked["tool_call_id"],
        only(&ada_before, "tool_call")["id"]
    );
    assert_eq!(
        bob_asked["tool_call_id"],
        only(&bob_before, "tool_call")["id"]
    );
    assert!(
        ada_asked["message"]
            .as_str()
            .unwrap()
            .contains("question 0")
    );
    assert!(
        bob_asked["message"]
            .as_str()
            .unwrap()
            .contains("question 1")
    );
    let (ada_id, bob_id) = (
        ada_asked["id"].as_str().unwrap(),
        bob_asked["id"].as_str().unwrap(),
    );
    let gateway = &app.gateway_url;
    // Neither can answer the other's.
    let fill = |name: &str| json!({"action": "accept", "content": {"name": name, "party": 2}});
    assert_eq!(
        answer_input(&app, gateway, &ada, bob_id, fill("Ada"))
            .await
            .0,
        404
    );
    assert_eq!(
        answer_input(&app, gateway, &bob, ada_id, fill("Bob"))
            .await
            .0,
        404
    );
    // Bob answers first, though Ada was asked first.
    assert_eq!(
        answer_input(&app, gateway, &bob, bob_id, fill("Bob"))
            .await
            .0,
        200
    );
    let bob_rest = bob_stream.rest().await;
    assert_eq!(only(&bob_rest, "input_resolved")["id"], bob_asked["id"]);
    let quiet = tokio::time::timeout(Duration::from_millis(300), ada_stream.next()).await;
    assert!(quiet.is_err(), "Ada's call still waits: {quiet:?}");
    assert_eq!(
        answer_input(&app, gateway, &ada, ada_id, fill("Ada"))
            .await
            .0,
        200
    );
    let ada_rest = ada_stream.rest().await;
    for (events, other) in [(&ada_rest, bob_id), (&bob_rest, ada_id)] {
        assert!(
            events.iter().all(|e| !e.data.to_string().contains(other)),
            "{other} leaked into {events:?}"
        );
    }
    assert!(
        ada_before
            .iter()
            .all(|e| !e.data.to_string().contains(bob_id))
    );
    let told = seen.lock().unwrap().clone();
    let by_caller = |caller: &str| {
        told.iter()
            .find(|t| t["caller"] == caller)
            .map(|t| t["answer"]["content"]["name"].clone())
    };
    assert_eq!(by_caller("question 0"), Some(json!("Ada")));
    assert_eq!(by_caller("question 1"), Some(json!("Bob")));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_people_never_see_each_others_requests_in_the_2025_11_25_protocol() {
    Box::pin(two_people_never_see_each_others_requests(LEGACY)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_people_never_see_each_others_requests_in_the_2026_07_28_protocol() {
    Box::pin(two_people_never_see_each_others_requests(MODERN)).await;
}

/// A request that comes on no call's stream cannot be told apart: it is declined,
/// and nobody is shown it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_outside_of_any_calls_stream_is_declined_unseen() {
    let (app, seen) = spawn(LEGACY, calls("stray", 1), |_| {}).await;
    let token = app.chat_token().await;
    let events = app.ask(&token, "Stray", None).await.rest().await;
    assert!(of(&events, "input_required").is_empty(), "{events:?}");
    assert_eq!(only(&events, "tool_result")["status"], "ok");
    let told = seen.lock().unwrap().clone();
    assert_eq!(told, vec![json!({"answer": {"action": "decline"}})]);
    let shown: (i64,) = sqlx::query_as("SELECT COUNT(*) FROM tool_inputs")
        .fetch_one(app.db.pool())
        .await
        .unwrap();
    assert_eq!(shown.0, 0);
    app.stop().await;
}

/// A 2026-07-28 server that keeps answering `input_required` gets a few rounds, then
/// the call ends as an error the model is told about.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_finishes_its_rounds_is_given_up_on() {
    let (app, seen) = spawn(MODERN, calls("nag", 1), |_| {}).await;
    let token = app.chat_token().await;
    let events = app.ask(&token, "Nag", None).await.rest().await;
    let result = only(&events, "tool_result");
    assert_eq!(result["status"], "error", "{result}");
    assert!(
        result["summary"]
            .as_str()
            .unwrap()
            .contains("more than 4 times"),
        "{result}"
    );
    let rounds = seen.lock().unwrap().clone();
    assert_eq!(rounds.len(), 5, "the first request and 4 more: {rounds:?}");
    assert_eq!(rounds[0], json!({"round": null}));
    assert!(rounds[1..].iter().all(|r| r == &json!({"round": "again"})));
    app.stop().await;
}

/// In the browser, an answer is a write like any other: it needs the session's CSRF
/// token, exactly as an approval does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_answer_needs_the_csrf_token() {
    let (app, seen) = spawn(LEGACY, calls("reserve", 1), |_| {}).await;
    let user = Browser::new().sign_in(&app, "user").await;
    let post = |path: String| user.browser.http.post(format!("{}{path}", app.gateway_url));
    let response = post("/api/v1/resos/stream/chat".to_owned())
        .header("x-csrf-token", &user.csrf)
        .json(&json!({"question": "A table"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = SseReader::new(response);
    let asked = stream
        .until("input_required")
        .await
        .last()
        .unwrap()
        .data
        .clone();
    let path = format!(
        "/api/v1/resos/chat/inputs/{}",
        asked["id"].as_str().unwrap()
    );
    let body = json!({"action": "accept", "content": {"name": "Ada", "party": 2}});
    let forged = post(path.clone()).json(&body).send().await.unwrap();
    assert_eq!(forged.status(), 403, "no CSRF token");
    let answered = post(path)
        .header("x-csrf-token", &user.csrf)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 200);
    let rest = stream.rest().await;
    assert_eq!(only(&rest, "input_resolved")["action"], "accept");
    assert_eq!(seen.lock().unwrap()[0]["answer"]["content"]["name"], "Ada");
    app.stop().await;
}

/// Nobody can answer on the OpenAI-compatible API: the server hears a decline at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_api_declines_every_request_at_once() {
    let (app, seen) = spawn(LEGACY, calls("reserve", 1), |_| {}).await;
    let token = app.chat_token().await;
    let started = Instant::now();
    let response = app
        .http
        .post(format!("{}/v1/chat/completions", app.gateway_url))
        .bearer_auth(&token)
        .json(&json!({"model": "maitred", "messages": [{"role": "user", "content": "A table"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "Done 0.");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        seen.lock().unwrap()[0]["answer"],
        json!({"action": "decline"})
    );
    let open: (i64,) = sqlx::query_as("SELECT COUNT(*) FROM tool_inputs")
        .fetch_one(app.db.pool())
        .await
        .unwrap();
    assert_eq!(open.0, 0, "nothing was shown to anyone");
    app.stop().await;
}

/// Two gateways share the database and Redis: the answer runs on the first, the
/// person answers on the second, and the call goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_is_answered_through_another_replica() {
    let Some(url) = shared_redis().await else {
        return;
    };
    // Keys of their own, so the test shares a Redis with anything else.
    let prefix = format!("maitred-test-elicit-{}", uuid::Uuid::now_v7().simple());
    let redis = RedisSettings {
        url: url.into(),
        prefix: prefix.clone(),
    };
    let (app, seen) = spawn(LEGACY, calls("reserve", 1), |s| {
        s.gateway.redis = Some(redis.clone());
    })
    .await;
    let second = second_gateway(&app).await;
    let token = app.chat_token().await;
    let mut stream = app.ask(&token, "A table", None).await;
    let asked = stream
        .until("input_required")
        .await
        .last()
        .unwrap()
        .data
        .clone();
    let id = asked["id"].as_str().unwrap();
    let started = Instant::now();
    let (status, body) = answer_input(
        &app,
        &second.url,
        &token,
        id,
        json!({"action": "accept", "content": {"name": "Ada", "party": 3}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let rest = stream.rest().await;
    let woke = started.elapsed();
    assert_eq!(only(&rest, "input_resolved")["action"], "accept");
    assert_eq!(seen.lock().unwrap()[0]["answer"]["content"]["party"], 3);
    // Woken over the control channel, not by the 2 s poll.
    assert!(woke < Duration::from_millis(1500), "{woke:?}");
    println!("answered on the other replica; the call went on after {woke:?}");
    second.stop().await;
    app.stop().await;
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
    eprintln!("no Redis at {url}: skipping the two-replica test");
    None
}

struct Gateway {
    url: String,
    app: maitred::app::App,
    _data_dir: tempfile::TempDir,
}

impl Gateway {
    async fn stop(self) {
        self.app.stop().await;
    }
}

/// A second gateway replica beside `app`'s: its own port and data dir, the same
/// database, Redis, issuer, public URL (tokens are for it) and model.
async fn second_gateway(app: &TestApp) -> Gateway {
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
    Gateway {
        url: format!("http://127.0.0.1:{}", app.settings().gateway.endpoint.port),
        app,
        _data_dir: dir,
    }
}
