//! `getMonthReport`: a month of bookings, read from the backend one day at a time
//! and summed up: bookings, covers, no-shows, cancellations, totals per weekday and
//! the busiest day. It is the long tool: with a pause between days
//! (`MAITRED_MCP_REPORT_STEP_DELAY`) a month takes some seconds.
//!
//! To a 2026-07-28 caller that declared the tasks extension it is a task (`tasks`):
//! the call answers at once with the task, whose status message names the day being
//! read, and `tasks/cancel` stops it before the next day. To any other caller it is
//! a call that sends a progress notification per day, and stops when the caller
//! cancels the request.
//!
//! A call without `month` asks the person: in a task with an input request
//! (`input_required`, answered with `tasks/update`); in a call with the caller's
//! form (mid-call on 2025-11-25, as an input round trip on 2026-07-28); a caller that
//! shows no forms is told to ask in the chat and call again.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{Datelike, Months, NaiveDate, Weekday};
use futures::future::BoxFuture;
use rmcp::model::{
    CallToolResponse, CallToolResult, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationSchema, InputRequest, InputRequiredResult, JsonObject,
    ProtocolVersion,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskContext, TaskExit};
use rmcp::{ErrorData, RoleServer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::backend::BackendClient;
use super::call::{Answer, Call, Refusal, tool_error};
use super::catalogue::structured;
use super::metrics::Outcome;
use super::progress::Progress;
use super::tasks::{self, Tasks};

pub(super) const NAME: &str = "getMonthReport";

/// The key of the month's input request, in a task and in a 2026-07-28 round trip.
const MONTH_KEY: &str = "month";

/// Bookings whose guests are not counted as covers: they did not come, or never had a table.
const NOT_COVERS: &[&str] = &["canceled", "declined", "no_show", "waitlist"];

/// The backend's largest page.
const PAGE: usize = 100;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct MonthReportArgs {
    /// The month to report on, `YYYY-MM` (e.g. `2026-12`); leave it out to have the person asked.
    #[schemars(length(min = 7, max = 7))]
    pub month: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct MonthReport {
    /// The month, `YYYY-MM`.
    pub month: String,
    /// Its first and last day, `YYYY-MM-DD`.
    pub from: String,
    pub to: String,
    /// How many days were read: every day of the month.
    pub days_counted: u32,
    /// Every booking dated in the month, whatever its status.
    pub bookings: u64,
    /// Guests booked and not lost: the people of every booking that is not canceled,
    /// declined, no_show or waitlist.
    pub covers: u64,
    /// Bookings whose guests never came (status no_show).
    pub no_shows: u64,
    /// Bookings the guests canceled (status canceled).
    pub cancellations: u64,
    /// Bookings the restaurant declined (status declined).
    pub declined: u64,
    /// How many bookings have each status.
    pub by_status: BTreeMap<String, u64>,
    /// Monday to Sunday: how many of that weekday the month has, and their bookings and covers.
    pub per_weekday: Vec<WeekdayTotals>,
    /// The day with the most covers (the earliest of equals); absent when no day has any.
    pub busiest_day: Option<DayTotals>,
    /// Every day of the month, in order.
    pub days: Vec<DayTotals>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct DayTotals {
    pub date: String,
    /// e.g. `Sat`.
    pub weekday: String,
    pub bookings: u64,
    pub covers: u64,
    pub no_shows: u64,
    pub cancellations: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct WeekdayTotals {
    /// e.g. `Mon`.
    pub weekday: String,
    /// How many of this weekday the month has.
    pub days: u32,
    pub bookings: u64,
    pub covers: u64,
}

/// What the report reads of a booking.
#[derive(Debug, Deserialize)]
struct Seen {
    status: String,
    people: i64,
}

/// A month, by its first day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Month(NaiveDate);

impl Month {
    fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let shaped = text.len() == 7 && text.as_bytes()[4] == b'-';
        shaped
            .then(|| NaiveDate::parse_from_str(&format!("{text}-01"), "%Y-%m-%d").ok())
            .flatten()
            .map(Month)
            .ok_or_else(|| format!("month must be a month as YYYY-MM (e.g. 2026-12), not {text:?}"))
    }

    fn days(self) -> Vec<NaiveDate> {
        let next = self.0.checked_add_months(Months::new(1));
        self.0
            .iter_days()
            .take_while(|d| next.is_none_or(|n| *d < n))
            .collect()
    }

    /// "December 2026".
    fn name(self) -> String {
        self.0.format("%B %Y").to_string()
    }
}

/// The month's sums, a day at a time.
struct Tally {
    month: Month,
    days: Vec<DayTotals>,
    by_status: BTreeMap<String, u64>,
}

impl Tally {
    fn new(month: Month) -> Self {
        Self {
            month,
            days: Vec::new(),
            by_status: BTreeMap::new(),
        }
    }

    fn add(&mut self, date: NaiveDate, bookings: &[Seen]) -> &DayTotals {
        let count = |status: &str| bookings.iter().filter(|b| b.status == status).count() as u64;
        for booking in bookings {
            *self.by_status.entry(booking.status.clone()).or_default() += 1;
        }
        self.days.push(DayTotals {
            date: date.to_string(),
            weekday: date.weekday().to_string(),
            bookings: bookings.len() as u64,
            covers: bookings
                .iter()
                .filter(|b| !NOT_COVERS.contains(&b.status.as_str()))
                .map(|b| b.people.max(0) as u64)
                .sum(),
            no_shows: count("no_show"),
            cancellations: count("canceled"),
        });
        &self.days[self.days.len() - 1]
    }

    fn finish(self) -> MonthReport {
        let sum = |field: fn(&DayTotals) -> u64| self.days.iter().map(field).sum::<u64>();
        let per_weekday = [
            Weekday::Mon,
            Weekday::Tue,
            Weekday::Wed,
            Weekday::Thu,
            Weekday::Fri,
            Weekday::Sat,
            Weekday::Sun,
        ]
        .into_iter()
        .map(|weekday| {
            let name = weekday.to_string();
            let days: Vec<&DayTotals> = self.days.iter().filter(|d| d.weekday == name).collect();
            WeekdayTotals {
                days: days.len() as u32,
                bookings: days.iter().map(|d| d.bookings).sum(),
                covers: days.iter().map(|d| d.covers).sum(),
                weekday: name,
            }
        })
        .collect();
        // The first of the days with the most covers.
        let busiest_day = self
            .days
            .iter()
            .filter(|d| d.covers > 0)
            .fold(None::<&DayTotals>, |best, d| match best {
                Some(b) if b.covers >= d.covers => Some(b),
                _ => Some(d),
            })
            .cloned();
        let days = self.month.days();
        MonthReport {
            month: self.month.0.format("%Y-%m").to_string(),
            from: days.first().map(ToString::to_string).unwrap_or_default(),
            to: days.last().map(ToString::to_string).unwrap_or_default(),
            days_counted: self.days.len() as u32,
            bookings: sum(|d| d.bookings),
            covers: sum(|d| d.covers),
            no_shows: sum(|d| d.no_shows),
            cancellations: sum(|d| d.cancellations),
            declined: self.by_status.get("declined").copied().unwrap_or(0),
            by_status: self.by_status,
            per_weekday,
            busiest_day,
            days: self.days,
        }
    }
}

/// "Day 12 of 31 (Sat 12 Dec): 4 bookings, 11 covers".
fn step_message(done: u32, total: u32, date: NaiveDate, day: &DayTotals) -> String {
    let plural = |n: u64, one: &str, many: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {many}")
        }
    };
    format!(
        "Day {done} of {total} ({}): {}, {}",
        date.format("%a %-d %b"),
        plural(day.bookings, "booking", "bookings"),
        plural(day.covers, "cover", "covers")
    )
}

/// Why the report stopped before its end.
enum Stop {
    Refused(Refusal),
    Cancelled,
}

impl From<Refusal> for Stop {
    fn from(refusal: Refusal) -> Self {
        Stop::Refused(refusal)
    }
}

/// Where the report's steps go, and what stops it.
enum Steps {
    /// A call: a progress notification per day; the caller cancelling the request stops it.
    Call {
        progress: Progress,
        cancelled: CancellationToken,
    },
    /// A task: its status message per day; `tasks/cancel` stops it.
    Task(TaskContext),
}

impl Steps {
    async fn report(&self, done: u32, total: u32, message: String) {
        match self {
            Steps::Call { progress, .. } => progress.step(done, total, message).await,
            Steps::Task(context) => context.set_status_message(message),
        }
    }

    async fn cancelled(&self) {
        match self {
            Steps::Call { cancelled, .. } => cancelled.cancelled().await,
            Steps::Task(context) => context.cancelled().await,
        }
    }

    /// `work`, unless the report is cancelled first.
    async fn unless_cancelled<T>(&self, work: impl Future<Output = T>) -> Result<T, Stop> {
        tokio::select! {
            biased;
            () = self.cancelled() => Err(Stop::Cancelled),
            done = work => Ok(done),
        }
    }
}

/// Every booking dated `date`, page by page.
async fn day_bookings(backend: &BackendClient, date: NaiveDate) -> Result<Vec<Seen>, Refusal> {
    let mut all = Vec::new();
    loop {
        let query = [
            ("fromDateTime", date.to_string()),
            ("toDateTime", date.to_string()),
            ("limit", PAGE.to_string()),
            ("skip", all.len().to_string()),
        ];
        let page = backend.list::<Seen>("/bookings", &query).await?;
        let got = page.items.len();
        all.extend(page.items);
        let total = page.total.unwrap_or(all.len() as u64);
        if got == 0 || all.len() as u64 >= total {
            return Ok(all);
        }
    }
}

async fn compile(
    backend: &BackendClient,
    month: Month,
    pause: Duration,
    steps: &Steps,
) -> Result<MonthReport, Stop> {
    let days = month.days();
    let total = days.len() as u32;
    let mut tally = Tally::new(month);
    for (done, date) in (1..).zip(days) {
        if done > 1 && !pause.is_zero() {
            steps.unless_cancelled(tokio::time::sleep(pause)).await?;
        }
        let bookings = steps
            .unless_cancelled(day_bookings(backend, date))
            .await??;
        let message = step_message(done, total, date, tally.add(date, &bookings));
        steps.report(done, total, message).await;
    }
    Ok(tally.finish())
}

/// "Which month?": the form a person is asked when the call names none.
fn month_form() -> ElicitRequestParams {
    let schema = json!({
        "type": "object",
        "properties": {
            MONTH_KEY: {
                "type": "string",
                "title": "Month",
                "description": "As YYYY-MM, e.g. 2026-12",
                "minLength": 7,
                "maxLength": 7,
            }
        },
        "required": [MONTH_KEY],
    });
    let requested_schema = match schema {
        Value::Object(schema) => ElicitationSchema::from_json_schema(schema),
        _ => ElicitationSchema::from_json_schema(JsonObject::new()),
    }
    .unwrap_or_else(|_| ElicitationSchema::new(Default::default()));
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: "Which month should the bookings report cover? Give it as YYYY-MM.".to_owned(),
        requested_schema,
    }
}

/// The month the person gave, or what the model should do instead.
fn read_answer(result: ElicitResult) -> Result<Month, String> {
    match result.action {
        ElicitationAction::Accept => {
            let given = result
                .content
                .as_ref()
                .and_then(|c| c.get(MONTH_KEY))
                .and_then(Value::as_str)
                .unwrap_or_default();
            Month::parse(given).map_err(|error| {
                format!(
                    "The person's answer is not a month ({error}), so no report was made. Ask them \
in the chat which month they want, then call {NAME} again with month as YYYY-MM."
                )
            })
        }
        ElicitationAction::Decline => Err(format!(
            "The person declined to say which month, so no report was made. Ask them in the chat \
which month they want, then call {NAME} again with month as YYYY-MM."
        )),
        _ => Err(format!(
            "The person cancelled the form asking for the month, so no report was made. Do not call \
{NAME} again unless they ask for a report."
        )),
    }
}

fn shows_forms(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

fn round_trips(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}

/// In a call: the month from the person's form, or the call's answer.
async fn ask_in_call(call: &Call<'_>) -> Result<Month, Answer> {
    let ctx = call.ctx;
    if !shows_forms(ctx) {
        return Err(tool_error(
            Outcome::ToolError,
            format!(
                "month is missing. Ask the person which month the report should cover, then call \
{NAME} again with month as YYYY-MM (e.g. 2026-12)."
            ),
        ));
    }
    let result = if round_trips(ctx) {
        let answered = call
            .request
            .input_responses
            .as_ref()
            .and_then(|responses| responses.get(MONTH_KEY))
            .cloned();
        match answered {
            Some(value) => serde_json::from_value::<ElicitResult>(value).map_err(|_| {
                Refusal::InvalidParams(format!(
                    "inputResponses must answer the input request {MONTH_KEY:?} with an elicitation result"
                ))
                .answer()
            })?,
            None => {
                let requests = BTreeMap::from([(
                    MONTH_KEY.to_owned(),
                    InputRequest::Elicitation(ElicitRequest::new(month_form())),
                )]);
                return Err((
                    Outcome::InputRequired,
                    Ok(InputRequiredResult::new(Some(requests), None).into()),
                ));
            }
        }
    } else {
        ctx.peer.create_elicitation(month_form()).await.map_err(|e| {
            tracing::warn!(error = %e, "the month form could not be shown");
            tool_error(
                Outcome::ToolError,
                format!(
                    "The form asking for the month could not be shown. Ask the person in the chat \
which month the report should cover, then call {NAME} again with month as YYYY-MM."
                ),
            )
        })?
    };
    read_answer(result).map_err(|text| tool_error(Outcome::ToolError, text))
}

/// In a task: the month from an input request the client answers with `tasks/update`.
async fn ask_in_task(context: &TaskContext) -> Result<Result<Month, String>, TaskExit> {
    let answer = context
        .request_input(
            MONTH_KEY,
            InputRequest::Elicitation(ElicitRequest::new(month_form())),
        )
        .await?;
    Ok(match serde_json::from_value::<ElicitResult>(answer) {
        Ok(result) => read_answer(result),
        Err(_) => Err(format!(
            "The answer to the input request {MONTH_KEY:?} is not an elicitation result, so no report \
was made. Call {NAME} again with month as YYYY-MM."
        )),
    })
}

fn report_result(report: &MonthReport) -> Result<CallToolResult, Refusal> {
    serde_json::to_value(report)
        .map(structured)
        .map_err(|e| Refusal::Failed(format!("the report could not be encoded: {e}")))
}

/// A refusal as a task's end: a tool error completes it, a protocol error fails it.
fn task_end(refusal: Refusal) -> Result<CallToolResult, TaskExit> {
    match refusal.answer().1 {
        Ok(CallToolResponse::Complete(result)) => Ok(result),
        Ok(_) => Err(TaskExit::Error(ErrorData::internal_error(
            "the report ended in an answer a task cannot give",
            None,
        ))),
        Err(error) => Err(TaskExit::Error(error)),
    }
}

/// `getMonthReport`, with the tasks it runs as and the pause between its days.
#[derive(Clone)]
pub(super) struct MonthReports {
    tasks: Tasks,
    pause: Duration,
}

impl MonthReports {
    pub(super) fn new(tasks: Tasks, pause: Duration) -> Self {
        Self { tasks, pause }
    }

    /// Runs `getMonthReport` for `call` (whose scope is checked).
    pub(super) fn run<'a>(
        &self,
        call: &'a Call<'a>,
        arguments: JsonObject,
    ) -> BoxFuture<'a, Answer> {
        let this = self.clone();
        Box::pin(async move { this.answer(call, arguments).await })
    }

    async fn answer(&self, call: &Call<'_>, arguments: JsonObject) -> Answer {
        let args = match serde_json::from_value::<MonthReportArgs>(Value::Object(arguments)) {
            Ok(args) => args,
            Err(error) => {
                return Refusal::InvalidParams(format!(
                    "invalid arguments: {error}; the tool's inputSchema lists what it takes"
                ))
                .answer();
            }
        };
        let month = match args.month.as_deref().map(Month::parse).transpose() {
            Ok(month) => month,
            Err(message) => return Refusal::Failed(message).answer(),
        };
        if tasks::declared(call.ctx) {
            return self.start_task(call, month);
        }
        let month = match month {
            Some(month) => month,
            None => match ask_in_call(call).await {
                Ok(month) => month,
                Err(answer) => return answer,
            },
        };
        let steps = Steps::Call {
            progress: Progress::of(call.ctx),
            cancelled: call.ctx.ct.clone(),
        };
        match compile(call.backend, month, self.pause, &steps).await {
            Ok(report) => match report_result(&report) {
                Ok(result) => (Outcome::Ok, Ok(result.into())),
                Err(refusal) => refusal.answer(),
            },
            Err(Stop::Refused(refusal)) => refusal.answer(),
            Err(Stop::Cancelled) => tool_error(
                Outcome::ToolError,
                "The report was cancelled before it was finished.".to_owned(),
            ),
        }
    }

    fn start_task(&self, call: &Call<'_>, month: Option<Month>) -> Answer {
        let backend = call.backend.clone();
        let pause = self.pause;
        let status = match month {
            Some(month) => format!("Reading the bookings of {}", month.name()),
            None => "Asking which month to report on".to_owned(),
        };
        let started = self
            .tasks
            .start(tasks::owner(call.caller), NAME, status, move |context| {
                Box::pin(async move {
                    let month = match month {
                        Some(month) => month,
                        None => match ask_in_task(&context).await? {
                            Ok(month) => {
                                context.set_status_message(format!(
                                    "Reading the bookings of {}",
                                    month.name()
                                ));
                                month
                            }
                            Err(text) => return task_end(Refusal::Failed(text)),
                        },
                    };
                    match compile(&backend, month, pause, &Steps::Task(context)).await {
                        Ok(report) => report_result(&report).or_else(task_end),
                        Err(Stop::Refused(refusal)) => task_end(refusal),
                        Err(Stop::Cancelled) => Err(TaskExit::Cancelled),
                    }
                })
            });
        match started {
            Ok(created) => (Outcome::Task, Ok(CallToolResponse::Task(created))),
            Err(capped) => tool_error(Outcome::ToolError, capped.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn month(text: &str) -> Month {
        Month::parse(text).unwrap()
    }

    fn seen(status: &str, people: i64) -> Seen {
        Seen {
            status: status.to_owned(),
            people,
        }
    }

    #[test]
    fn a_month_is_yyyy_mm_and_has_all_its_days() {
        assert_eq!(month("2026-12").days().len(), 31);
        assert_eq!(month("2027-02").days().len(), 28);
        assert_eq!(month("2028-02").days().len(), 29);
        assert_eq!(
            month(" 2026-04 ").days().last().unwrap().to_string(),
            "2026-04-30"
        );
        assert_eq!(month("2026-12").name(), "December 2026");
        for wrong in [
            "2026-13",
            "2026-1",
            "12-2026",
            "2026-12-01",
            "",
            "next month",
        ] {
            assert!(
                Month::parse(wrong).unwrap_err().contains("YYYY-MM"),
                "{wrong:?}"
            );
        }
    }

    #[test]
    fn the_report_counts_covers_no_shows_cancellations_and_the_busiest_day() {
        let december = month("2026-12");
        let mut tally = Tally::new(december);
        for date in december.days() {
            let bookings = match date.day() {
                // Tue 1 Dec: 2 kept (6 covers), a no-show, a cancellation.
                1 => vec![
                    seen("approved", 2),
                    seen("left", 4),
                    seen("no_show", 3),
                    seen("canceled", 5),
                ],
                // Sat 5 Dec: 8 covers, the busiest; one on the waitlist.
                5 => vec![seen("seated", 8), seen("waitlist", 2)],
                // Tue 8 Dec: 8 covers too, but later.
                8 => vec![seen("request", 8), seen("declined", 6)],
                _ => Vec::new(),
            };
            tally.add(date, &bookings);
        }
        let report = tally.finish();
        assert_eq!(report.month, "2026-12");
        assert_eq!(
            (report.from.as_str(), report.to.as_str()),
            ("2026-12-01", "2026-12-31")
        );
        assert_eq!(report.days_counted, 31);
        assert_eq!(report.bookings, 8);
        assert_eq!(report.covers, 6 + 8 + 8);
        assert_eq!(report.no_shows, 1);
        assert_eq!(report.cancellations, 1);
        assert_eq!(report.declined, 1);
        assert_eq!(report.by_status["approved"], 1);
        let busiest = report.busiest_day.unwrap();
        assert_eq!((busiest.date.as_str(), busiest.covers), ("2026-12-05", 8));
        let tuesdays = &report.per_weekday[1];
        assert_eq!(tuesdays.weekday, "Tue");
        assert_eq!(
            (tuesdays.days, tuesdays.bookings, tuesdays.covers),
            (5, 6, 14)
        );
        assert_eq!(report.per_weekday.iter().map(|w| w.days).sum::<u32>(), 31);
        let json = serde_json::to_value(&report.days[0]).unwrap();
        assert_eq!(json["noShows"], 1);
    }

    #[test]
    fn a_month_without_bookings_has_no_busiest_day() {
        let mut tally = Tally::new(month("2027-02"));
        for date in month("2027-02").days() {
            tally.add(date, &[]);
        }
        let report = tally.finish();
        assert!(report.busiest_day.is_none());
        assert_eq!(
            (report.bookings, report.covers, report.days_counted),
            (0, 0, 28)
        );
    }

    #[test]
    fn the_step_message_names_the_day() {
        let date = NaiveDate::from_ymd_opt(2026, 12, 12).unwrap();
        let mut tally = Tally::new(month("2026-12"));
        let day = tally.add(date, &[seen("approved", 1)]).clone();
        assert_eq!(
            step_message(12, 31, date, &day),
            "Day 12 of 31 (Sat 12 Dec): 1 booking, 1 cover"
        );
    }

    #[test]
    fn the_answer_to_the_form_is_a_month_or_what_to_do() {
        let accept = |month: &str| {
            ElicitResult::new(ElicitationAction::Accept).with_content(json!({ "month": month }))
        };
        assert_eq!(read_answer(accept("2026-11")).unwrap(), month("2026-11"));
        assert!(
            read_answer(accept("November"))
                .unwrap_err()
                .contains("not a month")
        );
        assert!(
            read_answer(ElicitResult::new(ElicitationAction::Decline))
                .unwrap_err()
                .contains("declined")
        );
        assert!(
            read_answer(ElicitResult::new(ElicitationAction::Cancel))
                .unwrap_err()
                .contains("cancelled")
        );
        let form = serde_json::to_value(month_form()).unwrap();
        assert_eq!(form["requestedSchema"]["required"], json!(["month"]));
        assert_eq!(
            form["requestedSchema"]["properties"]["month"]["title"],
            "Month"
        );
    }
}
