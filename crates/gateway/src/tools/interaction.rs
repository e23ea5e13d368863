//! What a running tool call hears from its MCP server besides its result: progress,
//! and requests for the person's input (MCP elicitation). The hub passes them to
//! the call's [`CallLink`]; the answer loop, on the other end, shows them and brings
//! the person's answer back.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, JsonObject};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use maitred_protocol::events::{ConnectCard, InputAction};

/// Progress as the server reported it.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// The request it came for: a 2026-07-28 call asks again after each round of
    /// input, with a new progress token, and its progress may start again.
    pub round: u32,
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// What the server asks the person.
#[derive(Debug, Clone, PartialEq)]
pub struct InputAsk {
    pub message: String,
    pub kind: AskKind,
    /// Set when the gateway asks the person to connect their account (not the server).
    pub connect: Option<ConnectCard>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AskKind {
    /// A form: the JSON schema of the answer.
    Form { schema: Value },
    /// A page the person opens themselves.
    Url { url: String },
}

/// The person's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct InputReply {
    pub action: InputAction,
    /// With `accept` of a form: the filled-in fields, checked against the schema.
    pub content: Option<JsonObject>,
}

impl InputReply {
    pub fn only(action: InputAction) -> Self {
        Self {
            action,
            content: None,
        }
    }

    pub(super) fn to_result(&self) -> ElicitResult {
        let action = match self.action {
            InputAction::Accept => ElicitationAction::Accept,
            InputAction::Decline => ElicitationAction::Decline,
            InputAction::Cancel => ElicitationAction::Cancel,
        };
        let mut result = ElicitResult::new(action);
        if self.action == InputAction::Accept {
            result.content = self.content.clone().map(Value::Object);
        }
        result
    }
}

/// One thing a call heard.
#[derive(Debug)]
pub enum CallEvent {
    Progress(Progress),
    Input {
        asked: InputAsk,
        reply: oneshot::Sender<InputReply>,
    },
}

/// Time the call spent waiting for the person, which does not count against the
/// server's timeout: a person may take minutes, a server may not.
#[derive(Debug, Default)]
struct WaitClock {
    waiting_since: Option<Instant>,
    /// How many asks are open at once (a server may ask twice concurrently).
    open: usize,
    waited: Duration,
}

/// The call's end of the link: cloned into the hub's routing of its requests.
#[derive(Debug, Clone)]
pub struct CallLink {
    events: mpsc::Sender<CallEvent>,
    clock: Arc<Mutex<WaitClock>>,
    /// Whether http URLs on this machine may be shown (development only).
    loopback_http: bool,
    /// The request of the call this link serves (0, then one more per input round).
    round: u32,
}

/// Whether a page an MCP server asks the person to open may reach the UI: `https://`
/// only, or `http://` on this machine when `loopback_http` (development). The one
/// rule for a call's question and a background task's alike.
pub(crate) fn url_shown(url: &str, loopback_http: bool) -> bool {
    let Ok(url) = url::Url::parse(url) else {
        return false;
    };
    match (url.scheme(), url.host()) {
        ("https", Some(_)) => true,
        ("http", Some(url::Host::Domain(host))) if loopback_http => {
            host.eq_ignore_ascii_case("localhost")
        }
        ("http", Some(url::Host::Ipv4(ip))) if loopback_http => ip.is_loopback(),
        ("http", Some(url::Host::Ipv6(ip))) if loopback_http => ip.is_loopback(),
        _ => false,
    }
}

/// How many progress reports may wait for the answer loop before newer ones are
/// dropped: it shows at most 4 a second anyway.
const BACKLOG: usize = 64;

impl CallLink {
    pub fn new() -> (Self, mpsc::Receiver<CallEvent>) {
        let (events, receiver) = mpsc::channel(BACKLOG);
        (
            Self {
                events,
                clock: Arc::default(),
                loopback_http: false,
                round: 0,
            },
            receiver,
        )
    }

    pub(super) fn allowing_loopback_http(mut self, allowed: bool) -> Self {
        self.loopback_http = allowed;
        self
    }

    /// The same call's link for its request `round`.
    pub(super) fn for_round(&self, round: u32) -> Self {
        Self {
            round,
            ..self.clone()
        }
    }

    pub(super) fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        let progress = Progress {
            round: self.round,
            progress,
            total,
            message,
        };
        // Full means the loop is behind; it shows only the latest anyway.
        let _ = self.events.try_send(CallEvent::Progress(progress));
    }

    /// Asks the person; `cancel` when the call has already ended.
    pub(super) async fn ask(&self, params: ElicitRequestParams) -> InputReply {
        let asked = match params {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => InputAsk {
                message,
                kind: AskKind::Form {
                    schema: serde_json::to_value(&requested_schema).unwrap_or(Value::Null),
                },
                connect: None,
            },
            ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
                if !self.url_allowed(&url) {
                    tracing::warn!(%url, "an MCP server asked to open a URL that is not https; declined");
                    return InputReply::only(InputAction::Decline);
                }
                InputAsk {
                    message,
                    kind: AskKind::Url { url },
                    connect: None,
                }
            }
            _ => return InputReply::only(InputAction::Decline),
        };
        self.put(asked).await
    }

    /// Asks the person to connect their account at a server: a URL card the gateway
    /// itself shows, which the sign-in's return settles. `cancel` when the page may
    /// not be shown (not https) or the call has ended.
    pub(crate) async fn ask_to_connect(
        &self,
        message: String,
        url: String,
        card: ConnectCard,
    ) -> InputReply {
        if !self.url_allowed(&url) {
            tracing::warn!(%url, "a sign-in page that is not https; not shown");
            return InputReply::only(InputAction::Cancel);
        }
        self.put(InputAsk {
            message,
            kind: AskKind::Url { url },
            connect: Some(card),
        })
        .await
    }

    /// Shows `asked` and waits for the answer.
    async fn put(&self, asked: InputAsk) -> InputReply {
        let (reply, answer) = oneshot::channel();
        self.pause();
        let sent = self.events.send(CallEvent::Input { asked, reply }).await;
        let answer = match sent {
            Ok(()) => answer.await.ok(),
            Err(_) => None,
        };
        self.resume();
        answer.unwrap_or_else(|| InputReply::only(InputAction::Cancel))
    }

    /// Only `https://` pages are shown; `http://` only on this machine, in development.
    fn url_allowed(&self, url: &str) -> bool {
        url_shown(url, self.loopback_http)
    }

    #[cfg(test)]
    pub(super) fn same_as(&self, other: &Self) -> bool {
        self.events.same_channel(&other.events)
    }

    fn clock(&self) -> std::sync::MutexGuard<'_, WaitClock> {
        self.clock.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn pause(&self) {
        let mut clock = self.clock();
        if clock.open == 0 {
            clock.waiting_since = Some(Instant::now());
        }
        clock.open += 1;
    }

    fn resume(&self) {
        let mut clock = self.clock();
        clock.open = clock.open.saturating_sub(1);
        if clock.open == 0
            && let Some(since) = clock.waiting_since.take()
        {
            clock.waited += since.elapsed();
        }
    }

    /// How long the server has had since `started`, the person's time left out;
    /// `None` while the person is being asked.
    pub(super) fn server_time(&self, started: Instant) -> Option<Duration> {
        let clock = self.clock();
        if clock.open > 0 {
            return None;
        }
        Some(started.elapsed().saturating_sub(clock.waited))
    }

    /// Runs `call` within `limit` of the server's own time.
    pub(super) async fn within<T>(
        &self,
        limit: Duration,
        call: impl std::future::Future<Output = T>,
    ) -> Option<T> {
        let started = Instant::now();
        let mut call = std::pin::pin!(call);
        loop {
            let left = match self.server_time(started) {
                Some(used) if used >= limit => return None,
                Some(used) => limit - used,
                // Asking the person: look again in a while.
                None => Duration::from_millis(250),
            };
            tokio::select! {
                result = &mut call => return Some(result),
                () = tokio::time::sleep(left) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_urls_are_shown_and_http_on_this_machine_in_development() {
        let (link, _events) = CallLink::new();
        assert!(link.url_allowed("https://pay.example.com/x"));
        assert!(!link.url_allowed("http://localhost:9000/x"));
        assert!(!link.url_allowed("javascript:alert(1)"));
        assert!(!link.url_allowed("file:///etc/passwd"));
        let dev = link.allowing_loopback_http(true);
        assert!(dev.url_allowed("http://localhost:9000/x"));
        assert!(dev.url_allowed("http://127.0.0.1:9000/x"));
        assert!(!dev.url_allowed("http://example.com/x"));
    }

    #[tokio::test(start_paused = true)]
    async fn the_persons_time_does_not_count_against_the_server() {
        let (link, mut events) = CallLink::new();
        let asking = link.clone();
        let call = async move {
            let reply = asking
                .ask(ElicitRequestParams::UrlElicitationParams {
                    meta: None,
                    message: "open".into(),
                    url: "https://example.com".into(),
                    elicitation_id: String::new(),
                })
                .await;
            tokio::time::sleep(Duration::from_millis(500)).await;
            reply
        };
        let person = async {
            let Some(CallEvent::Input { reply, .. }) = events.recv().await else {
                panic!("no request");
            };
            tokio::time::sleep(Duration::from_secs(10)).await;
            reply.send(InputReply::only(InputAction::Decline)).unwrap();
            std::future::pending::<()>().await;
        };
        let outcome = tokio::select! {
            outcome = link.within(Duration::from_secs(1), call) => outcome,
            () = person => unreachable!(),
        };
        assert_eq!(outcome, Some(InputReply::only(InputAction::Decline)));
    }
}
