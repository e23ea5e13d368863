//! The tool pipeline: every call the model asks for goes through the same steps, in
//! this order, and each refusal is told to the model in words so it can explain to
//! the person what it could not do.
//!
//! resolve (the name is in the catalogue) → permission: budget and role policy →
//! validate (the arguments fit the tool's input schema) → permission: approval →
//! call (the server's circuit breaker and timeout, inside the tool hub; its progress
//! and requests for the person's input served meanwhile, `interact.rs`) → summarise.

mod interact;
mod permission;
pub(super) mod summarise;

use serde_json::Value;

use super::recorder::{ShownCall, StartedCall};
use super::turn::Reply;
use super::{Answer, Answerer, Stop};
use crate::tools::{
    CallContext, CallLink, Catalogue, InvalidArguments, RegisteredTool, idempotency_key,
};
use maitred_llm::ToolCall;
use maitred_protocol::ids::{CallStatus, PartId, ToolCallId};

use super::ports::StoreResult;

impl Answerer {
    /// The turn's calls, concurrently; what the model is told of each, in order.
    /// Calls past the question's budget are refused.
    pub(super) async fn run_calls(
        &self,
        answer: &Answer<'_>,
        catalogue: &Catalogue,
        reply: &Reply,
        budget: &mut usize,
    ) -> Result<Vec<String>, Stop> {
        let allowed = reply.calls.len().min(*budget);
        *budget -= allowed;
        let cancel = answer.recorder.cancelled();
        let calls = reply.calls.iter().enumerate().map(|(i, call)| {
            let budget_spent = (i >= allowed).then_some(self.limits.tool_calls_per_question);
            self.call(answer, catalogue, &reply.part, call, budget_spent)
        });
        let results = tokio::select! {
            () = cancel.cancelled() => return Err(Stop::Cancelled),
            results = futures::future::join_all(calls) => results,
        };
        results
            .into_iter()
            .collect::<StoreResult<Vec<String>>>()
            .map_err(Stop::from)
    }

    async fn call(
        &self,
        answer: &Answer<'_>,
        catalogue: &Catalogue,
        turn: &PartId,
        call: &ToolCall,
        budget_spent: Option<usize>,
    ) -> StoreResult<String> {
        let recorder = answer.recorder;
        let arguments = parse_arguments(&call.arguments);
        let mut shown = ShownCall {
            id: ToolCallId::new(),
            server: String::new(),
            tool: call.name.clone(),
            title: format!("Unknown tool {}", call.name),
            arguments: arguments
                .clone()
                .unwrap_or_else(|_| Value::String(call.arguments.clone())),
            acting_as: None,
        };
        let Some(tool) = catalogue.find(&call.name) else {
            let started = recorder
                .call_started(turn, &call.id, &shown, false, None)
                .await?;
            recorder
                .call_finished(started, CallStatus::Error, "unknown tool")
                .await?;
            let available: Vec<&str> = catalogue.tools.iter().map(|t| t.exposed.as_str()).collect();
            return Ok(format!(
                "Error: there is no tool named {}. Available tools: {}.",
                call.name,
                available.join(", ")
            ));
        };
        shown.server.clone_from(&tool.server);
        shown.tool.clone_from(&tool.tool);
        shown.title = summarise::title(&tool.title, &shown.arguments);
        if tool.as_person {
            shown.acting_as.clone_from(&answer.user.name);
        }
        // A write gets its idempotency key now, stored with the call before it is
        // sent; a read needs none.
        let key = (!tool.read_only).then(|| idempotency_key(&recorder.answer().message, &shown.id));
        let started = recorder
            .call_started(turn, &call.id, &shown, true, key.as_deref())
            .await?;

        if let Err(reason) = permission::allowed(&self.policy, answer, &tool, budget_spent) {
            recorder
                .call_finished(started, CallStatus::Denied, &reason.to_string())
                .await?;
            return Ok(format!(
                "Not allowed: {reason}. Nothing was done. Answer with what you have, and tell the user what you could not do."
            ));
        }
        let arguments = match arguments.and_then(|a| validate(&tool, a)) {
            Ok(arguments) => arguments,
            Err(problem) => return refused(answer, started, &tool, &problem.to_string()).await,
        };
        if tool.needs_approval {
            let verdict = permission::approved(self.approvals.as_ref(), answer, &shown).await?;
            if let Err(refusal) = verdict {
                recorder
                    .call_finished(started, CallStatus::Denied, refusal.summary())
                    .await?;
                return Ok(refusal.tell_model());
            }
        }
        let (link, events) = CallLink::new();
        let traceparent = answer.trace.header_value();
        let context = CallContext {
            end_user: answer.user.subject.as_str(),
            person: answer.user.credential.as_ref(),
            tool_call_id: shown.id.as_str(),
            idempotency_key: key.as_deref(),
            traceparent: &traceparent,
            link: &link,
        };
        let call = self.tools.call(&tool, arguments, context);
        let outcome =
            interact::converse(answer, self.inputs.as_ref(), &shown, call, events).await?;
        let summarised = summarise::outcome(outcome, self.limits.tool_output_cap);
        recorder
            .call_finished(started, summarised.status, &summarised.summary)
            .await?;
        Ok(summarised.text)
    }
}

/// Arguments the model wrote that cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
enum BadArguments {
    #[error("the arguments are not valid JSON ({0})")]
    Json(String),
    #[error("the arguments must be a JSON object")]
    NotAnObject,
    #[error(transparent)]
    Schema(#[from] InvalidArguments),
}

/// The model writes arguments as JSON text; none at all means no arguments.
fn parse_arguments(text: &str) -> Result<Value, BadArguments> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str(text).map_err(|e| BadArguments::Json(e.to_string()))
}

fn validate(
    tool: &RegisteredTool,
    arguments: Value,
) -> Result<rmcp::model::JsonObject, BadArguments> {
    tool.validate(&arguments)?;
    match arguments {
        Value::Object(arguments) => Ok(arguments),
        _ => Err(BadArguments::NotAnObject),
    }
}

/// A call refused before it ran (bad arguments): the model gets the reason.
async fn refused(
    answer: &Answer<'_>,
    started: StartedCall,
    tool: &RegisteredTool,
    problem: &str,
) -> StoreResult<String> {
    let summary = format!("invalid arguments: {}", summarise::shorten(problem, 120));
    answer
        .recorder
        .call_finished(started, CallStatus::Error, &summary)
        .await?;
    Ok(format!(
        "Error: the arguments for {} do not fit its input schema: {problem}. Correct them and call it again.",
        tool.exposed
    ))
}
