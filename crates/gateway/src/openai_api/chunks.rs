//! What goes out: an answer's events (the chat stream's `ChatEvent`s) turned
//! into OpenAI's `chat.completion.chunk`s, or gathered into one `chat.completion`;
//! and the model list.
//!
//! Tool activity rides on an extra field, `maitred`, that OpenAI clients ignore:
//! `{"tool_call": {"id","server","tool","title","arguments"}}` as a call starts and
//! `{"tool_result": {"id","server","tool","status","duration_ms","summary"}}` as it
//! ends, and `{"grounding": {"claims": […]}}` after the answer's text (its figures
//! checked against those results, as the chat stream's `grounding` event), each on a
//! chunk whose `delta` is empty; the first chunk's names the stored conversation and
//! message.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use super::errors::ErrorBody;
use crate::live::LoggedEvent;
use maitred_protocol::events::{ChatEvent, Finish};
use maitred_protocol::ids::{ConversationId, MessageId, ToolCallId};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chunk {
    pub id: String,
    pub object: &'static str,
    pub created: i64,
    pub model: String,
    pub choices: Vec<ChunkChoice>,
    /// Only on the last chunk, with `stream_options.include_usage`: `null` when the
    /// model did not say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Option<Usage>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maitred: Option<Extra>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChunkChoice {
    pub index: u32,
    pub delta: Delta,
    pub logprobs: Option<Value>,
    pub finish_reason: Option<&'static str>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Delta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

/// maitred's extra field. A call and its result are the chat stream's events as JSON
/// objects (so with their keys in order of name), the result with its call's server
/// and tool added.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Extra {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<ConversationId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<MessageId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grounding: Option<Value>,
}

/// The non-streaming answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Completion {
    pub id: String,
    pub object: &'static str,
    pub created: i64,
    pub model: String,
    pub choices: Vec<CompletionChoice>,
    /// `null` when the model did not say.
    pub usage: Option<Usage>,
    pub maitred: CompletionExtra,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompletionChoice {
    pub index: u32,
    pub message: AssistantMessage,
    pub logprobs: Option<Value>,
    pub finish_reason: &'static str,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AssistantMessage {
    pub role: &'static str,
    pub content: String,
    pub refusal: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CompletionExtra {
    pub conversation_id: Option<ConversationId>,
    pub message_id: Option<MessageId>,
    /// The tool activity in order: `{"tool_call": …}` and `{"tool_result": …}` objects,
    /// as on the streamed chunks.
    pub tool_activity: Vec<Value>,
    /// The answer's claims checked against its tool results (`{"claims": […]}`),
    /// offsets in code points of `content`; `null` when the answer has none checked.
    pub grounding: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelList {
    pub object: &'static str,
    pub data: Vec<ModelObject>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelObject {
    pub id: String,
    pub object: &'static str,
    pub created: i64,
    pub owned_by: &'static str,
}

/// OpenAI's code for a rate limit; a spent budget is one.
const RATE_LIMITED: &str = "rate_limit_exceeded";

/// What an answer's event becomes.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    Chunk(Chunk),
    /// The answer failed: sent as `data: {"error": …}` in a stream.
    Error(ErrorBody),
}

/// Turns one answer's events, in order, into chunks.
pub struct Translator {
    id: String,
    created: i64,
    model: String,
    include_usage: bool,
    began: bool,
    usage: Option<Usage>,
    error: Option<ErrorBody>,
    /// The window of the budget the answer was last told about (for when a
    /// refused one renews).
    budget_window: Option<String>,
    /// Calls by id: their server and tool, repeated on their results.
    calls: HashMap<ToolCallId, (String, String)>,
    /// Code points of `content` so far, and where the text after the latest tool
    /// activity (the final turn's, which claims count from) starts.
    written: u64,
    turn_start: u64,
    after_tool: bool,
}

impl Translator {
    pub fn new(id: String, created: i64, model: String, include_usage: bool) -> Self {
        Self {
            id,
            created,
            model,
            include_usage,
            began: false,
            usage: None,
            error: None,
            budget_window: None,
            calls: HashMap::new(),
            written: 0,
            turn_start: 0,
            after_tool: false,
        }
    }

    fn chunk(&self, delta: Delta, finish_reason: Option<&'static str>) -> Chunk {
        Chunk {
            id: self.id.clone(),
            object: "chat.completion.chunk",
            created: self.created,
            model: self.model.clone(),
            choices: vec![ChunkChoice {
                index: 0,
                delta,
                logprobs: None,
                finish_reason,
            }],
            usage: None,
            maitred: None,
        }
    }

    fn with_extra(&self, extra: Extra) -> Chunk {
        Chunk {
            maitred: Some(extra),
            ..self.chunk(Delta::default(), None)
        }
    }

    /// The chunks for one event (none for most of what only the chat API shows).
    pub fn event(&mut self, event: &LoggedEvent) -> Vec<Out> {
        // The log holds only events the gateway wrote; one it cannot read is skipped.
        match ChatEvent::from_frame(&event.name, &event.data) {
            Ok(event) => self.chat_event(event),
            Err(error) => {
                tracing::warn!(%error, "an answer's event is not a chat event");
                Vec::new()
            }
        }
    }

    fn chat_event(&mut self, event: ChatEvent) -> Vec<Out> {
        match event {
            // A later `meta` (a fallback model took over) changes nothing here.
            ChatEvent::Meta(meta) if !self.began => {
                self.began = true;
                let mut first = self.chunk(
                    Delta {
                        role: Some("assistant"),
                        content: Some(String::new()),
                    },
                    None,
                );
                first.maitred = Some(Extra {
                    conversation_id: Some(meta.conversation_id),
                    message_id: Some(meta.message_id),
                    ..Extra::default()
                });
                vec![Out::Chunk(first)]
            }
            ChatEvent::Token(token) => {
                if self.after_tool {
                    self.turn_start = self.written;
                    self.after_tool = false;
                }
                self.written += token.text.chars().count() as u64;
                vec![Out::Chunk(self.chunk(
                    Delta {
                        role: None,
                        content: Some(token.text),
                    },
                    None,
                ))]
            }
            ChatEvent::ToolCall(call) => {
                self.after_tool = true;
                self.calls
                    .insert(call.id.clone(), (call.server.clone(), call.tool.clone()));
                vec![Out::Chunk(self.with_extra(Extra {
                    tool_call: Some(json_object(&call)),
                    ..Extra::default()
                }))]
            }
            ChatEvent::ToolResult(result) => {
                self.after_tool = true;
                let mut shown = json_object(&result);
                if let (Some((server, tool)), Some(fields)) =
                    (self.calls.get(&result.id), shown.as_object_mut())
                {
                    fields.insert("server".to_owned(), Value::from(server.as_str()));
                    fields.insert("tool".to_owned(), Value::from(tool.as_str()));
                }
                vec![Out::Chunk(self.with_extra(Extra {
                    tool_result: Some(shown),
                    ..Extra::default()
                }))]
            }
            ChatEvent::Grounding(mut grounding) => {
                // The stream's offsets count from the final turn's text; here, from
                // the start of `content`, which holds every turn's.
                for claim in &mut grounding.claims {
                    claim.start += self.turn_start;
                    claim.end += self.turn_start;
                }
                vec![Out::Chunk(self.with_extra(Extra {
                    grounding: Some(json_object(&grounding)),
                    ..Extra::default()
                }))]
            }
            ChatEvent::Usage(usage) => {
                self.usage = Some(Usage {
                    prompt_tokens: usage.prompt_tokens,
                    completion_tokens: usage.completion_tokens,
                    total_tokens: usage.total_tokens,
                });
                Vec::new()
            }
            // A spent budget is a rate limit, as OpenAI names one (a 429 when the
            // whole answer is awaited): clients wait instead of retrying at once.
            ChatEvent::Error(error) if error.code == "budget" => {
                self.error = Some(ErrorBody {
                    message: error.message,
                    kind: "requests",
                    param: None,
                    code: Some(RATE_LIMITED.to_owned()),
                });
                Vec::new()
            }
            ChatEvent::Error(error) => {
                self.error = Some(ErrorBody {
                    message: error.message,
                    kind: "server_error",
                    param: None,
                    code: Some(error.code),
                });
                Vec::new()
            }
            ChatEvent::Budget(budget) => {
                self.budget_window = Some(budget.window);
                Vec::new()
            }
            ChatEvent::Done(done) => self.done(&done.finish_reason),
            ChatEvent::Meta(_)
            | ChatEvent::ApprovalRequired(_)
            | ChatEvent::InputRequired(_)
            | ChatEvent::InputResolved(_)
            | ChatEvent::ToolProgress(_)
            // Answers of this API are not taken over (nobody can come back to them).
            | ChatEvent::Resumed(_) => Vec::new(),
        }
    }

    fn done(&self, finish: &Finish) -> Vec<Out> {
        if let Some(error) = &self.error {
            return vec![Out::Error(error.clone())];
        }
        // The turn budget ran out before a final answer: the nearest OpenAI reason.
        let reason = match finish {
            Finish::MaxIterations => "length",
            Finish::Stop | Finish::Cancelled | Finish::Error => "stop",
        };
        let mut out = vec![Out::Chunk(self.chunk(Delta::default(), Some(reason)))];
        if self.include_usage {
            out.push(Out::Chunk(Chunk {
                choices: Vec::new(),
                usage: Some(self.usage),
                ..self.chunk(Delta::default(), None)
            }));
        }
        out
    }

    /// The answer was refused for a spent budget: its message, and the window of the
    /// budget (for when to come back).
    pub fn budget_refusal(&self) -> Option<(&str, Option<&str>)> {
        self.error
            .as_ref()
            .filter(|error| error.code.as_deref() == Some(RATE_LIMITED))
            .map(|error| (error.message.as_str(), self.budget_window.as_deref()))
    }

    /// Gathers every chunk into one `chat.completion`; `Err` when the answer failed.
    pub fn complete(&self, outs: Vec<Out>) -> Result<Completion, ErrorBody> {
        let mut content = String::new();
        let mut finish_reason = "stop";
        let mut extra = CompletionExtra::default();
        for out in outs {
            let chunk = match out {
                Out::Chunk(chunk) => chunk,
                Out::Error(error) => return Err(error),
            };
            for choice in chunk.choices {
                content.push_str(choice.delta.content.as_deref().unwrap_or_default());
                if let Some(reason) = choice.finish_reason {
                    finish_reason = reason;
                }
            }
            if let Some(more) = chunk.maitred {
                if more.conversation_id.is_some() {
                    extra.conversation_id = more.conversation_id;
                    extra.message_id = more.message_id;
                }
                if let Some(call) = more.tool_call {
                    extra
                        .tool_activity
                        .push(serde_json::json!({ "tool_call": call }));
                }
                if let Some(result) = more.tool_result {
                    extra
                        .tool_activity
                        .push(serde_json::json!({ "tool_result": result }));
                }
                if more.grounding.is_some() {
                    extra.grounding = more.grounding;
                }
            }
        }
        Ok(Completion {
            id: self.id.clone(),
            object: "chat.completion",
            created: self.created,
            model: self.model.clone(),
            choices: vec![CompletionChoice {
                index: 0,
                message: AssistantMessage {
                    role: "assistant",
                    content,
                    refusal: None,
                },
                logprobs: None,
                finish_reason,
            }],
            usage: self.usage,
            maitred: extra,
        })
    }
}

/// An event of ours as a JSON object: serializing our own types cannot fail.
fn json_object(event: &impl Serialize) -> Value {
    serde_json::to_value(event).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use maitred_protocol::events::{
        DoneEvent, TokenEvent, ToolCallEvent, ToolResultEvent, UsageEvent,
    };
    use maitred_protocol::ids::CallStatus;

    fn logged(events: Vec<ChatEvent>) -> Vec<LoggedEvent> {
        events
            .iter()
            .enumerate()
            .map(|(i, e)| LoggedEvent::new(i as u64 + 1, e))
            .collect()
    }

    #[test]
    fn tool_activity_rides_on_empty_deltas_and_usage_comes_last() {
        let call = ToolCallId::new();
        let events = logged(vec![
            ChatEvent::ToolCall(ToolCallEvent {
                id: call.clone(),
                server: "resos".into(),
                tool: "getTables".into(),
                title: "Looking up tables".into(),
                arguments: serde_json::json!({}),
                acting_as: None,
            }),
            ChatEvent::ToolResult(ToolResultEvent {
                id: call,
                status: CallStatus::Ok,
                duration_ms: 3,
                summary: "20 tables".into(),
            }),
            ChatEvent::Token(TokenEvent {
                text: "Twenty.".into(),
            }),
            ChatEvent::Usage(UsageEvent {
                prompt_tokens: 5,
                completion_tokens: 2,
                total_tokens: 7,
            }),
            ChatEvent::Done(DoneEvent {
                finish_reason: Finish::Stop,
            }),
        ]);
        let mut translator = Translator::new("chatcmpl-x".into(), 1, "maitred".into(), true);
        let outs: Vec<Out> = events.iter().flat_map(|e| translator.event(e)).collect();
        let chunks: Vec<Value> = outs
            .iter()
            .map(|o| match o {
                Out::Chunk(c) => serde_json::to_value(c).unwrap(),
                Out::Error(_) => panic!("no error"),
            })
            .collect();
        assert_eq!(chunks.len(), 5);
        assert_eq!(chunks[0]["choices"][0]["delta"], serde_json::json!({}));
        assert_eq!(chunks[0]["maitred"]["tool_call"]["tool"], "getTables");
        assert_eq!(chunks[1]["maitred"]["tool_result"]["tool"], "getTables");
        assert_eq!(chunks[1]["maitred"]["tool_result"]["status"], "ok");
        assert_eq!(chunks[2]["choices"][0]["delta"]["content"], "Twenty.");
        assert_eq!(chunks[3]["choices"][0]["finish_reason"], "stop");
        assert!(chunks[3].get("usage").is_none());
        assert_eq!(chunks[4]["choices"], serde_json::json!([]));
        assert_eq!(chunks[4]["usage"]["total_tokens"], 7);
        let completion = translator.complete(outs).unwrap();
        assert_eq!(completion.choices[0].message.content, "Twenty.");
        assert_eq!(completion.maitred.tool_activity.len(), 2);
    }
}
