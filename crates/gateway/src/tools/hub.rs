//! One MCP client per configured server, connected on first use and again after a
//! failure, and the catalogue of all their tools: discovered when first needed,
//! refreshed after a TTL or when a server says its list changed (`discovery.rs`).
//!
//! A call (`call.rs`) may ask the person for input on the way (MCP elicitation) and
//! report its progress: in the 2025-11-25 protocol by requests and notifications the
//! connection routes to the call (`client_handler.rs`, `routes.rs`); in the
//! 2026-07-28 protocol by an `input_required` result, whose rounds the hub drives
//! itself (`input_rounds.rs`, SEP-2322).

use maitred_core::issuer::Issuer;
use maitred_core::oauth_client::TokenFetchLabels;
use maitred_core::settings::gateway_file::Resilience;
use maitred_core::settings::mcp_servers::ServerConfig;
use maitred_core::settings::tool_search::ToolSearch;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use rmcp::model::JsonObject;
use std::sync::Arc;
use tokio::sync::{Mutex, RwLock};
use tokio_util::task::TaskTracker;

use super::breaker::{self, Breaker};
use super::call::{CallContext, CallOutcome};
use super::catalogue::{Catalogue, RegisteredTool};
use super::connection::Server;
use super::credentials::Credentials;
use super::http::AuthedHttp;
use crate::accounts::Accounts;

pub struct ToolHub {
    pub(super) servers: Vec<Arc<Server>>,
    /// People's own sign-ins, at the servers that want them.
    pub(super) accounts: Arc<Accounts>,
    /// For the sessions of people at those servers.
    pub(super) http: reqwest::Client,
    /// Where a call abandoned mid-way tells its server so.
    pub(super) tasks: TaskTracker,
    /// Development: a server may send the person to an http page on this machine.
    pub(super) loopback_http: bool,
    pub(super) catalogue: RwLock<Arc<Catalogue>>,
    /// Whether the catalogue was made at all yet; held while servers are listed.
    pub(super) listed_once: Mutex<bool>,
    /// How many tools are sent before the rest are searched for.
    pub(super) search: ToolSearch,
}

/// What the hub is built with besides its servers.
pub struct HubWiring<'a> {
    pub http: reqwest::Client,
    /// maitred's issuer: where servers' clients get their tokens by default.
    pub issuer: &'a Issuer,
    pub resilience: &'a Resilience,
    pub token_requests: Family<TokenFetchLabels, Counter>,
    pub tasks: TaskTracker,
    /// Development: a server may send the person to an http page on this machine.
    pub loopback_http: bool,
    pub accounts: Arc<Accounts>,
    pub search: ToolSearch,
}

impl ToolHub {
    pub fn new(configs: Vec<ServerConfig>, wiring: HubWiring<'_>) -> anyhow::Result<Arc<Self>> {
        let HubWiring {
            http,
            issuer,
            resilience,
            token_requests,
            tasks,
            loopback_http,
            accounts,
            search,
        } = wiring;
        let mut servers = Vec::new();
        for config in configs.into_iter().filter(|c| c.enabled) {
            let credentials = Credentials::of(&config, &http, issuer, &token_requests)?;
            let breaker = Breaker::new(
                &config.name,
                resilience.breaker_failures,
                resilience.breaker_cooldown,
            );
            let authed = AuthedHttp::new(http.clone(), credentials);
            servers.push(Arc::new(Server::new(config, breaker, authed)));
        }
        Ok(Arc::new(Self {
            servers,
            accounts,
            http,
            tasks,
            loopback_http,
            catalogue: RwLock::new(Arc::new(Catalogue::default())),
            listed_once: Mutex::new(false),
            search,
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
    async fn catalogue(&self, owner: Option<&str>) -> Arc<Catalogue> {
        self.catalogue_for(owner).await
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
