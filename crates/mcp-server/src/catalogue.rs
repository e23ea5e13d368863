//! The tools, in the order `tools/list` gives them, each declared once, with its
//! handler: name, title, description (teaching a model how to use it), what it does
//! to the data (hence its annotations and scope), and the handler `tools/call`
//! runs, whose own argument and result types give the input and output schemas. An
//! entry may declare a step to run before its handler (`Entry::first`):
//! `createBooking` asks for a missing guest that way. A long tool that may run as a
//! task is a `job_entry`: it is given the whole call (`getMonthReport`). Descriptions of filters are
//! generated from the backend's own field whitelists, so they cannot drift from
//! what the backend accepts.
//!
//! This is rmcp's `#[tool_router]` shape (a route a tool: its `Tool` and its
//! handler) without rmcp's `ToolRouter`, which lists tools by name rather than in
//! this order and answers arguments that do not fit with a tool error rather than
//! -32602.

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::handler::server::tool::{schema_for_input, schema_for_output};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::availability;
use super::backend::BackendClient;
use super::booking_guest;
use super::call::{Answer, Call, Refusal};
use super::metrics::Outcome;
use super::progress::Progress;
use super::report::{self, MonthReport, MonthReportArgs, MonthReports};
use super::tools;
use maitred_backend::model::{Booking, Customer, Feedback, OpeningHours, Table};
use maitred_backend::query::{FieldType, Resource};
use maitred_backend::resources;

pub const READ_SCOPE: &str = "mcp.read";
pub const WRITE_SCOPE: &str = "mcp.write";

/// What a tool does to the restaurant's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    Read,
    /// Adds something; repeating it adds it again.
    Create,
    /// Changes or cancels something; repeating it changes nothing more.
    Change,
}

impl Effect {
    pub fn scope(self) -> &'static str {
        match self {
            Effect::Read => READ_SCOPE,
            Effect::Create | Effect::Change => WRITE_SCOPE,
        }
    }
}

/// A tool's handler, its arguments still JSON and its result already JSON; a long
/// one reports its steps through [`Progress`].
type Handler = Arc<
    dyn Fn(BackendClient, JsonObject, Progress) -> BoxFuture<'static, Result<Value, Refusal>>
        + Send
        + Sync,
>;

/// A tool that takes the whole call and answers it: one that may go on as a task.
type Job = Arc<dyn for<'a> Fn(&'a Call<'a>, JsonObject) -> BoxFuture<'a, Answer> + Send + Sync>;

/// What `tools/call` runs.
#[derive(Clone)]
enum Run {
    Handler(Handler),
    Job(Job),
}

/// A step before a tool's handler: given the call and its arguments, it goes on
/// with the arguments (completed, say, by a person's answer) or answers the call
/// itself, and the handler does not run.
pub(super) type Step =
    for<'a> fn(&'a Call<'a>, JsonObject) -> BoxFuture<'a, Result<Settled, Answer>>;

/// What a step goes on with: the arguments, and the idempotency key the handler's
/// writes must carry instead of the caller's, if the step decides one (the answer
/// to a form may be booked once, however often it is sent).
pub(super) struct Settled {
    pub arguments: JsonObject,
    pub idempotency_key: Option<String>,
}

/// One tool: what `tools/list` says of it and what `tools/call` runs, defined
/// together so the schemas are those of the handler's own argument and result types.
#[derive(Clone)]
pub struct Entry {
    pub tool: Tool,
    pub effect: Effect,
    first: Option<Step>,
    run: Run,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("tool", &self.tool.name)
            .field("effect", &self.effect)
            .field("first", &self.first.is_some())
            .finish_non_exhaustive()
    }
}

impl Entry {
    /// This tool with `step` run before its handler.
    fn first(self, step: Step) -> Self {
        Self {
            first: Some(step),
            ..self
        }
    }

    /// Runs the tool for `call`, whose scope is checked: its step, if it has one,
    /// then its handler; a result is structured content, a refusal an error.
    pub(super) async fn call(&self, call: &Call<'_>) -> Answer {
        let mut arguments = call.request.arguments.clone().unwrap_or_default();
        let mut backend = call.backend.clone();
        if let Some(step) = self.first {
            arguments = match step(call, arguments).await {
                Ok(settled) => {
                    if let Some(key) = settled.idempotency_key.as_deref() {
                        backend = backend.with_idempotency_key(Some(key));
                    }
                    settled.arguments
                }
                Err(answer) => return answer,
            };
        }
        let handler = match &self.run {
            Run::Handler(handler) => handler,
            Run::Job(job) => return job(call, arguments).await,
        };
        let progress = Progress::of(call.ctx);
        match handler(backend, arguments, progress).await {
            Ok(value) => (Outcome::Ok, Ok(structured(value).into())),
            Err(refusal) => refusal.answer(),
        }
    }
}

/// The result as structured content, with a JSON text copy for clients that read only text.
pub(super) fn structured(value: Value) -> CallToolResult {
    let text = serde_json::to_string_pretty(&value).unwrap_or_default();
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(value);
    result
}

const STATUSES: &str = "Booking statuses: request (asked for, not yet confirmed), approved (confirmed), \
arrived, seated, left (the visit is over), declined (refused by the restaurant), canceled (by the guest), \
no_show (never came), waitlist (waiting for a table). request, approved, arrived and seated hold a table.";

const TIMES: &str =
    "Dates are YYYY-MM-DD and times HH:MM (24-hour), in the restaurant's local time.";

/// The filter language, with this resource's fields and their types.
fn filter_help(resource: &Resource) -> String {
    let fields: Vec<String> = resource
        .fields
        .iter()
        .map(|f| {
            let kind = match f.ty {
                FieldType::Text => "text",
                FieldType::Integer => "integer",
                FieldType::Float => "number",
                FieldType::Boolean => "true/false",
                FieldType::DateTime => "timestamp",
                FieldType::Date => "date",
                FieldType::Time => "time",
            };
            format!("{} ({kind})", f.name)
        })
        .collect();
    format!(
        "Filter with customQuery: conditions `field op value` with op one of = != > >= < <= LIKE, or \
`field IS NULL` / `field IS NOT NULL`, joined with AND / OR and parentheses. Put text in single quotes \
('Smith'); LIKE ignores case and % matches anything ('%@example.com'); numbers bare (3); true/false; \
dates as YYYY-MM-DD (on a timestamp field a date means that whole day). Example: \
`{}`. Fields: {}. Sort with `field:asc` or `field:desc` on the same fields.",
        example(resource),
        fields.join(", ")
    )
}

fn example(resource: &Resource) -> &'static str {
    match resource.name {
        "customers" => "email LIKE '%@example.com' AND bookingCount > 2",
        "feedback" => "rating <= 2 AND createdAt >= 2026-01-01",
        "bookings" => "status = 'approved' AND people >= 4",
        "opening-hours" => "isOpen = true AND date >= 2026-01-01",
        _ => "seatsMax >= 6",
    }
}

const COUNTS: &str = "`total` in the result is how many records match, whatever the page size: \
to count, call with limit=1 and read `total`.";

fn object(value: serde_json::Value) -> Arc<JsonObject> {
    match value {
        serde_json::Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

fn output<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    schema_for_output::<T>()
}

fn input<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    schema_for_input::<T>().unwrap_or_else(|_| object(serde_json::json!({ "type": "object" })))
}

/// A tool whose input schema is `I`'s, whose output schema is `O`'s, run by `run`.
fn entry<I, O, F, Fut>(
    name: &'static str,
    title: &'static str,
    effect: Effect,
    description: String,
    run: F,
) -> Entry
where
    I: JsonSchema + DeserializeOwned + 'static,
    O: JsonSchema + Serialize + 'static,
    F: Fn(BackendClient, I) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, Refusal>> + Send + 'static,
{
    reporting_entry(name, title, effect, description, move |backend, args, _| {
        run(backend, args)
    })
}

/// [`entry`] for a tool that reports progress as it goes.
fn reporting_entry<I, O, F, Fut>(
    name: &'static str,
    title: &'static str,
    effect: Effect,
    description: String,
    run: F,
) -> Entry
where
    I: JsonSchema + DeserializeOwned + 'static,
    O: JsonSchema + Serialize + 'static,
    F: Fn(BackendClient, I, Progress) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, Refusal>> + Send + 'static,
{
    let run: Handler = Arc::new(move |backend, arguments, progress| {
        match serde_json::from_value::<I>(Value::Object(arguments)) {
            Ok(arguments) => {
                let called = run(backend, arguments, progress);
                Box::pin(async move { encode(&called.await?) })
            }
            Err(error) => Box::pin(std::future::ready(Err(Refusal::InvalidParams(format!(
                "invalid arguments: {error}; the tool's inputSchema lists what it takes"
            ))))),
        }
    });
    Entry {
        tool: tool::<I, O>(name, title, effect, description),
        effect,
        first: None,
        run: Run::Handler(run),
    }
}

/// A tool whose input schema is `I`'s and output schema `O`'s, run by `job`, which
/// is given the whole call (and may answer it with a task).
fn job_entry<I, O>(
    name: &'static str,
    title: &'static str,
    effect: Effect,
    description: String,
    job: impl for<'a> Fn(&'a Call<'a>, JsonObject) -> BoxFuture<'a, Answer> + Send + Sync + 'static,
) -> Entry
where
    I: JsonSchema + 'static,
    O: JsonSchema + 'static,
{
    Entry {
        tool: tool::<I, O>(name, title, effect, description),
        effect,
        first: None,
        run: Run::Job(Arc::new(job)),
    }
}

/// What `tools/list` says of a tool: its schemas and its annotations.
fn tool<I: JsonSchema + 'static, O: JsonSchema + 'static>(
    name: &'static str,
    title: &'static str,
    effect: Effect,
    description: String,
) -> Tool {
    let annotations = match effect {
        Effect::Read => ToolAnnotations::with_title(title)
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
        Effect::Create => ToolAnnotations::with_title(title)
            .read_only(false)
            .destructive(false)
            .idempotent(false)
            .open_world(false),
        Effect::Change => ToolAnnotations::with_title(title)
            .read_only(false)
            .destructive(true)
            .idempotent(true)
            .open_world(false),
    };
    Tool::new(name, description, input::<I>())
        .with_title(title)
        .with_raw_output_schema(output::<O>())
        .with_annotations(annotations)
}

fn encode<T: Serialize>(result: &T) -> Result<Value, Refusal> {
    serde_json::to_value(result)
        .map_err(|e| Refusal::Failed(format!("the result could not be encoded: {e}")))
}

/// Every tool, in a fixed order: reads by resource, then availability, then the
/// month report, then writes.
pub(super) fn catalogue(reports: &MonthReports) -> Vec<Entry> {
    use Effect::*;
    vec![
        entry(
            "getCustomers",
            "Look up customers",
            Read,
            format!(
                "List the restaurant's customers (guests with contact details, number of bookings, \
last booking and money spent), newest first. {COUNTS} {}",
                filter_help(&resources::CUSTOMERS)
            ),
            |b, a| tools::list::<Customer>(b, "/customers", a),
        ),
        entry(
            "getCustomerById",
            "Look up a customer",
            Read,
            "Get one customer by its `_id` (from getCustomers, or a booking's guest._id): contact details, number of bookings, last booking and money spent.".to_owned(),
            |b, a| tools::one::<Customer>(b, "/customers", a),
        ),
        entry(
            "getFeedback",
            "Read guest feedback",
            Read,
            format!(
                "List feedback guests left after visits: a rating from 1 (bad) to 5 (excellent), a \
comment, whether it is public, the booking it is about and the customer who wrote it; newest first. {COUNTS} {}",
                filter_help(&resources::FEEDBACK)
            ),
            |b, a| tools::list::<Feedback>(b, "/feedback", a),
        ),
        entry(
            "getFeedbackById",
            "Read one feedback entry",
            Read,
            "Get one feedback entry by its `_id` (from getFeedback): the rating from 1 to 5, the comment, whether it is public, the booking and the customer.".to_owned(),
            |b, a| tools::one::<Feedback>(b, "/feedback", a),
        ),
        entry(
            "getOpeningHours",
            "Check opening hours",
            Read,
            format!(
                "List the opening periods (e.g. Lunch, Dinner) of the coming days, by date and time: when \
the restaurant opens and closes, whether it is open at all that day, and how many guests a period takes \
(maxPeople). {TIMES} {COUNTS} {}",
                filter_help(&resources::OPENING_HOURS)
            ),
            |b, a| tools::list::<OpeningHours>(b, "/opening-hours", a),
        ),
        entry(
            "getOpeningHoursById",
            "Check one opening period",
            Read,
            format!(
                "Get one opening period by its `_id` (from getOpeningHours, or a booking's openingHourId): \
its date, opening and closing time, and how many guests it takes. {TIMES}"
            ),
            |b, a| tools::one::<OpeningHours>(b, "/opening-hours", a),
        ),
        entry(
            "getTables",
            "Look up tables",
            Read,
            format!(
                "List the restaurant's tables: name, seats (seatsMin to seatsMax) and area (e.g. Window, \
Terrace). {COUNTS} {}",
                filter_help(&resources::TABLES)
            ),
            |b, a| tools::list::<Table>(b, "/tables", a),
        ),
        entry(
            "getBookings",
            "Look up bookings",
            Read,
            format!(
                "List bookings (reservations) by date and time, with guest, party size, duration, status \
and tables. Use fromDate/toDate for a date range (both inclusive). {STATUSES} {TIMES} {COUNTS} {}",
                filter_help(&resources::BOOKINGS)
            ),
            tools::bookings,
        ),
        entry(
            "getBookingById",
            "Look up a booking",
            Read,
            format!("Get one booking by its `_id` (from getBookings or createBooking). {STATUSES}"),
            |b, a| tools::one::<Booking>(b, "/bookings", a),
        ),
        entry(
            "getAvailableDates",
            "Find open dates",
            Read,
            format!(
                "List the dates on which a table for the party is still free at some time, from today on. \
Check it before suggesting a day. {TIMES}"
            ),
            tools::available_dates,
        ),
        entry(
            "getAvailableTimes",
            "Find free times",
            Read,
            format!(
                "List the start times on a date at which a table for the party is free for the whole \
visit (default 90 minutes). Call it before createBooking, and offer these times when the guest's time is \
taken. {TIMES}"
            ),
            tools::available_times,
        ),
        reporting_entry(
            "findAvailability",
            "Search a range of days",
            Read,
            format!(
                "Search the days between two dates (from and to, both inclusive, at most {} days) for \
the start times at which the party can be seated, optionally only between fromTime and toTime. Use \
it when the guest gives a span of days (\"between Friday and Sunday\", \"next week\") rather than one \
date; for one date use getAvailableTimes. Returns every day of the range with its free times. {TIMES}",
                availability::MAX_DAYS
            ),
            availability::find,
        ),
        job_entry::<MonthReportArgs, MonthReport>(
            report::NAME,
            "Month report",
            Read,
            format!(
                "Report on one month of bookings (month as YYYY-MM): it reads every day of the month \
from the reservation system, so it takes a while, and runs in the background where the client supports \
tasks. Returns the month's totals: bookings (every status), covers (guests of the bookings not canceled, \
declined, no_show or waitlist), noShows, cancellations, declined, byStatus, perWeekday (Mon to Sun: \
days, bookings, covers), busiestDay (the day with the most covers) and every day's own totals. Use it \
for questions about a whole month (\"how was November\", \"our busiest day in December\"); for single \
days use getBookings. Leave month out only when the person did not say which month: they are then \
asked for it. {STATUSES}"
            ),
            {
                let reports = reports.clone();
                move |call, arguments| reports.run(call, arguments)
            },
        ),
        entry(
            "createBooking",
            "Book a table",
            Create,
            format!(
                "Create a booking. Without tableIds the smallest free table that seats the party is \
chosen. The booking must fit in an opening period. If the time is taken or the restaurant is closed, the \
error names the nearest free times: offer them to the guest rather than guessing. The guest becomes (or \
is matched to) a customer by email or phone. Leave out the guest's details you do not know: the person \
is then asked for them in a form where their client can show one. New bookings have status request \
unless approved is given. {TIMES}"
            ),
            tools::create_booking,
        )
        .first(booking_guest::ask_for_guest),
        entry(
            "updateBooking",
            "Change a booking",
            Change,
            format!(
                "Change a booking's status, or reschedule it (date, time, party size, duration, tables). \
Allowed status changes: request → approved, declined, canceled or waitlist; waitlist → request, approved, \
declined or canceled; approved → arrived, seated, canceled, no_show or declined; arrived → seated, left \
or canceled; seated → left. Cancelling frees the table. A rescheduled booking keeps its table when it is \
still free. Returns the booking as it now is. {STATUSES} {TIMES}"
            ),
            tools::update_booking,
        ),
        entry(
            "addBookingNote",
            "Add a note to a booking",
            Create,
            "Add a note to a booking: `internal` (default) for the restaurant's staff only, or `guest` \
for a comment the guest sees."
                .to_owned(),
            tools::add_note,
        ),
    ]
}
