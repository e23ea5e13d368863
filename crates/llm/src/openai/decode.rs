//! The chat-completions stream as providers really send it, read into lenient types
//! of our own (async-openai's "bring your own types"): some omit a tool call's
//! `index`, some repeat ids and names in every fragment, some send the deprecated
//! `function_call` beside `tool_calls`.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::{FinishReason, ModelEvent, Usage};

#[derive(Deserialize)]
pub(super) struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Delta,
    finish_reason: Option<String>,
}

#[derive(Default, Deserialize)]
struct Delta {
    content: Option<String>,
    tool_calls: Option<Vec<ToolCallChunk>>,
    /// The deprecated single call. llama-cpp-python sends it beside `tool_calls`,
    /// repeating the same fragment: read only when `tool_calls` is absent.
    function_call: Option<FunctionChunk>,
}

#[derive(Deserialize)]
struct ToolCallChunk {
    index: Option<u32>,
    id: Option<String>,
    function: Option<FunctionChunk>,
}

#[derive(Deserialize)]
struct FunctionChunk {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
}

/// Turns chunks into events, giving each tool call an index of its own. Providers
/// differ: most number calls by `index`; some leave it out (a fragment then continues
/// the call before it, unless it brings a new id); Ollama gives every parallel call
/// index 0, told apart only by their ids.
#[derive(Default)]
pub(super) struct Decoder {
    /// Per call, by our index: the provider's index and the call's id.
    calls: Vec<(Option<u32>, Option<String>)>,
    last: Option<usize>,
}

impl Decoder {
    fn slot(&mut self, index: Option<u32>, id: Option<&String>) -> u32 {
        let known = id.and_then(|id| self.calls.iter().position(|(_, c)| c.as_ref() == Some(id)));
        let slot = match (known, index, id) {
            // An id seen before names its call, whatever the index says.
            (Some(slot), _, _) => slot,
            (None, Some(index), id) => {
                let same_index = self.calls.iter().rposition(|(i, _)| *i == Some(index));
                match same_index {
                    // A new id at a taken index is another call (Ollama).
                    Some(slot) if id.is_some() && self.calls[slot].1.is_some() => {
                        self.open(Some(index), id)
                    }
                    Some(slot) => {
                        if self.calls[slot].1.is_none() {
                            self.calls[slot].1 = id.cloned();
                        }
                        slot
                    }
                    None => self.open(Some(index), id),
                }
            }
            (None, None, Some(id)) => self.open(None, Some(id)),
            (None, None, None) => match self.last {
                Some(slot) => slot,
                None => self.open(None, None),
            },
        };
        self.last = Some(slot);
        u32::try_from(slot).unwrap_or(u32::MAX)
    }

    fn open(&mut self, index: Option<u32>, id: Option<&String>) -> usize {
        self.calls.push((index, id.cloned()));
        self.calls.len() - 1
    }

    pub(super) fn events(&mut self, chunk: Chunk) -> Vec<ModelEvent> {
        let mut events = Vec::new();
        for choice in chunk.choices {
            if let Some(text) = choice.delta.content.filter(|t| !t.is_empty()) {
                events.push(ModelEvent::Text(text));
            }
            let mut calls = choice.delta.tool_calls.unwrap_or_default();
            if calls.is_empty()
                && let Some(function) = choice.delta.function_call
                && (function.name.is_some() || function.arguments.is_some())
            {
                calls.push(ToolCallChunk {
                    index: None,
                    id: None,
                    function: Some(function),
                });
            }
            for call in calls {
                let index = self.slot(call.index, call.id.as_ref());
                let (name, arguments) = call
                    .function
                    .map_or((None, None), |f| (f.name, f.arguments));
                events.push(ModelEvent::ToolCallDelta {
                    index,
                    id: call.id,
                    name,
                    arguments,
                });
            }
            if let Some(reason) = choice.finish_reason {
                events.push(ModelEvent::Finished(match reason.as_str() {
                    "stop" => FinishReason::Stop,
                    "tool_calls" | "function_call" => FinishReason::ToolCalls,
                    "length" => FinishReason::Length,
                    "content_filter" => FinishReason::ContentFilter,
                    other => FinishReason::Other(other.to_owned()),
                }));
            }
        }
        if let Some(usage) = chunk.usage {
            events.push(ModelEvent::Usage(Usage {
                prompt_tokens: usage.prompt_tokens,
                completion_tokens: usage.completion_tokens,
                total_tokens: usage.total_tokens,
            }));
        }
        events
    }
}

/// A whole `chat.completion` as the one streamed chunk it amounts to: its message as
/// the delta (each tool call with its index), its finish reason and usage.
pub(super) fn as_chunk(mut completion: Value) -> Chunk {
    let mut choices = Vec::new();
    if let Some(all) = completion["choices"].as_array_mut() {
        for choice in all {
            let mut delta = choice["message"].take();
            if let Some(calls) = delta["tool_calls"].as_array_mut() {
                for (index, call) in calls.iter_mut().enumerate() {
                    call["index"] = index.into();
                    // Some servers give the arguments as an object, not JSON text.
                    let arguments = &mut call["function"]["arguments"];
                    if !arguments.is_string() && !arguments.is_null() {
                        *arguments = arguments.to_string().into();
                    }
                }
            }
            choices.push(json!({ "delta": delta, "finish_reason": choice["finish_reason"] }));
        }
    }
    let chunk = json!({ "choices": choices, "usage": completion["usage"] });
    serde_json::from_value(chunk).unwrap_or(Chunk {
        choices: Vec::new(),
        usage: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(value: Value) -> Chunk {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn fragments_without_an_index_continue_their_call() {
        let mut decoder = Decoder::default();
        let mut events = Vec::new();
        for c in [
            json!({ "choices": [{ "delta": { "tool_calls": [{ "id": "a", "function": { "name": "f", "arguments": "{\"x\"" } }] } }] }),
            json!({ "choices": [{ "delta": { "tool_calls": [{ "function": { "arguments": ":1}" } }] } }] }),
            json!({ "choices": [{ "delta": { "tool_calls": [{ "id": "b", "function": { "name": "g", "arguments": "{}" } }] } }] }),
            json!({ "choices": [{ "delta": {}, "finish_reason": "tool_calls" }], "usage": null }),
        ] {
            events.extend(decoder.events(chunk(c)));
        }
        let indexes: Vec<u32> = events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::ToolCallDelta { index, .. } => Some(*index),
                _ => None,
            })
            .collect();
        assert_eq!(indexes, [0, 0, 1]);
        assert_eq!(
            events.last(),
            Some(&ModelEvent::Finished(FinishReason::ToolCalls))
        );
    }

    fn indexes(chunks: Vec<Value>) -> Vec<u32> {
        let mut decoder = Decoder::default();
        chunks
            .into_iter()
            .flat_map(|c| decoder.events(chunk(c)))
            .filter_map(|e| match e {
                ModelEvent::ToolCallDelta { index, .. } => Some(index),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn parallel_calls_all_at_index_0_are_told_apart_by_their_ids() {
        let call = |id: &str, name: &str| json!({ "choices": [{ "delta": { "tool_calls": [{ "index": 0, "id": id, "function": { "name": name, "arguments": "{}" } }] } }] });
        assert_eq!(
            indexes(vec![call("a", "f"), call("b", "g"), call("c", "h")]),
            [0, 1, 2]
        );
        // The id repeated in every fragment of one call is still that one call.
        let piece = |args: &str| json!({ "choices": [{ "delta": { "tool_calls": [{ "index": 0, "id": "a", "function": { "arguments": args } }] } }] });
        assert_eq!(
            indexes(vec![call("a", "f"), piece("{\"x\""), piece(":1}")]),
            [0, 0, 0]
        );
        // Numbered calls keep their numbers; id-less continuations stay with them.
        let numbered = |index: u32, id: Option<&str>| json!({ "choices": [{ "delta": { "tool_calls": [{ "index": index, "id": id, "function": { "arguments": "" } }] } }] });
        assert_eq!(
            indexes(vec![
                numbered(0, Some("a")),
                numbered(1, Some("b")),
                numbered(0, None),
                numbered(1, None)
            ]),
            [0, 1, 0, 1]
        );
    }

    /// llama-cpp-python's stream of one call: `function_call` and `tool_calls` side
    /// by side in every delta, the id and the name repeated each time.
    #[test]
    fn a_function_call_beside_tool_calls_is_not_read_twice() {
        let mut decoder = Decoder::default();
        let piece = |args: &str| {
            json!({ "choices": [{ "index": 0, "finish_reason": null, "logprobs": null, "delta": {
            "role": null, "content": null,
            "function_call": { "name": "resos__getTables", "arguments": args },
            "tool_calls": [{ "index": 0, "id": "call__0_resos__getTables_cmpl-1", "type": "function",
                             "function": { "name": "resos__getTables", "arguments": args } }] } }] })
        };
        let mut events = Vec::new();
        for c in [piece("{\"limit\""), piece(": 1}")] {
            events.extend(decoder.events(chunk(c)));
        }
        let arguments: String = events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::ToolCallDelta {
                    index: 0,
                    arguments,
                    ..
                } => arguments.clone(),
                _ => None,
            })
            .collect();
        assert_eq!(arguments, "{\"limit\": 1}");
        assert_eq!(events.len(), 2, "{events:?}");
    }

    #[test]
    fn a_function_call_alone_is_a_call() {
        let mut decoder = Decoder::default();
        let piece = |name: Option<&str>, args: &str| {
            json!({ "choices": [{ "delta": {
            "function_call": { "name": name, "arguments": args } } }] })
        };
        let events: Vec<ModelEvent> = [
            piece(Some("resos__getTables"), ""),
            piece(None, "{}"),
            json!({ "choices": [{ "delta": {}, "finish_reason": "function_call" }] }),
        ]
        .into_iter()
        .flat_map(|c| decoder.events(chunk(c)))
        .collect();
        assert_eq!(
            events,
            [
                ModelEvent::ToolCallDelta {
                    index: 0,
                    id: None,
                    name: Some("resos__getTables".into()),
                    arguments: Some(String::new())
                },
                ModelEvent::ToolCallDelta {
                    index: 0,
                    id: None,
                    name: None,
                    arguments: Some("{}".into())
                },
                ModelEvent::Finished(FinishReason::ToolCalls),
            ]
        );
    }
}
