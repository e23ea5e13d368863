//! What the tools do: check the arguments, call the backend, and give the result
//! the tool's output schema describes (the backend's own model types where the
//! result is its records), or a [`Refusal`] a model can act on. Nothing here knows
//! how a tool is listed or called; that is the catalogue's.

use chrono::NaiveDate;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::args::*;
use super::backend::{BackendClient, Page};
use super::call::Refusal;
use maitred_backend::model::{Booking, Customer};

/// A list tool's result.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct ListOf<T> {
    /// The records on this page.
    pub items: Vec<T>,
    /// How many records match the filter in all (not just on this page): the count to report.
    pub total: u64,
    /// How many records this page holds.
    pub returned: usize,
    /// How many records were skipped.
    pub skip: u32,
    /// Whether more records follow; fetch them with a larger `skip`.
    pub has_more: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct AvailableDates {
    /// Dates (`YYYY-MM-DD`) on which a table for the party is still free at some time.
    pub dates: Vec<String>,
    pub people: u32,
    pub duration: u32,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct AvailableTimes {
    pub date: String,
    pub people: u32,
    pub duration: u32,
    /// Start times (`HH:MM`) at which a table for the party is free; empty when the
    /// restaurant is closed or full that day.
    pub times: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct NoteAdded {
    pub booking_id: String,
    pub note_id: String,
    /// `internal` or `guest`.
    pub visibility: String,
}

fn date(field: &str, value: &str) -> Result<String, Refusal> {
    NaiveDate::parse_from_str(value, "%Y-%m-%d")
        .map(|d| d.to_string())
        .map_err(|_| {
            Refusal::InvalidParams(format!(
                "{field} must be a date as YYYY-MM-DD, not {value:?}"
            ))
        })
}

fn time(field: &str, value: &str) -> Result<String, Refusal> {
    chrono::NaiveTime::parse_from_str(value, "%H:%M")
        .ok()
        .filter(|_| value.len() <= 5)
        .map(|t| t.format("%H:%M").to_string())
        .ok_or_else(|| {
            Refusal::InvalidParams(format!("{field} must be a time as HH:MM, not {value:?}"))
        })
}

fn list_query(
    limit: Option<u32>,
    skip: Option<u32>,
    sort: Option<String>,
    filter: Option<String>,
) -> Vec<(&'static str, String)> {
    let mut query = Vec::new();
    if let Some(limit) = limit {
        query.push(("limit", limit.to_string()));
    }
    if let Some(skip) = skip {
        query.push(("skip", skip.to_string()));
    }
    if let Some(sort) = sort.filter(|s| !s.trim().is_empty()) {
        query.push(("sort", sort));
    }
    if let Some(filter) = filter.filter(|s| !s.trim().is_empty()) {
        query.push(("customQuery", filter));
    }
    query
}

fn page<T>(Page { items, total }: Page<T>, skip: u32) -> ListOf<T> {
    let returned = items.len();
    let total = total.unwrap_or(returned as u64 + u64::from(skip));
    ListOf {
        has_more: u64::from(skip) + (returned as u64) < total,
        items,
        total,
        returned,
        skip,
    }
}

pub(super) async fn list<T: DeserializeOwned>(
    backend: BackendClient,
    path: &str,
    args: ListArgs,
) -> Result<ListOf<T>, Refusal> {
    let skip = args.skip.unwrap_or(0);
    let query = list_query(args.limit, args.skip, args.sort, args.custom_query);
    Ok(page(backend.list::<T>(path, &query).await?, skip))
}

pub(super) async fn one<T: DeserializeOwned>(
    backend: BackendClient,
    path: &str,
    args: IdArgs,
) -> Result<T, Refusal> {
    Ok(backend
        .get(&format!("{path}/{}", encode(&args.id)), &[])
        .await?)
}

pub(super) async fn bookings(
    backend: BackendClient,
    args: BookingListArgs,
) -> Result<ListOf<Booking>, Refusal> {
    let skip = args.skip.unwrap_or(0);
    let mut query = list_query(args.limit, args.skip, args.sort, args.custom_query);
    if let Some(from) = &args.from_date {
        query.push(("fromDateTime", date("fromDate", from)?));
    }
    if let Some(to) = &args.to_date {
        query.push(("toDateTime", date("toDate", to)?));
    }
    if let Some(only) = args.only_confirmed {
        query.push(("onlyConfirmed", only.to_string()));
    }
    Ok(page(
        backend.list::<Booking>("/bookings", &query).await?,
        skip,
    ))
}

pub(super) async fn available_dates(
    backend: BackendClient,
    args: AvailableDatesArgs,
) -> Result<AvailableDates, Refusal> {
    let people = args.people.unwrap_or(2);
    let duration = args.duration.unwrap_or(90);
    let dates = backend
        .get(
            "/bookings/available-dates",
            &[
                ("people", people.to_string()),
                ("duration", duration.to_string()),
            ],
        )
        .await?;
    Ok(AvailableDates {
        dates,
        people,
        duration,
    })
}

pub(super) async fn available_times(
    backend: BackendClient,
    args: AvailableTimesArgs,
) -> Result<AvailableTimes, Refusal> {
    let date = date("date", &args.date)?;
    let duration = args.duration.unwrap_or(90);
    let times = backend
        .get(
            "/bookings/available-times",
            &[
                ("date", date.clone()),
                ("people", args.people.to_string()),
                ("duration", duration.to_string()),
            ],
        )
        .await?;
    Ok(AvailableTimes {
        times,
        date,
        people: args.people,
        duration,
    })
}

pub(super) async fn create_booking(
    backend: BackendClient,
    args: CreateBookingArgs,
) -> Result<Booking, Refusal> {
    let Some(guest_name) = args.guest_name else {
        return Err(Refusal::Failed(
            "guestName is missing: ask the guest for their name, and an email address or phone \
number, then call createBooking again with them"
                .to_owned(),
        ));
    };
    let mut body = json!({
        "date": date("date", &args.date)?,
        "time": time("time", &args.time)?,
        "people": args.people,
        "guest": {
            "name": guest_name,
            "email": args.guest_email,
            "phone": args.guest_phone,
        },
        "source": "other",
    });
    if let Some(duration) = args.duration {
        body["duration"] = duration.into();
    }
    if let Some(tables) = args.table_ids {
        body["tables"] = tables.into();
    }
    if let Some(comment) = args.comment {
        body["comment"] = comment.into();
    }
    if let Some(status) = args.status {
        body["status"] = status.as_str().into();
    }
    Ok(backend.post("/bookings", &body).await?)
}

pub(super) async fn update_booking(
    backend: BackendClient,
    args: UpdateBookingArgs,
) -> Result<Booking, Refusal> {
    let mut body = json!({});
    if let Some(status) = args.status {
        body["status"] = status.as_str().into();
    }
    if let Some(d) = &args.date {
        body["date"] = date("date", d)?.into();
    }
    if let Some(t) = &args.time {
        body["time"] = time("time", t)?.into();
    }
    if let Some(people) = args.people {
        body["people"] = people.into();
    }
    if let Some(duration) = args.duration {
        body["duration"] = duration.into();
    }
    if let Some(tables) = args.table_ids {
        body["tables"] = tables.into();
    }
    if body.as_object().is_some_and(|b| b.is_empty()) {
        return Err(Refusal::InvalidParams(
            "nothing to change: give a status, or a new date, time, people, duration or tableIds"
                .to_owned(),
        ));
    }
    let path = format!("/bookings/{}", encode(&args.id));
    backend.put(&path, &body).await?;
    Ok(backend.get(&path, &[]).await?)
}

pub(super) async fn add_note(
    backend: BackendClient,
    args: AddBookingNoteArgs,
) -> Result<NoteAdded, Refusal> {
    let visibility = args.visibility.unwrap_or_default();
    let (endpoint, label) = match visibility {
        Visibility::Internal => ("restaurantNote", "internal"),
        Visibility::Guest => ("comment", "guest"),
    };
    let note_id = backend
        .post(
            &format!("/bookings/{}/{endpoint}", encode(&args.id)),
            &json!({ "text": args.text }),
        )
        .await?;
    Ok(NoteAdded {
        booking_id: args.id,
        note_id,
        visibility: label.to_owned(),
    })
}

/// The customers whose name is exactly `name` (ignoring case), at most `limit`.
pub(super) async fn customers_named(
    backend: &BackendClient,
    name: &str,
    limit: u32,
) -> Result<Vec<Customer>, Refusal> {
    let query = [
        ("limit", limit.to_string()),
        ("customQuery", format!("name LIKE {}", like_exactly(name))),
    ];
    Ok(backend.list::<Customer>("/customers", &query).await?.items)
}

/// A filter-language text value that `LIKE` matches only against `text` itself (in
/// any case): the pattern's `\`, `%` and `_` escaped, then quoted for the lexer.
fn like_exactly(text: &str) -> String {
    let pattern = text
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    format!("'{}'", pattern.replace('\\', "\\\\").replace('\'', "''"))
}

pub(super) async fn customer(backend: &BackendClient, id: &str) -> Result<Customer, Refusal> {
    Ok(backend
        .get(&format!("/customers/{}", encode(id)), &[])
        .await?)
}

/// An id goes into a path segment: anything but unreserved characters is escaped.
fn encode(id: &str) -> String {
    url::form_urlencoded::byte_serialize(id.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}
