//! `GET /opening-hours` and `GET /opening-hours/{id}`.

use sqlx::FromRow;

use super::list::{Listing, read_endpoints};
use super::model::OpeningHours;
use super::resources;

const COLUMNS: &str =
    "o.id, o.name, o.date, o.opens, o.closes, o.is_open, o.max_people, o.metadata";
const FROM: &str = "FROM opening_hours o";

const LISTING: Listing = Listing {
    name: "opening hours",
    resource: &resources::OPENING_HOURS,
    columns: COLUMNS,
    from: FROM,
    id_column: "o.id",
    default_order: "o.date ASC, o.opens ASC",
    tiebreaker: "o.id ASC",
};

#[derive(FromRow)]
struct OpeningHoursRow {
    id: String,
    name: String,
    date: String,
    opens: String,
    closes: String,
    is_open: i64,
    max_people: i64,
    metadata: Option<String>,
}

impl From<OpeningHoursRow> for OpeningHours {
    fn from(row: OpeningHoursRow) -> Self {
        Self {
            id: row.id,
            name: row.name,
            date: row.date,
            opens: row.opens,
            closes: row.closes,
            is_open: row.is_open != 0,
            max_people: row.max_people,
            metadata: super::parse_metadata(row.metadata.as_deref()),
        }
    }
}

read_endpoints! {
    tag: "opening-hours",
    model: OpeningHours,
    row: OpeningHoursRow,
    list: (
        "/opening-hours",
        "List opening hours",
        "Opening periods, by date and time",
    ),
    get: (
        "/opening-hours/{id}",
        "Get an opening period",
        "Opening hours id",
        "No such opening period",
    ),
}
