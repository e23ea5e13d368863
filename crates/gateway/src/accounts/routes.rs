//! The accounts' HTTP edge:
//!
//! - `GET    /api/v1/resos/accounts` — the person's servers that need their sign-in
//! - `POST   /api/v1/resos/accounts/{server}/connect` — start a sign-in (the panel)
//! - `DELETE /api/v1/resos/accounts/{server}` — disconnect (revoke, then delete)
//! - `GET    /api/v1/resos/admin/accounts` — who connected what (ADMIN; no tokens)
//! - `GET    /oauth/callback` — where the authorization server sends the person back
//! - `GET    /oauth/client-metadata.json` — maitred's client metadata document
//!
//! No response carries a token.

use askama::Template;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use maitred_protocol::events::InputAction;

use super::connect::CallbackQuery;
use super::view::{
    AccountList, AccountStatus, AccountView, AdminAccountList, AdminAccountView, ClientKind,
    ConnectStart, Disconnected,
};
use super::{AccountError, Accounts};
use crate::GatewayState;
use crate::auth::ChatUser;
use crate::error::GatewayError;
use maitred_protocol::events::ConnectReason;

const ADMIN: &str = "ADMIN";

impl Accounts {
    /// How the account at a server was made: its client id says.
    fn client_kind(&self, client_id: &str) -> ClientKind {
        if client_id == self.metadata_document_url() {
            ClientKind::MetadataDocument
        } else if self
            .servers()
            .any(|s| s.auth.client_id.as_deref() == Some(client_id))
        {
            ClientKind::Preregistered
        } else {
            ClientKind::Dynamic
        }
    }

    pub async fn list(&self, owner: &str) -> Result<AccountList, AccountError> {
        let rows = self.rows.accounts_of(owner).await?;
        let accounts = self
            .servers()
            .map(|server| {
                let row = rows.iter().find(|r| r.server == server.name);
                AccountView {
                    server: server.name.clone(),
                    description: server.description.clone(),
                    host: server.host(),
                    status: if row.is_some() {
                        AccountStatus::Connected
                    } else {
                        AccountStatus::NotConnected
                    },
                    scopes: row
                        .map(|r| r.scopes.split_whitespace().map(str::to_owned).collect())
                        .unwrap_or_default(),
                    connected_at: row.map(|r| r.connected_at.clone()),
                    refreshed_at: row.and_then(|r| r.refreshed_at.clone()),
                    client: row.map(|r| self.client_kind(&r.client_id)),
                }
            })
            .collect();
        Ok(AccountList { accounts })
    }

    pub async fn everyone(&self) -> Result<AdminAccountList, AccountError> {
        let accounts = self
            .rows
            .all_accounts()
            .await?
            .into_iter()
            .map(|row| AdminAccountView {
                client: Some(self.client_kind(&row.client_id)),
                scopes: row.scopes.split_whitespace().map(str::to_owned).collect(),
                owner: row.owner,
                server: row.server,
                connected_at: row.connected_at,
                refreshed_at: row.refreshed_at,
            })
            .collect();
        Ok(AdminAccountList { accounts })
    }
}

pub(crate) async fn list(
    State(state): State<GatewayState>,
    user: ChatUser,
) -> Result<Json<AccountList>, GatewayError> {
    Ok(Json(state.accounts.list(user.subject.as_str()).await?))
}

pub(crate) async fn connect(
    State(state): State<GatewayState>,
    user: ChatUser,
    Path(server): Path<String>,
) -> Result<Json<ConnectStart>, GatewayError> {
    if user.subject.as_str().starts_with(crate::auth::CLIENT_OWNER) {
        return Err(GatewayError::Forbidden(
            "a client acting for nobody has no account to connect; a person signs in".to_owned(),
        ));
    }
    let begun = state
        .accounts
        .begin(
            user.subject.as_str(),
            &server,
            None,
            ConnectReason::Connect,
            None,
        )
        .await?;
    Ok(Json(ConnectStart {
        server,
        authorization_url: begun.url,
        host: begun.host,
        expires_at: begun.expires_at,
    }))
}

pub(crate) async fn disconnect(
    State(state): State<GatewayState>,
    user: ChatUser,
    Path(server): Path<String>,
) -> Result<Json<Disconnected>, GatewayError> {
    let done = state
        .accounts
        .disconnect(user.subject.as_str(), &server)
        .await?;
    state
        .hub
        .forget_person(&server, user.subject.as_str())
        .await;
    Ok(Json(done))
}

pub(crate) async fn admin_list(
    State(state): State<GatewayState>,
    user: ChatUser,
) -> Result<Json<AdminAccountList>, GatewayError> {
    if !user.roles.iter().any(|r| r == ADMIN) {
        return Err(GatewayError::Forbidden(
            "everyone's connected accounts are for people with the ADMIN role".to_owned(),
        ));
    }
    Ok(Json(state.accounts.everyone().await?))
}

pub(crate) async fn metadata_document(State(state): State<GatewayState>) -> Response {
    let mut response = Json(state.accounts.metadata_document()).into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    response
}

/// The end of a sign-in, in the person's browser: a small page that says how it
/// went. The call waiting for it (if any) is settled from here, on whichever replica
/// the browser reached.
pub(crate) async fn callback(
    State(state): State<GatewayState>,
    user: Result<ChatUser, GatewayError>,
    Query(query): Query<CallbackQuery>,
) -> Response {
    let user = match user {
        Ok(user) => user,
        Err(_) => {
            return page(
                StatusCode::UNAUTHORIZED,
                "Sign in to maitred first",
                "This sign-in came back to a browser that is not signed in to maitred. Sign in, then connect again from the chat or the accounts panel.",
            );
        }
    };
    let owner = user.subject.as_str();
    match state.accounts.complete(owner, &query).await {
        Ok(done) => {
            let action = if done.connected {
                InputAction::Accept
            } else {
                InputAction::Decline
            };
            // Forgotten before the waiting call is woken: it lists the person's tools
            // with the new token, and what it lists must not be dropped after it.
            state.hub.forget_person(&done.server, owner).await;
            if let Some(call) = &done.call
                && let Err(error) = state
                    .inputs
                    .settle_connect(call, &user.subject, action)
                    .await
            {
                tracing::warn!(%error, "could not tell the waiting call that the sign-in came back");
            }
            if done.connected {
                page(
                    StatusCode::OK,
                    &format!("Connected {}", done.server),
                    "You can close this tab and go back to the chat.",
                )
            } else {
                page(
                    StatusCode::OK,
                    &format!("{} was not connected", done.server),
                    "You did not give access. You can close this tab; the chat goes on without it.",
                )
            }
        }
        Err(error) => {
            // The detail (the authorization server's words, the `iss` brought) is
            // for the log; the page says only what happened.
            tracing::info!(error = ?error, "a sign-in came back and was refused");
            let ended = match &error {
                AccountError::NotYours { owner, call } => Some((owner.as_str(), call)),
                AccountError::NotRedeemed { call, .. } => Some((owner, call)),
                _ => None,
            };
            if let Some((owner, call)) = ended {
                // The call that waited for the ended sign-in goes on without it.
                let starter = maitred_protocol::ids::Subject::new(owner.to_owned());
                if let Some(call) = call
                    && let Err(error) = state
                        .inputs
                        .settle_connect(call, &starter, InputAction::Decline)
                        .await
                {
                    tracing::warn!(%error, "could not tell the waiting call that its sign-in ended");
                }
            }
            let status = match &error {
                AccountError::NotYours { .. } => StatusCode::FORBIDDEN,
                AccountError::Database(_) => StatusCode::SERVICE_UNAVAILABLE,
                AccountError::Discovery { .. }
                | AccountError::Registration { .. }
                | AccountError::AuthorizationServer { .. }
                | AccountError::NotRedeemed { .. } => StatusCode::BAD_GATEWAY,
                _ => StatusCode::BAD_REQUEST,
            };
            page(status, "The sign-in did not work", &error.for_page())
        }
    }
}

#[derive(Template)]
#[template(path = "account_callback.html")]
struct CallbackPage<'a> {
    title: &'a str,
    text: &'a str,
}

fn page(status: StatusCode, title: &str, text: &str) -> Response {
    let html = match (CallbackPage { title, text }).render() {
        Ok(html) => html,
        Err(_) => return (status, format!("{title}: {text}")).into_response(),
    };
    let mut response = (status, Html(html)).into_response();
    // The page may carry nothing that outlives it: no caching, no referrer (its URL
    // held the code).
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}
