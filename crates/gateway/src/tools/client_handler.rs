//! What the gateway says when an MCP server speaks first: its capabilities at the
//! greeting, and its answers to the server's notifications and requests (the tool
//! list changed, progress of a call, a request for the person's input).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, ExtensionCapabilities, FormElicitationCapability, Implementation,
    JsonObject, ProgressNotificationParam, TASKS_EXTENSION_ID, UrlElicitationCapability,
};
use rmcp::service::{InboundStreamOrigin, NotificationContext, RequestContext, RoleClient};
use rmcp::{ClientHandler, ErrorData};

use super::routes::Routes;

#[derive(Clone)]
pub(super) struct Handler {
    pub(super) info: ClientConfig,
    /// Set when the server says its tool list changed: the catalogue is refreshed.
    pub(super) stale: Arc<AtomicBool>,
    /// This connection's calls, for the messages that belong to one of them.
    pub(super) routes: Arc<Routes>,
    pub(super) server: String,
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
pub(super) fn client_info() -> ClientConfig {
    let mut capabilities = ClientCapabilities::default();
    capabilities.elicitation = Some(
        ElicitationCapability::new()
            // The gateway checks the person's answer against the schema itself.
            .with_form(FormElicitationCapability::new().with_schema_validation(true))
            .with_url(UrlElicitationCapability::new()),
    );
    // A call may become a task (SEP-2663): the answer does not wait for it, the
    // gateway's task watcher does (`crate::tasks`).
    let mut extensions = ExtensionCapabilities::new();
    extensions.insert(TASKS_EXTENSION_ID.to_owned(), JsonObject::new());
    capabilities.extensions = Some(extensions);
    ClientConfig::new(
        capabilities,
        Implementation::new("maitred-gateway", env!("CARGO_PKG_VERSION")),
    )
}
