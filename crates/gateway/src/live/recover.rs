//! Ending an answer whose replica died (or, without Redis, whose process did) and that
//! cannot go on (`chat::resume`): every viewer gets `error` `interrupted` and `done`,
//! and the stored answer gets every token that was ever shown, read back from the
//! answer's log.

use super::{LiveError, LoggedEvent};
use crate::answer::ports::AnswerRef;
use crate::chat::store::Store;
use maitred_protocol::events::{ChatEvent, DoneEvent, ErrorEvent, Finish};

const INTERRUPTED: &str =
    "The server running this answer stopped, so it was cut short. Please ask again.";

/// Stores what `events` showed of the answer and marks it interrupted; returns the
/// events that end it for its viewers (none if it had ended).
pub(super) async fn finish(
    store: &Store,
    answer: &AnswerRef,
    events: &[LoggedEvent],
) -> Result<Vec<LoggedEvent>, LiveError> {
    let shown: String = events.iter().filter_map(LoggedEvent::token_text).collect();
    store.keep_interrupted(answer, &shown).await?;
    // Nobody goes on with it: who asked it (and their token) is not kept.
    store.forget_asker(&answer.message).await?;
    if events.last().is_some_and(LoggedEvent::is_done) {
        return Ok(Vec::new());
    }
    let last = events.last().map_or(0, |e| e.seq);
    let error = ChatEvent::Error(ErrorEvent {
        code: "interrupted".to_owned(),
        message: INTERRUPTED.to_owned(),
    });
    let done = ChatEvent::Done(DoneEvent {
        finish_reason: Finish::Error,
    });
    tracing::warn!(message_id = %answer.message, tokens = shown.len(), "ended an answer its replica left running");
    Ok(vec![
        LoggedEvent::new(last + 1, &error),
        LoggedEvent::new(last + 2, &done),
    ])
}
