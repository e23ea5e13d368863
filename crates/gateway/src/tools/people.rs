//! Servers where each person signs in (`auth.type = "user_oauth"`). Such a server
//! binds an MCP session to the person whose token opened it, and often hides even
//! `tools/list` until then: each person has their own session with it, and their
//! own list of its tools, made once they have connected. Until then the model is
//! offered one stand-in tool per server (`<server>__connect`) that says what the
//! server is for.
//!
//! A call that needs a sign-in (none yet, the sign-in ended, or the server wants
//! more scopes) pauses on a "Connect <server>" card; the gateway's callback settles
//! it, and the call goes on with the new token, once.

use std::sync::Arc;
use std::time::Instant;

use maitred_protocol::events::{ConnectCard, ConnectReason, InputAction};
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use tracing::Instrument;

use super::call::{CallContext, with_trace};
use super::catalogue::RegisteredTool;
use super::connection::{Line, PersonSession, Server, Session};
use super::credentials::Credentials;
use super::discovery;
use super::error::HubError;
use super::http::{AuthedHttp, Challenge};
use super::hub::ToolHub;
use super::input_rounds::Answered;
use super::interaction::CallLink;
use crate::accounts::AccountError;

/// Sign-ins one call may ask for after its first attempt (a step up, or a sign-in
/// that ended under it), besides the one it may need before it.
const SIGN_INS_PER_CALL: usize = 2;

/// Whether `owner` is a person (not a client acting for nobody), who can sign in.
fn is_person(owner: &str) -> bool {
    !owner.starts_with(crate::auth::CLIENT_OWNER)
}

impl ToolHub {
    fn person_session(&self, server: &Server, owner: &str) -> Arc<PersonSession> {
        let mut people = server
            .people
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        people
            .entry(owner.to_owned())
            .or_insert_with(|| {
                let credentials = Credentials::Account {
                    accounts: self.accounts.clone(),
                    owner: owner.to_owned(),
                    server: server.config.name.clone(),
                };
                Arc::new(PersonSession {
                    session: Session::new(AuthedHttp::new(self.http.clone(), credentials)),
                    tools: tokio::sync::Mutex::default(),
                })
            })
            .clone()
    }

    /// Drops `owner`'s session and tools at `server` (disconnected, or connected
    /// anew): the next use starts afresh.
    pub async fn forget_person(&self, server: &str, owner: &str) {
        let Some(server) = self.servers.iter().find(|s| s.config.name == server) else {
            return;
        };
        let person = server
            .people
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(owner);
        if let Some(person) = person {
            person.session.forget().await;
        }
    }

    /// For `owner`, the tools of every server where each person signs in: theirs
    /// where they have connected, the stand-in where not.
    pub(super) async fn personal_tools(&self, owner: Option<&str>) -> Vec<Arc<RegisteredTool>> {
        let mut tools = Vec::new();
        for server in &self.servers {
            if !self.accounts.is_user_oauth(&server.config.name) {
                continue;
            }
            let Some(owner) = owner.filter(|o| is_person(o)) else {
                continue;
            };
            let connected = self
                .accounts
                .connected(owner, &server.config.name)
                .await
                .unwrap_or(false);
            let listed = if connected {
                self.person_tools(server, owner).await
            } else {
                None
            };
            match listed {
                Some(listed) => tools.extend(listed),
                None => tools.push(Arc::new(RegisteredTool::connect(&server.config))),
            }
        }
        tools
    }

    /// `owner`'s tools at `server`, listed with their token (kept a while); when
    /// they cannot be listed now (the sign-in ended, the server is down), the last
    /// ones listed, or `None` if there were none.
    async fn person_tools(&self, server: &Server, owner: &str) -> Option<Vec<Arc<RegisteredTool>>> {
        let person = self.person_session(server, owner);
        let mut kept = person.tools.lock().await;
        if let Some((fresh_until, tools)) = kept.as_ref()
            && Instant::now() < *fresh_until
        {
            return Some(tools.clone());
        }
        match discovery::list_in(server, &person.session).await {
            Ok(listing) => {
                *kept = Some((listing.fresh_until, listing.tools.clone()));
                Some(listing.tools)
            }
            Err(reason) => {
                person.session.http.take_challenge();
                person.session.forget().await;
                tracing::warn!(server = %server.config.name, %reason, "cannot list a person's tools at the MCP server");
                // As for a shared server: the tools they had stay offered, so a call
                // to one says what is wrong (a sign-in that ended asks to reconnect)
                // rather than the tools vanishing, even where the server asks not to
                // keep its listing (a `ttlMs` of 0).
                kept.as_ref().map(|(_, tools)| tools.clone())
            }
        }
    }

    /// A call at a server where each person signs in: with their token, after a
    /// sign-in if there is none (or the server wants another).
    pub(super) async fn call_as_person(
        &self,
        server: &Server,
        tool: &RegisteredTool,
        params: CallToolRequestParams,
        context: &CallContext<'_>,
        link: &CallLink,
    ) -> Result<Answered, HubError> {
        let name = &server.config.name;
        let owner = context.end_user;
        if !is_person(owner) {
            return Err(HubError::NoPerson {
                server: name.clone(),
            });
        }
        let account = |error: AccountError| HubError::Account {
            server: name.clone(),
            error,
        };
        let connected = self
            .accounts
            .connected(owner, name)
            .await
            .map_err(account)?;
        let person = self.person_session(server, owner);
        // Tools still kept for a person who is not connected: their sign-in ended
        // (a refresh refused while listing them), not a first connection.
        let ended = !connected && person.tools.lock().await.is_some();
        let first = if ended {
            ConnectReason::Reconnect
        } else {
            ConnectReason::Connect
        };
        let mut needed = (!connected).then_some((first, None));
        if tool.connect && connected {
            // Connected, unless the sign-in can no longer be used; an authorization
            // server out of reach is not a reason to sign in again.
            match self.accounts.access_token(owner, name).await {
                Ok(_) => return Ok(self.connected_result(server, owner, false).await),
                Err(AccountError::SignInEnded(_) | AccountError::NotConnected(_)) => {
                    needed = Some((ConnectReason::Reconnect, None));
                }
                Err(error) => return Err(account(error)),
            }
        }
        for sign_in in 0..=SIGN_INS_PER_CALL {
            if let Some((reason, challenge)) = needed.take() {
                self.sign_in(server, owner, context, link, reason, challenge.as_deref())
                    .await?;
                person.session.forget().await;
                person.tools.lock().await.take();
                if tool.connect {
                    return Ok(self.connected_result(server, owner, true).await);
                }
            }
            person.session.http.take_challenge();
            let answered = async {
                let (connection, routes) = person.session.connection_and_routes(server).await?;
                let span = super::spans::tools_call(&tool.server, &tool.tool, &connection);
                let params = with_trace(params.clone(), &span, context.traceparent);
                let line = Line {
                    server,
                    session: &person.session,
                    connection: &connection,
                    routes: &routes,
                };
                self.until_answered(line, tool, link, params)
                    .instrument(span)
                    .await
            }
            .await;
            let challenge = person.session.http.take_challenge();
            match (answered, challenge) {
                (Err(error), Some(challenge)) if sign_in < SIGN_INS_PER_CALL => {
                    tracing::info!(server = %name, %error, ?challenge, "the MCP server wants the person to sign in (again)");
                    person.session.forget().await;
                    needed = Some(match challenge {
                        Challenge::SignIn(header) => (ConnectReason::Reconnect, header),
                        Challenge::MoreScope(header) => (ConnectReason::MoreAccess, Some(header)),
                    });
                }
                (answered, _) => return answered,
            }
        }
        Err(HubError::ConnectUnfinished {
            server: name.clone(),
        })
    }

    /// Shows the "Connect <server>" card and waits for the sign-in to come back.
    async fn sign_in(
        &self,
        server: &Server,
        owner: &str,
        context: &CallContext<'_>,
        link: &CallLink,
        reason: ConnectReason,
        challenge: Option<&str>,
    ) -> Result<(), HubError> {
        let name = &server.config.name;
        let begun = self
            .accounts
            .begin(owner, name, Some(context.tool_call_id), reason, challenge)
            .await
            .map_err(|error| HubError::Account {
                server: name.clone(),
                error,
            })?;
        // The host is in the card (`connect.host`), which shows it apart.
        let message = match reason {
            ConnectReason::Connect => {
                format!("{name} needs you to connect your account before it can be used for you.")
            }
            ConnectReason::Reconnect => {
                format!("Your sign-in at {name} has ended. Connect again to go on.")
            }
            ConnectReason::MoreAccess => {
                format!("{name} needs more access than you gave it for this.")
            }
        };
        let card = ConnectCard {
            server: name.clone(),
            host: begun.host.clone(),
            reason,
        };
        let reply = link.ask_to_connect(message, begun.url, card).await;
        match reply.action {
            InputAction::Accept if self.accounts.connected(owner, name).await.unwrap_or(false) => {
                Ok(())
            }
            InputAction::Accept | InputAction::Cancel => Err(HubError::ConnectUnfinished {
                server: name.clone(),
            }),
            InputAction::Decline => Err(HubError::ConnectDeclined {
                server: name.clone(),
            }),
        }
    }

    /// What the stand-in tool answers once the person is connected: the server's
    /// tools, which the model is offered from its next turn.
    async fn connected_result(&self, server: &Server, owner: &str, now: bool) -> Answered {
        let name = &server.config.name;
        let listed = self.person_tools(server, owner).await.unwrap_or_default();
        let tools: Vec<String> = listed
            .iter()
            .map(|t| format!("{} ({})", t.exposed, t.title))
            .collect();
        let connected = if now {
            format!("The person has connected their account at {name}.")
        } else {
            format!("The person's account at {name} is already connected.")
        };
        let text = if tools.is_empty() {
            format!("{connected} Its tools could not be listed just now; try again shortly.")
        } else {
            format!(
                "{connected} Its tools are available from now on: {}.",
                tools.join(", ")
            )
        };
        Answered::Result(CallToolResult::success(vec![ContentBlock::text(text)]))
    }
}
