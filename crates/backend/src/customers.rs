//! `GET /customers` and `GET /customers/{id}`.

use axum::extract::{Path, State};
use sqlx::FromRow;

use super::error::ApiError;
use super::extract::ApiQuery;
use super::list::{ListParams, ListResponse, Listing};
use super::model::Customer;
use super::{BackendState, Json, Reader, resources};

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

/// List customers
#[utoipa::path(get, path = "/customers", tag = "customers",
    params(ListParams),
    responses(
        (status = 200, description = "Customers; X-Total-Count holds the number matching the filter", body = [Customer]),
        (status = 400, description = "Invalid limit, sort or customQuery", body = super::ErrorBody),
        (status = 401, description = "Missing or invalid token", body = super::ErrorBody),
    ),
    security(("bearer" = ["backend.read"])))]
pub(super) async fn list(
    _auth: Reader,
    State(state): State<BackendState>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ListResponse<Customer> {
    LISTING.list::<CustomerRow, _>(&state.db, &params).await
}

/// Get a customer
#[utoipa::path(get, path = "/customers/{id}", tag = "customers",
    params(("id" = String, Path, description = "Customer id")),
    responses(
        (status = 200, body = Customer),
        (status = 404, description = "No such customer", body = super::ErrorBody),
    ),
    security(("bearer" = ["backend.read"])))]
pub(super) async fn get(
    _auth: Reader,
    State(state): State<BackendState>,
    Path(id): Path<String>,
) -> Result<Json<Customer>, ApiError> {
    LISTING.get::<CustomerRow, _>(&state.db, &id).await
}
