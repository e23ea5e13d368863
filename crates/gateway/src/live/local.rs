//! The answers this replica runs, with what only the running process can hold: the
//! cancel signal that aborts the upstream request and the tool calls at once, how
//! many viewers each has here, and the waiters for decisions made anywhere.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::ViewerSlot;
use crate::answer::ports::AnswerRef;
use crate::metrics::GatewayMetrics;
use maitred_protocol::ids::MessageId;

/// One answer running here.
pub struct LocalAnswer {
    pub answer: AnswerRef,
    pub cancel: CancellationToken,
    /// Stopped by the server going down rather than by the person.
    interrupted: AtomicBool,
    finished: AtomicBool,
    /// Runs to its end whether or not anybody watches (a background response).
    unattended: AtomicBool,
    viewers: AtomicUsize,
    /// Since when nobody watches here (none: someone does, or never checked).
    unwatched_since: Mutex<Option<Instant>>,
}

impl LocalAnswer {
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

    /// From now on, nobody need watch it: it is not cancelled for want of viewers.
    pub fn unattended(&self) {
        self.unattended.store(true, Ordering::SeqCst);
    }

    /// How long nobody has watched it here; zero while somebody does, and always for
    /// an unattended answer.
    pub fn unwatched_for(&self) -> Duration {
        if self.unattended.load(Ordering::SeqCst) {
            return Duration::ZERO;
        }
        self.unwatched_since
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map_or(Duration::ZERO, |since| since.elapsed())
    }
}

#[derive(Clone)]
pub struct Local {
    running: Arc<Mutex<HashMap<MessageId, Arc<LocalAnswer>>>>,
    waiters: Arc<Mutex<HashMap<String, Arc<Notify>>>>,
    metrics: GatewayMetrics,
}

impl Local {
    pub fn new(metrics: GatewayMetrics) -> Self {
        Self {
            running: Arc::default(),
            waiters: Arc::default(),
            metrics,
        }
    }

    pub fn start(&self, answer: AnswerRef) -> Arc<LocalAnswer> {
        let local = Arc::new(LocalAnswer {
            answer,
            // Not a child of the process's shutdown: at shutdown an answer gets time
            // to finish (see `drain`).
            cancel: CancellationToken::new(),
            interrupted: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            unattended: AtomicBool::new(false),
            viewers: AtomicUsize::new(0),
            unwatched_since: Mutex::new(Some(Instant::now())),
        });
        self.lock()
            .insert(local.answer.message.clone(), local.clone());
        local
    }

    pub fn finish(&self, id: &MessageId) {
        if let Some(local) = self.lock().remove(id) {
            local.finished.store(true, Ordering::SeqCst);
        }
    }

    pub fn get(&self, id: &MessageId) -> Option<Arc<LocalAnswer>> {
        self.lock().get(id).cloned()
    }

    pub fn active(&self) -> Vec<Arc<LocalAnswer>> {
        self.lock().values().cloned().collect()
    }

    /// Counts a viewer of `id` here for as long as the guard lives; `slot`, its place
    /// among its person's open streams, is freed with it.
    pub fn watching(&self, id: &MessageId, slot: ViewerSlot) -> Watching {
        self.metrics.viewers.inc();
        let local = self.get(id);
        if let Some(local) = &local {
            local.viewers.fetch_add(1, Ordering::SeqCst);
            *local
                .unwatched_since
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = None;
        }
        Watching {
            local,
            metrics: self.metrics.clone(),
            _slot: slot,
        }
    }

    /// A waiter for `key`, woken by [`Local::wake`].
    pub fn waiter(&self, key: &str) -> Waiter {
        let notify = self
            .waiters()
            .entry(key.to_owned())
            .or_insert_with(|| Arc::new(Notify::new()))
            .clone();
        Waiter {
            key: key.to_owned(),
            notify,
            local: self.clone(),
        }
    }

    pub fn wake(&self, key: &str) {
        if let Some(notify) = self.waiters().get(key) {
            notify.notify_waiters();
            // A wake before the wait begins is kept for it.
            notify.notify_one();
        }
    }

    /// At shutdown: running answers get `grace` to finish, then are interrupted (they
    /// end with `done` and are stored as interrupted). Returns once all ended.
    pub async fn drain(&self, grace: Duration) {
        if self.active().is_empty() {
            return;
        }
        tracing::info!(
            answers = self.active().len(),
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
                for answer in &running {
                    answer.interrupt();
                }
                interrupted = true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<MessageId, Arc<LocalAnswer>>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn waiters(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Notify>>> {
        self.waiters.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One viewer of an answer, counted while it lives.
pub struct Watching {
    local: Option<Arc<LocalAnswer>>,
    metrics: GatewayMetrics,
    _slot: ViewerSlot,
}

impl Drop for Watching {
    fn drop(&mut self) {
        self.metrics.viewers.dec();
        if let Some(local) = &self.local
            && local.viewers.fetch_sub(1, Ordering::SeqCst) == 1
        {
            *local
                .unwatched_since
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        }
    }
}

/// Waits for [`Local::wake`] on its key; forgotten when dropped.
pub struct Waiter {
    key: String,
    notify: Arc<Notify>,
    local: Local,
}

impl Waiter {
    pub async fn woken(&self) {
        self.notify.notified().await;
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.local.waiters().remove(&self.key);
    }
}
