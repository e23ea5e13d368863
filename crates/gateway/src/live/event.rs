//! An event as the log keeps it and viewers get it: serialized once, when it is
//! recorded, however many viewers and replicas it then goes to.

use std::sync::Arc;

use axum::response::sse::Event;

use maitred_protocol::events::ChatEvent;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedEvent {
    /// Its place in the answer, from 1: the SSE `id:`.
    pub seq: u64,
    /// The SSE `event:` name.
    pub name: Arc<str>,
    /// The SSE `data:`, one line of JSON.
    pub data: Arc<str>,
}

impl LoggedEvent {
    pub fn new(seq: u64, event: &ChatEvent) -> Self {
        Self {
            seq,
            name: Arc::from(event.name()),
            // Serializing our own types cannot fail; an empty object keeps the stream valid.
            data: Arc::from(event.data_json().unwrap_or_else(|_| "{}".to_owned())),
        }
    }

    pub fn is_done(&self) -> bool {
        &*self.name == "done"
    }

    pub fn to_sse(&self) -> Event {
        Event::default()
            .id(self.seq.to_string())
            .event(&*self.name)
            .data(&*self.data)
    }

    /// The text of a `token` event.
    pub fn token_text(&self) -> Option<String> {
        if &*self.name != "token" {
            return None;
        }
        let value: serde_json::Value = serde_json::from_str(&self.data).ok()?;
        value["text"].as_str().map(str::to_owned)
    }
}
