//! Creating and changing bookings. Each change is one write transaction; the
//! `table_slots` primary key is the last word on double booking, so even writers
//! that raced past the availability check cannot both hold a table.

use chrono::{NaiveDate, Utc};
use serde_json::json;
use sqlx::{Any, AnyConnection, Transaction};

use super::input::{BookingPatch, NewBooking};
use super::schedule::{DayPlan, epoch_minute, minute_of_day, slot_range};
use crate::audit::{self, BookingAction};
use crate::author::Author;
use crate::error::{ApiError, FieldError};
use crate::model::{allowed_transitions, holds_table};
use maitred_core::db::{Db, canonical, canonical_now, is_unique_violation};

/// How often a write that lost a race for a table is tried again with fresh data.
const ATTEMPTS: usize = 3;

enum Failure {
    Api(ApiError),
    /// Another writer took the chosen table first; retry with what is free now.
    LostRace,
}

impl From<sqlx::Error> for Failure {
    fn from(error: sqlx::Error) -> Self {
        Self::Api(error.into())
    }
}

impl From<ApiError> for Failure {
    fn from(error: ApiError) -> Self {
        Self::Api(error)
    }
}

/// Returns the new booking's id.
pub(super) async fn create(
    db: &Db,
    booking: &NewBooking,
    author: &Author,
) -> Result<String, ApiError> {
    for attempt in 1..=ATTEMPTS {
        let mut tx = db.begin_write().await?;
        match try_create(&mut tx, booking, author).await {
            Ok(id) => {
                tx.commit().await?;
                return Ok(id);
            }
            Err(Failure::LostRace) if attempt < ATTEMPTS => continue,
            Err(Failure::LostRace) => {
                return Err(taken(db, booking).await);
            }
            Err(Failure::Api(error)) => return Err(error),
        }
    }
    Err(ApiError::Internal(anyhow::anyhow!(
        "booking retries exhausted"
    )))
}

async fn try_create(
    tx: &mut Transaction<'static, Any>,
    booking: &NewBooking,
    author: &Author,
) -> Result<String, Failure> {
    let now = Utc::now();
    let start_minute = epoch_minute(booking.date, booking.time);
    if start_minute < now.timestamp().div_euclid(60) {
        return Err(ApiError::validation(vec![FieldError::new(
            "date",
            "the booking time has already passed",
        )])
        .into());
    }
    let plan = DayPlan::load(tx, booking.date, None).await?;
    let start = minute_of_day(booking.time);
    let (opening_hour_id, tables) = if holds_table(&booking.status) {
        let period = place(&plan, start, booking.duration, booking.people)?;
        let tables = choose_tables(
            &plan,
            booking.tables.as_deref(),
            start,
            booking.duration,
            booking.people,
        )?;
        (Some(period), tables)
    } else {
        (
            plan.period_for(start, booking.duration)
                .map(|p| p.id.clone()),
            Vec::new(),
        )
    };

    let customer_id = find_or_create_customer(tx, &booking.guest).await?;
    let id = maitred_core::random::object_id();
    let now_text = canonical(now);
    sqlx::query(
        "INSERT INTO bookings (id, date, time, people, duration, status, customer_id, guest_name, guest_email, guest_phone, \
         notification_sms, notification_email, source, opening_hour_id, comment, language_code, referrer, metadata, created_at, activity_at, \
         created_by, created_via) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $19, $20, $21)",
    )
    .bind(&id)
    .bind(booking.date.format("%Y-%m-%d").to_string())
    .bind(booking.time.format("%H:%M").to_string())
    .bind(booking.people)
    .bind(booking.duration)
    .bind(&booking.status)
    .bind(&customer_id)
    .bind(&booking.guest.name)
    .bind(&booking.guest.email)
    .bind(&booking.guest.phone)
    .bind(i64::from(booking.guest.notification_sms))
    .bind(i64::from(booking.guest.notification_email))
    .bind(&booking.source)
    .bind(&opening_hour_id)
    .bind(&booking.comment)
    .bind(&booking.language_code)
    .bind(&booking.referrer)
    .bind(&booking.metadata)
    .bind(&now_text)
    .bind(&author.person)
    .bind(author.via())
    .execute(&mut **tx)
    .await?;
    audit::record(tx, author, BookingAction::Create, &id).await?;
    hold_tables(
        tx,
        &id,
        &tables,
        start_minute,
        booking.duration,
        booking.tables.is_some(),
    )
    .await?;
    if let Some(note) = &booking.note {
        add_note(tx, &id, "note", note, Some(&author.person)).await?;
    }
    let visit = canonical(chrono::NaiveDateTime::new(booking.date, booking.time).and_utc());
    sqlx::query(
        "UPDATE customers SET booking_count = booking_count + 1, \
         last_booking_at = CASE WHEN last_booking_at IS NULL OR last_booking_at < $2 THEN $2 ELSE last_booking_at END \
         WHERE id = $1",
    )
    .bind(&customer_id)
    .bind(&visit)
    .execute(&mut **tx)
    .await?;
    Ok(id)
}

/// The open period the booking fits in, with room for the party.
fn place(plan: &DayPlan, start: i64, duration: i64, people: i64) -> Result<String, Failure> {
    let Some(period) = plan.period_for(start, duration) else {
        let times = plan.nearest_times(start, people, duration, None, 5);
        return Err(ApiError::Unprocessable {
            message: format!(
                "the restaurant is not open for a {duration}-minute booking at {} on {}{}",
                super::schedule::format_minute_of_day(start),
                plan.date,
                suggestion(&times)
            ),
            details: Some(json!({ "nearestTimes": times })),
        }
        .into());
    };
    if !plan.has_room(period, people) {
        let times = plan.nearest_times(start, people, duration, None, 5);
        return Err(ApiError::conflict(
            format!(
                "the {} period on {} is fully booked for {people} more people{}",
                super::schedule::format_minute_of_day(period.opens),
                plan.date,
                suggestion(&times)
            ),
            Some(json!({ "nearestTimes": times })),
        )
        .into());
    }
    Ok(period.id.clone())
}

/// The client's tables (checked) or the smallest free table that fits.
fn choose_tables(
    plan: &DayPlan,
    wanted: Option<&[String]>,
    start: i64,
    duration: i64,
    people: i64,
) -> Result<Vec<String>, Failure> {
    let Some(wanted) = wanted else {
        return match plan.best_table(start, duration, people) {
            Some(table) => Ok(vec![table.id.clone()]),
            None => Err(Failure::Api(no_table(plan, start, duration, people, None))),
        };
    };
    let mut seats = 0;
    for id in wanted {
        let Some(table) = plan.tables.iter().find(|t| &t.id == id) else {
            return Err(ApiError::validation(vec![FieldError::new(
                "tables",
                format!("there is no table {id}"),
            )])
            .into());
        };
        seats += table.seats_max;
        if !plan.table_free(id, start, duration) {
            return Err(Failure::Api(no_table(
                plan,
                start,
                duration,
                people,
                Some((&table.name, wanted)),
            )));
        }
    }
    if seats < people {
        return Err(ApiError::validation(vec![FieldError::new(
            "tables",
            format!("the chosen tables seat {seats}, fewer than {people} people"),
        )])
        .into());
    }
    Ok(wanted.to_vec())
}

/// `chosen`: the taken table's name and the tables the client asked for; the
/// suggested times are then times at which those tables are free.
fn no_table(
    plan: &DayPlan,
    start: i64,
    duration: i64,
    people: i64,
    chosen: Option<(&str, &[String])>,
) -> ApiError {
    let times = plan.nearest_times(start, people, duration, chosen.map(|c| c.1), 5);
    let what = match chosen {
        Some((name, _)) => format!("table {name} is taken"),
        None => format!("no table for {people} is free"),
    };
    ApiError::conflict(
        format!(
            "{what} at {} on {}{}",
            super::schedule::format_minute_of_day(start),
            plan.date,
            suggestion(&times)
        ),
        Some(json!({ "nearestTimes": times })),
    )
}

/// The conflict answer after losing every race: computed afresh, outside the transaction.
async fn taken(db: &Db, booking: &NewBooking) -> ApiError {
    let plan = match db.pool().acquire().await {
        Ok(mut conn) => DayPlan::load(&mut conn, booking.date, None).await,
        Err(error) => Err(error),
    };
    match plan {
        Ok(plan) => no_table(
            &plan,
            minute_of_day(booking.time),
            booking.duration,
            booking.people,
            None,
        ),
        Err(error) => error.into(),
    }
}

fn suggestion(times: &[String]) -> String {
    if times.is_empty() {
        "; no other time that day is free for this party".to_owned()
    } else {
        format!("; nearest free times: {}", times.join(", "))
    }
}

/// Claims the slots; a duplicate key means someone else holds an overlapping booking.
async fn hold_tables(
    tx: &mut Transaction<'static, Any>,
    booking_id: &str,
    tables: &[String],
    start_minute: i64,
    duration: i64,
    chosen_by_client: bool,
) -> Result<(), Failure> {
    let (first, end) = slot_range(start_minute, duration);
    for table in tables {
        sqlx::query("INSERT INTO booking_tables (booking_id, table_id) VALUES ($1, $2)")
            .bind(booking_id)
            .bind(table)
            .execute(&mut **tx)
            .await?;
        for slot in first..end {
            let inserted = sqlx::query(
                "INSERT INTO table_slots (table_id, slot, booking_id) VALUES ($1, $2, $3)",
            )
            .bind(table)
            .bind(slot)
            .bind(booking_id)
            .execute(&mut **tx)
            .await;
            match inserted {
                Ok(_) => {}
                Err(error) if is_unique_violation(&error) => {
                    tracing::info!(table, "lost a race for a table");
                    return Err(if chosen_by_client {
                        Failure::Api(ApiError::conflict(
                            "the table was just taken by another booking; choose another time or table",
                            None,
                        ))
                    } else {
                        Failure::LostRace
                    });
                }
                Err(error) => return Err(error.into()),
            }
        }
    }
    Ok(())
}

async fn release_tables(conn: &mut AnyConnection, booking_id: &str) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM table_slots WHERE booking_id = $1")
        .bind(booking_id)
        .execute(&mut *conn)
        .await?;
    sqlx::query("DELETE FROM booking_tables WHERE booking_id = $1")
        .bind(booking_id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

async fn find_or_create_customer(
    conn: &mut AnyConnection,
    guest: &super::input::Guest,
) -> Result<String, sqlx::Error> {
    let existing: Option<(String,)> = match (&guest.email, &guest.phone) {
        (Some(email), _) => {
            sqlx::query_as("SELECT id FROM customers WHERE LOWER(email) = LOWER($1) ORDER BY created_at, id LIMIT 1")
                .bind(email)
                .fetch_optional(&mut *conn)
                .await?
        }
        (None, Some(phone)) => {
            sqlx::query_as("SELECT id FROM customers WHERE phone = $1 ORDER BY created_at, id LIMIT 1")
                .bind(phone)
                .fetch_optional(&mut *conn)
                .await?
        }
        (None, None) => None,
    };
    if let Some((id,)) = existing {
        return Ok(id);
    }
    let id = maitred_core::random::object_id();
    sqlx::query(
        "INSERT INTO customers (id, name, email, phone, created_at, booking_count, total_spent) VALUES ($1, $2, $3, $4, $5, 0, 0)",
    )
    .bind(&id)
    .bind(&guest.name)
    .bind(&guest.email)
    .bind(&guest.phone)
    .bind(canonical_now())
    .execute(&mut *conn)
    .await?;
    Ok(id)
}

pub(super) async fn add_note(
    conn: &mut AnyConnection,
    booking_id: &str,
    kind: &str,
    text: &str,
    author: Option<&str>,
) -> Result<String, sqlx::Error> {
    let id = maitred_core::random::object_id();
    let now = canonical_now();
    sqlx::query(
        "INSERT INTO booking_notes (id, booking_id, kind, text, author, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&id)
    .bind(booking_id)
    .bind(kind)
    .bind(text)
    .bind(author)
    .bind(&now)
    .execute(&mut *conn)
    .await?;
    sqlx::query("UPDATE bookings SET activity_at = $1 WHERE id = $2")
        .bind(&now)
        .bind(booking_id)
        .execute(&mut *conn)
        .await?;
    Ok(id)
}

/// Adds a comment or note to a booking that exists; returns the new entry's id.
pub(super) async fn annotate(
    db: &Db,
    booking_id: &str,
    kind: &str,
    text: &str,
    author: &Author,
) -> Result<String, ApiError> {
    let mut tx = db.begin_write().await?;
    let exists: Option<(String,)> = sqlx::query_as("SELECT id FROM bookings WHERE id = $1")
        .bind(booking_id)
        .fetch_optional(&mut *tx)
        .await?;
    if exists.is_none() {
        return Err(ApiError::not_found("booking", booking_id));
    }
    let id = add_note(&mut tx, booking_id, kind, text, Some(&author.person)).await?;
    let action = if kind == "comment" {
        BookingAction::Comment
    } else {
        BookingAction::Note
    };
    audit::record(&mut tx, author, action, booking_id).await?;
    tx.commit().await?;
    Ok(id)
}

#[derive(sqlx::FromRow)]
struct Current {
    date: String,
    time: String,
    people: i64,
    duration: i64,
    status: String,
}

pub(super) async fn update(
    db: &Db,
    id: &str,
    patch: &BookingPatch,
    author: &Author,
) -> Result<(), ApiError> {
    for attempt in 1..=ATTEMPTS {
        let mut tx = db.begin_write().await?;
        match try_update(&mut tx, id, patch, author).await {
            Ok(()) => {
                tx.commit().await?;
                return Ok(());
            }
            Err(Failure::LostRace) if attempt < ATTEMPTS => continue,
            Err(Failure::LostRace) => {
                return Err(ApiError::conflict(
                    "the tables kept being taken by other bookings; try again",
                    None,
                ));
            }
            Err(Failure::Api(error)) => return Err(error),
        }
    }
    Err(ApiError::Internal(anyhow::anyhow!(
        "booking retries exhausted"
    )))
}

async fn try_update(
    tx: &mut Transaction<'static, Any>,
    id: &str,
    patch: &BookingPatch,
    author: &Author,
) -> Result<(), Failure> {
    let current = sqlx::query_as::<_, Current>(
        "SELECT date, time, people, duration, status FROM bookings WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or_else(|| ApiError::not_found("booking", id))?;

    let status = match &patch.status {
        Some(next) if next != &current.status => {
            let allowed = allowed_transitions(&current.status);
            if !allowed.contains(&next.as_str()) {
                return Err(ApiError::conflict(
                    format!(
                        "a booking in status {} cannot become {next}; allowed: {}",
                        current.status,
                        if allowed.is_empty() {
                            "none (final status)".to_owned()
                        } else {
                            allowed.join(", ")
                        }
                    ),
                    Some(json!({ "status": current.status, "allowedStatuses": allowed })),
                )
                .into());
            }
            next.clone()
        }
        _ => current.status.clone(),
    };
    let stored_date = NaiveDate::parse_from_str(&current.date, "%Y-%m-%d")
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("stored date {}: {e}", current.date)))?;
    let stored_time = super::schedule::parse_time(&current.time)
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("stored time {}", current.time)))?;
    let date = patch.date.unwrap_or(stored_date);
    let time = patch.time.unwrap_or(stored_time);
    let people = patch.people.unwrap_or(current.people);
    let duration = patch.duration.unwrap_or(current.duration);
    let start_minute = epoch_minute(date, time);
    if (patch.date.is_some() || patch.time.is_some())
        && start_minute < Utc::now().timestamp().div_euclid(60)
    {
        return Err(ApiError::validation(vec![FieldError::new(
            "date",
            "a booking cannot be moved into the past",
        )])
        .into());
    }

    let mut opening_hour_id: Option<Option<String>> = None;
    if holds_table(&status) {
        if patch.reschedules() || !holds_table(&current.status) {
            let kept: Vec<(String,)> = sqlx::query_as(
                "SELECT table_id FROM booking_tables WHERE booking_id = $1 ORDER BY table_id",
            )
            .bind(id)
            .fetch_all(&mut **tx)
            .await?;
            release_tables(tx, id).await?;
            let plan = DayPlan::load(tx, date, Some(id)).await?;
            let start = minute_of_day(time);
            opening_hour_id = Some(Some(place(&plan, start, duration, people)?));
            let kept: Vec<String> = kept.into_iter().map(|(t,)| t).collect();
            let keep_fits = patch.tables.is_none()
                && !kept.is_empty()
                && kept.iter().all(|t| plan.table_free(t, start, duration))
                && plan
                    .tables
                    .iter()
                    .filter(|t| kept.contains(&t.id))
                    .map(|t| t.seats_max)
                    .sum::<i64>()
                    >= people;
            let wanted = if keep_fits {
                Some(kept.as_slice())
            } else {
                patch.tables.as_deref()
            };
            let tables = choose_tables(&plan, wanted, start, duration, people)?;
            hold_tables(
                tx,
                id,
                &tables,
                start_minute,
                duration,
                patch.tables.is_some(),
            )
            .await?;
        }
    } else if holds_table(&current.status) {
        release_tables(tx, id).await?;
    }

    let guest = patch.guest.clone().unwrap_or(super::input::GuestInput {
        name: None,
        email: None,
        phone: None,
        notification_sms: None,
        notification_email: None,
    });
    sqlx::query(
        "UPDATE bookings SET status = $1, date = $2, time = $3, people = $4, duration = $5, \
         opening_hour_id = CASE WHEN $6 = 1 THEN $7 ELSE opening_hour_id END, \
         guest_name = COALESCE($8, guest_name), guest_email = COALESCE($9, guest_email), guest_phone = COALESCE($10, guest_phone), \
         notification_sms = COALESCE($11, notification_sms), notification_email = COALESCE($12, notification_email), \
         source = COALESCE($13, source), comment = COALESCE($14, comment), language_code = COALESCE($15, language_code), \
         referrer = COALESCE($16, referrer), metadata = COALESCE($17, metadata), activity_at = $18, \
         updated_by = $20, updated_via = $21 \
         WHERE id = $19",
    )
    .bind(&status)
    .bind(date.format("%Y-%m-%d").to_string())
    .bind(time.format("%H:%M").to_string())
    .bind(people)
    .bind(duration)
    .bind(i64::from(opening_hour_id.is_some()))
    .bind(opening_hour_id.flatten())
    .bind(guest.name)
    .bind(guest.email)
    .bind(guest.phone)
    .bind(guest.notification_sms.map(i64::from))
    .bind(guest.notification_email.map(i64::from))
    .bind(&patch.source)
    .bind(&patch.comment)
    .bind(&patch.language_code)
    .bind(&patch.referrer)
    .bind(&patch.metadata)
    .bind(canonical_now())
    .bind(id)
    .bind(&author.person)
    .bind(author.via())
    .execute(&mut **tx)
    .await?;
    audit::record(tx, author, BookingAction::Update, id).await?;
    Ok(())
}
