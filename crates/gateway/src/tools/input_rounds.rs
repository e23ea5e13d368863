//! How a 2026-07-28 call asks the person for input (SEP-2322): its result says
//! `input_required`, the hub asks the person and sends the call again with the
//! answers and the server's state. (A 2025-11-25 server asks by a request of its own
//! instead, which `client_handler.rs` routes to the call.)

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, CreateTaskResult, InputRequest, InputRequests,
    InputResponses, ServerResult,
};

use super::catalogue::RegisteredTool;
use super::connection::Line;
use super::error::HubError;
use super::hub::ToolHub;
use super::interaction::CallLink;

/// Most `input_required` rounds of one call: a few questions, not a dialogue.
pub(super) const MAX_INPUT_ROUNDS: usize = 4;

/// What a call's requests came to.
pub(super) enum Answered {
    Result(CallToolResult),
    /// The server runs the call as a task (SEP-2663): its result comes later.
    Task(CreateTaskResult),
}

impl ToolHub {
    /// Sends the call until the server has a result: the first request, then one
    /// more after each round of input.
    pub(super) async fn until_answered(
        &self,
        line: Line<'_>,
        tool: &RegisteredTool,
        link: &CallLink,
        mut params: CallToolRequestParams,
    ) -> Result<Answered, HubError> {
        for round in 0..=MAX_INPUT_ROUNDS {
            let round = u32::try_from(round).unwrap_or(u32::MAX);
            let answer = self.request(line, params.clone(), link, round).await?;
            match answer {
                ServerResult::CallToolResult(result) => return Ok(Answered::Result(result)),
                ServerResult::InputRequiredResult(required) => {
                    let asked = required
                        .input_requests
                        .as_ref()
                        .is_some_and(|r| !r.is_empty());
                    let responses = fulfil(link, required.input_requests).await?;
                    if !asked {
                        // Only state to echo: the server is not ready; do not hammer it.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    params.input_responses = (!responses.is_empty()).then_some(responses);
                    params.request_state = required.request_state;
                }
                ServerResult::CreateTaskResult(task) => return Ok(Answered::Task(task)),
                _ => {
                    return Err(HubError::NotAResult {
                        server: tool.server.clone(),
                    });
                }
            }
        }
        Err(HubError::TooManyRounds {
            tool: tool.tool.clone(),
        })
    }
}

/// Answers a round's requests, one at a time, so the person sees one question after
/// the other. Sampling and roots are not offered.
pub(super) async fn fulfil(
    link: &CallLink,
    requests: Option<InputRequests>,
) -> Result<InputResponses, HubError> {
    let mut responses = InputResponses::new();
    for (key, request) in requests.unwrap_or_default() {
        let response = match request {
            InputRequest::Elicitation(request) => {
                serde_json::to_value(link.ask(request.params).await.to_result())
            }
            InputRequest::CreateMessage(_) => return Err(HubError::SamplingAsked),
            _ => return Err(HubError::InputNotOffered),
        };
        responses.insert(key, response.map_err(HubError::Answer)?);
    }
    Ok(responses)
}
