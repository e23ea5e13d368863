//! The tool pipeline: every call the model asks for goes through the same steps, in
//! this order, and each refusal is told to the model in words so it can explain to
//! the person what it could not do.
//!
//! resolve (the name is in the catalogue) → permission: budget and role policy →
//! validate (the arguments fit the tool's input schema) → permission: approval →
//! call (the server's circuit breaker and timeout, inside the tool hub; its progress
//! and requests for the person's input served meanwhile, `interact.rs`) → summarise.
//!
//! The gateway's own `search_tools` (`search.rs`) takes none of these steps: it is no
//! MCP call, and finds tools without using any.

mod guidance;
mod interact;
mod permission;
mod resume;
mod search;
pub(super) mod summarise;

use std::sync::Arc;

use serde_json::Value;
use tracing::Instrument;

use super::recorder::{ShownCall, StartedCall};
use super::turn::Reply;
use super::{Answer, Answerer, Stop};
use crate::tools::{
    self, CallContext, CallLink, CallOutcome, Catalogue, InvalidArguments, RegisteredTool,
    StartedTask, idempotency_key,
};
use maitred_llm::ToolCall;
use maitred_protocol::ids::{CallStatus, PartId, ToolCallId};

use super::ports::{Adopted, NewTask, StoreResult, StoredCall};
use crate::grounding::Source;
use permission::Permit;

/// What became of one call, for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Told {
    /// What the model is told of it (its result, or why it did not run).
    Model(String),
    /// It waits for the person's decision, brought by a later request
    /// ([`super::Asking::Later`]): the model is told nothing yet.
    Later,
}

impl From<String> for Told {
    fn from(text: String) -> Self {
        Self::Model(text)
    }
}

impl Answerer {
    /// The turn's calls, concurrently; what the model is told of each, in order.
    /// Calls past the question's budget are refused.
    pub(super) async fn run_calls(
        &self,
        answer: &Answer<'_>,
        catalogue: &Catalogue,
        reply: &Reply,
        budget: &mut usize,
    ) -> Result<Vec<Told>, Stop> {
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
            .collect::<StoreResult<Vec<Told>>>()
            .map_err(Stop::from)
    }

    pub(super) async fn call(
        &self,
        answer: &Answer<'_>,
        catalogue: &Catalogue,
        turn: &PartId,
        call: &ToolCall,
        budget_spent: Option<usize>,
    ) -> StoreResult<Told> {
        if call.name == tools::search::SEARCH_TOOLS {
            return self
                .search_tools(answer, catalogue, call, search::Card::New(turn))
                .await
                .map(Told::from);
        }
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
            if tools::search::defers(catalogue) {
                return Ok(format!(
                    "Error: there is no tool named {}. Find the tool you need with {}.",
                    call.name,
                    tools::search::SEARCH_TOOLS
                )
                .into());
            }
            let available: Vec<&str> = catalogue.tools.iter().map(|t| t.exposed.as_str()).collect();
            return Ok(format!(
                "Error: there is no tool named {}. Available tools: {}.",
                call.name,
                available.join(", ")
            )
            .into());
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
        let sending = Sending {
            tool,
            shown: &shown,
            model_call_id: &call.id,
            started,
            arguments,
            key: key.as_deref(),
            budget_spent,
            again: false,
        };
        self.send(answer, sending).await
    }

    /// A call stored by an earlier run, stored as `stored`: a call of the turn that
    /// was running when the answer's server stopped, or one that waited for the
    /// person's decision while its answer ended. Sent again with its id and
    /// idempotency key (a write the server had made is not made twice), its approval
    /// as it stood (given: still given; waiting: waited for; never asked: asked).
    /// `show`: its viewers have not seen it (a new answer goes on with it), so its
    /// `tool_call` is sent again, and not stored again.
    pub(super) async fn call_again(
        &self,
        answer: &Answer<'_>,
        catalogue: &Catalogue,
        call: &ToolCall,
        stored: &StoredCall,
        show: bool,
    ) -> StoreResult<Told> {
        if call.name == tools::search::SEARCH_TOOLS {
            return self
                .search_tools(answer, catalogue, call, search::Card::Again(stored))
                .await
                .map(Told::from);
        }
        let recorder = answer.recorder;
        let arguments = parse_arguments(&call.arguments);
        let Some(tool) = catalogue.find(&call.name) else {
            let started = recorder.call_again(&stored.id, "", "unknown");
            recorder
                .call_finished(started, CallStatus::Error, "unknown tool")
                .await?;
            return Ok(format!(
                "Error: there is no tool named {} (any more). Nothing was done.",
                call.name
            )
            .into());
        };
        let shown_arguments = arguments
            .clone()
            .unwrap_or_else(|_| Value::String(call.arguments.clone()));
        let shown = ShownCall {
            id: stored.id.clone(),
            server: tool.server.clone(),
            tool: tool.tool.clone(),
            title: summarise::title(&tool.title, &shown_arguments),
            arguments: shown_arguments,
            acting_as: if tool.as_person {
                answer.user.name.clone()
            } else {
                None
            },
        };
        // Calls stored before keys were have none: the key is derived the same way.
        let key = stored.idempotency_key.clone().or_else(|| {
            (!tool.read_only).then(|| idempotency_key(&recorder.answer().message, &stored.id))
        });
        tracing::info!(
            tool = %tool.exposed,
            call_id = %stored.id,
            was = %stored.status,
            write = key.is_some(),
            "sending a call again after a takeover"
        );
        if show {
            recorder.show_call(&shown).await?;
        }
        let started = recorder.call_again(&stored.id, &tool.server, &tool.tool);
        let sending = Sending {
            tool,
            shown: &shown,
            model_call_id: &call.id,
            started,
            arguments,
            key: key.as_deref(),
            budget_spent: None,
            again: true,
        };
        self.send(answer, sending).await
    }

    /// The rest of the pipeline for a call that has started: permission, arguments,
    /// approval, the call itself, its summary.
    async fn send(&self, answer: &Answer<'_>, sending: Sending<'_>) -> StoreResult<Told> {
        let Sending {
            tool,
            shown,
            model_call_id,
            started,
            arguments,
            key,
            budget_spent,
            again,
        } = sending;
        let recorder = answer.recorder;
        if let Err(reason) = permission::allowed(&self.policy, answer, &tool, budget_spent) {
            recorder
                .call_finished(started, CallStatus::Denied, &reason.to_string())
                .await?;
            return Ok(format!(
                "Not allowed: {reason}. Nothing was done. Answer with what you have, and tell the user what you could not do."
            )
            .into());
        }
        let arguments = match arguments.and_then(|a| validate(&tool, a)) {
            Ok(arguments) => arguments,
            Err(problem) => {
                return Ok(refused(answer, started, &tool, &problem.to_string())
                    .await?
                    .into());
            }
        };
        if tool.needs_approval {
            let approvals = self.approvals.as_ref();
            let verdict = if again {
                permission::approved_again(approvals, answer, shown).await?
            } else {
                permission::approved(approvals, answer, shown).await?
            };
            match verdict {
                Permit::Granted => {}
                Permit::Refused(refusal) => {
                    recorder
                        .call_finished(started, CallStatus::Denied, refusal.summary())
                        .await?;
                    return Ok(refusal.tell_model().into());
                }
                // Its row stays `running`: the answer that brings the decision sends it.
                Permit::Deferred => return Ok(Told::Later),
            }
        }
        let (link, events) = CallLink::new();
        let traceparent = answer.trace.header_value();
        let context = CallContext {
            end_user: answer.user.subject.as_str(),
            person: answer.user.credential.as_ref(),
            tool_call_id: shown.id.as_str(),
            idempotency_key: key,
            traceparent: &traceparent,
            link: &link,
        };
        let execute = super::spans::execute_tool(&tool.exposed, model_call_id, &shown.arguments);
        let call = self
            .tools
            .call(&tool, arguments, context)
            .instrument(execute.clone());
        let mut outcome =
            interact::converse(answer, self.inputs.as_ref(), shown, call, events).await?;
        if let CallOutcome::Task(started) = &outcome {
            outcome = self
                .adopt(answer, &tool, shown, model_call_id, started)
                .await?
                .unwrap_or(outcome);
        }
        // A filter the tool refused: the model is shown the filter language again.
        if let CallOutcome::ToolError(message) = &mut outcome
            && let Some(help) = guidance::for_filter(&tool.def, &shown.arguments, message)
        {
            message.push_str(&help);
        }
        if let CallOutcome::Ok { text, structured } = &outcome {
            // Whole, not cut at the output cap: a total past the cap is still stated.
            recorder.remember(Source::new(
                shown.id.clone(),
                &tool.tool,
                text,
                structured.as_ref(),
            ));
        }
        let summarised = summarise::outcome(outcome, self.limits.tool_output_cap);
        super::spans::tool_finished(&execute, &summarised.status, &summarised.text);
        recorder
            .call_finished(started, summarised.status, &summarised.summary)
            .await?;
        Ok(summarised.text.into())
    }
}

/// A call on its way through the pipeline, once it has started.
struct Sending<'a> {
    tool: Arc<RegisteredTool>,
    shown: &'a ShownCall,
    model_call_id: &'a str,
    started: StartedCall,
    arguments: Result<Value, BadArguments>,
    key: Option<&'a str>,
    budget_spent: Option<usize>,
    /// Sent again after a takeover (its approval may have been asked already).
    again: bool,
}

impl Answerer {
    /// A call that became a task is handed to the tasks the cluster follows; one over
    /// the limits is a refusal instead (the hand-over has cancelled it).
    async fn adopt(
        &self,
        answer: &Answer<'_>,
        tool: &RegisteredTool,
        shown: &ShownCall,
        model_call_id: &str,
        started: &StartedTask,
    ) -> StoreResult<Option<CallOutcome>> {
        let adopted = self
            .background
            .adopt(NewTask {
                answer: answer.recorder.answer(),
                user: answer.user,
                call: &shown.id,
                model_call_id,
                server: &tool.server,
                tool: &tool.tool,
                exposed: &tool.exposed,
                title: &shown.title,
                arguments: &shown.arguments,
                started,
            })
            .await?;
        Ok(match adopted {
            Adopted::Followed(_) => None,
            Adopted::OverLimit { limit, whose } => Some(CallOutcome::ToolError(format!(
                "{whose} already has {limit} background tasks running, the most allowed; this one was cancelled. Tell the user to wait for one to finish or stop one."
            ))),
        })
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
        "Error: the arguments for {} do not fit its input schema: {problem}. Correct them and call it again.{}",
        tool.exposed,
        guidance::for_arguments(&tool.def)
    ))
}
