//! How a question starts an answer, whichever API it came through: admitted within
//! the person's limits (its stream counted among their open streams, its answer
//! among their running answers), its question stored, its `meta` recorded, and the
//! answer loop running detached from the request. The caller gets the answer's events
//! to send on, and a guard that counts it as watching (and holds its stream's slot).

use std::sync::Arc;
use std::time::Instant;

use tracing::Instrument;

use crate::GatewayState;
use crate::answer::ports::AnswerRef;
use crate::answer::{Answer, Asking, Recorder};
use crate::auth::ChatUser;
use crate::error::GatewayError;
use crate::live::{Events, Running, Watching};
use maitred_core::trace_context::TraceContext;
use maitred_llm::Message;
use maitred_protocol::ids::{ConversationId, MessageId};

/// A checked question, ready to be answered.
pub struct NewAnswer {
    pub user: ChatUser,
    pub trace: TraceContext,
    /// When the request arrived, for the time to the first token.
    pub arrived: Instant,
    /// The conversation it continues; `None`: a new one, titled after the question.
    pub continued: Option<ConversationId>,
    /// What the model sees before the question.
    pub history: Vec<Message>,
    pub question: String,
    pub asking: Asking,
    /// Set for a background task's result, posted as a new answer.
    pub follow_up: Option<FollowUp>,
}

/// A background task's result as an answer: its id, claimed beforehand so it is
/// posted once, and what the model is shown after the question (its call and the
/// result).
pub struct FollowUp {
    pub message: MessageId,
    pub after_question: Vec<Message>,
}

/// An answer that has begun.
pub struct Started {
    pub answer: AnswerRef,
    /// Its events from the first (`meta`) to `done`.
    pub events: Events,
    /// Counts the caller as watching while it lives.
    pub watching: Watching,
}

/// Admits and starts the answer; 429 when the person's limits are full.
pub async fn start(state: &GatewayState, new: NewAnswer) -> Result<Started, GatewayError> {
    let NewAnswer {
        user,
        trace,
        arrived,
        continued,
        history,
        question,
        asking,
        follow_up,
    } = new;
    let (message, after_question) = match follow_up {
        Some(FollowUp {
            message,
            after_question,
        }) => (message, after_question),
        None => (MessageId::new(), Vec::new()),
    };
    let answer = AnswerRef {
        message,
        conversation: continued.clone().unwrap_or_default(),
        owner: user.subject.clone(),
    };
    let refused = |error: &GatewayError| {
        if let GatewayError::RateLimited { reason, .. } = error {
            tracing::info!(subject = ?user.subject, reason = ?reason, "question refused");
        }
        state.gateway_metrics.refused("limited");
    };
    // The asker's stream is one of their open streams: taken first, so a question
    // refused for it starts nothing.
    let slot = state.live.view(&user.subject).await.inspect_err(refused)?;
    state.live.admit(&answer).await.inspect_err(refused)?;
    let local = state.live.local().start(answer.clone());
    let watching = state.live.local().watching(&answer.message, slot);
    let events = state
        .live
        .follow(&answer.message, &answer.owner, 0)
        .await?
        .ok_or_else(|| GatewayError::Internal(anyhow::anyhow!("a new answer has no log")))?;
    // The question is stored beside the model's first request, in order before any
    // part of the answer.
    // Beside it, who asked: a replica that takes the answer over after a crash goes
    // on as them (only a person watching can come back to a taken-over answer).
    let question_stored = state.tasks.spawn({
        let (store, answer, text) = (state.store.clone(), answer.clone(), question.clone());
        let new = continued.is_none();
        let asker = (asking == Asking::Person).then(|| user.clone());
        async move {
            store.save_question(&answer, new, &text).await?;
            match asker {
                Some(user) => store.save_asker(&answer, &user).await,
                None => Ok(()),
            }
        }
    });
    let recorder = Recorder::new(
        answer.clone(),
        Arc::new(Running::new(local, state.live.clone(), 0)),
        Arc::new(state.store.clone()),
        state.gateway_metrics.clone(),
        arrived,
    )
    .after(question_stored);
    recorder
        .meta(state.answerer.models.primary(), None)
        .await
        .map_err(|e| GatewayError::Internal(e.0))?;
    let message_id = answer.message.clone();
    tracing::info!(%message_id, subject = ?user.subject, "question received");
    let (answerer, store) = (state.answerer.clone(), state.store.clone());
    // The answer outlives the request, and its logs keep the request's trace.
    let span = tracing::info_span!(
        "generation",
        %message_id,
        trace_id = tracing::field::Empty,
    );
    // Begun by no request (a background task's result): a trace of its own, in the
    // gateway's service.
    let trace = if tracing::Span::current().is_none() {
        maitred_core::otel::continue_trace(&span, None, Some("gateway"))
    } else {
        trace
    };
    span.record("trace_id", tracing::field::display(trace.trace_id()));
    state.tasks.spawn(
        async move {
            let answer = Answer {
                recorder: &recorder,
                user: &user,
                trace,
                asking,
            };
            answerer
                .run_after(&answer, history, question, after_question)
                .await;
            if asking == Asking::Person
                && let Err(error) = store.forget_asker(&message_id).await
            {
                tracing::warn!(%error, "forgetting who asked a finished answer");
            }
        }
        .instrument(span),
    );
    Ok(Started {
        answer,
        events,
        watching,
    })
}
