//! What the Responses API sends, as types: the `response` object, its output items,
//! and the stream's events, with the fields and names of OpenAI's reference (the
//! `openai` SDK's `types/responses`), so every SDK reads them as its own.

use serde::Serialize;
use serde_json::{Map, Value};

use maitred_protocol::ids::{ConversationId, MessageId};

/// A response's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    InProgress,
    Completed,
    Incomplete,
    Failed,
    Cancelled,
}

/// `object: "response"`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResponseObject {
    pub id: String,
    pub object: &'static str,
    pub created_at: i64,
    pub status: Status,
    pub background: bool,
    pub error: Option<ResponseError>,
    pub incomplete_details: Option<Incomplete>,
    pub instructions: Option<String>,
    pub max_output_tokens: Option<u32>,
    pub max_tool_calls: Option<u32>,
    pub metadata: Map<String, Value>,
    pub model: String,
    pub output: Vec<OutputItem>,
    pub parallel_tool_calls: bool,
    pub previous_response_id: Option<String>,
    pub reasoning: Option<Value>,
    pub store: bool,
    pub temperature: Option<f64>,
    pub text: Value,
    pub tool_choice: &'static str,
    /// Always empty: maitred's tools are its MCP servers', not the caller's.
    pub tools: Vec<Value>,
    pub top_p: Option<f64>,
    pub truncation: &'static str,
    pub usage: Option<Usage>,
    pub user: Option<String>,
    /// maitred's extra field, which OpenAI clients keep as an unknown one: where the
    /// answer is stored.
    pub maitred: Stored,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stored {
    pub conversation_id: ConversationId,
    pub message_id: MessageId,
}

/// Why a response failed. `code` is one of OpenAI's (`rate_limit_exceeded` for a
/// spent budget, `server_error` otherwise); `type` is maitred's own code, the chat
/// API's (`budget`, `model_unreachable`, `interrupted`…).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResponseError {
    pub code: &'static str,
    pub message: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub param: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Incomplete {
    pub reason: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub input_tokens_details: InputDetails,
    pub output_tokens: u64,
    pub output_tokens_details: OutputDetails,
    pub total_tokens: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct InputDetails {
    pub cached_tokens: u64,
    pub cache_write_tokens: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OutputDetails {
    pub reasoning_tokens: u64,
}

impl Usage {
    pub fn new(input: u64, output: u64, total: u64) -> Self {
        Self {
            input_tokens: input,
            input_tokens_details: InputDetails {
                cached_tokens: 0,
                cache_write_tokens: 0,
            },
            output_tokens: output,
            output_tokens_details: OutputDetails {
                reasoning_tokens: 0,
            },
            total_tokens: total,
        }
    }
}

/// One item of `output`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputItem {
    /// The answer's text between two tool calls.
    Message(MessageItem),
    /// A call of the gateway's, to one of its MCP servers.
    McpCall(McpCallItem),
    /// A call that changes data waits for the person's approval.
    McpApprovalRequest(ApprovalRequestItem),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemStatus {
    InProgress,
    Completed,
    Incomplete,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MessageItem {
    pub id: String,
    pub role: &'static str,
    pub status: ItemStatus,
    pub content: Vec<OutputText>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutputText {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub text: String,
    pub annotations: Vec<Value>,
    pub logprobs: Vec<Value>,
}

impl OutputText {
    pub fn new(text: String) -> Self {
        Self {
            kind: "output_text",
            text,
            annotations: Vec::new(),
            logprobs: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpCallItem {
    pub id: String,
    /// The MCP server's name in the gateway's configuration.
    pub server_label: String,
    /// The tool's name at its server.
    pub name: String,
    /// The arguments, as a JSON text.
    pub arguments: String,
    /// What the call came to, as maitred shows it (the summary on its card).
    pub output: Option<String>,
    pub error: Option<McpError>,
    pub status: ItemStatus,
    /// Set when the call ran after the person's approval: the request it answered.
    pub approval_request_id: Option<String>,
}

/// A call that ended without a result (an error, a refusal, the server away).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpError {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub content: Vec<TextContent>,
}

impl McpError {
    pub fn text(text: String) -> Self {
        Self {
            kind: "mcp_tool_execution_error",
            content: vec![TextContent { kind: "text", text }],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TextContent {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApprovalRequestItem {
    /// Answered by an `mcp_approval_response` with this `approval_request_id`.
    pub id: String,
    pub server_label: String,
    pub name: String,
    pub arguments: String,
}

/// One event of a response's stream, with its place in it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Numbered {
    #[serde(flatten)]
    pub event: StreamEvent,
    pub sequence_number: u64,
}

/// The stream's events, as OpenAI names them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type")]
pub enum StreamEvent {
    #[serde(rename = "response.created")]
    Created { response: Box<ResponseObject> },
    #[serde(rename = "response.in_progress")]
    InProgress { response: Box<ResponseObject> },
    #[serde(rename = "response.completed")]
    Completed { response: Box<ResponseObject> },
    #[serde(rename = "response.failed")]
    Failed { response: Box<ResponseObject> },
    /// Ended early: out of model turns, or cancelled (OpenAI has no stream event
    /// for a cancelled response; its `status` says `cancelled`).
    #[serde(rename = "response.incomplete")]
    Incomplete { response: Box<ResponseObject> },
    #[serde(rename = "response.output_item.added")]
    ItemAdded {
        output_index: usize,
        item: OutputItem,
    },
    #[serde(rename = "response.output_item.done")]
    ItemDone {
        output_index: usize,
        item: OutputItem,
    },
    #[serde(rename = "response.content_part.added")]
    PartAdded {
        item_id: String,
        output_index: usize,
        content_index: usize,
        part: OutputText,
    },
    #[serde(rename = "response.content_part.done")]
    PartDone {
        item_id: String,
        output_index: usize,
        content_index: usize,
        part: OutputText,
    },
    #[serde(rename = "response.output_text.delta")]
    TextDelta {
        item_id: String,
        output_index: usize,
        content_index: usize,
        delta: String,
        logprobs: Vec<Value>,
    },
    #[serde(rename = "response.output_text.done")]
    TextDone {
        item_id: String,
        output_index: usize,
        content_index: usize,
        text: String,
        logprobs: Vec<Value>,
    },
    #[serde(rename = "response.mcp_call.in_progress")]
    McpCallInProgress {
        item_id: String,
        output_index: usize,
    },
    #[serde(rename = "response.mcp_call_arguments.delta")]
    McpArgumentsDelta {
        item_id: String,
        output_index: usize,
        delta: String,
    },
    #[serde(rename = "response.mcp_call_arguments.done")]
    McpArgumentsDone {
        item_id: String,
        output_index: usize,
        arguments: String,
    },
    #[serde(rename = "response.mcp_call.completed")]
    McpCallCompleted {
        item_id: String,
        output_index: usize,
    },
    #[serde(rename = "response.mcp_call.failed")]
    McpCallFailed {
        item_id: String,
        output_index: usize,
    },
}

impl StreamEvent {
    /// Its `type`, also the SSE `event:` name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Created { .. } => "response.created",
            Self::InProgress { .. } => "response.in_progress",
            Self::Completed { .. } => "response.completed",
            Self::Failed { .. } => "response.failed",
            Self::Incomplete { .. } => "response.incomplete",
            Self::ItemAdded { .. } => "response.output_item.added",
            Self::ItemDone { .. } => "response.output_item.done",
            Self::PartAdded { .. } => "response.content_part.added",
            Self::PartDone { .. } => "response.content_part.done",
            Self::TextDelta { .. } => "response.output_text.delta",
            Self::TextDone { .. } => "response.output_text.done",
            Self::McpCallInProgress { .. } => "response.mcp_call.in_progress",
            Self::McpArgumentsDelta { .. } => "response.mcp_call_arguments.delta",
            Self::McpArgumentsDone { .. } => "response.mcp_call_arguments.done",
            Self::McpCallCompleted { .. } => "response.mcp_call.completed",
            Self::McpCallFailed { .. } => "response.mcp_call.failed",
        }
    }
}

/// `DELETE /v1/responses/{id}`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Deleted {
    pub id: String,
    pub object: &'static str,
    pub deleted: bool,
}
