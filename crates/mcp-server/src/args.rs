//! Tool arguments as the tools' input schemas describe them. Unknown fields are
//! refused, so a misspelt argument is an error rather than silently ignored.

use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ListArgs {
    /// How many records to return, 1 to 100 (default 100).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
    /// How many records to skip, for paging (default 0).
    pub skip: Option<u32>,
    /// Sort keys `field:asc` or `field:desc`, comma-separated, e.g. `createdAt:desc`.
    pub sort: Option<String>,
    /// A filter; see the tool description for the fields and operators.
    pub custom_query: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct IdArgs {
    /// The record's `_id`, as returned by the list tool.
    #[schemars(length(min = 1, max = 64))]
    pub id: String,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct BookingListArgs {
    /// First date to include, `YYYY-MM-DD`.
    #[schemars(extend("format" = "date"))]
    pub from_date: Option<String>,
    /// Last date to include, `YYYY-MM-DD`.
    #[schemars(extend("format" = "date"))]
    pub to_date: Option<String>,
    /// Only bookings the restaurant has confirmed (approved, arrived, seated, left).
    pub only_confirmed: Option<bool>,
    /// How many records to return, 1 to 100 (default 100).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
    /// How many records to skip, for paging (default 0).
    pub skip: Option<u32>,
    /// Sort keys `field:asc` or `field:desc`, comma-separated (default date and time ascending).
    pub sort: Option<String>,
    /// A filter; see the tool description for the fields and operators.
    pub custom_query: Option<String>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct AvailableDatesArgs {
    /// Party size (default 2).
    #[schemars(range(min = 1, max = 999))]
    pub people: Option<u32>,
    /// Length of the visit in minutes (default 90).
    #[schemars(range(min = 15, max = 480))]
    pub duration: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct AvailableTimesArgs {
    /// The date, `YYYY-MM-DD`.
    #[schemars(extend("format" = "date"))]
    pub date: String,
    /// Party size.
    #[schemars(range(min = 1, max = 999))]
    pub people: u32,
    /// Length of the visit in minutes (default 90).
    #[schemars(range(min = 15, max = 480))]
    pub duration: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct FindAvailabilityArgs {
    /// The first date to check, `YYYY-MM-DD`.
    #[schemars(extend("format" = "date"))]
    pub from: String,
    /// The last date to check, `YYYY-MM-DD` (inclusive; at most 31 days after `from`).
    #[schemars(extend("format" = "date"))]
    pub to: String,
    /// Party size.
    #[schemars(range(min = 1, max = 999))]
    pub people: u32,
    /// The earliest start time wanted, `HH:MM` (default: any).
    #[schemars(pattern(r"^([01]?[0-9]|2[0-3]):[0-5][0-9]$"))]
    pub from_time: Option<String>,
    /// The latest start time wanted, `HH:MM` (default: any).
    #[schemars(pattern(r"^([01]?[0-9]|2[0-3]):[0-5][0-9]$"))]
    pub to_time: Option<String>,
    /// Length of the visit in minutes (default 90).
    #[schemars(range(min = 15, max = 480))]
    pub duration: Option<u32>,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum NewStatus {
    Request,
    Approved,
    Waitlist,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct CreateBookingArgs {
    /// The date, `YYYY-MM-DD`.
    #[schemars(extend("format" = "date"))]
    pub date: String,
    /// Start time, `HH:MM` (24-hour).
    #[schemars(pattern(r"^([01]?[0-9]|2[0-3]):[0-5][0-9]$"))]
    pub time: String,
    /// Party size.
    #[schemars(range(min = 1, max = 999))]
    pub people: u32,
    /// Length of the visit in minutes, 15 to 480 (default 90).
    #[schemars(range(min = 15, max = 480))]
    pub duration: Option<u32>,
    /// The guest's full name; leave it out when unknown: the person is asked in a form.
    #[schemars(length(min = 2, max = 100))]
    pub guest_name: Option<String>,
    /// The guest's email address.
    #[schemars(email)]
    pub guest_email: Option<String>,
    /// The guest's phone number with country code, e.g. `+4512345678`.
    pub guest_phone: Option<String>,
    /// Table `_id`s from getTables; leave out to get the smallest free table that fits.
    pub table_ids: Option<Vec<String>>,
    /// A note from the guest, visible to the guest (e.g. "window seat please").
    #[schemars(length(max = 1000))]
    pub comment: Option<String>,
    /// `request` (default), `approved` or `waitlist`.
    pub status: Option<NewStatus>,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum Status {
    Request,
    Approved,
    Declined,
    Arrived,
    Seated,
    Left,
    NoShow,
    Canceled,
    Waitlist,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct UpdateBookingArgs {
    /// The booking's `_id`.
    #[schemars(length(min = 1, max = 64))]
    pub id: String,
    /// The new status.
    pub status: Option<Status>,
    /// A new date, `YYYY-MM-DD`.
    #[schemars(extend("format" = "date"))]
    pub date: Option<String>,
    /// A new start time, `HH:MM`.
    #[schemars(pattern(r"^([01]?[0-9]|2[0-3]):[0-5][0-9]$"))]
    pub time: Option<String>,
    /// A new party size.
    #[schemars(range(min = 1, max = 999))]
    pub people: Option<u32>,
    /// A new length in minutes.
    #[schemars(range(min = 15, max = 480))]
    pub duration: Option<u32>,
    /// New table `_id`s.
    pub table_ids: Option<Vec<String>>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum Visibility {
    /// An internal note, for the restaurant only.
    #[default]
    Internal,
    /// A comment the guest sees.
    Guest,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct AddBookingNoteArgs {
    /// The booking's `_id`.
    #[schemars(length(min = 1, max = 64))]
    pub id: String,
    /// The note.
    #[schemars(length(min = 1, max = 1000))]
    pub text: String,
    /// `internal` (default): for the restaurant only; `guest`: a comment the guest sees.
    pub visibility: Option<Visibility>,
}

impl Status {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Status::Request => "request",
            Status::Approved => "approved",
            Status::Declined => "declined",
            Status::Arrived => "arrived",
            Status::Seated => "seated",
            Status::Left => "left",
            Status::NoShow => "no_show",
            Status::Canceled => "canceled",
            Status::Waitlist => "waitlist",
        }
    }
}

impl NewStatus {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            NewStatus::Request => "request",
            NewStatus::Approved => "approved",
            NewStatus::Waitlist => "waitlist",
        }
    }
}
