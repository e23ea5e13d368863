//! Per-person limits on asking: questions per minute and answers running at once.
//! Both refuse with 429 and `Retry-After` before anything is stored.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::gateway::config::Limits;
use crate::gateway::error::GatewayError;
use crate::gateway::ids::Subject;

/// Past this many tracked people, idle ones are forgotten.
const MAX_TRACKED: usize = 10_000;

pub struct UserLimits {
    questions: Option<DefaultKeyedRateLimiter<String>>,
    per_minute: u32,
    concurrent: usize,
    running: Arc<Mutex<HashMap<String, usize>>>,
}

/// One running answer counted against its owner until dropped.
pub struct Admission {
    owner: String,
    running: Arc<Mutex<HashMap<String, usize>>>,
}

impl UserLimits {
    pub fn new(limits: &Limits) -> Self {
        Self {
            questions: NonZeroU32::new(limits.requests_per_minute)
                .map(|n| RateLimiter::keyed(Quota::per_minute(n))),
            per_minute: limits.requests_per_minute,
            concurrent: limits.concurrent_generations.max(1),
            running: Arc::default(),
        }
    }

    /// Admits one more question from `owner`, or says when to come back.
    pub fn admit(&self, owner: &Subject) -> Result<Admission, GatewayError> {
        let owner = owner.as_str();
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let now = running.get(owner).copied().unwrap_or(0);
        // Checked first, so a refused question does not spend the per-minute budget.
        if now >= self.concurrent {
            return Err(GatewayError::RateLimited {
                reason: format!(
                    "you already have {now} answers running (the limit is {}); wait for one to finish or cancel it",
                    self.concurrent
                ),
                retry_after: 5,
            });
        }
        if let Some(questions) = &self.questions {
            if questions.len() > MAX_TRACKED {
                questions.retain_recent();
            }
            if let Err(not_until) = questions.check_key(&owner.to_owned()) {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                return Err(GatewayError::RateLimited {
                    reason: format!("more than {} questions a minute", self.per_minute),
                    retry_after: wait.as_secs().max(1),
                });
            }
        }
        *running.entry(owner.to_owned()).or_default() += 1;
        Ok(Admission {
            owner: owner.to_owned(),
            running: self.running.clone(),
        })
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = running.get_mut(&self.owner) {
            *count -= 1;
            if *count == 0 {
                running.remove(&self.owner);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(requests_per_minute: u32, concurrent_generations: usize) -> UserLimits {
        UserLimits::new(&Limits {
            requests_per_minute,
            concurrent_generations,
            ..Limits::default()
        })
    }

    #[test]
    fn running_answers_are_counted_per_person_until_they_end() {
        let limits = limits(0, 2);
        let a = limits.admit(&Subject::new("ann")).unwrap();
        let _b = limits.admit(&Subject::new("ann")).unwrap();
        let refused = limits.admit(&Subject::new("ann")).err().unwrap();
        assert!(matches!(
            refused,
            GatewayError::RateLimited { retry_after: 5, .. }
        ));
        assert!(
            limits.admit(&Subject::new("bob")).is_ok(),
            "another person is not affected"
        );
        drop(a);
        assert!(limits.admit(&Subject::new("ann")).is_ok());
    }

    #[test]
    fn questions_past_the_per_minute_budget_are_refused_with_a_wait() {
        let limits = limits(2, 10);
        drop(limits.admit(&Subject::new("ann")).unwrap());
        drop(limits.admit(&Subject::new("ann")).unwrap());
        match limits.admit(&Subject::new("ann")) {
            Err(GatewayError::RateLimited {
                retry_after,
                reason,
            }) => {
                assert!((1..=60).contains(&retry_after));
                assert!(reason.contains("2 questions a minute"));
            }
            _ => panic!("the third question in a minute must be refused"),
        }
        assert!(limits.admit(&Subject::new("bob")).is_ok());
    }
}
