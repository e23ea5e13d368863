//! An answer running on this replica, as the recorder sees it: the sink its events go
//! to. Each event gets the next sequence number and goes into the answer's log; a
//! viewer sees it once it is durable there.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use super::{Live, LocalAnswer, LoggedEvent};
use crate::answer::ports::{EventSink, StoreError, StoreResult};
use maitred_protocol::events::ChatEvent;

pub struct Running {
    pub local: Arc<LocalAnswer>,
    live: Live,
    /// The last sequence number given out. Numbering and queueing happen under one
    /// lock, so concurrent tool calls' events reach the log in the order of their
    /// numbers.
    seq: Mutex<u64>,
}

impl Running {
    /// Starts numbering after `seq` (0 for a new answer).
    pub fn new(local: Arc<LocalAnswer>, live: Live, seq: u64) -> Self {
        Self {
            local,
            live,
            seq: Mutex::new(seq),
        }
    }
}

#[async_trait]
impl EventSink for Running {
    async fn publish(&self, event: ChatEvent) -> StoreResult<u64> {
        let done = event.is_done();
        let seq = {
            let mut seq = self.seq.lock().await;
            *seq += 1;
            // `done` is waited for: once it returns, the whole answer is durable.
            self.live
                .append(&self.local.answer, LoggedEvent::new(*seq, &event), done)
                .await
                .map_err(|error| StoreError(anyhow::Error::new(error)))?;
            *seq
        };
        if done {
            self.live.finish(&self.local.answer).await;
        }
        Ok(seq)
    }

    fn cancelled(&self) -> CancellationToken {
        self.local.cancel.clone()
    }

    fn interrupted(&self) -> bool {
        self.local.is_interrupted()
    }
}
