//! The responses' records (the `responses` table): what each response echoes back,
//! and, once its answer has ended, the answer's events, kept for as long as the
//! response is (the live log of an answer goes a while after its end). The events
//! are kept by the replica the answer ends on (the answer hooks), or else by the
//! first read of a response whose answer ended without it.

use async_trait::async_trait;
use serde_json::Value;
use sqlx::FromRow;

use super::projection::Head;
use crate::answer::Asking;
use crate::answer::ports::AnswerRef;
use crate::chat::hooks::{AnswerHooks, GoesOn};
use crate::live::{Live, LiveError, LoggedEvent};
use maitred_core::db::{Db, canonical, parse_canonical};
use maitred_protocol::ids::{ConversationId, MessageId, Subject, ToolCallId};

pub struct ResponseBook {
    db: Db,
    live: Live,
}

/// A response as it starts.
pub struct NewResponse<'a> {
    pub head: &'a Head,
    pub owner: &'a Subject,
}

/// A response's record.
#[derive(Debug, Clone, FromRow)]
struct Row {
    id: MessageId,
    owner: Subject,
    conversation_id: ConversationId,
    previous_id: Option<MessageId>,
    model: String,
    instructions: Option<String>,
    metadata: String,
    background: i64,
    stored: i64,
    decided: String,
    created_at: String,
    events: Option<String>,
}

/// A stored response of its owner's.
#[derive(Debug, Clone)]
pub struct Found {
    pub head: Head,
    pub owner: Subject,
    /// Its answer's events, when they were kept at its end.
    pub events: Option<Vec<LoggedEvent>>,
}

impl Row {
    fn found(self) -> Found {
        let events = self.events.as_deref().map(read_events);
        Found {
            head: Head {
                message: self.id,
                conversation: self.conversation_id,
                created_at: parse_canonical(&self.created_at).map_or(0, |at| at.timestamp()),
                model: self.model,
                instructions: self.instructions,
                metadata: serde_json::from_str(&self.metadata).unwrap_or_default(),
                previous: self.previous_id,
                background: self.background != 0,
                store: self.stored != 0,
                decided: serde_json::from_str(&self.decided).unwrap_or_default(),
            },
            owner: self.owner,
            events,
        }
    }
}

/// Events as they are kept: `[[seq, name, data], …]`.
fn write_events(events: &[LoggedEvent]) -> String {
    let rows: Vec<(u64, &str, &str)> = events.iter().map(|e| (e.seq, &*e.name, &*e.data)).collect();
    serde_json::to_string(&rows).unwrap_or_else(|_| "[]".to_owned())
}

fn read_events(text: &str) -> Vec<LoggedEvent> {
    serde_json::from_str::<Vec<(u64, String, String)>>(text)
        .unwrap_or_default()
        .into_iter()
        .map(|(seq, name, data)| LoggedEvent {
            seq,
            name: name.into(),
            data: data.into(),
        })
        .collect()
}

impl ResponseBook {
    pub fn new(db: Db, live: Live) -> Self {
        Self { db, live }
    }

    pub async fn create(&self, new: NewResponse<'_>) -> Result<(), sqlx::Error> {
        let head = new.head;
        let created_at = chrono::DateTime::from_timestamp(head.created_at, 0)
            .map(canonical)
            .unwrap_or_default();
        sqlx::query(
            "INSERT INTO responses (id, owner, conversation_id, previous_id, model, instructions, metadata, background, stored, decided, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(&head.message)
        .bind(new.owner)
        .bind(&head.conversation)
        .bind(&head.previous)
        .bind(&head.model)
        .bind(&head.instructions)
        .bind(Value::Object(head.metadata.clone()).to_string())
        .bind(i64::from(head.background))
        .bind(i64::from(head.store))
        .bind(serde_json::to_string(&head.decided).unwrap_or_else(|_| "[]".to_owned()))
        .bind(created_at)
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    /// `owner`'s stored response `id`; `None` for anyone else's, or one not stored.
    pub async fn find(
        &self,
        id: &MessageId,
        owner: &Subject,
    ) -> Result<Option<Found>, sqlx::Error> {
        let row: Option<Row> = sqlx::query_as(
            "SELECT id, owner, conversation_id, previous_id, model, instructions, metadata, \
             background, stored, decided, created_at, events \
             FROM responses WHERE id = $1 AND owner = $2 AND stored = 1",
        )
        .bind(id)
        .bind(owner)
        .fetch_optional(self.db.pool())
        .await?;
        Ok(row.map(Row::found))
    }

    /// The response's answer's events so far: those kept at its end, else its live
    /// log's (and, when that shows the end, they are kept now). `None`: neither is
    /// there any more (it ended on a replica that died before keeping them, and its
    /// log has expired).
    pub async fn events(&self, found: &Found) -> Result<Option<Vec<LoggedEvent>>, LiveError> {
        if let Some(events) = &found.events {
            return Ok(Some(events.clone()));
        }
        let Some(events) = self.live.logged(&found.head.message, &found.owner).await? else {
            return Ok(None);
        };
        if found.head.store && events.last().is_some_and(LoggedEvent::is_done) {
            self.keep(&found.head.message, &events).await?;
        }
        Ok(Some(events))
    }

    async fn keep(&self, id: &MessageId, events: &[LoggedEvent]) -> Result<(), sqlx::Error> {
        sqlx::query("UPDATE responses SET events = $1 WHERE id = $2 AND events IS NULL")
            .bind(write_events(events))
            .bind(id)
            .execute(self.db.pool())
            .await?;
        Ok(())
    }

    /// Forgets `owner`'s response `id`; false if there was none.
    pub async fn delete(&self, id: &MessageId, owner: &Subject) -> Result<bool, sqlx::Error> {
        let deleted = sqlx::query("DELETE FROM responses WHERE id = $1 AND owner = $2")
            .bind(id)
            .bind(owner)
            .execute(self.db.pool())
            .await?;
        Ok(deleted.rows_affected() > 0)
    }

    /// How a response's answer runs, from its record; `None`: it is no response.
    async fn kind(&self, id: &MessageId) -> Result<Option<(bool, bool, bool)>, sqlx::Error> {
        let row: Option<(i64, i64, String)> =
            sqlx::query_as("SELECT background, stored, decided FROM responses WHERE id = $1")
                .bind(id)
                .fetch_optional(self.db.pool())
                .await?;
        Ok(row.map(|(background, stored, decided)| {
            let decided: Vec<ToolCallId> = serde_json::from_str(&decided).unwrap_or_default();
            (background != 0, stored != 0, !decided.is_empty())
        }))
    }
}

#[async_trait]
impl AnswerHooks for ResponseBook {
    async fn goes_on(&self, message: &MessageId) -> GoesOn {
        match self.kind(message).await {
            Ok(Some((background, _, decided))) => GoesOn {
                asking: Asking::Later,
                unattended: background,
                decided,
            },
            Ok(None) => GoesOn::WATCHED,
            Err(error) => {
                // Read as a chat answer it goes on all the same, its approvals waited
                // for; a background response is then cancelled if nobody watches.
                tracing::warn!(%error, %message, "reading a response taken over");
                GoesOn::WATCHED
            }
        }
    }

    async fn ended(&self, answer: &AnswerRef) {
        let kept = async {
            let Some((_, true, _)) = self.kind(&answer.message).await? else {
                return Ok::<(), LiveError>(());
            };
            if let Some(events) = self.live.logged(&answer.message, &answer.owner).await?
                && events.last().is_some_and(LoggedEvent::is_done)
            {
                self.keep(&answer.message, &events).await?;
            }
            Ok(())
        };
        if let Err(error) = kept.await {
            // Kept at its first read instead, while its live log lasts.
            tracing::warn!(%error, message_id = %answer.message, "keeping a response's events");
        }
    }
}
