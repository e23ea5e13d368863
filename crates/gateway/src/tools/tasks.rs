//! Following a call its server runs as a task (the Tasks extension, SEP-2663): where
//! it stands (`tasks/get`), the person's answer to its request for input
//! (`tasks/update`), and Stop (`tasks/cancel`). Each is one request within the
//! server's timeout, on the server's connection as the gateway, like the call was.

use std::future::Future;

use rmcp::ServiceError;
use rmcp::model::{
    CallToolResult, CancelTaskParams, ElicitRequestParams, ErrorCode, GetTaskParams, InputRequest,
    InputResponses, TaskPayload, UpdateTaskParams,
};
use serde_json::Value;

use super::call::{CallOutcome, completed};
use super::connection::Server;
use super::error::HubError;
use super::hub::ToolHub;

/// Where a task stands, as its server says.
#[derive(Debug, Clone)]
pub enum TaskState {
    Working {
        status_message: Option<String>,
        poll_interval_ms: Option<u64>,
    },
    /// It waits for the person: `request` (an elicitation's params) under `key`.
    InputRequired {
        status_message: Option<String>,
        poll_interval_ms: Option<u64>,
        key: String,
        request: ElicitRequestParams,
    },
    /// Its result, as a call's result is for the model.
    Completed(CallOutcome),
    Failed(String),
    Cancelled,
}

impl ToolHub {
    /// `tasks/get`.
    pub async fn task_state(&self, server: &str, task_id: &str) -> Result<TaskState, HubError> {
        let server = self.server(server)?;
        let connection = server.connection().await?;
        let got = self
            .task_request(
                server,
                task_id,
                connection.peer().get_task(GetTaskParams::new(task_id)),
            )
            .await?;
        let status_message = got.task.task.status_message.clone();
        let poll_interval_ms = got.task.task.poll_interval_ms;
        Ok(match got.task.payload {
            TaskPayload::Working => TaskState::Working {
                status_message,
                poll_interval_ms,
            },
            TaskPayload::InputRequired { input_requests } => {
                // One question at a time, as for a call: the first elicitation.
                let asked = input_requests
                    .into_iter()
                    .find_map(|(key, request)| match request {
                        InputRequest::Elicitation(request) => Some((key, request.params)),
                        _ => None,
                    });
                match asked {
                    Some((key, request)) => TaskState::InputRequired {
                        status_message,
                        poll_interval_ms,
                        key,
                        request,
                    },
                    // Sampling or roots: nothing the person can answer; it waits.
                    None => TaskState::Working {
                        status_message,
                        poll_interval_ms,
                    },
                }
            }
            TaskPayload::Completed { result } => {
                match serde_json::from_value::<CallToolResult>(Value::Object(result)) {
                    Ok(result) => TaskState::Completed(completed(result)),
                    Err(error) => TaskState::Failed(format!(
                        "the task's result is not a tool's result: {error}"
                    )),
                }
            }
            TaskPayload::Failed { error } => TaskState::Failed(
                error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("the task failed")
                    .to_owned(),
            ),
            TaskPayload::Cancelled => TaskState::Cancelled,
            _ => TaskState::Working {
                status_message,
                poll_interval_ms,
            },
        })
    }

    /// `tasks/cancel`: the server is asked to stop; it says later whether it did.
    pub async fn cancel_task(&self, server: &str, task_id: &str) -> Result<(), HubError> {
        let server = self.server(server)?;
        let connection = server.connection().await?;
        self.task_request(
            server,
            task_id,
            connection
                .peer()
                .cancel_task(CancelTaskParams::new(task_id)),
        )
        .await
    }

    /// Whether a page a task asks the person to open may be shown (the rule of
    /// [`super::interaction::url_shown`], as for a call).
    pub fn shows_url(&self, url: &str) -> bool {
        super::interaction::url_shown(url, self.loopback_http)
    }

    /// `tasks/update`: the person's answer (an elicitation's result) under `key`.
    pub async fn answer_task(
        &self,
        server: &str,
        task_id: &str,
        key: &str,
        answer: Value,
    ) -> Result<(), HubError> {
        let server = self.server(server)?;
        let connection = server.connection().await?;
        let mut responses = InputResponses::new();
        responses.insert(key.to_owned(), answer);
        self.task_request(
            server,
            task_id,
            connection
                .peer()
                .update_task(UpdateTaskParams::new(task_id, responses)),
        )
        .await
    }

    fn server(&self, name: &str) -> Result<&Server, HubError> {
        self.servers
            .iter()
            .find(|s| s.config.name == name)
            .map(AsRef::as_ref)
            .ok_or_else(|| HubError::NotConfigured {
                server: name.to_owned(),
            })
    }

    async fn task_request<T>(
        &self,
        server: &Server,
        task_id: &str,
        request: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, HubError> {
        let timeout = server.config.timeout;
        let name = &server.config.name;
        match tokio::time::timeout(timeout, request).await {
            Err(_) => Err(HubError::CallTimeout {
                server: name.clone(),
                timeout,
            }),
            Ok(Ok(answer)) => Ok(answer),
            // The extension's answer for an id the server does not know.
            Ok(Err(ServiceError::McpError(error))) if error.code == ErrorCode::INVALID_PARAMS => {
                Err(HubError::TaskGone {
                    server: name.clone(),
                    detail: format!("{task_id}: {}", error.message),
                })
            }
            Ok(Err(ServiceError::McpError(error))) => Err(HubError::Refused(error)),
            Ok(Err(error)) => {
                server.forget_connection().await;
                Err(HubError::Transport {
                    server: name.clone(),
                    error,
                })
            }
        }
    }
}
