//! What the answer loop needs from the rest of the gateway, as small traits:
//! where an answer's events go (its viewers), where its parts are stored, the tools,
//! the person's approvals, and the person's answers to a tool's questions. The
//! gateway wires the real ones (`chat::generation`, `chat::store`, `tools::ToolHub`,
//! `chat::approvals`, `chat::inputs`); the loop's tests wire fakes that live in memory.

use async_trait::async_trait;
use rmcp::model::JsonObject;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::auth::ChatUser;
use crate::tools::{CallContext, CallOutcome, Catalogue, InputReply, RegisteredTool, StartedTask};
use maitred_llm::{Message, ToolCall, Usage};
use maitred_protocol::events::ConnectCard;
use maitred_protocol::events::{ChatEvent, GroundingEvent, InputMode};
use maitred_protocol::ids::{
    CallStatus, ConversationId, InputId, MessageId, MessageStatus, PartId, Subject, TaskId,
    ToolCallId,
};
use std::sync::Arc;

/// A part of an answer could not be stored; the answer ends with `storage`.
#[derive(Debug, thiserror::Error)]
#[error("storing the answer: {0:#}")]
pub struct StoreError(#[source] pub anyhow::Error);

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        Self(error.into())
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// The answer a part belongs to.
#[derive(Debug, Clone)]
pub struct AnswerRef {
    pub message: MessageId,
    pub conversation: ConversationId,
    pub owner: Subject,
}

/// A tool call as it starts, for its stored row.
#[derive(Debug, Clone)]
pub struct NewCall<'a> {
    pub id: &'a ToolCallId,
    pub turn: &'a PartId,
    /// The id the model gave the call, which its result must name.
    pub model_call_id: &'a str,
    pub server: &'a str,
    pub tool: &'a str,
    pub arguments: &'a Value,
    /// What people are shown of it ("Look up tables · limit 5"), kept so that a
    /// conversation read later shows the call as it was streamed.
    pub title: &'a str,
    /// The idempotency key sent with the call, for a tool that writes: stored before
    /// the call is sent, so every sending of it carries the same key.
    pub idempotency_key: Option<&'a str>,
}

/// Where an answer's events go: to everyone watching it.
#[async_trait]
pub trait EventSink: Send + Sync {
    /// Sends one event to the viewers; returns its sequence number in the answer.
    async fn publish(&self, event: ChatEvent) -> StoreResult<u64>;
    /// Cancelled when the answer must stop (the person's Stop, or nobody watching).
    fn cancelled(&self) -> CancellationToken;
    /// Stopped by the server going down rather than by the person.
    fn interrupted(&self) -> bool;
}

/// One model turn as it is stored: written when it first has something worth
/// keeping, then rewritten as it grows, and a last time when it ends.
#[derive(Debug, Clone, Copy)]
pub struct TurnRecord<'a> {
    pub part: &'a PartId,
    pub model: &'a str,
    pub text: &'a str,
    pub calls: &'a [ToolCall],
    pub status: MessageStatus,
}

/// The durable parts of an answer.
#[async_trait]
pub trait AnswerStore: Send + Sync {
    /// Writes a model turn: added at the end of the conversation the first time,
    /// updated in place after that.
    async fn save_turn(&self, answer: &AnswerRef, turn: TurnRecord<'_>) -> StoreResult<()>;
    /// What the model is told of one of its calls.
    async fn save_tool_result(
        &self,
        answer: &AnswerRef,
        model_call_id: &str,
        content: &str,
    ) -> StoreResult<()>;
    async fn call_started(&self, answer: &AnswerRef, call: NewCall<'_>) -> StoreResult<()>;
    async fn call_finished(
        &self,
        id: &ToolCallId,
        status: CallStatus,
        duration_ms: u64,
        summary: &str,
    ) -> StoreResult<()>;
    /// Calls the answer left running get the reason it stopped.
    async fn abandon_calls(&self, answer: &MessageId, status: CallStatus) -> StoreResult<()>;
    async fn usage(&self, answer: &AnswerRef, model: &str, usage: Usage) -> StoreResult<()>;
    /// The answer's claims, checked, kept with `part`: the turn that holds its final text.
    async fn save_grounding(&self, part: &PartId, grounding: &GroundingEvent) -> StoreResult<()>;
}

/// The tools of every configured MCP server.
#[async_trait]
pub trait Tools: Send + Sync {
    /// The tools offered to `owner` (everyone's, and their own at servers where each
    /// person signs in).
    async fn catalogue(&self, owner: Option<&str>) -> Arc<Catalogue>;
    async fn call(
        &self,
        tool: &RegisteredTool,
        arguments: JsonObject,
        context: CallContext<'_>,
    ) -> CallOutcome;
}

/// What a call waiting for approval is about.
#[derive(Debug, Clone)]
pub struct ApprovalRequest<'a> {
    pub id: &'a ToolCallId,
    pub answer: &'a AnswerRef,
    pub server: &'a str,
    pub tool: &'a str,
    pub arguments: &'a Value,
}

/// A tool call as it was stored before its answer was taken over.
#[derive(Debug, Clone)]
pub struct StoredCall {
    pub id: ToolCallId,
    pub status: CallStatus,
    /// The key it was sent with, for a tool that writes.
    pub idempotency_key: Option<String>,
}

/// Where an answer stood when its server stopped, read from what was stored.
#[derive(Debug, Clone)]
pub struct Resumption {
    /// The conversation as the model saw it, without the system prompt: the earlier
    /// history, the question, and the answer's stored turns and tool results.
    pub messages: Vec<Message>,
    pub tail: Tail,
}

/// What the answer was doing.
#[derive(Debug, Clone)]
pub enum Tail {
    /// Its model had answered without calling a tool: only its end was missing.
    Answered,
    /// The model is asked (again). `cut`: its last turn was streaming, and its text
    /// (the last message) is what was shown of it.
    Ask { cut: bool },
    /// The last turn's calls without a stored result are finished first, in order.
    Calls { turn: PartId, pending: Vec<Pending> },
}

/// A call of the last turn whose result was not stored.
#[derive(Debug, Clone)]
pub struct Pending {
    /// As the model asked for it.
    pub call: ToolCall,
    /// As it was stored when it started; `None`: it had not started.
    pub stored: Option<StoredCall>,
}

/// Where an approval asked before a takeover stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// It was never asked.
    Never,
    /// It waits for the person.
    Waiting,
    Decided(Verdict),
}

/// How an approval ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Approved,
    /// An earlier approval of this very call, still remembered.
    Remembered,
    Denied,
    Expired,
    Cancelled,
}

/// The person's approvals of write tools.
#[async_trait]
pub trait Approver: Send + Sync {
    /// Whether an earlier approval, still remembered, covers this very call; if so,
    /// that it did is recorded.
    async fn remembered(&self, request: &ApprovalRequest<'_>) -> StoreResult<bool>;
    /// Records the request and starts listening for the answer; returns when it
    /// expires. Only then may the request be shown, or a quick answer finds nothing.
    async fn open(&self, request: &ApprovalRequest<'_>) -> StoreResult<String>;
    /// Where the approval of call `id` stands, for a call sent again after a takeover.
    async fn asked(&self, id: &ToolCallId) -> StoreResult<Asked>;
    /// Waits for the owner's decision, the timeout or `cancel`.
    async fn wait(
        &self,
        request: &ApprovalRequest<'_>,
        cancel: &CancellationToken,
    ) -> StoreResult<Verdict>;
}

/// A tool's MCP server asks the person something in the middle of a call.
#[derive(Debug, Clone)]
pub struct InputRequest<'a> {
    pub id: &'a InputId,
    pub call: &'a ToolCallId,
    pub answer: &'a AnswerRef,
    pub server: &'a str,
    pub tool: &'a str,
    pub message: &'a str,
    pub mode: InputMode,
    /// `form`: the requested schema.
    pub schema: Option<&'a Value>,
    /// `url`: the page to open.
    pub url: Option<&'a str>,
    /// The gateway's own "Connect <server>" card.
    pub connect: Option<&'a ConnectCard>,
}

/// The person's answers to a tool's requests for input.
#[async_trait]
pub trait Inputs: Send + Sync {
    /// Records the request and starts listening for the answer; returns when it
    /// expires. Only then may the request be shown, or a quick answer finds nothing.
    async fn open(&self, request: &InputRequest<'_>) -> StoreResult<String>;
    /// The request went out as the answer's event `seq`: a viewer who comes back
    /// after it is shown the request again while it is open.
    async fn shown(&self, id: &InputId, seq: u64) -> StoreResult<()>;
    /// Waits for the owner's answer; the timeout and `cancel` are a `cancel`.
    async fn wait(
        &self,
        request: &InputRequest<'_>,
        cancel: &CancellationToken,
    ) -> StoreResult<InputReply>;
}

/// A call its server runs as a task, handed over by the answer that made it.
#[derive(Debug, Clone)]
pub struct NewTask<'a> {
    pub answer: &'a AnswerRef,
    pub user: &'a ChatUser,
    pub call: &'a ToolCallId,
    /// The id the model gave the call: the follow-up answer shows the model its
    /// call and, under that id, the result.
    pub model_call_id: &'a str,
    pub server: &'a str,
    pub tool: &'a str,
    /// The tool's name as the model knows it.
    pub exposed: &'a str,
    pub title: &'a str,
    pub arguments: &'a Value,
    pub started: &'a StartedTask,
}

/// What became of a task handed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Adopted {
    /// Followed from now on, under this id.
    Followed(TaskId),
    /// The person (or the server) has `limit` tasks running already: it is cancelled.
    OverLimit { limit: usize, whose: &'static str },
}

/// The tasks the cluster follows after the answers that started them have ended.
#[async_trait]
pub trait BackgroundTasks: Send + Sync {
    async fn adopt(&self, task: NewTask<'_>) -> StoreResult<Adopted>;
}

/// A model turn's worst case, reserved before it runs against every budget that
/// applies to the person, their roles and the conversation.
#[derive(Debug, Clone)]
pub struct BudgetAsk<'a> {
    pub answer: &'a AnswerRef,
    pub roles: &'a [String],
    /// The estimated prompt.
    pub input_tokens: u64,
    /// The turn's output cap.
    pub output_tokens: u64,
}

/// What is left of one budget, in tokens and micro-units of money (`None`: no cap).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remaining {
    pub scope: String,
    pub window: String,
    pub tokens: Option<i64>,
    pub cost_micros: Option<i64>,
}

/// An open reservation, closed by [`Budgets::settle`].
#[derive(Debug, Clone)]
pub struct Held {
    pub id: String,
}

/// What a reservation came to.
#[derive(Debug, Clone)]
pub enum Reserved {
    /// No budget applies: nothing was reserved, and the turn's output is not capped.
    Free,
    Held(Held),
    /// A budget has not enough left for the turn's worst case: nothing was reserved.
    Refused(Remaining),
}

/// Budgets reserved before they are spent.
#[async_trait]
pub trait Budgets: Send + Sync {
    /// Reserves the worst case against every budget that applies, all or none, in
    /// one atomic step.
    async fn reserve(&self, ask: &BudgetAsk<'_>) -> StoreResult<Reserved>;
    /// Closes a reservation with what the turn used (by the model `model`, priced
    /// at its price), refunding the rest; returns what is left of the tightest
    /// budget it touched.
    async fn settle(
        &self,
        held: &Held,
        model: &str,
        input_tokens: u64,
        output_tokens: u64,
    ) -> StoreResult<Option<Remaining>>;
}

/// No budgets at all (tests, and a gateway whose admins set none: the real one
/// answers `Free` then too).
pub struct NoBudgets;

#[async_trait]
impl Budgets for NoBudgets {
    async fn reserve(&self, _: &BudgetAsk<'_>) -> StoreResult<Reserved> {
        Ok(Reserved::Free)
    }

    async fn settle(&self, _: &Held, _: &str, _: u64, _: u64) -> StoreResult<Option<Remaining>> {
        Ok(None)
    }
}
