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

    /// The event it was recorded from; `None` for a frame no `ChatEvent` reads
    /// (never one this gateway wrote).
    pub fn event(&self) -> Option<ChatEvent> {
        ChatEvent::from_frame(&self.name, &self.data).ok()
    }

    /// The text of a `token` event.
    pub fn token_text(&self) -> Option<String> {
        if &*self.name != "token" {
            return None;
        }
        match self.event()? {
            ChatEvent::Token(token) => Some(token.text),
            _ => None,
        }
    }
}
