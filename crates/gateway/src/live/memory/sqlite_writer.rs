//! The event writer's own SQLite connection, called on the writer's task itself.
//!
//! sqlx runs each SQLite connection on a worker thread of its own: every statement
//! is a hand-off to that thread and a wake-up back. For an answer's lone event that
//! is most of its cost (the profile put a third of the gateway's time in the
//! scheduler and futex calls). A write to a WAL database with `synchronous = NORMAL`
//! takes tens of microseconds and no disk flush, so it is made where the batch is:
//! one prepared statement, no thread in between.
//!
//! It never waits on the runtime's thread: when another connection holds the write
//! lock, the batch is written again on a blocking thread, which waits for the lock
//! in steps of 100 µs. (SQLite's own busy handler sleeps 1 ms first, then longer,
//! for a lock the pool's connections hold for a fraction of that.)

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, TransactionBehavior, params};

use super::log::Append;
use crate::live::LiveError;
use maitred_core::db::{SQLITE_SETTINGS, canonical_now};

/// A write waits for another connection's in short steps, then longer ones, for
/// about 10 s in all, as the pool's connections do.
const SHORT_STEP: Duration = Duration::from_micros(100);
const SHORT_STEPS: i32 = 100;
const LONG_STEP: Duration = Duration::from_millis(1);
const LONG_STEPS: i32 = 9_990;

pub(super) struct SqliteWriter {
    conn: Arc<Mutex<Connection>>,
}

impl SqliteWriter {
    pub(super) fn open(file: &Path) -> Result<Self, LiveError> {
        let conn = Connection::open(file).map_err(write_error)?;
        // The pool's connections checkpoint the WAL when they commit; this one leaves
        // it to them, so that no event's write pays for a checkpoint's flush on the
        // runtime's thread.
        conn.execute_batch(SQLITE_SETTINGS).map_err(write_error)?;
        conn.execute_batch("PRAGMA wal_autocheckpoint = 0;")
            .map_err(write_error)?;
        conn.busy_handler(None).map_err(write_error)?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// Commits the batch: at once if the database is free, else on a blocking thread.
    /// New answers' rows name `replica` as theirs.
    pub(super) async fn commit(&self, replica: &str, batch: &[Append]) -> Result<(), LiveError> {
        let written = write(&mut lock(&self.conn), replica, batch);
        match written {
            Err(error) if error.sqlite_error_code() == Some(ErrorCode::DatabaseBusy) => {}
            other => return other.map_err(write_error),
        }
        let (conn, replica, batch) = (self.conn.clone(), replica.to_owned(), batch.to_vec());
        tokio::task::spawn_blocking(move || {
            let mut conn = lock(&conn);
            conn.busy_handler(Some(wait_for_lock))?;
            let written = write(&mut conn, &replica, &batch);
            conn.busy_handler(None)?;
            written
        })
        .await
        .map_err(|error| LiveError::Write(error.to_string()))?
        .map_err(write_error)
    }
}

/// A lone event in the middle of an answer is one autocommitted `INSERT`; an answer's
/// first and last events also write its row, in one transaction with them.
fn write(conn: &mut Connection, replica: &str, batch: &[Append]) -> rusqlite::Result<()> {
    if let [lone] = batch
        && lone.event.seq != 1
        && !lone.event.is_done()
    {
        return insert_event(conn, lone);
    }
    let now = canonical_now();
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    for Append { answer, .. } in batch.iter().filter(|a| a.event.seq == 1) {
        tx.prepare_cached(
            "INSERT INTO answers (id, conversation_id, owner, replica, status, created_at) \
             VALUES (?1, ?2, ?3, ?4, 'running', ?5) ON CONFLICT (id) DO NOTHING",
        )?
        .execute(params![
            answer.message.as_str(),
            answer.conversation.as_str(),
            answer.owner.as_str(),
            replica,
            now
        ])?;
    }
    for append in batch {
        insert_event(&tx, append)?;
    }
    for Append { answer, .. } in batch.iter().filter(|a| a.event.is_done()) {
        tx.prepare_cached(
            "UPDATE answers SET status = 'finished', finished_at = ?1 WHERE id = ?2 AND status = 'running'",
        )?
        .execute(params![now, answer.message.as_str()])?;
    }
    tx.commit()
}

fn insert_event(conn: &Connection, Append { answer, event }: &Append) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO answer_events (message_id, seq, name, data) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![
        answer.message.as_str(),
        event.seq as i64,
        &*event.name,
        &*event.data
    ])?;
    Ok(())
}

/// SQLite's busy handler on the blocking thread: `false` gives up.
fn wait_for_lock(tries: i32) -> bool {
    let step = match tries {
        0..SHORT_STEPS => SHORT_STEP,
        _ if tries < SHORT_STEPS + LONG_STEPS => LONG_STEP,
        _ => return false,
    };
    std::thread::sleep(step);
    true
}

fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    conn.lock().unwrap_or_else(|p| p.into_inner())
}

fn write_error(error: rusqlite::Error) -> LiveError {
    LiveError::Write(error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::ports::AnswerRef;
    use crate::live::LoggedEvent;
    use maitred_core::db::Db;
    use maitred_protocol::ids::{ConversationId, MessageId, Subject};

    const REPLICA: &str = "replica-a";

    /// A database with one answer begun: its `meta` written by the writer.
    async fn begun() -> (tempfile::TempDir, Db, SqliteWriter, AnswerRef) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("events.db").display());
        let db = Db::connect(&url).await.unwrap();
        db.migrate().await.unwrap();
        let writer = SqliteWriter::open(db.sqlite_file().unwrap()).unwrap();
        let answer = answer();
        writer
            .commit(REPLICA, &[append(&answer, 1, "meta")])
            .await
            .unwrap();
        (dir, db, writer, answer)
    }

    fn append(answer: &AnswerRef, seq: u64, name: &str) -> Append {
        Append {
            answer: answer.clone(),
            event: LoggedEvent {
                seq,
                name: name.into(),
                data: format!("{{\"n\":{seq}}}").into(),
            },
        }
    }

    fn answer() -> AnswerRef {
        AnswerRef {
            message: MessageId::new(),
            conversation: ConversationId::new(),
            owner: Subject::new("alice"),
        }
    }

    async fn stored(db: &Db, answer: &AnswerRef) -> (Option<String>, Vec<(i64, String)>) {
        let status: Option<(String,)> = sqlx::query_as("SELECT status FROM answers WHERE id = $1")
            .bind(answer.message.as_str())
            .fetch_optional(db.pool())
            .await
            .unwrap();
        let events: Vec<(i64, String)> = sqlx::query_as(
            "SELECT seq, name FROM answer_events WHERE message_id = $1 ORDER BY seq",
        )
        .bind(answer.message.as_str())
        .fetch_all(db.pool())
        .await
        .unwrap();
        (status.map(|(s,)| s), events)
    }

    #[tokio::test]
    async fn an_answer_is_written_whole_and_read_back_through_the_pool() {
        let (_dir, db, writer, answer) = begun().await;
        assert_eq!(stored(&db, &answer).await.0.as_deref(), Some("running"));
        writer
            .commit(REPLICA, &[append(&answer, 2, "token")])
            .await
            .unwrap();
        writer
            .commit(
                REPLICA,
                &[append(&answer, 3, "token"), append(&answer, 4, "done")],
            )
            .await
            .unwrap();
        let (status, events) = stored(&db, &answer).await;
        assert_eq!(status.as_deref(), Some("finished"));
        let names: Vec<_> = events
            .iter()
            .map(|(seq, name)| format!("{seq}:{name}"))
            .collect();
        assert_eq!(names, ["1:meta", "2:token", "3:token", "4:done"]);
    }

    #[tokio::test]
    async fn a_failed_batch_leaves_nothing_behind() {
        let (_dir, db, writer, answer) = begun().await;
        // seq 1 again: the primary key refuses the batch, and its answer row with it.
        let other = AnswerRef {
            message: answer.message.clone(),
            ..self::answer()
        };
        let error = writer
            .commit(
                REPLICA,
                &[append(&other, 1, "meta"), append(&answer, 2, "done")],
            )
            .await
            .unwrap_err();
        assert!(error.to_string().contains("UNIQUE"), "{error}");
        let (status, events) = stored(&db, &answer).await;
        assert_eq!(status.as_deref(), Some("running"));
        assert_eq!(events.len(), 1);
    }

    /// Another connection holds the write lock. On a single-threaded runtime, the
    /// task that releases it can only run if the writer does not wait on the runtime's
    /// thread: waiting there, it would hold the lock's release off for its whole busy
    /// timeout and then fail.
    #[tokio::test(flavor = "current_thread")]
    async fn a_locked_database_is_waited_for_off_the_runtime_thread() {
        let (_dir, db, writer, answer) = begun().await;

        let mut holder = db.pool().acquire().await.unwrap();
        let tx = db.begin_write_on(&mut holder).await.unwrap();
        let (released_tx, released) = tokio::sync::oneshot::channel();
        let release = async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            tx.commit().await.unwrap();
            released_tx.send(std::time::Instant::now()).unwrap();
        };
        let write = async {
            writer
                .commit(REPLICA, &[append(&answer, 2, "token")])
                .await
                .unwrap();
            std::time::Instant::now()
        };
        let ((), written) = tokio::time::timeout(Duration::from_secs(5), async {
            futures::join!(release, write)
        })
        .await
        .expect("the writer blocked the runtime's thread");
        assert!(
            written >= released.await.unwrap(),
            "written while the lock was held"
        );
        assert_eq!(stored(&db, &answer).await.1.len(), 2);
    }
}
