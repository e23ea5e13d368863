//! The test app: the backend role started in-process on port 0 with its own data
//! directory and its own database (a SQLite file, or a fresh PostgreSQL schema).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use maitred::cli::Mode;
use maitred::config::{Endpoint, FileConfig, Settings, sqlite_url};
use maitred::db::Db;
use maitred::identity::dev::DevCredentials;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Which database a test runs against.
#[derive(Clone, Debug)]
pub enum Database {
    Sqlite,
    Postgres(String),
}

impl Database {
    /// PostgreSQL from `TEST_DATABASE_URL`; CI must have it, a laptop may not.
    pub fn postgres() -> Option<Self> {
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

    async fn url(&self, data_dir: &std::path::Path) -> String {
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
                    uuid::Uuid::new_v4()
                        .simple()
                        .to_string()
                        .get(..12)
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

pub struct TestApp {
    pub url: String,
    pub api: String,
    pub http: reqwest::Client,
    pub settings: Settings,
    pub db: Db,
    data_dir: Arc<tempfile::TempDir>,
    shutdown: CancellationToken,
    server: JoinHandle<()>,
}

pub fn settings_for(data_dir: PathBuf, database_url: String, port: u16) -> Settings {
    let url = format!("http://127.0.0.1:{port}");
    Settings {
        mode: Mode::Dev,
        data_dir,
        database_url,
        bind: Ipv4Addr::LOCALHOST.into(),
        backend: Endpoint {
            port,
            public_url: url,
        },
        gateway: Endpoint::new(18081, Some("http://127.0.0.1:18081")).unwrap(),
        mcp: Endpoint::new(18082, Some("http://127.0.0.1:18082")).unwrap(),
        external_issuer: None,
        body_limit: 64 * 1024,
        auth_rate_limit_per_minute: 10_000,
        access_token_ttl: Duration::from_secs(900),
        file: FileConfig::default(),
    }
}

impl TestApp {
    pub async fn spawn(database: &Database) -> Self {
        Self::spawn_with(database, |_| {}).await
    }

    pub async fn spawn_with(database: &Database, tweak: impl FnOnce(&mut Settings)) -> Self {
        let data_dir = Arc::new(tempfile::tempdir().expect("temp dir"));
        let database_url = database.url(data_dir.path()).await;
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut settings = settings_for(data_dir.path().to_owned(), database_url, port);
        tweak(&mut settings);
        Self::start(settings, listener, data_dir).await
    }

    async fn start(
        settings: Settings,
        listener: TcpListener,
        data_dir: Arc<tempfile::TempDir>,
    ) -> Self {
        maitred::telemetry::init(maitred::cli::LogFormat::Text);
        let db = maitred::app::prepare_database(&settings)
            .await
            .expect("database");
        let http = maitred::http_client::new().unwrap();
        let (router, _banner) = maitred::app::backend_router(&settings, db.clone(), http.clone())
            .await
            .expect("backend router");
        let shutdown = CancellationToken::new();
        let server = tokio::spawn({
            let shutdown = shutdown.clone();
            async move {
                maitred::http::serve("backend", listener, router, shutdown)
                    .await
                    .expect("serve");
            }
        });
        let url = settings.backend.public_url.clone();
        Self {
            api: format!("{url}/api/v1/resos"),
            url,
            http,
            settings,
            db,
            data_dir,
            shutdown,
            server,
        }
    }

    /// Stops the server and starts it again on the same port, data dir and database.
    pub async fn restart(self) -> Self {
        let settings = self.settings.clone();
        let data_dir = self.data_dir.clone();
        self.stop().await;
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, settings.backend.port));
        let listener = TcpListener::bind(addr).await.expect("rebind the same port");
        Self::start(settings, listener, data_dir).await
    }

    pub async fn stop(self) {
        self.shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.server).await;
        self.db.close().await;
    }

    pub fn credentials(&self) -> DevCredentials {
        DevCredentials::load(self.data_dir.path()).expect("dev credentials")
    }

    pub fn secret(&self, client: &str) -> String {
        self.credentials()
            .client_secret(client)
            .expect("a demo client")
            .to_owned()
    }

    /// A client-credentials token, or the error response as JSON.
    pub async fn try_token(&self, client: &str, form: &[(&str, &str)]) -> (u16, Value) {
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

    pub async fn token(&self, client: &str, form: &[(&str, &str)]) -> String {
        let (status, body) = self.try_token(client, form).await;
        assert_eq!(status, 200, "token request failed: {body}");
        body["access_token"].as_str().unwrap().to_owned()
    }

    /// A token for the backend with both scopes (the MCP server's client).
    pub async fn backend_token(&self) -> String {
        self.token("maitred-mcp", &[]).await
    }

    pub async fn get(&self, path: &str, token: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.api))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
    }

    pub async fn get_json(&self, path: &str, token: &str) -> Value {
        let response = self.get(path, token).await;
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        assert!(status.is_success(), "GET {path}: {status} {body}");
        body
    }

    pub async fn post_json(&self, path: &str, token: &str, body: &Value) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.api))
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .unwrap()
    }

    pub async fn put_json(&self, path: &str, token: &str, body: &Value) -> reqwest::Response {
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
