//! The `tool_tasks` table: one row per background task, every change to it one
//! statement whose `WHERE` says who may make it (the lease holder, the first to see
//! the end), so replicas never need to agree on anything else.

use sqlx::FromRow;

use maitred_core::db::{Db, canonical_now};
use maitred_protocol::ids::{ConversationId, MessageId, Subject, TaskId, TaskStatus, ToolCallId};

/// A row as it is read.
#[derive(Debug, Clone, FromRow)]
pub struct TaskRow {
    pub id: TaskId,
    pub conversation_id: ConversationId,
    pub message_id: MessageId,
    pub tool_call_id: ToolCallId,
    pub model_call_id: String,
    pub owner: Subject,
    pub asker: String,
    pub server: String,
    pub tool: String,
    pub exposed: String,
    pub title: String,
    pub arguments: String,
    pub task_id: String,
    pub status: TaskStatus,
    pub status_message: Option<String>,
    pub input: Option<String>,
    pub result: Option<String>,
    pub error: Option<String>,
    pub poll_interval_ms: i64,
    pub give_up_at: i64,
    pub failures: i64,
    pub cancel_requested: i64,
    pub follow_up_message_id: Option<MessageId>,
    /// When the follow-up answer started (unix ms): until then its id names nothing
    /// a client could watch.
    pub follow_up_started_at: Option<i64>,
    pub created_at: String,
    pub updated_at: String,
    pub finished_at: Option<String>,
}

pub(super) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Where a running task stands after a poll.
#[derive(Debug, Clone)]
pub(super) struct Polled<'a> {
    pub status: TaskStatus,
    pub status_message: Option<&'a str>,
    pub input: Option<&'a str>,
    pub poll_interval_ms: i64,
    pub next_poll_at: i64,
}

/// How a task ended.
#[derive(Debug, Clone)]
pub(super) struct Ended<'a> {
    pub status: TaskStatus,
    pub status_message: Option<&'a str>,
    pub result: Option<&'a str>,
    pub error: Option<&'a str>,
}

#[derive(Clone)]
pub(super) struct Rows {
    db: Db,
}

impl Rows {
    pub(super) fn new(db: Db) -> Self {
        Self { db }
    }

    pub(super) async fn insert(&self, row: &TaskRow, next_poll_at: i64) -> Result<(), sqlx::Error> {
        sqlx::query(
            "INSERT INTO tool_tasks (id, conversation_id, message_id, tool_call_id, model_call_id, owner, asker, server, tool, exposed, title, arguments, task_id, status, status_message, poll_interval_ms, next_poll_at, give_up_at, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $19)",
        )
        .bind(&row.id)
        .bind(&row.conversation_id)
        .bind(&row.message_id)
        .bind(&row.tool_call_id)
        .bind(&row.model_call_id)
        .bind(&row.owner)
        .bind(&row.asker)
        .bind(&row.server)
        .bind(&row.tool)
        .bind(&row.exposed)
        .bind(&row.title)
        .bind(&row.arguments)
        .bind(&row.task_id)
        .bind(row.status)
        .bind(&row.status_message)
        .bind(row.poll_interval_ms)
        .bind(next_poll_at)
        .bind(row.give_up_at)
        .bind(&row.created_at)
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    /// Tasks running for `owner`, and on `server`, for the limits.
    pub(super) async fn running(
        &self,
        owner: &Subject,
        server: &str,
    ) -> Result<(i64, i64), sqlx::Error> {
        let (mine,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM tool_tasks WHERE owner = $1 AND status IN ('working', 'input_required')")
        .bind(owner)
        .fetch_one(self.db.pool())
        .await?;
        let (theirs,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM tool_tasks WHERE server = $1 AND status IN ('working', 'input_required')")
        .bind(server)
        .fetch_one(self.db.pool())
        .await?;
        Ok((mine, theirs))
    }

    pub(super) async fn of_conversation(
        &self,
        conversation: &ConversationId,
    ) -> Result<Vec<TaskRow>, sqlx::Error> {
        sqlx::query_as("SELECT id, conversation_id, message_id, tool_call_id, model_call_id, owner, asker, server, tool, exposed, title, arguments, task_id, status, status_message, input, result, error, poll_interval_ms, give_up_at, failures, cancel_requested, follow_up_message_id, follow_up_started_at, created_at, updated_at, finished_at FROM tool_tasks WHERE conversation_id = $1 ORDER BY created_at, id")
        .bind(conversation)
        .fetch_all(self.db.pool())
        .await
    }

    /// The task, if it is `owner`'s.
    pub(super) async fn get(
        &self,
        owner: &Subject,
        id: &TaskId,
    ) -> Result<Option<TaskRow>, sqlx::Error> {
        sqlx::query_as("SELECT id, conversation_id, message_id, tool_call_id, model_call_id, owner, asker, server, tool, exposed, title, arguments, task_id, status, status_message, input, result, error, poll_interval_ms, give_up_at, failures, cancel_requested, follow_up_message_id, follow_up_started_at, created_at, updated_at, finished_at FROM tool_tasks WHERE id = $1 AND owner = $2")
        .bind(id)
        .bind(owner)
        .fetch_optional(self.db.pool())
        .await
    }

    /// The task, whoever's it is: for the replica that has just taken it.
    async fn by_id(&self, id: &TaskId) -> Result<Option<TaskRow>, sqlx::Error> {
        sqlx::query_as("SELECT id, conversation_id, message_id, tool_call_id, model_call_id, owner, asker, server, tool, exposed, title, arguments, task_id, status, status_message, input, result, error, poll_interval_ms, give_up_at, failures, cancel_requested, follow_up_message_id, follow_up_started_at, created_at, updated_at, finished_at FROM tool_tasks WHERE id = $1")
            .bind(id)
            .fetch_optional(self.db.pool())
            .await
    }

    /// Running tasks due for a poll that no live replica holds (or `replica` does),
    /// taken for `lease_ms`: the ones this replica polls now.
    pub(super) async fn claim_due(
        &self,
        replica: &str,
        lease_ms: i64,
        limit: i64,
    ) -> Result<Vec<TaskRow>, sqlx::Error> {
        let now = now_ms();
        let due: Vec<(TaskId,)> = sqlx::query_as("SELECT id FROM tool_tasks WHERE status IN ('working', 'input_required') AND next_poll_at <= $1 \
             AND (lease_until < $1 OR lease_owner = $2) ORDER BY next_poll_at LIMIT $3")
        .bind(now)
        .bind(replica)
        .bind(limit)
        .fetch_all(self.db.pool())
        .await?;
        let mut claimed = Vec::new();
        for (id,) in due {
            // Taken only if nobody else took it meanwhile.
            let taken = sqlx::query("UPDATE tool_tasks SET lease_owner = $1, lease_until = $2 + poll_interval_ms \
                 WHERE id = $3 AND status IN ('working', 'input_required') AND (lease_until < $4 OR lease_owner = $1)")
            .bind(replica)
            .bind(now + lease_ms)
            .bind(&id)
            .bind(now)
            .execute(self.db.pool())
            .await?;
            if taken.rows_affected() == 1
                && let Some(row) = self.by_id(&id).await?
            {
                claimed.push(row);
            }
        }
        Ok(claimed)
    }

    /// What a poll found, written by the lease holder only.
    pub(super) async fn polled(
        &self,
        id: &TaskId,
        replica: &str,
        polled: Polled<'_>,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query("UPDATE tool_tasks SET status = $1, status_message = COALESCE($2, status_message), input = $3, \
             poll_interval_ms = $4, next_poll_at = $5, failures = 0, updated_at = $6 \
             WHERE id = $7 AND lease_owner = $8 AND status IN ('working', 'input_required')")
        .bind(polled.status)
        .bind(polled.status_message)
        .bind(polled.input)
        .bind(polled.poll_interval_ms)
        .bind(polled.next_poll_at)
        .bind(canonical_now())
        .bind(id)
        .bind(replica)
        .execute(self.db.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// A poll that could not reach the server: tried again at `next_poll_at`.
    pub(super) async fn unreachable(
        &self,
        id: &TaskId,
        replica: &str,
        next_poll_at: i64,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "UPDATE tool_tasks SET failures = failures + 1, next_poll_at = $1 WHERE id = $2 AND lease_owner = $3",
        )
        .bind(next_poll_at)
        .bind(id)
        .bind(replica)
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    /// The end, written once: the caller that gets `true` (and `follow_up`
    /// recorded) posts the follow-up; anyone else has seen the same end too late.
    pub(super) async fn ended(
        &self,
        id: &TaskId,
        ended: Ended<'_>,
        follow_up: &MessageId,
    ) -> Result<bool, sqlx::Error> {
        let now = canonical_now();
        let done = sqlx::query("UPDATE tool_tasks SET status = $1, status_message = COALESCE($2, status_message), result = $3, error = $4, \
             input = NULL, follow_up_message_id = $5, updated_at = $6, finished_at = $6 \
             WHERE id = $7 AND status IN ('working', 'input_required') AND follow_up_message_id IS NULL")
        .bind(ended.status)
        .bind(ended.status_message)
        .bind(ended.result)
        .bind(ended.error)
        .bind(follow_up)
        .bind(&now)
        .bind(id)
        .execute(self.db.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The follow-up answer has started (its question is being stored).
    pub(super) async fn follow_up_started(&self, id: &TaskId) -> Result<(), sqlx::Error> {
        sqlx::query("UPDATE tool_tasks SET follow_up_started_at = $1 WHERE id = $2")
            .bind(now_ms())
            .bind(id)
            .execute(self.db.pool())
            .await?;
        Ok(())
    }

    /// Ended tasks whose follow-up was claimed over `stale_ms` ago and never
    /// started (the replica that claimed it died in between), taken for `lease_ms`.
    pub(super) async fn claim_unposted(
        &self,
        replica: &str,
        stale_ms: i64,
        lease_ms: i64,
    ) -> Result<Vec<TaskRow>, sqlx::Error> {
        let now = now_ms();
        let stale: Vec<(TaskId,)> = sqlx::query_as(
            "SELECT id FROM tool_tasks WHERE follow_up_message_id IS NOT NULL AND follow_up_started_at IS NULL \
             AND lease_until < $1 LIMIT 10",
        )
        .bind(now - stale_ms)
        .fetch_all(self.db.pool())
        .await?;
        let mut claimed = Vec::new();
        for (id,) in stale {
            let taken = sqlx::query(
                "UPDATE tool_tasks SET lease_owner = $1, lease_until = $2 \
                 WHERE id = $3 AND follow_up_started_at IS NULL AND lease_until < $4",
            )
            .bind(replica)
            .bind(now + lease_ms)
            .bind(&id)
            .bind(now - stale_ms)
            .execute(self.db.pool())
            .await?;
            if taken.rows_affected() == 1
                && let Some(row) = self.by_id(&id).await?
            {
                claimed.push(row);
            }
        }
        Ok(claimed)
    }

    /// Stop: whichever replica polls the task next sends `tasks/cancel`.
    pub(super) async fn request_cancel(
        &self,
        owner: &Subject,
        id: &TaskId,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE tool_tasks SET cancel_requested = 1, next_poll_at = 0, updated_at = $1 \
             WHERE id = $2 AND owner = $3 AND status IN ('working', 'input_required')",
        )
        .bind(canonical_now())
        .bind(id)
        .bind(owner)
        .execute(self.db.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// `tasks/cancel` went out: not sent again.
    pub(super) async fn cancel_sent(&self, id: &TaskId) -> Result<(), sqlx::Error> {
        sqlx::query("UPDATE tool_tasks SET cancel_requested = 2 WHERE id = $1")
            .bind(id)
            .execute(self.db.pool())
            .await?;
        Ok(())
    }

    /// The person answered the task's question: it is no longer shown, and the task
    /// is polled at once.
    pub(super) async fn input_answered(&self, id: &TaskId) -> Result<(), sqlx::Error> {
        sqlx::query(
            "UPDATE tool_tasks SET input = NULL, status = 'working', next_poll_at = 0, updated_at = $1 WHERE id = $2",
        )
        .bind(canonical_now())
        .bind(id)
        .execute(self.db.pool())
        .await?;
        Ok(())
    }
}
