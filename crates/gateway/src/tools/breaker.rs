//! A circuit breaker per MCP server: after `threshold` failures in a row (the server
//! unreachable or too slow) calls fail fast for a cool-down instead of each waiting
//! out a timeout; then one trial call decides whether it closes again.

use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Closed,
    Open,
    HalfOpen,
}

impl State {
    /// For the metrics gauge: 0 closed, 1 open, 2 half-open.
    pub fn as_number(self) -> i64 {
        match self {
            State::Closed => 0,
            State::Open => 1,
            State::HalfOpen => 2,
        }
    }
}

#[derive(Debug)]
enum Inner {
    Closed {
        failures: u32,
    },
    Open {
        until: Instant,
    },
    /// A trial call is out; everyone else still fails fast.
    HalfOpen,
}

pub struct Breaker {
    name: String,
    threshold: u32,
    cooldown: Duration,
    inner: Mutex<Inner>,
}

/// A call the breaker let through; report how it went, or drop it if it was abandoned.
pub struct Attempt<'a> {
    breaker: &'a Breaker,
    trial: bool,
    reported: bool,
}

impl Breaker {
    pub fn new(name: &str, threshold: u32, cooldown: Duration) -> Self {
        Self {
            name: name.to_owned(),
            threshold: threshold.max(1),
            cooldown,
            inner: Mutex::new(Inner::Closed { failures: 0 }),
        }
    }

    pub fn state(&self) -> State {
        match *self.lock() {
            Inner::Closed { .. } => State::Closed,
            Inner::Open { .. } => State::Open,
            Inner::HalfOpen => State::HalfOpen,
        }
    }

    /// Lets a call through, or says how long until the next trial.
    pub fn attempt(&self) -> Result<Attempt<'_>, Duration> {
        let mut inner = self.lock();
        let trial = match *inner {
            Inner::Closed { .. } => false,
            Inner::HalfOpen => return Err(self.cooldown),
            Inner::Open { until } => {
                let now = Instant::now();
                if now < until {
                    return Err(until - now);
                }
                tracing::info!(server = %self.name, "circuit breaker half-open: one trial call");
                *inner = Inner::HalfOpen;
                true
            }
        };
        Ok(Attempt {
            breaker: self,
            trial,
            reported: false,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn open(&self, inner: &mut Inner) {
        tracing::warn!(
            server = %self.name,
            cooldown_secs = self.cooldown.as_secs_f64(),
            "circuit breaker open: calls to this MCP server fail fast until the cool-down ends"
        );
        *inner = Inner::Open {
            until: Instant::now() + self.cooldown,
        };
    }
}

impl Attempt<'_> {
    pub fn succeeded(mut self) {
        self.reported = true;
        let mut inner = self.breaker.lock();
        if !matches!(*inner, Inner::Closed { failures: 0 }) {
            if !matches!(*inner, Inner::Closed { .. }) {
                tracing::info!(server = %self.breaker.name, "circuit breaker closed: the MCP server answers again");
            }
            *inner = Inner::Closed { failures: 0 };
        }
    }

    pub fn failed(mut self) {
        self.reported = true;
        let mut inner = self.breaker.lock();
        match &mut *inner {
            Inner::Closed { failures } => {
                *failures += 1;
                if *failures >= self.breaker.threshold {
                    self.breaker.open(&mut inner);
                }
            }
            // A failed trial, or a call let through before the breaker opened.
            Inner::HalfOpen | Inner::Open { .. } => self.breaker.open(&mut inner),
        }
    }
}

impl Drop for Attempt<'_> {
    /// An abandoned trial (its question was cancelled) proves nothing: the next
    /// call may try again at once.
    fn drop(&mut self) {
        if self.trial && !self.reported {
            let mut inner = self.breaker.lock();
            if matches!(*inner, Inner::HalfOpen) {
                *inner = Inner::Open {
                    until: Instant::now(),
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_the_threshold_then_one_trial_decides() {
        let breaker = Breaker::new("s", 3, Duration::from_millis(40));
        breaker.attempt().unwrap().failed();
        breaker.attempt().unwrap().succeeded();
        breaker.attempt().unwrap().failed();
        breaker.attempt().unwrap().failed();
        assert_eq!(breaker.state(), State::Closed, "a success resets the count");
        breaker.attempt().unwrap().failed();
        assert_eq!(breaker.state(), State::Open);
        assert!(breaker.attempt().is_err(), "open: calls fail fast");

        std::thread::sleep(Duration::from_millis(50));
        let trial = breaker.attempt().unwrap();
        assert_eq!(breaker.state(), State::HalfOpen);
        assert!(breaker.attempt().is_err(), "only one trial at a time");
        trial.failed();
        assert_eq!(
            breaker.state(),
            State::Open,
            "a failed trial opens it again"
        );

        std::thread::sleep(Duration::from_millis(50));
        breaker.attempt().unwrap().succeeded();
        assert_eq!(breaker.state(), State::Closed);
        assert!(breaker.attempt().is_ok());
    }

    #[test]
    fn an_abandoned_trial_lets_the_next_call_try() {
        let breaker = Breaker::new("s", 1, Duration::from_millis(10));
        breaker.attempt().unwrap().failed();
        std::thread::sleep(Duration::from_millis(20));
        drop(breaker.attempt().unwrap());
        assert_eq!(breaker.state(), State::Open);
        assert!(breaker.attempt().is_ok());
    }
}
