//! What a front door other than the chat API keeps of the answers it started (the
//! OpenAI Responses API: a response per answer), told at an answer's turning points
//! on whichever replica runs it: when a replica takes it over, and when it ends.

use async_trait::async_trait;

use crate::answer::Asking;
use crate::answer::ports::AnswerRef;
use maitred_protocol::ids::MessageId;

/// How a taken-over answer goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoesOn {
    pub asking: Asking,
    /// Nobody need watch it (a background response): it is not cancelled for want
    /// of viewers.
    pub unattended: bool,
    /// It has no question of its own: it went on from calls an earlier answer left
    /// waiting for the person's decisions (`Prompt::Decided`).
    pub decided: bool,
}

impl GoesOn {
    /// The chat API's: the person watches, and approves while it waits.
    pub const WATCHED: Self = Self {
        asking: Asking::Person,
        unattended: false,
        decided: false,
    };
}

#[async_trait]
pub trait AnswerHooks: Send + Sync {
    /// How answer `message`, taken over after its server stopped, goes on.
    async fn goes_on(&self, message: &MessageId) -> GoesOn;
    /// The answer has ended on this replica: its `done` is durable.
    async fn ended(&self, answer: &AnswerRef);
}

/// No front door of that kind: every answer is the chat API's.
pub struct NoHooks;

#[async_trait]
impl AnswerHooks for NoHooks {
    async fn goes_on(&self, _: &MessageId) -> GoesOn {
        GoesOn::WATCHED
    }

    async fn ended(&self, _: &AnswerRef) {}
}
