//! The MCP server handler: tools/list from the catalogue, tools/call through the
//! scope check into the tool's entry, and one audit line per call; `tasks/*` for the
//! calls that went on as tasks, each caller seeing only its own. Nothing here knows
//! one tool from another.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    CompleteRequestMethod, CompleteRequestParams, CompleteResult, ContentBlock, GetTaskParams,
    GetTaskResult, Implementation, ListPromptsRequestMethod, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, Tool, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use secrecy::SecretString;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::audit;
use super::backend::BackendClient;
use super::call::{Answer, Call};
use super::catalogue::{Entry, READ_SCOPE, catalogue};
use super::metrics::{McpMetrics, Outcome};
use super::report::MonthReports;
use super::sealed_state::StateSeal;
use super::tasks::{self, Tasks};
use maitred_backend::idempotency;
use maitred_core::auth::{Principal, bearer_token};
use maitred_core::settings::McpCaps;
use maitred_core::trace_context::TraceContext;
use maitred_protocol::meta;

const INSTRUCTIONS: &str = "Tools for one restaurant's reservation system (resOS compatible): customers, \
bookings, tables, opening hours and guest feedback. Read tools never change anything. Before booking, \
check getAvailableTimes; when a time is taken, offer the nearest free times the error names. Dates are \
YYYY-MM-DD, times HH:MM in the restaurant's local time. List results carry `total`, the number of \
matching records: use it for counts.";

/// How long a client may keep the tool list (`ttlMs`, 2026-07-28).
const TOOLS_TTL_MS: u64 = 5 * 60 * 1000;

/// Who may call what: over HTTP the caller's token decides; over stdio the local
/// user who started the process is trusted with every tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Token,
    Local,
}

#[derive(Clone)]
pub struct McpServer {
    shared: Arc<Shared>,
}

struct Shared {
    tools: Vec<Entry>,
    backend: BackendClient,
    access: Access,
    metrics: McpMetrics,
    seal: StateSeal,
    tasks: Tasks,
}

impl McpServer {
    /// `report_step_delay` is the pause between the days of `getMonthReport`; its
    /// tasks stop on `shutdown`.
    pub fn new(
        backend: BackendClient,
        access: Access,
        metrics: McpMetrics,
        seal: StateSeal,
        report_step_delay: Duration,
        caps: McpCaps,
        shutdown: CancellationToken,
    ) -> Self {
        let tasks = Tasks::new(
            shutdown,
            metrics.tasks.clone(),
            caps.tasks_per_caller,
            caps.tasks_in_all,
        );
        let reports = MonthReports::new(tasks.clone(), report_step_delay);
        Self {
            shared: Arc::new(Shared {
                tools: catalogue(&reports),
                backend,
                access,
                metrics,
                seal,
                tasks,
            }),
        }
    }

    pub fn entry(&self, name: &str) -> Option<&Entry> {
        self.shared.tools.iter().find(|e| e.tool.name == name)
    }
}

fn principal(ctx: &RequestContext<RoleServer>) -> Option<Principal> {
    ctx.extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Principal>())
        .cloned()
}

/// The caller's token, unless it is a client's own (client credentials, no one acting
/// for it): the backend is then called as the token's subject, a person (with or
/// without roles: the backend decides what they may do) or a client another client
/// acts for. Only a client calling for itself gets `None`, and the role's own token
/// is used. Who is a client is what the token says, never the absence of roles.
fn person_token(
    ctx: &RequestContext<RoleServer>,
    caller: Option<&Principal>,
) -> Option<SecretString> {
    let caller = caller?;
    if caller.is_client() && caller.actors.is_empty() {
        return None;
    }
    let parts = ctx.extensions.get::<axum::http::request::Parts>()?;
    bearer_token(parts)
        .ok()
        .map(|token| SecretString::from(token.to_owned()))
}

/// The caller's idempotency key for this call, if it gave one the backend accepts
/// (1 to 255 visible ASCII characters). Any other is dropped with a warning, and the
/// call goes on without one, as a call from a client that sends none.
fn idempotency_key(ctx: &RequestContext<RoleServer>) -> Option<String> {
    let value = ctx.meta.get(meta::IDEMPOTENCY_KEY)?;
    match value.as_str() {
        Some(key) if idempotency::is_usable_key(key.as_bytes()) => Some(key.to_owned()),
        _ => {
            tracing::warn!(
                "_meta {} is not 1 to {} visible ASCII characters; the call goes on without it",
                meta::IDEMPOTENCY_KEY,
                idempotency::MAX_KEY_LEN
            );
            None
        }
    }
}

/// The tool call's own span in the trace: a child of the caller's `_meta.traceparent`
/// when it is valid and trusted, else of the HTTP request's span (over stdio: a new
/// trace).
fn trace(ctx: &RequestContext<RoleServer>) -> TraceContext {
    let from_meta = crate::spans::meta_traceparent(ctx);
    let from_http = || {
        ctx.extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<TraceContext>())
            .copied()
    };
    from_meta
        .or_else(from_http)
        .map_or_else(TraceContext::new_root, |parent| parent.child())
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_tasks()
                .build(),
        )
        .with_server_info(
            Implementation::new("maitred", env!("CARGO_PKG_VERSION"))
                .with_title("maitred restaurant reservations"),
        )
        .with_instructions(INSTRUCTIONS)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(&[ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2025_11_25])
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // The same list for every caller, until the server is upgraded: a client may
        // keep it five minutes and share it across the people it serves.
        Ok(ListToolsResult::with_all_items(
            self.shared.tools.iter().map(|e| e.tool.clone()).collect(),
        )
        .with_ttl_ms(TOOLS_TTL_MS)
        .with_cache_scope(CacheScope::Public))
    }

    // Prompts and completions are not offered (nor declared), so they are unknown
    // methods rather than empty lists.
    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Err(ErrorData::method_not_found::<ListPromptsRequestMethod>())
    }

    /// One resource: the write audit, read as the caller's person.
    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(vec![audit::resource()]))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(Vec::new()))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != audit::AUDIT_URI {
            return Err(audit::not_found(&request.uri));
        }
        let caller = principal(&ctx);
        if self.shared.access == Access::Token
            && !caller.as_ref().is_some_and(|p| p.has_scope(READ_SCOPE))
        {
            return Err(ErrorData::invalid_request(
                format!("reading {} needs the scope {READ_SCOPE}", audit::AUDIT_URI),
                None,
            ));
        }
        let backend =
            self.shared
                .backend
                .for_call(trace(&ctx), person_token(&ctx, caller.as_ref()), None);
        audit::read(&backend).await.map(Into::into)
    }

    async fn complete(
        &self,
        _request: CompleteRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        Err(ErrorData::method_not_found::<CompleteRequestMethod>())
    }

    /// `tasks/get`: how the caller's task is doing (another caller's is unknown).
    async fn get_task(
        &self,
        request: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let owner = tasks::owner(principal(&ctx).as_ref());
        self.shared
            .tasks
            .get(&owner, &request.task_id)
            .map(GetTaskResult::new)
    }

    /// `tasks/update`: the person's answers to the caller's task's input requests.
    async fn update_task(
        &self,
        request: UpdateTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner = tasks::owner(principal(&ctx).as_ref());
        self.shared
            .tasks
            .update(&owner, &request.task_id, request.input_responses)
    }

    /// `tasks/cancel`: the caller's task stops at its next step.
    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner = tasks::owner(principal(&ctx).as_ref());
        tracing::info!(task = %request.task_id, "tasks/cancel");
        self.shared.tasks.cancel(&owner, &request.task_id)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.entry(name).map(|e| e.tool.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        // The tool label is a catalogue name: a client cannot mint new series.
        let tool = if self.entry(&name).is_some() {
            name.clone()
        } else {
            "unknown".to_owned()
        };
        let (span, trace) = super::spans::tool_call(&ctx, &tool, request.arguments.as_ref());
        let started = Instant::now();
        let idempotency_key = idempotency_key(&ctx);
        let (outcome, result) = self
            .call(request, &ctx, trace, idempotency_key.as_deref())
            .instrument(span.clone())
            .await;
        let elapsed = started.elapsed();
        self.shared
            .metrics
            .record_call(&tool, outcome, elapsed.as_secs_f64());
        let caller = principal(&ctx);
        span.in_scope(|| {
            tracing::info!(
                tool = ?name,
                subject = ?caller.as_ref().map_or("local", |p| p.subject.as_str()),
                client_id = ?caller.as_ref().and_then(|p| p.client_id.as_deref()),
                end_user = ?ctx.meta.get(meta::END_USER).and_then(serde_json::Value::as_str),
                idempotency_key = ?idempotency_key,
                outcome = outcome.as_str(),
                duration_ms = elapsed.as_millis() as u64,
                "tool call"
            );
        });
        result
    }
}

impl McpServer {
    /// The scope check and the tool itself, in the tool call's span.
    async fn call(
        &self,
        request: CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
        trace: TraceContext,
        idempotency_key: Option<&str>,
    ) -> Answer {
        let name = request.name.to_string();
        let Some(entry) = self.entry(&name) else {
            return (
                Outcome::Invalid,
                Err(ErrorData::invalid_params(
                    format!("unknown tool {name}; tools/list names the tools"),
                    None,
                )),
            );
        };
        let caller = principal(ctx);
        let scope = entry.effect.scope();
        // The HTTP layer has already answered 403 for a missing scope; this is the
        // handler's own check, so no path around that layer reaches the backend.
        let allowed = match (self.shared.access, &caller) {
            (Access::Local, _) => true,
            (Access::Token, Some(p)) => p.has_scope(scope),
            (Access::Token, None) => false,
        };
        if !allowed {
            tracing::warn!(tool = ?name, "tool call refused: missing scope {scope}");
            return (
                Outcome::Refused,
                Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "{name} needs the scope {scope}, which this caller's token does not carry"
                ))])
                .into()),
            );
        }
        let tool_call_id = ctx.meta.get(meta::TOOL_CALL).and_then(Value::as_str);
        let backend = self
            .shared
            .backend
            .for_call(trace, person_token(ctx, caller.as_ref()), tool_call_id)
            .with_idempotency_key(idempotency_key);
        let call = Call {
            request: &request,
            ctx,
            caller: caller.as_ref(),
            backend: &backend,
            seal: &self.shared.seal,
        };
        entry.call(&call).await
    }
}
