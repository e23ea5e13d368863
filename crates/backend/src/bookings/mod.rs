//! Bookings: list, read, create, change, annotate, and the availability queries.

mod input;
mod read;
pub(super) mod schedule;
mod write;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use chrono::{NaiveDate, Utc};
use serde::Deserialize;
use utoipa::IntoParams;

pub(super) use input::{BookingPatchBody, NewBookingBody, TextBody};

use super::error::ApiError;
use super::extract::{ApiQuery, AppJson};
use super::list::{Conditions, ListParams, Listing, with_total};
use super::model::Booking;
use super::query::BindValue;
use super::{BackendState, Json, Reader, Writer, resources};
use schedule::{DEFAULT_DURATION, DayPlan, format_minute_of_day, not_before};

const LISTING: Listing = Listing {
    name: "booking",
    resource: &resources::BOOKINGS,
    columns: read::COLUMNS,
    from: read::FROM,
    id_column: "b.id",
    default_order: "b.date ASC, b.time ASC",
    tiebreaker: "b.id ASC",
};

/// How far ahead availability is searched.
const HORIZON_DAYS: i64 = 60;

#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(super) struct BookingListParams {
    /// First date (`YYYY-MM-DD`, or an ISO date-time whose date is used), inclusive.
    pub from_date_time: Option<String>,
    /// Last date, inclusive.
    pub to_date_time: Option<String>,
    /// Only bookings the restaurant has confirmed (approved, arrived, seated, left).
    pub only_confirmed: Option<bool>,
    /// Records to return, 1 to 100 (default 100).
    pub limit: Option<i64>,
    /// Records to skip (default 0).
    pub skip: Option<i64>,
    /// `field:asc|desc` (or `field:1|-1`), comma-separated for several keys.
    pub sort: Option<String>,
    /// A filter such as `status = 'approved' AND people >= 4`.
    pub custom_query: Option<String>,
}

impl BookingListParams {
    // serde's `flatten` cannot read numbers from a query string, hence the copy.
    fn list(&self) -> ListParams {
        ListParams {
            limit: self.limit,
            skip: self.skip,
            sort: self.sort.clone(),
            custom_query: self.custom_query.clone(),
        }
    }
}

/// List bookings
#[utoipa::path(get, path = "/bookings", tag = "bookings",
    params(BookingListParams),
    responses(
        (status = 200, description = "Bookings by date and time; X-Total-Count holds the number matching", body = [Booking]),
        (status = 400, description = "Invalid dates, limit, sort or customQuery", body = super::ErrorBody),
    ),
    security(("bearer" = ["backend.read"])))]
pub(super) async fn list(
    _auth: Reader,
    State(state): State<BackendState>,
    ApiQuery(params): ApiQuery<BookingListParams>,
) -> Result<(HeaderMap, Json<Vec<Booking>>), ApiError> {
    let mut conditions = Conditions::default();
    if let Some(from) = &params.from_date_time {
        conditions.add(
            "b.date >=",
            BindValue::Text(date_param("fromDateTime", from)?),
        );
    }
    if let Some(to) = &params.to_date_time {
        conditions.add("b.date <=", BindValue::Text(date_param("toDateTime", to)?));
    }
    if params.only_confirmed == Some(true) {
        conditions.add_in("b.status", &["approved", "arrived", "seated", "left"]);
    }
    let (total, rows) = LISTING
        .page::<read::BookingRow>(&state.db, &params.list(), conditions)
        .await?;
    let mut conn = state.db.pool().acquire().await?;
    let bookings = read::complete(&mut conn, rows).await?;
    Ok(with_total(total, bookings))
}

fn date_param(name: &str, value: &str) -> Result<String, ApiError> {
    let date_part = value.get(..10).unwrap_or(value);
    NaiveDate::parse_from_str(date_part, "%Y-%m-%d")
        .map(|d| d.format("%Y-%m-%d").to_string())
        .map_err(|_| {
            ApiError::invalid(format!(
                "{name} must be an ISO date such as 2026-11-21, not {value:?}"
            ))
        })
}

/// Get a booking
#[utoipa::path(get, path = "/bookings/{id}", tag = "bookings",
    params(("id" = String, Path, description = "Booking id")),
    responses(
        (status = 200, body = Booking),
        (status = 404, description = "No such booking", body = super::ErrorBody),
    ),
    security(("bearer" = ["backend.read"])))]
pub(super) async fn get(
    _auth: Reader,
    State(state): State<BackendState>,
    Path(id): Path<String>,
) -> Result<Json<Booking>, ApiError> {
    let mut conn = state.db.pool().acquire().await?;
    read::by_id(&mut conn, &id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("booking", id))
}

/// Create a booking
///
/// Without `tables`, the smallest free table that seats the party is assigned. A
/// taken slot is a 409 whose `details.nearestTimes` lists the nearest free times.
#[utoipa::path(post, path = "/bookings", tag = "bookings",
    request_body = NewBookingBody,
    responses(
        (status = 200, description = "The booking as stored", body = Booking),
        (status = 400, description = "Invalid fields", body = super::ErrorBody),
        (status = 403, description = "The token lacks backend.write", body = super::ErrorBody),
        (status = 409, description = "No table free at that time, or the period is full", body = super::ErrorBody),
        (status = 422, description = "The restaurant is not open then", body = super::ErrorBody),
    ),
    security(("bearer" = ["backend.write"])))]
pub(super) async fn create(
    auth: Writer,
    State(state): State<BackendState>,
    AppJson(body): AppJson<NewBookingBody>,
) -> Result<Json<Booking>, ApiError> {
    let booking = body.validate()?;
    let id = write::create(&state.db, &booking, &auth.author).await?;
    tracing::info!(booking_id = %id, date = %booking.date, people = booking.people, "booking created");
    let mut conn = state.db.pool().acquire().await?;
    read::by_id(&mut conn, &id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("booking", id))
}

/// Update a booking
///
/// Changes status (request → approved → arrived → seated → left, or declined,
/// canceled, no_show, waitlist) or reschedules (date, time, people, duration,
/// tables). Answers `true`, as resOS does.
#[utoipa::path(put, path = "/bookings/{id}", tag = "bookings",
    params(("id" = String, Path, description = "Booking id")),
    request_body = BookingPatchBody,
    responses(
        (status = 200, description = "Updated", body = bool),
        (status = 404, description = "No such booking", body = super::ErrorBody),
        (status = 409, description = "A status change not allowed, or no table free at the new time", body = super::ErrorBody),
    ),
    security(("bearer" = ["backend.write"])))]
pub(super) async fn update(
    auth: Writer,
    State(state): State<BackendState>,
    Path(id): Path<String>,
    AppJson(body): AppJson<BookingPatchBody>,
) -> Result<Json<bool>, ApiError> {
    let patch = body.validate()?;
    write::update(&state.db, &id, &patch, &auth.author).await?;
    tracing::info!(booking_id = %id, status = ?patch.status, "booking updated");
    Ok(Json(true))
}

/// Add a comment to a booking
#[utoipa::path(post, path = "/bookings/{id}/comment", tag = "bookings",
    params(("id" = String, Path, description = "Booking id")),
    request_body = TextBody,
    responses(
        (status = 200, description = "The comment's id", body = String),
        (status = 404, description = "No such booking", body = super::ErrorBody),
    ),
    security(("bearer" = ["backend.write"])))]
pub(super) async fn add_comment(
    auth: Writer,
    State(state): State<BackendState>,
    Path(id): Path<String>,
    AppJson(body): AppJson<TextBody>,
) -> Result<Json<String>, ApiError> {
    annotate(auth, state, id, body, "comment").await
}

/// Add an internal note to a booking
#[utoipa::path(post, path = "/bookings/{id}/restaurantNote", tag = "bookings",
    params(("id" = String, Path, description = "Booking id")),
    request_body = TextBody,
    responses(
        (status = 200, description = "The note's id", body = String),
        (status = 404, description = "No such booking", body = super::ErrorBody),
    ),
    security(("bearer" = ["backend.write"])))]
pub(super) async fn add_note(
    auth: Writer,
    State(state): State<BackendState>,
    Path(id): Path<String>,
    AppJson(body): AppJson<TextBody>,
) -> Result<Json<String>, ApiError> {
    annotate(auth, state, id, body, "note").await
}

/// Comments and notes differ only in who sees them; the caller is the author.
async fn annotate(
    auth: Writer,
    state: BackendState,
    id: String,
    body: TextBody,
    kind: &str,
) -> Result<Json<String>, ApiError> {
    let text = body.validate()?;
    Ok(Json(
        write::annotate(&state.db, &id, kind, &text, &auth.author).await?,
    ))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct AvailableDatesParams {
    /// Party size (default 2).
    pub people: Option<i64>,
    /// Minutes (default 90).
    pub duration: Option<i64>,
}

/// Dates with a free time
#[utoipa::path(get, path = "/bookings/available-dates", tag = "bookings",
    params(AvailableDatesParams),
    responses((status = 200, description = "Dates (YYYY-MM-DD) on which the party can still book", body = [String])),
    security(("bearer" = ["backend.read"])))]
pub(super) async fn available_dates(
    _auth: Reader,
    State(state): State<BackendState>,
    ApiQuery(params): ApiQuery<AvailableDatesParams>,
) -> Result<Json<Vec<String>>, ApiError> {
    let people = party(params.people.unwrap_or(2))?;
    let duration = minutes(params.duration.unwrap_or(DEFAULT_DURATION))?;
    let today = Utc::now().date_naive();
    let last: Option<(String,)> =
        sqlx::query_as("SELECT MAX(date) FROM opening_hours WHERE is_open = 1")
            .fetch_optional(state.db.pool())
            .await?;
    let last = last
        .and_then(|(d,)| NaiveDate::parse_from_str(&d, "%Y-%m-%d").ok())
        .unwrap_or(today)
        .min(today + chrono::Duration::days(HORIZON_DAYS));
    let mut conn = state.db.pool().acquire().await?;
    let mut dates = Vec::new();
    let mut date = today;
    while date <= last {
        let plan = DayPlan::load(&mut conn, date, None).await?;
        if !plan
            .free_times(people, duration, not_before(date), None)
            .is_empty()
        {
            dates.push(date.format("%Y-%m-%d").to_string());
        }
        date += chrono::Duration::days(1);
    }
    Ok(Json(dates))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct AvailableTimesParams {
    /// `YYYY-MM-DD`
    pub date: Option<String>,
    /// Party size.
    pub people: Option<i64>,
    /// Minutes (default 90).
    pub duration: Option<i64>,
}

/// Free start times on a date
#[utoipa::path(get, path = "/bookings/available-times", tag = "bookings",
    params(AvailableTimesParams),
    responses(
        (status = 200, description = "Start times (HH:MM) at which a table for the party is free", body = [String]),
        (status = 400, description = "Missing or invalid date or people", body = super::ErrorBody),
    ),
    security(("bearer" = ["backend.read"])))]
pub(super) async fn available_times(
    _auth: Reader,
    State(state): State<BackendState>,
    ApiQuery(params): ApiQuery<AvailableTimesParams>,
) -> Result<Json<Vec<String>>, ApiError> {
    let date = params
        .date
        .as_deref()
        .ok_or_else(|| ApiError::invalid("date is required (YYYY-MM-DD)"))
        .and_then(|d| {
            NaiveDate::parse_from_str(d, "%Y-%m-%d")
                .map_err(|_| ApiError::invalid(format!("date must be YYYY-MM-DD, not {d:?}")))
        })?;
    let people = party(
        params
            .people
            .ok_or_else(|| ApiError::invalid("people is required (1 to 999)"))?,
    )?;
    let duration = minutes(params.duration.unwrap_or(DEFAULT_DURATION))?;
    let mut conn = state.db.pool().acquire().await?;
    let plan = DayPlan::load(&mut conn, date, None).await?;
    let today = Utc::now().date_naive();
    let times = if date < today {
        Vec::new()
    } else {
        plan.free_times(people, duration, not_before(date), None)
    };
    Ok(Json(times.into_iter().map(format_minute_of_day).collect()))
}

fn party(people: i64) -> Result<i64, ApiError> {
    if (1..=999).contains(&people) {
        Ok(people)
    } else {
        Err(ApiError::invalid(format!(
            "people must be between 1 and 999, not {people}"
        )))
    }
}

fn minutes(duration: i64) -> Result<i64, ApiError> {
    if (15..=480).contains(&duration) {
        Ok(duration)
    } else {
        Err(ApiError::invalid(format!(
            "duration must be between 15 and 480 minutes, not {duration}"
        )))
    }
}
