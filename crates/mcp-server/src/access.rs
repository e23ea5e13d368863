//! Who may reach the MCP endpoint, as HTTP middleware in front of rmcp: bearer
//! tokens for this resource (RFC 9728 metadata tells clients where to get them), a
//! 403 `insufficient_scope` for a tool call the token's scopes do not cover, and
//! sessions that answer only the subject that started them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId,
};
use serde_json::{Value, json};

use super::catalogue::{Effect, READ_SCOPE, WRITE_SCOPE};
use super::error::McpHttpError;
use super::server::McpServer;
use maitred_core::auth::{AuthErrorKind, Principal, TokenVerifier, authenticate};

/// Largest JSON-RPC body inspected for its tool name (rmcp enforces its own limit).
const MAX_INSPECTED_BODY: usize = 4 * 1024 * 1024;

/// RFC 9728 Protected Resource Metadata for `/mcp`.
pub(super) fn resource_metadata(resource: &str, issuer: &str) -> Value {
    json!({
        "resource": resource,
        "authorization_servers": [issuer],
        "scopes_supported": [READ_SCOPE, WRITE_SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": "maitred restaurant MCP server",
    })
}

pub(super) async fn metadata_document(State(document): State<Arc<Value>>) -> Json<Value> {
    Json(document.as_ref().clone())
}

/// Every request needs a valid token for this resource carrying an MCP scope; a
/// delegated token (one that names clients acting for its subject) only from a
/// trusted client.
pub(super) async fn require_token(
    State((verifier, trusted_actors)): State<(Arc<TokenVerifier>, Arc<[String]>)>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let principal = match authenticate(&mut parts, &verifier).await {
        Ok(principal) => principal,
        Err(error) => return McpHttpError::from(error).into_response(),
    };
    if let Some(actor) = principal.actors.first()
        && !trusted_actors.contains(actor)
    {
        tracing::warn!(actor = ?actor, subject = ?principal.subject, "refused a delegated token from a client not trusted to act for people");
        return McpHttpError::from(verifier.error(
            AuthErrorKind::InvalidToken,
            format!(
                "this MCP server takes delegated tokens only from {}",
                trusted_actors.join(", ")
            ),
        ))
        .into_response();
    }
    if !principal.has_scope(READ_SCOPE) && !principal.has_scope(WRITE_SCOPE) {
        return McpHttpError::from(verifier.error(
            AuthErrorKind::InsufficientScope {
                required: READ_SCOPE.to_owned(),
            },
            "the MCP server needs a token with mcp.read (and mcp.write for write tools)",
        ))
        .into_response();
    }
    next.run(Request::from_parts(parts, body)).await
}

/// A `tools/call` of a write tool needs `mcp.write`, of a read tool `mcp.read`: the
/// step-up answer of the MCP authorization spec, decided before rmcp sees the call.
pub(super) async fn require_tool_scope(
    State((server, verifier)): State<(McpServer, Arc<TokenVerifier>)>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != axum::http::Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match to_bytes(body, MAX_INSPECTED_BODY).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return McpHttpError::Body(format!(
                "the body is larger than {MAX_INSPECTED_BODY} bytes"
            ))
            .into_response();
        }
    };
    let principal = parts.extensions.get::<Principal>();
    if let (Some(principal), Ok(message)) = (principal, serde_json::from_slice::<Value>(&bytes)) {
        let messages = match &message {
            Value::Array(batch) => batch.iter().collect(),
            single => vec![single],
        };
        for message in messages {
            if message["method"] != "tools/call" {
                continue;
            }
            let Some(entry) = message["params"]["name"]
                .as_str()
                .and_then(|name| server.entry(name))
            else {
                continue;
            };
            let scope = entry.effect.scope();
            if !principal.has_scope(scope) {
                let what = if entry.effect == Effect::Read {
                    "reads"
                } else {
                    "changes data"
                };
                return McpHttpError::from(verifier.error(
                    AuthErrorKind::InsufficientScope {
                        required: scope.to_owned(),
                    },
                    format!("{} {what} and needs the scope {scope}", entry.tool.name),
                ))
                .into_response();
            }
        }
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// How long a session nobody uses still counts: rmcp ends one idle this long
/// (its `SessionConfig` keep-alive), so past it the session is gone.
const SESSION_IDLE: Duration = Duration::from_secs(300);

/// Which subject started which session (legacy revision only: 2026-07-28 has none),
/// and the caps on how many one subject, and everyone, may hold open at once.
#[derive(Clone)]
pub struct SessionOwners {
    held: Arc<Mutex<HashMap<String, Held>>>,
    per_subject: usize,
    in_all: usize,
}

struct Held {
    subject: String,
    seen: Instant,
}

/// A session not opened: its subject, or everyone, holds as many as they may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SessionsCapped {
    Caller(usize),
    Everyone(usize),
}

impl SessionOwners {
    pub fn new(per_subject: usize, in_all: usize) -> Self {
        Self {
            held: Arc::default(),
            per_subject,
            in_all,
        }
    }

    fn owner(&self, id: &str) -> Option<String> {
        let mut held = self.lock();
        let entry = held.get_mut(id)?;
        entry.seen = Instant::now();
        Some(entry.subject.clone())
    }

    /// Holds a place for a session `subject` is opening, unless it or everyone is
    /// at the cap; the place is counted until [`Self::bind`] or [`Self::release`].
    fn reserve(&self, subject: &str) -> Result<String, SessionsCapped> {
        let mut held = self.lock();
        held.retain(|_, h| h.seen.elapsed() < SESSION_IDLE);
        if held.len() >= self.in_all {
            return Err(SessionsCapped::Everyone(self.in_all));
        }
        let theirs = held.values().filter(|h| h.subject == subject).count();
        if theirs >= self.per_subject {
            return Err(SessionsCapped::Caller(self.per_subject));
        }
        let place = format!("opening:{}", maitred_core::random::token(12));
        held.insert(
            place.clone(),
            Held {
                subject: subject.to_owned(),
                seen: Instant::now(),
            },
        );
        Ok(place)
    }

    fn release(&self, place: &str) {
        self.lock().remove(place);
    }

    fn bind(&self, id: String, subject: String) {
        self.lock().insert(
            id,
            Held {
                subject,
                seen: Instant::now(),
            },
        );
    }

    fn forget(&self, id: &str) {
        self.lock().remove(id);
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Whether a JSON-RPC body is (or holds) an `initialize`: a 2025-11-25 session opens.
fn opens_session(body: &[u8]) -> bool {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Array(batch)) => batch.iter().any(|m| m["method"] == "initialize"),
        Ok(message) => message["method"] == "initialize",
        Err(_) => false,
    }
}

/// A session id presented by another subject than the one that created it is refused.
/// A delegated token belongs to the session of the client that presents it (its
/// newest actor): one gateway session carries the calls of many people. An
/// `initialize` past the subject's cap, or everyone's, is refused (429) and opens
/// nothing.
pub(super) async fn bind_sessions(
    State(owners): State<SessionOwners>,
    request: Request,
    next: Next,
) -> Response {
    let subject = request
        .extensions()
        .get::<Principal>()
        .map(|p| p.actors.first().unwrap_or(&p.subject).clone())
        .unwrap_or_default();
    let presented = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(id) = &presented
        && let Some(owner) = owners.owner(id)
        && owner != subject
    {
        tracing::warn!(session = ?id, subject = ?subject, "refused a session started by another subject");
        return McpHttpError::ForeignSession.into_response();
    }
    let mut request = request;
    let mut place = None;
    if presented.is_none() && request.method() == axum::http::Method::POST {
        let (parts, body) = request.into_parts();
        let Ok(bytes) = to_bytes(body, MAX_INSPECTED_BODY).await else {
            return McpHttpError::Body(format!(
                "the body is larger than {MAX_INSPECTED_BODY} bytes"
            ))
            .into_response();
        };
        if opens_session(&bytes) {
            match owners.reserve(&subject) {
                Ok(reserved) => place = Some(reserved),
                Err(capped) => {
                    tracing::warn!(subject = ?subject, ?capped, "refused a new MCP session: at the cap");
                    return McpHttpError::TooManySessions(capped).into_response();
                }
            }
        }
        request = Request::from_parts(parts, Body::from(bytes));
    }
    let ending = request.method() == axum::http::Method::DELETE;
    let mut response = next.run(request).await;
    // rmcp accepts a DELETE with 202; clients (the Python SDK among them) expect the
    // session to be gone when it succeeds, which 204 says plainly.
    if ending && response.status() == axum::http::StatusCode::ACCEPTED {
        *response.status_mut() = axum::http::StatusCode::NO_CONTENT;
    }
    if let Some(place) = &place {
        owners.release(place);
    }
    if presented.is_none()
        && let Some(created) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
    {
        owners.bind(created.to_owned(), subject);
    }
    response
}

/// rmcp's session manager, forgetting a session's owner when the session ends.
pub(super) struct OwnedSessions<M> {
    inner: M,
    owners: SessionOwners,
}

impl<M> OwnedSessions<M> {
    pub(super) fn new(inner: M, owners: SessionOwners) -> Self {
        Self { inner, owners }
    }
}

impl<M: SessionManager> SessionManager for OwnedSessions<M> {
    type Error = M::Error;
    type Transport = M::Transport;

    fn create_session(
        &self,
    ) -> impl Future<Output = Result<(SessionId, Self::Transport), Self::Error>> + Send {
        self.inner.create_session()
    }

    fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<ServerJsonRpcMessage, Self::Error>> + Send {
        self.inner.initialize_session(id, message)
    }

    fn has_session(
        &self,
        id: &SessionId,
    ) -> impl Future<Output = Result<bool, Self::Error>> + Send {
        self.inner.has_session(id)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.owners.forget(id);
        self.inner.close_session(id).await
    }

    fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> impl Future<
        Output = Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error>,
    > + Send {
        self.inner.create_stream(id, message)
    }

    fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.accept_message(id, message)
    }

    fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> impl Future<
        Output = Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error>,
    > + Send {
        self.inner.create_standalone_stream(id)
    }

    fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> impl Future<
        Output = Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error>,
    > + Send {
        self.inner.resume(id, last_event_id)
    }

    fn restore_session(
        &self,
        id: SessionId,
    ) -> impl Future<Output = Result<RestoreOutcome<Self::Transport>, Self::Error>> + Send {
        self.inner.restore_session(id)
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}
