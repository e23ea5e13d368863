//! Following an answer from any replica: subscribe to its channel first, then read its
//! stream after the viewer's last event, then take the announcements, each once, in
//! order. A gap (an announcement lost with a connection, a follower that fell behind)
//! is filled from the stream, and the stream is read again now and then, so nothing
//! is missed even when pub/sub drops a message.
//!
//! An answer whose stream ends with `done`, or whose status is no longer `running`
//! (its `done` is appended before the status changes), has its whole stream written:
//! once the follower has read the stream after seeing that, what it read is all there
//! is, and it ends after it, even when the viewer's place is at or past the `done`.

use std::collections::VecDeque;
use std::time::Duration;

use futures::StreamExt;
use redis::AsyncCommands;
use redis::aio::ConnectionManager;
use redis::streams::StreamRangeReply;
use tokio::sync::broadcast::error::RecvError;

use super::RedisLive;
use super::hub::Subscription;
use super::wire;
use crate::live::{Events, LiveError, LoggedEvent};
use maitred_protocol::ids::MessageId;

pub(super) struct Follower {
    conn: ConnectionManager,
    events_key: String,
    answer_key: String,
    watched_key: String,
    subscription: Subscription,
    pending: VecDeque<LoggedEvent>,
    /// The last event given to the viewer.
    cursor: u64,
    ended: bool,
    /// The answer had ended when the stream was last read: nothing more will come.
    complete: bool,
    /// Between heartbeats: "someone watches" for the owner, and a re-read of the
    /// stream in case an announcement was lost.
    beat: tokio::time::Interval,
    grace: Duration,
}

impl Follower {
    pub(super) async fn start(
        live: &RedisLive,
        id: &MessageId,
        after: u64,
    ) -> Result<Self, LiveError> {
        let subscription = live.hub.subscribe(&live.keys.channel(id)).await?;
        let grace = live.timings.grace;
        let mut follower = Self {
            conn: live.conn.clone(),
            events_key: live.keys.events(id),
            answer_key: live.keys.answer(id),
            watched_key: live.keys.watched(id),
            subscription,
            pending: VecDeque::new(),
            cursor: after,
            ended: false,
            complete: false,
            beat: tokio::time::interval((grace / 3).max(Duration::from_millis(200))),
            grace,
        };
        // Subscribed first: an answer that ends after this look still reaches us.
        let ended = follower.ended().await?;
        follower.catch_up().await?;
        follower.complete = ended;
        Ok(follower)
    }

    /// Whether the answer has ended: its status is no longer `running` (or has expired),
    /// or its stream already ends with `done` (its status follows a moment later).
    async fn ended(&mut self) -> Result<bool, LiveError> {
        let (status, last): (Option<String>, StreamRangeReply) = redis::pipe()
            .hget(&self.answer_key, "status")
            .xrevrange_count(&self.events_key, "+", "-", 1)
            .query_async(&mut self.conn)
            .await?;
        Ok(status.as_deref() != Some("running")
            || wire::from_range(last)
                .last()
                .is_some_and(LoggedEvent::is_done))
    }

    pub(super) fn into_stream(self) -> Events {
        futures::stream::unfold(self, |mut follower| async move {
            follower.next().await.map(|event| (event, follower))
        })
        .boxed()
    }

    /// The stream's entries after the cursor (up to `until`, when filling a gap).
    async fn read(&mut self, until: Option<u64>) -> Result<Vec<LoggedEvent>, LiveError> {
        let Some(first) = self.cursor.checked_add(1) else {
            return Ok(Vec::new());
        };
        let start = format!("{first}-0");
        let end = until.map_or_else(|| "+".to_owned(), |seq| format!("{seq}-0"));
        let reply: StreamRangeReply = self.conn.xrange(&self.events_key, start, end).await?;
        Ok(wire::from_range(reply))
    }

    async fn catch_up(&mut self) -> Result<(), LiveError> {
        let events = self.read(None).await?;
        self.pending.extend(events);
        Ok(())
    }

    async fn next(&mut self) -> Option<LoggedEvent> {
        loop {
            if self.ended {
                return None;
            }
            if let Some(event) = self.pending.pop_front() {
                if event.seq <= self.cursor {
                    if event.is_done() {
                        // The viewer came back past the end.
                        self.ended = true;
                        return None;
                    }
                    continue;
                }
                if event.seq > self.cursor + 1 {
                    // A gap: what is missing is in the stream.
                    let missing = self.read(Some(event.seq - 1)).await.unwrap_or_default();
                    self.pending.push_front(event);
                    if missing.is_empty() {
                        // Trimmed away (or never written): nothing to wait for.
                        if let Some(next) = self.pending.front() {
                            self.cursor = next.seq - 1;
                        }
                    }
                    for event in missing.into_iter().rev() {
                        self.pending.push_front(event);
                    }
                    continue;
                }
                self.cursor = event.seq;
                self.ended = event.is_done();
                return Some(event);
            }
            if self.complete {
                self.ended = true;
                return None;
            }
            tokio::select! {
                batch = self.subscription.receiver.recv() => match batch {
                    Ok(batch) if !batch.is_empty() => self.pending.extend(batch.iter().cloned()),
                    Ok(_) | Err(RecvError::Lagged(_)) => {
                        if let Err(error) = self.catch_up().await {
                            tracing::warn!(%error, "reading an answer's events");
                        }
                    }
                    Err(RecvError::Closed) => return None,
                },
                _ = self.beat.tick() => {
                    if let Err(error) = self.heartbeat().await {
                        tracing::warn!(%error, "following an answer");
                    }
                }
            }
        }
    }

    /// Tells the owner someone watches, reads the stream again, and notices an answer
    /// that ended without a `done` after the viewer's place reaching us (the viewer
    /// is past it, or its stream expired).
    async fn heartbeat(&mut self) -> Result<(), LiveError> {
        let _: () = redis::cmd("SET")
            .arg(&self.watched_key)
            .arg(1)
            .arg("PX")
            .arg(self.grace.as_millis() as u64)
            .query_async(&mut self.conn)
            .await?;
        // Looked at before the read: an ended answer's stream is then read whole.
        let ended = self.ended().await?;
        self.catch_up().await?;
        self.complete = ended;
        Ok(())
    }
}
