//! Time and tables: which opening period a booking falls in, which tables are free,
//! and which start times are still bookable. Times are the restaurant's wall-clock
//! times, taken as UTC; table occupation is kept in 15-minute slots.

use std::collections::{HashMap, HashSet};

use chrono::{NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use sqlx::{AnyConnection, FromRow};

use crate::model::HOLDING;

pub(crate) const SLOT_MINUTES: i64 = 15;
pub(crate) const DEFAULT_DURATION: i64 = 90;

/// Minutes since the Unix epoch of a wall-clock date and time.
pub(crate) fn epoch_minute(date: NaiveDate, time: NaiveTime) -> i64 {
    NaiveDateTime::new(date, time)
        .and_utc()
        .timestamp()
        .div_euclid(60)
}

/// The slots `[first, end)` a booking touches: a booking from 19:10 for 90 minutes
/// holds 19:00 to 20:45, so any two overlapping bookings share at least one slot.
pub(crate) fn slot_range(start_minute: i64, duration: i64) -> (i64, i64) {
    let first = start_minute.div_euclid(SLOT_MINUTES);
    let end = (start_minute + duration + SLOT_MINUTES - 1).div_euclid(SLOT_MINUTES);
    (first, end)
}

pub(crate) fn minute_of_day(time: NaiveTime) -> i64 {
    i64::from(time.hour()) * 60 + i64::from(time.minute())
}

pub(crate) fn format_minute_of_day(minute: i64) -> String {
    let minute = minute.rem_euclid(24 * 60);
    format!("{:02}:{:02}", minute / 60, minute % 60)
}

/// The minute of day before which start times are past, when `date` is today.
pub(crate) fn not_before(date: NaiveDate) -> Option<i64> {
    let now = chrono::Utc::now().naive_utc();
    (now.date() == date).then(|| minute_of_day(now.time()))
}

pub(crate) fn parse_time(text: &str) -> Option<NaiveTime> {
    NaiveTime::parse_from_str(text, "%H:%M").ok()
}

#[derive(Debug, Clone, FromRow)]
struct PeriodRow {
    id: String,
    opens: String,
    closes: String,
    max_people: i64,
}

#[derive(Debug, Clone)]
pub(crate) struct Period {
    pub id: String,
    pub opens: i64,
    /// Minute of day; past 24h for a period that closes after midnight.
    pub closes: i64,
    pub max_people: i64,
    pub booked_people: i64,
}

#[derive(Debug, Clone, FromRow)]
pub(crate) struct TableFit {
    pub id: String,
    pub name: String,
    pub seats_min: i64,
    pub seats_max: i64,
}

/// Everything needed to decide bookability on one date, read in one go.
pub(crate) struct DayPlan {
    pub date: NaiveDate,
    pub periods: Vec<Period>,
    pub tables: Vec<TableFit>,
    occupied: HashSet<(String, i64)>,
}

impl DayPlan {
    /// Reads the date's open periods, its holding bookings (except `exclude`, a
    /// booking being rescheduled) and the occupied slots of every table.
    pub(crate) async fn load(
        conn: &mut AnyConnection,
        date: NaiveDate,
        exclude: Option<&str>,
    ) -> Result<Self, sqlx::Error> {
        let date_text = date.format("%Y-%m-%d").to_string();
        let rows = sqlx::query_as::<_, PeriodRow>(
            "SELECT id, opens, closes, max_people FROM opening_hours WHERE date = $1 AND is_open = 1 ORDER BY opens, id",
        )
        .bind(&date_text)
        .fetch_all(&mut *conn)
        .await?;
        let holding = HOLDING
            .iter()
            .map(|s| format!("'{s}'"))
            .collect::<Vec<_>>()
            .join(", ");
        let booked: Vec<(Option<String>, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT opening_hour_id, people FROM bookings WHERE date = $1 AND status IN ({holding}) AND id <> $2"
        )))
        .bind(&date_text)
        .bind(exclude.unwrap_or_default())
        .fetch_all(&mut *conn)
        .await?;
        let mut booked_by_period: HashMap<String, i64> = HashMap::new();
        for (period, people) in booked {
            if let Some(period) = period {
                *booked_by_period.entry(period).or_default() += people;
            }
        }
        let periods = rows
            .into_iter()
            .filter_map(|row| {
                let opens = minute_of_day(parse_time(&row.opens)?);
                let mut closes = minute_of_day(parse_time(&row.closes)?);
                if closes <= opens {
                    closes += 24 * 60;
                }
                Some(Period {
                    booked_people: booked_by_period.get(&row.id).copied().unwrap_or(0),
                    id: row.id,
                    opens,
                    closes,
                    max_people: row.max_people,
                })
            })
            .collect();
        let tables = sqlx::query_as::<_, TableFit>(
            "SELECT t.id, t.name, t.seats_min, t.seats_max \
             FROM dining_tables t JOIN areas a ON a.id = t.area_id \
             ORDER BY t.seats_max ASC, a.booking_priority DESC, t.name ASC, t.id ASC",
        )
        .fetch_all(&mut *conn)
        .await?;
        let day_start = epoch_minute(date, NaiveTime::MIN).div_euclid(SLOT_MINUTES);
        let day_end = day_start + 2 * 24 * 60 / SLOT_MINUTES;
        let occupied: Vec<(String, i64)> = sqlx::query_as(
            "SELECT s.table_id, s.slot FROM table_slots s WHERE s.slot >= $1 AND s.slot < $2 AND s.booking_id <> $3",
        )
        .bind(day_start)
        .bind(day_end)
        .bind(exclude.unwrap_or_default())
        .fetch_all(&mut *conn)
        .await?;
        Ok(Self {
            date,
            periods,
            tables,
            occupied: occupied.into_iter().collect(),
        })
    }

    fn start_minute(&self, minute_of_day: i64) -> i64 {
        epoch_minute(self.date, NaiveTime::MIN) + minute_of_day
    }

    /// The open period a booking from `start` (minute of day) for `duration` fits in.
    pub(crate) fn period_for(&self, start: i64, duration: i64) -> Option<&Period> {
        self.periods
            .iter()
            .find(|p| p.opens <= start && start + duration <= p.closes)
    }

    pub(crate) fn has_room(&self, period: &Period, people: i64) -> bool {
        period.booked_people + people <= period.max_people
    }

    pub(crate) fn table_free(&self, table_id: &str, start: i64, duration: i64) -> bool {
        let (first, end) = slot_range(self.start_minute(start), duration);
        (first..end).all(|slot| !self.occupied.contains(&(table_id.to_owned(), slot)))
    }

    /// The smallest free table that seats the party (tables are ordered smallest first).
    pub(crate) fn best_table(&self, start: i64, duration: i64, people: i64) -> Option<&TableFit> {
        self.tables.iter().find(|t| {
            t.seats_min <= people
                && people <= t.seats_max
                && self.table_free(&t.id, start, duration)
        })
    }

    /// Whether the party can sit at `tables` (all free), or at some fitting table.
    fn bookable(&self, start: i64, duration: i64, people: i64, tables: Option<&[String]>) -> bool {
        match tables {
            Some(tables) => tables.iter().all(|t| self.table_free(t, start, duration)),
            None => self.best_table(start, duration, people).is_some(),
        }
    }

    /// Start times (every 15 minutes) at which a party can still be seated, at
    /// `tables` if given. `not_before` is a minute of day; earlier times today are past.
    pub(crate) fn free_times(
        &self,
        people: i64,
        duration: i64,
        not_before: Option<i64>,
        tables: Option<&[String]>,
    ) -> Vec<i64> {
        let mut times = Vec::new();
        for period in &self.periods {
            if !self.has_room(period, people) {
                continue;
            }
            let mut start = period.opens;
            while start + duration <= period.closes {
                if not_before.is_none_or(|t| start > t)
                    && self.bookable(start, duration, people, tables)
                {
                    times.push(start);
                }
                start += SLOT_MINUTES;
            }
        }
        times.sort_unstable();
        times.dedup();
        times
    }

    /// Up to `n` free times nearest to `wanted`, in clock order.
    pub(crate) fn nearest_times(
        &self,
        wanted: i64,
        people: i64,
        duration: i64,
        tables: Option<&[String]>,
        n: usize,
    ) -> Vec<String> {
        let mut times = self.free_times(people, duration, not_before(self.date), tables);
        times.sort_by_key(|t| ((t - wanted).abs(), *t));
        times.truncate(n);
        times.sort_unstable();
        times.into_iter().map(format_minute_of_day).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_bookings_share_a_slot() {
        let date = NaiveDate::from_ymd_opt(2026, 11, 21).unwrap();
        let at = |h, m| epoch_minute(date, NaiveTime::from_hms_opt(h, m, 0).unwrap());
        let (a0, a1) = slot_range(at(19, 10), 90);
        let (b0, b1) = slot_range(at(20, 35), 30);
        assert!(a0 < b1 && b0 < a1, "19:10+90 and 20:35+30 overlap");
        let (c0, _) = slot_range(at(20, 45), 30);
        assert_eq!(a1, c0, "19:10+90 ends at 20:40, so 20:45 is free");
        assert_eq!(format_minute_of_day(19 * 60 + 5), "19:05");
        assert_eq!(format_minute_of_day(25 * 60), "01:00");
    }
}
