//! How a question starts an answer, whichever API it came through: admitted within
//! the person's limits (its stream counted among their open streams, its answer
//! among their running answers), its question stored, its `meta` recorded, and the
//! answer loop running detached from the request. The caller gets the answer's events
//! to send on, and a guard that counts it as watching (and holds its stream's slot).

use std::sync::Arc;
use std::time::Instant;

use tracing::Instrument;

use crate::GatewayState;
use crate::answer::ports::{AnswerRef, Resumption};
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
    /// Its id: the caller's choice, so a caller can record it beforehand (a
    /// background task's result, a response).
    pub message: MessageId,
    pub conversation: Conversation,
    pub asking: Asking,
    pub prompt: Prompt,
}

/// The conversation an answer goes into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conversation {
    /// A new one, under this id, titled after the question.
    New(ConversationId),
    Continued(ConversationId),
}

impl Conversation {
    /// A new conversation, or `continued`.
    pub fn new_or(continued: Option<ConversationId>) -> Self {
        continued.map_or_else(|| Self::New(ConversationId::new()), Self::Continued)
    }
}

/// What the answer answers.
pub enum Prompt {
    /// A question, stored as the person's message: the model sees `history`, the
    /// question, then `after` (a background task's call and result, when the answer
    /// posts one).
    Question {
        history: Vec<Message>,
        question: String,
        after: Vec<Message>,
    },
    /// Nothing new is asked: the calls an earlier answer left waiting for the
    /// person's decisions are sent (see `Answerer::decided`).
    Decided(Resumption),
}

impl Prompt {
    /// A question after `history`.
    pub fn question(history: Vec<Message>, question: String) -> Self {
        Self::Question {
            history,
            question,
            after: Vec::new(),
        }
    }
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
        message,
        conversation,
        asking,
        prompt,
    } = new;
    let (conversation, new) = match conversation {
        Conversation::New(id) => (id, true),
        Conversation::Continued(id) => (id, false),
    };
    let answer = AnswerRef {
        message,
        conversation,
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
    // on as them (only an answer somebody comes back to is taken over).
    let question_stored = state.tasks.spawn({
        let store = state.store.clone();
        let answer = answer.clone();
        let question = match &prompt {
            Prompt::Question { question, .. } => Some(question.clone()),
            Prompt::Decided(_) => None,
        };
        let asker = asking.comes_back().then(|| user.clone());
        async move {
            if let Some(text) = question {
                store.save_question(&answer, new, &text).await?;
            }
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
    let (answerer, store, hooks) = (
        state.answerer.clone(),
        state.store.clone(),
        state.hooks.clone(),
    );
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
    let ended = answer.clone();
    state.tasks.spawn(
        async move {
            let run = Answer {
                recorder: &recorder,
                user: &user,
                trace,
                asking,
            };
            match prompt {
                Prompt::Question {
                    history,
                    question,
                    after,
                } => answerer.run_after(&run, history, question, after).await,
                Prompt::Decided(resumption) => answerer.decided(&run, resumption).await,
            }
            if asking.comes_back()
                && let Err(error) = store.forget_asker(&message_id).await
            {
                tracing::warn!(%error, "forgetting who asked a finished answer");
            }
            hooks.ended(&ended).await;
        }
        .instrument(span),
    );
    Ok(Started {
        answer,
        events,
        watching,
    })
}
