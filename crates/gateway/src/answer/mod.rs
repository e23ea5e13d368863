//! One answer to one question, as the design has it: a model turn → its tool calls
//! put together → each call through the tool pipeline → the results back to the
//! model → again, until the model answers without calling a tool or the turn budget
//! is spent. Every event goes out through the answer's [`Recorder`].
//!
//! The loop talks to the rest of the gateway only through the traits in [`ports`],
//! so its tests (`tests.rs`) run it against fakes, with no database or network.

mod assemble;
mod failure;
mod grounded;
mod pipeline;

pub mod ports;
mod prompt;
pub mod recorder;
mod repeats;
mod spans;
mod spend;
mod turn;
mod warm_up;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use tracing::Instrument;

use crate::auth::ChatUser;
use crate::metrics::GatewayMetrics;
use crate::tools::policy::ToolPolicy;
use crate::tools::{Catalogue, search};
use failure::Stop;
use maitred_core::trace_context::TraceContext;
use maitred_llm::router::ModelRouter;
use maitred_llm::{Message, ToolDef, Usage};
use maitred_protocol::events::Finish;
use pipeline::Told;
use ports::{Approver, BackgroundTasks, Budgets, Inputs, Tools};
pub use recorder::Recorder;

/// The loop's limits.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Model turns per question.
    pub max_iterations: u32,
    /// Tool calls per question; past it, calls are refused.
    pub tool_calls_per_question: usize,
    /// Bytes of one tool's output the model is given.
    pub tool_output_cap: usize,
    /// The operator's system prompt; `None`: the built-in one.
    pub system_prompt: Option<String>,
    /// A model turn's output cap (`max_tokens`) when a budget applies.
    pub max_output_tokens: u32,
}

/// What answers questions: the models, the tools and the rules for using them.
pub struct Answerer {
    pub models: ModelRouter,
    pub policy: ToolPolicy,
    pub tools: Arc<dyn Tools>,
    pub approvals: Arc<dyn Approver>,
    pub inputs: Arc<dyn Inputs>,
    /// Where a call that became a task goes when its answer ends.
    pub background: Arc<dyn BackgroundTasks>,
    pub limits: Limits,
    pub metrics: GatewayMetrics,
    /// Tokens and money, reserved before each model turn and settled after it.
    pub budgets: Arc<dyn Budgets>,
}

/// One answer being written: where its events go, who asked, its trace, and
/// whether the person can be asked to approve a call while it runs.
pub struct Answer<'a> {
    pub recorder: &'a Recorder,
    pub user: &'a ChatUser,
    pub trace: TraceContext,
    pub asking: Asking,
}

/// Whether a call that needs approval can wait for the person's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asking {
    /// The person watches the stream and can approve (the chat API, the web UI).
    Person,
    /// Nobody can be asked (`why` says so, to the model and in the call's summary):
    /// only an approval still remembered lets such a call run.
    Never { why: &'static str },
    /// A background task's result, posted after the answer that started it ended:
    /// the model answers from it and is offered no tool.
    Task,
    /// The person answers in a later request (the Responses API): a call that needs
    /// approval is asked for and not waited for; the answer ends after its turn's
    /// other calls, and the call runs in the answer that brings the decision. Nobody
    /// can fill in a tool's form meanwhile: its requests for input are declined.
    Later,
}

impl Asking {
    /// Whether the answer can be taken over after its server stopped: someone will
    /// come back to it.
    pub fn comes_back(self) -> bool {
        matches!(self, Self::Person | Self::Later)
    }
}

/// The conversation as the model sees it, and what the run has used.
struct Run {
    messages: Vec<Message>,
    usage: Usage,
    /// The model that answered last (a fallback, when the primary could not).
    model: String,
}

impl Answerer {
    /// Runs the question to its end; the last event it records is `done`.
    pub async fn run(&self, answer: &Answer<'_>, history: Vec<Message>, question: String) {
        self.run_after(answer, history, question, Vec::new()).await;
    }

    /// The same, with `after` (a call and its result) after the question.
    pub async fn run_after(
        &self,
        answer: &Answer<'_>,
        history: Vec<Message>,
        question: String,
        after: Vec<Message>,
    ) {
        let mut messages = vec![Message::System {
            content: prompt::system_prompt(self.limits.system_prompt.as_deref()),
        }];
        messages.extend(history);
        messages.push(Message::User { content: question });
        messages.extend(after);
        let mut run = Run {
            messages,
            usage: Usage::default(),
            model: self.models.primary().to_owned(),
        };
        let outcome = self.turns(answer, &mut run).await;
        self.finish(answer, &run, outcome).await;
    }

    /// The tools offered for `answer` now: none to a task's follow-up. Asked again
    /// each turn, since a person who connects an account mid-answer gets its tools.
    async fn catalogue(&self, answer: &Answer<'_>) -> Arc<Catalogue> {
        if answer.asking == Asking::Task {
            Arc::new(Catalogue::default())
        } else {
            self.tools
                .catalogue(Some(answer.user.subject.as_str()))
                .await
        }
    }

    async fn turns(&self, answer: &Answer<'_>, run: &mut Run) -> Result<Finish, Stop> {
        let mut budget = self.limits.tool_calls_per_question;
        let mut repeats = repeats::Repeats::default();
        let mut answer_now = false;
        for turn in 0..self.limits.max_iterations {
            let catalogue = self.catalogue(answer).await;
            let offered = self.offered(&catalogue, &answer.user.roles, &run.messages);
            let hold = self.holds_answers(answer);
            let reply = if answer_now {
                let messages = repeats::answer_from_results(&run.messages);
                self.model_turn(answer, &messages, &offered, true, turn, hold)
                    .instrument(spans::chat(self.models.primary()))
                    .await?
            } else {
                self.model_turn(answer, &run.messages, &offered, false, turn, hold)
                    .instrument(spans::chat(self.models.primary()))
                    .await?
            };
            let small = self.models.is_small(&reply.model);
            run.usage.add(reply.usage);
            run.model.clone_from(&reply.model);
            run.messages.push(Message::Assistant {
                content: (!reply.text.is_empty()).then(|| reply.text.clone()),
                tool_calls: reply.calls.clone(),
            });
            if reply.calls.is_empty() {
                // A small model that said nothing at all after its tools' results is
                // asked once more, the results written into the question.
                let silent = small && reply.text.trim().is_empty() && !answer_now && turn > 0;
                if silent {
                    answer_now = true;
                    continue;
                }
                self.conclude(answer, run, &reply, turn).await?;
                return Ok(Finish::Stop);
            }
            let repeated = repeats.all_repeated(&reply.calls) && small;
            let results = if repeated || answer_now {
                self.refuse_repeats(answer, &catalogue, &reply)
                    .await?
                    .into_iter()
                    .map(Told::Model)
                    .collect()
            } else {
                self.run_calls(answer, &catalogue, &reply, &mut budget)
                    .await?
            };
            if told(answer, run, &reply.calls, results).await? == Waits::ForDecisions {
                // The person decides in a later request, whose answer goes on from here.
                return Ok(Finish::Stop);
            }
            if answer_now {
                // Asked to answer from the results, it called again: the person has
                // the results on the calls' cards, and is told so.
                answer.recorder.token(repeats::NO_ANSWER.to_owned()).await?;
                return Ok(Finish::Stop);
            }
            // A small model that has called tools for a few turns answers from what
            // they returned, rather than wander from tool to tool.
            answer_now = small && (repeated || turn + 1 >= repeats::SMALL_MODEL_TOOL_TURNS);
        }
        let note = format!(
            "\n\n_Stopped after {} steps without a final answer._",
            self.limits.max_iterations
        );
        answer.recorder.token(note).await?;
        Ok(Finish::MaxIterations)
    }

    /// The model is offered only the tools a person with `roles` may use; past the
    /// catalogue's threshold, some of them through search (`tools::search`), those
    /// found in `messages` loaded after the rest.
    fn offered(
        &self,
        catalogue: &Catalogue,
        roles: &[String],
        messages: &[Message],
    ) -> Vec<ToolDef> {
        let policy = self.policy.for_roles(roles);
        search::offer(catalogue, |t| policy.allows(t), messages).tools
    }

    /// How the run ended, told to the viewers: an error if any, the usage, `done`.
    async fn finish(&self, answer: &Answer<'_>, run: &Run, outcome: Result<Finish, Stop>) {
        let recorder = answer.recorder;
        let error = match &outcome {
            Err(Stop::Cancelled) if recorder.interrupted() => {
                Some(("interrupted", failure::INTERRUPTED_MESSAGE.to_owned()))
            }
            Err(Stop::Model(error)) => {
                self.metrics.model_error(&run.model, error);
                tracing::warn!(%error, "the model failed");
                Some((failure::model_code(error), failure::model_message(error)))
            }
            Err(Stop::Storage(error)) => {
                tracing::error!(%error, "the answer could not be stored");
                Some(("storage", failure::STORAGE_MESSAGE.to_owned()))
            }
            Err(Stop::Budget(message)) => Some(("budget", message.clone())),
            Ok(_) | Err(Stop::Cancelled) => None,
        };
        let finish = match outcome {
            Ok(finish) => finish,
            Err(Stop::Cancelled) if error.is_none() => Finish::Cancelled,
            Err(_) => Finish::Error,
        };
        if let Some((code, message)) = error
            && let Err(error) = recorder.error(code, message).await
        {
            tracing::error!(%error, "recording the answer's error");
        }
        if run.usage.total_tokens > 0
            && let Err(error) = recorder.usage(&run.model, run.usage).await
        {
            tracing::error!(%error, "recording token usage");
        }
        tracing::info!(
            finish_reason = ?finish,
            model = %run.model,
            total_tokens = run.usage.total_tokens,
            "answer finished"
        );
        if let Err(error) = recorder.done(finish).await {
            tracing::error!(%error, "recording the answer's end");
        }
    }
}

/// Whether calls of a turn still wait for the person's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waits {
    Nothing,
    /// Some wait for a decision a later request brings ([`Asking::Later`]).
    ForDecisions,
}

/// Stores what the model is told of each call of a turn and adds it to the run.
async fn told(
    answer: &Answer<'_>,
    run: &mut Run,
    calls: &[maitred_llm::ToolCall],
    results: Vec<Told>,
) -> Result<Waits, Stop> {
    let mut waits = Waits::Nothing;
    for (call, result) in calls.iter().zip(results) {
        match result {
            Told::Model(content) => {
                answer.recorder.tool_result(&call.id, &content).await?;
                run.messages.push(Message::Tool {
                    tool_call_id: call.id.clone(),
                    content,
                });
            }
            Told::Later => waits = Waits::ForDecisions,
        }
    }
    Ok(waits)
}
