//! One model turn: the conversation so far goes to the model (through the router's
//! limits, retries and fallbacks); its text streams out as it comes, its tool-call
//! fragments are put together, and the turn is stored when it ends.

use futures::StreamExt;

use super::assemble::Assembler;
use super::{Answer, Answerer, Stop};
use crate::metrics::{FallbackLabels, ModelLabels, PromptPartLabels};
use maitred_llm::router::Note;
use maitred_llm::{
    ChatRequest, FinishReason, Message, ModelError, ModelEvent, ToolCall, ToolDef, Usage,
};
use maitred_protocol::ids::{MessageStatus, PartId};

/// What one turn of the model came to.
pub(super) struct Reply {
    pub part: PartId,
    /// The model that answered (a fallback, when the one before could not).
    pub model: String,
    pub text: String,
    pub calls: Vec<ToolCall>,
    pub usage: Usage,
    /// Its text was held back, not shown: it answers without calling a tool, and
    /// is shown once checked (`conclude`).
    pub held: bool,
}

impl Answerer {
    pub(super) async fn model_turn(
        &self,
        answer: &Answer<'_>,
        messages: &[Message],
        tools: &[ToolDef],
        answer_only: bool,
        turn: u32,
        hold_text: bool,
    ) -> Result<Reply, Stop> {
        let recorder = answer.recorder;
        let cancel = recorder.cancelled();
        let mut request = ChatRequest {
            messages: messages.to_vec(),
            tools: tools.to_vec(),
            temperature: None,
            max_tokens: None,
            answer_only,
        };
        self.record_prompt_size(&request);
        let hold = self.reserve_turn(answer, &mut request).await?;
        // Notes arrive while the router works; fallbacks are told to the viewers
        // once it is done, still before the first token.
        let mut fallbacks = Vec::new();
        let mut notes = |note: Note<'_>| self.note(note, &mut fallbacks);
        let opened = tokio::select! {
            () = cancel.cancelled() => Err(Stop::Cancelled),
            opened = self.models.open(&request, &mut notes) => opened.map_err(Stop::Model),
        };
        let mut told = Ok(());
        for (from, to) in fallbacks {
            if told.is_ok() {
                told = recorder.meta(&to, Some(&from)).await;
            }
        }
        // Whatever stops the turn before its stream is read, its reservation is refunded.
        let opened = match told.map_err(Stop::from).and(opened) {
            Ok(opened) => opened,
            Err(stop) => {
                let spent = super::spend::Spent {
                    model: None,
                    usage: Usage::default(),
                    text: "",
                    calls: &[],
                };
                self.settle_turn(answer, hold, spent).await;
                return Err(stop);
            }
        };
        let mut stream = opened.stream;
        // Held text goes out only once the turn shows it calls a tool (then as it
        // was) or once it is checked (its final answer).
        let mut held = String::new();
        if !hold_text {
            recorder.begin_turn(&opened.model);
        }
        let mut assembler = Assembler::default();
        let mut usage = Usage::default();
        let mut finished = None;
        let outcome: Result<(), Stop> = loop {
            let next = tokio::select! {
                () = cancel.cancelled() => break Err(Stop::Cancelled),
                next = stream.next() => next,
            };
            match next {
                None => break Ok(()),
                Some(Ok(ModelEvent::Text(fragment))) if hold_text => held.push_str(&fragment),
                Some(Ok(ModelEvent::Text(fragment))) => {
                    if let Err(error) = recorder.token(fragment).await {
                        break Err(error.into());
                    }
                }
                Some(Ok(ModelEvent::ToolCallDelta {
                    index,
                    id,
                    name,
                    arguments,
                })) => assembler.push(index, id, name, arguments),
                Some(Ok(ModelEvent::Usage(reported))) => usage.add(reported),
                Some(Ok(ModelEvent::Finished(reason))) => finished = Some(reason),
                Some(Err(error)) => break Err(Stop::Model(error)),
            }
        };
        // Dropping the stream closes the upstream request at once.
        drop(stream);
        super::spans::replied(&opened.model, usage, finished.as_ref());
        // A stream that ends without a finish reason was cut short, however complete
        // its text may look.
        let outcome = outcome.and_then(|()| match finished {
            Some(_) => Ok(()),
            None => Err(Stop::Model(ModelError::Protocol(
                "the stream ended before the model finished its answer".to_owned(),
            ))),
        });
        let calls = if outcome.is_ok() {
            assembler.finish(&format!("{}-{turn}", recorder.answer().message))
        } else {
            Vec::new()
        };
        let status = match &outcome {
            Ok(()) => MessageStatus::Complete,
            Err(Stop::Cancelled) if recorder.interrupted() => MessageStatus::Interrupted,
            Err(Stop::Cancelled) => MessageStatus::Cancelled,
            Err(Stop::Model(_) | Stop::Storage(_) | Stop::Budget(_)) => MessageStatus::Error,
        };
        let kept = hold_text && outcome.is_ok() && calls.is_empty();
        let stored = if kept {
            Ok((PartId::new(), held))
        } else if hold_text && outcome.is_ok() {
            recorder.begin_turn(&opened.model);
            let shown = if held.is_empty() {
                Ok(())
            } else {
                recorder.token(held).await
            };
            match shown {
                Ok(()) => recorder.end_turn(&calls, status).await,
                Err(error) => Err(error),
            }
        } else if hold_text {
            // Unchecked text of a turn that failed is not shown.
            Ok((PartId::new(), String::new()))
        } else {
            recorder.end_turn(&calls, status).await
        };
        let spent = super::spend::Spent {
            model: Some(&opened.model),
            usage,
            text: stored.as_ref().map_or("", |(_, text)| text.as_str()),
            calls: &calls,
        };
        self.settle_turn(answer, hold, spent).await;
        outcome?;
        let (part, text) = stored?;
        if finished == Some(FinishReason::Length) {
            tracing::info!(message_id = %recorder.answer().message, "the model hit its token limit");
        }
        Ok(Reply {
            part,
            model: opened.model,
            text,
            calls,
            usage,
            held: kept,
        })
    }

    /// The primary model's prompt size, by part, into the metrics: what a local model
    /// reads before its first word.
    fn record_prompt_size(&self, request: &ChatRequest) {
        let model = self.models.primary();
        let Some(size) = self.models.prompt_size(model, request) else {
            return;
        };
        tracing::debug!(
            model,
            system = size.system,
            user = size.user,
            assistant = size.assistant,
            tool = size.tool,
            tools = size.tools,
            "prompt size in estimated tokens, by part"
        );
        let total = [("total", size.total())];
        for (part, tokens) in size.parts().into_iter().chain(total) {
            self.metrics
                .prompt_tokens
                .get_or_create(&PromptPartLabels {
                    model: model.to_owned(),
                    part,
                })
                .observe(tokens as f64);
        }
    }

    /// Retries go to the log and the metrics; fallbacks also to the viewers (as a
    /// second `meta` naming the model that now answers), collected in `fallbacks`.
    fn note(&self, note: Note<'_>, fallbacks: &mut Vec<(String, String)>) {
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
                tracing::info!(model, attempt, delay_ms = delay.as_millis() as u64, %error, "retrying the model");
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
                tracing::warn!(from, to, %error, "falling back to the next model");
                fallbacks.push((from.to_owned(), to.to_owned()));
            }
        }
    }
}
