//! `notifications/progress` for a long tool call, sent only to a caller that asked
//! for them with `_meta.progressToken`.

use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RequestContext};

/// Where a tool reports its steps; silent when the caller gave no progress token.
#[derive(Clone, Default)]
pub(super) struct Progress {
    to: Option<(Peer<RoleServer>, ProgressToken)>,
}

impl Progress {
    pub(super) fn of(ctx: &RequestContext<RoleServer>) -> Self {
        Self {
            to: ctx
                .meta
                .get_progress_token()
                .map(|token| (ctx.peer.clone(), token)),
        }
    }

    /// `done` of `total` steps are over; `message` says what the last one found.
    pub(super) async fn step(&self, done: u32, total: u32, message: String) {
        let Some((peer, token)) = &self.to else {
            return;
        };
        let params = ProgressNotificationParam::new(token.clone(), f64::from(done))
            .with_total(f64::from(total))
            .with_message(message);
        // A caller that went away loses its progress, not its result.
        if let Err(error) = peer.notify_progress(params).await {
            tracing::debug!(%error, "a progress notification could not be sent");
        }
    }
}
