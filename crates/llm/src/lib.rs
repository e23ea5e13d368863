//! The model side of the chat: one interface over any OpenAI-compatible endpoint and
//! the built-in offline model. A model gets the conversation and the tools, and
//! answers with a stream of events: text fragments, tool-call fragments (assembled
//! by `index` by the caller), usage, and why it finished.

pub mod budget;
pub mod limits;
pub mod openai;
pub mod output;
pub mod results;
pub mod router;
pub mod schema;
pub mod text_calls;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The gateway's own tool that finds the tools not sent with every question (when
/// there are too many): `{"query": "a few words"}` answers with the best matching
/// tools, a line each, which are offered from the next turn on. A model calls it as
/// any other tool; the offline model does when nothing it is offered fits.
pub const SEARCH_TOOLS: &str = "search_tools";

/// One message of the conversation as a model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        content: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

/// A complete tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    /// The tool's name as offered to the model (`server__tool`).
    pub name: String,
    /// The arguments as the model wrote them: JSON text, possibly invalid.
    pub arguments: String,
}

/// A tool as offered to a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    /// `^[a-zA-Z0-9_-]{1,64}$`, e.g. `resos__getCustomers`.
    pub name: String,
    /// A short human title, when the server gave one.
    pub title: Option<String>,
    pub description: String,
    /// The input JSON Schema (an object schema).
    pub parameters: Value,
    /// From the server's `readOnlyHint`: the tool changes nothing.
    pub read_only: bool,
}

/// A prompt's estimated tokens, by part (see [`budget::estimate_tokens`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PromptSize {
    pub system: usize,
    pub user: usize,
    pub assistant: usize,
    /// Tool results (in text mode, the user turns that carry them are counted here).
    pub tool: usize,
    /// The tool definitions in the request (in text mode they are in `system`).
    pub tools: usize,
}

impl PromptSize {
    pub fn parts(&self) -> [(&'static str, usize); 5] {
        [
            ("system", self.system),
            ("user", self.user),
            ("assistant", self.assistant),
            ("tool", self.tool),
            ("tools", self.tools),
        ]
    }

    pub fn total(&self) -> usize {
        self.parts().iter().map(|(_, n)| n).sum()
    }
}

#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    pub tools: Vec<ToolDef>,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    /// The model must answer now: `tools` are not offered to it, only read from
    /// its text, so a call it writes anyway is not shown as the answer.
    pub answer_only: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, more: Usage) {
        self.prompt_tokens += more.prompt_tokens;
        self.completion_tokens += more.completion_tokens;
        self.total_tokens += more.total_tokens;
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    ToolCalls,
    Length,
    ContentFilter,
    Other(String),
}

/// What a model streams back.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// A fragment of the answer's text.
    Text(String),
    /// A fragment of a tool call. Fragments with one `index` make one call; `id` and
    /// `name` may come in the first fragment only, or be repeated in every one.
    ToolCallDelta {
        index: u32,
        id: Option<String>,
        name: Option<String>,
        arguments: Option<String>,
    },
    Usage(Usage),
    Finished(FinishReason),
}

impl ModelEvent {
    /// The fragment of text, if this is one.
    pub fn text(&self) -> Option<&str> {
        match self {
            Self::Text(text) => Some(text),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum ModelError {
    /// 429: the provider wants us to slow down.
    #[error("the model provider is rate limiting requests")]
    RateLimited {
        retry_after: Option<std::time::Duration>,
    },
    /// A 4xx or 5xx answer to the request itself (a 503 may say when to retry).
    #[error("the model provider answered {status}: {message}")]
    Upstream {
        status: u16,
        message: String,
        retry_after: Option<std::time::Duration>,
    },
    /// No connection, or the connection broke.
    #[error("cannot reach the model provider: {0}")]
    Connection(String),
    /// The stream said something that is not the chat-completions format.
    #[error("the model provider sent a malformed stream: {0}")]
    Protocol(String),
    #[error("the model provider did not answer in time: {0}")]
    Timeout(String),
    /// Our own limits for the model (concurrency, requests per minute) stayed full.
    #[error("the model is busy: {0}")]
    Busy(String),
}

pub type EventStream = BoxStream<'static, Result<ModelEvent, ModelError>>;

/// A chat model: a name for `meta.model`, and a streaming completion.
pub trait ChatModel: Send + Sync {
    fn name(&self) -> &str;

    /// Starts one completion. Dropping the stream must abort the request upstream.
    fn stream(&self, request: ChatRequest) -> BoxFuture<'_, Result<EventStream, ModelError>>;

    /// How long this model may take to its first token, if not the gateway's
    /// default (a small model on slow hardware reads its prompt for a while).
    fn first_token_timeout(&self) -> Option<std::time::Duration> {
        None
    }

    /// A model marked small in its profile: the answer loop keeps it from calling
    /// the same tool again and again.
    fn small(&self) -> bool {
        false
    }

    /// The estimated size, by part, of the prompt `request` makes for this model, as
    /// it would be sent (tools fitted to its budget, results to theirs).
    fn prompt_size(&self, request: &ChatRequest) -> Option<PromptSize> {
        let _ = request;
        None
    }

    /// What becomes of figures of its answers that no tool result states.
    fn grounding(&self) -> maitred_core::settings::GroundingMode {
        maitred_core::settings::GroundingMode::Flag
    }

    /// Whether this model's profile asks for it to be warmed up at start.
    fn wants_warm_up(&self) -> bool {
        false
    }

    /// Sends `request` for one token and drops the answer: a local server keeps the
    /// prompt it read (llama.cpp's prompt cache), so the first question shares it.
    fn warm_up(&self, request: ChatRequest) -> BoxFuture<'_, Result<(), ModelError>> {
        let _ = request;
        Box::pin(async { Ok(()) })
    }
}
