//! `GET /opening-hours` and `GET /opening-hours/{id}`.

use axum::extract::{Path, State};
use sqlx::FromRow;

use super::error::ApiError;
use super::extract::ApiQuery;
use super::list::{ListParams, ListResponse, Listing};
use super::model::OpeningHours;
use super::{BackendState, Json, Reader, resources};

const COLUMNS: &str =
    "o.id, o.name, o.date, o.opens, o.closes, o.is_open, o.max_people, o.metadata";
const FROM: &str = "FROM opening_hours o";

const LISTING: Listing = Listing {
    name: "opening hours",
    resource: &resources::OPENING_HOURS,
    columns: COLUMNS,
    from: FROM,
    id_column: "o.id",
    default_order: "o.date ASC, o.opens ASC",
    tiebreaker: "o.id ASC",
};

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
pub(super) async fn list(
    _auth: Reader,
    State(state): State<BackendState>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ListResponse<OpeningHours> {
    LISTING.list::<OpeningHoursRow, _>(&state.db, &params).await
}

/// Get an opening period
#[utoipa::path(get, path = "/opening-hours/{id}", tag = "opening-hours",
    params(("id" = String, Path, description = "Opening hours id")),
    responses(
        (status = 200, body = OpeningHours),
        (status = 404, description = "No such opening period", body = super::ErrorBody),
    ),
    security(("bearer" = ["backend.read"])))]
pub(super) async fn get(
    _auth: Reader,
    State(state): State<BackendState>,
    Path(id): Path<String>,
) -> Result<Json<OpeningHours>, ApiError> {
    LISTING.get::<OpeningHoursRow, _>(&state.db, &id).await
}
