//! A background task as the chat API shows it to its owner.

use chrono::Utc;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::TaskRow;
use maitred_core::db::parse_canonical;
use maitred_protocol::ids::{ConversationId, MessageId, TaskId, TaskStatus, ToolCallId};

/// `GET /api/v1/resos/conversations/{id}/tasks`
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "TaskList"))]
pub struct TaskList {
    pub tasks: Vec<TaskView>,
}

#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "Task"))]
pub struct TaskView {
    pub id: TaskId,
    pub conversation_id: ConversationId,
    /// The answer whose tool call started it, and that call.
    pub message_id: MessageId,
    pub tool_call_id: ToolCallId,
    pub server: String,
    pub tool: String,
    /// What people were shown of the call ("Month report · month 2026-11").
    pub title: String,
    pub status: TaskStatus,
    /// What its server last said of it ("day 12 of 30").
    pub status_message: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub finished_at: Option<String>,
    /// From its start to its end, or to now while it runs.
    #[cfg_attr(test, ts(type = "number"))]
    pub elapsed_ms: i64,
    /// The answer that carries its result, once it has started (watch it at
    /// `GET …/stream/chat/{id}`).
    pub follow_up_message_id: Option<MessageId>,
    /// Why it failed.
    pub error: Option<String>,
    /// While it waits for the person: what it asks.
    pub input: Option<TaskInput>,
}

/// A task's question to the person: a form, as a call's `input_required` card.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "TaskInput"))]
pub struct TaskInput {
    /// The server's key for it, which the answer goes back under.
    #[serde(skip_serializing)]
    #[cfg_attr(test, ts(skip))]
    pub key: String,
    pub message: String,
    /// The form's JSON schema; none: a page to open (`url`).
    #[cfg_attr(test, ts(type = "unknown"))]
    pub schema: Option<Value>,
    pub url: Option<String>,
}

impl TaskInput {
    /// As the row stores it (with its key).
    pub fn stored(&self) -> String {
        serde_json::json!({
            "key": self.key,
            "message": self.message,
            "schema": self.schema,
            "url": self.url,
        })
        .to_string()
    }

    pub fn parse(stored: &str) -> Option<Self> {
        let value: Value = serde_json::from_str(stored).ok()?;
        Some(Self {
            key: value.get("key")?.as_str()?.to_owned(),
            message: value.get("message")?.as_str()?.to_owned(),
            schema: value.get("schema").filter(|s| !s.is_null()).cloned(),
            url: value.get("url").and_then(Value::as_str).map(str::to_owned),
        })
    }
}

impl From<TaskRow> for TaskView {
    fn from(row: TaskRow) -> Self {
        let started = parse_canonical(&row.created_at);
        let ended = row.finished_at.as_deref().and_then(parse_canonical);
        let elapsed_ms = started.map_or(0, |started| {
            (ended.unwrap_or_else(Utc::now) - started)
                .num_milliseconds()
                .max(0)
        });
        Self {
            id: row.id,
            conversation_id: row.conversation_id,
            message_id: row.message_id,
            tool_call_id: row.tool_call_id,
            server: row.server,
            tool: row.tool,
            title: row.title,
            status: row.status,
            status_message: row.status_message,
            created_at: row.created_at,
            updated_at: row.updated_at,
            finished_at: row.finished_at,
            elapsed_ms,
            // Shown once the answer has started: a client that watches it at once
            // must find it.
            follow_up_message_id: row.follow_up_started_at.and(row.follow_up_message_id),
            error: row.error,
            input: row.input.as_deref().and_then(TaskInput::parse),
        }
    }
}
