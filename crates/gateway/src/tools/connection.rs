//! One configured MCP server as the hub keeps it, and its connection: made on first
//! use and again once it has closed or failed, in the newest protocol revision the
//! server speaks (2026-07-28, else 2025-11-25).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use maitred_core::settings::mcp_servers::ServerConfig;
use rmcp::model::ProtocolVersion;
use rmcp::service::{ClientInitializeError, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use tokio::sync::Mutex;

use super::breaker::Breaker;
use super::client_handler::{Handler, client_info};
use super::error::HubError;
use super::http::AuthedHttp;
use super::routes::Routes;

pub(super) type Connection = RunningService<RoleClient, Handler>;

pub(super) struct Server {
    pub(super) config: ServerConfig,
    pub(super) breaker: Breaker,
    pub(super) http: AuthedHttp,
    connection: Mutex<Option<(Arc<Connection>, Arc<Routes>)>>,
    /// The server said its tool list changed since the catalogue last listed it.
    pub(super) stale: Arc<AtomicBool>,
}

impl Server {
    pub(super) fn new(config: ServerConfig, breaker: Breaker, http: AuthedHttp) -> Self {
        Self {
            config,
            breaker,
            http,
            connection: Mutex::new(None),
            stale: Arc::new(AtomicBool::new(false)),
        }
    }

    pub(super) async fn connection(&self) -> Result<Arc<Connection>, HubError> {
        Ok(self.connection_and_routes().await?.0)
    }

    pub(super) async fn connection_and_routes(
        &self,
    ) -> Result<(Arc<Connection>, Arc<Routes>), HubError> {
        let mut slot = self.connection.lock().await;
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
        let connection = match self.connect(&routes, auto).await {
            // A server that knows `server/discover` but speaks only 2025-11-25 says
            // so instead of not knowing it: it is greeted the 2025-11-25 way.
            Err(HubError::Initialise(refused))
                if matches!(
                    &*refused,
                    ClientInitializeError::NoCompatibleProtocolVersion { server_supported, .. }
                        if server_supported.contains(&ProtocolVersion::V_2025_11_25)
                ) =>
            {
                self.connect(&routes, ClientLifecycleMode::Initialize)
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
        routes: &Arc<Routes>,
        lifecycle: ClientLifecycleMode,
    ) -> Result<Connection, HubError> {
        let transport = StreamableHttpClientTransport::with_client(
            self.http.clone(),
            StreamableHttpClientTransportConfig::with_uri(self.config.url.clone()),
        );
        let mut info = client_info();
        if lifecycle == ClientLifecycleMode::Initialize {
            info.protocol_version = ProtocolVersion::V_2025_11_25;
        }
        let handler = Handler {
            info,
            stale: self.stale.clone(),
            routes: routes.clone(),
            server: self.config.name.clone(),
        };
        let timeout = self.config.timeout;
        tokio::time::timeout(timeout, handler.serve_with_lifecycle(transport, lifecycle))
            .await
            .map_err(|_| HubError::ConnectTimeout { timeout })?
            .map_err(|refused| HubError::Initialise(Box::new(refused)))
    }

    pub(super) async fn forget_connection(&self) {
        self.connection.lock().await.take();
    }
}
