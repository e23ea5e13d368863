//! Tool calls a model writes as text. Small local models often answer a question that
//! needs a tool with the call in their content instead of a `tool_calls` delta: a bare
//! JSON object, a fenced ```json block, `<tool_call>` tags (Hermes, Qwen), or
//! `functions.NAME:` and the arguments (llama-cpp-python's chatml-function-calling).
//! Shown to the person, that is noise; taken as the call it means, the answer goes on.
//!
//! Text that could still become a call is held back; once it cannot, it streams at
//! once. At the end, held text that is one or more calls naming offered tools becomes
//! those calls, and anything else is shown as it came.

use std::collections::VecDeque;

use futures::StreamExt;
use serde_json::{Map, Value};

use super::{EventStream, FinishReason, ModelEvent, ToolCall, ToolDef};

/// Past this much held text, an answer is an answer.
const MAX_HELD: usize = 32 * 1024;

pub use crate::settings::ToolCallMode;

/// Could `text`, so far, still turn out to be a tool call?
pub fn could_be_call(text: &str) -> bool {
    let text = text.trim_start();
    if text.len() > MAX_HELD {
        return false;
    }
    if let Some(fenced) = text.strip_prefix("```")
        && let Some((info, _)) = fenced.split_once('\n')
    {
        return matches!(info.trim(), "" | "json" | "tool_call");
    }
    ["<tool_call>", "```", "functions.", "{", "["]
        .iter()
        .any(|opener| text.starts_with(opener) || opener.starts_with(text))
}

/// The tool calls `text` consists of, if it is nothing but calls of `offered` tools.
pub fn parse(text: &str, offered: &[&str]) -> Option<Vec<(String, String)>> {
    let text = text.trim();
    let calls = if text.starts_with("<tool_call>") {
        let mut calls = Vec::new();
        let mut rest = text;
        while let Some(after) = rest.trim_start().strip_prefix("<tool_call>") {
            let (inner, tail) = after.split_once("</tool_call>")?;
            calls.extend(objects(inner.trim())?);
            rest = tail;
        }
        rest.trim().is_empty().then_some(calls)?
    } else if let Some(fenced) = text.strip_prefix("```") {
        let body = fenced.strip_suffix("```")?;
        let body = body
            .strip_prefix("json")
            .or_else(|| body.strip_prefix("tool_call"))
            .unwrap_or(body);
        objects(body.trim())?
    } else if let Some(named) = text.strip_prefix("functions.") {
        let (name, arguments) = named.split_once(':')?;
        let arguments: Value = serde_json::from_str(arguments.trim()).ok()?;
        let mut call = Map::new();
        call.insert("name".into(), Value::String(name.trim().to_owned()));
        call.insert("arguments".into(), arguments);
        vec![call]
    } else {
        objects(text)?
    };
    let read: Option<Vec<(String, String)>> = calls.into_iter().map(read_call).collect();
    let read = read.filter(|calls| !calls.is_empty())?;
    read.iter()
        .all(|(name, _)| offered.contains(&name.as_str()))
        .then_some(read)
}

/// A JSON object or an array of objects.
fn objects(text: &str) -> Option<Vec<Map<String, Value>>> {
    match serde_json::from_str(text).ok()? {
        Value::Object(object) => Some(vec![object]),
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::Object(object) => Some(object),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// `{"name", "arguments"}` (or `"parameters"`), the arguments an object or JSON text.
fn read_call(mut call: Map<String, Value>) -> Option<(String, String)> {
    let name = call.remove("name")?.as_str()?.to_owned();
    let arguments = call
        .remove("arguments")
        .or_else(|| call.remove("parameters"))
        .unwrap_or(Value::Object(Map::new()));
    let arguments = match arguments {
        Value::String(text) => serde_json::from_str::<Value>(&text).ok()?.to_string(),
        Value::Object(object) => Value::Object(object).to_string(),
        _ => return None,
    };
    Some((name, arguments))
}

/// The model's events with calls written as text turned into `tool_calls` deltas.
pub fn detect(stream: EventStream, tools: &[ToolDef]) -> EventStream {
    let offered: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
    let state = Detector {
        stream,
        offered,
        held: String::new(),
        showing: false,
        out: VecDeque::new(),
        ended: false,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.out.pop_front() {
                return Some((event, state));
            }
            if state.ended {
                return None;
            }
            match state.stream.next().await {
                Some(Ok(event)) => state.take(event),
                Some(Err(error)) => {
                    state.release();
                    state.ended = true;
                    state.out.push_back(Err(error));
                }
                None => {
                    state.release();
                    state.ended = true;
                }
            }
        }
    })
    .boxed()
}

struct Detector {
    stream: EventStream,
    offered: Vec<String>,
    held: String,
    /// The text is an answer: it streams as it comes.
    showing: bool,
    out: VecDeque<Result<ModelEvent, super::ModelError>>,
    ended: bool,
}

impl Detector {
    fn take(&mut self, event: ModelEvent) {
        match event {
            ModelEvent::Text(fragment) if self.showing => {
                self.out.push_back(Ok(ModelEvent::Text(fragment)));
            }
            ModelEvent::Text(fragment) => {
                self.held.push_str(&fragment);
                if !could_be_call(&self.held) {
                    self.release();
                }
            }
            // Native calls: this model speaks the protocol; its text is just text.
            delta @ ModelEvent::ToolCallDelta { .. } => {
                self.release();
                self.out.push_back(Ok(delta));
            }
            ModelEvent::Finished(reason) => {
                let offered: Vec<&str> = self.offered.iter().map(String::as_str).collect();
                match (!self.showing)
                    .then(|| parse(&self.held, &offered))
                    .flatten()
                {
                    Some(calls) => {
                        self.held.clear();
                        for (index, (name, arguments)) in calls.into_iter().enumerate() {
                            let index = u32::try_from(index).unwrap_or(u32::MAX);
                            self.out.push_back(Ok(ModelEvent::ToolCallDelta {
                                index,
                                id: Some(format!("call_text_{index}")),
                                name: Some(name),
                                arguments: Some(arguments),
                            }));
                        }
                        self.out
                            .push_back(Ok(ModelEvent::Finished(FinishReason::ToolCalls)));
                    }
                    None => {
                        self.release();
                        self.out.push_back(Ok(ModelEvent::Finished(reason)));
                    }
                }
            }
            other => self.out.push_back(Ok(other)),
        }
    }

    /// Shows what was held back: it is not a call.
    fn release(&mut self) {
        self.showing = true;
        if !self.held.is_empty() {
            let text = std::mem::take(&mut self.held);
            self.out.push_back(Ok(ModelEvent::Text(text)));
        }
    }
}

/// For `text` mode: the tools described in a compact form for the system prompt.
pub fn describe(tools: &[ToolDef]) -> String {
    let mut text = String::from(
        "\n\nYou can use these tools. To call one, answer with nothing but\n\
         <tool_call>{\"name\": \"TOOL\", \"arguments\": {ARGUMENTS}}</tool_call>\n\
         (one tag per call), then wait for the results. Otherwise answer the user.\n\
         Tools:\n",
    );
    for tool in tools {
        let properties = tool.parameters["properties"].as_object();
        let required: Vec<&str> = tool.parameters["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let parameters: Vec<String> = properties
            .map(|p| {
                p.iter()
                    .map(|(name, schema)| {
                        let kind = schema["type"].as_str().unwrap_or("any");
                        let optional = if required.contains(&name.as_str()) {
                            ""
                        } else {
                            "?"
                        };
                        format!("{name}{optional}: {kind}")
                    })
                    .collect()
            })
            .unwrap_or_default();
        let summary = tool.description.lines().next().unwrap_or_default();
        text.push_str(&format!(
            "- {}({}): {summary}\n",
            tool.name,
            parameters.join(", ")
        ));
    }
    text
}

/// For `text` mode: an earlier call as the model wrote it.
pub fn as_text(call: &ToolCall) -> String {
    let arguments: Value =
        serde_json::from_str(&call.arguments).unwrap_or(Value::Object(Map::new()));
    let call = serde_json::json!({ "name": call.name, "arguments": arguments });
    format!("<tool_call>{call}</tool_call>")
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFFERED: &[&str] = &["resos__getCustomers", "resos__getTables"];

    #[test]
    fn every_dialect_reads_as_its_call() {
        let expected = vec![(
            "resos__getCustomers".to_owned(),
            r#"{"limit":5}"#.to_owned(),
        )];
        for text in [
            r#"{"name": "resos__getCustomers", "arguments": {"limit": 5}}"#,
            r#"  {"name": "resos__getCustomers", "parameters": {"limit": 5}} "#,
            "```json\n{\"name\": \"resos__getCustomers\", \"arguments\": {\"limit\": 5}}\n```",
            "```\n{\"name\": \"resos__getCustomers\", \"arguments\": \"{\\\"limit\\\": 5}\"}\n```",
            "<tool_call>\n{\"name\": \"resos__getCustomers\", \"arguments\": {\"limit\": 5}}\n</tool_call>",
            "functions.resos__getCustomers:\n{\"limit\": 5}",
        ] {
            assert_eq!(parse(text, OFFERED), Some(expected.clone()), "{text}");
        }
        let two = "<tool_call>{\"name\":\"resos__getTables\"}</tool_call>\n<tool_call>{\"name\":\"resos__getCustomers\",\"arguments\":{}}</tool_call>";
        assert_eq!(parse(two, OFFERED).map(|c| c.len()), Some(2));
    }

    #[test]
    fn what_is_not_a_call_of_an_offered_tool_is_an_answer() {
        for text in [
            r#"{"name": "rm_rf", "arguments": {}}"#,
            r#"{"answer": 42}"#,
            "There are 60 customers.",
            "```python\nprint(1)\n```",
            "<tool_call>{\"name\":\"resos__getTables\"}</tool_call> and some words",
            "",
        ] {
            assert_eq!(parse(text, OFFERED), None, "{text}");
        }
    }

    #[test]
    fn text_is_held_back_only_while_it_could_still_be_a_call() {
        for held in [
            "",
            "  ",
            "{",
            "{\"name\"",
            "```",
            "```json\n{",
            "<tool",
            "<tool_call>{",
            "functions",
            "functions.x",
        ] {
            assert!(could_be_call(held), "{held:?}");
        }
        for shown in ["There", "The", "**60**", "```python\n", "Hello {", "<b>"] {
            assert!(!could_be_call(shown), "{shown:?}");
        }
    }
}
