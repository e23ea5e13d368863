//! `findAvailability`: the free start times of every day in a range, found day by
//! day with the backend's own availability, with a progress step per day.

use chrono::{Datelike, NaiveDate, NaiveTime, Utc};
use schemars::JsonSchema;
use serde::Serialize;

use super::args::FindAvailabilityArgs;
use super::backend::BackendClient;
use super::call::Refusal;
use super::progress::Progress;
use super::tools;

/// The longest range one call scans: a month, so a call stays short.
pub(super) const MAX_DAYS: i64 = 31;

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct FreeDays {
    pub from: String,
    pub to: String,
    pub people: u32,
    pub duration: u32,
    /// Every day of the range, in order, with the start times free on it (within the
    /// time window when one was given); `times` is empty when the day is full or closed.
    pub days: Vec<FreeDay>,
    /// How many days the range covers; every one is in `days`.
    pub total: usize,
    /// How many days of the range have at least one free time.
    pub days_with_free_times: usize,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct FreeDay {
    pub date: String,
    /// The day of the week, e.g. `Tue`.
    pub weekday: String,
    /// Start times (`HH:MM`) at which a table for the party is free.
    pub times: Vec<String>,
}

/// The request, checked: a wrong range is an error result that says how to fix it.
struct Range {
    from: NaiveDate,
    to: NaiveDate,
    earliest: Option<NaiveTime>,
    latest: Option<NaiveTime>,
}

fn day(field: &str, value: &str) -> Result<NaiveDate, Refusal> {
    NaiveDate::parse_from_str(value, "%Y-%m-%d").map_err(|_| {
        Refusal::Failed(format!(
            "{field} must be a date as YYYY-MM-DD, not {value:?}"
        ))
    })
}

fn clock(field: &str, value: Option<&str>) -> Result<Option<NaiveTime>, Refusal> {
    value
        .map(|v| {
            NaiveTime::parse_from_str(v, "%H:%M")
                .ok()
                .filter(|_| v.len() <= 5)
                .ok_or_else(|| {
                    Refusal::Failed(format!("{field} must be a time as HH:MM, not {v:?}"))
                })
        })
        .transpose()
}

fn range(args: &FindAvailabilityArgs, today: NaiveDate) -> Result<Range, Refusal> {
    let from = day("from", &args.from)?;
    let to = day("to", &args.to)?;
    if from > to {
        return Err(Refusal::Failed(format!(
            "from ({from}) is after to ({to}): give the earlier date as from"
        )));
    }
    let days = (to - from).num_days() + 1;
    if days > MAX_DAYS {
        return Err(Refusal::Failed(format!(
            "the range {from} to {to} is {days} days; at most {MAX_DAYS} days are scanned in one \
call: split it into shorter ranges"
        )));
    }
    if to < today {
        return Err(Refusal::Failed(format!(
            "the range {from} to {to} is in the past (today is {today}): no table can be booked then"
        )));
    }
    let earliest = clock("fromTime", args.from_time.as_deref())?;
    let latest = clock("toTime", args.to_time.as_deref())?;
    if let (Some(earliest), Some(latest)) = (earliest, latest)
        && earliest > latest
    {
        return Err(Refusal::Failed(format!(
            "fromTime ({}) is after toTime ({}): give the earlier time as fromTime",
            earliest.format("%H:%M"),
            latest.format("%H:%M")
        )));
    }
    Ok(Range {
        from,
        to,
        earliest,
        latest,
    })
}

fn within(time: &str, range: &Range) -> bool {
    let Ok(time) = NaiveTime::parse_from_str(time, "%H:%M") else {
        return false;
    };
    range.earliest.is_none_or(|e| time >= e) && range.latest.is_none_or(|l| time <= l)
}

/// "Checked Tue 24 Nov: 3 free times".
fn checked(date: NaiveDate, free: usize) -> String {
    let found = match free {
        0 => "no free times".to_owned(),
        1 => "1 free time".to_owned(),
        n => format!("{n} free times"),
    };
    format!("Checked {}: {found}", date.format("%a %-d %b"))
}

pub(super) async fn find(
    backend: BackendClient,
    args: FindAvailabilityArgs,
    progress: Progress,
) -> Result<FreeDays, Refusal> {
    let range = range(&args, Utc::now().date_naive())?;
    let duration = args.duration.unwrap_or(90);
    let total = (range.to - range.from).num_days() as u32 + 1;
    let mut days = Vec::new();
    for (done, date) in (1..).zip(range.from.iter_days().take(total as usize)) {
        let found = tools::available_times(
            backend.clone(),
            super::args::AvailableTimesArgs {
                date: date.to_string(),
                people: args.people,
                duration: Some(duration),
            },
        )
        .await?;
        let times: Vec<String> = found
            .times
            .into_iter()
            .filter(|t| within(t, &range))
            .collect();
        progress.step(done, total, checked(date, times.len())).await;
        days.push(FreeDay {
            date: date.to_string(),
            weekday: date.weekday().to_string(),
            times,
        });
    }
    Ok(FreeDays {
        from: range.from.to_string(),
        to: range.to.to_string(),
        people: args.people,
        duration,
        days_with_free_times: days.iter().filter(|d| !d.times.is_empty()).count(),
        total: days.len(),
        days,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(from: &str, to: &str) -> FindAvailabilityArgs {
        FindAvailabilityArgs {
            from: from.to_owned(),
            to: to.to_owned(),
            people: 2,
            from_time: None,
            to_time: None,
            duration: None,
        }
    }

    fn refusal(result: Result<Range, Refusal>) -> String {
        match result {
            Err(Refusal::Failed(message)) => message,
            Err(_) => "another refusal".to_owned(),
            Ok(_) => "accepted".to_owned(),
        }
    }

    #[test]
    fn a_wrong_range_says_how_to_fix_it() {
        let today = NaiveDate::from_ymd_opt(2026, 11, 24).unwrap();
        assert!(refusal(range(&args("2026-12-02", "2026-12-01"), today)).contains("is after to"));
        assert!(refusal(range(&args("2026-12-01", "2027-01-01"), today)).contains("32 days"));
        assert!(refusal(range(&args("2026-12-1x", "2026-12-03"), today)).contains("YYYY-MM-DD"));
        assert!(refusal(range(&args("2026-11-01", "2026-11-02"), today)).contains("in the past"));
        let mut window = args("2026-12-01", "2026-12-31");
        window.from_time = Some("21:00".to_owned());
        window.to_time = Some("18:00".to_owned());
        assert!(refusal(range(&window, today)).contains("fromTime (21:00) is after toTime"));
        window.to_time = Some("9pm".to_owned());
        assert!(refusal(range(&window, today)).contains("HH:MM"));
        window.to_time = Some("22:00".to_owned());
        assert_eq!(refusal(range(&window, today)), "accepted");
    }

    #[test]
    fn the_progress_message_names_the_day_and_the_count() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 24).unwrap();
        assert_eq!(checked(day, 3), "Checked Tue 24 Nov: 3 free times");
        assert_eq!(checked(day, 1), "Checked Tue 24 Nov: 1 free time");
        assert_eq!(checked(day, 0), "Checked Tue 24 Nov: no free times");
    }
}
