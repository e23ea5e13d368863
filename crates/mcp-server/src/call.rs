//! One `tools/call` as a tool's entry sees it, and the ways it can end: what every
//! tool, and every step a tool declares, is given and answers with.

use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::backend::{BackendClient, BackendError};
use super::metrics::Outcome;
use super::sealed_state::StateSeal;
use maitred_core::auth::Principal;

/// A call whose scope is checked: the request, who made it, and the backend as
/// this call reaches it (its trace, and the caller's person when there is one).
pub(super) struct Call<'a> {
    pub request: &'a CallToolRequestParams,
    pub ctx: &'a RequestContext<RoleServer>,
    pub caller: Option<&'a Principal>,
    pub backend: &'a BackendClient,
    /// Seals what a 2026-07-28 round trip must carry to the call's retry.
    pub seal: &'a StateSeal,
}

/// How a call ended (for the logs and metrics) and what it answers.
pub(super) type Answer = (Outcome, Result<CallToolResponse, ErrorData>);

/// Why a call was not carried out.
pub(super) enum Refusal {
    /// JSON-RPC -32602: the arguments do not fit the tool's input schema.
    InvalidParams(String),
    /// A tool error (`isError: true`) whose text tells the model what to do.
    Failed(String),
    /// A tool error because the backend cannot answer now (down, slow, failing).
    Unavailable(String),
}

impl Refusal {
    pub(super) fn answer(self) -> Answer {
        match self {
            Refusal::InvalidParams(message) => (
                Outcome::Invalid,
                Err(ErrorData::invalid_params(message, None)),
            ),
            Refusal::Failed(message) => tool_error(Outcome::ToolError, message),
            Refusal::Unavailable(message) => tool_error(Outcome::Unavailable, message),
        }
    }
}

/// An `isError` result whose text says what happened and what to do.
pub(super) fn tool_error(outcome: Outcome, text: String) -> Answer {
    (
        outcome,
        Ok(CallToolResult::error(vec![ContentBlock::text(text)]).into()),
    )
}

impl From<BackendError> for Refusal {
    fn from(error: BackendError) -> Self {
        let advice = advice(&error);
        match error {
            BackendError::Unavailable(_) => Refusal::Unavailable(advice),
            BackendError::Rejected { .. } | BackendError::Unreadable(_) => Refusal::Failed(advice),
        }
    }
}

/// What a model should make of a backend failure.
fn advice(error: &BackendError) -> String {
    match error {
        BackendError::Unavailable(detail) => format!(
            "The reservation system is unavailable right now ({detail}). Tell the user it cannot be \
reached at the moment and to try again shortly; do not retry at once."
        ),
        BackendError::Unreadable(_) => {
            "the reservation system sent an answer this server cannot read; it has been logged"
                .to_owned()
        }
        BackendError::Rejected {
            status,
            message,
            details,
            ..
        } => {
            let nearest = details
                .as_ref()
                .and_then(|d| d.get("nearestTimes"))
                .and_then(serde_json::Value::as_array)
                .map(|times| {
                    times
                        .iter()
                        .filter_map(serde_json::Value::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .filter(|t| !t.is_empty());
            match (status, nearest) {
                (409 | 422, Some(times)) => format!(
                    "{message}. The nearest free times are {times}: offer them to the guest and book \
the one they choose."
                ),
                (409 | 422, None) => format!(
                    "{message}. Use getAvailableDates and getAvailableTimes to find a time that is free."
                ),
                (404, _) => format!(
                    "{message}. Check the id: list the records with the matching get… tool first."
                ),
                (401 | 403, _) => format!(
                    "{message}. The reservation system refused this server's credentials; tell the user."
                ),
                _ => format!("{message}. Correct the arguments and call the tool again."),
            }
        }
    }
}
