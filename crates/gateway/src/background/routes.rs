//! The chat API's background tasks: a conversation's list, Stop, and the person's
//! answer to a task's question. Stop is written to the task's row and sent by the
//! replica that polls it next (at once: the row is made due), so it works from any
//! replica; an answer is sent to the server straight away.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::view::{TaskList, TaskView};
use crate::GatewayState;
use crate::auth::ChatUser;
use crate::chat::{inputs, parse_id};
use crate::error::GatewayError;
use crate::tools::HubError;
use maitred_protocol::events::InputAction;
use maitred_protocol::ids::{ConversationId, TaskId, TaskStatus};

/// `GET /api/v1/resos/conversations/{id}/tasks`
pub(crate) async fn list(
    State(state): State<GatewayState>,
    user: ChatUser,
    Path(id): Path<String>,
) -> Result<Json<TaskList>, GatewayError> {
    let id: ConversationId = parse_id("conversation", &id)?;
    state.store.check_owner(&user.subject, &id).await?;
    Ok(Json(TaskList {
        tasks: state.background.of_conversation(&id).await?,
    }))
}

/// `POST /api/v1/resos/chat/tasks/{id}/cancel`: 202, or 409 when it has ended.
pub(crate) async fn cancel(
    State(state): State<GatewayState>,
    user: ChatUser,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<TaskView>), GatewayError> {
    let id: TaskId = parse_id("task", &id)?;
    let book = &state.background;
    if !book.rows.request_cancel(&user.subject, &id).await? {
        let row = yours(book, &user, &id).await?;
        return Err(GatewayError::Conflict(format!(
            "the task has ended ({})",
            row.status
        )));
    }
    tracing::info!(task = %id, subject = ?user.subject, "the person stopped a background task");
    let row = yours(book, &user, &id).await?;
    Ok((StatusCode::ACCEPTED, Json(row.into())))
}

/// `POST /api/v1/resos/chat/tasks/{id}/input`: the person's answer to what the task
/// asks, sent with `tasks/update`; 409 when it asks nothing (any more).
pub(crate) async fn answer(
    State(state): State<GatewayState>,
    user: ChatUser,
    Path(id): Path<String>,
    crate::extract::GatewayJson(answer): crate::extract::GatewayJson<inputs::Answer>,
) -> Result<(StatusCode, Json<TaskView>), GatewayError> {
    let id: TaskId = parse_id("task", &id)?;
    let book = &state.background;
    let row = yours(book, &user, &id).await?;
    let input = match (row.status, row.input.as_deref()) {
        (TaskStatus::InputRequired, Some(stored)) => super::view::TaskInput::parse(stored),
        _ => None,
    }
    .ok_or_else(|| GatewayError::Conflict("the task asks nothing now".to_owned()))?;
    let result = match (answer.action, answer.content) {
        (InputAction::Accept, Some(content)) => {
            if let Some(schema) = &input.schema {
                let problems = crate::chat::form_problems(schema, &content);
                if !problems.is_empty() {
                    return Err(GatewayError::InvalidInput { problems });
                }
            }
            json!({ "action": "accept", "content": Value::Object(content) })
        }
        (InputAction::Accept, None) if input.schema.is_none() => json!({ "action": "accept" }),
        (InputAction::Accept, None) => {
            return Err(GatewayError::InvalidRequest(
                "\"accept\" of a form needs its \"content\"".to_owned(),
            ));
        }
        (InputAction::Decline, None) => json!({ "action": "decline" }),
        (InputAction::Cancel, None) => json!({ "action": "cancel" }),
        (_, Some(_)) => {
            return Err(GatewayError::InvalidRequest(
                "\"content\" goes only with \"accept\" of a form".to_owned(),
            ));
        }
    };
    match book
        .hub
        .answer_task(&row.server, &row.task_id, &input.key, result)
        .await
    {
        Ok(()) => {}
        Err(error @ HubError::TaskGone { .. }) => {
            return Err(GatewayError::Conflict(error.to_string()));
        }
        Err(error) => {
            return Err(GatewayError::ToolServer(format!(
                "the task's server could not be given the answer: {error}"
            )));
        }
    }
    book.rows.input_answered(&id).await?;
    tracing::info!(task = %id, action = ?answer.action, "the person answered a background task");
    let row = yours(book, &user, &id).await?;
    Ok((StatusCode::ACCEPTED, Json(row.into())))
}

/// The task `id` if it is `user`'s; anyone else's is the same 404 as an unknown one.
async fn yours(
    book: &super::TaskBook,
    user: &ChatUser,
    id: &TaskId,
) -> Result<super::TaskRow, GatewayError> {
    book.rows
        .get(&user.subject, id)
        .await?
        .ok_or_else(|| GatewayError::not_found("task", id.as_str()))
}
