//! Each model's limits: requests at once and per minute. Over them, a request waits
//! its turn. The gateway's Redis live state implements [`ModelLimits`] with the same
//! counts shared by every replica.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use governor::{DefaultDirectRateLimiter, Quota};
use tokio::sync::Semaphore;

use crate::ModelError;
use maitred_core::settings::gateway_file::Resilience;

/// A model's slot, held until the request's stream ends.
pub struct ModelPermit(
    #[expect(dead_code, reason = "held for its Drop, which frees the slot")] Box<dyn Send + Sync>,
);

impl ModelPermit {
    pub fn new(release: impl Send + Sync + 'static) -> Self {
        Self(Box::new(release))
    }
}

/// Each model's limits: requests at once and per minute.
#[async_trait]
pub trait ModelLimits: Send + Sync {
    /// A slot of `model` within its limits, waited for at most `wait`.
    async fn acquire(&self, model: &str, wait: Duration) -> Result<ModelPermit, ModelError>;
}

/// Per model in this process: a semaphore and a rate limiter.
pub struct LocalModelLimits {
    concurrency: usize,
    per_minute: Option<NonZeroU32>,
    models: Mutex<HashMap<String, Arc<ModelSlots>>>,
}

struct ModelSlots {
    slots: Arc<Semaphore>,
    rate: Option<DefaultDirectRateLimiter>,
}

impl LocalModelLimits {
    pub fn new(policy: &Resilience) -> Self {
        Self {
            concurrency: policy.model_concurrency.max(1),
            per_minute: policy.model_requests_per_minute.and_then(NonZeroU32::new),
            models: Mutex::new(HashMap::new()),
        }
    }

    fn slots(&self, model: &str) -> Arc<ModelSlots> {
        self.models
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(model.to_owned())
            .or_insert_with(|| {
                Arc::new(ModelSlots {
                    slots: Arc::new(Semaphore::new(self.concurrency)),
                    rate: self
                        .per_minute
                        .map(|n| governor::RateLimiter::direct(Quota::per_minute(n))),
                })
            })
            .clone()
    }
}

#[async_trait]
impl ModelLimits for LocalModelLimits {
    async fn acquire(&self, model: &str, wait: Duration) -> Result<ModelPermit, ModelError> {
        let slots = self.slots(model);
        tokio::time::timeout(wait, async {
            let permit = slots.slots.clone().acquire_owned().await;
            if let Some(rate) = &slots.rate {
                rate.until_ready().await;
            }
            permit
        })
        .await
        .map_err(|_| {
            ModelError::Busy(format!(
                "{model} stayed at its request limits for {} s",
                wait.as_secs_f64()
            ))
        })?
        .map(ModelPermit::new)
        .map_err(|_| ModelError::Busy("the model's limiter is closed".to_owned()))
    }
}
