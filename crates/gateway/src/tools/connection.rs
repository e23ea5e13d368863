//! One configured MCP server as the hub keeps it, and its connection: made on first
//! use and again once it has closed or failed, in the newest protocol revision the
//! server speaks (2026-07-28, else 2025-11-25). A server where each person signs in
//! has a session per person besides.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use maitred_core::settings::mcp_servers::ServerConfig;
use rmcp::model::{ProtocolVersion, Tool};
use rmcp::service::{ClientInitializeError, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use tokio::sync::Mutex;

use super::breaker::Breaker;
use super::catalogue::RegisteredTool;
use super::client_handler::{Handler, client_info};
use super::error::HubError;
use super::http::AuthedHttp;
use super::routes::Routes;

pub(super) type Connection = RunningService<RoleClient, Handler>;

pub(super) struct Server {
    pub(super) config: ServerConfig,
    pub(super) breaker: Breaker,
    pub(super) http: AuthedHttp,
    /// The gateway's own connection (for everyone, or acting for the person a
    /// delegated call names).
    pub(super) session: Session,
    /// The server said its tool list changed since the catalogue last listed it.
    pub(super) stale: Arc<AtomicBool>,
    /// A server where each person signs in binds its sessions to the person whose
    /// token opened them: one connection per person (`people.rs`).
    pub(super) people: std::sync::Mutex<HashMap<String, Arc<PersonSession>>>,
    /// Its latest listing (`discovery.rs`).
    pub(super) listing: std::sync::Mutex<Option<Listing>>,
}

/// A server's tools as last listed.
pub(super) struct Listing {
    pub(super) tools: Vec<Arc<RegisteredTool>>,
    /// As the server sent them, to tell a new listing from the same one again.
    pub(super) listed: Vec<Tool>,
    /// Until when it may be used without listing again.
    pub(super) fresh_until: std::time::Instant,
    /// The last attempt to list again failed, when and why: the tools are kept.
    pub(super) failed: Option<(std::time::Instant, String)>,
}

/// Where a call goes: its server, the session it uses there, and that session's
/// connection and routing.
#[derive(Clone, Copy)]
pub(super) struct Line<'a> {
    pub(super) server: &'a Server,
    pub(super) session: &'a Session,
    pub(super) connection: &'a Connection,
    pub(super) routes: &'a Arc<Routes>,
}

/// One MCP session with the server, made on first use and again once it has closed.
pub(super) struct Session {
    pub(super) http: AuthedHttp,
    slot: Mutex<Option<(Arc<Connection>, Arc<Routes>)>>,
}

/// A person's own session with a server where each person signs in, and the tools
/// it listed for them.
pub(super) struct PersonSession {
    pub(super) session: Session,
    /// The person's tools, and until when they are fresh.
    pub(super) tools: Mutex<Option<(std::time::Instant, Vec<Arc<RegisteredTool>>)>>,
}

impl Server {
    pub(super) fn new(config: ServerConfig, breaker: Breaker, http: AuthedHttp) -> Self {
        Self {
            config,
            breaker,
            session: Session::new(http.clone()),
            http,
            stale: Arc::new(AtomicBool::new(false)),
            people: std::sync::Mutex::default(),
            listing: std::sync::Mutex::default(),
        }
    }

    pub(super) async fn connection(&self) -> Result<Arc<Connection>, HubError> {
        Ok(self.connection_and_routes().await?.0)
    }

    pub(super) async fn connection_and_routes(
        &self,
    ) -> Result<(Arc<Connection>, Arc<Routes>), HubError> {
        self.session.connection_and_routes(self).await
    }

    pub(super) async fn forget_connection(&self) {
        self.session.forget().await;
    }
}

impl Session {
    pub(super) fn new(http: AuthedHttp) -> Self {
        Self {
            http,
            slot: Mutex::new(None),
        }
    }

    pub(super) async fn connection_and_routes(
        &self,
        server: &Server,
    ) -> Result<(Arc<Connection>, Arc<Routes>), HubError> {
        let mut slot = self.slot.lock().await;
        if let Some((connection, routes)) = slot.as_ref()
            && !connection.is_closed()
        {
            return Ok((connection.clone(), routes.clone()));
        }
        let routes = Arc::new(Routes::default());
        let auto = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        };
        let connection = match self.connect(server, &routes, auto).await {
            // A server that knows `server/discover` but speaks only 2025-11-25 says
            // so instead of not knowing it: it is greeted the 2025-11-25 way.
            Err(HubError::Initialise(refused))
                if matches!(
                    &*refused,
                    ClientInitializeError::NoCompatibleProtocolVersion { server_supported, .. }
                        if server_supported.contains(&ProtocolVersion::V_2025_11_25)
                ) =>
            {
                self.connect(server, &routes, ClientLifecycleMode::Initialize)
                    .await?
            }
            connected => connected?,
        };
        let connection = Arc::new(connection);
        *slot = Some((connection.clone(), routes.clone()));
        Ok((connection, routes))
    }

    /// One attempt to connect, within the server's timeout.
    async fn connect(
        &self,
        server: &Server,
        routes: &Arc<Routes>,
        lifecycle: ClientLifecycleMode,
    ) -> Result<Connection, HubError> {
        let transport = StreamableHttpClientTransport::with_client(
            self.http.clone(),
            StreamableHttpClientTransportConfig::with_uri(server.config.url.clone()),
        );
        let mut info = client_info();
        if lifecycle == ClientLifecycleMode::Initialize {
            info.protocol_version = ProtocolVersion::V_2025_11_25;
        }
        let handler = Handler {
            info,
            stale: server.stale.clone(),
            routes: routes.clone(),
            server: server.config.name.clone(),
        };
        let timeout = server.config.timeout;
        tokio::time::timeout(timeout, handler.serve_with_lifecycle(transport, lifecycle))
            .await
            .map_err(|_| HubError::ConnectTimeout { timeout })?
            .map_err(|refused| HubError::Initialise(Box::new(refused)))
    }

    pub(super) async fn forget(&self) {
        self.slot.lock().await.take();
    }
}
