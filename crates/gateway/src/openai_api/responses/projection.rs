//! A response is a projection of its answer's logged events (the chat stream's
//! `ChatEvent`s, numbered from 1): replayed in order from the first, they give the
//! Responses stream's events and, at any point, the `response` object as it stands.
//! The projection depends on nothing but the events, so every replica, now or
//! later, from the live log or from the copy kept once the answer ended, projects
//! the same events with the same `sequence_number`s (counted from 0 over the
//! projected events): a stream can be continued after any of them, anywhere.
//!
//! How the chat events map:
//!
//! - the first event (`meta`): `response.created`, `response.in_progress`;
//! - `token`: text of a `message` item (`output_item.added`, `content_part.added`,
//!   then `output_text.delta`s), closed (`output_text.done`, `content_part.done`,
//!   `output_item.done`) when another item comes or the answer ends;
//! - `tool_call`: held until the next event about that call, because only then is
//!   it known whether the call runs or waits for the person: `approval_required`
//!   makes it an `mcp_approval_request` item; anything else (its progress, its
//!   `tool_result`) shows it as an `mcp_call` item (`output_item.added`,
//!   `mcp_call.in_progress`, `mcp_call_arguments.delta/done`), which its
//!   `tool_result` ends (`mcp_call.completed` or `.failed`, `output_item.done`);
//! - `usage`, `error`: kept for the `response` object;
//! - `done`: the open items closed, then `response.completed`, `.failed` or
//!   `.incomplete` (out of model turns, or cancelled) with the whole object;
//! - every other event (a budget's state, a takeover, input requests, and events
//!   this code does not know) has no counterpart, and is skipped.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::ids;
use super::objects::{
    ApprovalRequestItem, Incomplete, ItemStatus, McpCallItem, McpError, MessageItem, Numbered,
    OutputItem, OutputText, ResponseError, ResponseObject, Status, Stored, StreamEvent, Usage,
};
use crate::live::LoggedEvent;
use maitred_protocol::events::{
    ApprovalRequiredEvent, ChatEvent, ErrorEvent, Finish, ToolCallEvent, ToolResultEvent,
};
use maitred_protocol::ids::{CallStatus, ConversationId, MessageId, ToolCallId};

/// What the response's record says of it, echoed in every `response` object.
#[derive(Debug, Clone, PartialEq)]
pub struct Head {
    pub message: MessageId,
    pub conversation: ConversationId,
    /// Unix seconds.
    pub created_at: i64,
    pub model: String,
    pub instructions: Option<String>,
    pub metadata: Map<String, Value>,
    pub previous: Option<MessageId>,
    pub background: bool,
    pub store: bool,
    /// The calls whose approval requests this response was created to answer.
    pub decided: Vec<ToolCallId>,
}

pub struct Projection {
    head: Head,
    /// The next event's `sequence_number`.
    next: u64,
    began: bool,
    output: Vec<OutputItem>,
    /// The `message` item text goes to, while one is open.
    open_text: Option<usize>,
    /// Calls announced and not shown yet, in order.
    held: Vec<ToolCallEvent>,
    /// Calls shown, by id: their place in `output`.
    calls: HashMap<ToolCallId, usize>,
    usage: Option<Usage>,
    error: Option<ErrorEvent>,
    /// The window of the last budget reported (`daily`, `monthly`, `total`).
    budget_window: Option<String>,
    end: Option<Finish>,
}

impl Projection {
    pub fn new(head: Head) -> Self {
        Self {
            head,
            next: 0,
            began: false,
            output: Vec::new(),
            open_text: None,
            held: Vec::new(),
            calls: HashMap::new(),
            usage: None,
            error: None,
            budget_window: None,
            end: None,
        }
    }

    /// The projection of `events`, from the first.
    pub fn of(head: Head, events: &[LoggedEvent]) -> Self {
        let mut projection = Self::new(head);
        for event in events {
            projection.event(event);
        }
        projection
    }

    pub fn head(&self) -> &Head {
        &self.head
    }

    /// Whether the answer has ended (its `done` was projected).
    pub fn ended(&self) -> bool {
        self.end.is_some()
    }

    /// The events one logged event becomes (none for most).
    pub fn event(&mut self, logged: &LoggedEvent) -> Vec<Numbered> {
        let mut out = Vec::new();
        if self.end.is_some() {
            return out;
        }
        if !self.began {
            self.began = true;
            let response = Box::new(self.response());
            self.emit(
                &mut out,
                StreamEvent::Created {
                    response: response.clone(),
                },
            );
            self.emit(&mut out, StreamEvent::InProgress { response });
        }
        // An event this code does not know (a later version's) is skipped.
        let Some(event) = logged.event() else {
            return out;
        };
        match event {
            ChatEvent::Token(token) => self.text(token.text, &mut out),
            ChatEvent::ToolCall(call) => self.held.push(call),
            ChatEvent::ApprovalRequired(asked) => self.asked(asked, &mut out),
            ChatEvent::ToolProgress(progress) => self.reveal(&progress.id, &mut out),
            ChatEvent::InputRequired(input) => self.reveal(&input.tool_call_id, &mut out),
            ChatEvent::ToolResult(result) => self.result(result, &mut out),
            ChatEvent::Usage(usage) => {
                self.usage = Some(Usage::new(
                    usage.prompt_tokens,
                    usage.completion_tokens,
                    usage.total_tokens,
                ));
            }
            ChatEvent::Budget(budget) => self.budget_window = Some(budget.window),
            ChatEvent::Error(error) => self.error = Some(error),
            ChatEvent::Done(done) => self.done(done.finish_reason, &mut out),
            _ => {}
        }
        out
    }

    fn emit(&mut self, out: &mut Vec<Numbered>, event: StreamEvent) {
        out.push(Numbered {
            event,
            sequence_number: self.next,
        });
        self.next += 1;
    }

    fn text(&mut self, delta: String, out: &mut Vec<Numbered>) {
        let index = match self.open_text {
            Some(index) => index,
            None => {
                let index = self.output.len();
                let id = ids::message_item(&self.head.message, index);
                let item = MessageItem {
                    id: id.clone(),
                    role: "assistant",
                    status: ItemStatus::InProgress,
                    content: Vec::new(),
                };
                self.output.push(OutputItem::Message(item.clone()));
                self.emit(
                    out,
                    StreamEvent::ItemAdded {
                        output_index: index,
                        item: OutputItem::Message(item),
                    },
                );
                if let Some(OutputItem::Message(item)) = self.output.get_mut(index) {
                    item.content.push(OutputText::new(String::new()));
                }
                self.emit(
                    out,
                    StreamEvent::PartAdded {
                        item_id: id,
                        output_index: index,
                        content_index: 0,
                        part: OutputText::new(String::new()),
                    },
                );
                self.open_text = Some(index);
                index
            }
        };
        let Some(OutputItem::Message(item)) = self.output.get_mut(index) else {
            return;
        };
        let id = item.id.clone();
        if let Some(part) = item.content.first_mut() {
            part.text.push_str(&delta);
        }
        self.emit(
            out,
            StreamEvent::TextDelta {
                item_id: id,
                output_index: index,
                content_index: 0,
                delta,
                logprobs: Vec::new(),
            },
        );
    }

    /// Ends the open `message` item, if any, as `status`.
    fn close_text(&mut self, status: ItemStatus, out: &mut Vec<Numbered>) {
        let Some(index) = self.open_text.take() else {
            return;
        };
        let Some(OutputItem::Message(item)) = self.output.get_mut(index) else {
            return;
        };
        item.status = status;
        let (id, part) = (
            item.id.clone(),
            item.content
                .first()
                .cloned()
                .unwrap_or_else(|| OutputText::new(String::new())),
        );
        let done = OutputItem::Message(item.clone());
        self.emit(
            out,
            StreamEvent::TextDone {
                item_id: id.clone(),
                output_index: index,
                content_index: 0,
                text: part.text.clone(),
                logprobs: Vec::new(),
            },
        );
        self.emit(
            out,
            StreamEvent::PartDone {
                item_id: id,
                output_index: index,
                content_index: 0,
                part,
            },
        );
        self.emit(
            out,
            StreamEvent::ItemDone {
                output_index: index,
                item: done,
            },
        );
    }

    /// Takes call `id` out of the held ones.
    fn unhold(&mut self, id: &ToolCallId) -> Option<ToolCallEvent> {
        let at = self.held.iter().position(|call| &call.id == id)?;
        Some(self.held.remove(at))
    }

    /// Shows a held call as an `mcp_call` item that runs.
    fn reveal(&mut self, id: &ToolCallId, out: &mut Vec<Numbered>) {
        let Some(call) = self.unhold(id) else {
            return;
        };
        self.close_text(ItemStatus::Completed, out);
        let index = self.output.len();
        let item_id = ids::call_item(&call.id);
        let arguments = arguments(&call.arguments);
        let item = McpCallItem {
            id: item_id.clone(),
            server_label: call.server,
            name: call.tool,
            arguments: String::new(),
            output: None,
            error: None,
            status: ItemStatus::InProgress,
            approval_request_id: self
                .head
                .decided
                .contains(&call.id)
                .then(|| ids::approval_item(&call.id)),
        };
        self.output.push(OutputItem::McpCall(item.clone()));
        self.calls.insert(call.id, index);
        self.emit(
            out,
            StreamEvent::ItemAdded {
                output_index: index,
                item: OutputItem::McpCall(item),
            },
        );
        self.emit(
            out,
            StreamEvent::McpCallInProgress {
                item_id: item_id.clone(),
                output_index: index,
            },
        );
        self.emit(
            out,
            StreamEvent::McpArgumentsDelta {
                item_id: item_id.clone(),
                output_index: index,
                delta: arguments.clone(),
            },
        );
        if let Some(OutputItem::McpCall(item)) = self.output.get_mut(index) {
            item.arguments.clone_from(&arguments);
        }
        self.emit(
            out,
            StreamEvent::McpArgumentsDone {
                item_id,
                output_index: index,
                arguments,
            },
        );
    }

    /// A call that waits for the person: an `mcp_approval_request` item.
    fn asked(&mut self, asked: ApprovalRequiredEvent, out: &mut Vec<Numbered>) {
        self.unhold(&asked.id);
        self.close_text(ItemStatus::Completed, out);
        let index = self.output.len();
        let item = OutputItem::McpApprovalRequest(ApprovalRequestItem {
            id: ids::approval_item(&asked.id),
            server_label: asked.server,
            name: asked.tool,
            arguments: arguments(&asked.arguments),
        });
        self.output.push(item.clone());
        self.emit(
            out,
            StreamEvent::ItemAdded {
                output_index: index,
                item: item.clone(),
            },
        );
        self.emit(
            out,
            StreamEvent::ItemDone {
                output_index: index,
                item,
            },
        );
    }

    fn result(&mut self, result: ToolResultEvent, out: &mut Vec<Numbered>) {
        self.reveal(&result.id, out);
        // A result of a call never announced (its answer was taken over before the
        // call was shown again) has no item to end.
        let Some(&index) = self.calls.get(&result.id) else {
            return;
        };
        let Some(OutputItem::McpCall(item)) = self.output.get_mut(index) else {
            return;
        };
        let ok = result.status == CallStatus::Ok;
        if ok {
            item.status = ItemStatus::Completed;
            item.output = Some(result.summary);
        } else {
            item.status = ItemStatus::Failed;
            item.error = Some(McpError::text(result.summary));
        }
        let (item_id, done) = (item.id.clone(), OutputItem::McpCall(item.clone()));
        let ended = if ok {
            StreamEvent::McpCallCompleted {
                item_id,
                output_index: index,
            }
        } else {
            StreamEvent::McpCallFailed {
                item_id,
                output_index: index,
            }
        };
        self.emit(out, ended);
        self.emit(
            out,
            StreamEvent::ItemDone {
                output_index: index,
                item: done,
            },
        );
    }

    fn done(&mut self, finish: Finish, out: &mut Vec<Numbered>) {
        let cut = self.error.is_some() || finish != Finish::Stop;
        self.close_text(
            if cut {
                ItemStatus::Incomplete
            } else {
                ItemStatus::Completed
            },
            out,
        );
        // Calls still held never ran to a result: they end unfinished.
        for call in std::mem::take(&mut self.held) {
            let id = call.id.clone();
            self.held.push(call);
            self.reveal(&id, out);
            if let Some(&index) = self.calls.get(&id)
                && let Some(OutputItem::McpCall(item)) = self.output.get_mut(index)
            {
                item.status = ItemStatus::Incomplete;
                let done = OutputItem::McpCall(item.clone());
                self.emit(
                    out,
                    StreamEvent::ItemDone {
                        output_index: index,
                        item: done,
                    },
                );
            }
        }
        self.end = Some(finish);
        let response = Box::new(self.response());
        let last = match response.status {
            Status::Completed => StreamEvent::Completed { response },
            Status::Failed => StreamEvent::Failed { response },
            Status::InProgress | Status::Incomplete | Status::Cancelled => {
                StreamEvent::Incomplete { response }
            }
        };
        self.emit(out, last);
    }

    pub fn status(&self) -> Status {
        match &self.end {
            None => Status::InProgress,
            Some(_) if self.error.is_some() => Status::Failed,
            Some(Finish::Stop) => Status::Completed,
            Some(Finish::MaxIterations) => Status::Incomplete,
            Some(Finish::Cancelled) => Status::Cancelled,
            Some(Finish::Error) => Status::Failed,
        }
    }

    /// The answer was refused for a spent budget: its message, and the window of the
    /// budget (for when to come back).
    pub fn budget_refusal(&self) -> Option<(&str, Option<&str>)> {
        self.error
            .as_ref()
            .filter(|error| error.code == "budget")
            .map(|error| (error.message.as_str(), self.budget_window.as_deref()))
    }

    /// The `response` object as it stands.
    pub fn response(&self) -> ResponseObject {
        let head = &self.head;
        let status = self.status();
        ResponseObject {
            id: ids::response(&head.message),
            object: "response",
            created_at: head.created_at,
            status,
            background: head.background,
            error: self
                .error
                .as_ref()
                .filter(|_| self.end.is_some())
                .map(|error| ResponseError {
                    code: if error.code == "budget" {
                        "rate_limit_exceeded"
                    } else {
                        "server_error"
                    },
                    message: error.message.clone(),
                    kind: error.code.clone(),
                    param: None,
                }),
            incomplete_details: (status == Status::Incomplete).then_some(Incomplete {
                reason: "max_output_tokens",
            }),
            instructions: head.instructions.clone(),
            max_output_tokens: None,
            max_tool_calls: None,
            metadata: head.metadata.clone(),
            model: head.model.clone(),
            output: self.output.clone(),
            parallel_tool_calls: true,
            previous_response_id: head.previous.as_ref().map(ids::response),
            reasoning: None,
            store: head.store,
            temperature: None,
            text: serde_json::json!({ "format": { "type": "text" } }),
            tool_choice: "auto",
            tools: Vec::new(),
            top_p: None,
            truncation: "disabled",
            usage: self.usage,
            user: None,
            maitred: Stored {
                conversation_id: head.conversation.clone(),
                message_id: head.message.clone(),
            },
        }
    }
}

/// A call's arguments as the JSON text OpenAI's items carry.
fn arguments(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "{}".to_owned())
}

#[cfg(test)]
mod tests;
