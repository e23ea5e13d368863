//! Reading bookings with what hangs off them: tables (with areas), comments, notes.

use std::collections::HashMap;

use sqlx::{AnyConnection, FromRow};

use crate::model::{Booking, Guest, RestaurantRef, Table};
use crate::query::BindValue;
use crate::sql::Sql;
use crate::tables::{self, TableRow};

pub(super) const COLUMNS: &str = "b.id, b.date, b.time, b.people, b.duration, b.status, b.customer_id, b.guest_name, b.guest_email, b.guest_phone, \
    b.notification_sms, b.notification_email, b.source, b.opening_hour_id, b.comment, b.language_code, b.referrer, b.metadata, b.created_at, b.activity_at";
pub(super) const FROM: &str = "FROM bookings b";

#[derive(FromRow)]
pub(super) struct BookingRow {
    pub id: String,
    pub date: String,
    pub time: String,
    pub people: i64,
    pub duration: i64,
    pub status: String,
    pub customer_id: Option<String>,
    pub guest_name: String,
    pub guest_email: Option<String>,
    pub guest_phone: Option<String>,
    pub notification_sms: i64,
    pub notification_email: i64,
    pub source: String,
    pub opening_hour_id: Option<String>,
    pub comment: Option<String>,
    pub language_code: String,
    pub referrer: Option<String>,
    pub metadata: Option<String>,
    pub created_at: String,
    pub activity_at: String,
}

#[derive(FromRow)]
struct TableOfBooking {
    booking_id: String,
    #[sqlx(flatten)]
    table: TableRow,
}

#[derive(FromRow)]
struct NoteRow {
    booking_id: String,
    kind: String,
    text: String,
    author: Option<String>,
}

pub(super) async fn by_id(
    conn: &mut AnyConnection,
    id: &str,
) -> Result<Option<Booking>, sqlx::Error> {
    let row = sqlx::query_as::<_, BookingRow>(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} {FROM} WHERE b.id = $1"
    )))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    match row {
        Some(row) => Ok(complete(conn, vec![row]).await?.pop()),
        None => Ok(None),
    }
}

/// Attaches tables, comments and notes to a page of bookings in two queries.
pub(super) async fn complete(
    conn: &mut AnyConnection,
    rows: Vec<BookingRow>,
) -> Result<Vec<Booking>, sqlx::Error> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let ids = || rows.iter().map(|r| BindValue::Text(r.id.clone()));
    let mut tables_sql = Sql::new(format!(
        "SELECT bt.booking_id, {} {} JOIN booking_tables bt ON bt.table_id = t.id WHERE bt.booking_id IN ",
        tables::COLUMNS,
        tables::FROM
    ));
    tables_sql.push_list(ids()).push(" ORDER BY t.name, t.id");
    let table_rows = tables_sql
        .query_as::<TableOfBooking>()
        .fetch_all(&mut *conn)
        .await?;
    let mut notes_sql =
        Sql::new("SELECT booking_id, kind, text, author FROM booking_notes WHERE booking_id IN ");
    notes_sql.push_list(ids()).push(" ORDER BY created_at, id");
    let note_rows = notes_sql
        .query_as::<NoteRow>()
        .fetch_all(&mut *conn)
        .await?;
    let restaurant: Option<(String, String)> =
        sqlx::query_as("SELECT id, name FROM restaurants ORDER BY id LIMIT 1")
            .fetch_optional(&mut *conn)
            .await?;

    let mut tables_of: HashMap<String, Vec<Table>> = HashMap::new();
    for row in table_rows {
        tables_of
            .entry(row.booking_id)
            .or_default()
            .push(row.table.into());
    }
    let mut notes_of: HashMap<String, Vec<NoteRow>> = HashMap::new();
    for note in note_rows {
        notes_of
            .entry(note.booking_id.clone())
            .or_default()
            .push(note);
    }
    Ok(rows
        .into_iter()
        .map(|row| {
            let notes = notes_of.remove(&row.id).unwrap_or_default();
            let comments = notes
                .iter()
                .filter(|n| n.kind == "comment")
                .map(|n| n.text.clone())
                .collect();
            let last_note = notes.iter().rev().find(|n| n.kind == "note");
            Booking {
                tables: tables_of.remove(&row.id).unwrap_or_default(),
                comments,
                note: last_note.map(|n| n.text.clone()),
                note_author: last_note.and_then(|n| n.author.clone()),
                restaurant: restaurant
                    .clone()
                    .map(|(id, name)| RestaurantRef { id, name }),
                guest: Guest {
                    id: row.customer_id,
                    name: row.guest_name,
                    email: row.guest_email,
                    phone: row.guest_phone,
                    notification_sms: row.notification_sms != 0,
                    notification_email: row.notification_email != 0,
                },
                id: row.id,
                date: row.date,
                time: row.time,
                people: row.people,
                duration: row.duration,
                status: row.status,
                metadata: crate::parse_metadata(row.metadata.as_deref()),
                source: row.source,
                opening_hour_id: row.opening_hour_id,
                created_at: row.created_at,
                activity_at: row.activity_at,
                comment: row.comment,
                referrer: row.referrer,
                language_code: row.language_code,
            }
        })
        .collect())
}
