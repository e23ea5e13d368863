//! The HTTP side: routing, auth, recording, and playing a turn onto the wire.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use futures::StreamExt;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::Layer;

use super::RecordedRequest;
use super::script::{Script, Server, Turn};
use super::validate::{llama_cpp_python, validate};
use super::wire::{self, Ctx};

/// Large enough for any conversation a test builds; axum's 2 MB default is
/// smaller than what a long agent history can reach.
const BODY_LIMIT: usize = 64 * 1024 * 1024;

pub(crate) struct Shared {
    script: Mutex<ScriptState>,
    requests: Mutex<Vec<RecordedRequest>>,
    api_key: Option<String>,
    like: Server,
    pub(crate) open_streams: AtomicUsize,
    pub(crate) closed_early: AtomicUsize,
    pub(crate) cancel: CancellationToken,
}

struct ScriptState {
    turns: VecDeque<Turn>,
    repeat: Option<Turn>,
    /// Chooses each turn from the request's body (see [`crate::ScriptedLlm::start_responding`]).
    respond: Option<Responder>,
}

/// Chooses the turn that answers a request, from its JSON body.
pub(crate) type Responder = Arc<dyn Fn(&Value) -> Turn + Send + Sync>;

/// A poisoned lock only means a test thread panicked while holding it; the
/// data (a list of requests, a queue of turns) is still consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub(crate) fn new(script: Script, cancel: CancellationToken) -> Self {
        let Script {
            turns,
            repeat,
            api_key,
            like,
        } = script;
        let state = if repeat {
            ScriptState {
                repeat: turns.into_iter().next(),
                turns: VecDeque::new(),
                respond: None,
            }
        } else {
            ScriptState {
                turns: turns.into(),
                repeat: None,
                respond: None,
            }
        };
        Self {
            script: Mutex::new(state),
            requests: Mutex::new(Vec::new()),
            api_key,
            like,
            open_streams: AtomicUsize::new(0),
            closed_early: AtomicUsize::new(0),
            cancel,
        }
    }

    pub(crate) fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.requests).clone()
    }

    fn record(&self, body: Value, authorization: Option<String>) -> usize {
        let mut requests = lock(&self.requests);
        requests.push(RecordedRequest {
            body,
            authorization,
        });
        requests.len()
    }

    /// Whether the turn the next request gets calls tools (without taking it).
    fn next_turn_calls_tools(&self) -> bool {
        let state = lock(&self.script);
        let next = state.repeat.as_ref().or_else(|| state.turns.front());
        matches!(next, Some(Turn::ToolCalls { .. }))
    }

    /// Answers every request with the turn `respond` chooses for it.
    pub(crate) fn respond_with(&self, respond: Responder) {
        lock(&self.script).respond = Some(respond);
    }

    fn next_turn(&self, body: &Value) -> Option<Turn> {
        let respond = lock(&self.script).respond.clone();
        if let Some(respond) = respond {
            return Some(respond(body));
        }
        let mut state = lock(&self.script);
        match &state.repeat {
            Some(turn) => Some(turn.clone()),
            None => state.turns.pop_front(),
        }
    }
}

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(shared)
}

/// How long a connection lives on after a streamed request failed after its headers,
/// in `like(Server::LlamaCppPython)`: the time uvicorn takes to log the application's
/// error before it closes the connection.
const CLOSE_AFTER_FAILURE: Duration = Duration::from_millis(10);

/// One client connection, as its requests' handlers see it.
#[derive(Clone, Default)]
pub(crate) struct Connection {
    /// Cancelled: the connection is closed now, with no answer to what it carries.
    hang_up: CancellationToken,
    /// Cancelled: the connection closes in a moment, and answers nothing more.
    closing: CancellationToken,
}

impl Connection {
    /// Closes the connection without an answer: the handler never returns.
    async fn hang_up(&self) -> Response {
        self.hang_up.cancel();
        std::future::pending().await
    }
}

/// Serves `app` on `listener` until `cancel`, one hyper connection per client so
/// that a turn may close it without an answer; then lets the answers in flight end
/// (streams end themselves on `cancel`).
pub(crate) async fn serve(listener: TcpListener, app: Router, cancel: CancellationToken) {
    let connections = TaskTracker::new();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::debug!(%error, "scripted LLM could not accept a connection");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            () = cancel.cancelled() => break,
        };
        // As a provider's edge does: each small SSE write goes out at once instead of
        // waiting for the client's delayed ACK (~40 ms on a kept-alive connection).
        let _ = stream.set_nodelay(true);
        let connection = Connection::default();
        let service = TowerToHyperService::new(Extension(connection.clone()).layer(app.clone()));
        let served = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
        let cancel = cancel.clone();
        connections.spawn(async move {
            let mut served = std::pin::pin!(served);
            // Dropping `served` closes the socket, with whatever it was answering.
            tokio::select! {
                biased;
                () = connection.hang_up.cancelled() => {}
                () = async {
                    connection.closing.cancelled().await;
                    tokio::time::sleep(CLOSE_AFTER_FAILURE).await;
                } => {}
                _ = served.as_mut() => {}
                () = cancel.cancelled() => {
                    served.as_mut().graceful_shutdown();
                    let _ = served.await;
                }
            }
        });
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

fn offers_tools(body: &Value) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .is_some_and(|tools| !tools.is_empty())
}

fn json_response(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn error_response(
    status: StatusCode,
    message: &str,
    param: Option<&str>,
    code: Option<&str>,
) -> Response {
    let body = wire::error_body(message, wire::error_type(status.as_u16()), param, code);
    json_response(status, body)
}

async fn not_found(method: Method, uri: Uri) -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        &format!("Invalid URL ({method} {})", uri.path()),
        None,
        Some("unknown_url"),
    )
}

fn authorization(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

/// The 401 to answer with, unless the request carries the expected key.
fn key_denial(shared: &Shared, authorization: Option<&str>) -> Option<Response> {
    let expected = shared.api_key.as_ref()?;
    let given = authorization.and_then(|a| a.strip_prefix("Bearer "));
    if given == Some(expected.as_str()) {
        return None;
    }
    let message = match given {
        None => "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).".to_owned(),
        Some(key) => format!("Incorrect API key provided: {}.", redact(key)),
    };
    Some(error_response(
        StatusCode::UNAUTHORIZED,
        &message,
        None,
        Some("invalid_api_key"),
    ))
}

/// Like OpenAI, shows only the ends of a wrong key.
fn redact(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    if chars.len() <= 8 {
        return "*".repeat(chars.len());
    }
    let head: String = chars[..3].iter().collect();
    let tail: String = chars[chars.len() - 4..].iter().collect();
    format!("{head}{}{tail}", "*".repeat(chars.len() - 7))
}

async fn models(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Some(denied) = key_denial(&shared, authorization(&headers).as_deref()) {
        return denied;
    }
    json_response(StatusCode::OK, wire::MODELS_BODY.to_owned())
}

/// Characters of text the model would have read, for the token estimate.
/// Counted from strings only so the result does not depend on JSON layout.
fn prompt_chars(body: &Value) -> usize {
    fn text_chars(v: &Value) -> usize {
        match v {
            Value::String(s) => s.chars().count(),
            Value::Array(items) => items.iter().map(text_chars).sum(),
            Value::Object(map) => map.values().map(text_chars).sum(),
            _ => 0,
        }
    }
    body.get("messages").map_or(0, text_chars)
}

async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    Extension(connection): Extension<Connection>,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    let auth = authorization(&headers);
    let parsed = serde_json::from_slice::<Value>(&raw);
    // Unparseable bodies are recorded as the raw text so a test can see what
    // the client actually sent.
    let recorded = match &parsed {
        Ok(v) => v.clone(),
        Err(_) => Value::String(String::from_utf8_lossy(&raw).into_owned()),
    };
    let number = shared.record(recorded, auth.clone());
    tracing::debug!(
        request = number,
        "scripted LLM received a chat completion request"
    );
    if connection.closing.is_cancelled() {
        tracing::debug!(
            request = number,
            "scripted LLM closes the connection a failed stream left, unanswered"
        );
        return connection.hang_up().await;
    }

    if let Some(denied) = key_denial(&shared, auth.as_deref()) {
        return denied;
    }
    let body = match parsed {
        Ok(body) => body,
        Err(_) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)",
                None,
                None,
            );
        }
    };
    if shared.like == Server::LlamaCppPython {
        let streamed = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
        let failure = llama_cpp_python(&body).or_else(|| {
            // Its `chatml-function-calling` handler cannot stream a turn in which it
            // chooses a tool: "Automatic streaming tool choice is not supported".
            (streamed && offers_tools(&body) && shared.next_turn_calls_tools())
                .then(|| "Automatic streaming tool choice is not supported".to_owned())
        });
        if let Some(message) = failure {
            tracing::debug!(request = number, error = %message, streamed, "scripted LLM failed like llama-cpp-python");
            if streamed {
                return failed_stream(&connection);
            }
            // Its error handler's body: `{"error": {...}}`, compact, in this key order.
            let body = wire::error_body(&message, "internal_server_error", None, None);
            return json_response(StatusCode::INTERNAL_SERVER_ERROR, body);
        }
    }
    if let Err(invalid) = validate(&body) {
        tracing::debug!(request = number, error = %invalid.message, "scripted LLM rejected a request");
        return error_response(
            StatusCode::BAD_REQUEST,
            &invalid.message,
            invalid.param.as_deref(),
            invalid.code,
        );
    }
    let Some(turn) = shared.next_turn(&body) else {
        tracing::warn!(request = number, "scripted LLM script has no more turns");
        return error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("The scripted LLM's script has no more turns (request {number} has none)."),
            None,
            Some("script_exhausted"),
        );
    };

    let ctx = Ctx {
        id: format!("chatcmpl-scripted-{number}"),
        model: body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        include_usage: body
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        prompt_chars: prompt_chars(&body),
    };
    let request_id = format!("req_scripted_{number}");
    let streaming = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if turn.options().hang_up {
        tracing::debug!(
            request = number,
            "scripted LLM closes the connection without an answer"
        );
        return connection.hang_up().await;
    }
    let mut response = match &turn {
        Turn::Status { .. } => status_response(&shared, &turn).await,
        _ if streaming => stream_response(&shared, &turn, &ctx),
        _ => completion_response(&shared, &turn, &ctx).await,
    };
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}

/// llama-cpp-python failing a streamed request: its event publisher raises after the
/// headers went out (200, sse-starlette's headers), the chunked body ends with no
/// event, and uvicorn, having logged the error, closes the connection a moment
/// later: a request written onto it meanwhile gets no answer.
fn failed_stream(connection: &Connection) -> Response {
    let closing = connection.closing.clone();
    let body = futures::stream::poll_fn(move |_| {
        closing.cancel();
        std::task::Poll::Ready(None::<io::Result<Bytes>>)
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CACHE_CONTROL, "no-store")
        .header(header::CONNECTION, "keep-alive")
        .header("x-accel-buffering", "no")
        .header(header::CONTENT_TYPE, "text/event-stream; charset=utf-8")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| shutting_down())
}

/// Waits `delay`, or forever when `hang`; `false` if the server stopped first.
async fn wait(shared: &Shared, delay: Duration, hang: bool) -> bool {
    tokio::select! {
        () = shared.cancel.cancelled() => false,
        () = async {
            if hang {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(delay).await;
        } => true,
    }
}

fn shutting_down() -> Response {
    error_response(
        StatusCode::SERVICE_UNAVAILABLE,
        "The scripted LLM is shutting down.",
        None,
        None,
    )
}

async fn status_response(shared: &Shared, turn: &Turn) -> Response {
    let Turn::Status {
        status,
        retry_after,
        message,
        options,
    } = turn
    else {
        return shutting_down();
    };
    if !wait(shared, options.first_token_delay, options.hang).await {
        return shutting_down();
    }
    let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let code = status.as_u16();
    let message = message
        .as_deref()
        .unwrap_or_else(|| wire::default_error_message(code));
    let mut response = error_response(status, message, None, wire::default_error_code(code));
    if let Some(secs) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(*secs));
    }
    response
}

async fn completion_response(shared: &Shared, turn: &Turn, ctx: &Ctx) -> Response {
    let options = turn.options();
    if !wait(shared, options.first_token_delay, options.hang).await {
        return shutting_down();
    }
    let body = wire::completion_body(turn, ctx);
    match options.cut_after {
        None => json_response(StatusCode::OK, body),
        Some(_) => {
            // Half a body and then an aborted connection: what a client sees
            // when the provider dies mid-response.
            let half: String = body.chars().take(body.chars().count() / 2).collect();
            let stream = futures::stream::once(async move { Ok(Bytes::from(half)) }).chain(
                futures::stream::once(async {
                    // See `Player::next`: give hyper a moment to flush first.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "scripted cut",
                    ))
                }),
            );
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                Body::from_stream(stream),
            )
                .into_response()
        }
    }
}

fn stream_response(shared: &Arc<Shared>, turn: &Turn, ctx: &Ctx) -> Response {
    let options = turn.options();
    let mut lines: VecDeque<Bytes> = wire::stream_events(turn, ctx).into();
    let abort_at_end = match options.cut_after {
        Some(n) => {
            lines.truncate(n);
            true
        }
        None => false,
    };
    let player = Player {
        lines,
        abort_at_end,
        hang: options.hang,
        first_delay: options.first_token_delay,
        pace: options.paced,
        started: false,
        done: false,
        guard: StreamGuard::new(Arc::clone(shared)),
    };
    let stream = futures::stream::unfold(player, Player::next);
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| shutting_down())
}

/// Counts a stream as open for as long as hyper holds its body, and as closed
/// early if the body is dropped before the script reached its end — which, in
/// a server, only happens when the client went away.
struct StreamGuard {
    shared: Arc<Shared>,
    finished: bool,
}

impl StreamGuard {
    fn new(shared: Arc<Shared>) -> Self {
        shared.open_streams.fetch_add(1, Ordering::SeqCst);
        Self {
            shared,
            finished: false,
        }
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.shared.closed_early.fetch_add(1, Ordering::SeqCst);
            tracing::debug!("scripted LLM stream closed by the client before its end");
        }
        self.shared.open_streams.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Plays the data lines of one streaming turn with its timing and faults.
struct Player {
    lines: VecDeque<Bytes>,
    abort_at_end: bool,
    hang: bool,
    first_delay: Duration,
    pace: Duration,
    started: bool,
    done: bool,
    guard: StreamGuard,
}

impl Player {
    async fn next(mut self) -> Option<(io::Result<Bytes>, Self)> {
        if self.done {
            return None;
        }
        let delay = if self.started {
            self.pace
        } else {
            self.first_delay
        };
        self.started = true;
        let has_next = !self.lines.is_empty();
        if (has_next || self.hang) && !wait(&self.guard.shared, delay, self.hang).await {
            // Stopping the server is not the client closing early.
            self.guard.finished = true;
            self.done = true;
            let err = io::Error::new(io::ErrorKind::ConnectionAborted, "scripted LLM stopped");
            return Some((Err(err), self));
        }
        match self.lines.pop_front() {
            Some(line) => {
                if self.lines.is_empty() && !self.abort_at_end {
                    self.guard.finished = true;
                }
                Some((Ok(line), self))
            }
            None if self.abort_at_end => {
                // Let hyper flush what was already yielded: it writes buffered
                // chunks only when the body stops being ready, and an error
                // right behind a chunk would tear the connection down first.
                tokio::time::sleep(Duration::from_millis(10)).await;
                self.guard.finished = true;
                self.done = true;
                let err = io::Error::new(io::ErrorKind::ConnectionAborted, "scripted cut");
                Some((Err(err), self))
            }
            None => {
                self.guard.finished = true;
                None
            }
        }
    }
}
