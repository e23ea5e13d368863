//! Background tasks: tool calls their MCP server runs as tasks (the Tasks extension,
//! SEP-2663), owned by the cluster once the answer that started them has ended.
//!
//! The lifecycle: a call answered with a task is handed over here (`adopt`, within
//! the limits per person and per server) and the model is told it runs in the
//! background. Every replica's watcher (`watch.rs`) polls the tasks due that no live
//! replica holds, under a lease in the database, so a replica that dies leaves its
//! tasks to the others. Stop and the person's answers to a task's questions
//! (`routes.rs`) are written to the row or sent at once; the next poll picks them up.
//! When a task ends, the first replica to record the end posts its result into the
//! conversation as a new answer (`follow_up.rs`): the model answers from it, and
//! whoever watches the conversation sees it stream in.

mod follow_up;
pub mod routes;
mod rows;
pub mod view;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio_util::task::TaskTracker;

use crate::answer::ports::{Adopted, BackgroundTasks, NewTask, StoreError, StoreResult};
use crate::auth::{ChatUser, Via};
use crate::tools::ToolHub;
use maitred_core::db::{Db, canonical_now};
use maitred_protocol::ids::{Subject, TaskId, TaskStatus};
pub use rows::TaskRow;
use rows::{Rows, now_ms};
pub use watch::watch;

/// How many tasks may run at once, and for how long.
#[derive(Debug, Clone)]
pub struct TaskLimits {
    pub per_person: usize,
    pub per_server: usize,
    /// Past it, a task is cancelled at its server and ends as failed.
    pub give_up: Duration,
}

/// The background tasks, in the database, and the servers that run them.
pub struct TaskBook {
    rows: Rows,
    hub: Arc<ToolHub>,
    limits: TaskLimits,
    /// Bytes of a task's result the model is given, as for a call's.
    output_cap: usize,
    tracker: TaskTracker,
    /// One hand-over at a time here, so a turn's parallel calls count each other.
    adopting: tokio::sync::Mutex<()>,
}

/// Polls no more often than this, whatever a server asks.
const MIN_POLL_MS: i64 = 250;
/// Nor less often than this.
const MAX_POLL_MS: i64 = 30_000;
/// A server that gives no interval is polled this often.
const DEFAULT_POLL_MS: i64 = 1_000;

fn poll_interval(asked: Option<u64>) -> i64 {
    asked
        .map_or(DEFAULT_POLL_MS, |ms| {
            i64::try_from(ms).unwrap_or(MAX_POLL_MS)
        })
        .clamp(MIN_POLL_MS, MAX_POLL_MS)
}

/// Who asked, as the row keeps them: never a token (the follow-up calls no tool).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Asker {
    name: Option<String>,
    email: Option<String>,
    roles: Vec<String>,
    session: bool,
}

impl Asker {
    fn of(user: &ChatUser) -> Self {
        Self {
            name: user.name.clone(),
            email: user.email.clone(),
            roles: user.roles.clone(),
            session: user.via == Via::Session,
        }
    }

    fn user(self, subject: Subject) -> ChatUser {
        ChatUser {
            subject,
            name: self.name,
            email: self.email,
            roles: self.roles,
            via: if self.session {
                Via::Session
            } else {
                Via::Bearer
            },
            credential: None,
        }
    }
}

impl TaskBook {
    pub fn new(
        db: Db,
        hub: Arc<ToolHub>,
        limits: TaskLimits,
        output_cap: usize,
        tracker: TaskTracker,
    ) -> Self {
        Self {
            rows: Rows::new(db),
            hub,
            limits,
            output_cap,
            tracker,
            adopting: tokio::sync::Mutex::new(()),
        }
    }

    /// A conversation's tasks, oldest first, as its owner sees them.
    pub async fn of_conversation(
        &self,
        conversation: &maitred_protocol::ids::ConversationId,
    ) -> Result<Vec<view::TaskView>, sqlx::Error> {
        let rows = self.rows.of_conversation(conversation).await?;
        Ok(rows.into_iter().map(view::TaskView::from).collect())
    }

    /// A conversation being deleted takes its tasks with it: the running ones are
    /// stopped at their servers, since nobody could see their results any more.
    pub async fn stop_all(
        &self,
        conversation: &maitred_protocol::ids::ConversationId,
    ) -> Result<(), sqlx::Error> {
        for row in self.rows.of_conversation(conversation).await? {
            if !row.status.is_end() {
                self.cancel_unfollowed(&row.server, &row.task_id);
            }
        }
        Ok(())
    }

    /// A task nobody will follow (over the limits, or its conversation deleted): its
    /// server is asked to stop it.
    fn cancel_unfollowed(&self, server: &str, task_id: &str) {
        let (hub, server, task_id) = (self.hub.clone(), server.to_owned(), task_id.to_owned());
        self.tracker.spawn(async move {
            if let Err(error) = hub.cancel_task(&server, &task_id).await {
                tracing::warn!(%server, %task_id, %error, "cancelling a task nobody follows");
            }
        });
    }
}

#[async_trait]
impl BackgroundTasks for TaskBook {
    async fn adopt(&self, task: NewTask<'_>) -> StoreResult<Adopted> {
        let _one_at_a_time = self.adopting.lock().await;
        let (mine, theirs) = self.rows.running(&task.answer.owner, task.server).await?;
        let over = if usize::try_from(mine).unwrap_or(usize::MAX) >= self.limits.per_person {
            Some((self.limits.per_person, "The user"))
        } else if usize::try_from(theirs).unwrap_or(usize::MAX) >= self.limits.per_server {
            Some((self.limits.per_server, "This tool's server"))
        } else {
            None
        };
        if let Some((limit, whose)) = over {
            tracing::info!(server = task.server, task_id = %task.started.task_id, limit, whose, "a task over the limits: cancelled");
            self.cancel_unfollowed(task.server, &task.started.task_id);
            return Ok(Adopted::OverLimit { limit, whose });
        }
        let interval = poll_interval(task.started.poll_interval_ms);
        let now = now_ms();
        let give_up = i64::try_from(self.limits.give_up.as_millis()).unwrap_or(i64::MAX);
        let asker =
            serde_json::to_string(&Asker::of(task.user)).map_err(|e| StoreError(e.into()))?;
        let row = TaskRow {
            id: TaskId::new(),
            conversation_id: task.answer.conversation.clone(),
            message_id: task.answer.message.clone(),
            tool_call_id: task.call.clone(),
            model_call_id: task.model_call_id.to_owned(),
            owner: task.answer.owner.clone(),
            asker,
            server: task.server.to_owned(),
            tool: task.tool.to_owned(),
            exposed: task.exposed.to_owned(),
            title: task.title.to_owned(),
            arguments: task.arguments.to_string(),
            task_id: task.started.task_id.clone(),
            status: TaskStatus::Working,
            status_message: task.started.status_message.clone(),
            input: None,
            result: None,
            error: None,
            poll_interval_ms: interval,
            give_up_at: now.saturating_add(give_up),
            failures: 0,
            cancel_requested: 0,
            follow_up_message_id: None,
            follow_up_started_at: None,
            created_at: canonical_now(),
            updated_at: canonical_now(),
            finished_at: None,
        };
        self.rows.insert(&row, now + interval).await?;
        tracing::info!(task = %row.id, server = %row.server, task_id = %row.task_id, tool = %row.tool, "following a background task");
        Ok(Adopted::Followed(row.id))
    }
}
