//! The person's decisions on the approval requests a response ended with. A write
//! that needs approval does not wait on this API: its answer asks (an
//! `mcp_approval_request` item, recorded as the chat API records it) and ends after
//! its turn's other calls, leaving the call open in the conversation. A new request
//! brings the decisions (`mcp_approval_response` items); its answer sends the calls
//! (approved: with the idempotency key stored when they were first asked for, so a
//! write is made once; declined: not at all) and the model goes on. Only the asker
//! can decide, each request once, before it expires (`MAITRED_APPROVAL_TIMEOUT`),
//! and only while the conversation has not gone on since.

use super::super::errors::OpenAiError;
use super::book::Found;
use super::errors::invalid_state;
use super::request::Decision;
use crate::GatewayState;
use crate::answer::ports::{AnswerRef, AnswerStore, Resumption, Tail};
use crate::auth::ChatUser;
use crate::chat::resume::pending;
use crate::error::GatewayError;
use maitred_protocol::ids::{CallStatus, MessageId, ToolCallId};

/// What the model is told of a call whose approval nobody gave before the
/// conversation went on.
const NOT_ANSWERED: &str = "The user did not answer the approval request for this call and went on; nothing was changed. Do not try it again unless they ask.";

/// The response whose approval requests `decisions` answer (`previous`, when the
/// request named it), with the decisions recorded, and where its answer left off:
/// the conversation, and the calls that waited.
pub(super) async fn decide(
    state: &GatewayState,
    user: &ChatUser,
    previous: Option<&Found>,
    decisions: &[Decision],
) -> Result<(Found, Resumption), OpenAiError> {
    let owner = &user.subject;
    let mut asker: Option<MessageId> = None;
    for decision in decisions {
        let id = super::ids::approval_item(&decision.call);
        let Some(asked) = state.approvals.deferred(&decision.call, owner).await? else {
            return Err(OpenAiError::invalid(
                "input",
                format!("approval_request_id {id:?} names no approval request of yours"),
            ));
        };
        if asker.as_ref().is_some_and(|m| m != &asked.message) {
            return Err(OpenAiError::invalid(
                "input",
                "the approval requests answered together must be one response's",
            ));
        }
        if asked.status != "pending" || asked.expired {
            return Err(invalid_state(
                "input",
                format!("approval request {id} was answered already, or has expired"),
            ));
        }
        asker = Some(asked.message);
    }
    let Some(asker) = asker else {
        return Err(OpenAiError::invalid("input", "no approval responses"));
    };
    let found = match previous {
        Some(previous) if previous.head.message != asker => {
            return Err(invalid_state(
                "previous_response_id",
                "the approval requests answered are not this response's",
            ));
        }
        Some(previous) => previous.clone(),
        None => state
            .responses
            .find(&asker, owner)
            .await?
            .ok_or_else(|| {
                OpenAiError::invalid(
                    "input",
                    "these approval requests were not asked on this API: answer them where they were asked",
                )
            })?,
    };
    let (messages, open) = state
        .store
        .open_history_before(
            &found.head.conversation,
            i64::MAX,
            state.settings.context_budget,
        )
        .await?;
    let Some(open) = open.filter(|open| open.message.as_ref() == Some(&asker)) else {
        for decision in decisions {
            state.approvals.withdraw(&decision.call).await?;
        }
        return Err(invalid_state(
            "input",
            "the conversation has gone on since these approval requests were asked: they can no longer be answered",
        ));
    };
    let mut decided: Vec<&ToolCallId> = Vec::new();
    for decision in decisions {
        if !state
            .approvals
            .decide_deferred(&decision.call, owner, decision.approve)
            .await?
        {
            undo(state, user, &decided).await;
            return Err(invalid_state(
                "input",
                "an approval request was answered already, or has expired",
            ));
        }
        decided.push(&decision.call);
    }
    let stored = state.store.turn_calls(&open.turn).await?;
    // What else waited in that turn is not made: nobody said yes to it.
    for row in &stored {
        if !decided.contains(&&row.id) {
            state.approvals.withdraw(&row.id).await?;
        }
    }
    let resumption = Resumption {
        messages,
        tail: Tail::Calls {
            pending: pending(&open.calls, &stored),
            turn: open.turn,
        },
    };
    Ok((found, resumption))
}

/// Takes the decisions back: the answer that was to act on them did not start.
pub(super) async fn undo(state: &GatewayState, user: &ChatUser, calls: &[&ToolCallId]) {
    for call in calls {
        if let Err(error) = state.approvals.undecide(call, &user.subject).await {
            tracing::warn!(%error, call_id = %call, "taking back a decision on an approval");
        }
    }
}

/// A new question after a response that ended waiting for decisions: the calls that
/// waited are not made; each gets its result (the model is told why), and its
/// approval request can no longer be answered.
pub(super) async fn give_up(state: &GatewayState, found: &Found) -> Result<(), OpenAiError> {
    let (_, open) = state
        .store
        .open_history_before(
            &found.head.conversation,
            i64::MAX,
            state.settings.context_budget,
        )
        .await?;
    let Some(open) = open.filter(|open| open.message.as_ref() == Some(&found.head.message)) else {
        return Ok(());
    };
    let rows = state.store.turn_calls(&open.turn).await?;
    let answer = AnswerRef {
        message: found.head.message.clone(),
        conversation: found.head.conversation.clone(),
        owner: found.owner.clone(),
    };
    let stored = |error: crate::answer::ports::StoreError| GatewayError::Internal(error.0);
    for call in &open.calls {
        // Only calls that wait for a decision: one the answer left unfinished (it was
        // cancelled) is closed as such in the history.
        let Some(row) = rows.iter().find(|row| row.model_call_id == call.id) else {
            continue;
        };
        let waiting = state
            .approvals
            .deferred(&row.id, &found.owner)
            .await?
            .is_some_and(|asked| asked.status == "pending");
        if !waiting {
            continue;
        }
        state.approvals.withdraw(&row.id).await?;
        state
            .store
            .call_finished(&row.id, CallStatus::Denied, 0, "not approved")
            .await
            .map_err(stored)?;
        state
            .store
            .save_tool_result(&answer, &call.id, NOT_ANSWERED)
            .await
            .map_err(stored)?;
    }
    Ok(())
}
