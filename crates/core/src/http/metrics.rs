//! The HTTP side of [`crate::metrics`]: the middleware that records every request,
//! and `GET /metrics`.

use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::metrics::gauge::Gauge;
use secrecy::ExposeSecret;
use subtle::ConstantTimeEq;

use crate::metrics::{HttpLabels, Metrics, RouteLabels};

/// `GET /metrics`. With `token` (`MAITRED_METRICS_TOKEN`), only for a scraper that
/// brings it as a bearer token: others get 401 and no series. Without, for anyone
/// who reaches the port: a scrape network only the monitoring system reaches, and a
/// reverse proxy in front of a role that does not route it.
pub fn routes(metrics: Metrics) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(metrics)
}

async fn scrape(State(metrics): State<Metrics>, headers: HeaderMap) -> Response {
    if let Some(token) = metrics.scrape_token() {
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default();
        if !bool::from(presented.as_bytes().ct_eq(token.expose_secret().as_bytes())) {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer realm=\"metrics\"")],
                "/metrics needs the scrape token (MAITRED_METRICS_TOKEN) as a bearer token\n",
            )
                .into_response();
        }
    }
    (
        [(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
        metrics.render(),
    )
        .into_response()
}

/// Counts the request and times it up to the response head: a streamed body (SSE)
/// goes on after this returns, and its length is not in the histogram.
pub async fn record(State(metrics): State<Metrics>, request: Request, next: Next) -> Response {
    let http = metrics.http();
    let method = method_label(request.method());
    // The route pattern, not the path: ids in paths would make a series per record.
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let _in_flight = InFlight::enter(&http.in_flight);
    let started = Instant::now();
    let response = next.run(request).await;
    http.duration
        .get_or_create(&RouteLabels {
            method,
            route: route.clone(),
        })
        .observe(started.elapsed().as_secs_f64());
    http.requests
        .get_or_create(&HttpLabels {
            method,
            route,
            status: response.status().as_u16(),
        })
        .inc();
    response
}

/// Counted in while the request is handled, out when done or dropped (a client
/// that hangs up cancels the handler's future).
struct InFlight(Gauge);

impl InFlight {
    fn enter(gauge: &Gauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The standard methods by name; anything else a client invents is `other`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}
