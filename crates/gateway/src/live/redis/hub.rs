//! One subscriber connection per replica, read by one task, for all its viewers and
//! its control messages: no blocking Redis connection per viewer. A viewer's answer
//! gets a channel subscription while anyone here follows it; what comes in goes to
//! every local follower through a broadcast channel.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{PushInfo, PushKind, Value};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::wire;
use crate::live::LoggedEvent;

/// Announcements a follower may miss before it catches up from the stream instead.
/// A broadcast channel allocates all its slots up front, one channel per followed
/// answer: 1,024 slots made 40 KiB of every open answer. A follower that falls this
/// far behind reads the answer's stream, which holds every event anyway.
const BACKLOG: usize = 64;

/// What followers of one channel hear: events, or an empty batch meaning "messages
/// may have been lost; read the stream".
pub(super) type Batch = Arc<[LoggedEvent]>;

struct Channel {
    sender: broadcast::Sender<Batch>,
    followers: usize,
}

#[derive(Clone)]
pub(super) struct Hub {
    conn: ConnectionManager,
    channels: Arc<Mutex<HashMap<String, Channel>>>,
    /// Subscribing and unsubscribing one at a time, so an unsubscribe cannot overtake
    /// the subscribe of a follower that just arrived.
    commands: Arc<tokio::sync::Mutex<()>>,
    unsubscribe: mpsc::UnboundedSender<String>,
}

/// A follower's subscription; when the last one here goes, so does the subscription.
pub(super) struct Subscription {
    pub receiver: broadcast::Receiver<Batch>,
    channel: String,
    hub: Hub,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let last = {
            let mut channels = self.hub.lock();
            match channels.get_mut(&self.channel) {
                Some(channel) => {
                    channel.followers -= 1;
                    channel.followers == 0
                }
                None => false,
            }
        };
        if last {
            let _ = self.hub.unsubscribe.send(self.channel.clone());
        }
    }
}

impl Hub {
    /// Connects the subscriber, subscribes to `control`, and reads until `stop`;
    /// control messages go to `on_control`.
    pub(super) async fn start(
        client: &redis::Client,
        control: &str,
        on_control: impl Fn(&str) + Send + Sync + 'static,
        tasks: &TaskTracker,
        stop: CancellationToken,
    ) -> redis::RedisResult<Self> {
        let (pushes, mut incoming) = mpsc::unbounded_channel::<PushInfo>();
        let config = ConnectionManagerConfig::new()
            .set_push_sender(pushes)
            .set_automatic_resubscription();
        let resp3 = client.get_connection_info().clone().set_redis_settings(
            client
                .get_connection_info()
                .redis_settings()
                .clone()
                .set_protocol(redis::ProtocolVersion::RESP3),
        );
        let mut conn = redis::Client::open(resp3)?
            .get_connection_manager_with_config(config)
            .await?;
        conn.subscribe(control).await?;
        let (unsubscribe, mut unsubscribes) = mpsc::unbounded_channel::<String>();
        let hub = Self {
            conn,
            channels: Arc::default(),
            commands: Arc::default(),
            unsubscribe,
        };
        let control = control.to_owned();
        tasks.spawn({
            let hub = hub.clone();
            let stop = stop.clone();
            async move {
                loop {
                    let push = tokio::select! {
                        push = incoming.recv() => push,
                        () = stop.cancelled() => None,
                    };
                    let Some(push) = push else { return };
                    hub.dispatch(push, &control, &on_control);
                }
            }
        });
        tasks.spawn({
            let hub = hub.clone();
            async move {
                loop {
                    let channel = tokio::select! {
                        channel = unsubscribes.recv() => channel,
                        () = stop.cancelled() => None,
                    };
                    let Some(channel) = channel else { return };
                    hub.forget(&channel).await;
                }
            }
        });
        Ok(hub)
    }

    fn dispatch(&self, push: PushInfo, control: &str, on_control: &impl Fn(&str)) {
        match push.kind {
            PushKind::Message => {
                let [channel, payload] = push.data.as_slice() else {
                    return;
                };
                let (Some(channel), Some(payload)) = (text(channel), text(payload)) else {
                    return;
                };
                if channel == control {
                    on_control(&payload);
                    return;
                }
                let events: Batch = match wire::decode_batch(&payload) {
                    Some(events) => events.into(),
                    None => {
                        tracing::warn!(channel = ?channel, "an unreadable announcement");
                        return;
                    }
                };
                if let Some(channel) = self.lock().get(&channel) {
                    let _ = channel.sender.send(events);
                }
            }
            // The connection broke: what was published meanwhile is lost to pub/sub.
            // Every follower reads the stream again once resubscribed.
            PushKind::Disconnection => {
                for channel in self.lock().values() {
                    let _ = channel.sender.send(Arc::from([]));
                }
            }
            _ => {}
        }
    }

    pub(super) async fn subscribe(&self, channel: &str) -> redis::RedisResult<Subscription> {
        let _one_at_a_time = self.commands.lock().await;
        let (receiver, new) = {
            let mut channels = self.lock();
            let entry = channels
                .entry(channel.to_owned())
                .or_insert_with(|| Channel {
                    sender: broadcast::channel(BACKLOG).0,
                    followers: 0,
                });
            entry.followers += 1;
            (entry.sender.subscribe(), entry.followers == 1)
        };
        let subscription = Subscription {
            receiver,
            channel: channel.to_owned(),
            hub: self.clone(),
        };
        if new {
            self.conn.clone().subscribe(channel).await?;
        }
        Ok(subscription)
    }

    async fn forget(&self, channel: &str) {
        let _one_at_a_time = self.commands.lock().await;
        let idle = {
            let mut channels = self.lock();
            let idle = channels.get(channel).is_some_and(|c| c.followers == 0);
            if idle {
                channels.remove(channel);
            }
            idle
        };
        if idle && let Err(error) = self.conn.clone().unsubscribe(channel).await {
            tracing::warn!(%error, "unsubscribing from an answer's channel");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Channel>> {
        self.channels.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(text) => Some(text.clone()),
        _ => None,
    }
}
