//! The one way out of an answer: every event goes through the recorder, which sends
//! it to the viewers, stores what must outlive the process, and counts it. No step
//! of the loop does any of the three by hand.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::ports::{
    AnswerRef, AnswerStore, EventSink, NewCall, Remaining, StoreError, StoreResult, TurnRecord,
};
use crate::grounding::Source;
use crate::metrics::{ErrorCodeLabels, FinishLabels, GatewayMetrics, TokenKindLabels, ToolLabels};
use maitred_llm::{ToolCall, Usage};
use maitred_protocol::events::{
    ApprovalRequiredEvent, BudgetEvent, ChatEvent, Claim, DoneEvent, ErrorEvent, Finish,
    GroundingEvent, InputAction, InputRequiredEvent, InputResolvedEvent, MetaEvent, ResumedEvent,
    TokenEvent, ToolCallEvent, ToolProgressEvent, ToolResultEvent, UsageEvent,
};
use maitred_protocol::ids::{CallStatus, InputId, MessageStatus, PartId, ToolCallId};

/// How often a streaming turn's text is written while it grows, so a crash loses
/// little of it.
const FLUSH_EVERY: Duration = Duration::from_secs(2);

/// A tool call as it is shown: in its `tool_call` event and, when it waits for the
/// person, in its `approval_required`.
#[derive(Debug, Clone)]
pub struct ShownCall {
    pub id: ToolCallId,
    pub server: String,
    pub tool: String,
    pub title: String,
    pub arguments: Value,
    /// Whom the call is made as, for the card (see `ToolCallEvent::acting_as`).
    pub acting_as: Option<String>,
}

/// A call that has started, until its result.
pub struct StartedCall {
    id: ToolCallId,
    at: Instant,
    server: String,
    /// `unknown` for a name the catalogue does not have (the model chose it).
    tool: String,
}

/// The answer's calls as they end: each one's status, tool and summary, and the
/// results of those that brought one.
#[derive(Default)]
struct Calls {
    started: Vec<ToolCallId>,
    ended: Vec<(CallStatus, String, String)>,
    results: Vec<Source>,
}

/// The model turn being streamed.
struct OpenTurn {
    part: PartId,
    model: String,
    text: String,
    flushed: Instant,
}

pub struct Recorder {
    answer: AnswerRef,
    sink: Arc<dyn EventSink>,
    store: Arc<dyn AnswerStore>,
    metrics: GatewayMetrics,
    started: Instant,
    first_token: AtomicBool,
    turn: Mutex<Option<OpenTurn>>,
    /// What the answer's calls have come to so far, for its grounding.
    calls: Mutex<Calls>,
    /// A write that must be done before any part of the answer is stored (the
    /// question, written beside the model's first request).
    prior: tokio::sync::Mutex<Option<JoinHandle<StoreResult<()>>>>,
}

impl Recorder {
    /// `started`: when the question arrived, for the time to its first token.
    pub fn new(
        answer: AnswerRef,
        sink: Arc<dyn EventSink>,
        store: Arc<dyn AnswerStore>,
        metrics: GatewayMetrics,
        started: Instant,
    ) -> Self {
        metrics.generations_active.inc();
        Self {
            answer,
            sink,
            store,
            metrics,
            started,
            first_token: AtomicBool::new(false),
            turn: Mutex::new(None),
            calls: Mutex::new(Calls::default()),
            prior: tokio::sync::Mutex::new(None),
        }
    }

    /// Stores nothing of the answer before `prior` is done.
    pub fn after(self, prior: JoinHandle<StoreResult<()>>) -> Self {
        Self {
            prior: tokio::sync::Mutex::new(Some(prior)),
            ..self
        }
    }

    /// Waits for the prior write, once; its failure is the answer's.
    async fn ready(&self) -> StoreResult<()> {
        let mut prior = self.prior.lock().await;
        match prior.take() {
            Some(handle) => handle
                .await
                .map_err(|e| StoreError(anyhow::anyhow!("storing the question: {e}")))?,
            None => Ok(()),
        }
    }

    pub fn answer(&self) -> &AnswerRef {
        &self.answer
    }

    pub fn cancelled(&self) -> CancellationToken {
        self.sink.cancelled()
    }

    pub fn interrupted(&self) -> bool {
        self.sink.interrupted()
    }

    pub async fn meta(&self, model: &str, fallback_from: Option<&str>) -> StoreResult<()> {
        self.emit(ChatEvent::Meta(MetaEvent {
            conversation_id: self.answer.conversation.clone(),
            message_id: self.answer.message.clone(),
            model: model.to_owned(),
            fallback_from: fallback_from.map(str::to_owned),
        }))
        .await
    }

    /// A model turn begins streaming; it is stored once it has text worth keeping.
    pub fn begin_turn(&self, model: &str) {
        *self.open_turn() = Some(OpenTurn {
            part: PartId::new(),
            model: model.to_owned(),
            text: String::new(),
            flushed: Instant::now(),
        });
    }

    pub async fn token(&self, text: String) -> StoreResult<()> {
        if !self.first_token.swap(true, Ordering::Relaxed) {
            self.metrics
                .time_to_first_token
                .observe(self.started.elapsed().as_secs_f64());
        }
        self.metrics.tokens_streamed.inc();
        let flush = {
            let mut open = self.open_turn();
            open.as_mut().and_then(|turn| {
                turn.text.push_str(&text);
                (turn.flushed.elapsed() >= FLUSH_EVERY).then(|| {
                    turn.flushed = Instant::now();
                    (turn.part.clone(), turn.model.clone(), turn.text.clone())
                })
            })
        };
        self.emit(ChatEvent::Token(TokenEvent { text })).await?;
        if let Some((part, model, text)) = flush {
            self.save(&part, &model, &text, &[], MessageStatus::Streaming)
                .await?;
        }
        Ok(())
    }

    /// The turn ends: stored with its calls and how it ended. Returns its part and text.
    pub async fn end_turn(
        &self,
        calls: &[ToolCall],
        status: MessageStatus,
    ) -> StoreResult<(PartId, String)> {
        let Some(turn) = self.open_turn().take() else {
            return Ok((PartId::new(), String::new()));
        };
        self.save(&turn.part, &turn.model, &turn.text, calls, status)
            .await?;
        Ok((turn.part, turn.text))
    }

    async fn save(
        &self,
        part: &PartId,
        model: &str,
        text: &str,
        calls: &[ToolCall],
        status: MessageStatus,
    ) -> StoreResult<()> {
        self.ready().await?;
        let record = TurnRecord {
            part,
            model,
            text,
            calls,
            status,
        };
        self.store.save_turn(&self.answer, record).await
    }

    pub async fn call_started(
        &self,
        turn: &PartId,
        model_call_id: &str,
        shown: &ShownCall,
        known: bool,
        idempotency_key: Option<&str>,
    ) -> StoreResult<StartedCall> {
        self.lock_calls().started.push(shown.id.clone());
        let started = StartedCall {
            id: shown.id.clone(),
            at: Instant::now(),
            server: shown.server.clone(),
            tool: if known {
                shown.tool.clone()
            } else {
                "unknown".to_owned()
            },
        };
        self.emit(ChatEvent::ToolCall(ToolCallEvent {
            id: shown.id.clone(),
            server: shown.server.clone(),
            tool: shown.tool.clone(),
            title: shown.title.clone(),
            arguments: shown.arguments.clone(),
            acting_as: shown.acting_as.clone(),
        }))
        .await?;
        let call = NewCall {
            id: &shown.id,
            turn,
            model_call_id,
            server: &shown.server,
            tool: &shown.tool,
            arguments: &shown.arguments,
            title: &shown.title,
            idempotency_key,
        };
        self.ready().await?;
        self.store.call_started(&self.answer, call).await?;
        Ok(started)
    }

    /// A call stored by an earlier answer, shown to this one's viewers as it is sent
    /// again: its `tool_call` event, and nothing stored (its row is the first's).
    pub async fn show_call(&self, shown: &ShownCall) -> StoreResult<()> {
        self.emit(ChatEvent::ToolCall(ToolCallEvent {
            id: shown.id.clone(),
            server: shown.server.clone(),
            tool: shown.tool.clone(),
            title: shown.title.clone(),
            arguments: shown.arguments.clone(),
            acting_as: shown.acting_as.clone(),
        }))
        .await
    }

    /// A call stored before the answer was taken over, sent again: it keeps its id
    /// (and its viewers' card), and nothing about its start is shown or stored again.
    pub fn call_again(&self, id: &ToolCallId, server: &str, tool: &str) -> StartedCall {
        self.lock_calls().started.push(id.clone());
        StartedCall {
            id: id.clone(),
            at: Instant::now(),
            server: server.to_owned(),
            tool: tool.to_owned(),
        }
    }

    /// The answer was taken over after its server stopped, and goes on.
    pub async fn resumed(&self, attempt: u32, message: String) -> StoreResult<()> {
        self.emit(ChatEvent::Resumed(ResumedEvent { attempt, message }))
            .await
    }

    pub async fn approval_required(
        &self,
        shown: &ShownCall,
        expires_at: String,
    ) -> StoreResult<()> {
        self.emit(ChatEvent::ApprovalRequired(ApprovalRequiredEvent {
            id: shown.id.clone(),
            server: shown.server.clone(),
            tool: shown.tool.clone(),
            title: shown.title.clone(),
            arguments: shown.arguments.clone(),
            expires_at,
        }))
        .await
    }

    /// A tool's server asks the person; returns the event's sequence number.
    pub async fn input_required(&self, event: InputRequiredEvent) -> StoreResult<u64> {
        self.sink.publish(ChatEvent::InputRequired(event)).await
    }

    pub async fn input_resolved(&self, id: InputId, action: InputAction) -> StoreResult<()> {
        self.emit(ChatEvent::InputResolved(InputResolvedEvent { id, action }))
            .await
    }

    pub async fn tool_progress(&self, event: ToolProgressEvent) -> StoreResult<()> {
        self.emit(ChatEvent::ToolProgress(event)).await
    }

    /// Counts a call as waiting for approval for as long as the guard lives, however
    /// the wait ends (a cancelled answer drops it mid-wait).
    pub fn waiting_for_approval(&self) -> Waiting {
        Waiting::on(&self.metrics.approvals_waiting)
    }

    /// The same, for a tool's request for the person's input.
    pub fn waiting_for_input(&self) -> Waiting {
        Waiting::on(&self.metrics.inputs_waiting)
    }

    /// The call ended by itself: `status` is one of [`CallStatus::RESULTS`], stored
    /// and streamed alike.
    pub async fn call_finished(
        &self,
        call: StartedCall,
        status: CallStatus,
        summary: &str,
    ) -> StoreResult<()> {
        debug_assert!(status.is_result(), "a call does not end as {status}");
        let elapsed = call.at.elapsed();
        let duration_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        self.lock_calls()
            .ended
            .push((status, call.tool.clone(), summary.to_owned()));
        let labels = ToolLabels {
            server: call.server,
            tool: call.tool,
            status: status.as_str(),
        };
        self.metrics.tool_calls.get_or_create(&labels).inc();
        self.metrics
            .tool_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        self.store
            .call_finished(&call.id, status, duration_ms, summary)
            .await?;
        self.emit(ChatEvent::ToolResult(ToolResultEvent {
            id: call.id,
            status,
            duration_ms,
            summary: summary.to_owned(),
        }))
        .await
    }

    /// A call's result, kept for checking the answer against.
    pub(crate) fn remember(&self, source: Source) {
        self.lock_calls().results.push(source);
    }

    /// The results of the answer's calls so far, in the order the calls started
    /// (calls of one turn run at once, and end in any order).
    pub(crate) fn results(&self) -> Vec<Source> {
        let calls = self.lock_calls();
        let mut results = calls.results.clone();
        results.sort_by_key(|r| {
            calls
                .started
                .iter()
                .position(|id| *id == r.call)
                .unwrap_or(usize::MAX)
        });
        results
    }

    /// The answer has made tool calls.
    pub fn made_calls(&self) -> bool {
        !self.lock_calls().started.is_empty()
    }

    /// The answer made calls, and none of them brought a result back: the tools and
    /// why, for each call that failed.
    pub fn all_calls_failed(&self) -> Option<Vec<(String, String)>> {
        let calls = self.lock_calls();
        let failed: Vec<(String, String)> = calls
            .ended
            .iter()
            .filter(|(status, _, _)| *status != CallStatus::Ok)
            .map(|(_, tool, summary)| (tool.clone(), summary.clone()))
            .collect();
        (calls.results.is_empty() && !failed.is_empty()).then_some(failed)
    }

    /// The answer's claims, checked: streamed, and stored with `part` (its final text).
    pub async fn grounding(&self, part: &PartId, claims: Vec<Claim>) -> StoreResult<()> {
        let event = GroundingEvent { claims };
        self.emit(ChatEvent::Grounding(event.clone())).await?;
        self.ready().await?;
        self.store.save_grounding(part, &event).await
    }

    /// What the model is told of one of its calls; stored, not shown.
    pub async fn tool_result(&self, model_call_id: &str, content: &str) -> StoreResult<()> {
        self.ready().await?;
        self.store
            .save_tool_result(&self.answer, model_call_id, content)
            .await
    }

    pub async fn usage(&self, model: &str, usage: Usage) -> StoreResult<()> {
        for (kind, n) in [
            ("prompt", usage.prompt_tokens),
            ("completion", usage.completion_tokens),
        ] {
            self.metrics
                .usage_tokens
                .get_or_create(&TokenKindLabels { kind })
                .inc_by(n);
        }
        self.emit(ChatEvent::Usage(UsageEvent {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            total_tokens: usage.total_tokens,
        }))
        .await?;
        self.ready().await?;
        self.store.usage(&self.answer, model, usage).await
    }

    /// What is left of the answer's tightest budget.
    pub async fn budget(&self, left: &Remaining) -> StoreResult<()> {
        self.emit(ChatEvent::Budget(BudgetEvent {
            scope: left.scope.clone(),
            window: left.window.clone(),
            remaining_tokens: left.tokens.map(|n| n.max(0) as u64),
            remaining_cost: left.cost_micros.map(|n| n.max(0) as f64 / 1e6),
        }))
        .await
    }

    pub async fn error(&self, code: &'static str, message: String) -> StoreResult<()> {
        self.metrics
            .answer_errors
            .get_or_create(&ErrorCodeLabels { code })
            .inc();
        self.emit(ChatEvent::Error(ErrorEvent {
            code: code.to_owned(),
            message,
        }))
        .await
    }

    /// The last event. Calls left running get the reason the answer stopped.
    pub async fn done(&self, finish: Finish) -> StoreResult<()> {
        self.metrics.generations_active.dec();
        let finish_reason = match finish {
            Finish::Stop => "stop",
            Finish::Cancelled => "cancelled",
            Finish::MaxIterations => "max_iterations",
            Finish::Error => "error",
        };
        self.metrics
            .generations
            .get_or_create(&FinishLabels { finish_reason })
            .inc();
        let abandoned = if self.interrupted() {
            CallStatus::Interrupted
        } else {
            CallStatus::Cancelled
        };
        let stored = match finish {
            Finish::Cancelled | Finish::Error => match self.ready().await {
                Ok(()) => {
                    self.store
                        .abandon_calls(&self.answer.message, abandoned)
                        .await
                }
                Err(error) => Err(error),
            },
            Finish::Stop | Finish::MaxIterations => self.ready().await,
        };
        // `done` goes out even when storing failed: viewers must not hang.
        let emitted = self
            .emit(ChatEvent::Done(DoneEvent {
                finish_reason: finish,
            }))
            .await;
        stored.and(emitted)
    }

    async fn emit(&self, event: ChatEvent) -> StoreResult<()> {
        self.sink.publish(event).await.map(|_| ())
    }

    fn open_turn(&self) -> std::sync::MutexGuard<'_, Option<OpenTurn>> {
        self.turn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_calls(&self) -> std::sync::MutexGuard<'_, Calls> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A call counted as waiting for approval while this lives.
pub struct Waiting(prometheus_client::metrics::gauge::Gauge);

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
