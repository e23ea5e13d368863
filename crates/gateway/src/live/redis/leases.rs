//! Who runs each answer. The owner renews its leases (and its model slots) every
//! third of the lease; an answer nobody has watched, here or elsewhere, for the grace
//! period is cancelled; and every replica sweeps the answers whose lease lapsed —
//! their replica died — ending each for its viewers and storing what they were shown.

use std::sync::Arc;

use redis::streams::StreamRangeReply;
use redis::{AsyncCommands, Script};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{RedisLive, wire};
use crate::answer::ports::AnswerRef;
use crate::chat::resume::Resumer;
use crate::chat::store::Store;
use crate::live::{LiveError, recover};
use maitred_protocol::ids::{ConversationId, MessageId, Subject};

/// Renews the lease only for its owner: one that lost it must not take it back.
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
";

/// Sweeps at most this many lapsed answers a round.
const SWEEP_BATCH: isize = 16;

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

pub(super) async fn run(live: Arc<RedisLive>, store: Store, stop: CancellationToken) {
    let renew = Script::new(RENEW);
    let mut tick = tokio::time::interval(live.timings.lease / 3);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(error) = renew_all(&live, &renew).await {
            tracing::warn!(%error, "renewing this replica's leases");
        }
        if let Err(error) = cancel_unwatched(&live).await {
            tracing::warn!(%error, "looking for answers nobody watches");
        }
        if let Err(error) = sweep(&live, &store).await {
            tracing::warn!(%error, "sweeping answers whose replica died");
        }
    }
}

async fn renew_all(live: &RedisLive, renew: &Script) -> Result<(), LiveError> {
    let lease_ms = live.timings.lease.as_millis() as i64;
    let expiry = now_ms() + lease_ms;
    let mut conn = live.conn.clone();
    for answer in live.local.active() {
        let id = &answer.answer.message;
        let renewed: i64 = renew
            .key(live.keys.lease(id))
            .arg(&live.replica)
            .arg(lease_ms)
            .invoke_async(&mut conn)
            .await?;
        if renewed == 0 {
            // It finished since the list was taken (its end deletes its lease):
            // nothing was lost.
            if live.local.get(id).is_none() {
                continue;
            }
            // Another replica ended it: stop writing to it at once.
            tracing::warn!(message_id = %id, "lost the lease of a running answer; stopping it");
            answer.cancel.cancel();
            continue;
        }
        let mut pipe = redis::pipe();
        pipe.cmd("ZADD")
            .arg(live.keys.leases())
            .arg("XX")
            .arg(expiry)
            .arg(id.as_str())
            .ignore()
            .cmd("ZADD")
            .arg(live.limits.person_running(&answer.answer.owner))
            .arg("XX")
            .arg(expiry)
            .arg(id.as_str())
            .ignore();
        pipe.query_async::<()>(&mut conn).await?;
    }
    let slot_lease = live.limits.slot_lease().as_millis() as i64;
    let slot_expiry = now_ms() + slot_lease;
    for (token, key) in live.limits.held_slots() {
        // The set lives on with its slots: one held longer than the set's first expiry
        // (an open stream can last many minutes) stays counted.
        let mut pipe = redis::pipe();
        pipe.cmd("ZADD")
            .arg(&key)
            .arg("XX")
            .arg(slot_expiry)
            .arg(&token)
            .ignore()
            .cmd("PEXPIRE")
            .arg(&key)
            .arg(slot_lease + 60_000)
            .ignore();
        pipe.query_async::<()>(&mut conn).await?;
    }
    Ok(())
}

/// An answer nobody has watched for the grace period, on any replica, is cancelled.
async fn cancel_unwatched(live: &RedisLive) -> Result<(), LiveError> {
    let mut conn = live.conn.clone();
    for answer in live.local.active() {
        if answer.unwatched_for() <= live.timings.grace || answer.cancel.is_cancelled() {
            continue;
        }
        let watched: bool = conn
            .exists(live.keys.watched(&answer.answer.message))
            .await?;
        if !watched {
            tracing::info!(message_id = %answer.answer.message, "nobody is watching: cancelling the answer");
            answer.cancel.cancel();
        }
    }
    Ok(())
}

async fn sweep(live: &Arc<RedisLive>, store: &Store) -> Result<(), LiveError> {
    // A replica still starting takes nothing over: it could only end it.
    let Some(resumer) = live.resumer.get().cloned() else {
        return Ok(());
    };
    let mut conn = live.conn.clone();
    let lapsed: Vec<String> = conn
        .zrangebyscore_limit(live.keys.leases(), "-inf", now_ms(), 0, SWEEP_BATCH)
        .await?;
    for id in lapsed {
        let Ok(id) = id.parse::<MessageId>() else {
            let _: i64 = conn.zrem(live.keys.leases(), &id).await?;
            continue;
        };
        if live.local.get(&id).is_some() || conn.exists(live.keys.lease(&id)).await? {
            continue;
        }
        // One replica ends it, whichever gets here first.
        let claimed: Option<String> = redis::cmd("SET")
            .arg(live.keys.sweep(&id))
            .arg(&live.replica)
            .arg("NX")
            .arg("PX")
            .arg(60_000)
            .query_async(&mut conn)
            .await?;
        if claimed.is_none() {
            continue;
        }
        end(live, store, &resumer, &id).await?;
    }
    Ok(())
}

/// Takes over an answer whose replica died: it goes on here if it can (see
/// `chat::resume`); else it ends, with `error` `interrupted` and `done` for its
/// viewers. Either way every shown token is in the store.
async fn end(
    live: &Arc<RedisLive>,
    store: &Store,
    resumer: &Resumer,
    id: &MessageId,
) -> Result<(), LiveError> {
    let mut conn = live.conn.clone();
    let fields: Vec<Option<String>> = redis::cmd("HMGET")
        .arg(live.keys.answer(id))
        .arg("owner")
        .arg("conversation")
        .query_async(&mut conn)
        .await?;
    let (Some(Some(owner)), Some(Some(conversation))) = (fields.first(), fields.get(1)) else {
        let _: i64 = conn.zrem(live.keys.leases(), id.as_str()).await?;
        return Ok(());
    };
    let Ok(conversation) = conversation.parse::<ConversationId>() else {
        return Ok(());
    };
    let answer = AnswerRef {
        message: id.clone(),
        conversation,
        owner: Subject::new(owner.clone()),
    };
    let reply: StreamRangeReply = conn.xrange(live.keys.events(id), "-", "+").await?;
    let events = wire::from_range(reply);
    match resumer.prepare(&answer, &events).await {
        Ok(Some(prepared)) => {
            adopt(live, &answer).await?;
            let after = events.last().map_or(0, |e| e.seq);
            resumer.start(live.clone(), prepared, after);
            return Ok(());
        }
        Ok(None) => {}
        Err(error) => {
            tracing::warn!(%error, message_id = %id, "an answer whose replica died cannot go on; ending it");
        }
    }
    let ending = recover::finish(store, &answer, &events).await?;
    let retention = live.timings.retention.as_millis() as i64;
    let mut pipe = redis::pipe();
    for event in &ending {
        wire::xadd(&mut pipe, live.keys.events(id), None, event);
    }
    if !ending.is_empty() {
        pipe.publish(
            live.keys.channel(id),
            wire::encode_batch(&ending.iter().collect::<Vec<_>>()),
        )
        .ignore();
    }
    pipe.hset(live.keys.answer(id), "status", "interrupted")
        .ignore()
        .pexpire(live.keys.answer(id), retention)
        .ignore()
        .pexpire(live.keys.events(id), retention)
        .ignore()
        .zrem(live.keys.leases(), id.as_str())
        .ignore()
        .zrem(live.limits.person_running(&answer.owner), id.as_str())
        .ignore();
    pipe.query_async::<()>(&mut conn).await?;
    Ok(())
}

/// Makes a taken-over answer this replica's: its lease, its place among the leases
/// swept and among its person's running answers.
async fn adopt(live: &RedisLive, answer: &AnswerRef) -> Result<(), LiveError> {
    let id = &answer.message;
    let lease_ms = live.timings.lease.as_millis() as i64;
    let expiry = now_ms() + lease_ms;
    let mut pipe = redis::pipe();
    pipe.hset(live.keys.answer(id), "replica", &live.replica)
        .ignore()
        .cmd("SET")
        .arg(live.keys.lease(id))
        .arg(&live.replica)
        .arg("PX")
        .arg(lease_ms)
        .ignore()
        .zadd(live.keys.leases(), id.as_str(), expiry)
        .ignore()
        .zadd(
            live.limits.person_running(&answer.owner),
            id.as_str(),
            expiry,
        )
        .ignore()
        // It is held again: a sweep after this replica's own death may take it.
        .del(live.keys.sweep(id))
        .ignore();
    pipe.query_async::<()>(&mut live.conn.clone()).await?;
    tracing::info!(message_id = %id, replica = %live.replica, "took over an answer whose replica died");
    Ok(())
}

/// Gives model slots back as their streams end.
pub(super) async fn release_slots(
    live: Arc<RedisLive>,
    mut released: mpsc::UnboundedReceiver<(String, String)>,
    stop: CancellationToken,
) {
    let mut conn = live.conn.clone();
    loop {
        let slot = tokio::select! {
            slot = released.recv() => slot,
            () = stop.cancelled() => None,
        };
        let Some((token, key)) = slot else { return };
        live.limits.forget_slot(&token);
        let released: Result<i64, _> = conn.zrem(&key, &token).await;
        if let Err(error) = released {
            // The slot lapses by itself within its lease.
            tracing::warn!(%error, "releasing a model slot");
        }
    }
}
