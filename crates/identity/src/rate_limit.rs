//! Budgets for the endpoints that check secrets (the token endpoint and the login
//! form): guessing passwords or client secrets stays slow, and yet nobody can spend
//! the budget of a client that proves who it is.
//!
//! - A confidential client that authenticated with its correct secret spends its own
//!   budget, which only holders of the secret can spend.
//! - Everything else (no or wrong credentials, malformed requests, public clients,
//!   the login form) spends the budget of the client address.
//! - A wrong secret for a client also counts against that client *at that address*;
//!   once those run out, secrets for that client from that address are not checked
//!   at all until the window passes. Otherwise a spent address budget would still
//!   answer "right" or "wrong" to every guess, only with 200 or 429.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::error::OAuthError;
use maitred_core::http::budget::Budget;

/// Past this many tracked guessers, stale ones are forgotten.
const MAX_TRACKED: usize = 10_000;
/// How long wrong secrets for one client from one address are remembered.
const GUESS_WINDOW: Duration = Duration::from_secs(60);

struct Guesses {
    since: Instant,
    wrong: u32,
}

pub(super) struct AuthRateLimit {
    addresses: Budget<IpAddr>,
    clients: Budget<String>,
    guesses: Mutex<HashMap<(String, IpAddr), Guesses>>,
    /// Wrong secrets for one client from one address per window.
    max_guesses: u32,
}

impl AuthRateLimit {
    pub(super) fn per_minute(requests: u32) -> Self {
        let addresses = Budget::per_minute(requests);
        Self {
            max_guesses: addresses.burst(),
            addresses,
            clients: Budget::per_minute(requests),
            guesses: Mutex::new(HashMap::new()),
        }
    }

    /// Spends one from the address's budget: for requests that prove nothing.
    pub(super) fn address(&self, ip: IpAddr) -> Result<(), OAuthError> {
        self.addresses.spend(&ip).map_err(|wait| {
            tracing::warn!(%ip, "auth rate limit exceeded");
            OAuthError::rate_limited(wait.as_secs().max(1))
        })
    }

    /// Spends one from the budget of a client that authenticated with its secret.
    pub(super) fn client(&self, client_id: &str) -> Result<(), OAuthError> {
        self.clients.spend(&client_id.to_owned()).map_err(|wait| {
            tracing::warn!(client_id, "auth rate limit exceeded by a client");
            OAuthError::rate_limited(wait.as_secs().max(1))
        })
    }

    /// Whether a secret for `client_id` from `ip` may be checked at all.
    pub(super) fn may_check_secret(&self, client_id: &str, ip: IpAddr) -> Result<(), OAuthError> {
        let guesses = self.guesses.lock().unwrap_or_else(|e| e.into_inner());
        match guesses.get(&(client_id.to_owned(), ip)) {
            Some(g) if g.wrong >= self.max_guesses && g.since.elapsed() < GUESS_WINDOW => {
                let wait = GUESS_WINDOW.saturating_sub(g.since.elapsed());
                tracing::warn!(%ip, client_id, "too many wrong client secrets; not checking more");
                Err(OAuthError::rate_limited(wait.as_secs().max(1)))
            }
            _ => Ok(()),
        }
    }

    /// Remembers a wrong secret for `client_id` from `ip`.
    pub(super) fn wrong_secret(&self, client_id: &str, ip: IpAddr) {
        let mut guesses = self.guesses.lock().unwrap_or_else(|e| e.into_inner());
        if guesses.len() > MAX_TRACKED {
            guesses.retain(|_, g| g.since.elapsed() < GUESS_WINDOW);
        }
        let entry = guesses
            .entry((client_id.to_owned(), ip))
            .or_insert_with(|| Guesses {
                since: Instant::now(),
                wrong: 0,
            });
        if entry.since.elapsed() >= GUESS_WINDOW {
            *entry = Guesses {
                since: Instant::now(),
                wrong: 0,
            };
        }
        entry.wrong = entry.wrong.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_are_separate_per_address_and_per_client() {
        let limit = AuthRateLimit::per_minute(5);
        let attacker: IpAddr = [10, 0, 0, 1].into();
        while limit.address(attacker).is_ok() {}
        assert_eq!(limit.address(attacker).unwrap_err().status, 429);
        assert!(limit.address([10, 0, 0, 2].into()).is_ok());
        assert!(limit.client("maitred-gateway").is_ok());
        while limit.client("maitred-cli").is_ok() {}
        assert!(
            limit.client("maitred-gateway").is_ok(),
            "one client's requests do not spend another's"
        );
    }

    #[test]
    fn wrong_secrets_lock_only_that_client_at_that_address() {
        let limit = AuthRateLimit::per_minute(5);
        let attacker: IpAddr = [10, 0, 0, 1].into();
        for _ in 0..5 {
            assert!(limit.may_check_secret("maitred-cli", attacker).is_ok());
            limit.wrong_secret("maitred-cli", attacker);
        }
        assert_eq!(
            limit
                .may_check_secret("maitred-cli", attacker)
                .unwrap_err()
                .status,
            429
        );
        assert!(limit.may_check_secret("maitred-gateway", attacker).is_ok());
        assert!(
            limit
                .may_check_secret("maitred-cli", [10, 0, 0, 2].into())
                .is_ok()
        );
    }
}
