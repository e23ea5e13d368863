//! Keeping the catalogue current: every server's tools are listed when first needed,
//! again after a TTL, when a server says its list changed, and soon after a server
//! could not be listed.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::catalogue::{Catalogue, RegisteredTool};
use super::connection::{Server, Session};
use super::error::HubError;
use super::hub::ToolHub;

/// Rediscover tools at least this often.
const TTL: Duration = Duration::from_secs(300);
/// After a server could not be reached, wait this long before trying again.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);

impl ToolHub {
    /// The tools offered to `owner`: everyone's, and theirs at the servers where
    /// each person signs in (`people.rs`).
    pub async fn catalogue_for(&self, owner: Option<&str>) -> Arc<Catalogue> {
        let shared = self.catalogue().await;
        let personal = self.personal_tools(owner).await;
        if personal.is_empty() {
            return shared;
        }
        let mut tools = shared.tools.clone();
        tools.extend(personal);
        Arc::new(Catalogue {
            tools,
            unavailable: shared.unavailable.clone(),
        })
    }

    /// Everyone's tools; rediscovered when stale. One caller refreshes, the others wait.
    pub async fn catalogue(&self) -> Arc<Catalogue> {
        let mut refreshed = self.refreshed.lock().await;
        let changed = self
            .servers
            .iter()
            .any(|s| s.stale.swap(false, Ordering::SeqCst));
        let due = match *refreshed {
            None => true,
            Some((at, complete)) => {
                changed || at.elapsed() >= TTL || (!complete && at.elapsed() >= RETRY_AFTER_FAILURE)
            }
        };
        if due {
            let previous = self.catalogue.read().await.clone();
            let catalogue = self.discover(&previous).await;
            let complete = catalogue.unavailable.is_empty();
            *self.catalogue.write().await = Arc::new(catalogue);
            *refreshed = Some((Instant::now(), complete));
        }
        self.catalogue.read().await.clone()
    }

    /// Lists every server's tools. A server that cannot be listed keeps the tools it
    /// had: calls to them then report it unavailable, which the model can tell the
    /// user, rather than the tools silently vanishing.
    async fn discover(&self, previous: &Catalogue) -> Catalogue {
        let mut catalogue = Catalogue::default();
        for server in &self.servers {
            // Listed for each person, with their token.
            if self.accounts.is_user_oauth(&server.config.name) {
                continue;
            }
            let listed = match server.breaker.attempt() {
                Err(wait) => Err(HubError::BreakerOpen {
                    server: server.config.name.clone(),
                    wait,
                }),
                Ok(attempt) => {
                    let listed = list(server).await;
                    match &listed {
                        Ok(_) => attempt.succeeded(),
                        Err(_) => attempt.failed(),
                    }
                    listed
                }
            };
            match listed {
                Ok(tools) => catalogue.tools.extend(tools),
                Err(reason) => {
                    tracing::warn!(server = %server.config.name, %reason, "cannot list the MCP server's tools");
                    server.forget_connection().await;
                    catalogue.tools.extend(
                        previous
                            .tools
                            .iter()
                            .filter(|t| t.server == server.config.name)
                            .cloned(),
                    );
                    catalogue
                        .unavailable
                        .push((server.config.name.clone(), reason.to_string()));
                }
            }
        }
        tracing::info!(
            tools = catalogue.tools.len(),
            unavailable = catalogue.unavailable.len(),
            "discovered MCP tools"
        );
        catalogue
    }
}

/// One server's tools, within its timeout.
async fn list(server: &Server) -> Result<Vec<Arc<RegisteredTool>>, HubError> {
    list_in(server, &server.session).await
}

/// One server's tools as `session` sees them.
pub(super) async fn list_in(
    server: &Server,
    session: &Session,
) -> Result<Vec<Arc<RegisteredTool>>, HubError> {
    let (connection, _) = session.connection_and_routes(server).await?;
    let timeout = server.config.timeout;
    let tools = tokio::time::timeout(timeout, connection.list_all_tools())
        .await
        .map_err(|_| HubError::ListTimeout { timeout })?
        .map_err(HubError::Listing)?;
    let as_person = server.http.delegates() || !std::ptr::eq(session, &server.session);
    Ok(tools
        .into_iter()
        .filter_map(|tool| RegisteredTool::listed(&server.config, as_person, tool))
        .map(Arc::new)
        .collect())
}
