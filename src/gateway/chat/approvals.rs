//! Write tools wait for the user who asked: an approval is pending until that user
//! answers, the request times out (denied), or the answer is cancelled. An approval
//! "remembered" for some minutes lets the very call the person saw (the same tool
//! with the same arguments) run again in the same conversation without asking; any
//! other arguments ask again, so a prompt-injected tool result cannot ride on it.
//! Every request and decision is recorded.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::db::{Db, canonical, canonical_now};
use crate::gateway::answer::ports::{ApprovalRequest, Approver, StoreResult, Verdict};
use crate::gateway::error::GatewayError;
use crate::gateway::ids::{Subject, ToolCallId};

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

/// An approval waiting for its owner: the sender is taken by the decision, the
/// receiver by the call that waits.
struct Pending {
    owner: Subject,
    answer: Option<oneshot::Sender<Decision>>,
    decision: Option<oneshot::Receiver<Decision>>,
}

pub struct Approvals {
    db: Db,
    timeout: Duration,
    pending: Mutex<HashMap<ToolCallId, Pending>>,
}

impl Approvals {
    pub fn new(db: Db, timeout: Duration) -> Self {
        Self {
            db,
            timeout,
            pending: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ToolCallId, Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn waiting(&self) -> usize {
        self.lock().len()
    }

    async fn record(
        &self,
        request: &ApprovalRequest<'_>,
        status: &str,
        expires_at: &str,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "INSERT INTO approvals (id, conversation_id, owner, server, tool, arguments, status, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
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

    async fn close(
        &self,
        id: &ToolCallId,
        status: &str,
        remember_until: Option<&str>,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "UPDATE approvals SET status = $1, remember_until = $2, decided_at = $3 WHERE id = $4",
        )
        .bind(status)
        .bind(remember_until)
        .bind(canonical_now())
        .bind(id)
        .execute(self.db.pool())
        .await?;
        Ok(())
    }

    /// The owner's answer. Anyone else, and any approval no longer waiting, is a 404.
    pub async fn decide(
        &self,
        id: &ToolCallId,
        owner: &Subject,
        decision: Decision,
    ) -> Result<(), GatewayError> {
        let answer = match self.lock().get_mut(id) {
            Some(pending) if &pending.owner == owner => pending.answer.take(),
            _ => None,
        };
        let answer = answer.ok_or_else(|| GatewayError::not_found("approval", id.as_str()))?;
        sqlx::query("UPDATE approvals SET decided_by = $1 WHERE id = $2")
            .bind(owner)
            .bind(id)
            .execute(self.db.pool())
            .await?;
        answer
            .send(decision)
            .map_err(|_| GatewayError::not_found("approval", id.as_str()))
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
        let (answer, decision) = oneshot::channel();
        self.lock().insert(
            request.id.clone(),
            Pending {
                owner: request.answer.owner.clone(),
                answer: Some(answer),
                decision: Some(decision),
            },
        );
        Ok(expires_at)
    }

    async fn wait(
        &self,
        request: &ApprovalRequest<'_>,
        cancel: &CancellationToken,
    ) -> StoreResult<Verdict> {
        let decision = self
            .lock()
            .get_mut(request.id)
            .and_then(|pending| pending.decision.take());
        let Some(decision) = decision else {
            return Ok(Verdict::Cancelled);
        };
        let decided = tokio::select! {
            decision = decision => decision.ok(),
            () = tokio::time::sleep(self.timeout) => None,
            () = cancel.cancelled() => {
                self.lock().remove(request.id);
                self.close(request.id, "cancelled", None).await?;
                return Ok(Verdict::Cancelled);
            }
        };
        self.lock().remove(request.id);
        let Some(decision) = decided else {
            self.close(request.id, "expired", None).await?;
            return Ok(Verdict::Expired);
        };
        if !decision.approve {
            self.close(request.id, "denied", None).await?;
            return Ok(Verdict::Denied);
        }
        let remember_until = decision.remember_minutes.filter(|m| *m > 0).map(|m| {
            canonical(chrono::Utc::now() + Duration::from_secs(m.min(MAX_REMEMBER_MINUTES) * 60))
        });
        self.close(request.id, "approved", remember_until.as_deref())
            .await?;
        Ok(Verdict::Approved)
    }
}
