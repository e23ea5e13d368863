//! A generation (one answer being produced) runs apart from the HTTP connection that
//! asked for it. Its events are kept in order until shortly after it ends, so any
//! number of viewers can watch it and a viewer that reconnects with `Last-Event-ID`
//! misses nothing and sees nothing twice. A generation nobody watches for a grace
//! period is cancelled.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::Stream;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::events::ChatEvent;
use super::limits::Admission;
use crate::gateway::answer::ports::{EventSink, StoreResult};
use crate::gateway::ids::{ConversationId, MessageId, Subject};
use crate::gateway::metrics::GatewayMetrics;

/// How long a finished generation's events stay available for late viewers.
const RETENTION: Duration = Duration::from_secs(60);

pub struct Generation {
    pub id: MessageId,
    pub owner: Subject,
    pub conversation_id: ConversationId,
    pub cancel: CancellationToken,
    events: Mutex<Vec<ChatEvent>>,
    /// The number of events so far; viewers wait on it.
    latest: watch::Sender<u64>,
    viewers: AtomicUsize,
    finished: AtomicBool,
    /// Stopped by the server going down rather than by the user.
    interrupted: AtomicBool,
    /// Counts against the owner's limit of running answers until `done`.
    admission: Mutex<Option<Admission>>,
    metrics: GatewayMetrics,
    grace: Duration,
}

impl Generation {
    /// Appends an event; returns its sequence number (1-based).
    pub fn emit(&self, event: ChatEvent) -> u64 {
        let done = event.is_done();
        let seq = {
            let mut events = self.lock();
            events.push(event);
            events.len() as u64
        };
        if done {
            self.finished.store(true, Ordering::SeqCst);
            // Before viewers hear `done`, so a next question is admitted at once.
            self.admission
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
        }
        self.latest.send_replace(seq);
        seq
    }

    /// Stops the generation because the server is going down.
    pub fn interrupt(&self) {
        self.interrupted.store(true, Ordering::SeqCst);
        self.cancel.cancel();
    }

    pub fn is_interrupted(&self) -> bool {
        self.interrupted.load(Ordering::SeqCst)
    }

    pub fn is_finished(&self) -> bool {
        self.finished.load(Ordering::SeqCst)
    }

    pub fn viewers(&self) -> usize {
        self.viewers.load(Ordering::SeqCst)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<ChatEvent>> {
        self.events.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every event after `after` (a sequence number; 0 for all), then the live ones,
    /// ending with `done`.
    pub fn watch(
        self: &Arc<Self>,
        after: u64,
    ) -> impl Stream<Item = (u64, ChatEvent)> + Send + 'static {
        self.viewers.fetch_add(1, Ordering::SeqCst);
        self.metrics.viewers.inc();
        let viewer = Viewer(self.clone());
        let receiver = self.latest.subscribe();
        futures::stream::unfold(
            (viewer, receiver, after, false),
            |(viewer, mut receiver, cursor, ended)| async move {
                if ended {
                    return None;
                }
                loop {
                    let next = viewer.0.lock().get(cursor as usize).cloned();
                    if let Some(event) = next {
                        let seq = cursor + 1;
                        let ended = event.is_done();
                        return Some(((seq, event), (viewer, receiver, seq, ended)));
                    }
                    if receiver.changed().await.is_err() {
                        return None;
                    }
                }
            },
        )
    }
}

#[async_trait]
impl EventSink for Generation {
    async fn publish(&self, event: ChatEvent) -> StoreResult<u64> {
        Ok(self.emit(event))
    }

    fn cancelled(&self) -> CancellationToken {
        self.cancel.clone()
    }

    fn interrupted(&self) -> bool {
        self.is_interrupted()
    }
}

/// One watching connection; when the last one goes, the grace period starts.
struct Viewer(Arc<Generation>);

impl Drop for Viewer {
    fn drop(&mut self) {
        let generation = self.0.clone();
        generation.metrics.viewers.dec();
        if generation.viewers.fetch_sub(1, Ordering::SeqCst) != 1 || generation.is_finished() {
            return;
        }
        let grace = generation.grace;
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            if generation.viewers() == 0 && !generation.is_finished() {
                tracing::info!(message_id = %generation.id, "nobody is watching: cancelling the generation");
                generation.cancel.cancel();
            }
        });
    }
}

/// The generations of this process, by message id.
#[derive(Clone)]
pub struct Generations {
    running: Arc<Mutex<HashMap<MessageId, Arc<Generation>>>>,
    metrics: GatewayMetrics,
}

impl Generations {
    pub fn new(metrics: GatewayMetrics) -> Self {
        Self {
            running: Arc::default(),
            metrics,
        }
    }

    pub fn start(
        &self,
        id: MessageId,
        owner: Subject,
        conversation_id: ConversationId,
        grace: Duration,
        admission: Option<Admission>,
    ) -> Arc<Generation> {
        let generation = Arc::new(Generation {
            id: id.clone(),
            owner,
            conversation_id,
            // Not a child of the process's shutdown: at shutdown a generation gets
            // time to finish (see `drain`).
            cancel: CancellationToken::new(),
            events: Mutex::new(Vec::new()),
            latest: watch::channel(0).0,
            viewers: AtomicUsize::new(0),
            finished: AtomicBool::new(false),
            interrupted: AtomicBool::new(false),
            admission: Mutex::new(admission),
            metrics: self.metrics.clone(),
            grace,
        });
        self.lock().insert(id, generation.clone());
        generation
    }

    /// Keeps a finished generation's events a while for late viewers, then drops them.
    pub fn retire(&self, id: &MessageId) {
        let running = self.running.clone();
        let id = id.clone();
        tokio::spawn(async move {
            tokio::time::sleep(RETENTION).await;
            running
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
        });
    }

    pub fn get(&self, id: &MessageId) -> Option<Arc<Generation>> {
        self.lock().get(id).cloned()
    }

    pub fn active(&self) -> Vec<Arc<Generation>> {
        self.lock()
            .values()
            .filter(|g| !g.is_finished())
            .cloned()
            .collect()
    }

    /// At shutdown: running generations get `grace` to finish, then are interrupted
    /// (they end with `done` and are stored as interrupted). Returns once all ended.
    pub async fn drain(&self, grace: Duration) {
        let running = self.active();
        if running.is_empty() {
            return;
        }
        tracing::info!(
            answers = running.len(),
            grace_secs = grace.as_secs_f64(),
            "waiting for running answers before shutting down"
        );
        let deadline = tokio::time::Instant::now() + grace;
        let mut interrupted = false;
        loop {
            let running = self.active();
            if running.is_empty() {
                return;
            }
            if !interrupted && tokio::time::Instant::now() >= deadline {
                tracing::warn!(
                    answers = running.len(),
                    "interrupting the answers still running"
                );
                for generation in &running {
                    generation.interrupt();
                }
                interrupted = true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<MessageId, Arc<Generation>>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;
    use crate::gateway::chat::events::Finish;

    fn token(text: &str) -> ChatEvent {
        ChatEvent::Token { text: text.into() }
    }

    #[tokio::test]
    async fn a_late_viewer_gets_every_event_once_and_live_ones_after() {
        let generations =
            Generations::new(GatewayMetrics::register(&crate::metrics::Metrics::new()));
        let generation = generations.start(
            MessageId::new(),
            Subject::new("u"),
            ConversationId::new(),
            Duration::from_secs(30),
            None,
        );
        generation.emit(token("a"));
        generation.emit(token("b"));
        let resumed = generation.watch(1);
        let from_start = generation.watch(0);
        generation.emit(token("c"));
        generation.emit(ChatEvent::Done {
            finish_reason: Finish::Stop,
        });
        let resumed: Vec<u64> = resumed.map(|(seq, _)| seq).collect().await;
        assert_eq!(resumed, [2, 3, 4]);
        let all: Vec<ChatEvent> = from_start.map(|(_, e)| e).collect().await;
        assert_eq!(all.len(), 4);
        assert_eq!(all[2], token("c"));
    }

    #[tokio::test]
    async fn a_generation_nobody_watches_is_cancelled_after_the_grace_period() {
        let generations =
            Generations::new(GatewayMetrics::register(&crate::metrics::Metrics::new()));
        let generation = generations.start(
            MessageId::new(),
            Subject::new("u"),
            ConversationId::new(),
            Duration::from_millis(50),
            None,
        );
        let watching = generation.watch(0);
        generation.emit(token("a"));
        drop(watching);
        assert!(!generation.cancel.is_cancelled());
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(generation.cancel.is_cancelled());
    }
}
