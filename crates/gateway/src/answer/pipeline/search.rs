//! The gateway's own `search_tools` (`tools::search`): run in the gateway, never
//! sent to an MCP server and never waiting for approval (it finds tools, it uses
//! none). The person sees it as a card of its own, without a server: what was
//! searched for and what was found.

use serde_json::Value;

use super::super::recorder::ShownCall;
use super::super::{Answer, Answerer};
use super::summarise;
use crate::tools::{Catalogue, search};
use maitred_llm::ToolCall;
use maitred_protocol::ids::{CallStatus, PartId, ToolCallId};

use super::super::ports::{StoreResult, StoredCall};

/// Where a search's card comes from.
pub(super) enum Card<'a> {
    /// A call of the model's turn `0`.
    New(&'a PartId),
    /// Sent again after a takeover: its card was shown before.
    Again(&'a StoredCall),
}

impl Answerer {
    /// Runs a search the model asked for; what the model is told of it.
    pub(super) async fn search_tools(
        &self,
        answer: &Answer<'_>,
        catalogue: &Catalogue,
        call: &ToolCall,
        card: Card<'_>,
    ) -> StoreResult<String> {
        let recorder = answer.recorder;
        let arguments = super::parse_arguments(&call.arguments)
            .unwrap_or_else(|_| Value::String(call.arguments.clone()));
        let policy = self.policy.for_roles(&answer.user.roles);
        let found = search::search(catalogue, &search::query_of(&arguments), |t| {
            policy.allows(t)
        });
        let started = match card {
            Card::New(turn) => {
                let shown = ShownCall {
                    id: ToolCallId::new(),
                    server: String::new(),
                    tool: search::SEARCH_TOOLS.to_owned(),
                    title: summarise::title("Search tools", &arguments),
                    arguments,
                    acting_as: None,
                };
                recorder
                    .call_started(turn, &call.id, &shown, true, None)
                    .await?
            }
            Card::Again(stored) => recorder.call_again(&stored.id, "", search::SEARCH_TOOLS),
        };
        let status = if found.query.is_empty() {
            CallStatus::Error
        } else {
            CallStatus::Ok
        };
        tracing::info!(query = %found.query, found = found.found.len(), "searched the tools");
        recorder
            .call_finished(started, status, &found.summary())
            .await?;
        Ok(found.for_model())
    }
}
