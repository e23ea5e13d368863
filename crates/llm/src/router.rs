//! Around every model call: which model answers (the primary, then the fallbacks in
//! order), how many requests each model may have open and start per minute, retries
//! with backoff while nothing has been streamed yet, and the first-token and
//! inter-token timeouts.
//!
//! A stream is handed to the caller only once its first event has arrived, so every
//! retry and fallback happens before anything reached the user: once tokens flowed,
//! a failure is the caller's to report, never repeated behind their back.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use super::{ChatModel, ChatRequest, EventStream, ModelError, ModelEvent};
use crate::limits::{ModelLimits, ModelPermit};
use maitred_core::settings::gateway_file::Resilience;

pub struct ModelRouter {
    candidates: Vec<Candidate>,
    policy: Resilience,
    /// Each model's requests at once and per minute, shared by the replicas.
    limits: Arc<dyn ModelLimits>,
}

struct Candidate {
    model: Arc<dyn ChatModel>,
}

/// What happened on the way to an answer, for the caller's logs, metrics and events.
#[derive(Debug)]
pub enum Note<'a> {
    /// `model` failed with `error` and is asked again after `delay`.
    Retry {
        model: &'a str,
        attempt: u32,
        delay: Duration,
        error: &'a ModelError,
    },
    /// `from` gave up with `error`; `to` is asked instead.
    Fallback {
        from: &'a str,
        to: &'a str,
        error: &'a ModelError,
    },
}

/// A model's answer that has begun: its first event is already in `stream`.
pub struct Opened {
    pub model: String,
    pub stream: EventStream,
}

impl ModelRouter {
    /// `models`: the primary first, then the fallbacks in the order they are tried.
    pub fn new(
        models: Vec<Arc<dyn ChatModel>>,
        policy: Resilience,
        limits: Arc<dyn ModelLimits>,
    ) -> Self {
        let candidates = models
            .into_iter()
            .map(|model| Candidate { model })
            .collect();
        Self {
            candidates,
            policy,
            limits,
        }
    }

    /// The model that answers when all is well.
    pub fn primary(&self) -> &str {
        self.candidates.first().map_or("", |c| c.model.name())
    }

    /// The estimated size of the prompt `request` makes for `model` (one of the
    /// router's), by part.
    pub fn prompt_size(&self, model: &str, request: &ChatRequest) -> Option<super::PromptSize> {
        self.candidates
            .iter()
            .find(|c| c.model.name() == model)
            .and_then(|c| c.model.prompt_size(request))
    }

    /// Whether any model's profile asks for a warm-up.
    pub fn wants_warm_up(&self) -> bool {
        self.candidates.iter().any(|c| c.model.wants_warm_up())
    }

    /// Warms up each model whose profile asks for it with `request` (the prompt every
    /// question begins with), one after the other; a failure is only logged.
    pub async fn warm_up(&self, request: &ChatRequest) {
        for candidate in &self.candidates {
            let model = &candidate.model;
            if !model.wants_warm_up() {
                continue;
            }
            let started = std::time::Instant::now();
            match model.warm_up(request.clone()).await {
                Ok(()) => tracing::info!(
                    model = model.name(),
                    took_ms = started.elapsed().as_millis() as u64,
                    "warmed up: the model's server has read the prompt every question begins with"
                ),
                Err(error) => {
                    tracing::warn!(model = model.name(), %error, "warming up the model failed")
                }
            }
        }
    }

    /// Whether `model` (one of the router's) is marked small.
    pub fn is_small(&self, model: &str) -> bool {
        self.candidates
            .iter()
            .any(|c| c.model.name() == model && c.model.small())
    }

    /// The grounding `model` (one of the router's) asks for; `flag` for any other.
    pub fn grounding(&self, model: &str) -> maitred_core::settings::GroundingMode {
        self.candidates
            .iter()
            .find(|c| c.model.name() == model)
            .map(|c| c.model.grounding())
            .unwrap_or_default()
    }

    pub fn models(&self) -> impl Iterator<Item = &str> {
        self.candidates.iter().map(|c| c.model.name())
    }

    /// Starts an answer: the primary model, retried and then replaced by the
    /// fallbacks as the policy allows.
    pub async fn open(
        &self,
        request: &ChatRequest,
        notes: &mut (dyn FnMut(Note<'_>) + Send),
    ) -> Result<Opened, ModelError> {
        let mut failed: Option<(&str, ModelError)> = None;
        for (index, candidate) in self.candidates.iter().enumerate() {
            if let Some((from, error)) = &failed {
                notes(Note::Fallback {
                    from,
                    to: candidate.model.name(),
                    error,
                });
            }
            let has_fallback = index + 1 < self.candidates.len();
            match self.attempts(candidate, request, has_fallback, notes).await {
                Ok(opened) => return Ok(opened),
                Err(error) if calls_for_fallback(&error) => {
                    failed = Some((candidate.model.name(), error));
                }
                Err(error) => return Err(error),
            }
        }
        Err(failed.map_or_else(
            || ModelError::Protocol("no model is configured".to_owned()),
            |(_, error)| error,
        ))
    }

    /// One model, retried on transient failures; a 429 goes to the fallback at once
    /// when there is one (it answers sooner than the wait the provider asks for).
    async fn attempts(
        &self,
        candidate: &Candidate,
        request: &ChatRequest,
        has_fallback: bool,
        notes: &mut (dyn FnMut(Note<'_>) + Send),
    ) -> Result<Opened, ModelError> {
        let mut attempt = 0;
        loop {
            let error = match self.attempt(candidate, request.clone()).await {
                Ok(opened) => return Ok(opened),
                Err(error) => error,
            };
            if attempt >= self.policy.retries {
                return Err(error);
            }
            let delay = match &error {
                ModelError::RateLimited { .. } if has_fallback => return Err(error),
                ModelError::RateLimited { retry_after } => {
                    let wait = retry_after.unwrap_or_else(|| self.backoff(attempt));
                    if wait > self.policy.max_retry_after {
                        return Err(error);
                    }
                    wait
                }
                ModelError::Upstream {
                    retry_after: Some(wait),
                    ..
                } if is_transient(&error) => {
                    if *wait > self.policy.max_retry_after {
                        return Err(error);
                    }
                    (*wait).max(self.backoff(attempt))
                }
                error if is_transient(error) => self.backoff(attempt),
                _ => return Err(error),
            };
            attempt += 1;
            notes(Note::Retry {
                model: candidate.model.name(),
                attempt,
                delay,
                error: &error,
            });
            tokio::time::sleep(delay).await;
        }
    }

    /// One request: a slot, the stream, and its first event within the timeout.
    async fn attempt(
        &self,
        candidate: &Candidate,
        request: ChatRequest,
    ) -> Result<Opened, ModelError> {
        let permit = self.slot(candidate).await?;
        let first_token = candidate
            .model
            .first_token_timeout()
            .unwrap_or(self.policy.first_token_timeout);
        let started = tokio::time::timeout(first_token, async {
            let mut stream = candidate.model.stream(request).await?;
            let first = stream.next().await;
            Ok::<_, ModelError>((stream, first))
        })
        .await
        .map_err(|_| {
            ModelError::Timeout(format!(
                "no first token within {} s",
                first_token.as_secs_f64()
            ))
        })??;
        let first = match started.1 {
            Some(Ok(event)) => event,
            Some(Err(error)) => return Err(error),
            None => {
                return Err(ModelError::Connection(
                    "the stream ended before it began".to_owned(),
                ));
            }
        };
        let gap = self.policy.inter_token_timeout;
        Ok(Opened {
            model: candidate.model.name().to_owned(),
            stream: guarded(first, started.0, gap, permit),
        })
    }

    /// Waits (within the bound) for the model's concurrency and rate limits.
    async fn slot(&self, candidate: &Candidate) -> Result<ModelPermit, ModelError> {
        let wait = self.policy.model_wait;
        self.limits.acquire(candidate.model.name(), wait).await
    }

    /// Exponential, capped, with jitter so that many callers do not retry in step.
    /// The jitter (60–100 %) keeps each wait longer than the one before it.
    fn backoff(&self, attempt: u32) -> Duration {
        let base = self
            .policy
            .backoff
            .saturating_mul(1 << attempt.min(16))
            .min(self.policy.backoff_max);
        let jitter = 0.6 + maitred_core::random::fraction() * 0.4;
        base.mul_f64(jitter)
    }
}

/// The stream after its first event: each further event within `gap`, and the
/// model's slot held until the stream is dropped.
fn guarded(
    first: ModelEvent,
    rest: EventStream,
    gap: Duration,
    permit: ModelPermit,
) -> EventStream {
    let tail = futures::stream::unfold(Some((rest, permit)), move |state| async move {
        let (mut rest, permit) = state?;
        match tokio::time::timeout(gap, rest.next()).await {
            Ok(Some(item)) => Some((item, Some((rest, permit)))),
            Ok(None) => None,
            Err(_) => Some((
                Err(ModelError::Timeout(format!(
                    "no token for {} s",
                    gap.as_secs_f64()
                ))),
                None,
            )),
        }
    });
    futures::stream::once(async move { Ok(first) })
        .chain(tail)
        .boxed()
}

/// Connection failures, timeouts and 5xx may pass; a retry may succeed.
fn is_transient(error: &ModelError) -> bool {
    match error {
        ModelError::Connection(_) | ModelError::Timeout(_) => true,
        ModelError::Upstream { status, .. } => *status >= 500 || *status == 408,
        _ => false,
    }
}

/// Worth asking the next model: this one is rate limited, busy or kept failing.
/// A request the provider rejects (4xx) or cannot be read is not.
fn calls_for_fallback(error: &ModelError) -> bool {
    matches!(error, ModelError::RateLimited { .. } | ModelError::Busy(_)) || is_transient(error)
}

#[cfg(test)]
mod tests;
