//! The two endpoints. They check the request and hand over: the answer starts as
//! every answer does (`chat::start`), and its events are translated (`chunks`).

use std::convert::Infallible;
use std::time::Instant;

use axum::Json;
use axum::extract::State;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use super::NO_APPROVALS;
use super::auth::ApiUser;
use super::chunks::{ModelList, ModelObject, Out, Translator};
use super::errors::{OpenAiError, budget_spent};
use super::request::ChatCompletionRequest;
use crate::GatewayState;
use crate::answer::Asking;
use crate::chat::sse;
use crate::chat::start::{Conversation, NewAnswer, Prompt, Started, start};
use crate::error::GatewayError;
use crate::extract::GatewayJson;
use maitred_core::http::timeouts::RequestDeadline;
use maitred_core::trace_context::TraceContext;
use maitred_protocol::ids::MessageId;

/// The models this API answers as: the gateway, and the gateway named after the
/// model it is configured with.
pub(super) fn served(state: &GatewayState) -> [String; 2] {
    [
        "maitred".to_owned(),
        format!("maitred/{}", state.answerer.models.primary()),
    ]
}

/// `GET /v1/models`
pub(super) async fn models(
    State(state): State<GatewayState>,
    ApiUser(_user): ApiUser,
) -> Json<ModelList> {
    let created = chrono::Utc::now().timestamp();
    Json(ModelList {
        object: "list",
        data: served(&state)
            .into_iter()
            .map(|id| ModelObject {
                id,
                object: "model",
                created,
                owned_by: "maitred",
            })
            .collect(),
    })
}

/// `POST /v1/chat/completions`
pub(super) async fn completions(
    State(state): State<GatewayState>,
    ApiUser(user): ApiUser,
    trace: TraceContext,
    deadline: RequestDeadline,
    request: Result<GatewayJson<ChatCompletionRequest>, GatewayError>,
) -> Result<Response, OpenAiError> {
    let arrived = Instant::now();
    if state.shutdown.is_cancelled() {
        state.gateway_metrics.refused("shutting_down");
        return Err(GatewayError::ShuttingDown.into());
    }
    // The body's problems, in OpenAI's error shape.
    let GatewayJson(request) = request?;
    if !served(&state).contains(&request.model) {
        return Err(OpenAiError::model_not_found(&request.model));
    }
    let conversation = request.conversation(state.settings.context_budget)?;
    let limit = state.settings.question_limit;
    if conversation.question.chars().count() > limit {
        return Err(GatewayError::QuestionTooLong { limit }.into());
    }
    let started = start(
        &state,
        NewAnswer {
            user,
            trace,
            arrived,
            message: MessageId::new(),
            conversation: Conversation::new_or(None),
            asking: Asking::Never { why: NO_APPROVALS },
            prompt: Prompt::question(conversation.history, conversation.question),
        },
    )
    .await?;
    let translator = Translator::new(
        format!("chatcmpl-{}", started.answer.message),
        chrono::Utc::now().timestamp(),
        request.model.clone(),
        request.include_usage(),
    );
    if request.streams() {
        Ok(streamed(translator, started, &state))
    } else {
        // Nothing is sent until the whole answer is there, which may rightly take
        // longer than the request timeout; the answer's own limits bound it.
        deadline.lift();
        complete(translator, started).await
    }
}

fn data(out: &Out) -> Event {
    let json = match out {
        Out::Chunk(chunk) => serde_json::to_string(chunk),
        Out::Error(error) => serde_json::to_string(&serde_json::json!({ "error": error })),
    };
    // Serializing our own types cannot fail; an empty object keeps the stream valid.
    Event::default().data(json.unwrap_or_else(|_| "{}".to_owned()))
}

/// The chunks as they come, then `data: [DONE]`.
fn streamed(mut translator: Translator, started: Started, state: &GatewayState) -> Response {
    let Started {
        events, watching, ..
    } = started;
    let chunks = events
        .flat_map(move |event| {
            let _viewer = &watching;
            let outs = translator.event(&event);
            futures::stream::iter(outs.iter().map(data).map(Ok).collect::<Vec<_>>())
        })
        .chain(futures::stream::once(async {
            Ok::<Event, Infallible>(Event::default().data("[DONE]"))
        }));
    sse(chunks, state.settings.sse_keepalive)
}

/// Waits for the whole answer; one `chat.completion`, or the error it ended with.
async fn complete(mut translator: Translator, started: Started) -> Result<Response, OpenAiError> {
    let Started {
        mut events,
        watching,
        ..
    } = started;
    let mut outs = Vec::new();
    let mut done = false;
    while let Some(event) = events.next().await {
        outs.extend(translator.event(&event));
        if event.is_done() {
            done = true;
            break;
        }
    }
    drop(watching);
    if let Some((message, window)) = translator.budget_refusal() {
        return Err(budget_spent(message, window));
    }
    if !done {
        return Err(OpenAiError::answer_failed(
            "interrupted",
            "the answer was cut short; please ask again".to_owned(),
        ));
    }
    match translator.complete(outs) {
        Ok(completion) => Ok(Json(completion).into_response()),
        Err(error) => Err(OpenAiError::answer_failed(
            error.code.as_deref().unwrap_or("error"),
            error.message,
        )),
    }
}
