//! The chat API: ask (a new generation, streamed as SSE), watch again (resume),
//! cancel, approve, and the conversations.

pub mod agent;
pub mod approvals;
mod assemble;
pub mod events;
pub mod generation;
pub mod limits;
mod present;
pub mod store;

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};

use tracing::Instrument;

use super::GatewayState;
use super::auth::ChatUser;
use super::error::GatewayError;
use crate::trace_context::TraceContext;
use approvals::Decision;
use events::ChatEvent;
use generation::Generation;
use store::NewMessage;

#[derive(Debug, Deserialize)]
pub struct Question {
    pub question: String,
    pub conversation_id: Option<String>,
}

/// JSON bodies whose rejections are the gateway's envelope.
fn body<T>(result: Result<Json<T>, JsonRejection>, limit: usize) -> Result<T, GatewayError> {
    match result {
        Ok(Json(value)) => Ok(value),
        Err(JsonRejection::MissingJsonContentType(_)) => Err(GatewayError::UnsupportedMediaType(
            "send the body as JSON with Content-Type: application/json".into(),
        )),
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            Err(GatewayError::PayloadTooLarge { limit })
        }
        Err(JsonRejection::JsonSyntaxError(e)) => Err(GatewayError::InvalidRequest(format!(
            "the body is not valid JSON: {}",
            e.body_text().split_once("JSON: ").map_or("", |(_, r)| r)
        ))),
        Err(rejection) => Err(GatewayError::InvalidRequest(rejection.body_text())),
    }
}

/// The SSE response for a generation, from after `last_seen`.
fn stream(
    generation: &std::sync::Arc<Generation>,
    last_seen: u64,
    keepalive: Duration,
) -> Response {
    let events = generation
        .watch(last_seen)
        .map(|(seq, event)| Ok::<Event, Infallible>(event.to_sse(seq)));
    sse(events, keepalive)
}

fn sse(
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
pub async fn ask(
    State(state): State<GatewayState>,
    user: ChatUser,
    trace: TraceContext,
    request: Result<Json<Question>, JsonRejection>,
) -> Result<Response, GatewayError> {
    if state.shutdown.is_cancelled() {
        state.agent.metrics.refused("shutting_down");
        return Err(GatewayError::ShuttingDown);
    }
    let question = body(request, state.body_limit)?;
    let text = question.question.trim().to_owned();
    if text.is_empty() {
        return Err(GatewayError::InvalidRequest("the question is empty".into()));
    }
    let limit = state.agent.settings.question_limit;
    if text.chars().count() > limit {
        return Err(GatewayError::QuestionTooLong { limit });
    }
    let admission = state.limits.admit(&user.subject).inspect_err(|error| {
        if let GatewayError::RateLimited { reason, .. } = error {
            tracing::info!(subject = ?user.subject, reason = ?reason, "question refused");
        }
        state.agent.metrics.refused("limited");
    })?;
    let store = &state.agent.store;
    let conversation = store
        .open(&user.subject, question.conversation_id.as_deref(), &text)
        .await?;
    // A new conversation has no history: one query less before the first token.
    let history = match question.conversation_id {
        Some(_) => {
            store
                .history(&conversation, state.agent.settings.context_budget)
                .await?
        }
        None => Vec::new(),
    };
    let message_id = format!("gen_{}", uuid::Uuid::now_v7().simple());
    store
        .append(
            &conversation,
            NewMessage {
                generation_id: Some(&message_id),
                role: "user",
                content: Some(&text),
                tool_calls: &[],
                tool_call_id: None,
                status: "complete",
                model: None,
            },
        )
        .await?;
    let generation = state.generations.start(
        message_id.clone(),
        user.subject.clone(),
        conversation.clone(),
        state.agent.settings.stream_grace,
        Some(admission),
    );
    generation.emit(ChatEvent::Meta {
        conversation_id: conversation,
        message_id: message_id.clone(),
        model: state.agent.models.primary().to_owned(),
        fallback_from: None,
    });
    let response = stream(&generation, 0, state.agent.settings.sse_keepalive);
    tracing::info!(%message_id, subject = ?user.subject, "question received");
    let agent = state.agent.clone();
    let generations = state.generations.clone();
    // The answer outlives the request, and its logs keep the request's trace.
    let span = tracing::info_span!(
        "generation",
        %message_id,
        trace_id = %trace.trace_id(),
    );
    state.tasks.spawn(
        async move {
            agent.run(&generation, &user, history, text, trace).await;
            generations.retire(&generation.id);
        }
        .instrument(span),
    );
    Ok(response)
}

/// `GET /api/v1/resos/stream/chat/{message_id}`: watch again, after `Last-Event-ID`.
pub async fn resume(
    State(state): State<GatewayState>,
    user: ChatUser,
    Path(message_id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, GatewayError> {
    let generation = owned(&state, &user, &message_id)?;
    let last_seen = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    Ok(stream(
        &generation,
        last_seen,
        state.agent.settings.sse_keepalive,
    ))
}

fn owned(
    state: &GatewayState,
    user: &ChatUser,
    message_id: &str,
) -> Result<std::sync::Arc<Generation>, GatewayError> {
    state
        .generations
        .get(message_id)
        .filter(|g| g.owner == user.subject)
        .ok_or_else(|| GatewayError::not_found("generation", message_id))
}

/// `POST /api/v1/resos/chat/{message_id}/cancel`
pub async fn cancel(
    State(state): State<GatewayState>,
    user: ChatUser,
    Path(message_id): Path<String>,
) -> Result<Json<Value>, GatewayError> {
    let generation = owned(&state, &user, &message_id)?;
    if generation.is_finished() {
        return Ok(Json(json!({ "status": "finished" })));
    }
    generation.cancel.cancel();
    tracing::info!(%message_id, "generation cancelled by its owner");
    Ok(Json(json!({ "status": "cancelled" })))
}

/// `POST /api/v1/resos/chat/approvals/{id}`
pub async fn decide(
    State(state): State<GatewayState>,
    user: ChatUser,
    Path(id): Path<String>,
    request: Result<Json<Decision>, JsonRejection>,
) -> Result<Json<Value>, GatewayError> {
    let decision = body(request, state.body_limit)?;
    decision.check()?;
    let status = if decision.approve {
        "approved"
    } else {
        "denied"
    };
    state
        .agent
        .approvals
        .decide(&id, &user.subject, decision)
        .await?;
    Ok(Json(json!({ "id": id, "status": status })))
}

/// `GET /api/v1/resos/conversations`
pub async fn conversations(
    State(state): State<GatewayState>,
    user: ChatUser,
) -> Result<Json<Value>, GatewayError> {
    let list = state.agent.store.conversations(&user.subject).await?;
    Ok(Json(json!(list)))
}

/// `GET /api/v1/resos/conversations/{id}`: every message, with its tool calls.
pub async fn conversation(
    State(state): State<GatewayState>,
    user: ChatUser,
    Path(id): Path<String>,
) -> Result<Json<Value>, GatewayError> {
    let (summary, messages, calls) = state.agent.store.conversation(&user.subject, &id).await?;
    let messages: Vec<Value> = messages
        .into_iter()
        .filter(|m| m.role != "tool")
        .map(|m| {
            let mut value = json!(m);
            if m.role == "assistant" {
                value["tool_calls"] = calls
                    .iter()
                    .filter(|c| c.turn_id == m.id)
                    .map(|c| {
                        let mut call = json!(c);
                        call["arguments"] =
                            serde_json::from_str(&c.arguments).unwrap_or(Value::Null);
                        call
                    })
                    .collect();
            }
            value
        })
        .collect();
    let mut value = json!(summary);
    value["messages"] = Value::Array(messages);
    Ok(Json(value))
}

/// `DELETE /api/v1/resos/conversations/{id}`
pub async fn delete_conversation(
    State(state): State<GatewayState>,
    user: ChatUser,
    Path(id): Path<String>,
) -> Result<StatusCode, GatewayError> {
    for generation in state.generations.active() {
        if generation.conversation_id == id && generation.owner == user.subject {
            generation.cancel.cancel();
        }
    }
    state.agent.store.delete(&user.subject, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
