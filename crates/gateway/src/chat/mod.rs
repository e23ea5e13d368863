//! The chat API: ask (a new answer, streamed as SSE), watch again (resume), cancel,
//! approve, and the conversations. Handlers check and hand over: the answer runs in
//! `answer`, its live state sits in `live`.

pub mod approvals;
pub mod hooks;
mod input_form;
pub(crate) use input_form::problems as form_problems;
pub mod inputs;
mod pending;
pub mod resume;
pub mod start;
pub mod store;
pub(crate) mod views;

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use serde::Deserialize;

use super::GatewayState;
use super::answer::Asking;
use super::auth::ChatUser;
use super::error::GatewayError;
use super::extract::GatewayJson;
use super::live::{CancelOutcome, Events};
use approvals::Decision;
use maitred_core::trace_context::TraceContext;
use maitred_protocol::ids::{ConversationId, InputId, MessageId, ToolCallId};
use start::{Conversation, NewAnswer, Prompt};
use views::{Answered, Cancelled, ConversationView, Decided};

#[derive(Debug, Deserialize)]
pub struct Question {
    pub question: String,
    pub conversation_id: Option<String>,
}

/// An id from the URL: one that is not well formed names nothing of ours, so it is
/// the same 404 as an unknown one.
pub(crate) fn parse_id<T: std::str::FromStr>(
    what: &'static str,
    text: &str,
) -> Result<T, GatewayError> {
    text.parse()
        .map_err(|_| GatewayError::not_found(what, text))
}

/// The SSE response for an answer's events; `watching` counts this viewer while the
/// stream lives.
fn stream(events: Events, watching: impl Send + 'static, keepalive: Duration) -> Response {
    stream_after(Vec::new(), events, watching, keepalive)
}

/// The same, with `first` before the events.
fn stream_after(
    first: Vec<Event>,
    events: Events,
    watching: impl Send + 'static,
    keepalive: Duration,
) -> Response {
    let events = futures::stream::iter(first)
        .chain(events.map(move |event| {
            let _viewer = &watching;
            event.to_sse()
        }))
        .map(Ok::<Event, Infallible>);
    sse(events, keepalive)
}

pub(crate) fn sse(
    events: impl Stream<Item = Result<Event, Infallible>> + Send + 'static,
    keepalive: Duration,
) -> Response {
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(keepalive).text("ping"))
        .into_response();
    let headers = response.headers_mut();
    headers.insert("cache-control", HeaderValue::from_static("no-cache"));
    // Tells nginx and its kin not to buffer the stream.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// `POST /api/v1/resos/stream/chat`
pub(crate) async fn ask(
    State(state): State<GatewayState>,
    user: ChatUser,
    trace: TraceContext,
    GatewayJson(question): GatewayJson<Question>,
) -> Result<Response, GatewayError> {
    let arrived = std::time::Instant::now();
    if state.shutdown.is_cancelled() {
        state.gateway_metrics.refused("shutting_down");
        return Err(GatewayError::ShuttingDown);
    }
    let text = question.question.trim().to_owned();
    if text.is_empty() {
        return Err(GatewayError::InvalidRequest("the question is empty".into()));
    }
    let limit = state.settings.question_limit;
    if text.chars().count() > limit {
        return Err(GatewayError::QuestionTooLong { limit });
    }
    let continued: Option<ConversationId> = question
        .conversation_id
        .as_deref()
        .map(|id| parse_id("conversation", id))
        .transpose()?;
    // Reads only: nothing before the stream opens waits for the database's writer.
    let history = match &continued {
        Some(conversation) => {
            state.store.check_owner(&user.subject, conversation).await?;
            state
                .store
                .history(conversation, state.settings.context_budget)
                .await?
        }
        None => Vec::new(),
    };
    let started = start::start(
        &state,
        NewAnswer {
            user,
            trace,
            arrived,
            message: MessageId::new(),
            conversation: Conversation::new_or(continued),
            asking: Asking::Person,
            prompt: Prompt::question(history, text),
        },
    )
    .await?;
    Ok(stream(
        started.events,
        started.watching,
        state.settings.sse_keepalive,
    ))
}

/// `GET /api/v1/resos/stream/chat/{message_id}`: watch again, after `Last-Event-ID`,
/// on any replica. The stream counts among the person's open streams while it lasts,
/// and ends after the answer's `done` (at once if the viewer had seen it).
pub async fn resume(
    State(state): State<GatewayState>,
    user: ChatUser,
    Path(message_id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, GatewayError> {
    let id: MessageId = parse_id("generation", &message_id)?;
    let last_seen = last_event_id(&headers)?;
    let slot = state.live.view(&user.subject).await?;
    let watching = state.live.local().watching(&id, slot);
    let events = state
        .live
        .follow(&id, &user.subject, last_seen)
        .await?
        .ok_or_else(|| GatewayError::not_found("generation", &message_id))?;
    // A request for input the viewer saw before it went away, still open, is shown
    // again (once: the events after `last_seen` do not hold it). It carries no `id:`,
    // so the viewer's place in the stream stays where it was.
    let reshown = state
        .inputs
        .still_open(&id, &user.subject, last_seen)
        .await?
        .into_iter()
        .map(|request| {
            let event = maitred_protocol::events::ChatEvent::InputRequired(request);
            Event::default()
                .event(event.name())
                .data(event.data_json().unwrap_or_else(|_| "{}".to_owned()))
        })
        .collect();
    Ok(stream_after(
        reshown,
        events,
        watching,
        state.settings.sse_keepalive,
    ))
}

/// The viewer's place from `Last-Event-ID`: 0 (from the start) when absent or empty.
/// An id is a whole number of at most 20 digits that fits 64 bits; anything else
/// (a sign, a fraction, letters, 2^64 or more) is refused with 400 rather than read
/// as 0, which would replay the whole answer. An id past the answer's last event is
/// allowed: nothing is replayed, and the stream ends with the answer (at once if it
/// has ended).
fn last_event_id(headers: &HeaderMap) -> Result<u64, GatewayError> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(0);
    };
    let refused = || {
        GatewayError::InvalidRequest(
            "Last-Event-ID must be the id of an event of this stream: a whole number below 2^64"
                .to_owned(),
        )
    };
    let text = value.to_str().map_err(|_| refused())?.trim();
    if text.is_empty() {
        return Ok(0);
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(refused());
    }
    text.parse().map_err(|_| refused())
}

/// `POST /api/v1/resos/chat/{message_id}/cancel`, on any replica.
pub async fn cancel(
    State(state): State<GatewayState>,
    user: ChatUser,
    Path(message_id): Path<String>,
) -> Result<Json<Cancelled>, GatewayError> {
    let id: MessageId = parse_id("generation", &message_id)?;
    let status = match state.live.cancel(&id, &user.subject).await? {
        CancelOutcome::Cancelled => {
            tracing::info!(message_id = %id, "answer cancelled by its owner");
            "cancelled"
        }
        CancelOutcome::Finished => "finished",
        CancelOutcome::Unknown => return Err(GatewayError::not_found("generation", &message_id)),
    };
    Ok(Json(Cancelled { status }))
}

/// `POST /api/v1/resos/chat/approvals/{id}`
pub(crate) async fn decide(
    State(state): State<GatewayState>,
    user: ChatUser,
    Path(id): Path<String>,
    GatewayJson(decision): GatewayJson<Decision>,
) -> Result<Json<Decided>, GatewayError> {
    let id: ToolCallId = parse_id("approval", &id)?;
    decision.check()?;
    let status = if decision.approve {
        "approved"
    } else {
        "denied"
    };
    state.approvals.decide(&id, &user.subject, decision).await?;
    Ok(Json(Decided { id, status }))
}

/// `POST /api/v1/resos/chat/inputs/{id}`: the person's answer to a tool's request
/// for input, from any replica.
pub(crate) async fn answer_input(
    State(state): State<GatewayState>,
    user: ChatUser,
    Path(id): Path<String>,
    GatewayJson(answer): GatewayJson<inputs::Answer>,
) -> Result<Json<Answered>, GatewayError> {
    let id: InputId = parse_id("input request", &id)?;
    let status = answer.status();
    state.inputs.answer(&id, &user.subject, answer).await?;
    Ok(Json(Answered { id, status }))
}

/// `GET /api/v1/resos/conversations`
pub async fn conversations(
    State(state): State<GatewayState>,
    user: ChatUser,
) -> Result<Json<Vec<store::ConversationSummary>>, GatewayError> {
    Ok(Json(state.store.conversations(&user.subject).await?))
}

/// `GET /api/v1/resos/conversations/{id}`: every message, with its tool calls.
pub async fn conversation(
    State(state): State<GatewayState>,
    user: ChatUser,
    Path(id): Path<String>,
) -> Result<Json<ConversationView>, GatewayError> {
    let id: ConversationId = parse_id("conversation", &id)?;
    let (summary, parts, calls) = state.store.conversation(&user.subject, &id).await?;
    let tasks = state.background.of_conversation(&id).await?;
    Ok(Json(
        ConversationView::new(summary, parts, calls).with_tasks(tasks),
    ))
}

/// `DELETE /api/v1/resos/conversations/{id}`
pub async fn delete_conversation(
    State(state): State<GatewayState>,
    user: ChatUser,
    Path(id): Path<String>,
) -> Result<StatusCode, GatewayError> {
    let id: ConversationId = parse_id("conversation", &id)?;
    for running in state.live.local().active() {
        if running.answer.conversation == id && running.answer.owner == user.subject {
            running.cancel.cancel();
        }
    }
    state.store.check_owner(&user.subject, &id).await?;
    state.background.stop_all(&id).await?;
    state.store.delete(&user.subject, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(value: Option<&str>) -> Result<u64, GatewayError> {
        let mut headers = HeaderMap::new();
        if let Some(value) = value {
            headers.insert("last-event-id", HeaderValue::from_str(value).unwrap());
        }
        last_event_id(&headers)
    }

    #[test]
    fn last_event_id_is_a_whole_number_or_refused() {
        assert_eq!(place(None).unwrap(), 0);
        assert_eq!(place(Some("")).unwrap(), 0);
        assert_eq!(place(Some(" 7 ")).unwrap(), 7);
        assert_eq!(place(Some("9223372036854775808")).unwrap(), 1 << 63);
        assert_eq!(place(Some("18446744073709551615")).unwrap(), u64::MAX);
        for hostile in [
            "-1",
            "+5",
            "abc",
            "1.5",
            "0x10",
            "18446744073709551616",
            "18446744073709551621",
            "99999999999999999999999",
        ] {
            assert!(
                matches!(place(Some(hostile)), Err(GatewayError::InvalidRequest(_))),
                "{hostile} must be refused"
            );
        }
    }
}
