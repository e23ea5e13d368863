//! The one wiring of the roles: `main` and the tests both bind with [`App::bind`],
//! adjust nothing or a setting, and [`Bound::start`]. Binding first lets port 0 pick
//! a free port and the public URLs follow it, before anything reads them.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::roles;
use crate::db::Db;
use crate::settings::{API_PREFIX, Mode, Settings};
use crate::{gateway, http, http_client, identity, mcp};

/// A role one process can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Backend,
    Mcp,
    Gateway,
}

impl Role {
    pub const ALL: &'static [Role] = &[Role::Backend, Role::Mcp, Role::Gateway];

    fn name(self) -> &'static str {
        match self {
            Role::Backend => "backend",
            Role::Mcp => "mcp",
            Role::Gateway => "gateway",
        }
    }
}

/// The listeners are bound and the settings know their ports; nothing runs yet.
pub struct Bound {
    pub settings: Settings,
    listeners: Vec<(Role, TcpListener)>,
}

/// The roles, running.
pub struct App {
    // Boxed: the app moves into `run` and `stop`, whose futures would otherwise
    // carry every setting inline.
    settings: Box<Settings>,
    db: Option<Db>,
    http: reqwest::Client,
    /// Ends the gateway, and with it everything when the process stops.
    shutdown: CancellationToken,
    /// Ends the backend and MCP roles: in one process only once the gateway's
    /// answers have ended, since those answers still call them.
    upstream: CancellationToken,
    /// The gateway's answers.
    tasks: TaskTracker,
    /// The roles' servers and the app's own watchers.
    servers: TaskTracker,
    running: Vec<Running>,
}

struct Running {
    role: Role,
    stop: CancellationToken,
    server: JoinHandle<anyhow::Result<()>>,
}

impl App {
    /// Binds a listener for each role on its port (0: any free port).
    pub async fn bind(mut settings: Settings, roles: &[Role]) -> anyhow::Result<Bound> {
        let mut listeners = Vec::new();
        for &role in roles {
            let listener =
                http::bind(SocketAddr::new(settings.bind, port(&settings, role))).await?;
            listeners.push((role, listener));
        }
        let bound = |role| {
            listeners
                .iter()
                .find(|(r, _)| *r == role)
                .and_then(|(_, l)| l.local_addr().ok())
                .map(|a| a.port())
        };
        settings.bound(bound(Role::Backend), bound(Role::Mcp), bound(Role::Gateway));
        Ok(Bound {
            settings,
            listeners,
        })
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The database, for the roles that have one (all but a lone MCP role).
    pub fn db(&self) -> Option<&Db> {
        self.db.as_ref()
    }

    /// Stops one role, as if its process had gone (the others keep running).
    pub async fn stop_role(&mut self, role: Role) {
        let Some(at) = self.running.iter().position(|r| r.role == role) else {
            return;
        };
        let running = self.running.remove(at);
        running.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), running.server).await;
    }

    /// Starts a stopped role again on its port.
    pub async fn start_role(&mut self, role: Role) -> anyhow::Result<()> {
        let listener = http::bind(SocketAddr::new(
            self.settings.bind,
            port(&self.settings, role),
        ))
        .await?;
        self.spawn(role, listener).await
    }

    /// Runs until the shutdown token is cancelled or a role fails; one role failing
    /// stops the others, since a half-running system is worse than none.
    pub async fn run(mut self) -> anyhow::Result<()> {
        let mut outcome = Ok(());
        let mut servers: Vec<_> = self.running.drain(..).map(|r| r.server).collect();
        while !servers.is_empty() {
            let (result, _, rest) = futures::future::select_all(servers).await;
            servers = rest;
            if let Err(error) = result.map_err(anyhow::Error::from).and_then(|r| r) {
                self.shutdown.cancel();
                self.upstream.cancel();
                outcome = Err(error);
            }
        }
        self.finish().await;
        outcome
    }

    /// Stops every role, the way a signal would.
    pub async fn stop(self) {
        self.shutdown.cancel();
        let _ = self.run().await;
    }

    /// Answers still being written get their grace period (then are interrupted) and
    /// a moment more to be stored.
    async fn finish(self) {
        self.tasks.close();
        if tokio::time::timeout(grace(&self.settings), self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("some answers were still running at shutdown");
        }
        self.upstream.cancel();
        if let Some(db) = self.db {
            db.close().await;
        }
    }

    async fn spawn(&mut self, role: Role, listener: TcpListener) -> anyhow::Result<()> {
        let stop = match role {
            Role::Gateway => self.shutdown.child_token(),
            Role::Backend | Role::Mcp => self.upstream.child_token(),
        };
        let router = self.router(role, stop.clone()).await?;
        let server = self.servers.spawn(http::serve(
            role.name(),
            listener,
            router,
            self.settings.timeouts,
            stop.clone(),
        ));
        self.running.push(Running { role, stop, server });
        Ok(())
    }

    async fn router(&self, role: Role, stop: CancellationToken) -> anyhow::Result<Router> {
        let settings = &self.settings;
        Ok(match role {
            Role::Backend => {
                let db = self.db.clone().context("the backend needs its database")?;
                let (router, banner) =
                    roles::backend_router(settings, db, self.http.clone()).await?;
                if let Some(banner) = banner {
                    identity::dev::print_banner(&banner, &settings.data_dir);
                }
                tracing::info!(
                    issuer = %settings.issuer(),
                    "backend role: resOS API at {}{API_PREFIX}, OpenAPI at /api-docs/openapi.json",
                    settings.backend.endpoint.public_url,
                );
                router
            }
            Role::Mcp => {
                let router = mcp::router(settings, self.http.clone(), stop)?;
                tracing::info!(
                    backend = %settings.mcp.backend_url,
                    "mcp role: MCP at {}, protected-resource metadata at {}/.well-known/oauth-protected-resource/mcp",
                    settings.mcp_resource(),
                    settings.mcp.endpoint.public_url,
                );
                router
            }
            Role::Gateway => {
                let db = self.db.clone().context("the gateway needs its database")?;
                let model = gateway::model(settings, http_client::streaming()?)?;
                let (router, _) =
                    gateway::router(settings, db, model, stop, self.tasks.clone()).await?;
                tracing::info!(
                    "gateway role: chat at {}{API_PREFIX}/stream/chat, browser login at {}/login",
                    settings.gateway.endpoint.public_url,
                    settings.gateway.endpoint.public_url,
                );
                router
            }
        })
    }
}

impl Bound {
    /// Opens the database (migrated; seeded in dev mode by a process with the
    /// backend) and starts every bound role; `shutdown` stops them all.
    pub async fn start(self, shutdown: CancellationToken) -> anyhow::Result<App> {
        let settings = self.settings;
        settings.check()?;
        if settings.mode == Mode::Production && settings.database_url().starts_with("sqlite:") {
            tracing::warn!(
                "production mode on SQLite: fine for one process, use PostgreSQL to scale out"
            );
        }
        let runs = |role| self.listeners.iter().any(|(r, _)| *r == role);
        let db = if runs(Role::Backend) || runs(Role::Gateway) {
            Some(roles::open_database(&settings, runs(Role::Backend)).await?)
        } else {
            None
        };
        let tasks = TaskTracker::new();
        let servers = TaskTracker::new();
        let upstream = if runs(Role::Gateway) && (runs(Role::Backend) || runs(Role::Mcp)) {
            let upstream = CancellationToken::new();
            servers.spawn({
                let (shutdown, upstream, tasks) =
                    (shutdown.clone(), upstream.clone(), tasks.clone());
                let grace = grace(&settings);
                async move {
                    shutdown.cancelled().await;
                    tasks.close();
                    let _ = tokio::time::timeout(grace, tasks.wait()).await;
                    upstream.cancel();
                }
            });
            upstream
        } else {
            shutdown.clone()
        };
        let mut app = App {
            settings: Box::new(settings),
            db,
            http: http_client::new()?,
            shutdown,
            upstream,
            tasks,
            servers,
            running: Vec::new(),
        };
        for (role, listener) in self.listeners {
            app.spawn(role, listener).await?;
        }
        Ok(app)
    }
}

fn port(settings: &Settings, role: Role) -> u16 {
    match role {
        Role::Backend => settings.backend.endpoint.port,
        Role::Mcp => settings.mcp.endpoint.port,
        Role::Gateway => settings.gateway.endpoint.port,
    }
}

/// How long answers may take to finish at shutdown, and a moment to store them.
fn grace(settings: &Settings) -> Duration {
    settings.gateway.file.resilience.shutdown_grace + Duration::from_secs(5)
}
