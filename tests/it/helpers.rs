//! The test app: the backend role started in-process on port 0 with its own data
//! directory and its own database (a SQLite file, or a fresh PostgreSQL schema).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use maitred::app::{App, Bound, Role};
use maitred::db::Db;
use maitred::identity::dev::DevCredentials;
use maitred::settings::mcp_servers::ServerConfig;
use maitred::settings::{LlmSettings, Settings, sqlite_url};
use maitred_scripted_llm::{Script, ScriptedLlm};
use secrecy::SecretString;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Logs go to the test's captured output: shown when a test fails, silent otherwise.
fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn,rmcp=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// Which database a test runs against.
#[derive(Clone, Debug)]
pub(crate) enum Database {
    Sqlite,
    Postgres(String),
}

impl Database {
    /// PostgreSQL from `TEST_DATABASE_URL`; CI must have it, a laptop may not.
    pub(crate) fn postgres() -> Option<Self> {
        match std::env::var("TEST_DATABASE_URL") {
            Ok(url) if !url.is_empty() => Some(Self::Postgres(url)),
            _ if std::env::var("CI").is_ok_and(|v| v == "true") => {
                panic!("CI must set TEST_DATABASE_URL so the PostgreSQL tests run")
            }
            _ => {
                eprintln!("TEST_DATABASE_URL is not set: skipping the PostgreSQL variant");
                None
            }
        }
    }

    pub(crate) async fn url(&self, data_dir: &std::path::Path) -> String {
        match self {
            Self::Sqlite => sqlite_url(&data_dir.join("maitred.db")),
            Self::Postgres(base) => {
                let admin = Db::connect(base)
                    .await
                    .expect("connect to TEST_DATABASE_URL");
                let now = chrono::Utc::now().timestamp();
                // Schemas of runs that died midway are swept after an hour.
                let old: Vec<(String,)> = sqlx::query_as(
                    "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'maitred_test_%'",
                )
                .fetch_all(admin.pool())
                .await
                .expect("list test schemas");
                for (schema,) in old {
                    let created = schema
                        .split('_')
                        .nth(2)
                        .and_then(|t| t.parse::<i64>().ok())
                        .unwrap_or(now);
                    if now - created > 3600 {
                        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                            "DROP SCHEMA IF EXISTS {schema} CASCADE"
                        )))
                        .execute(admin.pool())
                        .await;
                    }
                }
                let schema = format!(
                    "maitred_test_{now}_{}",
                    // The random end of a v7 id: its start is the time, shared by
                    // tests that begin in the same millisecond.
                    uuid::Uuid::now_v7()
                        .simple()
                        .to_string()
                        .get(20..)
                        .unwrap_or("x")
                );
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
                    .execute(admin.pool())
                    .await
                    .expect("create a test schema");
                admin.close().await;
                let separator = if base.contains('?') { '&' } else { '?' };
                format!("{base}{separator}options=-c%20search_path%3D{schema}")
            }
        }
    }
}

pub(crate) struct TestApp {
    /// The backend role's base URL (also the issuer).
    pub url: String,
    pub api: String,
    /// The MCP endpoint, `<mcp role>/mcp`.
    pub mcp_url: String,
    /// The gateway's base URL.
    pub gateway_url: String,
    /// The scripted LLM the gateway talks to, when the test gave a script.
    pub llm: Option<ScriptedLlm>,
    pub http: reqwest::Client,
    pub settings: Settings,
    pub db: Db,
    data_dir: Arc<tempfile::TempDir>,
    /// The roles, wired as `main` wires them.
    app: Option<App>,
}

/// The gateway's model in a test.
pub(crate) enum Llm {
    Offline,
    Scripted(Script),
    /// An upstream already started (one that answers each request as it chooses).
    Started(ScriptedLlm),
}

/// maitred's own MCP role as the gateway's configured server `name` (a tweak can
/// then mark it read-only or point it elsewhere): its dev secret is made now.
pub(crate) fn own_mcp_server(settings: &Settings, name: &str) -> ServerConfig {
    let credentials = DevCredentials::load_or_create(&settings.data_dir).expect("dev credentials");
    let secret = credentials
        .client_secret("maitred-gateway")
        .map(SecretString::from)
        .expect("a dev secret for maitred-gateway");
    ServerConfig {
        name: name.to_owned(),
        url: settings.mcp_resource(),
        timeout: Duration::from_secs(5),
        ..maitred::gateway::own_mcp_server(settings, secret)
    }
}

/// Dev-mode settings on free loopback ports, with the limits tests would trip.
pub(crate) fn test_settings(data_dir: PathBuf, database_url: String) -> Settings {
    let mut settings = Settings::local(data_dir, database_url);
    settings.identity.rate_limit_per_minute = 10_000;
    settings.mcp.backend_timeout = Duration::from_secs(2);
    settings.gateway.offline_fragment_delay = Duration::ZERO;
    // Quick retries, so tests of them do not wait for production back-offs.
    settings.gateway.file.resilience.backoff = Duration::from_millis(10);
    settings.gateway.file.resilience.backoff_max = Duration::from_millis(50);
    settings
}

impl TestApp {
    pub(crate) async fn spawn(database: &Database) -> Self {
        Self::spawn_with(database, |_| {}).await
    }

    pub(crate) async fn spawn_with(database: &Database, tweak: impl FnOnce(&mut Settings)) -> Self {
        Self::spawn_chat(database, Llm::Offline, tweak).await
    }

    /// All three roles; the gateway answers with `llm`.
    pub(crate) async fn spawn_chat(
        database: &Database,
        llm: Llm,
        tweak: impl FnOnce(&mut Settings),
    ) -> Self {
        init_logs();
        let data_dir = Arc::new(tempfile::tempdir().expect("temp dir"));
        let database_url = database.url(data_dir.path()).await;
        let settings = test_settings(data_dir.path().to_owned(), database_url);
        let mut bound = App::bind(settings, Role::ALL)
            .await
            .expect("bind the roles");
        let llm = match llm {
            Llm::Offline => None,
            Llm::Scripted(script) => Some(ScriptedLlm::start(script).await.expect("scripted LLM")),
            Llm::Started(llm) => Some(llm),
        };
        if let Some(llm) = &llm {
            bound.settings.gateway.llm = Some(LlmSettings {
                base_url: llm.base_url(),
                api_key: Some("test-key".into()),
                model: "scripted".into(),
                temperature: None,
                max_tokens: None,
                tool_calls: Default::default(),
                profile: Default::default(),
            });
        }
        // After the model is set, so a tweak can add fallbacks on the same upstream.
        tweak(&mut bound.settings);
        let mut app = Self::start(bound, data_dir).await;
        app.llm = llm;
        app
    }

    async fn start(bound: Bound, data_dir: Arc<tempfile::TempDir>) -> Self {
        let app = bound
            .start(CancellationToken::new())
            .await
            .expect("start the roles");
        let settings = app.settings().clone();
        // Where the backend listens; its public URL may name another address.
        let url = format!("http://127.0.0.1:{}", settings.backend.endpoint.port);
        Self {
            api: format!("{url}/api/v1/resos"),
            mcp_url: settings.mcp_resource(),
            gateway_url: format!("http://127.0.0.1:{}", settings.gateway.endpoint.port),
            llm: None,
            url,
            http: maitred::http_client::new().unwrap(),
            db: app.db().expect("a database").clone(),
            settings,
            data_dir,
            app: Some(app),
        }
    }

    /// Stops every role and starts them again on the same ports, data dir and database.
    pub(crate) async fn restart(mut self) -> Self {
        let settings = self.settings.clone();
        let data_dir = self.data_dir.clone();
        let llm = self.llm.take();
        self.stop().await;
        let bound = App::bind(settings, Role::ALL)
            .await
            .expect("rebind the roles");
        let mut app = Self::start(bound, data_dir).await;
        app.llm = llm;
        app
    }

    fn app(&mut self) -> &mut App {
        self.app.as_mut().expect("a running app")
    }

    /// Stops the backend role alone (the MCP role keeps running).
    pub(crate) async fn stop_backend(&mut self) {
        self.app().stop_role(Role::Backend).await;
    }

    /// Starts the backend role again on its port.
    pub(crate) async fn start_backend(&mut self) {
        self.app()
            .start_role(Role::Backend)
            .await
            .expect("restart the backend");
    }

    /// Stops the MCP role alone.
    pub(crate) async fn stop_mcp(&mut self) {
        self.app().stop_role(Role::Mcp).await;
    }

    /// Starts the MCP role again on its port.
    pub(crate) async fn start_mcp(&mut self) {
        self.app()
            .start_role(Role::Mcp)
            .await
            .expect("restart the MCP role");
    }

    pub(crate) async fn stop(mut self) {
        if let Some(app) = self.app.take() {
            app.stop().await;
        }
        if let Some(llm) = self.llm.take() {
            llm.stop().await;
        }
    }

    pub(crate) fn data_dir(&self) -> &std::path::Path {
        self.data_dir.path()
    }

    pub(crate) fn credentials(&self) -> DevCredentials {
        DevCredentials::load(self.data_dir.path()).expect("dev credentials")
    }

    pub(crate) fn secret(&self, client: &str) -> String {
        self.credentials()
            .client_secret(client)
            .expect("a demo client")
            .to_owned()
    }

    /// A client-credentials token, or the error response as JSON.
    pub(crate) async fn try_token(&self, client: &str, form: &[(&str, &str)]) -> (u16, Value) {
        let mut fields = vec![("grant_type", "client_credentials")];
        fields.extend_from_slice(form);
        let response = self
            .http
            .post(format!("{}/oauth2/token", self.url))
            .basic_auth(client, Some(self.secret(client)))
            .form(&fields)
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.json().await.unwrap())
    }

    pub(crate) async fn token(&self, client: &str, form: &[(&str, &str)]) -> String {
        let (status, body) = self.try_token(client, form).await;
        assert_eq!(status, 200, "token request failed: {body}");
        body["access_token"].as_str().unwrap().to_owned()
    }

    /// A token for the backend with both scopes (the MCP server's client).
    pub(crate) async fn backend_token(&self) -> String {
        self.token("maitred-mcp", &[]).await
    }

    pub(crate) async fn get(&self, path: &str, token: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.api))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
    }

    pub(crate) async fn get_json(&self, path: &str, token: &str) -> Value {
        let response = self.get(path, token).await;
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        assert!(status.is_success(), "GET {path}: {status} {body}");
        body
    }

    pub(crate) async fn post_json(
        &self,
        path: &str,
        token: &str,
        body: &Value,
    ) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.api))
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .unwrap()
    }

    pub(crate) async fn put_json(
        &self,
        path: &str,
        token: &str,
        body: &Value,
    ) -> reqwest::Response {
        self.http
            .put(format!("{}{path}", self.api))
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .unwrap()
    }
}

/// Runs a test body once on SQLite and once on PostgreSQL (when available).
#[macro_export]
macro_rules! on_both_databases {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::$name(&$crate::helpers::Database::Sqlite).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    if let Some(database) = $crate::helpers::Database::postgres() {
                        super::$name(&database).await;
                    }
                }
            }
        )*
    };
}

/// One server-sent event.
#[derive(Debug, Clone)]
pub(crate) struct SseEvent {
    pub id: Option<u64>,
    pub event: String,
    pub data: Value,
}

/// Reads a `text/event-stream` response event by event.
pub(crate) struct SseReader {
    response: reqwest::Response,
    buffer: String,
}

impl SseReader {
    pub(crate) fn new(response: reqwest::Response) -> Self {
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next event (comments such as keep-alives skipped), or `None` at the end.
    pub(crate) async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut event = SseEvent {
                    id: None,
                    event: "message".into(),
                    data: Value::Null,
                };
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        event.id = v.trim().parse().ok();
                    } else if let Some(v) = line.strip_prefix("event:") {
                        event.event = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                if data.is_empty() {
                    continue;
                }
                event.data = serde_json::from_str(&data).unwrap_or(Value::String(data));
                return Some(event);
            }
            match tokio::time::timeout(Duration::from_secs(30), self.response.chunk()).await {
                Ok(Ok(Some(bytes))) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                Ok(_) => return None,
                Err(_) => panic!("no event within 30 s; so far: {:?}", self.buffer),
            }
        }
    }

    /// Every remaining event, up to and including `done`.
    pub(crate) async fn rest(&mut self) -> Vec<SseEvent> {
        let mut events = Vec::new();
        while let Some(event) = self.next().await {
            let done = event.event == "done";
            events.push(event);
            if done {
                break;
            }
        }
        events
    }

    /// Events until one named `name` (included).
    pub(crate) async fn until(&mut self, name: &str) -> Vec<SseEvent> {
        let mut events = Vec::new();
        while let Some(event) = self.next().await {
            let found = event.event == name;
            events.push(event);
            if found {
                return events;
            }
        }
        panic!("the stream ended without a {name} event: {events:?}");
    }
}

/// The text of every `token` event, joined.
pub(crate) fn answer(events: &[SseEvent]) -> String {
    events
        .iter()
        .filter(|e| e.event == "token")
        .map(|e| e.data["text"].as_str().unwrap_or_default())
        .collect()
}

impl TestApp {
    /// `POST /stream/chat` with a bearer token.
    /// Asks, approves the write the model asks for, and returns the answer's events.
    pub(crate) async fn ask_and_approve(&self, token: &str, question: &str) -> Vec<SseEvent> {
        let mut stream = self.ask(token, question, None).await;
        let mut events = stream.until("approval_required").await;
        let approval = events.last().unwrap().data.clone();
        let id = approval["id"].as_str().unwrap();
        let approved = self
            .gateway_post(
                &format!("/api/v1/resos/chat/approvals/{id}"),
                token,
                &serde_json::json!({ "approve": true }),
            )
            .await;
        assert_eq!(approved.status(), 200);
        events.extend(stream.rest().await);
        events
    }

    pub(crate) async fn ask(
        &self,
        token: &str,
        question: &str,
        conversation: Option<&str>,
    ) -> SseReader {
        let mut body = serde_json::json!({ "question": question });
        if let Some(id) = conversation {
            body["conversation_id"] = id.into();
        }
        let response = self
            .http
            .post(format!("{}/api/v1/resos/stream/chat", self.gateway_url))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            200,
            "ask: {}",
            response.text().await.unwrap_or_default()
        );
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        SseReader::new(response)
    }

    /// `GET /stream/chat/{message_id}`, after `last_seen` when given.
    pub(crate) async fn watch(
        &self,
        token: &str,
        message_id: &str,
        last_seen: Option<u64>,
    ) -> SseReader {
        let mut request = self
            .http
            .get(format!(
                "{}/api/v1/resos/stream/chat/{message_id}",
                self.gateway_url
            ))
            .bearer_auth(token);
        if let Some(id) = last_seen {
            request = request.header("last-event-id", id.to_string());
        }
        let response = request.send().await.unwrap();
        assert_eq!(
            response.status(),
            200,
            "watch: {}",
            response.text().await.unwrap_or_default()
        );
        SseReader::new(response)
    }

    /// The stored messages of a conversation, as the API returns them.
    pub(crate) async fn stored_messages(&self, token: &str, conversation: &str) -> Vec<Value> {
        let stored: Value = self
            .gateway_get(
                &format!("/api/v1/resos/conversations/{conversation}"),
                token,
            )
            .await
            .json()
            .await
            .unwrap();
        stored["messages"].as_array().cloned().unwrap_or_default()
    }

    /// Waits until the scripted upstream has no stream open (at most ~5 s).
    pub(crate) async fn upstream_idle(&self) -> bool {
        let llm = self.llm.as_ref().expect("a scripted LLM");
        for _ in 0..250 {
            if llm.open_streams() == 0 {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// A chat token, as `maitred token --client maitred-cli` gets one.
    pub(crate) async fn chat_token(&self) -> String {
        self.token("maitred-cli", &[]).await
    }

    pub(crate) async fn gateway_post(
        &self,
        path: &str,
        token: &str,
        body: &Value,
    ) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.gateway_url))
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .unwrap()
    }

    pub(crate) async fn gateway_get(&self, path: &str, token: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.gateway_url))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
    }
}

/// The data of the events called `name`, in order.
pub(crate) fn of<'a>(events: &'a [SseEvent], name: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e.event == name)
        .map(|e| &e.data)
        .collect()
}

/// Serves `router` on a free local port until the test ends; its base URL.
pub(crate) async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    url
}
