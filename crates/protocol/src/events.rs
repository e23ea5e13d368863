//! The chat stream's events: the public contract for browsers and curl. Every event
//! goes out with an `id:` (its sequence number within the message) and one JSON
//! `data:` line, so whitespace and newlines inside tokens survive.
//!
//! The web UI's TypeScript types for them are generated from these (see
//! `bindings.rs`), so the two cannot drift apart.

use serde::Serialize;
use serde_json::Value;

use crate::ids::{CallStatus, ConversationId, InputId, MessageId, ToolCallId};

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename = "ToolResultStatus"))]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Ok,
    Error,
    Denied,
    Unavailable,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename = "FinishReason"))]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    Stop,
    Cancelled,
    MaxIterations,
    Error,
}

/// Always first; again when a fallback model takes over.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TokenEvent {
    pub text: String,
}

/// A call is starting.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
    pub expires_at: String,
}

/// The person's answer to a request for input (MCP's elicitation actions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum InputAction {
    Accept,
    Decline,
    /// Dismissed without a choice; also a request nobody answered in time.
    Cancel,
}

/// A request for input was answered, or expired (`cancel`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct InputResolvedEvent {
    pub id: InputId,
    pub action: InputAction,
}

/// A running call's progress as its server reports it (at most 4 a second per call).
#[derive(Debug, Clone, PartialEq, Serialize)]
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

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ToolResultEvent {
    pub id: ToolCallId,
    pub status: ToolStatus,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub duration_ms: u64,
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct UsageEvent {
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub prompt_tokens: u64,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub completion_tokens: u64,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub total_tokens: u64,
}

/// A clear, user-safe message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ErrorEvent {
    pub code: String,
    pub message: String,
}

/// Always last.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct DoneEvent {
    pub finish_reason: Finish,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ChatEvent {
    Meta(MetaEvent),
    Token(TokenEvent),
    ToolCall(ToolCallEvent),
    ApprovalRequired(ApprovalRequiredEvent),
    InputRequired(InputRequiredEvent),
    InputResolved(InputResolvedEvent),
    ToolProgress(ToolProgressEvent),
    ToolResult(ToolResultEvent),
    Usage(UsageEvent),
    Error(ErrorEvent),
    Done(DoneEvent),
}

impl ChatEvent {
    /// The SSE `event:` name.
    pub fn name(&self) -> &'static str {
        match self {
            ChatEvent::Meta(_) => "meta",
            ChatEvent::Token(_) => "token",
            ChatEvent::ToolCall(_) => "tool_call",
            ChatEvent::ApprovalRequired(_) => "approval_required",
            ChatEvent::InputRequired(_) => "input_required",
            ChatEvent::InputResolved(_) => "input_resolved",
            ChatEvent::ToolProgress(_) => "tool_progress",
            ChatEvent::ToolResult(_) => "tool_result",
            ChatEvent::Usage(_) => "usage",
            ChatEvent::Error(_) => "error",
            ChatEvent::Done(_) => "done",
        }
    }

    pub fn is_done(&self) -> bool {
        matches!(self, ChatEvent::Done(_))
    }
}

impl From<ToolStatus> for CallStatus {
    fn from(status: ToolStatus) -> Self {
        match status {
            ToolStatus::Ok => CallStatus::Ok,
            ToolStatus::Error => CallStatus::Error,
            ToolStatus::Denied => CallStatus::Denied,
            ToolStatus::Unavailable => CallStatus::Unavailable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_is_one_json_line_whatever_the_text() {
        let event = ChatEvent::Token(TokenEvent {
            text: "two\nlines  ".into(),
        });
        assert_eq!(
            serde_json::to_string(&event).unwrap(),
            r#"{"text":"two\nlines  "}"#
        );
        let done = ChatEvent::Done(DoneEvent {
            finish_reason: Finish::MaxIterations,
        });
        assert_eq!(
            serde_json::to_string(&done).unwrap(),
            r#"{"finish_reason":"max_iterations"}"#
        );
    }
}
