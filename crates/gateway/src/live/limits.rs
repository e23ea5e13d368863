//! Limits in one process: a person's questions per minute, answers running at once
//! and answer streams open at once (all refuse with 429 and `Retry-After` before
//! anything is stored or followed). Each model's limits are `maitred_llm::limits`.
//! The Redis live state keeps the same counts shared by every replica.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::error::GatewayError;
use maitred_core::settings::gateway_file::Limits;
use maitred_protocol::ids::Subject;

/// Past this many tracked people, idle ones are forgotten.
const MAX_TRACKED: usize = 10_000;

pub(super) struct UserLimits {
    questions: Option<DefaultKeyedRateLimiter<String>>,
    per_minute: u32,
    concurrent: usize,
    running: Arc<Mutex<HashMap<String, usize>>>,
    viewers: usize,
    watching: Arc<Mutex<HashMap<String, usize>>>,
}

/// One running answer counted against its owner until dropped.
pub struct Admission {
    owner: String,
    running: Arc<Mutex<HashMap<String, usize>>>,
}

impl UserLimits {
    pub(super) fn new(limits: &Limits) -> Self {
        Self {
            questions: NonZeroU32::new(limits.requests_per_minute)
                .map(|n| RateLimiter::keyed(Quota::per_minute(n))),
            per_minute: limits.requests_per_minute,
            concurrent: limits.concurrent_generations.max(1),
            running: Arc::default(),
            viewers: limits.concurrent_viewers.max(1),
            watching: Arc::default(),
        }
    }

    /// Counts one more open answer stream of `owner` until the slot drops, or
    /// refuses it past the person's cap.
    pub(super) fn view(&self, owner: &Subject) -> Result<ViewerSlot, GatewayError> {
        let owner = owner.as_str();
        let mut watching = self.watching.lock().unwrap_or_else(|p| p.into_inner());
        let now = watching.get(owner).copied().unwrap_or(0);
        if now >= self.viewers {
            return Err(too_many_viewers(now, self.viewers));
        }
        *watching.entry(owner.to_owned()).or_default() += 1;
        Ok(ViewerSlot::new(Open {
            owner: owner.to_owned(),
            watching: self.watching.clone(),
        }))
    }

    /// Admits one more question from `owner`, or says when to come back.
    pub(super) fn admit(&self, owner: &Subject) -> Result<Admission, GatewayError> {
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

/// The 429 of a person who has `open` answer streams open, `most` allowed.
pub(super) fn too_many_viewers(open: impl std::fmt::Display, most: usize) -> GatewayError {
    GatewayError::RateLimited {
        reason: format!(
            "you already have {open} answer streams open (the limit is {most}); close one first"
        ),
        retry_after: 5,
    }
}

/// One open answer stream (asking or watching again), counted against its person
/// until dropped.
pub struct ViewerSlot(
    #[expect(dead_code, reason = "held for its Drop, which frees the slot")] Box<dyn Send + Sync>,
);

impl ViewerSlot {
    pub(super) fn new(release: impl Send + Sync + 'static) -> Self {
        Self(Box::new(release))
    }
}

/// An open stream in one process's count.
struct Open {
    owner: String,
    watching: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for Open {
    fn drop(&mut self) {
        let mut watching = self.watching.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = watching.get_mut(&self.owner) {
            *count -= 1;
            if *count == 0 {
                watching.remove(&self.owner);
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
    fn open_streams_are_counted_per_person_until_they_close() {
        let limits = UserLimits::new(&Limits {
            concurrent_viewers: 2,
            ..Limits::default()
        });
        let ann = Subject::new("ann");
        let first = limits.view(&ann).unwrap();
        let _second = limits.view(&ann).unwrap();
        match limits.view(&ann) {
            Err(GatewayError::RateLimited {
                retry_after,
                reason,
            }) => {
                assert_eq!(retry_after, 5);
                assert!(reason.contains("2 answer streams open"), "{reason}");
            }
            _ => panic!("a third stream must be refused"),
        }
        assert!(
            limits.view(&Subject::new("bob")).is_ok(),
            "another person is not affected"
        );
        drop(first);
        assert!(limits.view(&ann).is_ok(), "a closed stream frees its slot");
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
