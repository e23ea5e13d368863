//! Write tools wait for the user who asked: an approval is pending until that user
//! answers, the request times out (denied), or the answer is cancelled. An approval
//! "remembered" for some minutes lets the very call the person saw (the same tool
//! with the same arguments) run again in the same conversation without asking; any
//! other arguments ask again, so a prompt-injected tool result cannot ride on it.
//! Every request and decision is recorded.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::db::{Db, canonical, canonical_now};
use crate::gateway::error::GatewayError;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Approved,
    Remembered,
    Denied,
    Expired,
    Cancelled,
}

struct Pending {
    owner: String,
    answer: oneshot::Sender<Decision>,
}

pub struct Approvals {
    db: Db,
    timeout: Duration,
    pending: Mutex<HashMap<String, Pending>>,
}

/// What is being approved.
pub struct Request<'a> {
    pub id: &'a str,
    pub conversation: &'a str,
    pub owner: &'a str,
    pub server: &'a str,
    pub tool: &'a str,
    pub arguments: &'a Value,
}

impl Approvals {
    pub fn new(db: Db, timeout: Duration) -> Self {
        Self {
            db,
            timeout,
            pending: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn expires_at(&self) -> String {
        canonical(chrono::Utc::now() + self.timeout)
    }

    pub fn waiting(&self) -> usize {
        self.lock().len()
    }

    /// Whether an earlier approval, still remembered, was for this very call: the
    /// same tool with the same arguments the person was shown, in this conversation.
    pub async fn remembered(&self, request: &Request<'_>) -> Result<bool, GatewayError> {
        let approved: Vec<(String,)> = sqlx::query_as(
            "SELECT arguments FROM approvals WHERE conversation_id = $1 AND owner = $2 \
             AND server = $3 AND tool = $4 AND status = 'approved' AND remember_until > $5",
        )
        .bind(request.conversation)
        .bind(request.owner)
        .bind(request.server)
        .bind(request.tool)
        .bind(canonical_now())
        .fetch_all(self.db.pool())
        .await?;
        // Compared as JSON values, so key order and spacing do not matter.
        Ok(approved.iter().any(|(arguments,)| {
            serde_json::from_str::<Value>(arguments).is_ok_and(|seen| &seen == request.arguments)
        }))
    }

    async fn record(
        &self,
        request: &Request<'_>,
        status: &str,
        expires_at: &str,
    ) -> Result<(), GatewayError> {
        sqlx::query(
            "INSERT INTO approvals (id, conversation_id, owner, server, tool, arguments, status, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(request.id)
        .bind(request.conversation)
        .bind(request.owner)
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

    /// Records that a remembered approval let a call through.
    pub async fn record_remembered(&self, request: &Request<'_>) -> Result<(), GatewayError> {
        self.record(request, "remembered", &canonical_now()).await
    }

    /// Records the request and starts listening for the owner's answer; only then
    /// may the request be shown, or a quick answer would find nothing waiting.
    pub async fn open(
        &self,
        request: &Request<'_>,
        expires_at: &str,
    ) -> Result<oneshot::Receiver<Decision>, GatewayError> {
        self.record(request, "pending", expires_at).await?;
        let (answer, decision) = oneshot::channel();
        self.lock().insert(
            request.id.to_owned(),
            Pending {
                owner: request.owner.to_owned(),
                answer,
            },
        );
        Ok(decision)
    }

    /// Waits for the owner's decision, the timeout, or cancellation.
    pub async fn wait(
        &self,
        request: &Request<'_>,
        decision: oneshot::Receiver<Decision>,
        cancel: &CancellationToken,
    ) -> Result<Outcome, GatewayError> {
        let decided = tokio::select! {
            decision = decision => decision.ok(),
            () = tokio::time::sleep(self.timeout) => None,
            () = cancel.cancelled() => {
                self.lock().remove(request.id);
                self.close(request.id, "cancelled", None).await?;
                return Ok(Outcome::Cancelled);
            }
        };
        self.lock().remove(request.id);
        let Some(decision) = decided else {
            self.close(request.id, "expired", None).await?;
            return Ok(Outcome::Expired);
        };
        if !decision.approve {
            self.close(request.id, "denied", None).await?;
            return Ok(Outcome::Denied);
        }
        let remember_until = decision.remember_minutes.filter(|m| *m > 0).map(|m| {
            canonical(chrono::Utc::now() + Duration::from_secs(m.min(MAX_REMEMBER_MINUTES) * 60))
        });
        self.close(request.id, "approved", remember_until.as_deref())
            .await?;
        Ok(Outcome::Approved)
    }

    async fn close(
        &self,
        id: &str,
        status: &str,
        remember_until: Option<&str>,
    ) -> Result<(), GatewayError> {
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
        id: &str,
        owner: &str,
        decision: Decision,
    ) -> Result<(), GatewayError> {
        let pending = {
            let mut pending = self.lock();
            match pending.get(id) {
                Some(p) if p.owner == owner => pending.remove(id),
                _ => None,
            }
        };
        let pending = pending.ok_or_else(|| GatewayError::not_found("approval", id))?;
        sqlx::query("UPDATE approvals SET decided_by = $1 WHERE id = $2")
            .bind(owner)
            .bind(id)
            .execute(self.db.pool())
            .await?;
        pending
            .answer
            .send(decision)
            .map_err(|_| GatewayError::not_found("approval", id))
    }
}
