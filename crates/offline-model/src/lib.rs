//! The built-in offline model, used when no LLM endpoint is configured, so that the
//! whole gateway runs with no key and no network.
//!
//! It is deterministic and generic: it knows nothing of any domain, only what the
//! offered tools say about themselves (names, titles, descriptions, input schemas)
//! and what the question and the tool results say. A turn that ends with the user's
//! question is planned: tools are chosen by word overlap and their arguments read from
//! the question. A turn that ends with tool results is answered in markdown and never
//! calls more tools, so the gateway's loop always ends.

mod answer;
mod comparisons;
mod facts;
mod fields;
mod filter;
mod narrow;
mod plan;
mod roles;
mod salvage;
mod schema;
mod words;

/// English weekday and month names as the model reads them in a question; grounding
/// reads an answer's dates with the same words.
pub use words::{WEEKDAYS, month_number};

#[cfg(test)]
mod tests;

use std::time::Duration;

use chrono::{Local, NaiveDate};
use futures::future::BoxFuture;
use futures::{StreamExt, stream};
use serde_json::Value;

use answer::Outcome;
use facts::Facts;
use maitred_llm::{
    ChatModel, ChatRequest, EventStream, FinishReason, Message, ModelError, ModelEvent,
    SEARCH_TOOLS, ToolCall, ToolDef, Usage,
};
use plan::{Plan, Planner};

/// The name in the chat stream's `meta.model`.
pub const MODEL_NAME: &str = "maitred-offline";

/// Text streams a few words at a time, so that a client shows it arriving.
const WORDS_PER_FRAGMENT: usize = 3;

/// The deterministic stand-in for an LLM.
#[derive(Debug, Clone, Default)]
pub struct OfflineModel {
    /// A fixed "today" for "tomorrow" and weekdays; `None` reads the clock per request,
    /// so a long-running gateway does not keep yesterday's date.
    today: Option<NaiveDate>,
    fragment_delay: Duration,
    grounding: maitred_core::settings::GroundingMode,
}

impl OfflineModel {
    /// Dates count from the server's local date at the time of each request.
    pub fn new() -> Self {
        Self::default()
    }

    /// Dates count from `today`, whatever the clock says: for tests and demos.
    pub fn at(today: NaiveDate) -> Self {
        Self {
            today: Some(today),
            ..Self::default()
        }
    }

    /// Waits `delay` between text fragments (none by default), so that a UI visibly
    /// streams even though the answer is ready at once.
    pub fn with_fragment_delay(self, delay: Duration) -> Self {
        Self {
            fragment_delay: delay,
            ..self
        }
    }

    /// Its answers' figures are checked in `mode` (`MAITRED_LLM_GROUNDING`).
    pub fn with_grounding(self, mode: maitred_core::settings::GroundingMode) -> Self {
        Self {
            grounding: mode,
            ..self
        }
    }

    /// What this model writes from the tool results in `messages` (the question, the
    /// calls and their results), as its answer would be; `None` when they hold no
    /// result. The gateway's `facts` grounding writes an answer's figures with it.
    pub fn write_from_results(&self, messages: &[Message], tools: &[ToolDef]) -> Option<String> {
        let tools_offered: Vec<ToolDef> = tools
            .iter()
            .filter(|t| t.name != SEARCH_TOOLS)
            .cloned()
            .collect();
        let planner = Planner::new(&tools_offered);
        let understood = understand(messages, &planner, self.today());
        let outcomes = outcomes(messages, tools)
            .filter(|outcomes| outcomes.iter().any(|o| o.name != SEARCH_TOOLS))?;
        Some(answer::answer(
            understood.question,
            &understood.facts,
            &outcomes,
        ))
    }

    fn today(&self) -> NaiveDate {
        self.today.unwrap_or_else(|| Local::now().date_naive())
    }

    /// The whole reply to one request, as the events a real model would stream.
    ///
    /// When the gateway offers its `search_tools` (it has more tools than it sends),
    /// a question that none of the tools offered fits is searched for, in its own
    /// words; the search's answer is not a result to answer from but the tools it
    /// loaded, so the question is planned again with them.
    fn respond(&self, request: &ChatRequest) -> Vec<ModelEvent> {
        let searchable = request.tools.iter().any(|t| t.name == SEARCH_TOOLS);
        let tools: Vec<ToolDef> = request
            .tools
            .iter()
            .filter(|t| t.name != SEARCH_TOOLS)
            .cloned()
            .collect();
        let planner = Planner::new(&tools);
        let understood = understand(&request.messages, &planner, self.today());
        let results = outcomes(&request.messages, &request.tools)
            .filter(|outcomes| outcomes.iter().any(|o| o.name != SEARCH_TOOLS));
        let reply = match results {
            Some(outcomes) => Reply::Text(answer::answer(
                understood.question,
                &understood.facts,
                &outcomes,
            )),
            None => match planner.plan(understood.question, &understood.facts) {
                Plan::Calls(calls) => Reply::Calls(calls),
                Plan::Ask {
                    tool,
                    missing,
                    known,
                } => Reply::Text(answer::ask(tool, &missing, &known)),
                Plan::Help if searchable && !searched(&request.messages) => {
                    Reply::Calls(vec![plan::Call {
                        name: SEARCH_TOOLS.to_owned(),
                        arguments: serde_json::json!({ "query": understood.question }).to_string(),
                    }])
                }
                Plan::Help => Reply::Text(answer::help(&tools)),
            },
        };
        let first_call = previous_calls(&request.messages) + 1;
        events(reply, prompt_chars(request), first_call)
    }
}

impl ChatModel for OfflineModel {
    fn name(&self) -> &str {
        MODEL_NAME
    }

    fn grounding(&self) -> maitred_core::settings::GroundingMode {
        self.grounding
    }

    fn stream(&self, request: ChatRequest) -> BoxFuture<'_, Result<EventStream, ModelError>> {
        let stream = into_stream(self.respond(&request), self.fragment_delay);
        Box::pin(futures::future::ready(Ok(stream)))
    }
}

// ---------------------------------------------------------------------------------
// Reading the conversation

/// The question a turn is about, and the values it states.
struct Understood<'m> {
    question: &'m str,
    facts: Facts,
}

/// The latest user message; or, when it only adds values ("tomorrow at 7pm for 2",
/// "19:30 then") and names no tool, the request before it completed with those values,
/// so that a reply to "I still need…" or to a failed call carries the request out.
fn understand<'m>(messages: &'m [Message], planner: &Planner, today: NaiveDate) -> Understood<'m> {
    let users: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter_map(|(i, m)| matches!(m, Message::User { .. }).then_some(i))
        .collect();
    let text = |i: usize| match &messages[i] {
        Message::User { content } => content.as_str(),
        _ => "",
    };
    let latest = users.last().map_or("", |&i| text(i));
    let facts = Facts::read(latest, today);
    if let [.., previous, last] = users[..]
        && facts.states_values()
        && facts.actions.is_empty()
        && !planner.names_a_tool(latest, &facts)
    {
        let merged = Facts::read(text(previous), today).completed_by(&facts);
        let redo = match planner.plan(text(previous), &merged) {
            Plan::Help => false,
            // A change that went through is not made again by "see you tomorrow".
            Plan::Calls(calls) if calls.iter().any(|c| planner.changes(c)) => {
                !succeeded(&messages[previous..last])
            }
            _ => true,
        };
        if redo {
            return Understood {
                question: text(previous),
                facts: merged,
            };
        }
    }
    Understood {
        question: latest,
        facts,
    }
}

/// The tools were searched since the person last spoke.
fn searched(messages: &[Message]) -> bool {
    messages
        .iter()
        .rev()
        .take_while(|m| !matches!(m, Message::User { .. }))
        .any(|m| match m {
            Message::Assistant { tool_calls, .. } => {
                tool_calls.iter().any(|c| c.name == SEARCH_TOOLS)
            }
            _ => false,
        })
}

/// Some tool call of these messages came back with a result rather than an error.
fn succeeded(messages: &[Message]) -> bool {
    messages.iter().any(|m| match m {
        Message::Tool { content, .. } => !answer::is_failure(content),
        _ => false,
    })
}

/// The results to answer, when the conversation ends with tool messages.
fn outcomes<'m>(messages: &'m [Message], tools: &'m [ToolDef]) -> Option<Vec<Outcome<'m>>> {
    let mut results: Vec<(&str, &str)> = messages
        .iter()
        .rev()
        .map_while(|m| match m {
            Message::Tool {
                tool_call_id,
                content,
            } => Some((tool_call_id.as_str(), content.as_str())),
            _ => None,
        })
        .collect();
    if results.is_empty() {
        return None;
    }
    results.reverse();
    let calls: &[ToolCall] = match messages.iter().rev().nth(results.len()) {
        Some(Message::Assistant { tool_calls, .. }) => tool_calls,
        _ => &[],
    };
    Some(
        results
            .into_iter()
            .map(|(id, content)| {
                let call = calls.iter().find(|c| c.id == id);
                let name = call.map_or("", |c| c.name.as_str());
                Outcome {
                    tool: tools.iter().find(|t| t.name == name),
                    name,
                    arguments: call.and_then(|c| serde_json::from_str(&c.arguments).ok()),
                    content,
                }
            })
            .collect(),
    )
}

/// Calls made earlier in the conversation: new call ids continue the count, so ids
/// stay unique across turns.
fn previous_calls(messages: &[Message]) -> usize {
    messages
        .iter()
        .map(|m| match m {
            Message::Assistant { tool_calls, .. } => tool_calls.len(),
            _ => 0,
        })
        .sum()
}

// ---------------------------------------------------------------------------------
// Streaming the reply

enum Reply {
    Calls(Vec<plan::Call>),
    Text(String),
}

fn events(reply: Reply, prompt_chars: usize, first_call: usize) -> Vec<ModelEvent> {
    let mut events = Vec::new();
    let (completion_chars, finish) = match reply {
        Reply::Text(text) => {
            events.extend(fragments(&text).into_iter().map(ModelEvent::Text));
            (text.chars().count(), FinishReason::Stop)
        }
        Reply::Calls(calls) => {
            let mut chars = 0;
            for (index, call) in calls.iter().enumerate() {
                chars += call.name.chars().count() + call.arguments.chars().count();
                events.extend(call_deltas(index, first_call + index, call));
            }
            (chars, FinishReason::ToolCalls)
        }
    };
    events.push(ModelEvent::Usage(usage(prompt_chars, completion_chars)));
    events.push(ModelEvent::Finished(finish));
    events
}

/// Pieces of a few words each, whitespace kept, that concatenate to the text.
fn fragments(text: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    let mut words = 0;
    let mut in_word = false;
    for c in text.chars() {
        if c.is_whitespace() {
            in_word = false;
        } else if !in_word {
            if words == WORDS_PER_FRAGMENT {
                pieces.push(std::mem::take(&mut current));
                words = 0;
            }
            words += 1;
            in_word = true;
        }
        current.push(c);
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

/// One call as a real model streams it: the id and name first, the arguments in
/// two or three fragments under one index.
fn call_deltas(index: usize, number: usize, call: &plan::Call) -> Vec<ModelEvent> {
    let chars: Vec<char> = call.arguments.chars().collect();
    let parts = if chars.len() >= 24 { 3 } else { 2 };
    let bounds: Vec<usize> = (0..=parts).map(|k| chars.len() * k / parts).collect();
    let index = u32::try_from(index).unwrap_or(u32::MAX);
    bounds
        .windows(2)
        .enumerate()
        .map(|(k, w)| ModelEvent::ToolCallDelta {
            index,
            id: (k == 0).then(|| format!("offline-call-{number}")),
            name: (k == 0).then(|| call.name.clone()),
            arguments: Some(chars[w[0]..w[1]].iter().collect()),
        })
        .collect()
}

/// Roughly four characters a token, as for English text.
fn usage(prompt_chars: usize, completion_chars: usize) -> Usage {
    let tokens = |chars: usize| chars.div_ceil(4) as u64;
    let (prompt, completion) = (tokens(prompt_chars), tokens(completion_chars));
    Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: prompt + completion,
    }
}

fn prompt_chars(request: &ChatRequest) -> usize {
    let len = |s: &str| s.chars().count();
    let messages: usize = request
        .messages
        .iter()
        .map(|m| match m {
            Message::System { content } | Message::User { content } => len(content),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                len(content.as_deref().unwrap_or_default())
                    + tool_calls
                        .iter()
                        .map(|c| len(&c.name) + len(&c.arguments))
                        .sum::<usize>()
            }
            Message::Tool { content, .. } => len(content),
        })
        .sum();
    let tools: usize = request
        .tools
        .iter()
        .map(|t| {
            len(&t.name)
                + len(t.title.as_deref().unwrap_or_default())
                + len(&t.description)
                + len(&Value::to_string(&t.parameters))
        })
        .sum();
    messages + tools
}

/// The events as a stream; with a delay, a pause before every text fragment but the first.
fn into_stream(events: Vec<ModelEvent>, delay: Duration) -> EventStream {
    if delay.is_zero() {
        return stream::iter(events.into_iter().map(Ok)).boxed();
    }
    stream::unfold(
        (events.into_iter(), false),
        move |(mut rest, started)| async move {
            let event = rest.next()?;
            if started && matches!(event, ModelEvent::Text(_)) {
                tokio::time::sleep(delay).await;
            }
            Some((Ok(event), (rest, true)))
        },
    )
    .boxed()
}
