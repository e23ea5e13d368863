//! rmcp's HTTP transport with credentials that change: each request carries the
//! current token, and a 401 forces one (single-flight) refresh and one retry.
//!
//! With delegation, the token depends on the request: a `tools/call` made for a
//! person carries that person's token exchanged for the server (RFC 8693); what no
//! person asks for (initialize, tools/list, notifications) carries the gateway's own.
//! The call names its person by the tool call id in its `_meta`, which the hub
//! registers for the length of the call.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use axum::http::{HeaderName, HeaderValue};
use futures::stream::BoxStream;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Error as SseError, Sse};

use secrecy::{ExposeSecret, SecretString};

use super::credentials::Credentials;
use maitred_core::delegation::ExchangeError;

/// The person's tokens of the calls under way, by tool call id.
#[derive(Default)]
pub(super) struct People(std::sync::Mutex<HashMap<String, SecretString>>);

impl People {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, SecretString>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn of(&self, call: &str) -> Option<SecretString> {
        self.lock().get(call).cloned()
    }
}

/// A call's person, known to the transport until the call ends.
pub(super) struct Acting<'a> {
    people: &'a People,
    call: String,
}

impl Drop for Acting<'_> {
    fn drop(&mut self) {
        self.people.lock().remove(&self.call);
    }
}

#[derive(Clone)]
pub(super) struct AuthedHttp {
    http: reqwest::Client,
    credentials: Arc<Credentials>,
    people: Arc<People>,
    /// The last time the server asked for another sign-in, and why: a person's
    /// session reads it after a failed call to show the right card.
    challenge: Arc<std::sync::Mutex<Option<Challenge>>>,
}

/// The server refused a person's token: it wants them to sign in (again), or to
/// grant more scopes (a step up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Challenge {
    /// 401, or no token could be had; the `WWW-Authenticate` value, if any.
    SignIn(Option<String>),
    /// 403 `insufficient_scope`, with its `WWW-Authenticate`.
    MoreScope(String),
}

type Error = StreamableHttpError<reqwest::Error>;

/// rmcp's transport error has no variant for a token that could not be had: its
/// text carries the [`HubError`](super::HubError) on to the connection's or call's error.
fn no_token(detail: impl std::fmt::Display) -> Error {
    StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
        "no token for the MCP server: {detail}"
    )))
}

impl AuthedHttp {
    pub(super) fn new(http: reqwest::Client, credentials: Credentials) -> Self {
        Self {
            http,
            credentials: Arc::new(credentials),
            people: Arc::default(),
            challenge: Arc::default(),
        }
    }

    fn challenged(&self, challenge: Challenge) {
        *self
            .challenge
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(challenge);
    }

    /// What the server last asked for, once.
    pub(super) fn take_challenge(&self) -> Option<Challenge> {
        self.challenge
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
    }

    /// Whether calls must carry their person's token (delegation).
    pub(super) fn delegates(&self) -> bool {
        matches!(*self.credentials, Credentials::Delegated { .. })
    }

    /// Exchanges `person`'s token for the server now (or finds it kept), so a refusal
    /// (the person's login revoked, their token expired) is told as such before the
    /// call is sent, not as a failure of the transport.
    pub(super) async fn exchange_for(&self, person: &SecretString) -> Result<(), ExchangeError> {
        match &*self.credentials {
            Credentials::Delegated { exchanger, .. } => {
                exchanger.token_for(person.expose_secret()).await.map(drop)
            }
            _ => Ok(()),
        }
    }

    /// Until the returned guard drops, requests of tool call `call` carry `person`'s
    /// token, exchanged for the server.
    pub(super) fn acting_for(&self, call: &str, person: SecretString) -> Acting<'_> {
        self.people.lock().insert(call.to_owned(), person);
        Acting {
            people: &self.people,
            call: call.to_owned(),
        }
    }

    /// The person a message is sent for: a `tools/call` whose `_meta` names a call
    /// under way for one.
    fn person_of(&self, message: &ClientJsonRpcMessage) -> Option<SecretString> {
        let JsonRpcMessage::Request(request) = message else {
            return None;
        };
        let ClientRequest::CallToolRequest(call) = &request.request else {
            return None;
        };
        let id = call
            .params
            .meta
            .as_ref()?
            .get(maitred_protocol::meta::TOOL_CALL)?
            .as_str()?;
        self.people.of(id)
    }
}

impl StreamableHttpClient for AuthedHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let person = self.person_of(&message);
        let custom_headers = with_traceparent(&message, custom_headers);
        let token = match self.credentials.token(person.as_ref()).await {
            Ok(token) => token,
            Err(error) => {
                self.challenged(Challenge::SignIn(None));
                return Err(no_token(error));
            }
        };
        let first = self
            .http
            .post_message(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token.clone(),
                custom_headers.clone(),
            )
            .await;
        let answered = match (first, token) {
            (Err(StreamableHttpError::AuthRequired(refused)), Some(rejected)) => {
                let Some(fresh) = self.credentials.refresh(person.as_ref(), &rejected).await else {
                    self.challenged(Challenge::SignIn(Some(refused.www_authenticate_header)));
                    return Err(no_token(
                        "the server refused the token and no other can be had",
                    ));
                };
                tracing::info!("the MCP server refused our token; retrying once with a fresh one");
                self.http
                    .post_message(uri, message, session_id, Some(fresh), custom_headers)
                    .await
            }
            (other, _) => other,
        };
        match &answered {
            Err(StreamableHttpError::AuthRequired(refused)) => self.challenged(Challenge::SignIn(
                Some(refused.www_authenticate_header.clone()),
            )),
            Err(StreamableHttpError::InsufficientScope(refused)) => self.challenged(
                Challenge::MoreScope(refused.www_authenticate_header.clone()),
            ),
            _ => {}
        }
        answered
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        let token = self.credentials.token(None).await.map_err(no_token)?;
        self.http
            .delete_session(uri, session_id, token, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        let token = self.credentials.token(None).await.map_err(no_token)?;
        self.http
            .get_stream(uri, session_id, last_event_id, token, custom_headers)
            .await
    }
}

/// A request whose `_meta` names its trace carries it in the `traceparent` header
/// too, so the server's HTTP span joins the same trace as its MCP span.
fn with_traceparent(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    let JsonRpcMessage::Request(request) = message else {
        return headers;
    };
    let ClientRequest::CallToolRequest(call) = &request.request else {
        return headers;
    };
    let value = call
        .params
        .meta
        .as_ref()
        .and_then(|meta| meta.get_traceparent())
        .and_then(|value| HeaderValue::from_str(value).ok());
    if let Some(value) = value {
        headers.insert(maitred_core::trace_context::TRACEPARENT, value);
    }
    headers
}
