//! `GET /tables`, each table with its area.

use sqlx::FromRow;

use super::list::{Listing, read_endpoints};
use super::model::{Area, Table};
use super::resources;

pub(super) const COLUMNS: &str = "t.id, t.name, t.seats_min, t.seats_max, t.internal_note, \
    a.id AS area_id, a.name AS area_name, a.internal_note AS area_internal_note, a.booking_priority AS area_booking_priority";
pub(super) const FROM: &str = "FROM dining_tables t JOIN areas a ON a.id = t.area_id";

const LISTING: Listing = Listing {
    name: "table",
    resource: &resources::TABLES,
    columns: COLUMNS,
    from: FROM,
    id_column: "t.id",
    default_order: "a.booking_priority DESC, t.name ASC",
    tiebreaker: "t.id ASC",
};

#[derive(FromRow, Clone)]
pub struct TableRow {
    pub id: String,
    pub name: String,
    pub seats_min: i64,
    pub seats_max: i64,
    pub internal_note: Option<String>,
    pub area_id: String,
    pub area_name: String,
    pub area_internal_note: Option<String>,
    pub area_booking_priority: i64,
}

impl From<TableRow> for Table {
    fn from(row: TableRow) -> Self {
        Self {
            id: row.id,
            name: row.name,
            seats_min: row.seats_min,
            seats_max: row.seats_max,
            area: Area {
                id: row.area_id,
                name: row.area_name,
                internal_note: row.area_internal_note,
                booking_priority: row.area_booking_priority,
            },
            internal_note: row.internal_note,
        }
    }
}

read_endpoints! {
    tag: "tables",
    model: Table,
    row: TableRow,
    list: ("/tables", "List tables", "Tables with their areas"),
}
