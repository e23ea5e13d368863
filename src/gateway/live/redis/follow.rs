//! Following an answer from any replica: subscribe to its channel first, then read its
//! stream after the viewer's last event, then take the announcements, each once, in
//! order. A gap (an announcement lost with a connection, a follower that fell behind)
//! is filled from the stream, and the stream is read again now and then, so nothing
//! is missed even when pub/sub drops a message.

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
use crate::gateway::ids::MessageId;
use crate::gateway::live::{Events, LiveError, LoggedEvent};

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
            beat: tokio::time::interval((grace / 3).max(Duration::from_millis(200))),
            grace,
        };
        follower.catch_up().await?;
        Ok(follower)
    }

    pub(super) fn into_stream(self) -> Events {
        futures::stream::unfold(self, |mut follower| async move {
            follower.next().await.map(|event| (event, follower))
        })
        .boxed()
    }

    /// The stream's entries after the cursor (up to `until`, when filling a gap).
    async fn read(&mut self, until: Option<u64>) -> Result<Vec<LoggedEvent>, LiveError> {
        let start = format!("{}-0", self.cursor + 1);
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
    /// that ended without its `done` reaching us (its stream expired).
    async fn heartbeat(&mut self) -> Result<(), LiveError> {
        let _: () = redis::cmd("SET")
            .arg(&self.watched_key)
            .arg(1)
            .arg("PX")
            .arg(self.grace.as_millis() as u64)
            .query_async(&mut self.conn)
            .await?;
        self.catch_up().await?;
        if self.pending.is_empty() {
            let status: Option<String> = self.conn.hget(&self.answer_key, "status").await?;
            if status.is_none() {
                self.ended = true;
            }
        }
        Ok(())
    }
}
