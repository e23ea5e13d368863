//! `POST /v1/responses`'s body as OpenAI defines it, and what maitred makes of it.
//!
//! `input` is a text (the question) or a list of items: messages (the last, the
//! user's, is the question; those before it history the model sees), or
//! `mcp_approval_response`s that answer the approval requests a response ended
//! with. Items that are the gateway's own output sent back (`mcp_call`,
//! `mcp_list_tools`, `mcp_approval_request`, `reasoning`, `item_reference`) are
//! skipped: the stored conversation has them. Client-side tools and their calls
//! are refused, since maitred runs its own; so is `conversation` (continue with
//! `previous_response_id`). Fields that only tune the model (`temperature`,
//! `max_output_tokens`, `text`, `reasoning`, `tool_choice`…) are accepted and
//! ignored: the gateway's settings apply.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::super::errors::OpenAiError;
use super::{errors, ids};
use maitred_llm::Message;
use maitred_protocol::ids::ToolCallId;

/// Keys in `metadata` at most, and the longest key and value (OpenAI's limits).
const METADATA_KEYS: usize = 16;
const METADATA_KEY: usize = 64;
const METADATA_VALUE: usize = 512;

#[derive(Debug, Deserialize)]
pub struct CreateResponse {
    pub model: String,
    #[serde(default)]
    pub input: Option<Input>,
    #[serde(default)]
    pub instructions: Option<String>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub background: Option<bool>,
    #[serde(default)]
    pub store: Option<bool>,
    #[serde(default)]
    pub previous_response_id: Option<String>,
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    #[serde(default)]
    pub conversation: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Input {
    Text(String),
    Items(Vec<Value>),
}

/// The request, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    pub model: String,
    pub stream: bool,
    pub background: bool,
    pub store: bool,
    pub instructions: Option<String>,
    pub metadata: Map<String, Value>,
    pub previous: Option<String>,
    pub asked: Asked,
}

/// What the request asks.
#[derive(Debug, Clone, PartialEq)]
pub enum Asked {
    /// A question, after the messages the caller sent before it.
    Question {
        history: Vec<Message>,
        question: String,
    },
    /// The person's decisions on approval requests a response ended with.
    Decisions(Vec<Decision>),
}

/// One `mcp_approval_response`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The call the request was about.
    pub call: ToolCallId,
    pub approve: bool,
}

impl CreateResponse {
    /// Checks the request against what this API can do; `question_limit` bounds the
    /// question in characters.
    pub fn check(self, question_limit: usize) -> Result<Checked, OpenAiError> {
        if self.tools.as_ref().is_some_and(|t| !t.is_empty()) {
            return Err(OpenAiError::invalid(
                "tools",
                "maitred runs its own tools (its MCP servers'); client-side and remote tools are not supported",
            ));
        }
        if self.conversation.is_some() {
            return Err(OpenAiError::invalid(
                "conversation",
                "conversations are not supported here; continue a response with previous_response_id",
            ));
        }
        let background = self.background.unwrap_or(false);
        let store = self.store.unwrap_or(true);
        if background && !store {
            return Err(OpenAiError::invalid(
                "store",
                "a background response is stored: store must be true",
            ));
        }
        let metadata = self.metadata.unwrap_or_default();
        check_metadata(&metadata)?;
        let input = self
            .input
            .ok_or_else(|| OpenAiError::invalid("input", "input is required"))?;
        let asked = asked(input)?;
        if let Asked::Question { question, .. } = &asked
            && question.chars().count() > question_limit
        {
            return Err(errors::too_large(format!(
                "the question is longer than {question_limit} characters"
            )));
        }
        Ok(Checked {
            model: self.model,
            stream: self.stream.unwrap_or(false),
            background,
            store,
            instructions: self.instructions.filter(|i| !i.trim().is_empty()),
            metadata,
            previous: self.previous_response_id,
            asked,
        })
    }
}

fn check_metadata(metadata: &Map<String, Value>) -> Result<(), OpenAiError> {
    if metadata.len() > METADATA_KEYS {
        return Err(OpenAiError::invalid(
            "metadata",
            format!("metadata has at most {METADATA_KEYS} keys"),
        ));
    }
    for (key, value) in metadata {
        let fits = key.chars().count() <= METADATA_KEY
            && value
                .as_str()
                .is_some_and(|v| v.chars().count() <= METADATA_VALUE);
        if !fits {
            return Err(OpenAiError::invalid(
                "metadata",
                format!(
                    "metadata maps keys of at most {METADATA_KEY} characters to strings of at most {METADATA_VALUE}"
                ),
            ));
        }
    }
    Ok(())
}

fn asked(input: Input) -> Result<Asked, OpenAiError> {
    let items = match input {
        Input::Text(text) => {
            return question(Vec::new(), text);
        }
        Input::Items(items) => items,
    };
    let mut messages = Vec::new();
    let mut decisions = Vec::new();
    for item in &items {
        match item_type(item)? {
            "message" => messages.push(message(item)?),
            "mcp_approval_response" => decisions.push(decision(item)?),
            // The gateway's own output, sent back: the stored conversation has it.
            "mcp_call"
            | "mcp_list_tools"
            | "mcp_approval_request"
            | "reasoning"
            | "item_reference" => {}
            "function_call"
            | "function_call_output"
            | "custom_tool_call"
            | "custom_tool_call_output"
            | "computer_call"
            | "computer_call_output"
            | "local_shell_call"
            | "local_shell_call_output"
            | "shell_call"
            | "shell_call_output"
            | "apply_patch_call"
            | "apply_patch_call_output" => {
                return Err(OpenAiError::invalid(
                    "input",
                    "client-side tool calls are not supported: maitred runs its own tools",
                ));
            }
            other => {
                return Err(OpenAiError::invalid(
                    "input",
                    format!("input items of type {other:?} are not supported"),
                ));
            }
        }
    }
    if !decisions.is_empty() {
        // The messages of a request that answers approvals are the conversation sent
        // back: the stored one goes on.
        return Ok(Asked::Decisions(decisions));
    }
    let question_text = match messages.pop() {
        Some(Message::User { content }) => content,
        _ => {
            return Err(OpenAiError::invalid(
                "input",
                "the last input item must be the user's message (the question), or the input mcp_approval_response items",
            ));
        }
    };
    question(messages, question_text)
}

fn question(history: Vec<Message>, text: String) -> Result<Asked, OpenAiError> {
    let question = text.trim().to_owned();
    if question.is_empty() {
        return Err(OpenAiError::invalid("input", "the question is empty"));
    }
    Ok(Asked::Question { history, question })
}

/// An item's `type`; a message may leave it out.
fn item_type(item: &Value) -> Result<&str, OpenAiError> {
    match item.get("type") {
        Some(Value::String(kind)) => Ok(kind),
        None if item.get("role").is_some() => Ok("message"),
        _ => Err(OpenAiError::invalid(
            "input",
            "every input item is an object with a type (or a message with a role)",
        )),
    }
}

fn message(item: &Value) -> Result<Message, OpenAiError> {
    let text = content(item.get("content"))?;
    match item.get("role").and_then(Value::as_str) {
        Some("user") => Ok(Message::User { content: text }),
        Some("system" | "developer") => Ok(Message::System { content: text }),
        Some("assistant") => Ok(Message::Assistant {
            content: Some(text),
            tool_calls: Vec::new(),
        }),
        other => Err(OpenAiError::invalid(
            "input",
            format!("unknown message role {other:?}"),
        )),
    }
}

/// A message's text: a string, or its text parts joined.
fn content(content: Option<&Value>) -> Result<String, OpenAiError> {
    match content {
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|part| {
                let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
                match (kind, part.get("text").and_then(Value::as_str)) {
                    ("input_text" | "output_text" | "text", Some(text)) => Ok(text),
                    _ => Err(OpenAiError::invalid(
                        "input",
                        format!("content parts of type {kind:?} are not supported; send text"),
                    )),
                }
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|texts| texts.join("\n")),
        _ => Err(OpenAiError::invalid(
            "input",
            "a message's content is a text or a list of text parts",
        )),
    }
}

fn decision(item: &Value) -> Result<Decision, OpenAiError> {
    let id = item
        .get("approval_request_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let call = ids::parse_approval(id).ok_or_else(|| {
        OpenAiError::invalid(
            "input",
            format!("approval_request_id {id:?} names no approval request"),
        )
    })?;
    let approve = item
        .get("approve")
        .and_then(Value::as_bool)
        .ok_or_else(|| {
            OpenAiError::invalid(
                "input",
                "an mcp_approval_response needs approve: true or false",
            )
        })?;
    Ok(Decision { call, approve })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(body: Value) -> Result<Checked, OpenAiError> {
        serde_json::from_value::<CreateResponse>(body)
            .unwrap()
            .check(100)
    }

    #[test]
    fn a_text_input_is_the_question_and_defaults_apply() {
        let checked = check(serde_json::json!({
            "model": "maitred", "input": " How many tables? ", "temperature": 0.3,
            "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": []
        }))
        .unwrap();
        assert_eq!(
            checked.asked,
            Asked::Question {
                history: Vec::new(),
                question: "How many tables?".into()
            }
        );
        assert!(checked.store && !checked.stream && !checked.background);
    }

    #[test]
    fn the_last_user_message_is_the_question_and_the_rest_history() {
        let checked = check(serde_json::json!({
            "model": "maitred",
            "input": [
                {"role": "developer", "content": "Be brief."},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "I am Ada."}]},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello Ada.", "annotations": []}]},
                {"type": "mcp_call", "id": "mcp_x", "server_label": "resos", "name": "getTables", "arguments": "{}"},
                {"role": "user", "content": "Who am I?"}
            ]
        }))
        .unwrap();
        let Asked::Question { history, question } = checked.asked else {
            panic!("a question");
        };
        assert_eq!(question, "Who am I?");
        assert_eq!(history.len(), 3);
        assert_eq!(
            history[0],
            Message::System {
                content: "Be brief.".into()
            }
        );
    }

    #[test]
    fn approval_responses_are_decisions_on_the_calls_they_name() {
        let call = ToolCallId::new();
        let checked = check(serde_json::json!({
            "model": "maitred",
            "previous_response_id": "resp_x",
            "input": [
                {"role": "user", "content": "Book it"},
                {"type": "mcp_approval_response", "approval_request_id": ids::approval_item(&call), "approve": true}
            ]
        }))
        .unwrap();
        assert_eq!(
            checked.asked,
            Asked::Decisions(vec![Decision {
                call,
                approve: true
            }])
        );
    }

    #[test]
    fn what_this_api_cannot_honour_is_refused() {
        for body in [
            serde_json::json!({"model": "maitred"}),
            serde_json::json!({"model": "maitred", "input": "  "}),
            serde_json::json!({"model": "maitred", "input": []}),
            serde_json::json!({"model": "maitred", "input": [{"role": "assistant", "content": "x"}]}),
            serde_json::json!({"model": "maitred", "input": "x", "tools": [{"type": "mcp", "server_label": "x"}]}),
            serde_json::json!({"model": "maitred", "input": "x", "conversation": "conv_1"}),
            serde_json::json!({"model": "maitred", "input": "x", "background": true, "store": false}),
            serde_json::json!({"model": "maitred", "input": "x", "metadata": {"k": 1}}),
            serde_json::json!({"model": "maitred", "input": "x".repeat(101)}),
            serde_json::json!({"model": "maitred", "input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]}),
            serde_json::json!({"model": "maitred", "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}),
            serde_json::json!({"model": "maitred", "input": [{"type": "mcp_approval_response", "approval_request_id": "tc_1", "approve": true}]}),
            serde_json::json!({"model": "maitred", "input": [{"type": "mcp_approval_response", "approval_request_id": ids::approval_item(&ToolCallId::new())}]}),
        ] {
            assert!(check(body.clone()).is_err(), "{body}");
        }
    }
}
