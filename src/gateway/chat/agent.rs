//! The tool loop of one question: stream the model's answer, run the tools it asks
//! for (concurrently, each through validation, policy, approval and the MCP call),
//! give it the results, and repeat until it stops or the turn budget is spent.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::Value;

use super::approvals::{Approvals, Outcome, Request};
use super::assemble::Assembler;
use super::events::{ChatEvent, Finish, ToolStatus};
use super::generation::Generation;
use super::present;
use super::store::{NewMessage, Store};
use crate::config::GatewaySettings;
use crate::gateway::GatewayError;
use crate::gateway::auth::ChatUser;
use crate::gateway::llm::router::{ModelRouter, Note};
use crate::gateway::llm::{
    ChatRequest, FinishReason, Message, ModelError, ModelEvent, ToolCall, Usage,
};
use crate::gateway::metrics::{FallbackLabels, GatewayMetrics, ModelLabels, ToolLabels};
use crate::gateway::tools::policy::ToolPolicy;
use crate::gateway::tools::{CallContext, CallOutcome, Catalogue, ToolHub};
use crate::trace_context::TraceContext;

/// How often streamed text is written to the database while a turn runs.
const FLUSH_EVERY: Duration = Duration::from_secs(2);

/// An answer's stored row, being inserted in the background so that storing it
/// does not delay the first token.
struct AnswerRow {
    insert: Option<tokio::task::JoinHandle<Result<String, GatewayError>>>,
    id: Option<String>,
}

impl AnswerRow {
    fn insert(store: &Store, generation: &Generation, model: &str) -> Self {
        let (store, conversation, generation_id, model) = (
            store.clone(),
            generation.conversation_id.clone(),
            generation.id.clone(),
            model.to_owned(),
        );
        let insert = tokio::spawn(async move {
            store
                .append(
                    &conversation,
                    NewMessage {
                        generation_id: Some(&generation_id),
                        role: "assistant",
                        content: Some(""),
                        tool_calls: &[],
                        tool_call_id: None,
                        status: "streaming",
                        model: Some(&model),
                    },
                )
                .await
        });
        Self {
            insert: Some(insert),
            id: None,
        }
    }

    /// The row's id, once it is written; a failed write ends the answer.
    async fn id(&mut self) -> Result<&str, Stop> {
        if let Some(insert) = self.insert.take() {
            let stored = insert
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| e.to_string()));
            match stored {
                Ok(id) => self.id = Some(id),
                Err(error) => {
                    return Err(Stop::Failed(ModelError::Protocol(format!(
                        "storing the answer: {error}"
                    ))));
                }
            }
        }
        self.id
            .as_deref()
            .ok_or_else(|| Stop::Failed(ModelError::Protocol("storing the answer failed".into())))
    }
}

pub struct Agent {
    pub models: ModelRouter,
    pub policy: ToolPolicy,
    pub metrics: GatewayMetrics,
    pub tools: Arc<ToolHub>,
    pub store: Store,
    pub approvals: Arc<Approvals>,
    pub settings: GatewaySettings,
}

/// Why a run ended early.
enum Stop {
    Cancelled,
    Failed(ModelError),
}

impl From<ModelError> for Stop {
    fn from(error: ModelError) -> Self {
        Stop::Failed(error)
    }
}

/// What the loop hands on between turns.
struct Run<'a> {
    generation: &'a Generation,
    user: &'a ChatUser,
    messages: Vec<Message>,
    usage: Usage,
    /// The model that answered last (a fallback, when the primary could not).
    model: String,
    /// The question's place in its trace, continued by every tool call.
    trace: TraceContext,
}

impl Agent {
    pub fn system_prompt(&self) -> String {
        let today = chrono::Utc::now().date_naive();
        let template = self
            .settings
            .system_prompt
            .as_deref()
            .unwrap_or(DEFAULT_PROMPT);
        template
            .replace("{today}", &today.format("%Y-%m-%d").to_string())
            .replace("{weekday}", &today.format("%A").to_string())
    }

    /// Runs the question to its end; the last event it emits is `done`.
    pub async fn run(
        &self,
        generation: &Generation,
        user: &ChatUser,
        history: Vec<Message>,
        question: String,
        trace: TraceContext,
    ) {
        let mut messages = vec![Message::System {
            content: self.system_prompt(),
        }];
        messages.extend(history);
        messages.push(Message::User { content: question });
        let mut run = Run {
            generation,
            user,
            messages,
            usage: Usage::default(),
            model: self.models.primary().to_owned(),
            trace,
        };
        let finish = match self.turns(&mut run).await {
            Ok(finish) => finish,
            Err(Stop::Cancelled) if generation.is_interrupted() => {
                generation.emit(ChatEvent::Error {
                    code: "interrupted".to_owned(),
                    message: "The server is restarting, so this answer was cut short. Please ask again in a moment.".to_owned(),
                });
                Finish::Error
            }
            Err(Stop::Cancelled) => Finish::Cancelled,
            Err(Stop::Failed(error)) => {
                self.metrics.model_error(&run.model, &error);
                tracing::warn!(message_id = %generation.id, %error, "the model failed");
                generation.emit(ChatEvent::Error {
                    code: code(&error).to_owned(),
                    message: user_message(&error),
                });
                Finish::Error
            }
        };
        if matches!(finish, Finish::Cancelled | Finish::Error) {
            let status = if generation.is_interrupted() {
                "interrupted"
            } else {
                "cancelled"
            };
            if let Err(error) = self.store.abandon_tool_calls(&generation.id, status).await {
                tracing::error!(%error, "recording abandoned tool calls");
            }
        }
        if run.usage.total_tokens > 0 {
            let usage = run.usage;
            generation.emit(ChatEvent::Usage {
                prompt_tokens: usage.prompt_tokens,
                completion_tokens: usage.completion_tokens,
                total_tokens: usage.total_tokens,
            });
            if let Err(error) = self
                .store
                .usage(
                    &generation.id,
                    &generation.conversation_id,
                    &user.subject,
                    &run.model,
                    usage,
                )
                .await
            {
                tracing::error!(%error, "recording token usage");
            }
        }
        tracing::info!(
            finish_reason = ?finish,
            model = %run.model,
            total_tokens = run.usage.total_tokens,
            "answer finished"
        );
        generation.emit(ChatEvent::Done {
            finish_reason: finish,
        });
    }

    async fn turns(&self, run: &mut Run<'_>) -> Result<Finish, Stop> {
        let catalogue = self.tools.catalogue().await;
        // The model is offered only the tools this person may use.
        let policy = self.policy.for_roles(&run.user.roles);
        let tools: Vec<_> = catalogue
            .tools
            .iter()
            .filter(|t| policy.allows(t))
            .map(|t| t.def.clone())
            .collect();
        let mut budget = self.settings.file.limits.tool_calls_per_question;
        for turn in 0..self.settings.max_iterations {
            let (turn_id, calls) = self.model_turn(run, &tools, turn).await?;
            if calls.is_empty() {
                return Ok(Finish::Stop);
            }
            let allowed = calls.len().min(budget);
            budget -= allowed;
            let cancel = run.generation.cancel.clone();
            let results = tokio::select! {
                () = cancel.cancelled() => return Err(Stop::Cancelled),
                results = futures::future::join_all(calls.iter().enumerate().map(|(i, call)| {
                    let step = Step { catalogue: &catalogue, turn_id: &turn_id, within_budget: i < allowed, trace: &run.trace };
                    self.tool(run.generation, run.user, step, call)
                })) => results,
            };
            for (call, content) in calls.iter().zip(results) {
                let stored = self
                    .store
                    .append(
                        &run.generation.conversation_id,
                        NewMessage {
                            generation_id: Some(&run.generation.id),
                            role: "tool",
                            content: Some(&content),
                            tool_calls: &[],
                            tool_call_id: Some(&call.id),
                            status: "complete",
                            model: None,
                        },
                    )
                    .await;
                if let Err(error) = stored {
                    tracing::error!(%error, "storing a tool result");
                }
                run.messages.push(Message::Tool {
                    tool_call_id: call.id.clone(),
                    content,
                });
            }
        }
        let note = format!(
            "\n\n_Stopped after {} steps without a final answer._",
            self.settings.max_iterations
        );
        run.generation.emit(ChatEvent::Token { text: note.clone() });
        Ok(Finish::MaxIterations)
    }

    /// One streamed model turn; returns its stored row and the tool calls it asked for.
    async fn model_turn(
        &self,
        run: &mut Run<'_>,
        tools: &[crate::gateway::llm::ToolDef],
        turn: u32,
    ) -> Result<(String, Vec<ToolCall>), Stop> {
        let generation = run.generation;
        let cancel = generation.cancel.clone();
        let request = ChatRequest {
            messages: run.messages.clone(),
            tools: tools.to_vec(),
            temperature: None,
            max_tokens: None,
        };
        let mut notes = |note: Note<'_>| self.note(generation, note);
        let opened = tokio::select! {
            () = cancel.cancelled() => return Err(Stop::Cancelled),
            opened = self.models.open(&request, &mut notes) => opened?,
        };
        run.model = opened.model;
        let mut stream = opened.stream;
        // The first token is in hand: it goes out while the answer's row is written.
        let mut row = AnswerRow::insert(&self.store, generation, &run.model);
        let mut text = String::new();
        let mut assembler = Assembler::default();
        let mut flushed = Instant::now();
        let mut finished = None;
        let outcome: Result<(), Stop> = loop {
            let next = tokio::select! {
                () = cancel.cancelled() => break Err(Stop::Cancelled),
                next = stream.next() => next,
            };
            match next {
                None => break Ok(()),
                Some(Ok(ModelEvent::Text(fragment))) => {
                    text.push_str(&fragment);
                    generation.emit(ChatEvent::Token { text: fragment });
                    if flushed.elapsed() >= FLUSH_EVERY {
                        flushed = Instant::now();
                        match row.id().await {
                            Ok(id) => {
                                let _ = self.store.update(id, &text, &[], "streaming").await;
                            }
                            Err(stop) => break Err(stop),
                        }
                    }
                }
                Some(Ok(ModelEvent::ToolCallDelta {
                    index,
                    id,
                    name,
                    arguments,
                })) => {
                    assembler.push(index, id, name, arguments);
                }
                Some(Ok(ModelEvent::Usage(usage))) => {
                    run.usage.prompt_tokens += usage.prompt_tokens;
                    run.usage.completion_tokens += usage.completion_tokens;
                    run.usage.total_tokens += usage.total_tokens;
                }
                Some(Ok(ModelEvent::Finished(reason))) => finished = Some(reason),
                Some(Err(error)) => break Err(Stop::Failed(error)),
            }
        };
        // Dropping the stream closes the upstream request at once.
        drop(stream);
        let row = row.id().await?.to_owned();
        let calls = if outcome.is_ok() && !assembler.is_empty() {
            assembler.finish(&format!("{}-{turn}", generation.id))
        } else {
            Vec::new()
        };
        let status = match &outcome {
            Ok(()) => "complete",
            Err(Stop::Cancelled) if generation.is_interrupted() => "interrupted",
            Err(Stop::Cancelled) => "cancelled",
            Err(Stop::Failed(_)) => "error",
        };
        if let Err(error) = self.store.update(&row, &text, &calls, status).await {
            tracing::error!(%error, "storing the answer");
        }
        outcome?;
        // A stream that ends without a finish reason was cut short, however
        // complete its text may look.
        if finished.is_none() {
            let _ = self.store.update(&row, &text, &[], "error").await;
            return Err(Stop::Failed(ModelError::Protocol(
                "the stream ended before the model finished its answer".to_owned(),
            )));
        }
        if finished == Some(FinishReason::Length) {
            tracing::info!(message_id = %generation.id, "the model hit its token limit");
        }
        run.messages.push(Message::Assistant {
            content: (!text.is_empty()).then_some(text),
            tool_calls: calls.clone(),
        });
        Ok((row, calls))
    }

    /// Retries go to the log; a fallback is told to the viewers too, in a second
    /// `meta` naming the model that now answers.
    fn note(&self, generation: &Generation, note: Note<'_>) {
        match note {
            Note::Retry {
                model,
                attempt,
                delay,
                error,
            } => {
                self.metrics.model_error(model, error);
                self.metrics
                    .model_retries
                    .get_or_create(&ModelLabels {
                        model: model.to_owned(),
                    })
                    .inc();
                tracing::info!(message_id = %generation.id, model, attempt, delay_ms = delay.as_millis() as u64, %error, "retrying the model");
            }
            Note::Fallback { from, to, error } => {
                self.metrics.model_error(from, error);
                self.metrics
                    .model_fallbacks
                    .get_or_create(&FallbackLabels {
                        from: from.to_owned(),
                        to: to.to_owned(),
                    })
                    .inc();
                tracing::warn!(message_id = %generation.id, from, to, %error, "falling back to the next model");
                generation.emit(ChatEvent::Meta {
                    conversation_id: generation.conversation_id.clone(),
                    message_id: generation.id.clone(),
                    model: to.to_owned(),
                    fallback_from: Some(from.to_owned()),
                });
            }
        }
    }

    /// One tool call through the pipeline; returns what the model is told.
    async fn tool(
        &self,
        generation: &Generation,
        user: &ChatUser,
        step: Step<'_>,
        call: &ToolCall,
    ) -> String {
        let Step {
            catalogue,
            turn_id,
            within_budget,
            trace,
        } = step;
        let id = format!("tc_{}", uuid::Uuid::now_v7().simple());
        let mut started = Started {
            at: Instant::now(),
            server: String::new(),
            tool: "unknown".to_owned(),
        };
        let arguments: Result<Value, String> = if call.arguments.trim().is_empty() {
            Ok(Value::Object(Default::default()))
        } else {
            serde_json::from_str(&call.arguments)
                .map_err(|e| format!("the arguments are not valid JSON ({e})"))
        };
        let shown_arguments = arguments
            .clone()
            .unwrap_or_else(|_| Value::String(call.arguments.clone()));
        let Some(tool) = catalogue.find(&call.name) else {
            let available: Vec<&str> = catalogue.tools.iter().map(|t| t.exposed.as_str()).collect();
            generation.emit(ChatEvent::ToolCall {
                id: id.clone(),
                server: String::new(),
                tool: call.name.clone(),
                title: format!("Unknown tool {}", call.name),
                arguments: shown_arguments,
            });
            self.finish_tool(generation, &id, &started, ToolStatus::Error, "unknown tool")
                .await;
            return format!(
                "Error: there is no tool named {}. Available tools: {}.",
                call.name,
                available.join(", ")
            );
        };
        started.server.clone_from(&tool.server);
        started.tool.clone_from(&tool.tool);
        generation.emit(ChatEvent::ToolCall {
            id: id.clone(),
            server: tool.server.clone(),
            tool: tool.tool.clone(),
            title: present::title(&tool.title, &shown_arguments),
            arguments: shown_arguments.clone(),
        });
        if let Err(error) = self
            .store
            .tool_call_started(
                &id,
                &generation.id,
                &generation.conversation_id,
                turn_id,
                &call.id,
                &tool.server,
                &tool.tool,
                &shown_arguments,
            )
            .await
        {
            tracing::error!(%error, "recording a tool call");
        }
        let refusal = if within_budget {
            self.policy.for_roles(&user.roles).check(&tool).err()
        } else {
            Some(format!(
                "the limit of {} tool calls for one question is reached",
                self.settings.file.limits.tool_calls_per_question
            ))
        };
        if let Some(reason) = refusal {
            self.finish_tool(generation, &id, &started, ToolStatus::Denied, &reason)
                .await;
            return format!(
                "Not allowed: {reason}. Nothing was done. Answer with what you have, and tell the user what you could not do."
            );
        }
        let arguments = match arguments.and_then(|a| tool.validate(&a).map(|()| a)) {
            Ok(Value::Object(arguments)) => arguments,
            Ok(_) => {
                let message = "the arguments must be a JSON object".to_owned();
                return self
                    .refused(generation, &id, &started, &tool.exposed, &message)
                    .await;
            }
            Err(problem) => {
                return self
                    .refused(generation, &id, &started, &tool.exposed, &problem)
                    .await;
            }
        };
        if tool.needs_approval {
            let request = Request {
                id: &id,
                conversation: &generation.conversation_id,
                owner: &user.subject,
                server: &tool.server,
                tool: &tool.tool,
                arguments: &shown_arguments,
            };
            let outcome = match self.approvals.remembered(&request).await {
                Ok(true) => self
                    .approvals
                    .record_remembered(&request)
                    .await
                    .map(|()| Outcome::Remembered),
                Ok(false) => {
                    let expires_at = self.approvals.expires_at();
                    match self.approvals.open(&request, &expires_at).await {
                        Ok(decision) => {
                            generation.emit(ChatEvent::ApprovalRequired {
                                id: id.clone(),
                                server: tool.server.clone(),
                                tool: tool.tool.clone(),
                                title: present::title(&tool.title, &shown_arguments),
                                arguments: shown_arguments.clone(),
                                expires_at,
                            });
                            let _waiting = Waiting::on(&self.metrics.approvals_waiting);
                            self.approvals
                                .wait(&request, decision, &generation.cancel)
                                .await
                        }
                        Err(error) => Err(error),
                    }
                }
                Err(error) => Err(error),
            };
            let refusal = match outcome {
                Ok(Outcome::Approved | Outcome::Remembered) => None,
                Ok(Outcome::Denied) => Some("denied by the user"),
                Ok(Outcome::Expired) => Some("not approved in time"),
                Ok(Outcome::Cancelled) => Some("cancelled"),
                Err(error) => {
                    tracing::error!(%error, "approval bookkeeping failed");
                    Some("the approval could not be recorded")
                }
            };
            if let Some(reason) = refusal {
                self.finish_tool(generation, &id, &started, ToolStatus::Denied, reason)
                    .await;
                return format!(
                    "The user did not allow this call ({reason}). Nothing was changed. Tell the user, and do not try it again unless they ask."
                );
            }
        }
        let context = CallContext {
            end_user: &user.subject,
            traceparent: &trace.header_value(),
        };
        let outcome = self.tools.call(&tool, arguments, context).await;
        let (status, summary, text) = match outcome {
            CallOutcome::Ok { text, structured } => {
                let summary = present::summary(&text, structured.as_ref());
                (ToolStatus::Ok, summary, text)
            }
            CallOutcome::ToolError(text) => (
                ToolStatus::Error,
                present::shorten(&text, 160),
                format!("Error: {text}"),
            ),
            CallOutcome::Unavailable(reason) => (
                ToolStatus::Unavailable,
                present::shorten(&reason, 160),
                format!(
                    "The tool is unavailable right now ({reason}). Tell the user; do not retry it now."
                ),
            ),
        };
        self.finish_tool(generation, &id, &started, status, &summary)
            .await;
        cap(text, self.settings.tool_output_cap)
    }

    /// A call refused before it ran (bad arguments): the model gets the reason.
    async fn refused(
        &self,
        generation: &Generation,
        id: &str,
        started: &Started,
        tool: &str,
        problem: &str,
    ) -> String {
        let summary = format!("invalid arguments: {}", present::shorten(problem, 120));
        self.finish_tool(generation, id, started, ToolStatus::Error, &summary)
            .await;
        format!(
            "Error: the arguments for {tool} do not fit its input schema: {problem}. Correct them and call it again."
        )
    }

    async fn finish_tool(
        &self,
        generation: &Generation,
        id: &str,
        started: &Started,
        status: ToolStatus,
        summary: &str,
    ) {
        let elapsed = started.at.elapsed();
        let duration_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        let stored = match &status {
            ToolStatus::Ok => "ok",
            ToolStatus::Error => "error",
            ToolStatus::Denied => "denied",
            ToolStatus::Unavailable => "unavailable",
        };
        let labels = ToolLabels {
            server: started.server.clone(),
            tool: started.tool.clone(),
            status: stored,
        };
        self.metrics.tool_calls.get_or_create(&labels).inc();
        self.metrics
            .tool_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        if let Err(error) = self
            .store
            .tool_call_finished(id, stored, duration_ms, summary)
            .await
        {
            tracing::error!(%error, "recording a tool result");
        }
        generation.emit(ChatEvent::ToolResult {
            id: id.to_owned(),
            status,
            duration_ms,
            summary: summary.to_owned(),
        });
    }
}

/// Counts one approval as waiting for as long as it lives, however the wait ends
/// (a cancelled question drops it mid-wait).
struct Waiting(prometheus_client::metrics::gauge::Gauge);

impl Waiting {
    fn on(gauge: &prometheus_client::metrics::gauge::Gauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// When a tool call began, and what it calls (for its metrics).
struct Started {
    at: Instant,
    server: String,
    /// `unknown` until the name is found in the catalogue.
    tool: String,
}

/// Where a tool call stands within its question.
#[derive(Clone, Copy)]
struct Step<'a> {
    catalogue: &'a Catalogue,
    turn_id: &'a str,
    /// Within the question's budget of tool calls.
    within_budget: bool,
    trace: &'a TraceContext,
}

/// Tool output past the cap is cut, and says so, so the model knows it saw a part.
fn cap(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}\n…[output truncated: the first {cut} of {} bytes are shown; ask for less, e.g. with a smaller limit or a filter]",
        &text[..cut],
        text.len()
    )
}

fn code(error: &ModelError) -> &'static str {
    match error {
        ModelError::RateLimited { .. } => "model_rate_limited",
        ModelError::Upstream { .. } => "model_error",
        ModelError::Connection(_) => "model_unreachable",
        ModelError::Protocol(_) => "model_protocol",
        ModelError::Timeout(_) => "model_timeout",
        ModelError::Busy(_) => "model_busy",
    }
}

/// A user-safe message: what happened, not the provider's internals.
fn user_message(error: &ModelError) -> String {
    match error {
        ModelError::RateLimited { .. } => {
            "The language model is busy (rate limited). Please try again in a moment.".to_owned()
        }
        ModelError::Upstream { status, .. } => {
            format!("The language model failed (HTTP {status}). Please try again.")
        }
        ModelError::Connection(_) => {
            "The connection to the language model broke off. Please try again.".to_owned()
        }
        ModelError::Protocol(_) => {
            "The language model sent an answer that could not be read. Please try again.".to_owned()
        }
        ModelError::Timeout(_) => {
            "The language model did not answer in time. Please try again.".to_owned()
        }
        ModelError::Busy(_) => {
            "The language model is busy with other questions. Please try again in a moment."
                .to_owned()
        }
    }
}

const DEFAULT_PROMPT: &str = "You are maitred, the assistant of a restaurant's staff. Today is {weekday}, {today}.
Answer questions about the restaurant's customers, bookings, tables, opening hours and guest feedback with the tools you are given; never invent data the tools did not return.
Guidelines:
- Dates are YYYY-MM-DD and times HH:MM (24-hour), in the restaurant's local time.
- To count records, use the `total` the list tools return (ask for limit 1), not the length of one page.
- Before booking, check the free times; when a time is taken, offer the free times the tool names.
- Changing or creating bookings needs the user's approval, which the system asks for: just call the tool.
- If a tool fails or is unavailable, say so plainly.
- Answer concisely, in Markdown; use tables for lists.";

#[cfg(test)]
mod tests {
    use super::cap;

    #[test]
    fn output_past_the_cap_is_cut_with_a_marker() {
        let capped = cap("é".repeat(300), 257);
        assert!(capped.starts_with(&"é".repeat(128)));
        assert!(capped.contains("[output truncated: the first 256 of 600 bytes"));
        assert_eq!(cap("short".into(), 10), "short");
    }
}
