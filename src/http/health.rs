//! `/healthz` says the process is up; `/readyz` says it can do its work (its
//! database answers).

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use crate::db::Db;

pub fn routes(db: Db) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(db)
}

async fn healthz() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

async fn readyz(State(db): State<Db>) -> Response {
    match tokio::time::timeout(Duration::from_secs(2), db.ping()).await {
        Ok(Ok(())) => Json(json!({ "status": "ready" })).into_response(),
        Ok(Err(error)) => {
            tracing::warn!(%error, "readiness check: database unreachable");
            not_ready("database unreachable")
        }
        Err(_) => not_ready("database did not answer within 2 s"),
    }
}

fn not_ready(reason: &str) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({ "status": "unavailable", "reason": reason })),
    )
        .into_response()
}
