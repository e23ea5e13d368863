//! The chat stream's events: the public contract for browsers and curl. Every event
//! goes out with an `id:` (its sequence number within the message) and one JSON
//! `data:` line, so whitespace and newlines inside tokens survive.

use axum::response::sse::Event;
use serde::Serialize;
use serde_json::Value;

use crate::gateway::ids::{ConversationId, MessageId, ToolCallId};

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Ok,
    Error,
    Denied,
    Unavailable,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    Stop,
    Cancelled,
    MaxIterations,
    Error,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ChatEvent {
    Meta {
        conversation_id: ConversationId,
        message_id: MessageId,
        model: String,
        /// Set on a later `meta` when the model changed: the one that could not answer.
        #[serde(skip_serializing_if = "Option::is_none")]
        fallback_from: Option<String>,
    },
    Token {
        text: String,
    },
    ToolCall {
        id: ToolCallId,
        server: String,
        tool: String,
        title: String,
        arguments: Value,
    },
    ApprovalRequired {
        id: ToolCallId,
        server: String,
        tool: String,
        title: String,
        arguments: Value,
        expires_at: String,
    },
    ToolResult {
        id: ToolCallId,
        status: ToolStatus,
        duration_ms: u64,
        summary: String,
    },
    Usage {
        prompt_tokens: u64,
        completion_tokens: u64,
        total_tokens: u64,
    },
    Error {
        code: String,
        message: String,
    },
    Done {
        finish_reason: Finish,
    },
}

impl ChatEvent {
    pub fn name(&self) -> &'static str {
        match self {
            ChatEvent::Meta { .. } => "meta",
            ChatEvent::Token { .. } => "token",
            ChatEvent::ToolCall { .. } => "tool_call",
            ChatEvent::ApprovalRequired { .. } => "approval_required",
            ChatEvent::ToolResult { .. } => "tool_result",
            ChatEvent::Usage { .. } => "usage",
            ChatEvent::Error { .. } => "error",
            ChatEvent::Done { .. } => "done",
        }
    }

    pub fn is_done(&self) -> bool {
        matches!(self, ChatEvent::Done { .. })
    }

    pub fn to_sse(&self, seq: u64) -> Event {
        let data = serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned());
        Event::default()
            .id(seq.to_string())
            .event(self.name())
            .data(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_is_one_json_line_whatever_the_text() {
        let event = ChatEvent::Token {
            text: "two\nlines  ".into(),
        };
        assert_eq!(
            serde_json::to_string(&event).unwrap(),
            r#"{"text":"two\nlines  "}"#
        );
        let done = ChatEvent::Done {
            finish_reason: Finish::MaxIterations,
        };
        assert_eq!(
            serde_json::to_string(&done).unwrap(),
            r#"{"finish_reason":"max_iterations"}"#
        );
    }
}
