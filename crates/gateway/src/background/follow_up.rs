//! A task's end, posted into its conversation as a new answer: the question is a
//! note from the task (not from the person), and the model is shown its call and,
//! under the call's id, the result, as if the call had just returned. It is offered
//! no tools: it answers from the result. The watcher watches the answer on the
//! person's behalf, so it runs to its end whether or not anybody has the
//! conversation open; whoever has sees it stream in.

use std::time::Instant;

use futures::StreamExt;

use super::{Asker, TaskBook, TaskRow};
use crate::GatewayState;
use crate::answer::Asking;
use crate::chat::start::{Conversation, NewAnswer, Prompt, start};
use maitred_core::trace_context::TraceContext;
use maitred_llm::{Message, ToolCall};
use maitred_protocol::ids::TaskStatus;

/// Starts the follow-up answer of an ended task whose `follow_up_message_id` this
/// replica has claimed. Not started (the person's limits full, the database away):
/// the watcher tries again later with the same id.
pub(super) async fn post(state: &GatewayState, book: &TaskBook, row: TaskRow) {
    let Some(message) = row.follow_up_message_id.clone() else {
        return;
    };
    let Ok(asker) = serde_json::from_str::<Asker>(&row.asker) else {
        tracing::error!(task = %row.id, "a task's asker cannot be read; its result is not posted");
        return;
    };
    let history = match state
        .store
        .history(&row.conversation_id, state.settings.context_budget)
        .await
    {
        Ok(history) => history,
        Err(error) => {
            tracing::warn!(task = %row.id, %error, "reading the conversation for a task's result; tried again later");
            return;
        }
    };
    let call = ToolCall {
        id: row.model_call_id.clone(),
        name: row.exposed.clone(),
        arguments: row.arguments.clone(),
    };
    let new = NewAnswer {
        user: asker.user(row.owner.clone()),
        trace: TraceContext::new_root(),
        arrived: Instant::now(),
        message,
        conversation: Conversation::Continued(row.conversation_id.clone()),
        asking: Asking::Task,
        prompt: Prompt::Question {
            history,
            question: note(&row),
            after: vec![
                Message::Assistant {
                    content: None,
                    tool_calls: vec![call],
                },
                Message::Tool {
                    tool_call_id: row.model_call_id.clone(),
                    content: for_model(&row),
                },
            ],
        },
    };
    match start(state, new).await {
        Ok(started) => {
            if let Err(error) = book.rows.follow_up_started(&row.id).await {
                tracing::warn!(task = %row.id, %error, "recording that a task's result was posted");
            }
            tracing::info!(task = %row.id, message_id = %started.answer.message, "posted a task's result");
            // Watched here to its end, so it is not cancelled for want of viewers.
            let (mut events, watching) = (started.events, started.watching);
            state.tasks.spawn(async move {
                let _watching = watching;
                while events.next().await.is_some() {}
            });
        }
        Err(error) => {
            tracing::warn!(task = %row.id, %error, "posting a task's result; tried again later");
        }
    }
}

/// The question of the follow-up: what happened, in the person's conversation.
fn note(row: &TaskRow) -> String {
    match row.status {
        TaskStatus::Completed => format!("The background task “{}” has finished.", row.title),
        TaskStatus::Cancelled => format!("The background task “{}” was stopped.", row.title),
        _ => format!("The background task “{}” failed.", row.title),
    }
}

/// What the model is told the call returned.
fn for_model(row: &TaskRow) -> String {
    match row.status {
        TaskStatus::Completed => row.result.clone().unwrap_or_default(),
        TaskStatus::Cancelled => {
            "The task was stopped before it finished; there is no result. Tell the user.".to_owned()
        }
        _ => format!(
            "Error: the task failed: {}. Tell the user; do not retry it now.",
            row.error.as_deref().unwrap_or("no reason given")
        ),
    }
}
