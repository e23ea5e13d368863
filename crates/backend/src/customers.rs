//! `GET /customers` and `GET /customers/{id}`.

use sqlx::FromRow;

use super::list::{Listing, read_endpoints};
use super::model::Customer;
use super::resources;

pub(super) const COLUMNS: &str = "c.id, c.name, c.email, c.phone, c.created_at, c.last_booking_at, c.booking_count, c.total_spent, c.metadata";

const LISTING: Listing = Listing {
    name: "customer",
    resource: &resources::CUSTOMERS,
    columns: COLUMNS,
    from: "FROM customers c",
    id_column: "c.id",
    default_order: "c.created_at DESC",
    tiebreaker: "c.id ASC",
};

#[derive(FromRow)]
pub struct CustomerRow {
    id: String,
    name: String,
    email: Option<String>,
    phone: Option<String>,
    created_at: String,
    last_booking_at: Option<String>,
    booking_count: i64,
    total_spent: f64,
    metadata: Option<String>,
}

impl From<CustomerRow> for Customer {
    fn from(row: CustomerRow) -> Self {
        Self {
            id: row.id,
            name: row.name,
            email: row.email,
            phone: row.phone,
            created_at: row.created_at,
            last_booking_at: row.last_booking_at,
            booking_count: row.booking_count,
            total_spent: row.total_spent,
            metadata: super::parse_metadata(row.metadata.as_deref()),
        }
    }
}

read_endpoints! {
    tag: "customers",
    model: Customer,
    row: CustomerRow,
    list: (
        "/customers",
        "List customers",
        "Customers; X-Total-Count holds the number matching the filter",
        (status = 401, description = "Missing or invalid token", body = super::ErrorBody),
    ),
    get: (
        "/customers/{id}",
        "Get a customer",
        "Customer id",
        "No such customer",
    ),
}
