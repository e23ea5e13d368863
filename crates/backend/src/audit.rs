//! The write audit: one row per write (person, acting clients, tool call, action,
//! resource), appended in the write's own transaction and never changed (the
//! database refuses updates and deletes). ADMIN reads it at `GET /audit`.

use axum::extract::State;
use chrono::Utc;
use serde::{Deserialize, Serialize};
use sqlx::{Any, Transaction};
use utoipa::{IntoParams, ToSchema};

use super::author::Author;
use super::error::ApiError;
use super::extract::ApiQuery;
use super::query::BindValue;
use super::sql::Sql;
use super::{BackendState, Json, Reader};
use maitred_core::auth::AuthErrorKind;

/// What was done, as the audit names it.
#[derive(Debug, Clone, Copy)]
pub(super) enum BookingAction {
    Create,
    Update,
    Comment,
    Note,
}

impl BookingAction {
    fn name(self) -> &'static str {
        match self {
            BookingAction::Create => "booking.create",
            BookingAction::Update => "booking.update",
            BookingAction::Comment => "booking.comment",
            BookingAction::Note => "booking.note",
        }
    }
}

/// Appends the audit row of a write, inside the write's transaction: no write
/// without its row, no row without its write.
pub(super) async fn record(
    tx: &mut Transaction<'static, Any>,
    author: &Author,
    action: BookingAction,
    resource_id: &str,
) -> Result<(), sqlx::Error> {
    let actors = serde_json::to_string(&author.actors).unwrap_or_else(|_| "[]".to_owned());
    sqlx::query(
        "INSERT INTO write_audit (id, at, person, actors, tool_call_id, action, resource_type, resource_id) \
         VALUES ($1, $2, $3, $4, $5, $6, 'booking', $7)",
    )
    .bind(uuid::Uuid::now_v7().to_string())
    .bind(Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
    .bind(&author.person)
    .bind(actors)
    .bind(&author.tool_call_id)
    .bind(action.name())
    .bind(resource_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

type AuditRow = (
    String,
    String,
    String,
    String,
    Option<String>,
    String,
    String,
    String,
);

/// One audited write.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct AuditEntry {
    pub id: String,
    pub at: String,
    /// The person the write was made for (or the client, for no person).
    pub person: String,
    /// The clients that acted for them, the newest first.
    pub actors: Vec<String>,
    pub tool_call_id: Option<String>,
    /// `booking.create`, `booking.update`, `booking.comment` or `booking.note`.
    pub action: String,
    pub resource_type: String,
    pub resource_id: String,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(super) struct AuditParams {
    /// Only this person's writes.
    pub person: Option<String>,
    /// Only writes to this resource (a booking id).
    pub resource_id: Option<String>,
    /// At most this many, newest first (default 100, at most 1000).
    pub limit: Option<i64>,
}

/// The write audit (ADMIN)
///
/// Every write through the API, newest first: who it was for, which clients acted
/// for them, the tool call that asked, what was done to which resource.
#[utoipa::path(get, path = "/audit", tag = "audit",
    params(AuditParams),
    responses(
        (status = 200, description = "Audited writes, newest first", body = [AuditEntry]),
        (status = 403, description = "The token's person is not an ADMIN", body = super::ErrorBody),
    ),
    security(("bearer" = ["backend.read"])))]
pub(super) async fn list(
    auth: Reader,
    State(state): State<BackendState>,
    ApiQuery(params): ApiQuery<AuditParams>,
) -> Result<Json<Vec<AuditEntry>>, ApiError> {
    if !auth.principal.has_role("ADMIN") {
        return Err(state
            .verifier
            .error(
                AuthErrorKind::InsufficientScope {
                    required: "backend.read".to_owned(),
                },
                "the write audit is for people with the ADMIN role",
            )
            .into());
    }
    let limit = params.limit.unwrap_or(100).clamp(1, 1000);
    let mut sql = Sql::new(
        "SELECT id, at, person, actors, tool_call_id, action, resource_type, resource_id FROM write_audit WHERE 1 = 1",
    );
    if let Some(person) = &params.person {
        sql.push(" AND person = ")
            .push_bind(BindValue::Text(person.clone()));
    }
    if let Some(resource_id) = &params.resource_id {
        sql.push(" AND resource_id = ")
            .push_bind(BindValue::Text(resource_id.clone()));
    }
    sql.push(" ORDER BY at DESC, id DESC LIMIT ")
        .push_bind(BindValue::Int(limit));
    let rows = sql
        .query_as::<AuditRow>()
        .fetch_all(state.db.pool())
        .await?;
    Ok(Json(
        rows.into_iter()
            .map(
                |(id, at, person, actors, tool_call_id, action, resource_type, resource_id)| {
                    AuditEntry {
                        id,
                        at,
                        person,
                        actors: serde_json::from_str(&actors).unwrap_or_default(),
                        tool_call_id,
                        action,
                        resource_type,
                        resource_id,
                    }
                },
            )
            .collect(),
    ))
}
