//! `GET /opening-hours` and `GET /opening-hours/{id}`.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use sqlx::FromRow;

use super::error::ApiError;
use super::extract::ApiQuery;
use super::list::{Conditions, ListParams, bind_all};
use super::model::OpeningHours;
use super::{BackendState, Json, Reader, resources, with_total};

const COLUMNS: &str =
    "o.id, o.name, o.date, o.opens, o.closes, o.is_open, o.max_people, o.metadata";
const FROM: &str = "FROM opening_hours o";

#[derive(FromRow)]
struct OpeningHoursRow {
    id: String,
    name: String,
    date: String,
    opens: String,
    closes: String,
    is_open: i64,
    max_people: i64,
    metadata: Option<String>,
}

impl From<OpeningHoursRow> for OpeningHours {
    fn from(row: OpeningHoursRow) -> Self {
        Self {
            id: row.id,
            name: row.name,
            date: row.date,
            opens: row.opens,
            closes: row.closes,
            is_open: row.is_open != 0,
            max_people: row.max_people,
            metadata: super::parse_metadata(row.metadata.as_deref()),
        }
    }
}

/// List opening hours
#[utoipa::path(get, path = "/opening-hours", tag = "opening-hours",
    params(ListParams),
    responses(
        (status = 200, description = "Opening periods, by date and time", body = [OpeningHours]),
        (status = 400, description = "Invalid limit, sort or customQuery", body = super::ErrorBody),
    ),
    security(("bearer" = ["backend.read"])))]
pub async fn list(
    _auth: Reader,
    State(state): State<BackendState>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<(HeaderMap, Json<Vec<OpeningHours>>), ApiError> {
    let list = params.resolve(
        &resources::OPENING_HOURS,
        Conditions::default(),
        "o.date ASC, o.opens ASC",
        "o.id ASC",
    )?;
    let rows = bind_all(
        sqlx::query_as::<_, OpeningHoursRow>(sqlx::AssertSqlSafe(list.page_sql(COLUMNS, FROM))),
        &list.page_binds(),
    )
    .fetch_all(state.db.pool())
    .await?;
    let total = super::count(&state.db, &list, FROM).await?;
    Ok(with_total(
        total,
        rows.into_iter().map(OpeningHours::from).collect(),
    ))
}

/// Get an opening period
#[utoipa::path(get, path = "/opening-hours/{id}", tag = "opening-hours",
    params(("id" = String, Path, description = "Opening hours id")),
    responses(
        (status = 200, body = OpeningHours),
        (status = 404, description = "No such opening period", body = super::ErrorBody),
    ),
    security(("bearer" = ["backend.read"])))]
pub async fn get(
    _auth: Reader,
    State(state): State<BackendState>,
    Path(id): Path<String>,
) -> Result<Json<OpeningHours>, ApiError> {
    let row = sqlx::query_as::<_, OpeningHoursRow>(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} {FROM} WHERE o.id = $1"
    )))
    .bind(&id)
    .fetch_optional(state.db.pool())
    .await?
    .ok_or_else(|| ApiError::not_found("opening hours", id))?;
    Ok(Json(row.into()))
}
