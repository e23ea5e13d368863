//! How a tool call waits for the person (an approval, a tool's input request): until the
//! answer lands, from any replica, or its time runs out, or the answer is cancelled.
//! Whichever settles the pending row first wins; the others find it settled.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::live::Live;

/// How often a waiting call looks at its row even without being woken: a wake sent
/// from another replica may be lost with its connection.
const POLL: Duration = Duration::from_secs(2);

/// Why the wait ended without an answer.
pub(super) enum Unanswered {
    Expired,
    Cancelled,
}

/// Waits for `id`: `look` reads the row (`None` while pending), `settle` moves it from
/// pending to `expired` or `cancelled` (false if something settled it first), and
/// `unanswered` is what the call gets when this wait settled it.
pub(super) async fn wait<T, E, Look, Settle>(
    live: &Live,
    id: &str,
    timeout: Duration,
    cancel: &CancellationToken,
    look: impl Fn() -> Look,
    settle: impl Fn(&'static str) -> Settle,
    unanswered: impl Fn(Unanswered) -> T,
) -> Result<T, E>
where
    Look: Future<Output = Result<Option<T>, E>>,
    Settle: Future<Output = Result<bool, E>>,
{
    // Listening before looking: an answer between the two still wakes us.
    let waiter = live.local().waiter(id);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(answer) = look().await? {
            return Ok(answer);
        }
        tokio::select! {
            () = waiter.woken() => {}
            () = tokio::time::sleep(POLL) => {}
            () = tokio::time::sleep_until(deadline) => {
                if settle("expired").await? {
                    return Ok(unanswered(Unanswered::Expired));
                }
            }
            () = cancel.cancelled() => {
                if settle("cancelled").await? {
                    return Ok(unanswered(Unanswered::Cancelled));
                }
            }
        }
    }
}
