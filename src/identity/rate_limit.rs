//! One budget per client address for the endpoints that check secrets (the token
//! endpoint and the login form), so guessing passwords or client secrets is slow.

use std::net::IpAddr;
use std::num::NonZeroU32;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use super::error::OAuthError;

/// Past this many tracked addresses, idle ones are forgotten.
const MAX_TRACKED: usize = 10_000;

pub struct AuthRateLimit {
    limiter: DefaultKeyedRateLimiter<IpAddr>,
}

impl AuthRateLimit {
    pub fn per_minute(requests: u32) -> Self {
        let per_minute = NonZeroU32::new(requests).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(requests.div_ceil(4).max(5)).unwrap_or(NonZeroU32::MIN);
        Self {
            limiter: RateLimiter::keyed(Quota::per_minute(per_minute).allow_burst(burst)),
        }
    }

    pub fn check(&self, ip: IpAddr) -> Result<(), OAuthError> {
        if self.limiter.len() > MAX_TRACKED {
            self.limiter.retain_recent();
        }
        self.limiter.check_key(&ip).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            tracing::warn!(%ip, "auth rate limit exceeded");
            OAuthError::rate_limited(wait.as_secs().max(1))
        })
    }
}
