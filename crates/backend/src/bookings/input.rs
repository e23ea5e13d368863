//! Booking request bodies, checked field by field into values the store can trust.

use chrono::{NaiveDate, NaiveTime};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::schedule::{DEFAULT_DURATION, parse_time};
use crate::contact::{compact_phone, valid_e164, valid_email};
use crate::error::{ApiError, FieldError};
use crate::model::{LANGUAGES, SOURCES, STATUSES};

/// A table as a client names it: its id, or a table object with `_id`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(untagged)]
pub(crate) enum TableRef {
    Id(String),
    Object {
        #[serde(rename = "_id")]
        id: String,
    },
}

impl TableRef {
    pub(crate) fn id(&self) -> &str {
        match self {
            Self::Id(id) | Self::Object { id } => id,
        }
    }
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GuestInput {
    pub name: Option<String>,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub notification_sms: Option<bool>,
    pub notification_email: Option<bool>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NewBookingBody {
    /// `YYYY-MM-DD`
    pub date: String,
    /// `HH:MM`, 24-hour
    pub time: String,
    pub people: i64,
    /// Minutes, 15 to 480 (default 90).
    pub duration: Option<i64>,
    pub guest: GuestInput,
    /// Table ids (or table objects); without them the smallest free table that fits is assigned.
    pub tables: Option<Vec<TableRef>>,
    /// request (default), approved or waitlist.
    pub status: Option<String>,
    pub source: Option<String>,
    pub comment: Option<String>,
    pub note: Option<String>,
    pub language_code: Option<String>,
    pub referrer: Option<String>,
    #[schema(value_type = Object)]
    pub metadata: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BookingPatchBody {
    /// A new status: request, approved, declined, arrived, seated, left, no_show, canceled, waitlist.
    pub status: Option<String>,
    pub date: Option<String>,
    pub time: Option<String>,
    pub people: Option<i64>,
    pub duration: Option<i64>,
    pub tables: Option<Vec<TableRef>>,
    pub guest: Option<GuestInput>,
    pub source: Option<String>,
    pub comment: Option<String>,
    pub language_code: Option<String>,
    pub referrer: Option<String>,
    #[schema(value_type = Object)]
    pub metadata: Option<Value>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
pub(crate) struct TextBody {
    pub text: String,
}

/// A new booking after validation.
#[derive(Debug, Clone)]
pub(crate) struct NewBooking {
    pub date: NaiveDate,
    pub time: NaiveTime,
    pub people: i64,
    pub duration: i64,
    pub guest: Guest,
    pub tables: Option<Vec<String>>,
    pub status: String,
    pub source: String,
    pub comment: Option<String>,
    pub note: Option<String>,
    pub language_code: String,
    pub referrer: Option<String>,
    pub metadata: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct Guest {
    pub name: String,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub notification_sms: bool,
    pub notification_email: bool,
}

/// A change after validation; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub(crate) struct BookingPatch {
    pub status: Option<String>,
    pub date: Option<NaiveDate>,
    pub time: Option<NaiveTime>,
    pub people: Option<i64>,
    pub duration: Option<i64>,
    pub tables: Option<Vec<String>>,
    pub guest: Option<GuestInput>,
    pub source: Option<String>,
    pub comment: Option<String>,
    pub language_code: Option<String>,
    pub referrer: Option<String>,
    pub metadata: Option<String>,
}

impl BookingPatch {
    pub(crate) fn reschedules(&self) -> bool {
        self.date.is_some()
            || self.time.is_some()
            || self.people.is_some()
            || self.duration.is_some()
            || self.tables.is_some()
    }
}

/// Collects every problem before answering, so one response lists them all.
#[derive(Default)]
struct Check(Vec<FieldError>);

impl Check {
    fn fail(&mut self, field: &str, message: impl Into<String>) {
        self.0.push(FieldError::new(field, message));
    }

    fn date(&mut self, field: &str, text: &str) -> Option<NaiveDate> {
        let parsed = NaiveDate::parse_from_str(text, "%Y-%m-%d").ok();
        if parsed.is_none() {
            self.fail(field, format!("{text:?} is not a date; use YYYY-MM-DD"));
        }
        parsed
    }

    fn time(&mut self, field: &str, text: &str) -> Option<NaiveTime> {
        let parsed = parse_time(text).filter(|_| text.len() <= 5);
        if parsed.is_none() {
            self.fail(
                field,
                format!("{text:?} is not a time; use HH:MM (24-hour)"),
            );
        }
        parsed
    }

    fn range(&mut self, field: &str, value: i64, min: i64, max: i64) -> Option<i64> {
        if (min..=max).contains(&value) {
            Some(value)
        } else {
            self.fail(
                field,
                format!("must be between {min} and {max}, not {value}"),
            );
            None
        }
    }

    fn one_of(&mut self, field: &str, value: &str, allowed: &[&str]) -> Option<String> {
        if allowed.contains(&value) {
            Some(value.to_owned())
        } else {
            self.fail(
                field,
                format!("{value:?} is not one of {}", allowed.join(", ")),
            );
            None
        }
    }

    fn max_len(&mut self, field: &str, value: Option<String>, max: usize) -> Option<String> {
        let value = value
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())?;
        if value.chars().count() > max {
            self.fail(field, format!("must be at most {max} characters"));
            return None;
        }
        Some(value)
    }

    fn metadata(&mut self, value: Option<Value>) -> Option<String> {
        let value = value.filter(|v| !v.is_null())?;
        if !value.is_object() {
            self.fail("metadata", "must be a JSON object");
            return None;
        }
        let text = value.to_string();
        if text.len() > 2000 {
            self.fail("metadata", "must be at most 2000 characters as JSON");
            return None;
        }
        Some(text)
    }

    fn name(&mut self, value: Option<String>) -> Option<String> {
        match value.map(|v| v.trim().to_owned()) {
            Some(name) if (2..=100).contains(&name.chars().count()) => Some(name),
            Some(_) => {
                self.fail("guest.name", "must be 2 to 100 characters");
                None
            }
            None => {
                self.fail("guest.name", "is required");
                None
            }
        }
    }

    fn email(&mut self, value: Option<String>) -> Option<String> {
        let email = value
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())?;
        if valid_email(&email) {
            Some(email)
        } else {
            self.fail("guest.email", format!("{email:?} is not an email address"));
            None
        }
    }

    fn phone(&mut self, value: Option<String>) -> Option<String> {
        let phone = compact_phone(&value?);
        if phone.is_empty() {
            return None;
        }
        if valid_e164(&phone) {
            Some(phone)
        } else {
            self.fail(
                "guest.phone",
                format!("{phone:?} is not a phone number in E.164 form, such as +4512345678"),
            );
            None
        }
    }

    fn tables(&mut self, tables: Option<Vec<TableRef>>) -> Option<Vec<String>> {
        let tables = tables?;
        let mut ids: Vec<String> = tables.iter().map(|t| t.id().to_owned()).collect();
        ids.sort();
        ids.dedup();
        if ids.is_empty() {
            return None;
        }
        if ids.len() > 8 {
            self.fail("tables", "at most 8 tables per booking");
        }
        Some(ids)
    }

    fn finish<T>(self, value: impl FnOnce() -> Option<T>) -> Result<T, ApiError> {
        if !self.0.is_empty() {
            return Err(ApiError::validation(self.0));
        }
        value().ok_or_else(|| ApiError::invalid("the booking is incomplete"))
    }
}

impl NewBookingBody {
    pub(crate) fn validate(self) -> Result<NewBooking, ApiError> {
        let mut check = Check::default();
        let date = check.date("date", &self.date);
        let time = check.time("time", &self.time);
        let people = check.range("people", self.people, 1, 999);
        let duration = check.range(
            "duration",
            self.duration.unwrap_or(DEFAULT_DURATION),
            15,
            480,
        );
        let status = check.one_of(
            "status",
            self.status.as_deref().unwrap_or("request"),
            &["request", "approved", "waitlist"],
        );
        let source = check.one_of("source", self.source.as_deref().unwrap_or("other"), SOURCES);
        let language_code = check.one_of(
            "languageCode",
            self.language_code.as_deref().unwrap_or("en"),
            LANGUAGES,
        );
        let name = check.name(self.guest.name);
        let email = check.email(self.guest.email);
        let phone = check.phone(self.guest.phone);
        let comment = check.max_len("comment", self.comment, 1000);
        let note = check.max_len("note", self.note, 1000);
        let referrer = check.max_len("referrer", self.referrer, 2000);
        let metadata = check.metadata(self.metadata);
        let tables = check.tables(self.tables);
        check.finish(|| {
            Some(NewBooking {
                date: date?,
                time: time?,
                people: people?,
                duration: duration?,
                guest: Guest {
                    name: name?,
                    email,
                    phone,
                    notification_sms: self.guest.notification_sms.unwrap_or(false),
                    notification_email: self.guest.notification_email.unwrap_or(false),
                },
                tables,
                status: status?,
                source: source?,
                comment,
                note,
                language_code: language_code?,
                referrer,
                metadata,
            })
        })
    }
}

impl BookingPatchBody {
    pub(crate) fn validate(self) -> Result<BookingPatch, ApiError> {
        let mut check = Check::default();
        let mut patch = BookingPatch {
            status: self
                .status
                .and_then(|s| check.one_of("status", &s, STATUSES)),
            date: self.date.and_then(|d| check.date("date", &d)),
            time: self.time.and_then(|t| check.time("time", &t)),
            people: self.people.and_then(|p| check.range("people", p, 1, 999)),
            duration: self
                .duration
                .and_then(|d| check.range("duration", d, 15, 480)),
            tables: check.tables(self.tables),
            guest: None,
            source: self
                .source
                .and_then(|s| check.one_of("source", &s, SOURCES)),
            comment: check.max_len("comment", self.comment, 1000),
            language_code: self
                .language_code
                .and_then(|l| check.one_of("languageCode", &l, LANGUAGES)),
            referrer: check.max_len("referrer", self.referrer, 2000),
            metadata: check.metadata(self.metadata),
        };
        if let Some(guest) = self.guest {
            patch.guest = Some(GuestInput {
                name: match guest.name {
                    Some(name) => check.name(Some(name)),
                    None => None,
                },
                email: check.email(guest.email),
                phone: check.phone(guest.phone),
                notification_sms: guest.notification_sms,
                notification_email: guest.notification_email,
            });
        }
        check.finish(|| Some(patch))
    }
}

impl TextBody {
    pub(crate) fn validate(self) -> Result<String, ApiError> {
        let text = self.text.trim().to_owned();
        if text.is_empty() {
            return Err(ApiError::validation(vec![FieldError::new(
                "text",
                "is required",
            )]));
        }
        if text.chars().count() > 1000 {
            return Err(ApiError::validation(vec![FieldError::new(
                "text",
                "must be at most 1000 characters",
            )]));
        }
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contact_details_are_checked() {
        assert!(valid_email("neo@resos.com"));
        assert!(!valid_email("neo@resos"));
        assert!(!valid_email("neo resos.com"));
        assert!(valid_e164("+13115552368"));
        assert!(!valid_e164("13115552368"));
        assert!(!valid_e164("+0123456"));
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let body: NewBookingBody = serde_json::from_value(serde_json::json!({
            "date": "21/11/2026", "time": "25:00", "people": 0,
            "guest": { "name": "X", "email": "nope" }
        }))
        .unwrap();
        let Err(ApiError::Validation { fields, .. }) = body.validate() else {
            panic!("expected a validation error");
        };
        let names: Vec<&str> = fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(
            names,
            ["date", "time", "people", "guest.name", "guest.email"]
        );
    }
}
