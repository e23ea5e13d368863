//! The benchmark's servers, served for real: one rmcp server per entry of the
//! catalogue, each at `/<name>/mcp` on one local port, in the 2026-07-28 revision.
//! A call answers with what it was asked (the tool and its arguments), and is
//! noted, as is every `tools/list`, so a test can tell what reached the servers.

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use maitred::settings::mcp_servers::ServerConfig;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
    DiscoverResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    ServerConfig as McpServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::json;

use super::catalogue::Server;

/// Every call the servers answered, as `server__tool`, in order.
pub(crate) type Calls = Arc<Mutex<Vec<String>>>;

/// The servers, served.
pub(crate) struct Served {
    /// Each server is at `<base>/<name>/mcp`.
    pub(crate) base: String,
    pub(crate) calls: Calls,
    /// `tools/list` requests answered, all servers together.
    pub(crate) lists: Arc<AtomicUsize>,
}

#[derive(Clone)]
struct Scripted {
    name: String,
    tools: Arc<Vec<Tool>>,
    /// How long a client may keep the tool list (`ttlMs`).
    ttl_ms: u64,
    calls: Calls,
    lists: Arc<AtomicUsize>,
}

impl ServerHandler for Scripted {
    fn get_info(&self) -> McpServerConfig {
        McpServerConfig::new(ServerCapabilities::builder().enable_tools().build())
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
        self.lists.fetch_add(1, Ordering::SeqCst);
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone())
            .with_ttl_ms(self.ttl_ms)
            .with_cache_scope(CacheScope::Public))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !self.tools.iter().any(|t| t.name == request.name) {
            return Err(ErrorData::invalid_params(
                format!("no tool {}", request.name),
                None,
            ));
        }
        let exposed = format!("{}__{}", self.name, request.name);
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(exposed.clone());
        let answer = json!({ "done": exposed, "arguments": request.arguments });
        Ok(CallToolResult::success(vec![ContentBlock::text(answer.to_string())]).into())
    }
}

/// Serves `servers` on a free local port until the process ends, each saying its
/// tool list may be kept `ttl_ms`.
pub(crate) async fn serve(servers: &[Server], ttl_ms: u64) -> Served {
    let calls = Calls::default();
    let lists = Arc::new(AtomicUsize::new(0));
    let mut router = axum::Router::new();
    for server in servers {
        let handler = Scripted {
            name: server.name.clone(),
            tools: Arc::new(server.tools.clone()),
            ttl_ms,
            calls: calls.clone(),
            lists: lists.clone(),
        };
        let service = StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        router = router.route_service(&format!("/{}/mcp", server.name), service);
    }
    let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("a local port");
    let base = format!("http://{}", listener.local_addr().expect("its address"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    Served { base, calls, lists }
}

/// The gateway's entry for the server `name` served at `base`: no auth, and every
/// tool vouched read-only (so a call needs no approval, as on `/v1/chat/completions`
/// none can be given).
pub(crate) fn config(base: &str, name: &str) -> ServerConfig {
    serde_json::from_value(json!({
        "name": name,
        "url": format!("{base}/{name}/mcp"),
        "timeout": 5,
        "read_only_tools": ["*"],
    }))
    .expect("a server entry")
}
