//! Running a tool: check the arguments, call the backend, and shape the answer as
//! structured content, or as an error result a model can act on.

use chrono::NaiveDate;
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::args::*;
use super::backend::{BackendClient, BackendError, Page};
use super::catalogue::{AvailableDates, AvailableTimes, Entry, ListOf, NoteAdded};
use super::metrics::Outcome;
use super::progress::Progress;
use maitred_backend::model::{Booking, Customer};

/// Why a call was not carried out.
pub enum Refusal {
    /// JSON-RPC -32602: the arguments do not fit the tool's input schema.
    InvalidParams(String),
    /// A tool error (`isError: true`) whose text tells the model what to do.
    Failed(String),
    /// A tool error because the backend cannot answer now (down, slow, failing).
    Unavailable(String),
}

impl From<BackendError> for Refusal {
    fn from(error: BackendError) -> Self {
        let advice = advice(&error);
        match error {
            BackendError::Unavailable(_) => Refusal::Unavailable(advice),
            BackendError::Rejected { .. } => Refusal::Failed(advice),
        }
    }
}

/// Runs `entry`'s tool; the outcome says how it ended, for the logs and metrics.
pub(super) async fn run(
    entry: &Entry,
    backend: BackendClient,
    arguments: Option<JsonObject>,
    progress: Progress,
) -> (Outcome, Result<CallToolResult, ErrorData>) {
    match (entry.run)(
        backend,
        Value::Object(arguments.unwrap_or_default()),
        progress,
    )
    .await
    {
        Ok(value) => (Outcome::Ok, Ok(structured(value))),
        Err(Refusal::InvalidParams(message)) => (
            Outcome::Invalid,
            Err(ErrorData::invalid_params(message, None)),
        ),
        Err(Refusal::Failed(message)) => (
            Outcome::ToolError,
            Ok(CallToolResult::error(vec![ContentBlock::text(message)])),
        ),
        Err(Refusal::Unavailable(message)) => (
            Outcome::Unavailable,
            Ok(CallToolResult::error(vec![ContentBlock::text(message)])),
        ),
    }
}

pub(super) fn parse<T: DeserializeOwned>(arguments: Value) -> Result<T, Refusal> {
    serde_json::from_value(arguments).map_err(|error| {
        Refusal::InvalidParams(format!(
            "invalid arguments: {error}; the tool's inputSchema lists what it takes"
        ))
    })
}

/// The result as structured content, with a JSON text copy for clients that read only text.
fn structured(value: Value) -> CallToolResult {
    let text = serde_json::to_string_pretty(&value).unwrap_or_default();
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(value);
    result
}

pub(super) fn to_value<T: Serialize>(value: &T) -> Result<Value, Refusal> {
    serde_json::to_value(value)
        .map_err(|e| Refusal::Failed(format!("the result could not be encoded: {e}")))
}

/// Decodes what the backend sent into the wire type the output schema describes.
fn decode<T: DeserializeOwned>(value: Value) -> Result<T, Refusal> {
    serde_json::from_value(value).map_err(|e| {
        tracing::error!(error = %e, "the backend's answer does not match its schema");
        Refusal::Failed(
            "the reservation system sent an answer this server cannot read; it has been logged"
                .to_owned(),
        )
    })
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

fn page<T: DeserializeOwned>(page: Page, skip: u32) -> Result<ListOf<T>, Refusal> {
    let items: Vec<T> = page
        .items
        .into_iter()
        .map(decode)
        .collect::<Result<_, _>>()?;
    let returned = items.len();
    let total = page.total.unwrap_or(returned as u64 + u64::from(skip));
    Ok(ListOf {
        has_more: u64::from(skip) + (returned as u64) < total,
        items,
        total,
        returned,
        skip,
    })
}

pub(super) async fn list<T: DeserializeOwned>(
    backend: BackendClient,
    path: &str,
    args: ListArgs,
) -> Result<ListOf<T>, Refusal> {
    let skip = args.skip.unwrap_or(0);
    let query = list_query(args.limit, args.skip, args.sort, args.custom_query);
    page::<T>(backend.list(path, &query).await?, skip)
}

pub(super) async fn one<T: DeserializeOwned>(
    backend: BackendClient,
    path: &str,
    args: IdArgs,
) -> Result<T, Refusal> {
    let found = backend
        .get(&format!("{path}/{}", encode(&args.id)), &[])
        .await?;
    decode::<T>(found)
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
    page::<Booking>(backend.list("/bookings", &query).await?, skip)
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
        dates: decode(dates)?,
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
        times: decode(times)?,
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
    let booking = backend.post("/bookings", &body).await?;
    decode::<Booking>(booking)
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
    let booking = backend.get(&path, &[]).await?;
    decode::<Booking>(booking)
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
    let id = backend
        .post(
            &format!("/bookings/{}/{endpoint}", encode(&args.id)),
            &json!({ "text": args.text }),
        )
        .await?;
    Ok(NoteAdded {
        booking_id: args.id,
        note_id: decode(id)?,
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
    let found = page::<Customer>(backend.list("/customers", &query).await?, 0)?;
    Ok(found.items)
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
    let found = backend
        .get(&format!("/customers/{}", encode(id)), &[])
        .await?;
    decode::<Customer>(found)
}

/// An id goes into a path segment: anything but unreserved characters is escaped.
fn encode(id: &str) -> String {
    url::form_urlencoded::byte_serialize(id.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// What a model should make of a backend failure.
fn advice(error: &BackendError) -> String {
    match error {
        BackendError::Unavailable(detail) => format!(
            "The reservation system is unavailable right now ({detail}). Tell the user it cannot be \
reached at the moment and to try again shortly; do not retry at once."
        ),
        BackendError::Rejected {
            status,
            message,
            details,
            ..
        } => {
            let nearest = details
                .as_ref()
                .and_then(|d| d.get("nearestTimes"))
                .and_then(Value::as_array)
                .map(|times| {
                    times
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .filter(|t| !t.is_empty());
            match (status, nearest) {
                (409 | 422, Some(times)) => format!(
                    "{message}. The nearest free times are {times}: offer them to the guest and book \
the one they choose."
                ),
                (409 | 422, None) => format!(
                    "{message}. Use getAvailableDates and getAvailableTimes to find a time that is free."
                ),
                (404, _) => format!(
                    "{message}. Check the id: list the records with the matching get… tool first."
                ),
                (401 | 403, _) => format!(
                    "{message}. The reservation system refused this server's credentials; tell the user."
                ),
                _ => format!("{message}. Correct the arguments and call the tool again."),
            }
        }
    }
}
