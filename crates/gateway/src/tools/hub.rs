//! One MCP client per configured server, connected on first use and again after a
//! failure, and the catalogue of all their tools: discovered when first needed,
//! refreshed after a TTL or when a server says its list changed (`discovery.rs`).
//!
//! A call (`call.rs`) may ask the person for input on the way (MCP elicitation) and
//! report its progress: in the 2025-11-25 protocol by requests and notifications the
//! connection routes to the call (`client_handler.rs`, `routes.rs`); in the
//! 2026-07-28 protocol by an `input_required` result, whose rounds the hub drives
//! itself (`input_rounds.rs`, SEP-2322).

use std::sync::Arc;
use std::time::Instant;

use maitred_core::issuer::Issuer;
use maitred_core::oauth_client::TokenFetchLabels;
use maitred_core::settings::gateway_file::Resilience;
use maitred_core::settings::mcp_servers::ServerConfig;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use rmcp::model::JsonObject;
use tokio::sync::{Mutex, RwLock};
use tokio_util::task::TaskTracker;

use super::breaker::{self, Breaker};
use super::call::{CallContext, CallOutcome};
use super::catalogue::{Catalogue, RegisteredTool};
use super::connection::Server;
use super::credentials::Credentials;
use super::http::AuthedHttp;

pub struct ToolHub {
    pub(super) servers: Vec<Arc<Server>>,
    /// Where a call abandoned mid-way tells its server so.
    pub(super) tasks: TaskTracker,
    /// Development: a server may send the person to an http page on this machine.
    pub(super) loopback_http: bool,
    pub(super) catalogue: RwLock<Arc<Catalogue>>,
    /// When the catalogue was last listed, and whether every server could be.
    pub(super) refreshed: Mutex<Option<(Instant, bool)>>,
}

impl ToolHub {
    pub fn new(
        configs: Vec<ServerConfig>,
        http: reqwest::Client,
        issuer: &Issuer,
        resilience: &Resilience,
        token_requests: Family<TokenFetchLabels, Counter>,
        tasks: TaskTracker,
        loopback_http: bool,
    ) -> anyhow::Result<Arc<Self>> {
        let mut servers = Vec::new();
        for config in configs.into_iter().filter(|c| c.enabled) {
            let credentials = Credentials::of(&config, &http, issuer, &token_requests)?;
            let breaker = Breaker::new(
                &config.name,
                resilience.breaker_failures,
                resilience.breaker_cooldown,
            );
            let http = AuthedHttp::new(http.clone(), credentials);
            servers.push(Arc::new(Server::new(config, breaker, http)));
        }
        Ok(Arc::new(Self {
            servers,
            tasks,
            loopback_http,
            catalogue: RwLock::new(Arc::new(Catalogue::default())),
            refreshed: Mutex::new(None),
        }))
    }

    pub fn server_names(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.config.name.clone()).collect()
    }

    /// Each server's circuit breaker state.
    pub fn breakers(&self) -> Vec<(String, breaker::State)> {
        self.servers
            .iter()
            .map(|s| (s.config.name.clone(), s.breaker.state()))
            .collect()
    }
}

#[async_trait::async_trait]
impl crate::answer::ports::Tools for ToolHub {
    async fn catalogue(&self) -> Arc<Catalogue> {
        ToolHub::catalogue(self).await
    }

    async fn call(
        &self,
        tool: &RegisteredTool,
        arguments: JsonObject,
        context: CallContext<'_>,
    ) -> CallOutcome {
        ToolHub::call(self, tool, arguments, context).await
    }
}
