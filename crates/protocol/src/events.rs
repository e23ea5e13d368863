//! The chat stream's events: the public contract for browsers and curl. Every event
//! goes out with an `id:` (its sequence number within the message) and one JSON
//! `data:` line, so whitespace and newlines inside tokens survive.
//!
//! [`ChatEvent`] is the one description of them: the gateway writes its frames from
//! it, the OpenAI-compatible API reads them back into it, and the web UI's TypeScript
//! types and list of event names are generated from it (see the gateway's
//! `bindings.rs`), so none of them can drift apart.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::{CallStatus, ConversationId, InputId, MessageId, ToolCallId};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename = "FinishReason"))]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    Stop,
    Cancelled,
    MaxIterations,
    Error,
}

/// Always first; again when a fallback model takes over.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct MetaEvent {
    pub conversation_id: ConversationId,
    pub message_id: MessageId,
    pub model: String,
    /// Set on a later `meta` when the model changed: the one that could not answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub fallback_from: Option<String>,
}

/// A fragment of the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TokenEvent {
    pub text: String,
}

/// A call is starting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ToolCallEvent {
    pub id: ToolCallId,
    pub server: String,
    pub tool: String,
    /// A short human text ("Looking up customers · limit 5").
    pub title: String,
    #[cfg_attr(feature = "ts", ts(type = "unknown"))]
    pub arguments: Value,
    /// The person the call is made as (their name), when the server takes delegated
    /// tokens: it reaches the business system as them, not as the gateway.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub acting_as: Option<String>,
}

/// A call waits for the person's approval until `expires_at`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ApprovalRequiredEvent {
    pub id: ToolCallId,
    pub server: String,
    pub tool: String,
    pub title: String,
    #[cfg_attr(feature = "ts", ts(type = "unknown"))]
    pub arguments: Value,
    pub expires_at: String,
}

/// How an MCP server's request for input is shown: a form to fill in, or a URL the
/// person opens themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum InputMode {
    Form,
    Url,
}

impl InputMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Form => "form",
            Self::Url => "url",
        }
    }
}

/// A tool's MCP server asks the person for input (MCP elicitation) until `expires_at`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct InputRequiredEvent {
    pub id: InputId,
    /// The call that asks.
    pub tool_call_id: ToolCallId,
    pub server: String,
    pub tool: String,
    /// The server's words to the person (untrusted text: show it escaped).
    pub message: String,
    pub mode: InputMode,
    /// `form`: the JSON schema of the answer (a flat object of simple fields).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional, type = "unknown"))]
    pub schema: Option<Value>,
    /// `url`: the page to open (https, or http on localhost in development).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub url: Option<String>,
    /// Set when the gateway itself asks the person to connect their account at this
    /// MCP server (a "Connect <server>" card): `url` is the server's sign-in page,
    /// and the card settles by itself once the sign-in comes back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub connect: Option<ConnectCard>,
    pub expires_at: String,
}

/// What a "Connect <server>" card shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ConnectCard {
    /// The MCP server's configured name.
    pub server: String,
    /// The host of the sign-in page, shown so the person knows where they go.
    pub host: String,
    /// Why: `connect` (first time), `reconnect` (the sign-in ended) or `more_access`
    /// (the tool needs more scopes than were granted).
    pub reason: ConnectReason,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum ConnectReason {
    Connect,
    Reconnect,
    MoreAccess,
}

/// The person's answer to a request for input (MCP's elicitation actions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum InputAction {
    Accept,
    Decline,
    /// Dismissed without a choice; also a request nobody answered in time.
    Cancel,
}

/// A request for input was answered, or expired (`cancel`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct InputResolvedEvent {
    pub id: InputId,
    pub action: InputAction,
}

/// A running call's progress as its server reports it (at most 4 a second per call).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ToolProgressEvent {
    pub id: ToolCallId,
    pub progress: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub total: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub message: Option<String>,
}

/// A call ended by itself. Its status is one of [`CallStatus::RESULTS`]: a call the
/// answer left unfinished (`cancelled`, `interrupted`) has no `tool_result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ToolResultEvent {
    pub id: ToolCallId,
    #[cfg_attr(feature = "ts", ts(type = "ToolResultStatus"))]
    pub status: CallStatus,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub duration_ms: u64,
    pub summary: String,
}

/// What kind of value a claim of the answer states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum ClaimKind {
    /// A number of things ("60 customers", "forty bookings").
    Count,
    Number,
    Money,
    Date,
    Time,
    /// A person's or a thing's name, an id or an email address.
    Name,
}

/// Whether a tool result of the answer states the claim's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum ClaimStatus {
    Supported,
    Unsupported,
}

/// A figure, date, time or name the answer states, and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Claim {
    /// As the answer writes it ("forty", "$1,200", "25 November").
    pub text: String,
    /// Its span in the answer's final text, in Unicode code points (`end` excluded).
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub start: u64,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub end: u64,
    pub kind: ClaimKind,
    /// The value it states, written one way: `60`, `1200.50`, `2026-11-25` (or
    /// `--11-25` without a year), `19:00`, a name as written.
    pub value: String,
    pub status: ClaimStatus,
    /// The call whose result states it (the first, when several do); `null` when
    /// none does.
    pub tool_call_id: Option<ToolCallId>,
}

/// The answer's claims checked against its tool calls' results: sent after its text,
/// before `usage` and `done`, and stored with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct GroundingEvent {
    pub claims: Vec<Claim>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct UsageEvent {
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub prompt_tokens: u64,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub completion_tokens: u64,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub total_tokens: u64,
}

/// What is left of the tightest budget that applies to the answer (see
/// docs/operations.md, "Budgets"), sent after each model turn is settled and when a
/// turn is refused. `None`: that budget has no cap of this kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct BudgetEvent {
    /// `person`, `role` or `conversation`.
    pub scope: String,
    /// `total`, `daily` or `monthly` (UTC).
    pub window: String,
    #[cfg_attr(feature = "ts", ts(type = "number | null"))]
    pub remaining_tokens: Option<u64>,
    /// In the prices' currency (US dollars in the examples).
    pub remaining_cost: Option<f64>,
}

/// A clear, user-safe message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ErrorEvent {
    pub code: String,
    pub message: String,
}

/// The answer goes on after the server running it stopped: another replica (or the
/// same process, restarted) took it over from what was stored. Text shown before it
/// stays; a model turn that was streaming starts again after it, so the text that
/// follows may not join it seamlessly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ResumedEvent {
    /// How many times this answer has been taken over, this one included.
    pub attempt: u32,
    /// A clear, user-safe note ("The server running this answer stopped; it goes on.").
    pub message: String,
}

/// Always last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct DoneEvent {
    pub finish_reason: Finish,
}

/// Frames an SSE stream carries, one per event: its name and its data.
macro_rules! chat_events {
    ($($(#[$doc:meta])* $variant:ident($data:ty) => $name:literal,)+) => {
        /// One event of the chat stream. Its serde layout is its SSE frame's: the
        /// `event:` name is the tag, the `data:` the content
        /// (`{"type":"token","data":{"text":"Hi"}}`). The gateway writes the two parts
        /// as the frame's lines ([`ChatEvent::name`], [`ChatEvent::data_json`]) and
        /// reads a frame back with [`ChatEvent::from_frame`].
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[cfg_attr(feature = "ts", derive(ts_rs::TS))]
        #[serde(tag = "type", content = "data")]
        pub enum ChatEvent {
            $($(#[$doc])* #[serde(rename = $name)] $variant($data),)+
        }

        impl ChatEvent {
            /// Every event's name, in the order of the stream's description.
            pub const NAMES: &[&str] = &[$($name),+];

            /// The SSE `event:` name.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Self::$variant(_) => $name,)+
                }
            }

            /// The SSE `data:`: the event's fields as one line of JSON (newlines inside
            /// a text are escaped).
            pub fn data_json(&self) -> serde_json::Result<String> {
                match self {
                    $(Self::$variant(data) => serde_json::to_string(data),)+
                }
            }

            /// The event an SSE frame carries: its `event:` name and `data:` line.
            pub fn from_frame(name: &str, data: &str) -> Result<Self, BadFrame> {
                let bad = |error| BadFrame::Data { name: name.to_owned(), error };
                match name {
                    $($name => serde_json::from_str(data).map(Self::$variant).map_err(bad),)+
                    other => Err(BadFrame::UnknownEvent(other.to_owned())),
                }
            }
        }
    };
}

chat_events! {
    /// Always first; again when a fallback model takes over.
    Meta(MetaEvent) => "meta",
    Token(TokenEvent) => "token",
    ToolCall(ToolCallEvent) => "tool_call",
    ApprovalRequired(ApprovalRequiredEvent) => "approval_required",
    InputRequired(InputRequiredEvent) => "input_required",
    InputResolved(InputResolvedEvent) => "input_resolved",
    ToolProgress(ToolProgressEvent) => "tool_progress",
    ToolResult(ToolResultEvent) => "tool_result",
    /// The answer's figures, dates, times and names, each traced to the call whose
    /// result states it, or marked unsupported.
    Grounding(GroundingEvent) => "grounding",
    Usage(UsageEvent) => "usage",
    /// What is left of the answer's budget, after each model turn.
    Budget(BudgetEvent) => "budget",
    Error(ErrorEvent) => "error",
    /// The answer was taken over after its server stopped, and goes on.
    Resumed(ResumedEvent) => "resumed",
    /// Always last.
    Done(DoneEvent) => "done",
}

impl ChatEvent {
    pub fn is_done(&self) -> bool {
        matches!(self, ChatEvent::Done(_))
    }
}

/// An SSE frame that is no chat event.
#[derive(Debug, thiserror::Error)]
pub enum BadFrame {
    #[error("no chat event is called {0:?}")]
    UnknownEvent(String),
    #[error("the data of a {name} event: {error}")]
    Data {
        name: String,
        #[source]
        error: serde_json::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_of_each() -> Vec<ChatEvent> {
        let call = ToolCallId::new();
        let input = InputId::new();
        vec![
            ChatEvent::Meta(MetaEvent {
                conversation_id: ConversationId::new(),
                message_id: MessageId::new(),
                model: "m".into(),
                fallback_from: Some("n".into()),
            }),
            ChatEvent::Token(TokenEvent { text: "Hi".into() }),
            ChatEvent::ToolCall(ToolCallEvent {
                id: call.clone(),
                server: "resos".into(),
                tool: "getTables".into(),
                title: "Look up tables".into(),
                arguments: serde_json::json!({ "limit": 2 }),
                acting_as: None,
            }),
            ChatEvent::ApprovalRequired(ApprovalRequiredEvent {
                id: call.clone(),
                server: "resos".into(),
                tool: "createBooking".into(),
                title: "Book a table".into(),
                arguments: serde_json::json!({}),
                expires_at: "2026-11-24T12:05:00Z".into(),
            }),
            ChatEvent::InputRequired(InputRequiredEvent {
                id: input.clone(),
                tool_call_id: call.clone(),
                server: "resos".into(),
                tool: "createBooking".into(),
                message: "Who for?".into(),
                mode: InputMode::Url,
                schema: None,
                url: Some("https://example.com/pay".into()),
                connect: None,
                expires_at: "2026-11-24T12:05:00Z".into(),
            }),
            ChatEvent::InputResolved(InputResolvedEvent {
                id: input,
                action: InputAction::Decline,
            }),
            ChatEvent::ToolProgress(ToolProgressEvent {
                id: call.clone(),
                progress: 0.5,
                total: None,
                message: Some("half".into()),
            }),
            ChatEvent::ToolResult(ToolResultEvent {
                id: call,
                status: CallStatus::Unavailable,
                duration_ms: 3,
                summary: "down".into(),
            }),
            ChatEvent::Grounding(GroundingEvent {
                claims: vec![Claim {
                    text: "forty".into(),
                    start: 8,
                    end: 13,
                    kind: ClaimKind::Count,
                    value: "40".into(),
                    status: ClaimStatus::Unsupported,
                    tool_call_id: None,
                }],
            }),
            ChatEvent::Usage(UsageEvent {
                prompt_tokens: 1,
                completion_tokens: 2,
                total_tokens: 3,
            }),
            ChatEvent::Budget(BudgetEvent {
                scope: "role".into(),
                window: "daily".into(),
                remaining_tokens: Some(10),
                remaining_cost: None,
            }),
            ChatEvent::Error(ErrorEvent {
                code: "storage".into(),
                message: "no".into(),
            }),
            ChatEvent::Resumed(ResumedEvent {
                attempt: 1,
                message: "goes on".into(),
            }),
            ChatEvent::Done(DoneEvent {
                finish_reason: Finish::Stop,
            }),
        ]
    }

    #[test]
    fn data_is_one_json_line_whatever_the_text() {
        let event = ChatEvent::Token(TokenEvent {
            text: "two\nlines  ".into(),
        });
        assert_eq!(event.data_json().unwrap(), r#"{"text":"two\nlines  "}"#);
        let done = ChatEvent::Done(DoneEvent {
            finish_reason: Finish::MaxIterations,
        });
        assert_eq!(
            done.data_json().unwrap(),
            r#"{"finish_reason":"max_iterations"}"#
        );
    }

    #[test]
    fn the_tagged_layout_is_the_frame_name_and_data() {
        let names: Vec<&str> = one_of_each().iter().map(ChatEvent::name).collect();
        assert_eq!(names, ChatEvent::NAMES);
        for event in one_of_each() {
            let tagged = serde_json::to_value(&event).unwrap();
            assert_eq!(tagged["type"], event.name());
            let data: Value = serde_json::from_str(&event.data_json().unwrap()).unwrap();
            assert_eq!(tagged["data"], data);
            assert_eq!(serde_json::from_value::<ChatEvent>(tagged).unwrap(), event);
        }
    }

    #[test]
    fn an_unsupported_claim_names_no_call() {
        let event = ChatEvent::Grounding(GroundingEvent {
            claims: vec![Claim {
                text: "60".into(),
                start: 12,
                end: 14,
                kind: ClaimKind::Count,
                value: "60".into(),
                status: ClaimStatus::Unsupported,
                tool_call_id: None,
            }],
        });
        assert_eq!(
            event.data_json().unwrap(),
            r#"{"claims":[{"text":"60","start":12,"end":14,"kind":"count","value":"60","status":"unsupported","tool_call_id":null}]}"#
        );
    }

    #[test]
    fn a_frame_reads_back_as_its_event() {
        for event in one_of_each() {
            let data = event.data_json().unwrap();
            assert_eq!(ChatEvent::from_frame(event.name(), &data).unwrap(), event);
        }
        assert!(matches!(
            ChatEvent::from_frame("message", "{}"),
            Err(BadFrame::UnknownEvent(_))
        ));
        assert!(matches!(
            ChatEvent::from_frame("token", r#"{"txt":"Hi"}"#),
            Err(BadFrame::Data { .. })
        ));
    }
}
