//! Going on with an answer whose server stopped, from its durable record: the
//! conversation as it was stored (the turns and results that were finished), the
//! last turn's calls that had no stored result sent again (a write with the key it
//! was first sent with, so the backend answers it from what it stored instead of
//! writing twice; a read simply again), and the model asked again from there. A turn
//! that was streaming cannot go on mid-token: what was shown of it stays, and the
//! model is told that its reply was cut off there. A new answer goes on the same way
//! from calls an earlier answer left waiting for the person's decision. (It lives
//! beside the pipeline, whose calls it sends again.)

use super::super::failure::Stop;
use super::super::ports::{Resumption, StoreResult, Tail};
use super::super::{Answer, Answerer, Run, Waits, prompt, told};
use maitred_llm::{Message, ToolCall, Usage};
use maitred_protocol::events::Finish;

/// What viewers are told when the answer goes on.
const RESUMED_MESSAGE: &str =
    "The server running this answer stopped; another one has taken it over and goes on.";

/// What the model is told after the text of a turn that was cut short.
const CUT_NOTE: &str = "Your previous reply was cut off after the text above, because the \
server running it stopped. The user has seen that text. Go on from exactly where it stops, \
without repeating any of it.";

impl Answerer {
    /// Goes on with a taken-over answer (`attempt`: its how-manieth takeover) to
    /// its end; the first event it records is `resumed`, the last `done`.
    pub async fn resume(&self, answer: &Answer<'_>, attempt: u32, resumption: Resumption) {
        let mut run = self.run_from(resumption.messages);
        let outcome = async {
            answer
                .recorder
                .resumed(attempt, RESUMED_MESSAGE.to_owned())
                .await?;
            tracing::info!(message_id = %answer.recorder.answer().message, attempt, "going on with an answer taken over");
            self.go_on(answer, &mut run, resumption.tail, false).await
        }
        .await;
        self.finish(answer, &run, outcome).await;
    }

    /// A new answer that goes on from where an earlier one stopped to wait for the
    /// person's decisions ([`super::super::Asking::Later`]): the calls that waited
    /// (`resumption.tail`) are sent, approved or not as the person decided, shown
    /// to this answer's viewers; then the model goes on from their results.
    pub async fn decided(&self, answer: &Answer<'_>, resumption: Resumption) {
        let mut run = self.run_from(resumption.messages);
        let outcome = self.go_on(answer, &mut run, resumption.tail, true).await;
        self.finish(answer, &run, outcome).await;
    }

    fn run_from(&self, messages: Vec<Message>) -> Run {
        let mut all = vec![Message::System {
            content: prompt::system_prompt(self.limits.system_prompt.as_deref()),
        }];
        all.extend(messages);
        Run {
            messages: all,
            usage: Usage::default(),
            model: self.models.primary().to_owned(),
        }
    }

    /// From `tail` on; `show`: the calls sent again are shown as they start.
    async fn go_on(
        &self,
        answer: &Answer<'_>,
        run: &mut Run,
        tail: Tail,
        show: bool,
    ) -> Result<Finish, Stop> {
        let recorder = answer.recorder;
        match tail {
            Tail::Answered => return Ok(Finish::Stop),
            Tail::Ask { cut } => {
                if cut {
                    run.messages.push(Message::System {
                        content: CUT_NOTE.to_owned(),
                    });
                }
            }
            Tail::Calls { turn, pending } => {
                let catalogue = self
                    .tools
                    .catalogue(Some(answer.user.subject.as_str()))
                    .await;
                let cancel = recorder.cancelled();
                let calls = pending.iter().map(|p| async {
                    match &p.stored {
                        Some(stored) => {
                            self.call_again(answer, &catalogue, &p.call, stored, show)
                                .await
                        }
                        None => self.call(answer, &catalogue, &turn, &p.call, None).await,
                    }
                });
                let results = tokio::select! {
                    () = cancel.cancelled() => return Err(Stop::Cancelled),
                    results = futures::future::join_all(calls) => results,
                };
                let results = results.into_iter().collect::<StoreResult<Vec<_>>>()?;
                let calls: Vec<ToolCall> = pending.into_iter().map(|p| p.call).collect();
                if told(answer, run, &calls, results).await? == Waits::ForDecisions {
                    return Ok(Finish::Stop);
                }
            }
        }
        self.turns(answer, run).await
    }
}
