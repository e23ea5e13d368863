//! Conversations as they happen: every question, model turn, tool call, approval and
//! token count is written when it occurs, so a crash loses at most the text of the
//! turn being streamed (flushed every few seconds).

use serde::Serialize;
use serde_json::Value;
use sqlx::FromRow;

use crate::db::{Db, canonical_now, is_unique_violation};
use crate::gateway::error::GatewayError;
use crate::gateway::llm::{Message, ToolCall, Usage};

#[derive(Clone)]
pub struct Store {
    db: Db,
}

#[derive(Debug, Clone, Serialize, FromRow)]
pub struct ConversationSummary {
    pub id: String,
    pub title: String,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, Serialize, FromRow)]
pub struct StoredMessage {
    pub id: String,
    #[serde(skip)]
    pub seq: i64,
    pub generation_id: Option<String>,
    pub role: String,
    pub content: Option<String>,
    #[serde(skip)]
    pub tool_calls: Option<String>,
    #[serde(skip)]
    pub tool_call_id: Option<String>,
    pub status: String,
    pub model: Option<String>,
    pub created_at: String,
}

#[derive(Debug, Clone, Serialize, FromRow)]
pub struct StoredToolCall {
    pub id: String,
    #[serde(skip)]
    pub turn_id: String,
    pub server: String,
    pub tool: String,
    #[serde(skip)]
    pub arguments: String,
    pub status: String,
    pub duration_ms: Option<i64>,
    pub summary: Option<String>,
    pub created_at: String,
}

/// A new row of the conversation.
pub struct NewMessage<'a> {
    pub generation_id: Option<&'a str>,
    pub role: &'a str,
    pub content: Option<&'a str>,
    pub tool_calls: &'a [ToolCall],
    pub tool_call_id: Option<&'a str>,
    pub status: &'a str,
    pub model: Option<&'a str>,
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

impl Store {
    pub fn new(db: Db) -> Self {
        Self { db }
    }

    /// The conversation to continue (404 unless it is the owner's), or a new one.
    pub async fn open(
        &self,
        owner: &str,
        id: Option<&str>,
        question: &str,
    ) -> Result<String, GatewayError> {
        if let Some(id) = id {
            let found: Option<(String,)> =
                sqlx::query_as("SELECT id FROM conversations WHERE id = $1 AND owner = $2")
                    .bind(id)
                    .bind(owner)
                    .fetch_optional(self.db.pool())
                    .await?;
            return found
                .map(|(id,)| id)
                .ok_or_else(|| GatewayError::not_found("conversation", id));
        }
        let id = new_id("conv");
        let title: String = question.split_whitespace().collect::<Vec<_>>().join(" ");
        let title = match title.char_indices().nth(80) {
            Some((cut, _)) => format!("{}…", &title[..cut]),
            None => title,
        };
        let now = canonical_now();
        sqlx::query(
            "INSERT INTO conversations (id, owner, title, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)",
        )
        .bind(&id)
        .bind(owner)
        .bind(title)
        .bind(&now)
        .execute(self.db.pool())
        .await?;
        Ok(id)
    }

    /// Appends a row at the end of the conversation; returns its id.
    pub async fn append(
        &self,
        conversation: &str,
        message: NewMessage<'_>,
    ) -> Result<String, GatewayError> {
        let id = new_id("msg");
        let tool_calls = if message.tool_calls.is_empty() {
            None
        } else {
            serde_json::to_string(message.tool_calls).ok()
        };
        let now = canonical_now();
        // Two generations may append to one conversation at once: retry on a taken seq.
        for _ in 0..5 {
            let inserted = sqlx::query(
                "INSERT INTO chat_messages (id, conversation_id, seq, generation_id, role, content, tool_calls, tool_call_id, status, model, created_at) \
                 VALUES ($1, $2, (SELECT COALESCE(MAX(seq), 0) + 1 FROM chat_messages WHERE conversation_id = $2), $3, $4, $5, $6, $7, $8, $9, $10)",
            )
            .bind(&id)
            .bind(conversation)
            .bind(message.generation_id)
            .bind(message.role)
            .bind(message.content)
            .bind(&tool_calls)
            .bind(message.tool_call_id)
            .bind(message.status)
            .bind(message.model)
            .bind(&now)
            .execute(self.db.pool())
            .await;
            match inserted {
                Ok(_) => {
                    sqlx::query("UPDATE conversations SET updated_at = $1 WHERE id = $2")
                        .bind(&now)
                        .bind(conversation)
                        .execute(self.db.pool())
                        .await?;
                    return Ok(id);
                }
                Err(error) if is_unique_violation(&error) => continue,
                Err(error) => return Err(error.into()),
            }
        }
        Err(GatewayError::Internal(anyhow::anyhow!(
            "could not append to the conversation"
        )))
    }

    pub async fn update(
        &self,
        message_id: &str,
        content: &str,
        tool_calls: &[ToolCall],
        status: &str,
    ) -> Result<(), GatewayError> {
        let tool_calls = if tool_calls.is_empty() {
            None
        } else {
            serde_json::to_string(tool_calls).ok()
        };
        sqlx::query("UPDATE chat_messages SET content = $1, tool_calls = COALESCE($2, tool_calls), status = $3 WHERE id = $4")
            .bind(content)
            .bind(tool_calls)
            .bind(status)
            .bind(message_id)
            .execute(self.db.pool())
            .await?;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn tool_call_started(
        &self,
        id: &str,
        generation_id: &str,
        conversation: &str,
        turn_id: &str,
        model_call_id: &str,
        server: &str,
        tool: &str,
        arguments: &Value,
    ) -> Result<(), GatewayError> {
        sqlx::query(
            "INSERT INTO tool_calls (id, generation_id, conversation_id, turn_id, model_call_id, server, tool, arguments, status, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'running', $9)",
        )
        .bind(id)
        .bind(generation_id)
        .bind(conversation)
        .bind(turn_id)
        .bind(model_call_id)
        .bind(server)
        .bind(tool)
        .bind(arguments.to_string())
        .bind(canonical_now())
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    pub async fn tool_call_finished(
        &self,
        id: &str,
        status: &str,
        duration_ms: u64,
        summary: &str,
    ) -> Result<(), GatewayError> {
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

    /// Tool calls a stopped generation left running get the reason it stopped.
    pub async fn abandon_tool_calls(
        &self,
        generation_id: &str,
        status: &str,
    ) -> Result<(), GatewayError> {
        sqlx::query(
            "UPDATE tool_calls SET status = $1 WHERE generation_id = $2 AND status = 'running'",
        )
        .bind(status)
        .bind(generation_id)
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    pub async fn usage(
        &self,
        generation_id: &str,
        conversation: &str,
        owner: &str,
        model: &str,
        usage: Usage,
    ) -> Result<(), GatewayError> {
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        sqlx::query(
            "INSERT INTO token_usage (id, generation_id, conversation_id, owner, model, prompt_tokens, completion_tokens, total_tokens, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(new_id("use"))
        .bind(generation_id)
        .bind(conversation)
        .bind(owner)
        .bind(model)
        .bind(count(usage.prompt_tokens))
        .bind(count(usage.completion_tokens))
        .bind(count(usage.total_tokens))
        .bind(canonical_now())
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    /// Earlier turns for the model: the newest that fit in `budget` characters, never
    /// starting in the middle of a tool exchange.
    pub async fn history(
        &self,
        conversation: &str,
        budget: usize,
    ) -> Result<Vec<Message>, GatewayError> {
        let rows: Vec<StoredMessage> = sqlx::query_as(
            "SELECT id, seq, generation_id, role, content, tool_calls, tool_call_id, status, model, created_at \
             FROM chat_messages WHERE conversation_id = $1 ORDER BY seq DESC LIMIT 500",
        )
        .bind(conversation)
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
        while kept.first().is_some_and(|m| m.role == "tool") {
            kept.remove(0);
        }
        Ok(complete_exchanges(
            kept.into_iter().filter_map(to_model_message).collect(),
        ))
    }

    pub async fn conversations(
        &self,
        owner: &str,
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
        owner: &str,
        id: &str,
    ) -> Result<(ConversationSummary, Vec<StoredMessage>, Vec<StoredToolCall>), GatewayError> {
        let summary: ConversationSummary = sqlx::query_as(
            "SELECT id, title, created_at, updated_at FROM conversations WHERE id = $1 AND owner = $2",
        )
        .bind(id)
        .bind(owner)
        .fetch_optional(self.db.pool())
        .await?
        .ok_or_else(|| GatewayError::not_found("conversation", id))?;
        let messages = sqlx::query_as(
            "SELECT id, seq, generation_id, role, content, tool_calls, tool_call_id, status, model, created_at \
             FROM chat_messages WHERE conversation_id = $1 ORDER BY seq",
        )
        .bind(id)
        .fetch_all(self.db.pool())
        .await?;
        let calls = sqlx::query_as(
            "SELECT id, turn_id, server, tool, arguments, status, duration_ms, summary, created_at \
             FROM tool_calls WHERE conversation_id = $1 ORDER BY created_at, id",
        )
        .bind(id)
        .fetch_all(self.db.pool())
        .await?;
        Ok((summary, messages, calls))
    }

    pub async fn delete(&self, owner: &str, id: &str) -> Result<(), GatewayError> {
        let mut tx = self.db.begin_write().await?;
        let found: Option<(String,)> =
            sqlx::query_as("SELECT id FROM conversations WHERE id = $1 AND owner = $2")
                .bind(id)
                .bind(owner)
                .fetch_optional(&mut *tx)
                .await?;
        if found.is_none() {
            return Err(GatewayError::not_found("conversation", id));
        }
        for table in ["token_usage", "approvals", "tool_calls", "chat_messages"] {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE conversation_id = $1"
            )))
            .bind(id)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("DELETE FROM conversations WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    pub fn db(&self) -> &Db {
        &self.db
    }
}

fn to_model_message(row: StoredMessage) -> Option<Message> {
    match row.role.as_str() {
        "user" => Some(Message::User {
            content: row.content.unwrap_or_default(),
        }),
        "assistant" => {
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
        "tool" => Some(Message::Tool {
            tool_call_id: row.tool_call_id.unwrap_or_default(),
            content: row.content.unwrap_or_default(),
        }),
        _ => None,
    }
}

/// Every tool call must be followed by its result, or providers refuse the history:
/// calls left unanswered (a cancelled or crashed turn) get a result saying so, and
/// results of calls that are not there are dropped.
fn complete_exchanges(messages: Vec<Message>) -> Vec<Message> {
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
    close(&mut out, &mut open);
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
        let fixed = complete_exchanges(messages);
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
