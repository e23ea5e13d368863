//! The chat API's JSON answers, as types: what a client reads is written down once,
//! here, rather than patched together from `json!` values.

use serde::Serialize;
use serde_json::Value;

use super::store::{ConversationSummary, StoredPart, StoredToolCall};
use crate::background::view::TaskView;
use maitred_protocol::events::GroundingEvent;
use maitred_protocol::ids::{
    CallStatus, ConversationId, InputId, MessageId, MessageStatus, PartId, Role, TaskId, ToolCallId,
};

/// `GET /api/v1/resos/conversations/{id}`
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "Conversation"))]
pub struct ConversationView {
    pub id: ConversationId,
    pub title: String,
    pub created_at: String,
    pub updated_at: String,
    /// The questions and the answers' model turns, in order (tool results, which only
    /// the model reads, are left out).
    pub messages: Vec<PartView>,
    /// Its background tasks, oldest first (also at `…/conversations/{id}/tasks`).
    pub tasks: Vec<TaskView>,
}

#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "StoredMessage"))]
pub struct PartView {
    pub id: PartId,
    /// The question or answer this part belongs to: the chat stream's `message_id`.
    pub message_id: Option<MessageId>,
    pub role: Role,
    pub content: Option<String>,
    pub status: MessageStatus,
    pub model: Option<String>,
    pub created_at: String,
    /// For a model turn: the calls it made.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub tool_calls: Option<Vec<ToolCallView>>,
    /// On the turn that holds an answer's final text: its claims checked against the
    /// answer's tool results, as the `grounding` event streamed them.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub grounding: Option<GroundingEvent>,
    /// Set on the parts of an answer that posts a background task's result: its
    /// question is a note from the task, not something the person wrote.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub task_id: Option<TaskId>,
}

#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "StoredToolCall"))]
pub struct ToolCallView {
    pub id: ToolCallId,
    pub server: String,
    pub tool: String,
    /// What people were shown of the call as it streamed (its `tool_call` event's
    /// title); for a call stored before titles were, its tool's name in words.
    pub title: String,
    #[cfg_attr(test, ts(type = "unknown"))]
    pub arguments: Value,
    pub status: CallStatus,
    #[cfg_attr(test, ts(type = "number | null"))]
    pub duration_ms: Option<i64>,
    pub summary: Option<String>,
    pub created_at: String,
}

impl ConversationView {
    pub fn new(
        summary: ConversationSummary,
        parts: Vec<StoredPart>,
        calls: Vec<StoredToolCall>,
    ) -> Self {
        let messages = parts
            .into_iter()
            .filter(|part| part.role != Role::Tool)
            .map(|part| {
                let tool_calls = (part.role == Role::Assistant).then(|| {
                    calls
                        .iter()
                        .filter(|c| c.turn_id == part.id)
                        .map(ToolCallView::from)
                        .collect()
                });
                // Written by this gateway from its own type: one that does not read
                // back is left out rather than failing the conversation.
                let grounding = part
                    .grounding
                    .as_deref()
                    .and_then(|json| serde_json::from_str(json).ok());
                PartView {
                    grounding,
                    id: part.id,
                    message_id: part.message_id,
                    role: part.role,
                    content: part.content,
                    status: part.status,
                    model: part.model,
                    created_at: part.created_at,
                    tool_calls,
                    task_id: None,
                }
            })
            .collect();
        Self {
            id: summary.id,
            title: summary.title,
            created_at: summary.created_at,
            updated_at: summary.updated_at,
            messages,
            tasks: Vec::new(),
        }
    }
}

impl ConversationView {
    /// The conversation's background tasks, and the parts of the answers that post
    /// their results marked with them.
    pub fn with_tasks(mut self, tasks: Vec<TaskView>) -> Self {
        for part in &mut self.messages {
            part.task_id = tasks
                .iter()
                .find(|t| {
                    t.follow_up_message_id.is_some() && part.message_id == t.follow_up_message_id
                })
                .map(|t| t.id.clone());
        }
        self.tasks = tasks;
        self
    }
}

impl From<&StoredToolCall> for ToolCallView {
    fn from(call: &StoredToolCall) -> Self {
        Self {
            id: call.id.clone(),
            server: call.server.clone(),
            tool: call.tool.clone(),
            title: call
                .title
                .clone()
                .unwrap_or_else(|| crate::tools::humanize(&call.tool)),
            arguments: serde_json::from_str(&call.arguments).unwrap_or(Value::Null),
            status: call.status,
            duration_ms: call.duration_ms,
            summary: call.summary.clone(),
            created_at: call.created_at.clone(),
        }
    }
}

/// `POST /api/v1/resos/chat/{message_id}/cancel`
#[derive(Debug, Serialize)]
pub struct Cancelled {
    /// `cancelled`, or `finished` when the answer had already ended.
    pub status: &'static str,
}

/// `POST /api/v1/resos/chat/approvals/{id}`
#[derive(Debug, Serialize)]
pub(crate) struct Decided {
    pub id: ToolCallId,
    /// `approved` or `denied`.
    pub status: &'static str,
}

/// `POST /api/v1/resos/chat/inputs/{id}`
#[derive(Debug, Serialize)]
pub(crate) struct Answered {
    pub id: InputId,
    /// `accepted`, `declined` or `cancelled`.
    pub status: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(title: Option<&str>) -> StoredToolCall {
        StoredToolCall {
            id: ToolCallId::new(),
            turn_id: PartId::new(),
            server: "resos".into(),
            tool: "getTables".into(),
            arguments: r#"{"limit":2}"#.into(),
            title: title.map(str::to_owned),
            status: CallStatus::Ok,
            duration_ms: Some(3),
            summary: Some("2 of 20 records".into()),
            created_at: "2026-11-27T10:00:00Z".into(),
        }
    }

    #[test]
    fn a_call_shows_the_title_it_streamed_with() {
        let view = ToolCallView::from(&stored(Some("Look up tables · limit 2")));
        assert_eq!(view.title, "Look up tables · limit 2");
        // Stored before titles were: its tool's name in words, as the catalogue titles it.
        assert_eq!(ToolCallView::from(&stored(None)).title, "Get tables");
    }
}
