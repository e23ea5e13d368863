//! A tool's MCP server may ask the person something in the middle of a call (MCP
//! elicitation). Such a request waits for the person who asked the question, like an
//! approval: it is open until that person answers (on any replica), the request
//! times out (cancel), or the answer is stopped. The answer is a single-winner update
//! of the request's row; who answered, when and with what is kept with the call.

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::input_form;
use super::pending;
use crate::answer::ports::{InputRequest, Inputs, StoreResult};
use crate::error::GatewayError;
use crate::live::Live;
use crate::tools::InputReply;
use maitred_core::db::{Db, canonical, canonical_now};
use maitred_protocol::events::{InputAction, InputMode, InputRequiredEvent};
use maitred_protocol::ids::{InputId, MessageId, Subject, ToolCallId};

/// `POST /api/v1/resos/chat/inputs/{id}`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    pub action: InputAction,
    #[serde(default)]
    pub content: Option<Map<String, Value>>,
}

impl Answer {
    /// The stored status this answer sets.
    pub fn status(&self) -> &'static str {
        match self.action {
            InputAction::Accept => "accepted",
            InputAction::Decline => "declined",
            InputAction::Cancel => "cancelled",
        }
    }
}

pub struct ToolInputs {
    db: Db,
    timeout: Duration,
    live: Live,
}

/// A request as it is stored.
#[derive(sqlx::FromRow)]
struct Row {
    id: InputId,
    tool_call_id: ToolCallId,
    owner: String,
    server: String,
    tool: String,
    message: String,
    mode: String,
    schema: Option<String>,
    url: Option<String>,
    /// The gateway's "Connect <server>" card, as JSON.
    connect: Option<String>,
    status: String,
    content: Option<String>,
    expires_at: String,
}

impl Row {
    fn mode(&self) -> InputMode {
        if self.mode == "url" {
            InputMode::Url
        } else {
            InputMode::Form
        }
    }

    fn schema(&self) -> Option<Value> {
        self.schema
            .as_deref()
            .and_then(|s| serde_json::from_str(s).ok())
    }

    fn open_for(&self, owner: &Subject) -> bool {
        self.owner == owner.as_str()
            && self.status == "pending"
            && self.expires_at > canonical_now()
    }
}

impl ToolInputs {
    pub fn new(db: Db, timeout: Duration, live: Live) -> Self {
        Self { db, timeout, live }
    }

    async fn row(&self, id: &InputId) -> Result<Option<Row>, sqlx::Error> {
        sqlx::query_as(
            "SELECT id, tool_call_id, owner, server, tool, message, mode, schema, url, connect, status, content, expires_at FROM tool_inputs WHERE id = $1",
        )
            .bind(id)
            .fetch_optional(self.db.pool())
            .await
    }

    /// Pending → `status`, once: of two answers (a double click, two tabs, two
    /// replicas, an answer and the timeout) exactly one wins.
    async fn settle(
        &self,
        id: &InputId,
        status: &str,
        by: Option<&Subject>,
        content: Option<&str>,
    ) -> Result<bool, sqlx::Error> {
        let settled = sqlx::query(
            "UPDATE tool_inputs SET status = $1, content = $2, decided_by = $3, decided_at = $4 \
             WHERE id = $5 AND status = 'pending'",
        )
        .bind(status)
        .bind(content)
        .bind(by)
        .bind(canonical_now())
        .bind(id)
        .execute(self.db.pool())
        .await?;
        Ok(settled.rows_affected() == 1)
    }

    /// The owner's answer, from any replica; the one running the call is woken at
    /// once. Anyone else, and a request no longer open, is a 404; a form answer that
    /// does not fit the form is a 400, and the request stays open.
    pub async fn answer(
        &self,
        id: &InputId,
        owner: &Subject,
        answer: Answer,
    ) -> Result<(), GatewayError> {
        let row = self
            .row(id)
            .await?
            .filter(|row| row.open_for(owner))
            .ok_or_else(|| GatewayError::not_found("input request", id.as_str()))?;
        let content = match (answer.action, row.mode(), answer.content) {
            (InputAction::Accept, InputMode::Form, None) => {
                return Err(GatewayError::InvalidRequest(
                    "\"accept\" of a form needs its \"content\"".to_owned(),
                ));
            }
            (InputAction::Accept, InputMode::Form, Some(content)) => {
                let problems = input_form::problems(&row.schema().unwrap_or_default(), &content);
                if !problems.is_empty() {
                    return Err(GatewayError::InvalidInput { problems });
                }
                Some(Value::Object(content).to_string())
            }
            (_, _, Some(_)) => {
                return Err(GatewayError::InvalidRequest(
                    "\"content\" goes only with \"accept\" of a form".to_owned(),
                ));
            }
            (_, _, None) => None,
        };
        if !self
            .settle(
                id,
                answer_status(answer.action),
                Some(owner),
                content.as_deref(),
            )
            .await?
        {
            return Err(GatewayError::not_found("input request", id.as_str()));
        }
        self.live.wake(id.as_str()).await?;
        Ok(())
    }

    /// The "Connect <server>" card of tool call `call` is settled by the sign-in
    /// coming back (on whichever replica the browser reached): the call is woken.
    pub async fn settle_connect(
        &self,
        call: &str,
        owner: &Subject,
        action: InputAction,
    ) -> Result<(), sqlx::Error> {
        let open: Vec<(InputId,)> = sqlx::query_as(
            "SELECT id FROM tool_inputs WHERE tool_call_id = $1 AND owner = $2 \
             AND status = 'pending' AND connect IS NOT NULL",
        )
        .bind(call)
        .bind(owner)
        .fetch_all(self.db.pool())
        .await?;
        for (id,) in open {
            if self
                .settle(&id, answer_status(action), Some(owner), None)
                .await?
                && let Err(error) = self.live.wake(id.as_str()).await
            {
                tracing::warn!(%error, "could not wake the call waiting for a sign-in; it notices within its poll");
            }
        }
        Ok(())
    }

    /// `owner`'s requests in answer `message` that are still open and were shown at
    /// or before `seen`: a viewer coming back after them sees them again.
    pub async fn still_open(
        &self,
        message: &MessageId,
        owner: &Subject,
        seen: u64,
    ) -> Result<Vec<InputRequiredEvent>, sqlx::Error> {
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT id, tool_call_id, owner, server, tool, message, mode, schema, url, connect, status, content, expires_at FROM tool_inputs \
             WHERE message_id = $1 AND owner = $2 AND status = 'pending' AND expires_at > $3 \
             AND event_seq <= $4 ORDER BY event_seq",
        )
        .bind(message)
        .bind(owner)
        .bind(canonical_now())
        .bind(i64::try_from(seen).unwrap_or(i64::MAX))
        .fetch_all(self.db.pool())
        .await?;
        Ok(rows
            .into_iter()
            .map(|row| InputRequiredEvent {
                mode: row.mode(),
                schema: row.schema(),
                id: row.id,
                tool_call_id: row.tool_call_id,
                server: row.server,
                tool: row.tool,
                message: row.message,
                url: row.url,
                connect: row
                    .connect
                    .as_deref()
                    .and_then(|c| serde_json::from_str(c).ok()),
                expires_at: row.expires_at,
            })
            .collect())
    }

    /// How the request ended: `None` while it waits.
    async fn reply(&self, id: &InputId) -> Result<Option<InputReply>, sqlx::Error> {
        let Some(row) = self.row(id).await? else {
            return Ok(Some(InputReply::only(InputAction::Cancel)));
        };
        Ok(match row.status.as_str() {
            "pending" => None,
            "accepted" => Some(InputReply {
                action: InputAction::Accept,
                content: row
                    .content
                    .as_deref()
                    .and_then(|c| serde_json::from_str(c).ok()),
            }),
            "declined" => Some(InputReply::only(InputAction::Decline)),
            _ => Some(InputReply::only(InputAction::Cancel)),
        })
    }
}

fn answer_status(action: InputAction) -> &'static str {
    Answer {
        action,
        content: None,
    }
    .status()
}

#[async_trait]
impl Inputs for ToolInputs {
    async fn open(&self, request: &InputRequest<'_>) -> StoreResult<String> {
        let expires_at = canonical(chrono::Utc::now() + self.timeout);
        sqlx::query(
            "INSERT INTO tool_inputs (id, tool_call_id, message_id, owner, server, tool, message, mode, \
             schema, url, connect, status, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'pending', $12, $13)",
        )
        .bind(request.id)
        .bind(request.call)
        .bind(&request.answer.message)
        .bind(&request.answer.owner)
        .bind(request.server)
        .bind(request.tool)
        .bind(request.message)
        .bind(request.mode.as_str())
        .bind(request.schema.map(Value::to_string))
        .bind(request.url)
        .bind(
            request
                .connect
                .map(|card| serde_json::to_string(card).unwrap_or_default()),
        )
        .bind(canonical_now())
        .bind(&expires_at)
        .execute(self.db.pool())
        .await?;
        Ok(expires_at)
    }

    async fn shown(&self, id: &InputId, seq: u64) -> StoreResult<()> {
        sqlx::query("UPDATE tool_inputs SET event_seq = $1 WHERE id = $2")
            .bind(i64::try_from(seq).unwrap_or(i64::MAX))
            .bind(id)
            .execute(self.db.pool())
            .await?;
        Ok(())
    }

    async fn wait(
        &self,
        request: &InputRequest<'_>,
        cancel: &CancellationToken,
    ) -> StoreResult<InputReply> {
        // Unanswered in time counts as cancel, as the specification has it.
        Ok(pending::wait(
            &self.live,
            request.id.as_str(),
            self.timeout,
            cancel,
            || self.reply(request.id),
            |status| self.settle(request.id, status, None, None),
            |_| InputReply::only(InputAction::Cancel),
        )
        .await?)
    }
}
