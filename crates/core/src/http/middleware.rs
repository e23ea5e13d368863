//! The layer stack every role wraps its router in, outermost first in reading order.

use std::time::Duration;

use axum::Router;
use axum::extract::{Request as AxumRequest, State};
use axum::http::{HeaderName, HeaderValue, Request, Response, StatusCode, header};
use axum::middleware::{Next, from_fn, from_fn_with_state};
use axum::response::IntoResponse;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::sensitive_headers::SetSensitiveHeadersLayer;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;
use tracing::Span;

use super::client_ip::{ClientIp, TraceCallers, TrustedProxies};
use super::error::{Envelope, ErrorDetail, INTERNAL_MESSAGE};
use crate::metrics::Metrics;
use crate::trace_context::{TRACERESPONSE, TraceContext};

mod otel_request;
mod request_id;

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Whether the request's caller is one whose trace context is continued (see
/// [`TraceCallers`]): a handler that reads another (MCP's `_meta.traceparent`) asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceTrust(pub bool);

/// Adds `GET /metrics` (from `metrics`) to `router` and wraps it all in the common
/// layers, which record every request on `metrics`; `proxies` are the reverse proxies
/// whose forwarding header names the client, `tracers` the callers whose trace is
/// continued.
pub fn wrap(
    router: Router,
    metrics: &Metrics,
    proxies: &TrustedProxies,
    tracers: &TraceCallers,
) -> Router {
    let layers = ServiceBuilder::new()
        // Credentials never reach the logs, whatever layer below logs headers.
        .layer(SetSensitiveHeadersLayer::new([
            header::AUTHORIZATION,
            header::COOKIE,
            header::SET_COOKIE,
        ]))
        // Keep a caller's request id (so one id follows a request across roles) if it
        // is a plain, short id, or mint one.
        .layer(from_fn(request_id::drop_unacceptable))
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        // Before the span is made, so the access log names the client, not the proxy;
        // and before the trace is chosen, which depends on who the client is.
        .layer(from_fn_with_state(
            proxies.clone(),
            super::client_ip::resolve,
        ))
        // Continue a trusted caller's trace (W3C traceparent) or start one, before the
        // span is made: every log line of the request carries its trace id.
        .layer(from_fn_with_state(tracers.clone(), trace_context))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|request: &Request<_>| {
                    let request_id = request
                        .headers()
                        .get(REQUEST_ID)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default();
                    let client_ip = request.extensions().get::<ClientIp>();
                    let span = tracing::info_span!(
                        "request",
                        method = %request.method(),
                        path = ?request.uri().path(),
                        request_id,
                        client_ip = client_ip.map(|ip| display(ip.0)),
                        trace_id = tracing::field::Empty,
                        span_id = tracing::field::Empty,
                        otel.name = tracing::field::Empty,
                        otel.kind = tracing::field::Empty,
                    );
                    let trace = otel_request::start(&span, request);
                    span.record("trace_id", tracing::field::display(trace.trace_id()));
                    span.record("span_id", tracing::field::display(trace.span_id()));
                    span
                })
                .on_request(())
                .on_response(|response: &Response<_>, latency: Duration, span: &Span| {
                    otel_request::status(span, response.status());
                    tracing::info!(
                        status = response.status().as_u16(),
                        latency_ms = latency.as_secs_f64() * 1000.0,
                        "response"
                    );
                }),
        )
        // Inside the request's span: with traces exported, the request's place in
        // the trace is that span's (named downstream in traceparent). Not there
        // without: no cost.
        .option_layer(crate::otel::enabled().then(|| from_fn(otel_request::own_trace)))
        // Inside the request's span: logs the detail an error response carries, once.
        .layer(from_fn(super::error::log_errors))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        // No response is ever to be read as another type than it says (a JSON error
        // echoing input sniffed as HTML, say).
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        // Around the panic catcher, so a panic counts as the 500 the client gets.
        .layer(from_fn_with_state(metrics.clone(), super::metrics::record))
        // A panicking handler becomes a 500 with the common envelope, not a dropped connection.
        .layer(CatchPanicLayer::custom(
            |panic: Box<dyn std::any::Any + Send>| {
                let cause = panic
                    .downcast_ref::<&str>()
                    .map(|text| (*text).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic without a message".to_owned());
                Envelope::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "INTERNAL_ERROR",
                    INTERNAL_MESSAGE,
                )
                .logged(ErrorDetail::new("handler panicked", cause))
                .into_response()
            },
        ));
    router
        .merge(super::metrics::routes(metrics.clone()))
        .layer(layers)
}

/// Puts this request's span in the trace into the request's extensions (handlers
/// take it as a [`TraceContext`] extractor): from a trusted caller, a child of a valid
/// incoming `traceparent`; else a new trace, recorded, with the caller's span kept as
/// a link (an outside caller neither picks the trace id nor turns recording off).
/// The response names that span in `traceresponse`.
async fn trace_context(
    State(tracers): State<TraceCallers>,
    mut request: AxumRequest,
    next: Next,
) -> axum::response::Response {
    let offered = TraceContext::from_headers(request.headers());
    // No address (served without connect info): nobody to trust.
    let trusted = request
        .extensions()
        .get::<ClientIp>()
        .is_some_and(|client| tracers.trusts(client.0));
    let (caller, linked) = if trusted {
        (offered, None)
    } else {
        (None, offered)
    };
    let trace = caller.map_or_else(TraceContext::new_root, |caller| caller.child());
    request.extensions_mut().insert(trace);
    request.extensions_mut().insert(TraceTrust(trusted));
    request
        .extensions_mut()
        .insert(otel_request::Caller(caller));
    request
        .extensions_mut()
        .insert(otel_request::Linked(linked));
    let mut response = next.run(request).await;
    // The span that served it: ours, or the exported one (`own_trace` put it there).
    let served = response
        .extensions()
        .get::<TraceContext>()
        .copied()
        .unwrap_or(trace);
    if let Ok(value) = HeaderValue::try_from(served.header_value()) {
        response.headers_mut().insert(TRACERESPONSE, value);
    }
    response
}
