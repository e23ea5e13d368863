//! The ADMIN's budgets API: set, read and remove budgets, and read the ledger.
//!
//! - `GET    /api/v1/resos/admin/budgets` — every budget
//! - `PUT    /api/v1/resos/admin/budgets/{scope}/{subject}` — `{"window", "max_tokens"?, "max_cost"?}`
//! - `GET    /api/v1/resos/admin/budgets/{scope}/{subject}` — one, with what it spent in this period
//! - `DELETE /api/v1/resos/admin/budgets/{scope}/{subject}`
//! - `GET    /api/v1/resos/admin/budgets/ledger?message_id=&scope=&subject=` — ledger rows and their totals

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};

use super::{Budget, Scope, Window};
use crate::GatewayState;
use crate::auth::ChatUser;
use crate::error::GatewayError;
use crate::extract::GatewayJson;
use maitred_core::db::canonical_now;

/// Budgets are for people with this role to set and read.
const ADMIN: &str = "ADMIN";

fn admin_only(user: &ChatUser) -> Result<(), GatewayError> {
    if user.roles.iter().any(|r| r == ADMIN) {
        Ok(())
    } else {
        Err(GatewayError::Forbidden(
            "budgets are for people with the ADMIN role".to_owned(),
        ))
    }
}

/// A budget as the API shows it; money in the prices' currency.
#[derive(Debug, Serialize)]
pub(crate) struct BudgetView {
    pub(crate) scope: Scope,
    pub(crate) subject: String,
    pub(crate) window: Window,
    pub(crate) max_tokens: Option<i64>,
    pub(crate) max_cost: Option<f64>,
    /// What it spent in the current period (open reservations in full); not shown
    /// for a default (`*`), which is counted per person or conversation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) spent_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) spent_cost: Option<f64>,
}

/// The body of a `PUT`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SetBudget {
    #[serde(default)]
    pub(crate) window: Window,
    pub(crate) max_tokens: Option<i64>,
    pub(crate) max_cost: Option<f64>,
}

fn micros(cost: f64) -> i64 {
    (cost * 1e6).round() as i64
}

fn units(micros: i64) -> f64 {
    micros as f64 / 1e6
}

fn view(budget: Budget, spent: Option<(i64, i64)>) -> BudgetView {
    BudgetView {
        scope: budget.scope,
        subject: budget.subject,
        window: budget.window,
        max_tokens: budget.max_tokens,
        max_cost: budget.max_cost_micros.map(units),
        spent_tokens: spent.map(|(t, _)| t),
        spent_cost: spent.map(|(_, c)| units(c)),
    }
}

fn scope_of(text: &str) -> Result<Scope, GatewayError> {
    Scope::parse(text).ok_or_else(|| {
        GatewayError::InvalidRequest("the scope is person, role or conversation".to_owned())
    })
}

type Row = (String, String, String, Option<i64>, Option<i64>);

fn budget_of((scope, subject, window, max_tokens, max_cost_micros): Row) -> Option<Budget> {
    Some(Budget {
        scope: Scope::parse(&scope)?,
        subject,
        window: Window::parse(&window)?,
        max_tokens,
        max_cost_micros,
    })
}

pub(crate) async fn list(
    State(state): State<GatewayState>,
    user: ChatUser,
) -> Result<Json<Vec<BudgetView>>, GatewayError> {
    admin_only(&user)?;
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT scope, subject, time_window, max_tokens, max_cost_micros FROM budgets ORDER BY scope, subject",
    )
    .fetch_all(state.store.db().pool())
    .await?;
    Ok(Json(
        rows.into_iter()
            .filter_map(budget_of)
            .map(|b| view(b, None))
            .collect(),
    ))
}

pub(crate) async fn get_one(
    State(state): State<GatewayState>,
    user: ChatUser,
    Path((scope, subject)): Path<(String, String)>,
) -> Result<Json<BudgetView>, GatewayError> {
    admin_only(&user)?;
    let scope = scope_of(&scope)?;
    let subject = scope.subject(&subject);
    let db = state.store.db();
    let row: Option<Row> = sqlx::query_as(
        "SELECT scope, subject, time_window, max_tokens, max_cost_micros FROM budgets WHERE scope = $1 AND subject = $2",
    )
    .bind(scope.as_str())
    .bind(&subject)
    .fetch_optional(db.pool())
    .await?;
    let budget = row.and_then(budget_of).ok_or_else(|| {
        GatewayError::not_found("budget", format!("{}/{subject}", scope.as_str()))
    })?;
    let spent = if subject == "*" {
        None
    } else {
        let period = budget.window.period(chrono::Utc::now());
        let spent: (i64, i64) = sqlx::query_as(
            "SELECT CAST(COALESCE(SUM(CASE WHEN status = 'reserved' THEN reserved_tokens ELSE settled_tokens END), 0) AS BIGINT), \
                    CAST(COALESCE(SUM(CASE WHEN status = 'reserved' THEN reserved_cost_micros ELSE settled_cost_micros END), 0) AS BIGINT) \
             FROM budget_ledger WHERE scope = $1 AND subject = $2 AND period = $3",
        )
        .bind(scope.as_str())
        .bind(&subject)
        .bind(period)
        .fetch_one(db.pool())
        .await?;
        Some(spent)
    };
    Ok(Json(view(budget, spent)))
}

pub(crate) async fn put(
    State(state): State<GatewayState>,
    user: ChatUser,
    Path((scope, subject)): Path<(String, String)>,
    GatewayJson(body): GatewayJson<SetBudget>,
) -> Result<Json<BudgetView>, GatewayError> {
    admin_only(&user)?;
    let scope = scope_of(&scope)?;
    let subject = scope.subject(&subject);
    if subject.is_empty() || subject.len() > 200 {
        return Err(GatewayError::InvalidRequest(
            "the subject is 1 to 200 characters".to_owned(),
        ));
    }
    if scope == Scope::Role && !subject.chars().all(|c| c.is_ascii_graphic()) {
        return Err(GatewayError::InvalidRequest(
            "a role's name is ASCII letters, digits and punctuation".to_owned(),
        ));
    }
    if scope == Scope::Role && subject == "*" {
        return Err(GatewayError::InvalidRequest(
            "a role budget names its role; `*` is for person and conversation budgets".to_owned(),
        ));
    }
    let negative = body.max_tokens.is_some_and(|n| n < 0)
        || body.max_cost.is_some_and(|c| !c.is_finite() || c < 0.0);
    if negative {
        return Err(GatewayError::InvalidRequest(
            "max_tokens and max_cost are zero or more".to_owned(),
        ));
    }
    let budget = Budget {
        scope,
        subject,
        window: body.window,
        max_tokens: body.max_tokens,
        max_cost_micros: body.max_cost.map(micros),
    };
    sqlx::query(
        "INSERT INTO budgets (scope, subject, time_window, max_tokens, max_cost_micros, updated_at) VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (scope, subject) DO UPDATE SET time_window = excluded.time_window, max_tokens = excluded.max_tokens, \
         max_cost_micros = excluded.max_cost_micros, updated_at = excluded.updated_at",
    )
    .bind(budget.scope.as_str())
    .bind(&budget.subject)
    .bind(budget.window.as_str())
    .bind(budget.max_tokens)
    .bind(budget.max_cost_micros)
    .bind(canonical_now())
    .execute(state.store.db().pool())
    .await?;
    tracing::info!(admin = %user.subject, scope = budget.scope.as_str(), subject = %budget.subject, "budget set");
    Ok(Json(view(budget, None)))
}

pub(crate) async fn delete(
    State(state): State<GatewayState>,
    user: ChatUser,
    Path((scope, subject)): Path<(String, String)>,
) -> Result<StatusCode, GatewayError> {
    admin_only(&user)?;
    let scope = scope_of(&scope)?;
    let subject = scope.subject(&subject);
    sqlx::query("DELETE FROM budgets WHERE scope = $1 AND subject = $2")
        .bind(scope.as_str())
        .bind(&subject)
        .execute(state.store.db().pool())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize)]
pub(crate) struct LedgerQuery {
    pub(crate) message_id: Option<String>,
    pub(crate) scope: Option<String>,
    pub(crate) subject: Option<String>,
}

/// One ledger row; money in the prices' currency.
#[derive(Debug, Serialize)]
pub(crate) struct LedgerRow {
    pub(crate) id: String,
    pub(crate) reservation_id: String,
    pub(crate) scope: String,
    pub(crate) subject: String,
    pub(crate) period: String,
    pub(crate) message_id: String,
    pub(crate) model: String,
    pub(crate) status: String,
    pub(crate) reserved_tokens: i64,
    pub(crate) settled_tokens: i64,
    pub(crate) refunded_tokens: i64,
    pub(crate) reserved_cost: f64,
    pub(crate) settled_cost: f64,
    pub(crate) refunded_cost: f64,
}

/// The rows that match, newest last (at most 10,000), and their totals.
#[derive(Debug, Serialize)]
pub(crate) struct Ledger {
    pub(crate) rows: Vec<LedgerRow>,
    pub(crate) open: usize,
    pub(crate) reserved_tokens: i64,
    pub(crate) settled_tokens: i64,
    pub(crate) refunded_tokens: i64,
}

type LedgerTuple = (
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
);

pub(crate) async fn ledger(
    State(state): State<GatewayState>,
    user: ChatUser,
    Query(query): Query<LedgerQuery>,
) -> Result<Json<Ledger>, GatewayError> {
    admin_only(&user)?;
    let subject = match (query.scope.as_deref().and_then(Scope::parse), query.subject) {
        (Some(scope), Some(subject)) => Some(scope.subject(&subject)),
        (_, subject) => subject,
    };
    // Each filter is bound, or matches everything when it is not given.
    let rows: Vec<LedgerTuple> =
        sqlx::query_as(
            "SELECT id, reservation_id, scope, subject, period, message_id, model, status, \
                    reserved_tokens, settled_tokens, refunded_tokens, reserved_cost_micros, settled_cost_micros, refunded_cost_micros \
             FROM budget_ledger \
             WHERE ($1 IS NULL OR message_id = $1) AND ($2 IS NULL OR scope = $2) AND ($3 IS NULL OR subject = $3) \
             ORDER BY created_at, id LIMIT 10000",
        )
        .bind(query.message_id)
        .bind(query.scope)
        .bind(subject)
        .fetch_all(state.store.db().pool())
        .await?;
    let rows: Vec<LedgerRow> = rows
        .into_iter()
        .map(|r| LedgerRow {
            id: r.0,
            reservation_id: r.1,
            scope: r.2,
            subject: r.3,
            period: r.4,
            message_id: r.5,
            model: r.6,
            status: r.7,
            reserved_tokens: r.8,
            settled_tokens: r.9,
            refunded_tokens: r.10,
            reserved_cost: units(r.11),
            settled_cost: units(r.12),
            refunded_cost: units(r.13),
        })
        .collect();
    Ok(Json(Ledger {
        open: rows.iter().filter(|r| r.status == "reserved").count(),
        reserved_tokens: rows.iter().map(|r| r.reserved_tokens).sum(),
        settled_tokens: rows.iter().map(|r| r.settled_tokens).sum(),
        refunded_tokens: rows.iter().map(|r| r.refunded_tokens).sum(),
        rows,
    }))
}
