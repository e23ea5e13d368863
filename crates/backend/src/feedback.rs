//! `GET /feedback` and `GET /feedback/{id}`, each with its customer embedded.

use sqlx::FromRow;

use super::list::{Listing, read_endpoints};
use super::model::{Customer, Feedback};
use super::resources;

const COLUMNS: &str = "f.id, f.booking_id, f.rating, f.comment, f.created_at, f.is_public, \
    c.id AS c_id, c.name AS c_name, c.email AS c_email, c.phone AS c_phone, c.created_at AS c_created_at, \
    c.last_booking_at AS c_last_booking_at, c.booking_count AS c_booking_count, c.total_spent AS c_total_spent, c.metadata AS c_metadata";
const FROM: &str = "FROM feedback f LEFT JOIN customers c ON c.id = f.customer_id";

const LISTING: Listing = Listing {
    name: "feedback",
    resource: &resources::FEEDBACK,
    columns: COLUMNS,
    from: FROM,
    id_column: "f.id",
    default_order: "f.created_at DESC",
    tiebreaker: "f.id ASC",
};

#[derive(FromRow)]
struct FeedbackRow {
    id: String,
    booking_id: Option<String>,
    rating: i64,
    comment: Option<String>,
    created_at: String,
    is_public: i64,
    c_id: Option<String>,
    c_name: Option<String>,
    c_email: Option<String>,
    c_phone: Option<String>,
    c_created_at: Option<String>,
    c_last_booking_at: Option<String>,
    c_booking_count: Option<i64>,
    c_total_spent: Option<f64>,
    c_metadata: Option<String>,
}

impl From<FeedbackRow> for Feedback {
    fn from(row: FeedbackRow) -> Self {
        let customer = row.c_id.map(|id| Customer {
            id,
            name: row.c_name.unwrap_or_default(),
            email: row.c_email,
            phone: row.c_phone,
            created_at: row.c_created_at.unwrap_or_default(),
            last_booking_at: row.c_last_booking_at,
            booking_count: row.c_booking_count.unwrap_or_default(),
            total_spent: row.c_total_spent.unwrap_or_default(),
            metadata: super::parse_metadata(row.c_metadata.as_deref()),
        });
        Self {
            id: row.id,
            booking_id: row.booking_id,
            rating: row.rating,
            comment: row.comment,
            created_at: row.created_at,
            customer,
            is_public: row.is_public != 0,
        }
    }
}

read_endpoints! {
    tag: "feedback",
    model: Feedback,
    row: FeedbackRow,
    list: (
        "/feedback",
        "List feedback",
        "Feedback entries; X-Total-Count holds the number matching the filter",
    ),
    get: (
        "/feedback/{id}",
        "Get a feedback entry",
        "Feedback id",
        "No such feedback",
    ),
}
