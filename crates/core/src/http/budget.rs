//! A requests-per-minute budget per key (a client address, a client id), for the
//! endpoints that check secrets or start sign-ins, so guessing and flooding are slow.

use std::hash::Hash;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// Past this many tracked keys, idle ones are forgotten.
const MAX_TRACKED: usize = 10_000;

pub struct Budget<K: Hash + Eq + Clone> {
    limiter: DefaultKeyedRateLimiter<K>,
    burst: u32,
}

impl<K: Hash + Eq + Clone> Budget<K> {
    /// `requests` a minute, of which a quarter (at least 5) may come at once.
    pub fn per_minute(requests: u32) -> Self {
        let per_minute = NonZeroU32::new(requests).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(requests.div_ceil(4).max(5)).unwrap_or(NonZeroU32::MIN);
        Self {
            limiter: RateLimiter::keyed(Quota::per_minute(per_minute).allow_burst(burst)),
            burst: burst.get(),
        }
    }

    /// How many requests may come at once.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// Spends one request of `key`'s budget; `Err` is how long until the next one.
    pub fn spend(&self, key: &K) -> Result<(), Duration> {
        if self.limiter.len() > MAX_TRACKED {
            self.limiter.retain_recent();
        }
        self.limiter
            .check_key(key)
            .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }
}
