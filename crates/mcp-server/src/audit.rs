//! The backend's write audit as an MCP resource, for an ADMIN's MCP client: read as
//! the caller's person (the backend itself decides who may read it), never as the
//! MCP role.

use rmcp::ErrorData;
use rmcp::model::{CacheScope, ReadResourceResult, Resource, ResourceContents};
use serde_json::json;

use super::backend::{BackendClient, BackendError};

pub(super) const AUDIT_URI: &str = "maitred://audit/writes";

/// How many of the newest writes the resource holds.
const NEWEST: u32 = 100;

pub(super) fn resource() -> Resource {
    Resource::new(AUDIT_URI, "write-audit")
        .with_title("Write audit")
        .with_description(
            "The newest writes through the reservation API: who each was for, the clients that \
             acted for them, the tool call that asked, the action and the booking. For people \
             with the ADMIN role.",
        )
        .with_mime_type("application/json")
}

/// The resource's contents, with `backend` acting for the caller.
pub(super) async fn read(backend: &BackendClient) -> Result<ReadResourceResult, ErrorData> {
    match backend
        .get::<serde_json::Value>("/audit", &[("limit", NEWEST.to_string())])
        .await
    {
        // Every write changes it, and what it shows depends on who reads it: never
        // fresh for long, and never for another person (SEP-2549).
        Ok(rows) => Ok(
            ReadResourceResult::new(vec![ResourceContents::TextResourceContents {
                uri: AUDIT_URI.to_owned(),
                mime_type: Some("application/json".to_owned()),
                text: rows.to_string(),
                meta: None,
            }])
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Private),
        ),
        Err(BackendError::Rejected { message, .. }) => Err(ErrorData::invalid_request(
            message,
            Some(json!({ "uri": AUDIT_URI })),
        )),
        Err(error @ (BackendError::Unavailable(_) | BackendError::Unreadable(_))) => {
            Err(ErrorData::internal_error(error.to_string(), None))
        }
    }
}

/// A resource this server does not have (SEP-2164: the URI in `data`).
pub(super) fn not_found(uri: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!("there is no resource {uri}; resources/list names the one there is"),
        Some(json!({ "uri": uri })),
    )
}
