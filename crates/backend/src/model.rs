//! The resOS v1.2 resource shapes as they go over the wire: camelCase, `_id` ids.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Customer {
    #[serde(rename = "_id")]
    pub id: String,
    pub name: String,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub created_at: String,
    pub last_booking_at: Option<String>,
    pub booking_count: i64,
    pub total_spent: f64,
    #[schema(value_type = Object)]
    #[schemars(schema_with = "metadata_schema")]
    pub metadata: Option<Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Feedback {
    #[serde(rename = "_id")]
    pub id: String,
    pub booking_id: Option<String>,
    pub rating: i64,
    pub comment: Option<String>,
    pub created_at: String,
    pub customer: Option<Customer>,
    pub is_public: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpeningHours {
    #[serde(rename = "_id")]
    pub id: String,
    pub name: String,
    /// `YYYY-MM-DD`
    pub date: String,
    /// `HH:MM`
    pub opens: String,
    /// `HH:MM`
    pub closes: String,
    pub is_open: bool,
    pub max_people: i64,
    #[schema(value_type = Object)]
    #[schemars(schema_with = "metadata_schema")]
    pub metadata: Option<Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Area {
    #[serde(rename = "_id")]
    pub id: String,
    pub name: String,
    pub internal_note: Option<String>,
    pub booking_priority: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Table {
    #[serde(rename = "_id")]
    pub id: String,
    pub name: String,
    pub seats_min: i64,
    pub seats_max: i64,
    pub area: Area,
    pub internal_note: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Guest {
    /// The customer record the guest is (found or created by email or phone).
    #[serde(rename = "_id", skip_serializing_if = "Option::is_none", default)]
    pub id: Option<String>,
    pub name: String,
    pub email: Option<String>,
    pub phone: Option<String>,
    #[serde(default)]
    pub notification_sms: bool,
    #[serde(default)]
    pub notification_email: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestaurantRef {
    #[serde(rename = "_id")]
    pub id: String,
    pub name: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Booking {
    #[serde(rename = "_id")]
    pub id: String,
    pub date: String,
    pub time: String,
    pub people: i64,
    pub duration: i64,
    /// request, declined, approved, arrived, seated, left, no_show, canceled or waitlist
    pub status: String,
    pub tables: Vec<Table>,
    #[schema(value_type = Object)]
    #[schemars(schema_with = "metadata_schema")]
    pub metadata: Option<Value>,
    /// Customer-visible comments, oldest first.
    pub comments: Vec<String>,
    pub guest: Guest,
    pub source: String,
    pub opening_hour_id: Option<String>,
    pub created_at: String,
    pub activity_at: String,
    /// The guest's own comment made with the booking.
    pub comment: Option<String>,
    /// The latest internal note, visible to the restaurant only.
    pub note: Option<String>,
    pub note_author: Option<String>,
    pub referrer: Option<String>,
    pub language_code: String,
    pub restaurant: Option<RestaurantRef>,
}

/// Free-form metadata: a JSON object, or null. (Described as such rather than as
/// "anything", which some JSON Schema consumers reject as a property schema.)
fn metadata_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": ["object", "null"],
        "description": "Free-form metadata",
    })
}

/// Every booking status; the first four hold a table.
pub const STATUSES: &[&str] = &[
    "request", "approved", "arrived", "seated", "waitlist", "declined", "left", "no_show",
    "canceled",
];

/// Statuses that occupy a table (and count against an opening's capacity).
pub const HOLDING: &[&str] = &["request", "approved", "arrived", "seated"];

pub const SOURCES: &[&str] = &[
    "walkin", "website", "phone", "email", "message", "eatie", "other",
];

pub const LANGUAGES: &[&str] = &["en", "es", "de", "da", "sv"];

pub fn holds_table(status: &str) -> bool {
    HOLDING.contains(&status)
}

/// The status changes a booking may go through; anything else is a 409.
pub fn allowed_transitions(from: &str) -> &'static [&'static str] {
    match from {
        "request" => &["approved", "declined", "canceled", "waitlist"],
        "waitlist" => &["request", "approved", "declined", "canceled"],
        "approved" => &["arrived", "seated", "canceled", "no_show", "declined"],
        "arrived" => &["seated", "left", "canceled"],
        "seated" => &["left"],
        _ => &[],
    }
}
