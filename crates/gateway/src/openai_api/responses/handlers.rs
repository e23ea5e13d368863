//! The endpoints. They check and hand over: a response begins in `begin`, its
//! answer runs as every answer does, and what goes out is the projection of its
//! events (`projection`), streamed (`stream`) or as one object.

use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::Deserialize;

use super::super::auth::ApiUser;
use super::super::errors::OpenAiError;
use super::super::handler::served;
use super::begin::{Begun, Caller, begin};
use super::book::Found;
use super::errors::{budget_spent, not_found};
use super::ids;
use super::objects::{Deleted, ResponseObject};
use super::projection::{Head, Projection};
use super::request::CreateResponse;
use super::stream;
use crate::GatewayState;
use crate::answer::ports::AnswerRef;
use crate::auth::ChatUser;
use crate::error::GatewayError;
use crate::extract::GatewayJson;
use crate::live::{Events, LoggedEvent};
use maitred_core::http::timeouts::RequestDeadline;
use maitred_core::trace_context::TraceContext;
use maitred_protocol::events::{ChatEvent, DoneEvent, ErrorEvent, Finish};

/// How long a cancel or a delete waits for the answer to end, so that what it
/// answers says how it ended.
const END_WAIT: Duration = Duration::from_secs(10);

/// `POST /v1/responses`
pub(in super::super) async fn create(
    State(state): State<GatewayState>,
    ApiUser(user): ApiUser,
    trace: TraceContext,
    deadline: RequestDeadline,
    request: Result<GatewayJson<CreateResponse>, GatewayError>,
) -> Result<Response, OpenAiError> {
    let arrived = Instant::now();
    if state.shutdown.is_cancelled() {
        state.gateway_metrics.refused("shutting_down");
        return Err(GatewayError::ShuttingDown.into());
    }
    let GatewayJson(request) = request?;
    if !served(&state).contains(&request.model) {
        return Err(OpenAiError::model_not_found(&request.model));
    }
    let checked = request.check(state.settings.question_limit)?;
    let (streams, background) = (checked.stream, checked.background);
    let caller = Caller {
        user,
        trace,
        arrived,
    };
    let Begun {
        started,
        mut projection,
    } = begin(&state, caller, checked).await?;
    if streams {
        return Ok(stream::respond(
            projection,
            started.events,
            None,
            started.watching,
            state.settings.sse_keepalive,
        ));
    }
    if background {
        // It runs on by itself; the caller gets it as it stands, and reads it later.
        return Ok(Json(projection.response()).into_response());
    }
    // Nothing is sent until the whole answer is there, which may rightly take longer
    // than the request timeout; the answer's own limits bound it.
    deadline.lift();
    let (mut events, watching) = (started.events, started.watching);
    while let Some(event) = events.next().await {
        projection.event(&event);
        if event.is_done() {
            break;
        }
    }
    drop(watching);
    if !projection.ended() {
        return Err(OpenAiError::answer_failed(
            "interrupted",
            "the answer was cut short; retrieve the response to see how it ended".to_owned(),
        ));
    }
    if let Some((message, window)) = projection.budget_refusal() {
        return Err(budget_spent(message, window));
    }
    Ok(Json(projection.response()).into_response())
}

#[derive(Debug, Deserialize)]
pub(in super::super) struct Retrieve {
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    starting_after: Option<u64>,
}

/// `GET /v1/responses/{id}`, with `?stream=true&starting_after=N` its stream from
/// after event N, then live to its end: on any replica.
pub(in super::super) async fn retrieve(
    State(state): State<GatewayState>,
    ApiUser(user): ApiUser,
    Path(id): Path<String>,
    query: Result<Query<Retrieve>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, OpenAiError> {
    let Query(query) =
        query.map_err(|rejection| OpenAiError::invalid("stream", rejection.body_text()))?;
    let found = owned(&state, &user, &id).await?;
    if query.stream != Some(true) {
        let events = state.responses.events(&found).await?;
        return Ok(Json(object(found.head, events)).into_response());
    }
    let after = stream::after(query.starting_after, &headers)?;
    let slot = state.live.view(&user.subject).await?;
    let watching = state.live.local().watching(&found.head.message, slot);
    let events: Events = match found.events {
        Some(events) => futures::stream::iter(events).boxed(),
        None => match state
            .live
            .follow(&found.head.message, &user.subject, 0)
            .await?
        {
            Some(events) => events,
            None => futures::stream::iter(lost()).boxed(),
        },
    };
    Ok(stream::respond(
        Projection::new(found.head),
        events,
        after,
        watching,
        state.settings.sse_keepalive,
    ))
}

/// `POST /v1/responses/{id}/cancel`: stops the answer, on whichever replica runs it;
/// the response as it ended (one that had ended already, as it was).
pub(in super::super) async fn cancel(
    State(state): State<GatewayState>,
    ApiUser(user): ApiUser,
    Path(id): Path<String>,
) -> Result<Json<ResponseObject>, OpenAiError> {
    let found = owned(&state, &user, &id).await?;
    let events = stop(&state, &found).await?;
    Ok(Json(object(found.head, events)))
}

/// `DELETE /v1/responses/{id}`: the response, and what its answer stored in the
/// conversation (the conversation too once nothing is left in it). A running one is
/// stopped first.
pub(in super::super) async fn delete(
    State(state): State<GatewayState>,
    ApiUser(user): ApiUser,
    Path(id): Path<String>,
) -> Result<Json<Deleted>, OpenAiError> {
    let found = owned(&state, &user, &id).await?;
    stop(&state, &found).await?;
    let answer = AnswerRef {
        message: found.head.message.clone(),
        conversation: found.head.conversation.clone(),
        owner: user.subject.clone(),
    };
    state.store.delete_answer(&user.subject, &answer).await?;
    state
        .responses
        .delete(&found.head.message, &user.subject)
        .await?;
    tracing::info!(message_id = %found.head.message, "response deleted by its owner");
    Ok(Json(Deleted {
        id: ids::response(&found.head.message),
        object: "response.deleted",
        deleted: true,
    }))
}

/// The caller's stored response `id`: anyone else's, or none, is the same 404.
async fn owned(state: &GatewayState, user: &ChatUser, id: &str) -> Result<Found, OpenAiError> {
    let Some(message) = ids::parse_response(id) else {
        return Err(not_found(id));
    };
    state
        .responses
        .find(&message, &user.subject)
        .await?
        .ok_or_else(|| not_found(id))
}

/// Cancels the response's answer if it runs, and waits (a while) for its end; its
/// events.
async fn stop(
    state: &GatewayState,
    found: &Found,
) -> Result<Option<Vec<LoggedEvent>>, OpenAiError> {
    if found.events.is_some() {
        return Ok(found.events.clone());
    }
    let (id, owner) = (&found.head.message, &found.owner);
    state.live.cancel(id, owner).await?;
    if let Some(mut events) = state.live.follow(id, owner, 0).await? {
        let ended = tokio::time::timeout(END_WAIT, async {
            while let Some(event) = events.next().await {
                if event.is_done() {
                    break;
                }
            }
        })
        .await;
        if ended.is_err() {
            tracing::warn!(message_id = %id, "a cancelled answer has not ended yet");
        }
    }
    Ok(state.responses.events(found).await?)
}

/// The response as its events make it; one whose events are gone (it ended on a
/// replica that died before keeping them, long ago) as failed.
fn object(head: Head, events: Option<Vec<LoggedEvent>>) -> ResponseObject {
    Projection::of(head, &events.unwrap_or_else(lost)).response()
}

/// What stands for the events of an answer nobody can read any more.
fn lost() -> Vec<LoggedEvent> {
    vec![
        LoggedEvent::new(
            1,
            &ChatEvent::Error(ErrorEvent {
                code: "interrupted".to_owned(),
                message: "The server running this response stopped before it could be kept."
                    .to_owned(),
            }),
        ),
        LoggedEvent::new(
            2,
            &ChatEvent::Done(DoneEvent {
                finish_reason: Finish::Error,
            }),
        ),
    ]
}
