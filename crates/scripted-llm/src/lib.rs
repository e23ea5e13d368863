//! A scripted, OpenAI-compatible upstream for tests and benchmarks.
//!
//! [`ScriptedLlm`] is an HTTP server that speaks the chat.completions wire
//! format (streaming and not), plays a [`Script`] of [`Turn`]s in order and
//! injects faults on demand. Its output is deterministic down to the byte —
//! fixed ids (`chatcmpl-scripted-<n>` for the n-th request), `created`
//! (`1700000000`) and `system_fingerprint` (`fp_scripted`) — so a client cannot
//! tell it from a real provider except that it always answers the same way.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use std::time::Duration;
//! use maitred_scripted_llm::{Script, ScriptedLlm, ToolCallSpec, Turn};
//!
//! let llm = ScriptedLlm::start(Script::new([
//!     Turn::tool_calls([ToolCallSpec::new("call_1", "search", r#"{"q":"rust"}"#)]),
//!     Turn::text("Found it.").paced(Duration::from_millis(5)),
//!     Turn::status(429).retry_after(2),
//! ]))
//! .await?;
//! let api_base = llm.base_url(); // "http://127.0.0.1:PORT/v1"
//! # let _ = api_base;
//! llm.stop().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Endpoints
//!
//! - `POST /v1/chat/completions`: every request is recorded (see
//!   [`ScriptedLlm::requests`]), then checked like a provider would (API key if
//!   one is set, JSON body, `model`, non-empty `messages`, roles, tool messages
//!   answering exactly the `tool_calls` of the assistant message before them,
//!   tool definitions, `stream_options` only with `stream: true`); a rejected
//!   request gets OpenAI's 400/401 error and does not consume a turn. A script
//!   made `like(Server::LlamaCppPython)` first refuses what that server refuses,
//!   with its HTTP 500 and `{"error":{"message",…,"type":"internal_server_error"}}`
//!   body (see [`Server`]), also without consuming a turn; streamed, such a request
//!   fails after its headers: a 200 whose chunked body ends with no event, and then
//!   the connection closes (10 ms later, as uvicorn does once it has logged the
//!   error), so a request written onto it meanwhile gets no answer. Otherwise
//!   it consumes the next turn; with none left the answer is a 500 whose code
//!   is `script_exhausted`.
//! - `GET /v1/models`: a single model, `scripted`.
//!
//! # Streams
//!
//! A streaming answer is `text/event-stream` with one `data: <json>\n\n` event
//! per chunk: first `{"role":"assistant","content":""}` (or `"content":null,
//! "refusal":null` when the turn opens with tool calls), then the content
//! fragments, then the tool-call deltas (each call's header with `id`, `type`,
//! `function.name` and empty arguments, then its argument pieces, the calls
//! interleaved round-robin), then a chunk with `"delta":{}` and the
//! `finish_reason`, then — only if the request asked for
//! `stream_options.include_usage` — a chunk with `"choices":[]` and the usage,
//! then `data: [DONE]`. As OpenAI does, every chunk before the usage chunk
//! carries `"usage":null` when usage was requested, and no `usage` key when not.
//!
//! Fault positions count data lines from 1, the `[DONE]` line included:
//! `cut_after(n)` sends n of them and then aborts the connection (a broken
//! chunked body, not a clean end); `malformed_at(n)` truncates the n-th one
//! inside its `choices` array. `first_token_delay` waits after the headers
//! and before the first data line; `paced` waits between data lines; `hang`
//! sends the headers and then nothing until the client leaves or the server
//! stops; `hang_up` closes the connection on receiving the request, with no answer
//! at all (the turn is used up, as a server that failed on the request).
//!
//! A request without `"stream": true` gets a complete `chat.completion` object
//! instead. There `cut_after` (any n) sends half the body and then aborts,
//! `malformed_at` (any n) truncates the body, and `paced` does not apply; an
//! error turn answers the same way in both modes.
//!
//! # JSON scripts
//!
//! [`serve_from_file`] (the `maitred scripted-llm` command) reads a script from
//! a JSON object with `"turns"` (played once each) or `"repeat"` (one turn for
//! every request), and optionally `"api_key"` and `"like"` (`"openai"`, the
//! default, or `"llama-cpp-python"`). A turn is a flat object whose
//! fields say what it is:
//!
//! ```json
//! {
//!   "api_key": "sk-test",
//!   "turns": [
//!     { "text": "Hello there, how can I help?" },
//!     { "fragments": ["Hel", "lo"], "paced_ms": 20, "first_token_delay_ms": 300 },
//!     { "text": "Let me look.",
//!       "tool_calls": [
//!         { "id": "call_1", "name": "search", "arguments": { "q": "tables for 4" } },
//!         { "id": "call_2", "name": "hours", "arguments": "{}" }
//!       ],
//!       "argument_pieces": 3, "repeat_ids": false, "without_index": false, "same_index": false },
//!     { "text": "Partial answer", "cut_after": 2 },
//!     { "text": "Broken", "malformed_at": 2 },
//!     { "text": "Counted", "usage": { "prompt_tokens": 10, "completion_tokens": 2 } },
//!     { "status": 429, "retry_after": 2, "message": "slow down" },
//!     { "status": 503 },
//!     { "hang": true },
//!     { "hang_up": true }
//!   ]
//! }
//! ```
//!
//! - `text` (split into words, each with its leading whitespace) or
//!   `fragments` (exact pieces): the content. Alone, a text turn.
//! - `tool_calls`: a tool-call turn; `arguments` is the exact argument text, or
//!   a JSON value sent in compact form. Options: `argument_pieces` (default 3),
//!   `repeat_ids`, and `text`/`fragments` streamed before the calls.
//! - `raw`: a list of SSE data payloads sent exactly as given (`[DONE]` too, when
//!   it is one of them): another server's stream byte for byte.
//! - `status`: an error turn with OpenAI's error body; `retry_after` (seconds)
//!   and `message` optional.
//! - On any turn: `paced_ms`, `first_token_delay_ms`, `usage`, `cut_after`,
//!   `malformed_at`, `without_index`, `same_index` (every call at index 0, as Ollama
//!   streams parallel calls), `hang`, `hang_up`. `{"hang": true}` alone is a turn
//!   that sends headers and then nothing; `{"hang_up": true}` one that closes the
//!   connection unanswered.
//!
//! Unknown fields are rejected, so a typo fails loudly.

mod script;
mod server;
mod validate;
mod wire;

#[cfg(test)]
mod tests;

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use script::{DEFAULT_ARGUMENT_PIECES, Script, Server, ToolCallSpec, Turn, TurnOptions};

use server::Shared;

/// One request received on `/v1/chat/completions`.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The parsed JSON body; a body that is not JSON is kept as a JSON string
    /// holding its raw text.
    pub body: serde_json::Value,
    /// The `Authorization` header as sent, if any.
    pub authorization: Option<String>,
}

/// A running scripted upstream. Dropping it stops the server in the
/// background; [`ScriptedLlm::stop`] waits for it.
pub struct ScriptedLlm {
    shared: Arc<Shared>,
    addr: SocketAddr,
    task: Option<JoinHandle<()>>,
}

impl ScriptedLlm {
    /// Serves `script` on 127.0.0.1 on a free port.
    pub async fn start(script: Script) -> std::io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        Ok(Self::start_on(listener, script))
    }

    /// Like [`ScriptedLlm::start`], and requires `Authorization: Bearer <key>`.
    pub async fn start_with_key(script: Script, key: impl Into<String>) -> std::io::Result<Self> {
        Self::start(script.with_api_key(key)).await
    }

    /// Serves on 127.0.0.1 a model that answers each request with the turn `respond`
    /// chooses from the request's JSON body (its `messages`, `tools`, …), instead of
    /// playing turns in order: for many conversations at once, each at its own step
    /// (soak and chaos runs). Requests are checked and recorded as with a script.
    pub async fn start_responding(
        respond: impl Fn(&serde_json::Value) -> Turn + Send + Sync + 'static,
    ) -> std::io::Result<Self> {
        let llm = Self::start(Script::new([])).await?;
        llm.shared.respond_with(Arc::new(respond));
        Ok(llm)
    }

    /// Serves `script` on an already bound listener.
    pub fn start_on(listener: TcpListener, script: Script) -> Self {
        // A bound listener always has a local address; the fallback only keeps
        // this constructor infallible.
        let addr = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
        let cancel = CancellationToken::new();
        let shared = Arc::new(Shared::new(script, cancel.clone()));
        let app = server::router(Arc::clone(&shared));
        #[expect(
            clippy::disallowed_methods,
            reason = "a test double's server, stopped by its own handle"
        )]
        let task = tokio::spawn(server::serve(listener, app, cancel));
        Self {
            shared,
            addr,
            task: Some(task),
        }
    }

    /// The address to give an OpenAI client as its API base, e.g.
    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        let mut addr = self.addr;
        // A wildcard bind is reachable on loopback; clients cannot dial 0.0.0.0.
        if addr.ip().is_unspecified() {
            addr.set_ip(match addr {
                SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
            });
        }
        format!("http://{addr}/v1")
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every `/v1/chat/completions` request received so far, in order,
    /// including the ones that were rejected.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests()
    }

    /// Streaming responses whose body is still being written.
    pub fn open_streams(&self) -> usize {
        self.shared.open_streams.load(Ordering::SeqCst)
    }

    /// Streaming responses the client closed before the script finished them.
    pub fn closed_early(&self) -> usize {
        self.shared.closed_early.load(Ordering::SeqCst)
    }

    /// Stops accepting, aborts streams still running, and waits for the
    /// server to finish.
    pub async fn stop(mut self) {
        self.shared.cancel.cancel();
        if let Some(mut task) = self.task.take() {
            // Connections a client keeps open without reading could hold a
            // graceful shutdown forever; a test must not hang on that.
            if tokio::time::timeout(Duration::from_secs(5), &mut task)
                .await
                .is_err()
            {
                task.abort();
            }
        }
    }
}

impl Drop for ScriptedLlm {
    fn drop(&mut self) {
        self.shared.cancel.cancel();
    }
}

/// Loads a JSON script (format in the module docs) and serves it on `addr`
/// until Ctrl-C.
pub async fn serve_from_file(path: &Path, addr: SocketAddr) -> anyhow::Result<()> {
    let json = tokio::fs::read_to_string(path)
        .await
        .with_context(|| format!("reading script {}", path.display()))?;
    let script =
        Script::from_json(&json).with_context(|| format!("parsing script {}", path.display()))?;
    let turns = script.turns().len();
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let llm = ScriptedLlm::start_on(listener, script);
    tracing::info!(base_url = %llm.base_url(), turns, "scripted LLM listening");
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    llm.stop().await;
    Ok(())
}
