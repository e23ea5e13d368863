//! The live state of one gateway process (the default, with no Redis): limits and
//! viewers in memory, the events committed to the database before anyone sees them.
//! Its process is the only replica, so after a crash it finishes, at its next start,
//! the answers its previous run left open.

mod log;
mod sqlite_writer;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::batch::Committer;
use super::limits::UserLimits;
use super::{
    Admission, CancelOutcome, Events, LiveError, LiveState, Local, LoggedEvent, ModelLimits,
    Timings, ViewerSlot, recover,
};
use crate::answer::ports::AnswerRef;
use crate::chat::resume::Resumer;
use crate::chat::store::Store;
use crate::error::GatewayError;
use crate::metrics::GatewayMetrics;
use log::{Append, EventLog};
use maitred_core::db::Db;
use maitred_core::settings::gateway_file::{Limits, Resilience};
use maitred_llm::limits::LocalModelLimits;
use maitred_protocol::ids::{MessageId, Subject};

/// How long a finished answer's events stay in memory for late viewers (the
/// database keeps them longer).
const IN_MEMORY: Duration = Duration::from_secs(60);

pub struct MemoryLive {
    replica: String,
    local: Local,
    log: EventLog,
    committer: Committer<Append>,
    limits: UserLimits,
    admissions: Mutex<HashMap<MessageId, Admission>>,
    models: Arc<LocalModelLimits>,
    tasks: TaskTracker,
    stop: CancellationToken,
    resumer: OnceLock<Arc<Resumer>>,
}

impl MemoryLive {
    /// `data_dir` keeps this process's replica id across restarts, so that the next
    /// run knows which answers were its own. `stop`: the answers have all ended (or
    /// been interrupted) at shutdown; what is queued is written, then the writer ends.
    #[expect(
        clippy::too_many_arguments,
        reason = "each is a separate part the caller owns; a struct would only rename them"
    )]
    pub fn start(
        db: Db,
        data_dir: &Path,
        limits: &Limits,
        resilience: &Resilience,
        timings: Timings,
        metrics: GatewayMetrics,
        tasks: TaskTracker,
        stop: CancellationToken,
    ) -> anyhow::Result<Arc<Self>> {
        let shutdown = stop;
        let replica = replica_id(data_dir)?;
        let log = EventLog::new(db.clone(), replica.clone())?;
        let committer = Committer::start(&tasks, shutdown.clone(), {
            let log = log.clone();
            move |batch| {
                let log = log.clone();
                async move { log.write(batch).await }
            }
        });
        let live = Arc::new(Self {
            replica,
            local: Local::new(metrics),
            log,
            committer,
            limits: UserLimits::new(limits),
            admissions: Mutex::new(HashMap::new()),
            models: Arc::new(LocalModelLimits::new(resilience)),
            tasks: tasks.clone(),
            stop: shutdown.clone(),
            resumer: OnceLock::new(),
        });
        tasks.spawn(janitor(live.clone(), db, timings, shutdown));
        Ok(live)
    }

    /// Takes over the answers this process's previous run left open: each goes on
    /// here (see `chat::resume`) or, when it cannot, ends for its viewers with `error`
    /// `interrupted` and `done`. Either way it is stored with every token its viewers
    /// were sent. Returns how many went on, and how many ended.
    pub async fn recover(self: &Arc<Self>, store: &Store) -> Result<(usize, usize), LiveError> {
        let open: Vec<AnswerRef> = sqlx::query_as::<_, (MessageId, maitred_protocol::ids::ConversationId, Subject)>(
            "SELECT id, conversation_id, owner FROM answers WHERE replica = $1 AND status = 'running'",
        )
        .bind(&self.replica)
        .fetch_all(store.db().pool())
        .await?
        .into_iter()
        .map(|(message, conversation, owner)| AnswerRef {
            message,
            conversation,
            owner,
        })
        .collect();
        let resumer = self.resumer.get().cloned();
        let mut resumed = 0;
        for answer in &open {
            let events = self.log.events(&answer.message, 0).await?;
            self.log
                .open(&answer.message, &answer.owner, events.clone());
            if let Some(resumer) = &resumer {
                match resumer.prepare(answer, &events).await {
                    Ok(Some(prepared)) => {
                        let after = events.last().map_or(0, |e| e.seq);
                        resumer.start(self.clone(), prepared, after);
                        resumed += 1;
                        continue;
                    }
                    Ok(None) => {}
                    Err(error) => {
                        tracing::warn!(%error, message_id = %answer.message, "an answer left open cannot go on; ending it");
                    }
                }
            }
            for event in recover::finish(store, answer, &events).await? {
                self.committer
                    .push(
                        Append {
                            answer: answer.clone(),
                            event,
                        },
                        true,
                    )
                    .await?;
            }
            sqlx::query("UPDATE answers SET status = 'interrupted' WHERE id = $1")
                .bind(&answer.message)
                .execute(store.db().pool())
                .await?;
            self.retire(&answer.message);
        }
        Ok((resumed, open.len() - resumed))
    }

    fn retire(&self, id: &MessageId) {
        let (log, id, stop) = (self.log.clone(), id.clone(), self.stop.clone());
        self.tasks.spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(IN_MEMORY) => log.close(&id),
                () = stop.cancelled() => {}
            }
        });
    }
}

#[async_trait]
impl LiveState for MemoryLive {
    fn replica(&self) -> &str {
        &self.replica
    }

    fn local(&self) -> &Local {
        &self.local
    }

    async fn admit(&self, answer: &AnswerRef) -> Result<(), GatewayError> {
        let admission = self.limits.admit(&answer.owner)?;
        self.admissions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(answer.message.clone(), admission);
        self.log.open(&answer.message, &answer.owner, Vec::new());
        Ok(())
    }

    async fn append(
        &self,
        answer: &AnswerRef,
        event: LoggedEvent,
        wait: bool,
    ) -> Result<(), LiveError> {
        if self
            .log
            .buffer(&answer.message)
            .is_some_and(|buffer| buffer.failed())
        {
            return Err(LiveError::Write(
                "an earlier event of this answer could not be stored".to_owned(),
            ));
        }
        if event.is_done() {
            // Before its viewers hear `done`: a next question is admitted at once.
            self.admissions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&answer.message);
        }
        let append = Append {
            answer: answer.clone(),
            event,
        };
        self.committer.push(append, wait).await
    }

    async fn finish(&self, answer: &AnswerRef) {
        self.admissions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&answer.message);
        self.local.finish(&answer.message);
        self.retire(&answer.message);
    }

    async fn view(&self, owner: &Subject) -> Result<ViewerSlot, GatewayError> {
        self.limits.view(owner)
    }

    async fn follow(
        &self,
        id: &MessageId,
        owner: &Subject,
        after: u64,
    ) -> Result<Option<Events>, LiveError> {
        match self.log.follow(id, owner, after) {
            Some(found) => Ok(found),
            None => self.log.stored(id, owner, after).await,
        }
    }

    async fn logged(
        &self,
        id: &MessageId,
        owner: &Subject,
    ) -> Result<Option<Vec<LoggedEvent>>, LiveError> {
        if let Some(found) = self.log.so_far(id, owner) {
            return Ok(found);
        }
        match self.log.stored(id, owner, 0).await? {
            Some(events) => Ok(Some(events.collect().await)),
            None => Ok(None),
        }
    }

    async fn cancel(&self, id: &MessageId, owner: &Subject) -> Result<CancelOutcome, LiveError> {
        if let Some(local) = self.local.get(id).filter(|l| &l.answer.owner == owner) {
            local.cancel.cancel();
            return Ok(CancelOutcome::Cancelled);
        }
        Ok(match self.log.follow(id, owner, u64::MAX) {
            Some(Some(_)) => CancelOutcome::Finished,
            _ => CancelOutcome::Unknown,
        })
    }

    async fn wake(&self, key: &str) -> Result<(), LiveError> {
        self.local.wake(key);
        Ok(())
    }

    fn models(&self) -> Arc<dyn ModelLimits> {
        self.models.clone()
    }

    fn resume_with(&self, resumer: Arc<Resumer>) {
        let _ = self.resumer.set(resumer);
    }
}

/// Every second: answers nobody has watched for the grace period are cancelled.
/// Every minute: events of answers that ended longer ago than the retention go.
async fn janitor(live: Arc<MemoryLive>, db: Db, timings: Timings, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut ticks: u64 = 0;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        ticks += 1;
        for answer in live.local.active() {
            if answer.unwatched_for() > timings.grace && !answer.cancel.is_cancelled() {
                tracing::info!(message_id = %answer.answer.message, "nobody is watching: cancelling the answer");
                answer.cancel.cancel();
            }
        }
        if ticks.is_multiple_of(60)
            && let Err(error) = forget_old_events(&db, timings.retention).await
        {
            tracing::warn!(%error, "removing old answer events");
        }
    }
}

async fn forget_old_events(db: &Db, retention: Duration) -> Result<(), sqlx::Error> {
    let before = maitred_core::db::canonical(
        chrono::Utc::now() - chrono::Duration::from_std(retention).unwrap_or_default(),
    );
    sqlx::query(
        "DELETE FROM answer_events WHERE message_id IN \
         (SELECT id FROM answers WHERE status <> 'running' AND finished_at < $1)",
    )
    .bind(before)
    .execute(db.pool())
    .await?;
    Ok(())
}

/// This process's id, kept in the data dir so a restart knows its earlier answers.
fn replica_id(data_dir: &Path) -> anyhow::Result<String> {
    let path = data_dir.join("gateway-replica");
    if let Ok(id) = std::fs::read_to_string(&path)
        && !id.trim().is_empty()
    {
        return Ok(id.trim().to_owned());
    }
    let id = format!("gw_{}", uuid::Uuid::now_v7().simple());
    let written = maitred_core::db::files::create_private_dir(data_dir)
        .and_then(|()| maitred_core::db::files::create_private_file(&path))
        .and_then(|()| std::fs::write(&path, &id));
    written.map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    Ok(id)
}
