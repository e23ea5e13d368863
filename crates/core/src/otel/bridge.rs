//! Between our [`TraceContext`] (what goes in `traceparent` headers and `_meta`) and
//! the exported spans: with traces on, a span's position in the trace is the
//! exporter's span, so what we send downstream names a span the collector has.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry::{Array, StringValue, Value};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::{ServingRole, enabled};
use crate::trace_context::TraceContext;

/// Makes `span` continue the trace of `caller` (a span in another process, or in a
/// task that has lost its place), as `role`'s work, and gives this span's position in
/// the trace. With traces off: a child of `caller`, or a new trace.
pub fn continue_trace(
    span: &Span,
    caller: Option<TraceContext>,
    role: Option<&'static str>,
) -> TraceContext {
    let fallback = || caller.map_or_else(TraceContext::new_root, |c| c.child());
    if !enabled() {
        return fallback();
    }
    let mut cx = opentelemetry::Context::new();
    if let Some(role) = role {
        cx = cx.with_value(ServingRole(role));
    }
    if let Some(caller) = caller {
        let flags = if caller.sampled() {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        };
        cx = cx.with_remote_span_context(SpanContext::new(
            TraceId::from_bytes(caller.trace_id().to_bytes()),
            SpanId::from_bytes(caller.span_id().to_bytes()),
            flags,
            true,
            TraceState::default(),
        ));
    }
    // Refused only for a span already started or not seen by the layer: it then
    // keeps the parent it has.
    let _ = span.set_parent(cx);
    trace_of(span)
        .map(|own| {
            TraceContext::from_parts(
                own.trace_id().to_bytes(),
                own.span_id().to_bytes(),
                caller.map(|c| c.span_id().to_bytes()),
                own.sampled(),
            )
            .unwrap_or(own)
        })
        .unwrap_or_else(fallback)
}

/// Links `span` to `other`, a span of another trace (an outside caller's, which is
/// not continued): the collector shows where the request came from without letting
/// the caller decide this trace's id or sampling.
pub fn link(span: &Span, other: TraceContext) {
    if !enabled() {
        return;
    }
    let flags = if other.sampled() {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    span.add_link(SpanContext::new(
        TraceId::from_bytes(other.trace_id().to_bytes()),
        SpanId::from_bytes(other.span_id().to_bytes()),
        flags,
        true,
        TraceState::default(),
    ));
}

/// The exported span's position in the trace; `None` with traces off.
pub fn trace_of(span: &Span) -> Option<TraceContext> {
    if !enabled() {
        return None;
    }
    let cx = span.context();
    let span_context = cx.span().span_context().clone();
    if !span_context.is_valid() {
        return None;
    }
    TraceContext::from_parts(
        span_context.trace_id().to_bytes(),
        span_context.span_id().to_bytes(),
        None,
        span_context.is_sampled(),
    )
}

/// An attribute on the exported span only (the log lines stay as they are); nothing
/// with traces off.
pub fn set_attribute(span: &Span, key: &'static str, value: impl Into<Value>) {
    if enabled() {
        span.set_attribute(key, value);
    }
}

/// A string-array attribute (`gen_ai.response.finish_reasons`).
pub fn set_strings(span: &Span, key: &'static str, values: &[&str]) {
    if enabled() {
        let values: Vec<StringValue> = values.iter().map(|v| (*v).to_owned().into()).collect();
        span.set_attribute(key, Value::Array(Array::String(values)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_export_a_span_continues_our_own_trace_context() {
        // Nothing is exported in unit tests: the trace context is ours, as ever.
        let caller = TraceContext::new_root();
        let own = continue_trace(&Span::none(), Some(caller), Some("mcp"));
        assert_eq!(own.trace_id(), caller.trace_id());
        assert_eq!(own.parent_id(), Some(caller.span_id()));
        assert_ne!(own.span_id(), caller.span_id());
        assert!(trace_of(&Span::none()).is_none());
    }
}
