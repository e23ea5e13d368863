//! The layer stack every role wraps its router in, outermost first in reading order.

use std::time::Duration;

use axum::Router;
use axum::http::{HeaderName, Request, Response, StatusCode, header};
use axum::response::IntoResponse;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::sensitive_headers::SetSensitiveHeadersLayer;
use tower_http::trace::TraceLayer;
use tracing::Span;

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

pub fn wrap(router: Router) -> Router {
    let layers = ServiceBuilder::new()
        // Credentials never reach the logs, whatever layer below logs headers.
        .layer(SetSensitiveHeadersLayer::new([
            header::AUTHORIZATION,
            header::COOKIE,
            header::SET_COOKIE,
        ]))
        // Keep a caller's request id (so one id follows a request across roles), or mint one.
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|request: &Request<_>| {
                    let request_id = request
                        .headers()
                        .get(REQUEST_ID)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default();
                    tracing::info_span!(
                        "request",
                        method = %request.method(),
                        path = %request.uri().path(),
                        request_id,
                    )
                })
                .on_request(())
                .on_response(|response: &Response<_>, latency: Duration, _span: &Span| {
                    tracing::info!(
                        status = response.status().as_u16(),
                        latency_ms = latency.as_secs_f64() * 1000.0,
                        "response"
                    );
                }),
        )
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        // A panicking handler becomes a 500 with the common envelope, not a dropped connection.
        .layer(CatchPanicLayer::custom(|_panic| {
            tracing::error!("handler panicked");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                axum::Json(serde_json::json!({
                    "code": "INTERNAL_ERROR",
                    "message": "internal error; the request id in x-request-id identifies it in the logs"
                })),
            )
                .into_response()
        }));
    router.layer(layers)
}
