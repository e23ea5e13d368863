//! While a call runs, what its server says on the way reaches the person: progress
//! (at most 4 events a second per call, the latest always shown before the result)
//! and requests for input, which wait for the person's answer and take it back to
//! the server. Where nobody can answer at once (the OpenAI-compatible APIs), every
//! request is declined.

use std::future::Future;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::super::Answer;
use super::super::Asking;
use super::super::ports::{InputRequest, Inputs, StoreResult};
use super::super::recorder::ShownCall;
use crate::tools::{AskKind, CallEvent, CallOutcome, InputAsk, InputReply, Progress};
use maitred_protocol::events::{InputAction, InputMode, InputRequiredEvent, ToolProgressEvent};
use maitred_protocol::ids::InputId;

/// At most one progress event per call this often.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// Runs `call`, serving what its server says on the way; returns what it came to.
pub(super) async fn converse(
    answer: &Answer<'_>,
    inputs: &dyn Inputs,
    shown: &ShownCall,
    call: impl Future<Output = CallOutcome>,
    mut events: mpsc::Receiver<CallEvent>,
) -> StoreResult<CallOutcome> {
    let mut call = std::pin::pin!(call);
    let mut throttle = Throttle::default();
    let mut listening = true;
    loop {
        let due = throttle.due();
        tokio::select! {
            outcome = &mut call => {
                while let Ok(event) = events.try_recv() {
                    match event {
                        CallEvent::Progress(progress) => throttle.hold(progress),
                        // The call is over: nothing waits for this answer any more.
                        CallEvent::Input { reply, .. } => {
                            let _ = reply.send(InputReply::only(InputAction::Cancel));
                        }
                    }
                }
                if let Some(due) = throttle.due() {
                    tokio::time::sleep_until(due).await;
                    if let Some(progress) = throttle.take() {
                        show_progress(answer, shown, progress).await?;
                    }
                }
                return Ok(outcome);
            }
            event = events.recv(), if listening => match event {
                None => listening = false,
                Some(CallEvent::Progress(progress)) => {
                    if let Some(progress) = throttle.offer(progress) {
                        show_progress(answer, shown, progress).await?;
                    }
                }
                Some(CallEvent::Input { asked, reply }) => {
                    let answered = ask(answer, inputs, shown, asked).await?;
                    let _ = reply.send(answered);
                }
            },
            () = sleep_until(due), if due.is_some() => {
                if let Some(progress) = throttle.take() {
                    show_progress(answer, shown, progress).await?;
                }
            }
        }
    }
}

async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

async fn show_progress(
    answer: &Answer<'_>,
    shown: &ShownCall,
    progress: Progress,
) -> StoreResult<()> {
    answer
        .recorder
        .tool_progress(ToolProgressEvent {
            id: shown.id.clone(),
            progress: progress.progress,
            total: progress.total,
            message: progress.message,
        })
        .await
}

/// Shows the request, waits for the person (or the timeout, or the answer's end),
/// and shows how it ended.
async fn ask(
    answer: &Answer<'_>,
    inputs: &dyn Inputs,
    shown: &ShownCall,
    asked: InputAsk,
) -> StoreResult<InputReply> {
    let nobody = match answer.asking {
        Asking::Never { why } => Some(why),
        Asking::Later => Some("the person answers in a later request"),
        Asking::Person | Asking::Task => None,
    };
    if let Some(why) = nobody {
        tracing::info!(server = %shown.server, tool = %shown.tool, why, "a tool asked for input; declined");
        return Ok(InputReply::only(InputAction::Decline));
    }
    // Counted before it is shown, so whoever sees the request sees it counted.
    let waiting = answer.recorder.waiting_for_input();
    let id = InputId::new();
    let (mode, schema, url) = match &asked.kind {
        AskKind::Form { schema } => (InputMode::Form, Some(schema), None),
        AskKind::Url { url } => (InputMode::Url, None, Some(url.as_str())),
    };
    let request = InputRequest {
        id: &id,
        call: &shown.id,
        answer: answer.recorder.answer(),
        server: &shown.server,
        tool: &shown.tool,
        message: &asked.message,
        mode,
        schema,
        url,
        connect: asked.connect.as_ref(),
    };
    let expires_at = inputs.open(&request).await?;
    let seq = answer
        .recorder
        .input_required(InputRequiredEvent {
            id: id.clone(),
            tool_call_id: shown.id.clone(),
            server: shown.server.clone(),
            tool: shown.tool.clone(),
            message: asked.message.clone(),
            mode,
            schema: schema.cloned(),
            url: url.map(str::to_owned),
            connect: asked.connect.clone(),
            expires_at,
        })
        .await?;
    inputs.shown(&id, seq).await?;
    let reply = inputs.wait(&request, &answer.recorder.cancelled()).await?;
    drop(waiting);
    answer
        .recorder
        .input_resolved(id.clone(), reply.action)
        .await?;
    Ok(reply)
}

/// Progress, at most once per [`PROGRESS_EVERY`]: what comes in between waits, and
/// only the latest of it is shown. Progress only grows (the protocol says so); a
/// report that arrives late, behind a newer one, is dropped. A new round of a
/// 2026-07-28 call is a new request, whose progress may start again from zero.
#[derive(Debug, Default)]
struct Throttle {
    shown_at: Option<Instant>,
    /// The last value shown, and its round.
    last: Option<(u32, f64)>,
    held: Option<Progress>,
}

impl Throttle {
    /// What to show now, if anything.
    fn offer(&mut self, progress: Progress) -> Option<Progress> {
        if !self.newer(&progress) {
            return None;
        }
        let now = Instant::now();
        if self
            .shown_at
            .is_some_and(|at| now.duration_since(at) < PROGRESS_EVERY)
        {
            self.held = Some(progress);
            return None;
        }
        self.held = None;
        self.mark(&progress, now);
        Some(progress)
    }

    /// Keeps `progress` for the next slot.
    fn hold(&mut self, progress: Progress) {
        if self.newer(&progress) {
            self.held = Some(progress);
        }
    }

    fn newer(&self, progress: &Progress) -> bool {
        let latest = self
            .held
            .as_ref()
            .map(|held| (held.round, held.progress))
            .or(self.last);
        match latest {
            None => true,
            Some((round, value)) => {
                progress.round > round || (progress.round == round && progress.progress > value)
            }
        }
    }

    /// When the held progress may be shown.
    fn due(&self) -> Option<Instant> {
        self.held.as_ref()?;
        Some(
            self.shown_at
                .map_or_else(Instant::now, |at| at + PROGRESS_EVERY),
        )
    }

    fn take(&mut self) -> Option<Progress> {
        let progress = self.held.take()?;
        self.mark(&progress, Instant::now());
        Some(progress)
    }

    fn mark(&mut self, progress: &Progress, at: Instant) {
        self.shown_at = Some(at);
        self.last = Some((progress.round, progress.progress));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(round: u32, progress: f64) -> Progress {
        Progress {
            round,
            progress,
            total: None,
            message: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn progress_is_shown_at_most_every_quarter_second_and_the_latest_wins() {
        let mut throttle = Throttle::default();
        assert_eq!(throttle.offer(at(0, 1.0)), Some(at(0, 1.0)));
        assert_eq!(throttle.offer(at(0, 2.0)), None);
        assert_eq!(throttle.offer(at(0, 3.0)), None);
        // Late, behind a newer one: dropped.
        assert_eq!(throttle.offer(at(0, 2.5)), None);
        let due = throttle.due().unwrap();
        assert_eq!(due.duration_since(Instant::now()), PROGRESS_EVERY);
        tokio::time::sleep_until(due).await;
        assert_eq!(throttle.take(), Some(at(0, 3.0)));
        assert_eq!(throttle.due(), None);
        tokio::time::sleep(PROGRESS_EVERY).await;
        assert_eq!(throttle.offer(at(0, 3.0)), None, "not newer");
        // The next round of a 2026-07-28 call starts again from zero.
        assert_eq!(throttle.offer(at(1, 0.5)), Some(at(1, 0.5)));
    }
}
