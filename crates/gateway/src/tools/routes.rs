//! Which call a server's message belongs to. One MCP connection per server carries
//! every person's calls, so a request for input must reach exactly the call that
//! caused it, never a guess. Two exact keys exist:
//!
//! - an `elicitation/create` request of the 2025-11-25 protocol arrives on the HTTP
//!   response stream of one `tools/call` (rmcp tags it with that request's JSON-RPC
//!   id); one that arrives anywhere else (the standalone stream) belongs to no call
//!   and is declined;
//! - `notifications/progress` names the progress token of its request.
//!
//! (A 2026-07-28 server asks for input in the call's own result instead, which needs
//! no routing.) A route lives while its call waits for the server.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{ProgressToken, RequestId};
use tokio::sync::Notify;

use super::interaction::CallLink;

/// How long a message may wait for its call's route: the route is added right
/// after the request is handed to the connection, which may, rarely, deliver the
/// server's first message before that.
const REGISTRATION_GRACE: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Table {
    by_request: HashMap<RequestId, CallLink>,
    by_token: HashMap<ProgressToken, CallLink>,
}

#[derive(Default)]
pub(super) struct Routes {
    table: Mutex<Table>,
    added: Notify,
}

impl Routes {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Routes the request `id` (with its progress `token`) to `link` until the guard drops.
    pub(super) fn add(
        self: &Arc<Self>,
        id: RequestId,
        token: ProgressToken,
        link: CallLink,
    ) -> Route {
        {
            let mut table = self.table();
            table.by_request.insert(id.clone(), link.clone());
            table.by_token.insert(token.clone(), link);
        }
        self.added.notify_waiters();
        Route {
            routes: self.clone(),
            id,
            token,
        }
    }

    pub(super) async fn by_request(&self, id: &RequestId) -> Option<CallLink> {
        self.find(|table| table.by_request.get(id).cloned()).await
    }

    pub(super) async fn by_token(&self, token: &ProgressToken) -> Option<CallLink> {
        self.find(|table| table.by_token.get(token).cloned()).await
    }

    async fn find(&self, look: impl Fn(&Table) -> Option<CallLink>) -> Option<CallLink> {
        let deadline = tokio::time::Instant::now() + REGISTRATION_GRACE;
        loop {
            let added = self.added.notified();
            if let Some(link) = look(&self.table()) {
                return Some(link);
            }
            tokio::select! {
                () = added => {}
                () = tokio::time::sleep_until(deadline) => return look(&self.table()),
            }
        }
    }
}

/// A call's route; removed when dropped.
pub(super) struct Route {
    routes: Arc<Routes>,
    id: RequestId,
    token: ProgressToken,
}

impl Drop for Route {
    fn drop(&mut self) {
        let mut table = self.routes.table();
        table.by_request.remove(&self.id);
        table.by_token.remove(&self.token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;

    #[tokio::test(start_paused = true)]
    async fn a_message_finds_only_its_own_call_and_nothing_once_the_call_ended() {
        let routes = Arc::new(Routes::default());
        let (first, _a) = CallLink::new();
        let (second, _b) = CallLink::new();
        let one = routes.add(
            NumberOrString::Number(1),
            ProgressToken(NumberOrString::Number(1)),
            first.clone(),
        );
        let _two = routes.add(
            NumberOrString::Number(2),
            ProgressToken(NumberOrString::Number(2)),
            second,
        );
        let found = routes.by_request(&NumberOrString::Number(1)).await.unwrap();
        assert!(found.same_as(&first));
        drop(one);
        assert!(
            routes
                .by_request(&NumberOrString::Number(1))
                .await
                .is_none()
        );
        assert!(
            routes
                .by_token(&ProgressToken(NumberOrString::Number(1)))
                .await
                .is_none()
        );
        assert!(
            routes
                .by_request(&NumberOrString::Number(3))
                .await
                .is_none()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_waits_briefly_for_its_route() {
        let routes = Arc::new(Routes::default());
        let (link, _events) = CallLink::new();
        let later = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            routes.add(
                NumberOrString::Number(7),
                ProgressToken(NumberOrString::Number(7)),
                link.clone(),
            )
        };
        let (found, _route) = tokio::join!(routes.by_request(&NumberOrString::Number(7)), later);
        assert!(found.unwrap().same_as(&link));
    }
}
