//! Limits shared by every replica: a person's running answers, questions per minute
//! and open answer streams, a model's requests at once and per minute. Each is one script over keys
//! of one hash slot: a sorted set of what is running (scored by when it lapses, so
//! a dead replica's count goes by itself) and a GCRA rate (the same algorithm the
//! in-process limits use).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use redis::Script;
use redis::aio::ConnectionManager;
use tokio::sync::mpsc;

use super::keys::Keys;
use crate::error::GatewayError;
use crate::live::limits::too_many_viewers;
use crate::live::{ModelLimits, ModelPermit, ViewerSlot};
use maitred_core::settings::gateway_file::{Limits, Resilience};
use maitred_llm::ModelError;
use maitred_protocol::ids::{MessageId, Subject};

/// Admits one more running thing to `KEYS[1]` (at most `ARGV[4]`), within the rate
/// of `KEYS[2]` (one per `ARGV[5]` ms, `ARGV[6]` at once; 0: no rate). Returns
/// `{0, 0}` admitted, `{1, n}` full with n running, `{2, ms}` over the rate for ms.
const ADMIT: &str = r"
local now, expiry, member = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local most, interval, burst = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local running = redis.call('ZCARD', KEYS[1])
if running >= most then return {1, running} end
if interval > 0 then
  local tat = tonumber(redis.call('GET', KEYS[2]) or now)
  if tat < now then tat = now end
  local next = tat + interval
  if next - now > burst * interval then return {2, next - now - burst * interval} end
  redis.call('SET', KEYS[2], next, 'PX', math.ceil(next - now) + 1000)
end
redis.call('ZADD', KEYS[1], expiry, member)
redis.call('PEXPIRE', KEYS[1], expiry - now + 60000)
return {0, 0}
";

/// How long a model slot holds without renewal; renewed while its stream runs.
const SLOT_LEASE: Duration = Duration::from_secs(30);
/// Between two tries for a model slot while it is full.
const SLOT_POLL: Duration = Duration::from_millis(25);

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// One per `60 000 / n` ms, `n` at once, as `Quota::per_minute(n)` allows.
fn rate(per_minute: u32) -> (i64, i64) {
    match per_minute {
        0 => (0, 0),
        n => (60_000 / i64::from(n), i64::from(n)),
    }
}

#[derive(Clone)]
pub(super) struct RedisLimits {
    conn: ConnectionManager,
    keys: Keys,
    script: Arc<Script>,
    person: Limits,
    model_concurrency: usize,
    model_per_minute: u32,
    /// Model slots held here, renewed until released.
    held: Arc<Mutex<HashMap<String, String>>>,
    release: mpsc::UnboundedSender<(String, String)>,
}

impl RedisLimits {
    pub(super) fn new(
        conn: ConnectionManager,
        keys: Keys,
        person: &Limits,
        resilience: &Resilience,
    ) -> (Self, mpsc::UnboundedReceiver<(String, String)>) {
        let (release, released) = mpsc::unbounded_channel();
        let limits = Self {
            conn,
            keys,
            script: Arc::new(Script::new(ADMIT)),
            person: person.clone(),
            model_concurrency: resilience.model_concurrency.max(1),
            model_per_minute: resilience.model_requests_per_minute.unwrap_or(0),
            held: Arc::default(),
            release,
        };
        (limits, released)
    }

    async fn admit_one(
        &self,
        keys: &(String, String),
        member: &str,
        expiry_ms: i64,
        most: usize,
        (interval, burst): (i64, i64),
    ) -> redis::RedisResult<(i64, i64)> {
        self.script
            .key(&keys.0)
            .key(&keys.1)
            .arg(now_ms())
            .arg(expiry_ms)
            .arg(member)
            .arg(most)
            .arg(interval)
            .arg(burst)
            .invoke_async(&mut self.conn.clone())
            .await
    }

    /// A person's new answer, counted until `release_person` (or its lease lapses).
    pub(super) async fn admit_person(
        &self,
        owner: &Subject,
        answer: &MessageId,
        lease: Duration,
    ) -> Result<(), GatewayError> {
        let expiry = now_ms() + lease.as_millis() as i64;
        let keys = self.keys.person(owner);
        let (verdict, value) = self
            .admit_one(
                &keys,
                answer.as_str(),
                expiry,
                self.person.concurrent_generations.max(1),
                rate(self.person.requests_per_minute),
            )
            .await
            .map_err(|e| GatewayError::LiveUnavailable(e.to_string()))?;
        match verdict {
            0 => Ok(()),
            1 => Err(GatewayError::RateLimited {
                reason: format!(
                    "you already have {value} answers running (the limit is {}); wait for one to finish or cancel it",
                    self.person.concurrent_generations
                ),
                retry_after: 5,
            }),
            _ => Err(GatewayError::RateLimited {
                reason: format!(
                    "more than {} questions a minute",
                    self.person.requests_per_minute
                ),
                retry_after: (value as u64).div_ceil(1000).max(1),
            }),
        }
    }

    /// One more open answer stream of `owner`, counted on every replica until the
    /// slot drops (or, its replica dead, its lease lapses).
    pub(super) async fn admit_viewer(&self, owner: &Subject) -> Result<ViewerSlot, GatewayError> {
        let keys = self.keys.viewers(owner);
        let token = format!("view_{}", uuid::Uuid::now_v7().simple());
        let expiry = now_ms() + SLOT_LEASE.as_millis() as i64;
        let most = self.person.concurrent_viewers.max(1);
        let (verdict, open) = self
            .admit_one(&keys, &token, expiry, most, (0, 0))
            .await
            .map_err(|e| GatewayError::LiveUnavailable(e.to_string()))?;
        if verdict != 0 {
            return Err(too_many_viewers(open, most));
        }
        Ok(ViewerSlot::new(self.hold(token, keys.0)))
    }

    /// A slot admitted under `key`: renewed by the lease loop until dropped.
    fn hold(&self, token: String, key: String) -> Slot {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(token.clone(), key.clone());
        Slot {
            token,
            key,
            release: self.release.clone(),
        }
    }

    /// The commands that keep a running answer counted, or forget it.
    pub(super) fn person_running(&self, owner: &Subject) -> String {
        self.keys.person(owner).0
    }

    /// Renews the model slots held here (from the lease loop).
    pub(super) fn held_slots(&self) -> Vec<(String, String)> {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(token, key)| (token.clone(), key.clone()))
            .collect()
    }

    pub(super) fn slot_lease(&self) -> Duration {
        SLOT_LEASE
    }

    pub(super) fn forget_slot(&self, token: &str) {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(token);
    }
}

/// Gives a slot (a model's, or a person's open stream) back when its stream ends.
struct Slot {
    token: String,
    key: String,
    release: mpsc::UnboundedSender<(String, String)>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let _ = self.release.send((
            std::mem::take(&mut self.token),
            std::mem::take(&mut self.key),
        ));
    }
}

#[async_trait]
impl ModelLimits for RedisLimits {
    async fn acquire(&self, model: &str, wait: Duration) -> Result<ModelPermit, ModelError> {
        let deadline = tokio::time::Instant::now() + wait;
        let keys = self.keys.model(model);
        let token = format!("slot_{}", uuid::Uuid::now_v7().simple());
        loop {
            let expiry = now_ms() + SLOT_LEASE.as_millis() as i64;
            let (verdict, value) = self
                .admit_one(
                    &keys,
                    &token,
                    expiry,
                    self.model_concurrency,
                    rate(self.model_per_minute),
                )
                .await
                .map_err(|e| ModelError::Busy(format!("the shared model limits: {e}")))?;
            if verdict == 0 {
                return Ok(ModelPermit::new(self.hold(token, keys.0)));
            }
            let pause = if verdict == 2 {
                Duration::from_millis(value.max(1) as u64)
            } else {
                SLOT_POLL
            };
            if tokio::time::Instant::now() + pause > deadline {
                return Err(ModelError::Busy(format!(
                    "{model} stayed at its request limits for {} s",
                    wait.as_secs_f64()
                )));
            }
            tokio::time::sleep(pause).await;
        }
    }
}
