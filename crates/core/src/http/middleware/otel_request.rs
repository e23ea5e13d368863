//! The request's span in the OpenTelemetry HTTP conventions, when traces are
//! exported: named `{method} {route}`, a server span continuing the caller's
//! `traceparent`, in the service of the role that serves it.

use axum::extract::{MatchedPath, Request};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Span;

use crate::otel::{self, ServingRole};
use crate::trace_context::TraceContext;

/// The caller's span, from a valid `traceparent` of a trusted caller, if any.
#[derive(Debug, Clone, Copy)]
pub(super) struct Caller(pub Option<TraceContext>);

/// An untrusted caller's span: not continued, only linked to.
#[derive(Debug, Clone, Copy)]
pub(super) struct Linked(pub Option<TraceContext>);

/// Tags `span` and links it to the caller; the request's place in the trace.
pub(super) fn start<B>(span: &Span, request: &axum::http::Request<B>) -> TraceContext {
    let extensions = request.extensions();
    let own = extensions
        .get::<TraceContext>()
        .copied()
        .unwrap_or_else(TraceContext::new_root);
    if !otel::enabled() {
        return own;
    }
    let method = request.method().as_str();
    let route = extensions.get::<MatchedPath>().map(MatchedPath::as_str);
    span.record(
        "otel.name",
        match route {
            Some(route) => format!("{method} {route}"),
            None => method.to_owned(),
        },
    );
    span.record("otel.kind", "server");
    otel::set_attribute(span, "http.request.method", method.to_owned());
    if let Some(route) = route {
        otel::set_attribute(span, "http.route", route.to_owned());
    }
    let caller = extensions.get::<Caller>().and_then(|c| c.0);
    let role = extensions.get::<ServingRole>().map(|r| r.0);
    let own = otel::continue_trace(span, caller, role);
    if let Some(linked) = extensions.get::<Linked>().and_then(|l| l.0) {
        otel::link(span, linked);
    }
    own
}

pub(super) fn status(span: &Span, status: StatusCode) {
    otel::set_attribute(
        span,
        "http.response.status_code",
        i64::from(status.as_u16()),
    );
    if status.is_server_error() {
        otel::set_attribute(span, "error.type", status.as_u16().to_string());
    }
}

/// Handlers get the exported span's place in the trace as their [`TraceContext`],
/// and the response names it (`traceresponse`).
pub(super) async fn own_trace(mut request: Request, next: Next) -> Response {
    let own = otel::trace_of(&Span::current()).map(|own| {
        let caller = request.extensions().get::<Caller>().and_then(|c| c.0);
        TraceContext::from_parts(
            own.trace_id().to_bytes(),
            own.span_id().to_bytes(),
            caller.map(|c| c.span_id().to_bytes()),
            own.sampled(),
        )
        .unwrap_or(own)
    });
    if let Some(own) = own {
        request.extensions_mut().insert(own);
    }
    let mut response = next.run(request).await;
    if let Some(own) = own {
        response.extensions_mut().insert(own);
    }
    response
}
