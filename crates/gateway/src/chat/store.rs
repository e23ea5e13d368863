//! Conversations as they happen: every question, model turn, tool call and token
//! count is written when it occurs. A message (a question, or an answer) is stored
//! as its parts, in `seq` order: the question; each model turn; each tool result.

use async_trait::async_trait;
use serde::Serialize;
use sqlx::FromRow;

use secrecy::{ExposeSecret, SecretString};

use crate::answer::ports::{AnswerRef, AnswerStore, NewCall, StoreError, StoreResult, TurnRecord};
use crate::auth::{ChatUser, Via};
use crate::error::GatewayError;
use maitred_core::db::{Db, canonical_now, is_unique_violation};
use maitred_llm::{Message, ToolCall, Usage};
use maitred_protocol::events::GroundingEvent;
use maitred_protocol::ids::{
    CallStatus, ConversationId, MessageId, MessageStatus, PartId, Role, Subject, ToolCallId,
};

#[derive(Clone)]
pub struct Store {
    db: Db,
}

#[derive(Debug, Clone, Serialize, FromRow)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ConversationSummary {
    pub id: ConversationId,
    pub title: String,
    pub created_at: String,
    pub updated_at: String,
}

/// One stored part of a message.
#[derive(Debug, Clone, FromRow)]
pub struct StoredPart {
    pub id: PartId,
    pub message_id: Option<MessageId>,
    pub role: Role,
    pub content: Option<String>,
    pub tool_calls: Option<String>,
    pub tool_call_id: Option<String>,
    pub status: MessageStatus,
    pub model: Option<String>,
    pub created_at: String,
    /// For the turn that holds an answer's final text: its checked claims, as JSON
    /// (a `grounding` event's data). Read only where a conversation is shown.
    #[sqlx(default)]
    pub grounding: Option<String>,
}

#[derive(Debug, Clone, FromRow)]
pub struct StoredToolCall {
    pub id: ToolCallId,
    pub turn_id: PartId,
    pub server: String,
    pub tool: String,
    pub arguments: String,
    /// `None` for a call stored before titles were.
    pub title: Option<String>,
    pub status: CallStatus,
    pub duration_ms: Option<i64>,
    pub summary: Option<String>,
    pub created_at: String,
}

/// A stored part with its place in the conversation.
#[derive(Debug, Clone, FromRow)]
struct SeqPart {
    seq: i64,
    #[sqlx(flatten)]
    part: StoredPart,
}

/// A tool call as it was stored, for a takeover of its answer.
#[derive(Debug, Clone, FromRow)]
pub struct CallRecord {
    pub id: ToolCallId,
    pub turn_id: PartId,
    pub model_call_id: String,
    pub status: CallStatus,
    pub idempotency_key: Option<String>,
}

/// A model turn whose calls wait for their results: the last exchange of a
/// conversation, left open by an answer that ended waiting for the person.
#[derive(Debug, Clone)]
pub struct OpenTurn {
    pub turn: PartId,
    /// The answer the turn belongs to.
    pub message: Option<MessageId>,
    /// Its calls without a result, as the model asked for them.
    pub calls: Vec<ToolCall>,
}

/// Who asked an answer, as kept for its takeover.
#[derive(FromRow)]
struct AskerRow {
    name: Option<String>,
    email: Option<String>,
    roles: String,
    via: String,
    credential: Option<String>,
    resumes: i64,
}

/// A new part at the end of a conversation.
struct NewPart<'a> {
    id: &'a PartId,
    message: &'a MessageId,
    role: Role,
    content: &'a str,
    tool_calls: Option<String>,
    tool_call_id: Option<&'a str>,
    status: MessageStatus,
    model: Option<&'a str>,
}

fn calls_json(calls: &[ToolCall]) -> Option<String> {
    (!calls.is_empty())
        .then(|| serde_json::to_string(calls).ok())
        .flatten()
}

impl Store {
    pub fn new(db: Db) -> Self {
        Self { db }
    }

    /// 404 unless the conversation is the owner's.
    pub async fn check_owner(
        &self,
        owner: &Subject,
        id: &ConversationId,
    ) -> Result<(), GatewayError> {
        let found: Option<(ConversationId,)> =
            sqlx::query_as("SELECT id FROM conversations WHERE id = $1 AND owner = $2")
                .bind(id)
                .bind(owner)
                .fetch_optional(self.db.pool())
                .await?;
        found
            .map(|_| ())
            .ok_or_else(|| GatewayError::not_found("conversation", id.as_str()))
    }

    /// The person's question, as the first part of the answer's message, in a new
    /// conversation (titled after it) when `new`.
    pub async fn save_question(
        &self,
        answer: &AnswerRef,
        new: bool,
        question: &str,
    ) -> StoreResult<()> {
        if new {
            let title: String = question.split_whitespace().collect::<Vec<_>>().join(" ");
            let title = match title.char_indices().nth(80) {
                Some((cut, _)) => format!("{}…", &title[..cut]),
                None => title,
            };
            let now = canonical_now();
            sqlx::query(
                "INSERT INTO conversations (id, owner, title, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)",
            )
            .bind(&answer.conversation)
            .bind(&answer.owner)
            .bind(title)
            .bind(&now)
            .execute(self.db.pool())
            .await?;
        }
        let part = NewPart {
            id: &PartId::new(),
            message: &answer.message,
            role: Role::User,
            content: question,
            tool_calls: None,
            tool_call_id: None,
            status: MessageStatus::Complete,
            model: None,
        };
        Ok(self.append(&answer.conversation, part).await?)
    }

    /// Appends a part at the end of the conversation.
    async fn append(
        &self,
        conversation: &ConversationId,
        part: NewPart<'_>,
    ) -> Result<(), sqlx::Error> {
        let now = canonical_now();
        // Two answers may append to one conversation at once: retry on a taken seq.
        let mut attempts = 0;
        loop {
            let inserted = sqlx::query(
                "INSERT INTO chat_messages (id, conversation_id, seq, message_id, role, content, tool_calls, tool_call_id, status, model, created_at) \
                 VALUES ($1, $2, (SELECT COALESCE(MAX(seq), 0) + 1 FROM chat_messages WHERE conversation_id = $2), $3, $4, $5, $6, $7, $8, $9, $10)",
            )
            .bind(part.id)
            .bind(conversation)
            .bind(part.message)
            .bind(part.role)
            .bind(part.content)
            .bind(&part.tool_calls)
            .bind(part.tool_call_id)
            .bind(part.status)
            .bind(part.model)
            .bind(&now)
            .execute(self.db.pool())
            .await;
            match inserted {
                Err(error) if is_unique_violation(&error) && attempts < 5 => attempts += 1,
                Err(error) => return Err(error),
                Ok(_) => break,
            }
        }
        sqlx::query("UPDATE conversations SET updated_at = $1 WHERE id = $2")
            .bind(&now)
            .bind(conversation)
            .execute(self.db.pool())
            .await?;
        Ok(())
    }

    /// Earlier turns for the model: the newest that fit in `budget` characters, never
    /// starting in the middle of a tool exchange.
    pub async fn history(
        &self,
        conversation: &ConversationId,
        budget: usize,
    ) -> Result<Vec<Message>, GatewayError> {
        Ok(self.history_before(conversation, i64::MAX, budget).await?)
    }

    /// The same, from the parts before the conversation's part `seq`.
    pub async fn history_before(
        &self,
        conversation: &ConversationId,
        seq: i64,
        budget: usize,
    ) -> Result<Vec<Message>, sqlx::Error> {
        let kept = self.kept_before(conversation, seq, budget).await?;
        Ok(complete_exchanges(
            kept.into_iter().filter_map(to_model_message).collect(),
            true,
        ))
    }

    /// The parts before part `seq` that fit in `budget`, oldest first, starting with
    /// no tool result.
    async fn kept_before(
        &self,
        conversation: &ConversationId,
        seq: i64,
        budget: usize,
    ) -> Result<Vec<StoredPart>, sqlx::Error> {
        let rows: Vec<StoredPart> = sqlx::query_as(
            "SELECT id, message_id, role, content, tool_calls, tool_call_id, status, model, created_at \
             FROM chat_messages WHERE conversation_id = $1 AND seq < $2 ORDER BY seq DESC LIMIT 500",
        )
        .bind(conversation)
        .bind(seq)
        .fetch_all(self.db.pool())
        .await?;
        let mut kept = Vec::new();
        let mut used = 0usize;
        for row in rows {
            let size = row.content.as_deref().map_or(0, str::len)
                + row.tool_calls.as_deref().map_or(0, str::len);
            if used + size > budget && !kept.is_empty() {
                break;
            }
            used += size;
            kept.push(row);
        }
        kept.reverse();
        // A tool result is only meaningful after the call that asked for it.
        while kept.first().is_some_and(|m| m.role == Role::Tool) {
            kept.remove(0);
        }
        Ok(kept)
    }

    /// The same, except that the last exchange is left open: the calls of its model
    /// turn that have no result yet (they waited for the person's decision) are not
    /// closed as interrupted, but returned, with their turn.
    pub async fn open_history_before(
        &self,
        conversation: &ConversationId,
        seq: i64,
        budget: usize,
    ) -> Result<(Vec<Message>, Option<OpenTurn>), sqlx::Error> {
        let kept = self.kept_before(conversation, seq, budget).await?;
        let mut answered: Vec<&str> = Vec::new();
        let mut open = None;
        for row in kept.iter().rev() {
            match row.role {
                Role::Tool => answered.extend(row.tool_call_id.as_deref()),
                Role::Assistant => {
                    let calls: Vec<ToolCall> = row
                        .tool_calls
                        .as_deref()
                        .and_then(|t| serde_json::from_str(t).ok())
                        .unwrap_or_default();
                    let waiting: Vec<ToolCall> = calls
                        .into_iter()
                        .filter(|c| !answered.contains(&c.id.as_str()))
                        .collect();
                    if !waiting.is_empty() && row.status == MessageStatus::Complete {
                        open = Some(OpenTurn {
                            turn: row.id.clone(),
                            message: row.message_id.clone(),
                            calls: waiting,
                        });
                    }
                    break;
                }
                Role::User => break,
            }
        }
        let messages = kept.into_iter().filter_map(to_model_message).collect();
        Ok((complete_exchanges(messages, open.is_none()), open))
    }

    pub async fn conversations(
        &self,
        owner: &Subject,
    ) -> Result<Vec<ConversationSummary>, GatewayError> {
        Ok(sqlx::query_as(
            "SELECT id, title, created_at, updated_at FROM conversations WHERE owner = $1 ORDER BY updated_at DESC, id DESC LIMIT 200",
        )
        .bind(owner)
        .fetch_all(self.db.pool())
        .await?)
    }

    pub async fn conversation(
        &self,
        owner: &Subject,
        id: &ConversationId,
    ) -> Result<(ConversationSummary, Vec<StoredPart>, Vec<StoredToolCall>), GatewayError> {
        let summary: ConversationSummary = sqlx::query_as(
            "SELECT id, title, created_at, updated_at FROM conversations WHERE id = $1 AND owner = $2",
        )
        .bind(id)
        .bind(owner)
        .fetch_optional(self.db.pool())
        .await?
        .ok_or_else(|| GatewayError::not_found("conversation", id.as_str()))?;
        let parts = sqlx::query_as(
            "SELECT id, message_id, role, content, tool_calls, tool_call_id, status, model, created_at, grounding \
             FROM chat_messages WHERE conversation_id = $1 ORDER BY seq",
        )
        .bind(id)
        .fetch_all(self.db.pool())
        .await?;
        let calls = sqlx::query_as(
            "SELECT id, turn_id, server, tool, arguments, title, status, duration_ms, summary, created_at \
             FROM tool_calls WHERE conversation_id = $1 ORDER BY created_at, id",
        )
        .bind(id)
        .fetch_all(self.db.pool())
        .await?;
        Ok((summary, parts, calls))
    }

    /// The conversation and, by the schema's cascades, everything in it; and the
    /// records of the responses it holds (the Responses API's).
    pub async fn delete(&self, owner: &Subject, id: &ConversationId) -> Result<(), GatewayError> {
        let deleted = sqlx::query("DELETE FROM conversations WHERE id = $1 AND owner = $2")
            .bind(id)
            .bind(owner)
            .execute(self.db.pool())
            .await?;
        if deleted.rows_affected() == 0 {
            return Err(GatewayError::not_found("conversation", id.as_str()));
        }
        sqlx::query("DELETE FROM responses WHERE conversation_id = $1 AND owner = $2")
            .bind(id)
            .bind(owner)
            .execute(self.db.pool())
            .await?;
        Ok(())
    }

    /// One answer of `owner`'s and what it stored (its question, turns, results, tool
    /// calls with their approvals, token counts); its conversation too once nothing
    /// is left in it.
    pub async fn delete_answer(
        &self,
        owner: &Subject,
        answer: &AnswerRef,
    ) -> Result<(), sqlx::Error> {
        let mut tx = self.db.begin_write().await?;
        let owned: Option<(ConversationId,)> =
            sqlx::query_as("SELECT id FROM conversations WHERE id = $1 AND owner = $2")
                .bind(&answer.conversation)
                .bind(owner)
                .fetch_optional(&mut *tx)
                .await?;
        if owned.is_none() {
            return Ok(());
        }
        sqlx::query(
            "DELETE FROM approvals WHERE id IN (SELECT id FROM tool_calls WHERE message_id = $1)",
        )
        .bind(&answer.message)
        .execute(&mut *tx)
        .await?;
        for table in [
            "DELETE FROM tool_calls WHERE message_id = $1",
            "DELETE FROM chat_messages WHERE message_id = $1",
            "DELETE FROM token_usage WHERE message_id = $1",
        ] {
            sqlx::query(table)
                .bind(&answer.message)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query(
            "DELETE FROM conversations WHERE id = $1 AND NOT EXISTS \
             (SELECT 1 FROM chat_messages WHERE conversation_id = $1)",
        )
        .bind(&answer.conversation)
        .execute(&mut *tx)
        .await?;
        tx.commit().await
    }

    /// After its replica died: the answer keeps every token that was `shown`, and
    /// whatever of it was still running or waiting is marked as interrupted.
    pub async fn keep_interrupted(
        &self,
        answer: &AnswerRef,
        shown: &str,
    ) -> Result<(), sqlx::Error> {
        self.keep_shown(answer, shown).await?;
        sqlx::query(
            "UPDATE approvals SET status = 'cancelled', decided_at = $1 WHERE status = 'pending' \
             AND id IN (SELECT id FROM tool_calls WHERE message_id = $2)",
        )
        .bind(canonical_now())
        .bind(&answer.message)
        .execute(self.db.pool())
        .await?;
        sqlx::query("UPDATE tool_calls SET status = $1 WHERE message_id = $2 AND status = $3")
            .bind(CallStatus::Interrupted)
            .bind(&answer.message)
            .bind(CallStatus::Running)
            .execute(self.db.pool())
            .await?;
        Ok(())
    }

    /// After its replica died: the answer keeps every token that was `shown`, and the
    /// model turn that was streaming ends there, as interrupted. Its calls and
    /// approvals stay as they were (a takeover goes on with them).
    pub async fn keep_shown(&self, answer: &AnswerRef, shown: &str) -> Result<(), sqlx::Error> {
        let parts: Vec<(PartId, Option<String>, MessageStatus)> = sqlx::query_as(
            "SELECT id, content, status FROM chat_messages WHERE message_id = $1 AND role = $2 ORDER BY seq",
        )
        .bind(&answer.message)
        .bind(Role::Assistant)
        .fetch_all(self.db.pool())
        .await?;
        let stored: String = parts
            .iter()
            .filter_map(|(_, text, _)| text.as_deref())
            .collect();
        // What was stored is what was shown, up to the last flush: the rest is missing.
        let missing = match shown.strip_prefix(stored.as_str()) {
            Some(missing) => missing,
            None => {
                tracing::warn!(message_id = %answer.message, "the stored answer is not a prefix of what was shown; keeping it as stored");
                ""
            }
        };
        let streaming = parts
            .iter()
            .rev()
            .find(|(_, _, status)| *status == MessageStatus::Streaming);
        match streaming {
            Some((part, text, _)) => {
                let text = format!("{}{missing}", text.as_deref().unwrap_or_default());
                sqlx::query("UPDATE chat_messages SET content = $1 WHERE id = $2")
                    .bind(text)
                    .bind(part)
                    .execute(self.db.pool())
                    .await?;
            }
            None if !missing.is_empty() => {
                let conversation: Option<(ConversationId,)> =
                    sqlx::query_as("SELECT id FROM conversations WHERE id = $1")
                        .bind(&answer.conversation)
                        .fetch_optional(self.db.pool())
                        .await?;
                // An answer that died before its question was stored has nowhere to go.
                if conversation.is_some() {
                    let part = NewPart {
                        id: &PartId::new(),
                        message: &answer.message,
                        role: Role::Assistant,
                        content: missing,
                        tool_calls: None,
                        tool_call_id: None,
                        status: MessageStatus::Interrupted,
                        model: None,
                    };
                    self.append(&answer.conversation, part).await?;
                }
            }
            None => {}
        }
        sqlx::query("UPDATE chat_messages SET status = $1 WHERE message_id = $2 AND status = $3")
            .bind(MessageStatus::Interrupted)
            .bind(&answer.message)
            .bind(MessageStatus::Streaming)
            .execute(self.db.pool())
            .await?;
        Ok(())
    }

    /// Keeps who asked `answer`, for a takeover of it (see `answer_askers`).
    pub async fn save_asker(&self, answer: &AnswerRef, user: &ChatUser) -> StoreResult<()> {
        let roles = serde_json::to_string(&user.roles).map_err(|e| StoreError(e.into()))?;
        let via = match user.via {
            Via::Bearer => "bearer",
            Via::Session => "session",
        };
        sqlx::query(
            "INSERT INTO answer_askers (message_id, owner, name, email, roles, via, credential, resumes, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8)",
        )
        .bind(&answer.message)
        .bind(&answer.owner)
        .bind(&user.name)
        .bind(&user.email)
        .bind(roles)
        .bind(via)
        .bind(user.credential.as_ref().map(|c| c.expose_secret().to_owned()))
        .bind(canonical_now())
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    /// Who asked `answer`, if it can be taken over (an answer of the chat API,
    /// still running), with one more takeover counted; `None` when it has none, or
    /// when it has had `max` already.
    pub async fn take_over(
        &self,
        answer: &AnswerRef,
        max: u32,
    ) -> Result<Option<(ChatUser, u32)>, sqlx::Error> {
        let counted = sqlx::query(
            "UPDATE answer_askers SET resumes = resumes + 1 WHERE message_id = $1 AND owner = $2 AND resumes < $3",
        )
        .bind(&answer.message)
        .bind(&answer.owner)
        .bind(i64::from(max))
        .execute(self.db.pool())
        .await?;
        if counted.rows_affected() != 1 {
            return Ok(None);
        }
        let row: Option<AskerRow> = sqlx::query_as(
            "SELECT name, email, roles, via, credential, resumes FROM answer_askers WHERE message_id = $1",
        )
        .bind(&answer.message)
        .fetch_optional(self.db.pool())
        .await?;
        Ok(row.map(
            |AskerRow {
                 name,
                 email,
                 roles,
                 via,
                 credential,
                 resumes,
             }| {
                let user = ChatUser {
                    subject: answer.owner.clone(),
                    name,
                    email,
                    roles: serde_json::from_str(&roles).unwrap_or_default(),
                    via: if via == "session" {
                        Via::Session
                    } else {
                        Via::Bearer
                    },
                    credential: credential.map(SecretString::from),
                };
                (user, u32::try_from(resumes).unwrap_or(u32::MAX))
            },
        ))
    }

    /// The answer has ended: who asked it (and their token) is not kept.
    pub async fn forget_asker(&self, message: &MessageId) -> Result<(), sqlx::Error> {
        sqlx::query("DELETE FROM answer_askers WHERE message_id = $1")
            .bind(message)
            .execute(self.db.pool())
            .await?;
        Ok(())
    }

    /// The stored parts of one answer, in order, each with its place in the
    /// conversation.
    pub async fn answer_parts(
        &self,
        message: &MessageId,
    ) -> Result<Vec<(i64, StoredPart)>, sqlx::Error> {
        let rows: Vec<SeqPart> = sqlx::query_as(
            "SELECT seq, id, message_id, role, content, tool_calls, tool_call_id, status, model, created_at \
             FROM chat_messages WHERE message_id = $1 ORDER BY seq",
        )
        .bind(message)
        .fetch_all(self.db.pool())
        .await?;
        Ok(rows.into_iter().map(|r| (r.seq, r.part)).collect())
    }

    /// The tool calls of one answer as they were stored.
    pub async fn answer_calls(&self, message: &MessageId) -> Result<Vec<CallRecord>, sqlx::Error> {
        sqlx::query_as(
            "SELECT id, turn_id, model_call_id, status, idempotency_key FROM tool_calls WHERE message_id = $1 ORDER BY created_at, id",
        )
        .bind(message)
        .fetch_all(self.db.pool())
        .await
    }

    /// The tool calls of one model turn as they were stored.
    pub async fn turn_calls(&self, turn: &PartId) -> Result<Vec<CallRecord>, sqlx::Error> {
        sqlx::query_as(
            "SELECT id, turn_id, model_call_id, status, idempotency_key FROM tool_calls WHERE turn_id = $1 ORDER BY created_at, id",
        )
        .bind(turn)
        .fetch_all(self.db.pool())
        .await
    }

    /// A tool's requests for input the answer left open are cancelled: nobody may
    /// answer them now (a call that runs again asks again).
    pub async fn cancel_inputs(&self, message: &MessageId) -> Result<(), sqlx::Error> {
        sqlx::query(
            "UPDATE tool_inputs SET status = 'cancelled', decided_at = $1 \
             WHERE message_id = $2 AND status = 'pending'",
        )
        .bind(canonical_now())
        .bind(message)
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    pub fn db(&self) -> &Db {
        &self.db
    }
}

#[async_trait]
impl AnswerStore for Store {
    async fn save_turn(&self, answer: &AnswerRef, turn: TurnRecord<'_>) -> StoreResult<()> {
        let calls = calls_json(turn.calls);
        let updated = sqlx::query(
            "UPDATE chat_messages SET content = $1, tool_calls = COALESCE($2, tool_calls), status = $3 WHERE id = $4",
        )
        .bind(turn.text)
        .bind(&calls)
        .bind(turn.status)
        .bind(turn.part)
        .execute(self.db.pool())
        .await?;
        if updated.rows_affected() == 0 {
            let part = NewPart {
                id: turn.part,
                message: &answer.message,
                role: Role::Assistant,
                content: turn.text,
                tool_calls: calls,
                tool_call_id: None,
                status: turn.status,
                model: Some(turn.model),
            };
            self.append(&answer.conversation, part).await?;
        }
        Ok(())
    }

    async fn save_tool_result(
        &self,
        answer: &AnswerRef,
        model_call_id: &str,
        content: &str,
    ) -> StoreResult<()> {
        let part = NewPart {
            id: &PartId::new(),
            message: &answer.message,
            role: Role::Tool,
            content,
            tool_calls: None,
            tool_call_id: Some(model_call_id),
            status: MessageStatus::Complete,
            model: None,
        };
        Ok(self.append(&answer.conversation, part).await?)
    }

    async fn call_started(&self, answer: &AnswerRef, call: NewCall<'_>) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO tool_calls (id, message_id, conversation_id, turn_id, model_call_id, server, tool, arguments, title, idempotency_key, status, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(call.id)
        .bind(&answer.message)
        .bind(&answer.conversation)
        .bind(call.turn)
        .bind(call.model_call_id)
        .bind(call.server)
        .bind(call.tool)
        .bind(call.arguments.to_string())
        .bind(call.title)
        .bind(call.idempotency_key)
        .bind(CallStatus::Running)
        .bind(canonical_now())
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    async fn call_finished(
        &self,
        id: &ToolCallId,
        status: CallStatus,
        duration_ms: u64,
        summary: &str,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE tool_calls SET status = $1, duration_ms = $2, summary = $3 WHERE id = $4",
        )
        .bind(status)
        .bind(i64::try_from(duration_ms).unwrap_or(i64::MAX))
        .bind(summary)
        .bind(id)
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    async fn abandon_calls(&self, answer: &MessageId, status: CallStatus) -> StoreResult<()> {
        sqlx::query("UPDATE tool_calls SET status = $1 WHERE message_id = $2 AND status = $3")
            .bind(status)
            .bind(answer)
            .bind(CallStatus::Running)
            .execute(self.db.pool())
            .await?;
        // Their questions to the person end with them: nobody may answer them now,
        // nor be shown them again.
        sqlx::query(
            "UPDATE tool_inputs SET status = 'cancelled', decided_at = $1 \
             WHERE message_id = $2 AND status = 'pending'",
        )
        .bind(canonical_now())
        .bind(answer)
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    async fn usage(&self, answer: &AnswerRef, model: &str, usage: Usage) -> StoreResult<()> {
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        sqlx::query(
            "INSERT INTO token_usage (id, message_id, conversation_id, owner, model, prompt_tokens, completion_tokens, total_tokens, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(format!("use_{}", uuid::Uuid::now_v7().simple()))
        .bind(&answer.message)
        .bind(&answer.conversation)
        .bind(&answer.owner)
        .bind(model)
        .bind(count(usage.prompt_tokens))
        .bind(count(usage.completion_tokens))
        .bind(count(usage.total_tokens))
        .bind(canonical_now())
        .execute(self.db.pool())
        .await
        .map_err(StoreError::from)?;
        Ok(())
    }

    async fn save_grounding(&self, part: &PartId, grounding: &GroundingEvent) -> StoreResult<()> {
        let json = serde_json::to_string(grounding).map_err(|e| StoreError(e.into()))?;
        sqlx::query("UPDATE chat_messages SET grounding = $1 WHERE id = $2")
            .bind(json)
            .bind(part)
            .execute(self.db.pool())
            .await?;
        Ok(())
    }
}

fn to_model_message(row: StoredPart) -> Option<Message> {
    match row.role {
        Role::User => Some(Message::User {
            content: row.content.unwrap_or_default(),
        }),
        Role::Assistant => {
            let tool_calls: Vec<ToolCall> = row
                .tool_calls
                .as_deref()
                .and_then(|t| serde_json::from_str(t).ok())
                .unwrap_or_default();
            let content = row.content.filter(|c| !c.is_empty());
            if content.is_none() && tool_calls.is_empty() {
                return None;
            }
            Some(Message::Assistant {
                content,
                tool_calls,
            })
        }
        Role::Tool => Some(Message::Tool {
            tool_call_id: row.tool_call_id.unwrap_or_default(),
            content: row.content.unwrap_or_default(),
        }),
    }
}

/// Every tool call must be followed by its result, or providers refuse the history:
/// calls left unanswered (a cancelled or crashed turn) get a result saying so, and
/// results of calls that are not there are dropped. `close_last`: the last turn's
/// unanswered calls too (else they are left for their results to follow).
fn complete_exchanges(messages: Vec<Message>, close_last: bool) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    let mut open: Vec<String> = Vec::new();
    let close = |out: &mut Vec<Message>, open: &mut Vec<String>| {
        for id in open.drain(..) {
            out.push(Message::Tool {
                tool_call_id: id,
                content: "This call did not complete (the answer was interrupted).".to_owned(),
            });
        }
    };
    for message in messages {
        match &message {
            Message::Tool { tool_call_id, .. } => {
                if let Some(at) = open.iter().position(|id| id == tool_call_id) {
                    open.remove(at);
                    out.push(message);
                }
            }
            Message::Assistant { tool_calls, .. } => {
                close(&mut out, &mut open);
                open = tool_calls.iter().map(|c| c.id.clone()).collect();
                out.push(message);
            }
            _ => {
                close(&mut out, &mut open);
                out.push(message);
            }
        }
    }
    if close_last {
        close(&mut out, &mut open);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: "{}".into(),
        }
    }

    #[test]
    fn unanswered_calls_get_a_result_and_stray_results_go() {
        let messages = vec![
            Message::Tool {
                tool_call_id: "x".into(),
                content: "stray".into(),
            },
            Message::User {
                content: "q".into(),
            },
            Message::Assistant {
                content: None,
                tool_calls: vec![call("a"), call("b")],
            },
            Message::Tool {
                tool_call_id: "a".into(),
                content: "A".into(),
            },
            Message::User {
                content: "next".into(),
            },
        ];
        let fixed = complete_exchanges(messages, true);
        let roles: Vec<String> = fixed
            .iter()
            .map(|m| match m {
                Message::User { .. } => "user".to_owned(),
                Message::Assistant { .. } => "assistant".to_owned(),
                Message::Tool { tool_call_id, .. } => format!("tool:{tool_call_id}"),
                Message::System { .. } => "system".to_owned(),
            })
            .collect();
        assert_eq!(roles, ["user", "assistant", "tool:a", "tool:b", "user"]);
    }
}
