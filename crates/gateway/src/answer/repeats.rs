//! A small model that has a tool's result may call the same tool with the same
//! arguments again, turn after turn, until the turn budget is spent: Qwen2.5 0.5B
//! under llama-cpp-python's `chatml-function-calling` does so for most questions,
//! since that grammar lets a turn begin only with a call or a message. For a model
//! marked small, a turn whose calls all repeat calls this answer already made is not
//! run: each call is told that its result is above, and the next turn is asked as a
//! plain question with the results written into it, no tools offered and no calls in
//! sight to copy, so the model answers from what it has. Should it still write a
//! call, that is not shown: the person is told the model wrote no answer.
//!
//! Larger models keep every call: a repeat can be meant (a status polled until a job
//! is done), and they stop by themselves.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::recorder::ShownCall;
use super::turn::Reply;
use super::{Answer, Answerer, Stop};
use crate::tools::Catalogue;
use maitred_llm::{Message, SEARCH_TOOLS, ToolCall, results};
use maitred_protocol::ids::{CallStatus, ToolCallId};

/// What the model is told of a call it already made.
const REPEATED: &str = "You already made this exact call in this answer; its result is above. \
It was not run again. Do not call any tool now: answer the user's question from the results you have.";

/// Turns with tool calls a small model is given before it is asked to answer from
/// what the tools returned: the 0.5 B models that need this do not plan longer chains,
/// and left alone they wander from tool to tool until the turn budget is spent.
pub(super) const SMALL_MODEL_TOOL_TURNS: u32 = 3;

/// Estimated tokens all the results of an answer-from-results prompt may take: the
/// model reads them, with the system prompt, before its first word.
const ANSWER_RESULTS_BUDGET: usize = 400;

/// What the person is told when the model, asked to answer from the results, called
/// a tool again.
pub(super) const NO_ANSWER: &str = "_The model did not write an answer from these results: \
what the tools returned is shown on the calls above._";

/// The conversation for a model that must answer now: as it was up to the question,
/// and the question with this answer's tool results written after it (each fitted to
/// a small model's budget), so nothing in it is a call the model could copy.
pub(super) fn answer_from_results(messages: &[Message]) -> Vec<Message> {
    let Some(asked) = messages
        .iter()
        .rposition(|m| matches!(m, Message::User { .. }))
    else {
        return messages.to_vec();
    };
    let calls: HashMap<&str, &ToolCall> = messages[asked..]
        .iter()
        .flat_map(|m| match m {
            Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
            _ => &[],
        })
        .map(|c| (c.id.as_str(), c))
        .collect();
    let answered: Vec<(&ToolCall, &str)> = messages[asked..]
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                tool_call_id,
                content,
            } if content != REPEATED => {
                let call = *calls.get(tool_call_id.as_str())?;
                // What a search found is not an answer to anything.
                (call.name != SEARCH_TOOLS).then_some((call, content.as_str()))
            }
            _ => None,
        })
        .collect();
    // One budget for all the results: the model reads them all before its first word.
    let budget = (ANSWER_RESULTS_BUDGET / answered.len().max(1)).max(150);
    let results: String = answered
        .iter()
        .map(|(call, content)| {
            format!(
                "\n\n{}({}) returned:\n{}",
                call.name,
                call.arguments.trim(),
                results::fit_for_answer(content, budget)
            )
        })
        .collect();
    // Named as the tool, not as `server__tool`: a small model copies what it reads,
    // and the person should not see the wire name in the answer.
    let results = calls.values().fold(results, |text, c| {
        text.replace(&c.name, short_name(&c.name))
    });
    let mut conversation = messages[..asked].to_vec();
    let question = match &messages[asked] {
        Message::User { content } => content.as_str(),
        _ => "",
    };
    conversation.push(Message::User {
        content: format!(
            "{question}\n\nWhat the tools returned for this question:{results}\n\n\
             Answer the question above from these results only, in plain words. Do not call a tool."
        ),
    });
    conversation
}

/// `getTables` for `resos__getTables`.
fn short_name(exposed: &str) -> &str {
    exposed.rsplit_once("__").map_or(exposed, |(_, tool)| tool)
}

/// The calls an answer has made, by tool and arguments.
#[derive(Default)]
pub(super) struct Repeats {
    seen: HashSet<(String, Value)>,
}

impl Repeats {
    /// Notes `calls`; true when every one of them had been made before.
    pub(super) fn all_repeated(&mut self, calls: &[ToolCall]) -> bool {
        let mut all = !calls.is_empty();
        for call in calls {
            all &= !self.seen.insert(key(call));
        }
        all
    }
}

/// A call's tool and arguments; arguments that are not JSON count as their text, and
/// JSON compares by value (`{"a":1,"b":2}` is `{"b": 2, "a": 1}`).
fn key(call: &ToolCall) -> (String, Value) {
    let arguments = call.arguments.trim();
    let arguments = if arguments.is_empty() {
        Value::Object(serde_json::Map::new())
    } else {
        serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_owned()))
    };
    (call.name.clone(), arguments)
}

impl Answerer {
    /// The turn's repeated calls, shown and stored as refused, none of them run;
    /// what the model is told of each, in order.
    pub(super) async fn refuse_repeats(
        &self,
        answer: &Answer<'_>,
        catalogue: &Catalogue,
        reply: &Reply,
    ) -> Result<Vec<String>, Stop> {
        let recorder = answer.recorder;
        let mut results = Vec::with_capacity(reply.calls.len());
        for call in &reply.calls {
            let arguments = serde_json::from_str(&call.arguments)
                .unwrap_or_else(|_| Value::String(call.arguments.clone()));
            let found = catalogue.find(&call.name);
            let tool = found.as_deref();
            let shown = ShownCall {
                id: ToolCallId::new(),
                server: tool.map(|t| t.server.clone()).unwrap_or_default(),
                tool: tool.map_or_else(|| call.name.clone(), |t| t.tool.clone()),
                title: tool.map_or_else(
                    || call.name.clone(),
                    |t| super::pipeline::summarise::title(&t.title, &arguments),
                ),
                arguments,
                acting_as: None,
            };
            let started = recorder
                .call_started(&reply.part, &call.id, &shown, tool.is_some(), None)
                .await?;
            recorder
                .call_finished(
                    started,
                    CallStatus::Denied,
                    "the same call as before: not run again",
                )
                .await?;
            results.push(REPEATED.to_owned());
        }
        tracing::info!(
            message_id = %recorder.answer().message,
            calls = reply.calls.len(),
            "the model repeated its calls: not run again, and asked to answer"
        );
        Ok(results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: "call_1".to_owned(),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        }
    }

    #[test]
    fn only_a_turn_of_calls_all_made_before_is_a_repeat() {
        let mut repeats = Repeats::default();
        assert!(!repeats.all_repeated(&[call("resos__getTables", r#"{"limit": 1}"#)]));
        // The same arguments in another order and spacing, and no arguments as `{}`.
        assert!(repeats.all_repeated(&[call("resos__getTables", r#"{ "limit":1 }"#)]));
        assert!(!repeats.all_repeated(&[call("resos__getTables", r#"{"limit": 2}"#)]));
        assert!(!repeats.all_repeated(&[call("resos__getCustomers", "")]));
        assert!(repeats.all_repeated(&[call("resos__getCustomers", "{}")]));
        // One new call among old ones: the turn runs.
        assert!(!repeats.all_repeated(&[
            call("resos__getTables", r#"{"limit": 1}"#),
            call("resos__getOpeningHours", "{}"),
        ]));
        assert!(!repeats.all_repeated(&[]));
    }
}
