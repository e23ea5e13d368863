//! Write tools wait for the user who asked: an approval is pending until that user
//! answers (on any replica), the request times out (denied), or the answer is
//! cancelled. The decision is a single-winner update of the approval's row. An approval
//! "remembered" for some minutes lets the very call the person saw (the same tool
//! with the same arguments) run again in the same conversation without asking; any
//! other arguments ask again, so a prompt-injected tool result cannot ride on it.
//! Every request and decision is recorded.

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::pending::{self, Unanswered};
use crate::answer::ports::{ApprovalRequest, Approver, Asked, StoreResult, Verdict};
use crate::error::GatewayError;
use crate::live::Live;
use maitred_core::db::{Db, canonical, canonical_now};
use maitred_protocol::ids::{MessageId, Subject, ToolCallId};

/// Longest an approval may be remembered: what the web UI offers, no more.
pub const MAX_REMEMBER_MINUTES: u64 = 30;

#[derive(Debug, Clone, Deserialize)]
pub struct Decision {
    pub approve: bool,
    #[serde(default)]
    pub remember_minutes: Option<u64>,
}

impl Decision {
    /// A remembered approval is a standing permission: it has a short, checked limit.
    pub fn check(&self) -> Result<(), GatewayError> {
        match self.remember_minutes {
            Some(minutes) if minutes > MAX_REMEMBER_MINUTES => Err(GatewayError::InvalidRequest(
                format!("remember_minutes must be between 0 and {MAX_REMEMBER_MINUTES}"),
            )),
            Some(minutes) if minutes > 0 && !self.approve => Err(GatewayError::InvalidRequest(
                "remember_minutes goes only with \"approve\": true".to_owned(),
            )),
            _ => Ok(()),
        }
    }
}

pub struct Approvals {
    db: Db,
    timeout: Duration,
    live: Live,
}

impl Approvals {
    pub fn new(db: Db, timeout: Duration, live: Live) -> Self {
        Self { db, timeout, live }
    }

    async fn record(
        &self,
        request: &ApprovalRequest<'_>,
        status: &str,
        expires_at: &str,
    ) -> Result<(), sqlx::Error> {
        // A call sent again after its answer was taken over may find its request
        // still pending (its replica died after recording it, perhaps before showing
        // it): it is asked again, until a new expiry.
        sqlx::query(
            "INSERT INTO approvals (id, conversation_id, owner, server, tool, arguments, status, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
             ON CONFLICT (id) DO UPDATE SET status = excluded.status, expires_at = excluded.expires_at \
             WHERE approvals.status = 'pending'",
        )
        .bind(request.id)
        .bind(&request.answer.conversation)
        .bind(&request.answer.owner)
        .bind(request.server)
        .bind(request.tool)
        .bind(request.arguments.to_string())
        .bind(status)
        .bind(canonical_now())
        .bind(expires_at)
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    /// Pending → `status`, once: of two decisions (a double click, two tabs, two
    /// replicas, a decision and the timeout) exactly one wins.
    async fn settle(
        &self,
        id: &ToolCallId,
        owner: &Subject,
        status: &str,
        remember_until: Option<&str>,
    ) -> Result<bool, sqlx::Error> {
        let settled = sqlx::query(
            "UPDATE approvals SET status = $1, remember_until = $2, decided_by = $3, decided_at = $4 \
             WHERE id = $5 AND owner = $3 AND status = 'pending'",
        )
        .bind(status)
        .bind(remember_until)
        .bind(owner)
        .bind(canonical_now())
        .bind(id)
        .execute(self.db.pool())
        .await?;
        Ok(settled.rows_affected() == 1)
    }

    /// How the approval stands: `None` while it waits.
    async fn verdict(&self, id: &ToolCallId) -> Result<Option<Verdict>, sqlx::Error> {
        let status: Option<(String,)> =
            sqlx::query_as("SELECT status FROM approvals WHERE id = $1")
                .bind(id)
                .fetch_optional(self.db.pool())
                .await?;
        Ok(match status.as_ref().map(|(s,)| s.as_str()) {
            Some("approved") => Some(Verdict::Approved),
            Some("denied") => Some(Verdict::Denied),
            Some("expired") => Some(Verdict::Expired),
            Some("pending") => None,
            _ => Some(Verdict::Cancelled),
        })
    }

    /// The owner's answer, from any replica; the one running the call is woken at once.
    /// Anyone else, and any approval no longer waiting (decided, expired, cancelled),
    /// is a 404.
    pub async fn decide(
        &self,
        id: &ToolCallId,
        owner: &Subject,
        decision: Decision,
    ) -> Result<(), GatewayError> {
        let (status, remember_until) = if decision.approve {
            let remember_until = decision.remember_minutes.filter(|m| *m > 0).map(|m| {
                canonical(
                    chrono::Utc::now() + Duration::from_secs(m.min(MAX_REMEMBER_MINUTES) * 60),
                )
            });
            ("approved", remember_until)
        } else {
            ("denied", None)
        };
        if !self
            .settle(id, owner, status, remember_until.as_deref())
            .await?
        {
            return Err(GatewayError::not_found("approval", id.as_str()));
        }
        self.live.wake(id.as_str()).await?;
        Ok(())
    }
}

/// An approval asked by an answer that ended without waiting for it (the Responses
/// API's): where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deferred {
    /// The answer that asked.
    pub message: MessageId,
    pub status: String,
    /// Past its expiry, it can no longer be answered.
    pub expired: bool,
}

impl Approvals {
    /// `owner`'s approval of call `id`, with the answer that asked; `None` for an
    /// unknown id or another person's.
    pub async fn deferred(
        &self,
        id: &ToolCallId,
        owner: &Subject,
    ) -> Result<Option<Deferred>, sqlx::Error> {
        let row: Option<(MessageId, String, String)> = sqlx::query_as(
            "SELECT c.message_id, a.status, a.expires_at FROM approvals a JOIN tool_calls c ON c.id = a.id \
             WHERE a.id = $1 AND a.owner = $2",
        )
        .bind(id)
        .bind(owner)
        .fetch_optional(self.db.pool())
        .await?;
        Ok(row.map(|(message, status, expires_at)| Deferred {
            message,
            status,
            expired: expires_at <= canonical_now(),
        }))
    }

    /// The owner's decision on a deferred approval: pending and not expired → approved
    /// or denied, once (false if it was not pending any more, or had expired).
    pub async fn decide_deferred(
        &self,
        id: &ToolCallId,
        owner: &Subject,
        approve: bool,
    ) -> Result<bool, sqlx::Error> {
        let now = canonical_now();
        let settled = sqlx::query(
            "UPDATE approvals SET status = $1, decided_by = $2, decided_at = $3 \
             WHERE id = $4 AND owner = $2 AND status = 'pending' AND expires_at > $3",
        )
        .bind(if approve { "approved" } else { "denied" })
        .bind(owner)
        .bind(&now)
        .bind(id)
        .execute(self.db.pool())
        .await?;
        Ok(settled.rows_affected() == 1)
    }

    /// Takes a decision back when the answer that was to act on it could not start
    /// (the person's limits were full): it waits again, to be decided again.
    pub async fn undecide(&self, id: &ToolCallId, owner: &Subject) -> Result<(), sqlx::Error> {
        sqlx::query(
            "UPDATE approvals SET status = 'pending', decided_by = NULL, decided_at = NULL \
             WHERE id = $1 AND owner = $2 AND status IN ('approved', 'denied')",
        )
        .bind(id)
        .bind(owner)
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    /// A pending approval nobody will answer any more (the conversation went on):
    /// cancelled.
    pub async fn withdraw(&self, id: &ToolCallId) -> Result<(), sqlx::Error> {
        sqlx::query(
            "UPDATE approvals SET status = 'cancelled', decided_at = $1 WHERE id = $2 AND status = 'pending'",
        )
        .bind(canonical_now())
        .bind(id)
        .execute(self.db.pool())
        .await?;
        Ok(())
    }
}

#[async_trait]
impl Approver for Approvals {
    async fn remembered(&self, request: &ApprovalRequest<'_>) -> StoreResult<bool> {
        let approved: Vec<(String,)> = sqlx::query_as(
            "SELECT arguments FROM approvals WHERE conversation_id = $1 AND owner = $2 \
             AND server = $3 AND tool = $4 AND status = 'approved' AND remember_until > $5",
        )
        .bind(&request.answer.conversation)
        .bind(&request.answer.owner)
        .bind(request.server)
        .bind(request.tool)
        .bind(canonical_now())
        .fetch_all(self.db.pool())
        .await?;
        // Compared as JSON values, so key order and spacing do not matter.
        let covered = approved.iter().any(|(arguments,)| {
            serde_json::from_str::<Value>(arguments).is_ok_and(|seen| &seen == request.arguments)
        });
        if covered {
            self.record(request, "remembered", &canonical_now()).await?;
        }
        Ok(covered)
    }

    async fn open(&self, request: &ApprovalRequest<'_>) -> StoreResult<String> {
        let expires_at = canonical(chrono::Utc::now() + self.timeout);
        self.record(request, "pending", &expires_at).await?;
        Ok(expires_at)
    }

    async fn asked(&self, id: &ToolCallId) -> StoreResult<Asked> {
        let status: Option<(String,)> =
            sqlx::query_as("SELECT status FROM approvals WHERE id = $1")
                .bind(id)
                .fetch_optional(self.db.pool())
                .await?;
        Ok(match status.as_ref().map(|(s,)| s.as_str()) {
            None => Asked::Never,
            Some("pending") => Asked::Waiting,
            Some("approved" | "remembered") => Asked::Decided(Verdict::Approved),
            Some("denied") => Asked::Decided(Verdict::Denied),
            Some("expired") => Asked::Decided(Verdict::Expired),
            Some(_) => Asked::Decided(Verdict::Cancelled),
        })
    }

    async fn wait(
        &self,
        request: &ApprovalRequest<'_>,
        cancel: &CancellationToken,
    ) -> StoreResult<Verdict> {
        let owner = &request.answer.owner;
        Ok(pending::wait(
            &self.live,
            request.id.as_str(),
            self.timeout,
            cancel,
            || self.verdict(request.id),
            |status| self.settle(request.id, owner, status, None),
            |unanswered| match unanswered {
                Unanswered::Expired => Verdict::Expired,
                Unanswered::Cancelled => Verdict::Cancelled,
            },
        )
        .await?)
    }
}
