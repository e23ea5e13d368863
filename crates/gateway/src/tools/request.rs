//! One `tools/call` request on the wire, within the server's timeout. While it waits
//! it is routed to its call (progress, and the requests for input on its response
//! stream); dropped before its answer (a timeout, the person's Stop), it tells the
//! server so.

use std::sync::Arc;

use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, RequestId,
    ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient};
use tokio_util::task::TaskTracker;

use super::connection::Line;
use super::error::HubError;
use super::hub::ToolHub;
use super::interaction::CallLink;
use super::routes::Routes;

impl ToolHub {
    /// Request `round` of a call: its answer, or why there is none.
    pub(super) async fn request(
        &self,
        line: Line<'_>,
        params: CallToolRequestParams,
        link: &CallLink,
        round: u32,
    ) -> Result<ServerResult, HubError> {
        let Line {
            server, session, ..
        } = line;
        let round_link = link.for_round(round);
        let sent = self.send_call(line.connection.peer(), line.routes, params, &round_link);
        let timeout = server.config.timeout;
        match link.within(timeout, sent).await {
            None => Err(HubError::CallTimeout {
                server: server.config.name.clone(),
                timeout,
            }),
            Some(Ok(answer)) => Ok(answer),
            Some(Err(ServiceError::McpError(error))) => Err(HubError::Refused(error)),
            Some(Err(error)) => {
                session.forget().await;
                Err(HubError::Transport {
                    server: server.config.name.clone(),
                    error,
                })
            }
        }
    }

    async fn send_call(
        &self,
        peer: &Peer<RoleClient>,
        routes: &Arc<Routes>,
        params: CallToolRequestParams,
        link: &CallLink,
    ) -> Result<ServerResult, ServiceError> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await?;
        let _route = routes.add(
            handle.id.clone(),
            handle.progress_token.clone(),
            link.clone(),
        );
        let mut abandoned = Abandoned {
            peer: peer.clone(),
            id: Some(handle.id.clone()),
            tasks: self.tasks.clone(),
        };
        let answer = handle.await_response().await;
        abandoned.id = None;
        answer
    }
}

/// A request nobody waits for any more: the server is told (`notifications/cancelled`),
/// so it stops working on it and stops asking the person.
struct Abandoned {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
    tasks: TaskTracker,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        // Dropped outside a runtime (a process going down): nobody to tell.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        self.tasks.spawn_on(
            async move {
                let notice = CancelledNotificationParam::new(
                    Some(id),
                    Some("the person's answer no longer waits for it".to_owned()),
                );
                let _ = peer.notify_cancelled(notice).await;
            },
            &runtime,
        );
    }
}
