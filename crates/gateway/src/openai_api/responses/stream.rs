//! A response's stream: its answer's events, projected, as Server-Sent Events. Each
//! event has the `event:` name of its `type`, its `sequence_number` as the SSE `id:`
//! (so `Last-Event-ID` works as `starting_after` does), and one JSON `data:` line.
//! There is no `[DONE]`: the stream ends after `response.completed` (or `.failed`,
//! `.incomplete`), as OpenAI's does.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::Response;
use axum::response::sse::Event;
use futures::{Stream, StreamExt};

use super::super::errors::OpenAiError;
use super::objects::Numbered;
use super::projection::Projection;
use crate::chat::sse;
use crate::live::LoggedEvent;

/// The SSE response for `events` (the answer's log from its first event): the
/// projected events after sequence number `after` (all of them without), then the
/// ones still to come. `watching` counts the viewer while the stream lives.
pub(super) fn respond(
    mut projection: Projection,
    events: impl Stream<Item = LoggedEvent> + Send + 'static,
    after: Option<u64>,
    watching: impl Send + 'static,
    keepalive: Duration,
) -> Response {
    let sent = events.flat_map(move |event| {
        let _viewer = &watching;
        let out: Vec<Result<Event, Infallible>> = projection
            .event(&event)
            .into_iter()
            .filter(|numbered| after.is_none_or(|after| numbered.sequence_number > after))
            .map(|numbered| Ok(frame(&numbered)))
            .collect();
        futures::stream::iter(out)
    });
    sse(sent, keepalive)
}

fn frame(numbered: &Numbered) -> Event {
    // Serializing our own types cannot fail; an empty object keeps the stream valid.
    let data = serde_json::to_string(numbered).unwrap_or_else(|_| "{}".to_owned());
    Event::default()
        .id(numbered.sequence_number.to_string())
        .event(numbered.event.name())
        .data(data)
}

/// Where a stream continues: `starting_after`, else `Last-Event-ID`, else from the
/// first event. An id is a whole number; anything else is refused rather than read
/// as "from the start".
pub(super) fn after(
    starting_after: Option<u64>,
    headers: &HeaderMap,
) -> Result<Option<u64>, OpenAiError> {
    if starting_after.is_some() {
        return Ok(starting_after);
    }
    let Some(value) = headers.get("last-event-id") else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or("x").trim();
    if text.is_empty() {
        return Ok(None);
    }
    let digits = text.bytes().all(|b| b.is_ascii_digit());
    text.parse()
        .ok()
        .filter(|_| digits)
        .map(Some)
        .ok_or_else(|| {
            OpenAiError::invalid(
                "starting_after",
                "Last-Event-ID must be a sequence_number of this stream: a whole number",
            )
        })
}
