//! `/healthz` says the process is up; `/readyz` says it can do its work: its
//! database answers, or the service it depends on does.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use futures::future::BoxFuture;
use serde_json::json;

use crate::db::Db;

/// Why a role is not ready, in words fit for `/readyz`'s `reason`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NotReady(String);

/// What `/readyz` checks.
pub type ReadinessCheck = Arc<dyn Fn() -> BoxFuture<'static, Result<(), NotReady>> + Send + Sync>;

pub fn routes(check: ReadinessCheck) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(check)
}

/// Ready when the database answers a query.
pub fn database(db: Db) -> ReadinessCheck {
    Arc::new(move || {
        let db = db.clone();
        Box::pin(async move {
            db.ping().await.map_err(|error| {
                tracing::warn!(%error, "readiness check: database unreachable");
                NotReady("database unreachable".to_owned())
            })
        })
    })
}

/// Ready when another service's `/readyz` answers 200.
pub fn upstream(http: reqwest::Client, name: &'static str, url: String) -> ReadinessCheck {
    Arc::new(move || {
        let http = http.clone();
        let url = url.clone();
        Box::pin(async move {
            match http.get(&url).timeout(Duration::from_secs(2)).send().await {
                Ok(response) if response.status().is_success() => Ok(()),
                Ok(response) => Err(NotReady(format!(
                    "{name} is not ready ({})",
                    response.status()
                ))),
                Err(_) => Err(NotReady(format!("{name} is unreachable"))),
            }
        })
    })
}

async fn healthz() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

async fn readyz(State(check): State<ReadinessCheck>) -> Response {
    let outcome = tokio::time::timeout(Duration::from_secs(3), check()).await;
    match outcome {
        Ok(Ok(())) => Json(json!({ "status": "ready" })).into_response(),
        Ok(Err(reason)) => not_ready(&reason.0),
        Err(_) => not_ready("the readiness check did not finish within 3 s"),
    }
}

fn not_ready(reason: &str) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({ "status": "unavailable", "reason": reason })),
    )
        .into_response()
}
