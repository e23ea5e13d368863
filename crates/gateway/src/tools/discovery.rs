//! Keeping the catalogue current, server by server: a server's tools are listed when
//! first needed, again once its listing is stale (after the `ttlMs` the server gave
//! it, in the 2026-07-28 revision; after five minutes for a server that gives none),
//! when the server says its list changed, and soon after it could not be listed.
//!
//! A listing is kept in the authorization context it was made in (the gateway's own
//! here; each person's own at a server where people sign in, `people.rs`), which
//! both `cacheScope`s allow. A listing that comes back with the same tools keeps the
//! catalogue as it was, order and search index included: the tools the model is sent
//! stay the same bytes, and a provider's prompt cache keeps hitting.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rmcp::model::{PaginatedRequestParams, Tool};

use super::catalogue::{Catalogue, RegisteredTool};
use super::connection::{Listing, Server, Session};
use super::error::HubError;
use super::hub::ToolHub;
use super::search;

/// How long a listing is fresh when its server gives no `ttlMs` (before 2026-07-28).
const DEFAULT_TTL: Duration = Duration::from_secs(300);
/// The longest a listing is kept, whatever its server says.
const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);
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
        Arc::new(Catalogue::new(
            tools,
            shared.unavailable.clone(),
            self.search.clone(),
        ))
    }

    /// Everyone's tools; the servers whose listing is stale are listed again (all at
    /// once). One caller lists, the others wait.
    pub async fn catalogue(&self) -> Arc<Catalogue> {
        let mut listed_once = self.listed_once.lock().await;
        let now = Instant::now();
        let due: Vec<&Arc<Server>> = self
            .servers
            .iter()
            // Listed for each person, with their token.
            .filter(|s| !self.accounts.is_user_oauth(&s.config.name))
            .filter(|s| due(s, now))
            .collect();
        if due.is_empty() && *listed_once {
            return self.catalogue.read().await.clone();
        }
        let changes = futures::future::join_all(due.iter().map(|s| relist(s))).await;
        if changes.contains(&true) || !*listed_once {
            *self.catalogue.write().await = Arc::new(self.assemble());
            *listed_once = true;
        }
        self.catalogue.read().await.clone()
    }

    /// The catalogue from every server's latest listing, servers in their configured
    /// order.
    fn assemble(&self) -> Catalogue {
        let mut tools = Vec::new();
        let mut unavailable = Vec::new();
        for server in &self.servers {
            let listing = server.listing.lock().unwrap_or_else(|e| e.into_inner());
            let Some(listing) = listing.as_ref() else {
                continue;
            };
            tools.extend(listing.tools.iter().cloned());
            if let Some((_, reason)) = &listing.failed {
                unavailable.push((server.config.name.clone(), reason.clone()));
            }
        }
        tracing::info!(
            tools = tools.len(),
            unavailable = unavailable.len(),
            "discovered MCP tools"
        );
        let catalogue = Catalogue::new(tools, unavailable, self.search.clone());
        // Built now, rather than by the first question that searches.
        if search::defers(&catalogue) {
            catalogue.index();
        }
        catalogue
    }
}

/// Whether `server`'s listing must be made again.
fn due(server: &Server, now: Instant) -> bool {
    if server.stale.swap(false, Ordering::SeqCst) {
        return true;
    }
    let listing = server.listing.lock().unwrap_or_else(|e| e.into_inner());
    match listing.as_ref() {
        None => true,
        Some(Listing {
            failed: Some((at, _)),
            ..
        }) => now.duration_since(*at) >= RETRY_AFTER_FAILURE,
        Some(listing) => now >= listing.fresh_until,
    }
}

/// Lists `server` again; true when what the catalogue holds of it changed (its
/// tools, or whether it could be listed). A server that cannot be listed keeps the
/// tools it had: calls to them then report it unavailable, which the model can tell
/// the user, rather than the tools silently vanishing.
async fn relist(server: &Server) -> bool {
    let listed = match server.breaker.attempt() {
        Err(wait) => Err(HubError::BreakerOpen {
            server: server.config.name.clone(),
            wait,
        }),
        Ok(attempt) => {
            let listed = list_in(server, &server.session).await;
            match &listed {
                Ok(_) => attempt.succeeded(),
                Err(_) => attempt.failed(),
            }
            listed
        }
    };
    if let Err(reason) = &listed {
        tracing::warn!(server = %server.config.name, %reason, "cannot list the MCP server's tools");
        server.forget_connection().await;
    }
    let mut kept = server.listing.lock().unwrap_or_else(|e| e.into_inner());
    match (listed, kept.as_mut()) {
        (Ok(listed), Some(before)) if same_tools(&before.listed, &listed.listed) => {
            let was_failing = before.failed.take().is_some();
            before.fresh_until = listed.fresh_until;
            was_failing
        }
        (Ok(listed), _) => {
            *kept = Some(listed);
            true
        }
        (Err(reason), Some(before)) => {
            let was_failing = before.failed.is_some();
            before.failed = Some((Instant::now(), reason.to_string()));
            !was_failing
        }
        (Err(reason), None) => {
            *kept = Some(Listing {
                tools: Vec::new(),
                listed: Vec::new(),
                fresh_until: Instant::now(),
                failed: Some((Instant::now(), reason.to_string())),
            });
            true
        }
    }
}

/// The same tools, whatever their order: a server that lists them in another order
/// each time does not reshuffle the prompt.
fn same_tools(before: &[Tool], now: &[Tool]) -> bool {
    before.len() == now.len() && now.iter().all(|tool| before.contains(tool))
}

/// One server's tools as `session` sees them, within the server's timeout, and how
/// long the listing is fresh.
pub(super) async fn list_in(server: &Server, session: &Session) -> Result<Listing, HubError> {
    let (connection, _) = session.connection_and_routes(server).await?;
    let timeout = server.config.timeout;
    let (listed, ttl) = tokio::time::timeout(timeout, every_page(&connection))
        .await
        .map_err(|_| HubError::ListTimeout { timeout })?
        .map_err(HubError::Listing)?;
    let as_person = server.http.delegates() || !std::ptr::eq(session, &server.session);
    let tools = listed
        .iter()
        .cloned()
        .filter_map(|tool| RegisteredTool::listed(&server.config, as_person, tool))
        .map(Arc::new)
        .collect();
    let fresh_for = ttl.map_or(DEFAULT_TTL, Duration::from_millis).min(MAX_TTL);
    Ok(Listing {
        tools,
        listed,
        fresh_until: Instant::now() + fresh_for,
        failed: None,
    })
}

/// Every page of the server's `tools/list`, and the shortest `ttlMs` any page gave.
async fn every_page(
    connection: &super::connection::Connection,
) -> Result<(Vec<Tool>, Option<u64>), rmcp::ServiceError> {
    let mut tools = Vec::new();
    let mut ttl: Option<u64> = None;
    let mut cursor = None;
    loop {
        let page = connection
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await?;
        tools.extend(page.tools);
        if let Some(page_ttl) = page.ttl_ms {
            ttl = Some(ttl.map_or(page_ttl, |t| t.min(page_ttl)));
        }
        cursor = page.next_cursor;
        if cursor.is_none() {
            return Ok((tools, ttl));
        }
    }
}
