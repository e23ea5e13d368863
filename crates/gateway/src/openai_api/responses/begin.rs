//! How a request becomes a response: its record first (so it can be read, and its
//! events kept, from the moment it exists), then its answer, started as every answer
//! is (`chat::start`): a question in a new conversation or, with
//! `previous_response_id`, in that response's; or, with `mcp_approval_response`s,
//! the calls that response left waiting. The answer asks approvals for later
//! (`Asking::Later`); a background one runs whether or not anybody watches.

use std::time::Instant;

use super::super::errors::OpenAiError;
use super::super::request::within;
use super::book::{Found, NewResponse};
use super::decisions;
use super::errors::{invalid_state, previous_not_found};
use super::ids;
use super::projection::{Head, Projection};
use super::request::{Asked, Checked};
use crate::GatewayState;
use crate::answer::Asking;
use crate::auth::ChatUser;
use crate::chat::start::{Conversation, NewAnswer, Prompt, Started, start};
use maitred_core::trace_context::TraceContext;
use maitred_llm::Message;
use maitred_protocol::ids::{MessageId, ToolCallId};

/// A response that has begun: its answer, and the projection of its events.
pub(super) struct Begun {
    pub(super) started: Started,
    pub(super) projection: Projection,
}

/// The request's caller and context.
pub(super) struct Caller {
    pub(super) user: ChatUser,
    pub(super) trace: TraceContext,
    pub(super) arrived: Instant,
}

pub(super) async fn begin(
    state: &GatewayState,
    caller: Caller,
    checked: Checked,
) -> Result<Begun, OpenAiError> {
    let Caller {
        user,
        trace,
        arrived,
    } = caller;
    let previous = match &checked.previous {
        Some(id) => Some(previous(state, &user, id).await?),
        None => None,
    };
    let budget = state.settings.context_budget;
    let instructions = checked
        .instructions
        .clone()
        .map(|content| Message::System { content });
    let (conversation, prompt, asked_by, decided) = match checked.asked {
        Asked::Question { history, question } => {
            let (conversation, mut messages) = match &previous {
                Some(found) => {
                    decisions::give_up(state, found).await?;
                    let id = found.head.conversation.clone();
                    let stored = state.store.history(&id, budget).await?;
                    (Conversation::Continued(id), stored)
                }
                None => (Conversation::new_or(None), Vec::new()),
            };
            messages.extend(within(history, budget));
            messages.splice(0..0, instructions);
            let asked_by = previous.as_ref().map(|found| found.head.message.clone());
            (
                conversation,
                Prompt::question(messages, question),
                asked_by,
                Vec::new(),
            )
        }
        Asked::Decisions(decisions) => {
            let (found, mut resumption) =
                decisions::decide(state, &user, previous.as_ref(), &decisions).await?;
            resumption.messages.splice(0..0, instructions);
            let decided: Vec<ToolCallId> = decisions.into_iter().map(|d| d.call).collect();
            (
                Conversation::Continued(found.head.conversation.clone()),
                Prompt::Decided(resumption),
                Some(found.head.message),
                decided,
            )
        }
    };
    let message = MessageId::new();
    let head = Head {
        message: message.clone(),
        conversation: match &conversation {
            Conversation::New(id) | Conversation::Continued(id) => id.clone(),
        },
        created_at: chrono::Utc::now().timestamp(),
        model: checked.model,
        instructions: checked.instructions,
        metadata: checked.metadata,
        previous: asked_by,
        background: checked.background,
        store: checked.store,
        decided,
    };
    state
        .responses
        .create(NewResponse {
            head: &head,
            owner: &user.subject,
        })
        .await?;
    let new = NewAnswer {
        user: user.clone(),
        trace,
        arrived,
        message: message.clone(),
        conversation,
        asking: Asking::Later,
        prompt,
    };
    let started = match start(state, new).await {
        Ok(started) => started,
        Err(error) => {
            // Nothing started: the decisions wait to be made again, and the response
            // never was.
            let decided: Vec<&ToolCallId> = head.decided.iter().collect();
            decisions::undo(state, &user, &decided).await;
            if let Err(error) = state.responses.delete(&message, &user.subject).await {
                tracing::warn!(%error, "forgetting a response that did not start");
            }
            return Err(error.into());
        }
    };
    if head.background
        && let Some(local) = state.live.local().get(&message)
    {
        local.unattended();
    }
    Ok(Begun {
        started,
        projection: Projection::new(head),
    })
}

/// The response `previous_response_id` names: the caller's, stored, and ended.
async fn previous(state: &GatewayState, user: &ChatUser, id: &str) -> Result<Found, OpenAiError> {
    let found = match ids::parse_response(id) {
        Some(message) => state.responses.find(&message, &user.subject).await?,
        None => None,
    };
    let found = found.ok_or_else(|| previous_not_found(id))?;
    let ended = state
        .responses
        .events(&found)
        .await?
        .is_none_or(|events| events.last().is_some_and(|e| e.is_done()));
    if !ended {
        return Err(invalid_state(
            "previous_response_id",
            format!("response {id} is still in progress: wait for it, or cancel it"),
        ));
    }
    Ok(found)
}
