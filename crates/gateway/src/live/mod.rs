//! Live state: what a running answer needs while it runs — its ordered events and
//! their viewers, its cancel signal, the waiters of its approvals, the person's and
//! the model's limits, and which replica owns it — behind one interface with two
//! implementations:
//!
//! - [`memory`], the default (one process): memory, plus the database for what must
//!   survive a crash of the process (the events, group-committed);
//! - [`redis`], for replicas (`MAITRED_REDIS_URL`): an append-only stream per answer,
//!   a control channel, shared counters for limits, and a lease per answer.
//!
//! The answer loop never touches either: its events reach the live state through the
//! recorder and [`Running`], the answer's sink. Durable state (conversations,
//! messages, tool calls, approvals) stays in the database; losing the live state
//! loses running answers, never conversations.

mod batch;
mod event;
mod limits;
mod local;
pub mod memory;
mod recover;
pub mod redis;
mod running;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;

pub use event::LoggedEvent;
pub use limits::{Admission, ViewerSlot};
pub use local::{Local, LocalAnswer, Watching};
pub use maitred_llm::limits::{LocalModelLimits, ModelLimits, ModelPermit};
pub use running::Running;

use crate::answer::ports::AnswerRef;
use crate::chat::resume::Resumer;
use crate::error::GatewayError;
use maitred_protocol::ids::{MessageId, Subject};

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("the database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("redis: {0}")]
    Redis(#[from] ::redis::RedisError),
    #[error("writing the answer's events failed: {0}")]
    Write(String),
    #[error("the answer's event log has stopped")]
    Stopped,
    #[error("another replica has taken the answer over")]
    Lost,
}

impl From<LiveError> for GatewayError {
    fn from(error: LiveError) -> Self {
        match error {
            LiveError::Database(error) => error.into(),
            other => GatewayError::LiveUnavailable(other.to_string()),
        }
    }
}

/// The events of one answer, in order, ending with `done`.
pub type Events = BoxStream<'static, LoggedEvent>;

/// What a cancel came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    Cancelled,
    /// The answer had already ended.
    Finished,
    /// No answer of that person by that id, here or on any replica.
    Unknown,
}

/// Timings of answers' live state.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    /// An answer nobody has watched for this long is cancelled.
    pub grace: Duration,
    /// A finished answer's events stay this long for late viewers.
    pub retention: Duration,
    /// How long a replica's claim on an answer lasts without renewal; another replica
    /// ends the answer once it lapses.
    pub lease: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(30),
            retention: Duration::from_secs(600),
            lease: Duration::from_secs(15),
        }
    }
}

#[async_trait]
pub trait LiveState: Send + Sync {
    /// This replica's name in leases and logs.
    fn replica(&self) -> &str;

    /// The answers this replica runs.
    fn local(&self) -> &Local;

    /// Admits a new answer of `answer.owner` to run here: within the person's limits
    /// (else 429 with when to come back), counted among their running answers, owned
    /// by this replica.
    async fn admit(&self, answer: &AnswerRef) -> Result<(), GatewayError>;

    /// Appends `event` to the answer's log. It reaches viewers once durable; with
    /// `wait`, this returns only then.
    async fn append(
        &self,
        answer: &AnswerRef,
        event: LoggedEvent,
        wait: bool,
    ) -> Result<(), LiveError>;

    /// The answer has ended (its `done` is durable): it leaves the person's running
    /// answers and this replica's care; its events stay for late viewers a while.
    async fn finish(&self, answer: &AnswerRef);

    /// Counts one more open answer stream of `owner` (asking or watching again), on
    /// every replica, until the slot drops; past the person's `concurrent_viewers`,
    /// 429 with when to come back.
    async fn view(&self, owner: &Subject) -> Result<ViewerSlot, GatewayError>;

    /// `owner`'s answer `id`: its events after `after`, then the live ones up to `done`.
    /// The events end after `done`, or at once when the answer has ended and `after`
    /// is at or past its `done`: a viewer is never left waiting on a finished answer.
    /// `None` when there is no such answer anywhere (or it is not `owner`'s).
    async fn follow(
        &self,
        id: &MessageId,
        owner: &Subject,
        after: u64,
    ) -> Result<Option<Events>, LiveError>;

    /// `owner`'s answer `id`: the events logged so far, without waiting for more
    /// (all of them once it has ended, while its log is kept). `None` as for
    /// [`LiveState::follow`].
    async fn logged(
        &self,
        id: &MessageId,
        owner: &Subject,
    ) -> Result<Option<Vec<LoggedEvent>>, LiveError>;

    /// Stops `owner`'s answer `id`, on whichever replica runs it.
    async fn cancel(&self, id: &MessageId, owner: &Subject) -> Result<CancelOutcome, LiveError>;

    /// Wakes whoever waits on `key` (an approval's id), on any replica.
    async fn wake(&self, key: &str) -> Result<(), LiveError>;

    /// The limits of each model, shared by the replicas.
    fn models(&self) -> Arc<dyn ModelLimits>;

    /// From now on, answers whose server stopped are offered to `resumer` to go on
    /// here before they are ended as interrupted. Until this is called, a replica
    /// takes over nothing (it is still starting).
    fn resume_with(&self, resumer: Arc<Resumer>);
}

/// The live state the gateway runs with.
pub type Live = Arc<dyn LiveState>;
