//! Without Redis, an answer's events are committed to the database by one writer that
//! takes the events of every running answer together (SQLite has one writer anyway:
//! a burst costs one transaction per batch, not one per token). Once committed, they
//! join the answer's buffer in memory, which its viewers follow.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use sqlx::Any;
use sqlx::pool::PoolConnection;
use tokio::sync::watch;

use crate::answer::ports::AnswerRef;
use crate::live::{Events, LiveError, LoggedEvent};
use maitred_core::db::{Db, canonical_now};
use maitred_protocol::ids::{MessageId, Subject};

use super::sqlite_writer::SqliteWriter;

/// Tries of one batch before its answers are given up as failed.
const WRITE_TRIES: u32 = 3;

/// One event on its way to the database.
#[derive(Clone)]
pub(super) struct Append {
    pub answer: AnswerRef,
    pub event: LoggedEvent,
}

/// An answer's committed events, as its viewers follow them.
pub(super) struct Buffer {
    owner: Subject,
    events: Mutex<Vec<LoggedEvent>>,
    /// The number of events so far; viewers wait on it.
    latest: watch::Sender<u64>,
    /// Its events could not be stored: it must stop.
    failed: AtomicBool,
}

impl Buffer {
    fn push(&self, event: LoggedEvent) {
        let count = {
            let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
            events.push(event);
            events.len() as u64
        };
        self.latest.send_replace(count);
    }

    pub(super) fn failed(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }

    /// Every event after `after`, then the live ones, ending with `done`; at once
    /// when the answer has ended and `after` is at or past its `done`.
    fn follow(self: &Arc<Self>, after: u64) -> Events {
        // Subscribed before the first look, so an event pushed in between still wakes us.
        let receiver = self.latest.subscribe();
        futures::stream::unfold(
            (self.clone(), receiver, after, false),
            |(buffer, mut receiver, cursor, ended)| async move {
                if ended {
                    return None;
                }
                loop {
                    let (next, finished) = {
                        let events = buffer.events.lock().unwrap_or_else(|p| p.into_inner());
                        // Events are numbered from 1 with no gaps: event n is at n - 1.
                        let next = usize::try_from(cursor)
                            .ok()
                            .and_then(|at| events.get(at))
                            .cloned();
                        (next, events.last().is_some_and(LoggedEvent::is_done))
                    };
                    if let Some(event) = next {
                        let ended = event.is_done();
                        let seq = event.seq;
                        return Some((event, (buffer, receiver, seq, ended)));
                    }
                    if finished {
                        // Nothing after the viewer's place, and nothing will come.
                        return None;
                    }
                    if receiver.changed().await.is_err() {
                        return None;
                    }
                }
            },
        )
        .boxed()
    }
}

/// The buffers of this process's answers, and the database behind them.
#[derive(Clone)]
pub(super) struct EventLog {
    db: Db,
    replica: String,
    buffers: Arc<Mutex<HashMap<MessageId, Arc<Buffer>>>>,
    writer: Arc<Writer>,
}

/// Where the events are committed.
enum Writer {
    /// A SQLite file: a connection of the writer's own, called without a thread hop.
    Sqlite(SqliteWriter),
    /// PostgreSQL, or SQLite in memory (which only the pool's connections can share):
    /// a pooled connection, kept between batches. With SQLite, a connection whose
    /// last write was its own keeps its page cache; taking any connection of the
    /// pool, each write first read back the pages another connection had changed.
    Pooled(tokio::sync::Mutex<Option<PoolConnection<Any>>>),
}

impl EventLog {
    pub(super) fn new(db: Db, replica: String) -> Result<Self, LiveError> {
        let writer = match db.sqlite_file() {
            Some(file) => Writer::Sqlite(SqliteWriter::open(file)?),
            None => Writer::Pooled(tokio::sync::Mutex::default()),
        };
        Ok(Self {
            db,
            replica,
            buffers: Arc::default(),
            writer: Arc::new(writer),
        })
    }

    /// A buffer for a new answer (or one being finished after a restart).
    pub(super) fn open(&self, id: &MessageId, owner: &Subject, events: Vec<LoggedEvent>) {
        let count = events.len() as u64;
        let buffer = Arc::new(Buffer {
            owner: owner.clone(),
            events: Mutex::new(events),
            latest: watch::channel(count).0,
            failed: AtomicBool::new(false),
        });
        self.lock().insert(id.clone(), buffer);
    }

    pub(super) fn buffer(&self, id: &MessageId) -> Option<Arc<Buffer>> {
        self.lock().get(id).cloned()
    }

    /// Forgets a finished answer's buffer; its events stay in the database.
    pub(super) fn close(&self, id: &MessageId) {
        self.lock().remove(id);
    }

    /// Writes one batch, then hands its events to their viewers.
    pub(super) async fn write(&self, batch: Vec<Append>) -> Result<(), LiveError> {
        let mut outcome = Ok(());
        for attempt in 1..=WRITE_TRIES {
            outcome = self.commit(&batch).await;
            match &outcome {
                Ok(()) => break,
                Err(error) if attempt < WRITE_TRIES => {
                    tracing::warn!(%error, attempt, "writing answer events; trying again");
                    tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
                }
                Err(_) => {}
            }
        }
        let failed = outcome.is_err();
        for Append { answer, event } in batch {
            if let Some(buffer) = self.buffer(&answer.message) {
                // Even unstored, the events go out: viewers must not hang; the answer
                // learns of the failure at its next event and ends.
                buffer.failed.fetch_or(failed, Ordering::SeqCst);
                buffer.push(event);
            }
        }
        outcome
    }

    async fn commit(&self, batch: &[Append]) -> Result<(), LiveError> {
        match &*self.writer {
            Writer::Sqlite(writer) => writer.commit(&self.replica, batch).await,
            Writer::Pooled(writer) => self.commit_pooled(writer, batch).await,
        }
    }

    /// Commits on the kept connection; one that failed goes back to the pool and the
    /// next batch takes another.
    async fn commit_pooled(
        &self,
        writer: &tokio::sync::Mutex<Option<PoolConnection<Any>>>,
        batch: &[Append],
    ) -> Result<(), LiveError> {
        let mut writer = writer.lock().await;
        let mut conn = match writer.take() {
            Some(conn) => conn,
            None => self.db.pool().acquire().await?,
        };
        let outcome = self.commit_on(&mut conn, batch).await;
        if outcome.is_ok() {
            *writer = Some(conn);
        }
        outcome
    }

    async fn commit_on(
        &self,
        conn: &mut PoolConnection<Any>,
        batch: &[Append],
    ) -> Result<(), LiveError> {
        // Most batches are a lone fragment of one answer: one statement, atomic on its
        // own, instead of four round trips to the database (begin, insert, commit and
        // the pool's check) for a transaction.
        if batch.iter().all(|a| a.event.seq != 1 && !a.event.is_done()) {
            insert_events(batch).execute(&mut **conn).await?;
            return Ok(());
        }
        let now = canonical_now();
        let mut tx = self.db.begin_write_on(conn).await?;
        for Append { answer, .. } in batch.iter().filter(|a| a.event.seq == 1) {
            sqlx::query(
                "INSERT INTO answers (id, conversation_id, owner, replica, status, created_at) \
                 VALUES ($1, $2, $3, $4, 'running', $5) ON CONFLICT (id) DO NOTHING",
            )
            .bind(&answer.message)
            .bind(&answer.conversation)
            .bind(&answer.owner)
            .bind(&self.replica)
            .bind(&now)
            .execute(&mut *tx)
            .await?;
        }
        insert_events(batch).execute(&mut *tx).await?;
        for Append { answer, .. } in batch.iter().filter(|a| a.event.is_done()) {
            sqlx::query(
                "UPDATE answers SET status = 'finished', finished_at = $1 WHERE id = $2 AND status = 'running'",
            )
            .bind(&now)
            .bind(&answer.message)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// A finished answer's events from the database: `None` if it is not `owner`'s.
    pub(super) async fn stored(
        &self,
        id: &MessageId,
        owner: &Subject,
        after: u64,
    ) -> Result<Option<Events>, LiveError> {
        let found: Option<(Subject,)> = sqlx::query_as("SELECT owner FROM answers WHERE id = $1")
            .bind(id)
            .fetch_optional(self.db.pool())
            .await?;
        if found.is_none_or(|(found,)| &found != owner) {
            return Ok(None);
        }
        let events = self.events(id, after).await?;
        Ok(Some(futures::stream::iter(events).boxed()))
    }

    pub(super) async fn events(
        &self,
        id: &MessageId,
        after: u64,
    ) -> Result<Vec<LoggedEvent>, LiveError> {
        // Sequence numbers are stored as i64: past it, there is nothing after.
        let Ok(after) = i64::try_from(after) else {
            return Ok(Vec::new());
        };
        let rows: Vec<(i64, String, String)> = sqlx::query_as(
            "SELECT seq, name, data FROM answer_events WHERE message_id = $1 AND seq > $2 ORDER BY seq",
        )
        .bind(id)
        .bind(after)
        .fetch_all(self.db.pool())
        .await?;
        Ok(rows
            .into_iter()
            .map(|(seq, name, data)| LoggedEvent {
                seq: seq as u64,
                name: name.into(),
                data: data.into(),
            })
            .collect())
    }

    /// The events a buffer in memory holds now: `None` when there is none for `id`,
    /// `Some(None)` when it is not `owner`'s.
    pub(super) fn so_far(
        &self,
        id: &MessageId,
        owner: &Subject,
    ) -> Option<Option<Vec<LoggedEvent>>> {
        let buffer = self.buffer(id)?;
        Some((&buffer.owner == owner).then(|| {
            buffer
                .events
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
        }))
    }

    /// Following a buffer in memory.
    pub(super) fn follow(
        &self,
        id: &MessageId,
        owner: &Subject,
        after: u64,
    ) -> Option<Option<Events>> {
        let buffer = self.buffer(id)?;
        Some((&buffer.owner == owner).then(|| buffer.follow(after)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<MessageId, Arc<Buffer>>> {
        self.buffers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One `INSERT` of a batch's events.
fn insert_events(batch: &[Append]) -> sqlx::query::Query<'_, sqlx::Any, sqlx::any::AnyArguments> {
    // `QueryBuilder<Any>` would write `?` placeholders, which PostgreSQL refuses;
    // both databases take `$n`.
    let rows: Vec<String> = (0..batch.len())
        .map(|i| {
            let n = i * 4;
            format!("(${}, ${}, ${}, ${})", n + 1, n + 2, n + 3, n + 4)
        })
        .collect();
    let text = format!(
        "INSERT INTO answer_events (message_id, seq, name, data) VALUES {}",
        rows.join(", ")
    );
    let mut insert = sqlx::query(sqlx::AssertSqlSafe(text));
    for Append { answer, event } in batch {
        insert = insert
            .bind(answer.message.as_str())
            .bind(event.seq as i64)
            .bind(&*event.name)
            .bind(&*event.data);
    }
    insert
}
