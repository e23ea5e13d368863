//! Taking over an answer whose server stopped: a replica whose sweep finds a lapsed
//! lease (with Redis), or this process at its next start (without), reads where the
//! answer stood from the database — who asked it, its stored turns, tool calls and
//! results, and the text its viewers were shown (its event log) — and runs the
//! answer loop on from there (`answer::resume`), as a new run on this replica whose
//! events follow the old ones in the same log.
//!
//! An answer is not taken over (and ends as interrupted, as before) when taking over
//! is switched off (`MAITRED_RESUME_ANSWERS=false`), when it has been taken over
//! `MAITRED_RESUME_MAX` times already, when it has nobody to come back to it (an
//! answer of `/v1/chat/completions`), or when its question was never stored. An
//! answer that went on from calls waiting for the person's decision (the Responses
//! API's) has no question: it goes on from the conversation's open exchange.

use std::sync::{Arc, Weak};
use std::time::Instant;

use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::hooks::{AnswerHooks, GoesOn};
use super::store::{CallRecord, Store, StoredPart};
use crate::answer::ports::{AnswerRef, Pending, Resumption, StoredCall, Tail};
use crate::answer::{Answer, Answerer, Recorder};
use crate::auth::ChatUser;
use crate::live::{Live, LiveError, LoggedEvent, Running};
use crate::metrics::GatewayMetrics;
use maitred_llm::{Message, ToolCall};
use maitred_protocol::ids::{MessageStatus, Role};

/// The settings of taking over.
#[derive(Debug, Clone, Copy)]
pub struct Resuming {
    pub enabled: bool,
    /// Takeovers of one answer at most.
    pub max: u32,
    /// Characters of earlier history the model is given (as for a question).
    pub context_budget: usize,
}

/// Takes answers over on this replica.
pub struct Resumer {
    /// Weak: the live state holds the resumer, and the answerer (through its
    /// approvals) the live state; a strong link back would keep both alive for ever,
    /// and the database pool from closing.
    answerer: Weak<Answerer>,
    store: Store,
    metrics: GatewayMetrics,
    tasks: TaskTracker,
    settings: Resuming,
    /// Weak for the same reason: the responses' records hold the live state.
    hooks: Weak<dyn AnswerHooks>,
}

/// An answer ready to go on here.
pub struct Prepared {
    answer: AnswerRef,
    user: ChatUser,
    attempt: u32,
    resumption: Resumption,
    goes_on: GoesOn,
}

impl Resumer {
    pub fn new(
        answerer: &Arc<Answerer>,
        store: Store,
        metrics: GatewayMetrics,
        tasks: TaskTracker,
        settings: Resuming,
        hooks: &Arc<dyn AnswerHooks>,
    ) -> Self {
        Self {
            answerer: Arc::downgrade(answerer),
            store,
            metrics,
            tasks,
            settings,
            hooks: Arc::downgrade(hooks),
        }
    }

    /// Where `answer` (whose events so far are `events`) stood, with this takeover
    /// counted; `None` when it is not to go on (see the module's documentation).
    /// What its viewers were shown is kept in the store either way.
    pub async fn prepare(
        &self,
        answer: &AnswerRef,
        events: &[LoggedEvent],
    ) -> Result<Option<Prepared>, LiveError> {
        if !self.settings.enabled
            || events.last().is_some_and(LoggedEvent::is_done)
            || self.answerer.strong_count() == 0
        {
            return Ok(None);
        }
        let Some((user, attempt)) = self.store.take_over(answer, self.settings.max).await? else {
            return Ok(None);
        };
        let shown: String = events.iter().filter_map(LoggedEvent::token_text).collect();
        self.store.keep_shown(answer, &shown).await?;
        self.store.cancel_inputs(&answer.message).await?;
        let parts = self.store.answer_parts(&answer.message).await?;
        let goes_on = match self.hooks.upgrade() {
            Some(hooks) => hooks.goes_on(&answer.message).await,
            None => return Ok(None),
        };
        let calls = self.store.answer_calls(&answer.message).await?;
        let resumption = if goes_on.decided {
            // No question: the answer went on from the open exchange before its parts.
            let before = parts.first().map_or(i64::MAX, |(seq, _)| *seq);
            let (messages, open) = self
                .store
                .open_history_before(&answer.conversation, before, self.settings.context_budget)
                .await?;
            let tail = match open {
                Some(open) => {
                    let stored = self.store.turn_calls(&open.turn).await?;
                    Tail::Calls {
                        pending: pending(&open.calls, &stored),
                        turn: open.turn,
                    }
                }
                None => Tail::Ask { cut: false },
            };
            rebuild(messages, tail, &parts, &calls)
        } else {
            let Some((question_seq, question)) =
                parts.first().filter(|(_, p)| p.role == Role::User)
            else {
                tracing::warn!(message_id = %answer.message, "an answer whose question was not stored cannot go on");
                return Ok(None);
            };
            let mut messages = self
                .store
                .history_before(
                    &answer.conversation,
                    *question_seq,
                    self.settings.context_budget,
                )
                .await?;
            messages.push(Message::User {
                content: question.content.clone().unwrap_or_default(),
            });
            rebuild(messages, Tail::Ask { cut: false }, &parts[1..], &calls)
        };
        Ok(Some(Prepared {
            answer: answer.clone(),
            user,
            attempt,
            resumption,
            goes_on,
        }))
    }

    /// Runs the prepared answer here, its events numbered after `after`. The
    /// replica's live state has made it this replica's before.
    pub fn start(&self, live: Live, prepared: Prepared, after: u64) {
        let Prepared {
            answer,
            user,
            attempt,
            resumption,
            goes_on,
        } = prepared;
        let Some(answerer) = self.answerer.upgrade() else {
            // The gateway is going away; the answer is taken over at the next start
            // (or by another replica, once its lease lapses).
            return;
        };
        let local = live.local().start(answer.clone());
        if goes_on.unattended {
            local.unattended();
        }
        let recorder = Recorder::new(
            answer.clone(),
            Arc::new(Running::new(local, live, after)),
            Arc::new(self.store.clone()),
            self.metrics.clone(),
            Instant::now(),
        );
        let (store, hooks) = (self.store.clone(), self.hooks.clone());
        let span = tracing::info_span!(
            "generation",
            message_id = %answer.message,
            trace_id = tracing::field::Empty,
            resumed = attempt,
        );
        // A taken-over answer starts a trace of its own: the request is long gone.
        let trace = maitred_core::otel::continue_trace(&span, None, Some("gateway"));
        span.record("trace_id", tracing::field::display(trace.trace_id()));
        self.tasks.spawn(
            async move {
                let run = Answer {
                    recorder: &recorder,
                    user: &user,
                    trace,
                    asking: goes_on.asking,
                };
                answerer.resume(&run, attempt, resumption).await;
                if let Err(error) = store.forget_asker(&answer.message).await {
                    tracing::warn!(%error, "forgetting who asked a finished answer");
                }
                if let Some(hooks) = hooks.upgrade() {
                    hooks.ended(&answer).await;
                }
            }
            .instrument(span),
        );
    }
}

/// The calls of a turn as the model asked for them, each with its stored row.
pub(crate) fn pending(asked: &[ToolCall], stored: &[CallRecord]) -> Vec<Pending> {
    asked
        .iter()
        .map(|call| Pending {
            call: call.clone(),
            stored: stored
                .iter()
                .find(|c| c.model_call_id == call.id)
                .map(|c| StoredCall {
                    id: c.id.clone(),
                    status: c.status,
                    idempotency_key: c.idempotency_key.clone(),
                }),
        })
        .collect()
}

/// The answer's stored parts after its question, as the model sees them, and what
/// it was doing when its server stopped; `tail` is where it stood before them.
fn rebuild(
    mut messages: Vec<Message>,
    mut tail: Tail,
    parts: &[(i64, StoredPart)],
    calls: &[CallRecord],
) -> Resumption {
    for (_, part) in parts {
        match part.role {
            Role::Assistant => {
                let tool_calls: Vec<ToolCall> = part
                    .tool_calls
                    .as_deref()
                    .and_then(|t| serde_json::from_str(t).ok())
                    .unwrap_or_default();
                let content = part.content.clone().filter(|c| !c.is_empty());
                let finished = part.status == MessageStatus::Complete;
                tail = if !finished {
                    Tail::Ask {
                        cut: content.is_some(),
                    }
                } else if tool_calls.is_empty() {
                    Tail::Answered
                } else {
                    let pending = tool_calls
                        .iter()
                        .map(|call| Pending {
                            call: call.clone(),
                            stored: calls
                                .iter()
                                .find(|c| c.turn_id == part.id && c.model_call_id == call.id)
                                .map(|c| StoredCall {
                                    id: c.id.clone(),
                                    status: c.status,
                                    idempotency_key: c.idempotency_key.clone(),
                                }),
                        })
                        .collect();
                    Tail::Calls {
                        turn: part.id.clone(),
                        pending,
                    }
                };
                if content.is_some() || !tool_calls.is_empty() {
                    messages.push(Message::Assistant {
                        content,
                        tool_calls: if finished { tool_calls } else { Vec::new() },
                    });
                }
            }
            Role::Tool => {
                let id = part.tool_call_id.clone().unwrap_or_default();
                if let Tail::Calls { pending, .. } = &mut tail {
                    pending.retain(|p| p.call.id != id);
                }
                messages.push(Message::Tool {
                    tool_call_id: id,
                    content: part.content.clone().unwrap_or_default(),
                });
            }
            Role::User => {}
        }
    }
    if let Tail::Calls { pending, .. } = &tail
        && pending.is_empty()
    {
        tail = Tail::Ask { cut: false };
    }
    Resumption { messages, tail }
}

#[cfg(test)]
mod tests {
    use super::*;
    use maitred_protocol::ids::{CallStatus, PartId, ToolCallId};

    fn part(role: Role, content: &str, calls: &[ToolCall], status: MessageStatus) -> StoredPart {
        StoredPart {
            id: PartId::new(),
            message_id: None,
            role,
            content: Some(content.to_owned()),
            tool_calls: (!calls.is_empty()).then(|| serde_json::to_string(calls).unwrap()),
            tool_call_id: None,
            status,
            model: Some("m".to_owned()),
            created_at: String::new(),
            grounding: None,
        }
    }

    fn result(call: &str, content: &str) -> StoredPart {
        StoredPart {
            tool_call_id: Some(call.to_owned()),
            ..part(Role::Tool, content, &[], MessageStatus::Complete)
        }
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.to_owned(),
            name: "resos__createBooking".to_owned(),
            arguments: "{}".to_owned(),
        }
    }

    fn numbered(parts: Vec<StoredPart>) -> Vec<(i64, StoredPart)> {
        parts.into_iter().zip(2..).map(|(p, n)| (n, p)).collect()
    }

    fn question() -> Vec<Message> {
        vec![Message::User {
            content: "q".to_owned(),
        }]
    }

    #[test]
    fn a_turn_cut_while_streaming_is_asked_again_after_its_text() {
        let parts = numbered(vec![part(
            Role::Assistant,
            "Half a sen",
            &[],
            MessageStatus::Interrupted,
        )]);
        let rebuilt = rebuild(question(), Tail::Ask { cut: false }, &parts, &[]);
        assert!(matches!(rebuilt.tail, Tail::Ask { cut: true }));
        assert!(matches!(
            rebuilt.messages.last(),
            Some(Message::Assistant { content: Some(text), tool_calls }) if text == "Half a sen" && tool_calls.is_empty()
        ));
    }

    #[test]
    fn an_answered_turn_only_ends_and_a_question_alone_is_asked() {
        let parts = numbered(vec![part(
            Role::Assistant,
            "Done.",
            &[],
            MessageStatus::Complete,
        )]);
        assert!(matches!(
            rebuild(question(), Tail::Ask { cut: false }, &parts, &[]).tail,
            Tail::Answered
        ));
        let alone = rebuild(question(), Tail::Ask { cut: false }, &[], &[]);
        assert!(matches!(alone.tail, Tail::Ask { cut: false }));
        assert_eq!(alone.messages.len(), 1);
    }

    #[test]
    fn the_last_turns_calls_without_a_stored_result_are_pending_with_their_rows() {
        let turn = part(
            Role::Assistant,
            "",
            &[call("a"), call("b"), call("c")],
            MessageStatus::Complete,
        );
        let stored = |model_call_id: &str, status| CallRecord {
            id: ToolCallId::new(),
            turn_id: turn.id.clone(),
            model_call_id: model_call_id.to_owned(),
            status,
            idempotency_key: Some(format!("mtd-{model_call_id}")),
        };
        // a: result stored; b: started and running; c: never started.
        let rows = [
            stored("a", CallStatus::Ok),
            stored("b", CallStatus::Running),
        ];
        let parts = numbered(vec![turn.clone(), result("a", "booked a")]);
        let rebuilt = rebuild(question(), Tail::Ask { cut: false }, &parts, &rows);
        let Tail::Calls { turn: at, pending } = &rebuilt.tail else {
            panic!("{:?}", rebuilt.tail);
        };
        assert_eq!(at, &turn.id);
        let ids: Vec<&str> = pending.iter().map(|p| p.call.id.as_str()).collect();
        assert_eq!(ids, ["b", "c"]);
        let b = pending[0].stored.as_ref().expect("b's row");
        assert_eq!(b.id, rows[1].id);
        assert_eq!(b.idempotency_key.as_deref(), Some("mtd-b"));
        assert!(pending[1].stored.is_none());
        // The model sees the turn's calls and the one stored result.
        assert!(
            matches!(&rebuilt.messages[1], Message::Assistant { tool_calls, .. } if tool_calls.len() == 3)
        );
        assert!(
            matches!(&rebuilt.messages[2], Message::Tool { tool_call_id, .. } if tool_call_id == "a")
        );
        assert_eq!(rebuilt.messages.len(), 3);
    }

    #[test]
    fn a_turn_whose_results_are_all_stored_asks_the_model_again() {
        let turn = part(Role::Assistant, "", &[call("a")], MessageStatus::Complete);
        let parts = numbered(vec![turn, result("a", "booked")]);
        assert!(matches!(
            rebuild(question(), Tail::Ask { cut: false }, &parts, &[]).tail,
            Tail::Ask { cut: false }
        ));
    }
}
