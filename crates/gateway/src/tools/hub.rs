//! One MCP client per configured server, connected on first use and again after a
//! failure, and the catalogue of all their tools: discovered when first needed,
//! refreshed after a TTL or when a server says its list changed.
//!
//! A call may ask the person for input on the way (MCP elicitation) and report its
//! progress: in the 2025-11-25 protocol by requests and notifications the connection
//! routes to the call (`routes.rs`); in the 2026-07-28 protocol by an
//! `input_required` result, whose rounds the hub drives itself (SEP-2322).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientCapabilities, ClientConfig, ClientRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, FormElicitationCapability, Implementation,
    InputRequest, InputRequests, InputResponses, JsonObject, ProgressNotificationParam,
    ProtocolVersion, RequestId, RequestMetaObject, ServerResult, UrlElicitationCapability,
};
use rmcp::service::{
    ClientInitializeError, InboundStreamOrigin, NotificationContext, Peer, PeerRequestOptions,
    RequestContext, RoleClient, RunningService,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, ServiceError};
use serde_json::Value;
use tokio::sync::{Mutex, RwLock};
use tokio_util::task::TaskTracker;

use super::breaker::{self, Breaker};
use super::http::{AuthedHttp, Credentials};
use super::interaction::CallLink;
use super::routes::Routes;
use maitred_core::delegation::{ExchangeClient, ExchangeError, Exchanger};
use maitred_core::issuer::Issuer;
use maitred_core::oauth_client::{ClientCredentials, TokenFetchLabels, TokenSource};
use maitred_core::settings::gateway_file::Resilience;
use maitred_core::settings::mcp_servers::{AuthConfig, ClientAuth, ServerConfig, secret};
use maitred_llm::ToolDef;
use maitred_llm::schema;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use secrecy::SecretString;

/// Rediscover tools at least this often.
const TTL: Duration = Duration::from_secs(300);
/// After a server could not be reached, wait this long before trying again.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);
/// The `_meta` key naming the end user a call is made for (audit only).
const END_USER_META: &str = "maitred/endUserId";
/// The `_meta` key naming the gateway's tool call: the server's audit records it, and
/// the transport finds the call's person by it.
pub(super) const TOOL_CALL_META: &str = "maitred/toolCallId";
/// Most `input_required` rounds of one call (SEP-2322): a few questions, not a dialogue.
const MAX_INPUT_ROUNDS: usize = 4;

/// A tool as the gateway knows it.
pub struct RegisteredTool {
    /// The name the model sees: `server__tool`.
    pub exposed: String,
    pub server: String,
    pub tool: String,
    /// A short human name ("Look up customers").
    pub title: String,
    pub def: ToolDef,
    /// Changes nothing, by the operator's word or a trusted server's annotation.
    pub read_only: bool,
    /// Each call waits for the person's approval.
    pub needs_approval: bool,
    /// Calls reach the server as the person (a token exchanged for theirs).
    pub as_person: bool,
    validator: Option<jsonschema::Validator>,
}

/// Arguments that do not fit a tool's input schema: what is wrong, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", problems.join("; "))]
pub struct InvalidArguments {
    /// At most five, each with its place in the arguments.
    pub problems: Vec<String>,
}

impl RegisteredTool {
    /// Checks arguments against the tool's input schema.
    pub fn validate(&self, arguments: &Value) -> Result<(), InvalidArguments> {
        let Some(validator) = &self.validator else {
            return Ok(());
        };
        let problems: Vec<String> = validator
            .iter_errors(arguments)
            .take(5)
            .map(|error| {
                let at = error.instance_path().to_string();
                if at.is_empty() {
                    error.to_string()
                } else {
                    format!("{at}: {error}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(InvalidArguments { problems })
        }
    }
}

#[derive(Default)]
pub struct Catalogue {
    pub tools: Vec<Arc<RegisteredTool>>,
    /// Servers that could not be listed, and why.
    pub unavailable: Vec<(String, String)>,
}

impl Catalogue {
    pub fn find(&self, exposed: &str) -> Option<Arc<RegisteredTool>> {
        self.tools.iter().find(|t| t.exposed == exposed).cloned()
    }

    pub fn defs(&self) -> Vec<ToolDef> {
        self.tools.iter().map(|t| t.def.clone()).collect()
    }
}

/// Who a call is made for, and the trace it belongs to (both go in `_meta`), and
/// where what the server says on the way (progress, requests for input) goes.
#[derive(Debug, Clone, Copy)]
pub struct CallContext<'a> {
    pub end_user: &'a str,
    /// The person's own token, for servers that take delegated tokens.
    pub person: Option<&'a SecretString>,
    pub tool_call_id: &'a str,
    /// The W3C `traceparent` of the question's span.
    pub traceparent: &'a str,
    pub link: &'a CallLink,
}

/// What a tool call came to.
#[derive(Debug, Clone)]
pub enum CallOutcome {
    /// The result as text for the model (structured content as compact JSON).
    Ok {
        text: String,
        structured: Option<Value>,
    },
    /// The tool ran and reported a failure (`isError`), or refused the call.
    ToolError(String),
    /// The server could not be reached, or did not answer in time.
    Unavailable(String),
}

#[derive(Clone)]
struct Handler {
    info: ClientConfig,
    stale: Arc<AtomicBool>,
    /// This connection's calls, for the messages that belong to one of them.
    routes: Arc<Routes>,
    server: String,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.stale.store(true, Ordering::SeqCst);
    }

    /// A 2025-11-25 request for input: shown only to the person whose call's
    /// response stream it came on; from anywhere else it is declined.
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let call = match context.extensions.get::<InboundStreamOrigin>() {
            Some(InboundStreamOrigin::OutboundRequest(id)) => self.routes.by_request(id).await,
            _ => None,
        };
        let Some(link) = call else {
            tracing::warn!(server = %self.server, "an MCP server asked for input outside of any tool call's stream; declined");
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        Ok(link.ask(request).await.to_result())
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(link) = self.routes.by_token(&params.progress_token).await {
            link.progress(params.progress, params.total, params.message);
        }
    }
}

/// What the client offers every server, in both protocol revisions (in 2026-07-28
/// the capabilities travel in each request's `_meta`).
fn client_info() -> ClientConfig {
    let mut capabilities = ClientCapabilities::default();
    capabilities.elicitation = Some(
        ElicitationCapability::new()
            // The gateway checks the person's answer against the schema itself.
            .with_form(FormElicitationCapability::new().with_schema_validation(true))
            .with_url(UrlElicitationCapability::new()),
    );
    ClientConfig::new(
        capabilities,
        Implementation::new("maitred-gateway", env!("CARGO_PKG_VERSION")),
    )
}

type Connection = RunningService<RoleClient, Handler>;

struct Server {
    config: ServerConfig,
    breaker: Breaker,
    http: AuthedHttp,
    connection: Mutex<Option<(Arc<Connection>, Arc<Routes>)>>,
    stale: Arc<AtomicBool>,
}

impl Server {
    async fn connection(&self) -> Result<Arc<Connection>, String> {
        Ok(self.connection_and_routes().await?.0)
    }

    async fn connection_and_routes(&self) -> Result<(Arc<Connection>, Arc<Routes>), String> {
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
        let connection = match self.connect(&routes, auto).await? {
            // A server that knows `server/discover` but speaks only 2025-11-25 says
            // so instead of not knowing it: it is greeted the 2025-11-25 way.
            Err(ClientInitializeError::NoCompatibleProtocolVersion {
                server_supported, ..
            }) if server_supported.contains(&ProtocolVersion::V_2025_11_25) => self
                .connect(&routes, ClientLifecycleMode::Initialize)
                .await?
                .map_err(|e| format!("{e}"))?,
            connected => connected.map_err(|e| format!("{e}"))?,
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
    ) -> Result<Result<Connection, ClientInitializeError>, String> {
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
        tokio::time::timeout(
            self.config.timeout,
            handler.serve_with_lifecycle(transport, lifecycle),
        )
        .await
        .map_err(|_| format!("no answer within {} s", self.config.timeout.as_secs_f64()))
    }

    async fn forget_connection(&self) {
        self.connection.lock().await.take();
    }
}

/// Where a server's client authenticates: its own issuer, or maitred's.
fn issuer_of(issuer: &Issuer, auth: &ClientAuth) -> Issuer {
    auth.issuer
        .as_deref()
        .map_or_else(|| issuer.clone(), |i| Issuer::new(i, None))
}

fn client_secret(server: &str, auth: &ClientAuth) -> anyhow::Result<SecretString> {
    secret(
        &auth.client_secret,
        &auth.client_secret_env,
        &format!("MCP server {server} client secret"),
    )
}

/// The gateway's own client-credentials token for a server.
fn own_tokens(
    http: &reqwest::Client,
    issuer: &Issuer,
    server: &str,
    auth: &ClientAuth,
) -> anyhow::Result<TokenSource> {
    Ok(TokenSource::new(
        http.clone(),
        issuer_of(issuer, auth),
        ClientCredentials {
            token_url: auth.token_url.clone().unwrap_or_default(),
            client_id: auth.client_id.clone(),
            client_secret: client_secret(server, auth)?,
            scopes: auth.scopes.clone(),
            resource: auth.resource.clone(),
        },
    ))
}

pub struct ToolHub {
    servers: Vec<Arc<Server>>,
    /// Where a call abandoned mid-way tells its server so.
    tasks: TaskTracker,
    /// Development: a server may send the person to an http page on this machine.
    loopback_http: bool,
    catalogue: RwLock<Arc<Catalogue>>,
    refreshed: Mutex<Option<(Instant, bool)>>,
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
            let credentials = match &config.auth {
                AuthConfig::None => Credentials::Anonymous,
                AuthConfig::Bearer { token, token_env } => Credentials::Static(secret(
                    token,
                    token_env,
                    &format!("MCP server {} token", config.name),
                )?),
                AuthConfig::ClientCredentials(auth) => Credentials::Issued(Box::new(
                    own_tokens(&http, issuer, &config.name, auth)?
                        .with_metrics(token_requests.clone()),
                )),
                AuthConfig::TokenExchange(auth) => Credentials::Delegated {
                    own: Box::new(
                        own_tokens(&http, issuer, &config.name, auth)?
                            .with_metrics(token_requests.clone()),
                    ),
                    exchanger: Box::new(Exchanger::new(
                        http.clone(),
                        issuer_of(issuer, auth),
                        ExchangeClient {
                            token_url: auth.token_url.clone().unwrap_or_default(),
                            client_id: auth.client_id.clone(),
                            client_secret: client_secret(&config.name, auth)?,
                            resource: auth.resource.clone(),
                            scopes: auth.scopes.clone(),
                        },
                    )),
                },
            };
            servers.push(Arc::new(Server {
                breaker: Breaker::new(
                    &config.name,
                    resilience.breaker_failures,
                    resilience.breaker_cooldown,
                ),
                http: AuthedHttp::new(http.clone(), credentials),
                config,
                connection: Mutex::new(None),
                stale: Arc::new(AtomicBool::new(false)),
            }));
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

    /// The current tools; rediscovered when stale. One caller refreshes, the others wait.
    pub async fn catalogue(&self) -> Arc<Catalogue> {
        let mut refreshed = self.refreshed.lock().await;
        let changed = self
            .servers
            .iter()
            .any(|s| s.stale.swap(false, Ordering::SeqCst));
        let due = match *refreshed {
            None => true,
            Some((at, complete)) => {
                changed || at.elapsed() >= TTL || (!complete && at.elapsed() >= RETRY_AFTER_FAILURE)
            }
        };
        if due {
            let previous = self.catalogue.read().await.clone();
            let catalogue = self.discover(&previous).await;
            let complete = catalogue.unavailable.is_empty();
            *self.catalogue.write().await = Arc::new(catalogue);
            *refreshed = Some((Instant::now(), complete));
        }
        self.catalogue.read().await.clone()
    }

    /// Lists every server's tools. A server that cannot be listed keeps the tools it
    /// had: calls to them then report it unavailable, which the model can tell the
    /// user, rather than the tools silently vanishing.
    async fn discover(&self, previous: &Catalogue) -> Catalogue {
        let mut catalogue = Catalogue::default();
        for server in &self.servers {
            let listed = match server.breaker.attempt() {
                Err(wait) => Err(format!(
                    "the circuit breaker is open (next try in {} s)",
                    wait.as_secs().max(1)
                )),
                Ok(attempt) => {
                    let listed = Self::list(server).await;
                    match &listed {
                        Ok(_) => attempt.succeeded(),
                        Err(_) => attempt.failed(),
                    }
                    listed
                }
            };
            match listed {
                Ok(tools) => catalogue.tools.extend(tools),
                Err(reason) => {
                    tracing::warn!(server = %server.config.name, reason = ?reason, "cannot list the MCP server's tools");
                    server.forget_connection().await;
                    catalogue.tools.extend(
                        previous
                            .tools
                            .iter()
                            .filter(|t| t.server == server.config.name)
                            .cloned(),
                    );
                    catalogue
                        .unavailable
                        .push((server.config.name.clone(), reason));
                }
            }
        }
        tracing::info!(
            tools = catalogue.tools.len(),
            unavailable = catalogue.unavailable.len(),
            "discovered MCP tools"
        );
        catalogue
    }

    async fn list(server: &Server) -> Result<Vec<Arc<RegisteredTool>>, String> {
        let connection = server.connection().await?;
        let tools = tokio::time::timeout(server.config.timeout, connection.list_all_tools())
            .await
            .map_err(|_| {
                format!(
                    "tools/list took longer than {} s",
                    server.config.timeout.as_secs_f64()
                )
            })?
            .map_err(|e| e.to_string())?;
        Ok(tools
            .into_iter()
            .filter_map(|tool| {
                let hint = tool.annotations.as_ref().and_then(|a| a.read_only_hint);
                let read_only = server.config.tool_is_read_only(&tool.name, hint);
                let needs_approval = server.config.tool_needs_approval(&tool.name, read_only);
                // A read-only server's write tools are never offered (nor called).
                if server.config.read_only && !read_only {
                    return None;
                }
                let input = Value::Object(tool.input_schema.as_ref().clone());
                let validator = jsonschema::validator_for(&input)
                    .map_err(|error| {
                        tracing::warn!(tool = ?tool.name, %error, "unusable input schema; arguments go unchecked");
                    })
                    .ok();
                let exposed = schema::exposed_name(&server.config.name, &tool.name);
                let title = tool
                    .title
                    .clone()
                    .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.clone()))
                    .unwrap_or_else(|| humanize(&tool.name));
                Some(Arc::new(RegisteredTool {
                    def: ToolDef {
                        name: exposed.clone(),
                        title: Some(title.clone()),
                        description: tool.description.as_deref().unwrap_or_default().to_owned(),
                        parameters: schema::for_model(&input),
                        read_only,
                    },
                    exposed,
                    server: server.config.name.clone(),
                    tool: tool.name.to_string(),
                    title,
                    read_only,
                    needs_approval,
                    as_person: server.http.delegates(),
                    validator,
                }))
            })
            .collect())
    }

    /// Calls a tool on its server, within the server's timeout.
    pub async fn call(
        &self,
        tool: &RegisteredTool,
        arguments: JsonObject,
        context: CallContext<'_>,
    ) -> CallOutcome {
        let Some(server) = self.servers.iter().find(|s| s.config.name == tool.server) else {
            return CallOutcome::Unavailable(format!(
                "the MCP server {} is not configured",
                tool.server
            ));
        };
        if server.config.read_only && !tool.read_only {
            return CallOutcome::ToolError(format!(
                "{} changes data, and the server {} is read-only here",
                tool.tool, tool.server
            ));
        }
        let attempt = match server.breaker.attempt() {
            Ok(attempt) => attempt,
            Err(wait) => {
                return CallOutcome::Unavailable(format!(
                    "{} failed repeatedly and is not called for now (next try in {} s)",
                    tool.server,
                    wait.as_secs().max(1)
                ));
            }
        };
        let outcome = self.call_server(server, tool, arguments, context).await;
        match &outcome {
            CallOutcome::Unavailable(_) => attempt.failed(),
            _ => attempt.succeeded(),
        }
        outcome
    }

    async fn call_server(
        &self,
        server: &Server,
        tool: &RegisteredTool,
        arguments: JsonObject,
        context: CallContext<'_>,
    ) -> CallOutcome {
        let (connection, routes) = match server.connection_and_routes().await {
            Ok(connection) => connection,
            Err(reason) => return CallOutcome::Unavailable(reason),
        };
        let link = context
            .link
            .clone()
            .allowing_loopback_http(self.loopback_http);
        // A server that takes delegated tokens is called as the person, never as the
        // gateway in their stead.
        let _acting = match (server.http.delegates(), context.person) {
            (false, _) => None,
            (true, Some(person)) => {
                match server.http.exchange_for(person).await {
                    Ok(()) => {}
                    Err(refused @ ExchangeError::Refused { .. }) => {
                        return CallOutcome::ToolError(format!(
                            "{} cannot be called for you: {refused}; sign in again",
                            tool.server
                        ));
                    }
                    Err(error) => {
                        return CallOutcome::Unavailable(format!("{}: {error}", tool.server));
                    }
                }
                Some(server.http.acting_for(context.tool_call_id, person.clone()))
            }
            (true, None) => {
                return CallOutcome::ToolError(format!(
                    "{} acts only for a signed-in person, and this request carries no sign-in to act on; sign in again",
                    tool.server
                ));
            }
        };
        let mut meta = RequestMetaObject::default();
        meta.insert(END_USER_META.to_owned(), Value::from(context.end_user));
        meta.insert(TOOL_CALL_META.to_owned(), Value::from(context.tool_call_id));
        // One question is one trace: the MCP server continues it (SEP-414).
        meta.set_traceparent(context.traceparent);
        let mut params = CallToolRequestParams::new(tool.tool.clone()).with_arguments(arguments);
        params.meta = Some(meta);
        let timeout = server.config.timeout;
        // The first request, then one more after each round of input (SEP-2322).
        for round in 0..=MAX_INPUT_ROUNDS {
            let round_link = link.for_round(u32::try_from(round).unwrap_or(u32::MAX));
            let sent = self.send_call(connection.peer(), &routes, params.clone(), &round_link);
            let answer = match link.within(timeout, sent).await {
                None => {
                    return CallOutcome::Unavailable(format!(
                        "{} did not answer within {} s",
                        tool.server,
                        timeout.as_secs_f64()
                    ));
                }
                Some(Ok(answer)) => answer,
                Some(Err(ServiceError::McpError(error))) => {
                    return CallOutcome::ToolError(format!(
                        "the tool refused the call: {}",
                        error.message
                    ));
                }
                Some(Err(error)) => {
                    server.forget_connection().await;
                    return CallOutcome::Unavailable(format!("{}: {error}", tool.server));
                }
            };
            match answer {
                ServerResult::CallToolResult(result) => return completed(result),
                ServerResult::InputRequiredResult(required) => {
                    let asked = required
                        .input_requests
                        .as_ref()
                        .is_some_and(|r| !r.is_empty());
                    let responses = match fulfil(&link, required.input_requests).await {
                        Ok(responses) => responses,
                        Err(reason) => return CallOutcome::ToolError(reason),
                    };
                    if !asked {
                        // Only state to echo: the server is not ready; do not hammer it.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    params.input_responses = (!responses.is_empty()).then_some(responses);
                    params.request_state = required.request_state;
                }
                ServerResult::CreateTaskResult(_) => {
                    return CallOutcome::ToolError(format!(
                        "{} answered with a task, which this gateway does not follow",
                        tool.server
                    ));
                }
                _ => {
                    return CallOutcome::ToolError(format!(
                        "{} answered tools/call with something else than a result",
                        tool.server
                    ));
                }
            }
        }
        CallOutcome::ToolError(format!(
            "{} asked for input more than {MAX_INPUT_ROUNDS} times in one call",
            tool.tool
        ))
    }

    /// One `tools/call` request, routed to `link` while it waits: its progress, and
    /// the requests for input that come on its response stream. Dropped before its
    /// answer (a timeout, the person's Stop), it tells the server so.
    async fn send_call(
        &self,
        peer: &Peer<RoleClient>,
        routes: &Arc<Routes>,
        params: CallToolRequestParams,
        link: &CallLink,
    ) -> Result<ServerResult, ServiceError> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await?;
        let _route = routes.add(
            handle.id.clone(),
            handle.progress_token.clone(),
            link.clone(),
        );
        let mut abandoned = Abandoned {
            peer: peer.clone(),
            id: Some(handle.id.clone()),
            tasks: self.tasks.clone(),
        };
        let answer = handle.await_response().await;
        abandoned.id = None;
        answer
    }
}

/// A request nobody waits for any more: the server is told (`notifications/cancelled`),
/// so it stops working on it and stops asking the person.
struct Abandoned {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
    tasks: TaskTracker,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        // Dropped outside a runtime (a process going down): nobody to tell.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        self.tasks.spawn_on(
            async move {
                let notice = CancelledNotificationParam::new(
                    Some(id),
                    Some("the person's answer no longer waits for it".to_owned()),
                );
                let _ = peer.notify_cancelled(notice).await;
            },
            &runtime,
        );
    }
}

/// What a call's result is for the model.
fn completed(result: CallToolResult) -> CallOutcome {
    let text: String = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    if result.is_error == Some(true) {
        CallOutcome::ToolError(text)
    } else {
        let text = match &result.structured_content {
            Some(structured) => structured.to_string(),
            None => text,
        };
        CallOutcome::Ok {
            text,
            structured: result.structured_content,
        }
    }
}

/// Answers a round's requests (SEP-2322), one at a time, so the person sees one
/// question after the other. Sampling and roots are not offered.
async fn fulfil(
    link: &CallLink,
    requests: Option<InputRequests>,
) -> Result<InputResponses, String> {
    let mut responses = InputResponses::new();
    for (key, request) in requests.unwrap_or_default() {
        let response = match request {
            InputRequest::Elicitation(request) => {
                serde_json::to_value(link.ask(request.params).await.to_result())
            }
            InputRequest::CreateMessage(_) => {
                return Err(
                    "the tool asked the gateway to sample a model, which it does not offer"
                        .to_owned(),
                );
            }
            _ => {
                return Err(
                    "the tool asked for an input this gateway does not offer (only the person's)"
                        .to_owned(),
                );
            }
        };
        responses.insert(key, response.map_err(|e| e.to_string())?);
    }
    Ok(responses)
}

/// `getCustomerById` → "Get customer by id".
fn humanize(name: &str) -> String {
    let mut words = Vec::new();
    let mut word = String::new();
    for c in name.chars() {
        if c == '_' || c == '-' || c == '.' {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
        } else if c.is_uppercase() && !word.is_empty() {
            words.push(std::mem::take(&mut word));
            word.push(c.to_ascii_lowercase());
        } else {
            word.push(c.to_ascii_lowercase());
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    let mut text = words.join(" ");
    if let Some(first) = text.get_mut(0..1) {
        first.make_ascii_uppercase();
    }
    text
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

#[cfg(test)]
impl RegisteredTool {
    pub fn for_test(exposed: &str, read_only: bool) -> Self {
        let (server, tool) = exposed.split_once("__").unwrap_or(("test", exposed));
        Self {
            exposed: exposed.to_owned(),
            server: server.to_owned(),
            tool: tool.to_owned(),
            title: humanize(tool),
            def: ToolDef {
                name: exposed.to_owned(),
                title: None,
                description: String::new(),
                parameters: Value::Object(Default::default()),
                read_only,
            },
            read_only,
            needs_approval: !read_only,
            as_person: false,
            validator: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::humanize;

    #[test]
    fn tool_names_read_as_words() {
        assert_eq!(humanize("getCustomerById"), "Get customer by id");
        assert_eq!(humanize("list_files"), "List files");
    }
}
