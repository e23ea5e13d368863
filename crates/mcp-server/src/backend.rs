//! The MCP server's client for the backend API. A caller that acts for a person
//! gets the backend called as that person: its token is exchanged (RFC 8693) for a
//! backend token naming the person and, in `act`, this role and the caller. A caller
//! acting for no person gets the backend called with the role's own
//! client-credentials token. No caller's token is ever passed on as it is. Each
//! request carries the tool call's trace in `traceparent` and its id in
//! `maitred-tool-call-id`; a write carries the caller's idempotency key, if it gave
//! one, in `Idempotency-Key`.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::metrics::BackendLabels;
use secrecy::{ExposeSecret, SecretString};

use maitred_backend::idempotency;
use maitred_core::delegation::{ExchangeError, Exchanger, TOOL_CALL_HEADER};
use maitred_core::metrics::status_class;
use maitred_core::oauth_client::TokenSource;
use maitred_core::trace_context::{TRACEPARENT, TraceContext};

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The backend answered 4xx: the request was wrong, and the message says why.
    #[error("{message}")]
    Rejected {
        status: u16,
        code: String,
        message: String,
        details: Option<Value>,
    },
    /// Down, slow, 5xx, or no token to be had: nothing the caller can fix.
    #[error("{0}")]
    Unavailable(String),
    /// A 2xx answer that is not what its schema says (logged where it is found).
    #[error("the backend's answer cannot be read: {0}")]
    Unreadable(String),
}

/// A cheap handle: clones share the connection pool and the token.
#[derive(Clone)]
pub struct BackendClient {
    shared: Arc<Shared>,
    /// The span requests are made from, sent as their parent.
    trace: Option<TraceContext>,
    /// The person's token this call acts on, to be exchanged for a backend token.
    acting_for: Option<Arc<SecretString>>,
    /// The gateway's tool call behind this call, for the backend's audit.
    tool_call_id: Option<Arc<str>>,
    /// The caller's idempotency key, sent with this call's writes.
    idempotency_key: Option<Arc<str>>,
}

struct Shared {
    http: reqwest::Client,
    /// `<backend>/api/v1/resos`
    api: String,
    tokens: TokenSource,
    /// Trades a person's token for a backend token; `None` where no caller has a
    /// token (stdio).
    exchanger: Option<Exchanger>,
    timeout: Duration,
    requests: Family<BackendLabels, Counter>,
}

/// A list with the total the backend reported in `X-Total-Count`.
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: Option<u64>,
}

impl BackendClient {
    /// Every request (a retry too) is counted on `requests`.
    pub fn new(
        http: reqwest::Client,
        api: String,
        tokens: TokenSource,
        exchanger: Option<Exchanger>,
        timeout: Duration,
        requests: Family<BackendLabels, Counter>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                http,
                api,
                tokens,
                exchanger,
                timeout,
                requests,
            }),
            trace: None,
            acting_for: None,
            tool_call_id: None,
            idempotency_key: None,
        }
    }

    /// This client for one tool call: `trace` as the parent of its requests, the
    /// person's `token` (if the caller acts for one) to act on, `tool_call_id` named.
    pub fn for_call(
        &self,
        trace: TraceContext,
        token: Option<SecretString>,
        tool_call_id: Option<&str>,
    ) -> Self {
        Self {
            shared: self.shared.clone(),
            trace: Some(trace),
            acting_for: token
                .filter(|_| self.shared.exchanger.is_some())
                .map(Arc::new),
            tool_call_id: tool_call_id.map(Arc::from),
            idempotency_key: None,
        }
    }

    /// This client with the caller's idempotency key, sent with its writes (POST,
    /// PUT), never with its reads.
    pub fn with_idempotency_key(self, key: Option<&str>) -> Self {
        Self {
            idempotency_key: key.map(Arc::from),
            ..self
        }
    }

    /// Whether this call reaches the backend as a person.
    pub fn acts_for_a_person(&self) -> bool {
        self.acting_for.is_some()
    }

    pub fn timeout(&self) -> Duration {
        self.shared.timeout
    }

    /// `path`'s answer, read straight into `T`.
    pub async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T, BackendError> {
        let (body, _) = self.send(Method::GET, path, query, None).await?;
        decode(path, &body)
    }

    /// A list, its records read straight into `T`.
    pub async fn list<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<Page<T>, BackendError> {
        let (body, total) = self.send(Method::GET, path, query, None).await?;
        match serde_json::from_slice::<Vec<T>>(&body) {
            Ok(items) => Ok(Page { items, total }),
            Err(error) => match json_or_null(&body) {
                Value::Array(_) => Err(unreadable(path, &error)),
                other => Err(BackendError::Unavailable(format!(
                    "the backend answered {path} with {} instead of a list",
                    kind(&other)
                ))),
            },
        }
    }

    pub async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &Value,
    ) -> Result<T, BackendError> {
        let (answer, _) = self.send(Method::POST, path, &[], Some(body)).await?;
        decode(path, &answer)
    }

    /// A change whose answer is not needed.
    pub async fn put(&self, path: &str, body: &Value) -> Result<(), BackendError> {
        self.send(Method::PUT, path, &[], Some(body)).await?;
        Ok(())
    }

    /// One call, within the timeout; a 401 forces one token refresh and one retry.
    async fn send(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<(Vec<u8>, Option<u64>), BackendError> {
        let shared = &self.shared;
        let count = |status: &'static str| {
            shared
                .requests
                .get_or_create(&BackendLabels {
                    method: method_label(&method),
                    status,
                })
                .inc();
        };
        let call = async {
            let mut token = self.token(None).await?;
            let mut retried = false;
            loop {
                let mut request = shared
                    .http
                    .request(method.clone(), format!("{}{path}", shared.api))
                    .bearer_auth(&token)
                    .query(query);
                if let Some(trace) = &self.trace {
                    request = request.header(TRACEPARENT, trace.header_value());
                }
                if let Some(id) = &self.tool_call_id {
                    request = request.header(TOOL_CALL_HEADER, id.as_ref());
                }
                if let Some(key) = &self.idempotency_key
                    && method != Method::GET
                {
                    request = request.header(idempotency::IDEMPOTENCY_KEY, key.as_ref());
                }
                if let Some(body) = body {
                    request = request.json(body);
                }
                let response = request.send().await.map_err(|e| {
                    count("error");
                    BackendError::Unavailable(format!(
                        "the backend cannot be reached: {}",
                        root_cause(&e)
                    ))
                })?;
                count(status_class(response.status().as_u16()));
                if response.status() == StatusCode::UNAUTHORIZED && !retried {
                    tracing::info!("the backend refused our token; refreshing it once");
                    token = self.token(Some(&token)).await?;
                    retried = true;
                    continue;
                }
                return read(response).await;
            }
        };
        match tokio::time::timeout(shared.timeout, call).await {
            Ok(result) => result,
            Err(_) => {
                count("timeout");
                Err(BackendError::Unavailable(format!(
                    "the backend did not answer within {} s",
                    shared.timeout.as_secs_f64()
                )))
            }
        }
    }

    async fn token(&self, rejected: Option<&str>) -> Result<String, BackendError> {
        if let (Some(person), Some(exchanger)) = (&self.acting_for, &self.shared.exchanger) {
            let subject = person.expose_secret();
            let exchanged = match rejected {
                Some(rejected) => exchanger.refresh(subject, rejected).await,
                None => exchanger.token_for(subject).await,
            };
            return exchanged.map_err(|error| match error {
                ExchangeError::Refused { .. } => {
                    tracing::info!(%error, "the issuer would not let us act for the caller's person");
                    BackendError::Rejected {
                        status: 401,
                        code: "AUTHENTICATION_ERROR".to_owned(),
                        message: format!(
                            "the backend cannot be called for this person: {error}; sign in again"
                        ),
                        details: None,
                    }
                }
                ExchangeError::Unavailable(_) => {
                    tracing::warn!(%error, "no token for the backend");
                    BackendError::Unavailable(format!("cannot get a token for the backend: {error}"))
                }
            });
        }
        let token = match rejected {
            Some(rejected) => self.shared.tokens.refresh(rejected).await,
            None => self.shared.tokens.token().await,
        };
        token.map_err(|e| {
            tracing::warn!(error = format!("{e:#}"), "no token for the backend");
            BackendError::Unavailable(format!("cannot get a token for the backend: {e:#}"))
        })
    }
}

/// A success's body as it came, for the caller to read into its type; a failure's
/// message, code and details.
async fn read(response: reqwest::Response) -> Result<(Vec<u8>, Option<u64>), BackendError> {
    let status = response.status();
    let total = response
        .headers()
        .get("x-total-count")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let body = response.bytes().await.map(Vec::from).unwrap_or_default();
    if status.is_success() {
        return Ok((body, total));
    }
    let body = json_or_null(&body);
    let message = body["message"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| format!("HTTP {status}"));
    if status.is_client_error() {
        Err(BackendError::Rejected {
            status: status.as_u16(),
            code: body["code"]
                .as_str()
                .unwrap_or("INVALID_REQUEST")
                .to_owned(),
            message,
            details: body.get("details").cloned().filter(|d| !d.is_null()),
        })
    } else {
        Err(BackendError::Unavailable(format!(
            "the backend failed ({status}): {message}"
        )))
    }
}

/// A body that is not JSON at all reads as `null`.
fn json_or_null(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or(Value::Null)
}

/// A success's body as `T`; a body that is not JSON at all is read as `null` (which
/// only a `T` that takes `null` accepts).
fn decode<T: DeserializeOwned>(path: &str, body: &[u8]) -> Result<T, BackendError> {
    serde_json::from_slice(body)
        .or_else(|error| {
            if error.is_syntax() || error.is_eof() {
                T::deserialize(Value::Null)
            } else {
                Err(error)
            }
        })
        .map_err(|error| unreadable(path, &error))
}

fn unreadable(path: &str, error: &serde_json::Error) -> BackendError {
    tracing::error!(%error, path, "the backend's answer does not match its schema");
    BackendError::Unreadable(format!("{path}: {error}"))
}

fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        _ => "other",
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Object(_) => "an object",
        _ => "a scalar",
    }
}

fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}
