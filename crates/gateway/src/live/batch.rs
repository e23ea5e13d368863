//! Group commit: while one batch is being written, the next items gather, and go
//! together. An idle answer pays about one write per event; a busy replica a few
//! writes per batch, not one per token.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::LiveError;

/// Items one batch takes at most.
const MAX_BATCH: usize = 512;
/// Items waiting for the writer at most; past it, appending waits (back-pressure).
const QUEUE: usize = 16_384;

struct Item<T> {
    value: T,
    durable: Option<oneshot::Sender<Result<(), BatchFailed>>>,
}

/// A batch could not be written; every waiter of it hears why.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub(super) struct BatchFailed(Arc<str>);

pub(super) struct Committer<T> {
    queue: mpsc::Sender<Item<T>>,
}

impl<T> Clone for Committer<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
        }
    }
}

impl<T: Send + 'static> Committer<T> {
    /// Starts the writer: `write` gets each batch, in order, one at a time. Once
    /// `stop` is cancelled, it writes what is queued and ends.
    pub(super) fn start<W, F>(tasks: &TaskTracker, stop: CancellationToken, mut write: W) -> Self
    where
        W: FnMut(Vec<T>) -> F + Send + 'static,
        F: Future<Output = Result<(), LiveError>> + Send,
    {
        let (queue, mut items) = mpsc::channel::<Item<T>>(QUEUE);
        tasks.spawn(async move {
            let mut batch = Vec::with_capacity(MAX_BATCH);
            loop {
                let received = tokio::select! {
                    biased;
                    received = items.recv_many(&mut batch, MAX_BATCH) => received,
                    () = stop.cancelled() => {
                        items.close();
                        items.recv_many(&mut batch, MAX_BATCH).await
                    }
                };
                if received == 0 {
                    break;
                }
                let (values, waiters): (Vec<T>, Vec<_>) = batch
                    .drain(..)
                    .map(|item| (item.value, item.durable))
                    .unzip();
                let outcome = write(values).await.map_err(|error| {
                    tracing::error!(%error, "writing a batch of answer events");
                    BatchFailed(error.to_string().into())
                });
                for waiter in waiters.into_iter().flatten() {
                    let _ = waiter.send(outcome.clone());
                }
            }
        });
        Self { queue }
    }

    /// Queues `value`; with `wait`, returns once its batch is written.
    pub(super) async fn push(&self, value: T, wait: bool) -> Result<(), LiveError> {
        let (durable, written) = if wait {
            let (sender, receiver) = oneshot::channel();
            (Some(sender), Some(receiver))
        } else {
            (None, None)
        };
        self.queue
            .send(Item { value, durable })
            .await
            .map_err(|_| LiveError::Stopped)?;
        match written {
            Some(written) => written
                .await
                .map_err(|_| LiveError::Stopped)?
                .map_err(|failed| LiveError::Write(failed.to_string())),
            None => Ok(()),
        }
    }
}
