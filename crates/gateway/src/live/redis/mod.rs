//! The live state of gateway replicas, in Redis 7 (or Valkey): an append-only stream
//! per answer, announced on the answer's channel; a control channel that carries a
//! cancel or a decision to the replica that runs the answer; shared counters for the
//! person's and the model's limits; and a lease per answer that its owner renews.
//! When a lease lapses, another replica ends the answer for every viewer and stores
//! every token that was shown.

mod follow;
mod hub;
mod keys;
mod leases;
mod limits;
mod wire;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use redis::AsyncCommands;
use redis::aio::ConnectionManager;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::batch::Committer;
use super::{
    CancelOutcome, Events, LiveError, LiveState, Local, LoggedEvent, ModelLimits, Timings,
    ViewerSlot,
};
use crate::answer::ports::AnswerRef;
use crate::chat::resume::Resumer;
use crate::chat::store::Store;
use crate::error::GatewayError;
use crate::metrics::GatewayMetrics;
use hub::Hub;
use keys::Keys;
use limits::RedisLimits;
use maitred_core::settings::gateway_file::{Limits, Resilience};
use maitred_protocol::ids::{MessageId, Subject};

/// A stream keeps at most about this many events (an answer is far shorter).
const MAX_EVENTS: usize = 100_000;
/// Tries of one batch before its answers are given up as failed.
const WRITE_TRIES: u32 = 3;

pub use maitred_core::settings::RedisSettings;

struct Append {
    answer: AnswerRef,
    event: LoggedEvent,
}

pub struct RedisLive {
    replica: String,
    local: Local,
    conn: ConnectionManager,
    keys: Keys,
    hub: Hub,
    committer: Committer<Append>,
    limits: RedisLimits,
    timings: Timings,
    /// Answers whose events could not be written: they must stop.
    failed: Arc<Mutex<HashSet<MessageId>>>,
    /// Goes on with answers whose replica died; none yet while starting.
    resumer: OnceLock<Arc<Resumer>>,
}

impl RedisLive {
    /// Connects, subscribes to the control channel and starts the writer, the lease
    /// loop and the sweeper; all end with `stop`.
    #[expect(
        clippy::too_many_arguments,
        reason = "each is a separate part the caller owns; a struct would only rename them"
    )]
    pub async fn start(
        settings: &RedisSettings,
        store: Store,
        limits: &Limits,
        resilience: &Resilience,
        timings: Timings,
        metrics: GatewayMetrics,
        tasks: TaskTracker,
        stop: CancellationToken,
    ) -> anyhow::Result<Arc<Self>> {
        let client = redis::Client::open(secrecy::ExposeSecret::expose_secret(&settings.url))
            .map_err(|e| anyhow::anyhow!("MAITRED_REDIS_URL: {e}"))?;
        let conn = client
            .get_connection_manager()
            .await
            .map_err(|e| anyhow::anyhow!("cannot reach Redis at MAITRED_REDIS_URL: {e}"))?;
        let keys = Keys::new(&settings.prefix);
        let replica = format!("rep_{}", uuid::Uuid::now_v7().simple());
        let local = Local::new(metrics);
        let hub = Hub::start(
            &client,
            &keys.control(),
            {
                let local = local.clone();
                move |message: &str| control(&local, message)
            },
            &tasks,
            stop.clone(),
        )
        .await
        .map_err(|e| anyhow::anyhow!("subscribing to Redis: {e}"))?;
        let failed: Arc<Mutex<HashSet<MessageId>>> = Arc::default();
        let committer = Committer::start(&tasks, stop.clone(), {
            let (conn, keys, failed) = (conn.clone(), keys.clone(), failed.clone());
            move |batch: Vec<Append>| {
                let (conn, keys, failed) = (conn.clone(), keys.clone(), failed.clone());
                async move { write(conn, &keys, &failed, batch, timings.retention).await }
            }
        });
        let (limits, released) = RedisLimits::new(conn.clone(), keys.clone(), limits, resilience);
        let live = Arc::new(Self {
            replica,
            local,
            conn,
            keys,
            hub,
            committer,
            limits,
            timings,
            failed,
            resumer: OnceLock::new(),
        });
        tasks.spawn(leases::run(live.clone(), store, stop.clone()));
        tasks.spawn(leases::release_slots(live.clone(), released, stop));
        tracing::info!(replica = %live.replica, prefix = %settings.prefix, "live state in Redis");
        Ok(live)
    }

    fn failed(&self) -> std::sync::MutexGuard<'_, HashSet<MessageId>> {
        self.failed.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A control message: `cancel <message id>` or `wake <key>`.
fn control(local: &Local, message: &str) {
    match message.split_once(' ') {
        Some(("cancel", id)) => {
            if let Some(answer) = id.parse().ok().and_then(|id| local.get(&id)) {
                tracing::info!(message_id = %answer.answer.message, "cancelled from another replica");
                answer.cancel.cancel();
            }
        }
        Some(("wake", key)) => local.wake(key),
        _ => tracing::warn!(message = ?message, "an unknown control message"),
    }
}

/// One pipeline per batch: every event appended to its answer's stream, then one
/// announcement per answer.
async fn write(
    mut conn: ConnectionManager,
    keys: &Keys,
    failed: &Mutex<HashSet<MessageId>>,
    batch: Vec<Append>,
    retention: Duration,
) -> Result<(), LiveError> {
    let mut pipe = redis::pipe();
    let mut answers: Vec<(&MessageId, Vec<&LoggedEvent>)> = Vec::new();
    for Append { answer, event } in &batch {
        wire::xadd(
            &mut pipe,
            keys.events(&answer.message),
            Some(MAX_EVENTS),
            event,
        );
        match answers.iter_mut().find(|(id, _)| *id == &answer.message) {
            Some((_, events)) => events.push(event),
            None => answers.push((&answer.message, vec![event])),
        }
    }
    for (id, events) in &answers {
        pipe.publish(keys.channel(id), wire::encode_batch(events))
            .ignore();
        if events.iter().any(|e| e.is_done()) {
            pipe.pexpire(keys.events(id), retention.as_millis() as i64)
                .ignore();
        }
    }
    let mut outcome = Ok(());
    for attempt in 1..=WRITE_TRIES {
        outcome = pipe.query_async::<()>(&mut conn).await;
        match &outcome {
            Ok(()) => return Ok(()),
            // An entry id at or below the stream's last: another replica ended this
            // answer (its lease had lapsed). Trying again cannot help.
            Err(error) if error.to_string().contains("equal or smaller") => break,
            Err(error) if attempt < WRITE_TRIES => {
                tracing::warn!(%error, attempt, "appending answer events to Redis; trying again");
                tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
            }
            Err(_) => {}
        }
    }
    let mut failed = failed.lock().unwrap_or_else(|p| p.into_inner());
    for (id, _) in answers {
        failed.insert(id.clone());
    }
    Err(outcome.err().map_or(LiveError::Stopped, LiveError::from))
}

#[async_trait]
impl LiveState for RedisLive {
    fn replica(&self) -> &str {
        &self.replica
    }

    fn local(&self) -> &Local {
        &self.local
    }

    async fn admit(&self, answer: &AnswerRef) -> Result<(), GatewayError> {
        self.limits
            .admit_person(&answer.owner, &answer.message, self.timings.lease)
            .await?;
        let lease_ms = self.timings.lease.as_millis() as i64;
        let expiry = chrono::Utc::now().timestamp_millis() + lease_ms;
        let mut pipe = redis::pipe();
        pipe.hset_multiple(
            self.keys.answer(&answer.message),
            &[
                ("owner", answer.owner.as_str()),
                ("conversation", answer.conversation.as_str()),
                ("replica", self.replica.as_str()),
                ("status", "running"),
            ],
        )
        .ignore()
        .cmd("SET")
        .arg(self.keys.lease(&answer.message))
        .arg(&self.replica)
        .arg("PX")
        .arg(lease_ms)
        .ignore()
        .zadd(self.keys.leases(), answer.message.as_str(), expiry)
        .ignore();
        pipe.query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(|e| GatewayError::LiveUnavailable(e.to_string()))
    }

    async fn append(
        &self,
        answer: &AnswerRef,
        event: LoggedEvent,
        wait: bool,
    ) -> Result<(), LiveError> {
        if self.failed().contains(&answer.message) {
            return Err(LiveError::Write(
                "an earlier event of this answer could not be stored".to_owned(),
            ));
        }
        if event.is_done() {
            // Before its viewers hear `done`: a next question is admitted at once.
            let released: Result<i64, _> = self
                .conn
                .clone()
                .zrem(
                    self.limits.person_running(&answer.owner),
                    answer.message.as_str(),
                )
                .await;
            if let Err(error) = released {
                tracing::warn!(%error, "releasing a person's running answer");
            }
        }
        let append = Append {
            answer: answer.clone(),
            event,
        };
        self.committer.push(append, wait).await
    }

    async fn finish(&self, answer: &AnswerRef) {
        self.local.finish(&answer.message);
        self.failed().remove(&answer.message);
        let retention = self.timings.retention.as_millis() as i64;
        let mut pipe = redis::pipe();
        pipe.del(self.keys.lease(&answer.message))
            .ignore()
            .zrem(self.keys.leases(), answer.message.as_str())
            .ignore()
            .zrem(
                self.limits.person_running(&answer.owner),
                answer.message.as_str(),
            )
            .ignore()
            .hset(self.keys.answer(&answer.message), "status", "finished")
            .ignore()
            .pexpire(self.keys.answer(&answer.message), retention)
            .ignore();
        if let Err(error) = pipe.query_async::<()>(&mut self.conn.clone()).await {
            // Its lease lapses by itself, and a replica's sweep finds it ended.
            tracing::warn!(%error, message_id = %answer.message, "releasing a finished answer");
        }
    }

    async fn view(&self, owner: &Subject) -> Result<ViewerSlot, GatewayError> {
        self.limits.admit_viewer(owner).await
    }

    async fn follow(
        &self,
        id: &MessageId,
        owner: &Subject,
        after: u64,
    ) -> Result<Option<Events>, LiveError> {
        let found: Option<String> = self
            .conn
            .clone()
            .hget(self.keys.answer(id), "owner")
            .await?;
        if found.as_deref() != Some(owner.as_str()) {
            return Ok(None);
        }
        let follower = follow::Follower::start(self, id, after).await?;
        Ok(Some(follower.into_stream()))
    }

    async fn logged(
        &self,
        id: &MessageId,
        owner: &Subject,
    ) -> Result<Option<Vec<LoggedEvent>>, LiveError> {
        let mut conn = self.conn.clone();
        let found: Option<String> = conn.hget(self.keys.answer(id), "owner").await?;
        if found.as_deref() != Some(owner.as_str()) {
            return Ok(None);
        }
        let reply: redis::streams::StreamRangeReply =
            conn.xrange(self.keys.events(id), "-", "+").await?;
        Ok(Some(wire::from_range(reply)))
    }

    async fn cancel(&self, id: &MessageId, owner: &Subject) -> Result<CancelOutcome, LiveError> {
        if let Some(local) = self.local.get(id).filter(|l| &l.answer.owner == owner) {
            local.cancel.cancel();
            return Ok(CancelOutcome::Cancelled);
        }
        let (found, status): (Option<String>, Option<String>) = redis::pipe()
            .hget(self.keys.answer(id), "owner")
            .hget(self.keys.answer(id), "status")
            .query_async(&mut self.conn.clone())
            .await?;
        if found.as_deref() != Some(owner.as_str()) {
            return Ok(CancelOutcome::Unknown);
        }
        if status.as_deref() != Some("running") {
            return Ok(CancelOutcome::Finished);
        }
        let _: i64 = self
            .conn
            .clone()
            .publish(self.keys.control(), format!("cancel {id}"))
            .await?;
        Ok(CancelOutcome::Cancelled)
    }

    async fn wake(&self, key: &str) -> Result<(), LiveError> {
        self.local.wake(key);
        let _: i64 = self
            .conn
            .clone()
            .publish(self.keys.control(), format!("wake {key}"))
            .await?;
        Ok(())
    }

    fn models(&self) -> Arc<dyn ModelLimits> {
        Arc::new(self.limits.clone())
    }

    fn resume_with(&self, resumer: Arc<Resumer>) {
        let _ = self.resumer.set(resumer);
    }
}
