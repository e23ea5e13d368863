//! W3C Trace Context (`traceparent`): one question is one trace across the roles.
//!
//! A [`TraceContext`] is a position in a trace: the trace id shared by every hop, the
//! id of the span it stands for, and the flags. Parsing a `traceparent` gives the
//! caller's span; [`TraceContext::child`] makes our own span in the same trace;
//! [`TraceContext::header_value`] is what we send downstream, naming our span as the
//! callee's parent. Only `traceparent` is handled: `tracestate` carries vendor data
//! this system neither reads nor needs, so it is not forwarded.

use std::convert::Infallible;
use std::fmt;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName};

/// The request header that carries the caller's trace context.
pub const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
/// The response header naming the span that served a request (W3C Trace Context's
/// response-header draft), so a client can find its request in the logs.
pub const TRACERESPONSE: HeaderName = HeaderName::from_static("traceresponse");

/// The trace-flags bit that says the caller records this trace.
const SAMPLED: u8 = 0x01;

/// 16 bytes, never all zero; shown as 32 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId([u8; 16]);

/// 8 bytes, never all zero; shown as 16 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanId([u8; 8]);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceContext {
    trace_id: TraceId,
    span_id: SpanId,
    /// The span this one was made a child of, when we made it.
    parent_id: Option<SpanId>,
    flags: u8,
}

impl TraceContext {
    /// A new trace: random ids, recorded (every request is logged).
    pub fn new_root() -> Self {
        Self {
            trace_id: TraceId(random_nonzero()),
            span_id: SpanId(random_nonzero()),
            parent_id: None,
            flags: SAMPLED,
        }
    }

    /// A new span in the same trace, whose parent is this one.
    pub fn child(&self) -> Self {
        Self {
            trace_id: self.trace_id,
            span_id: SpanId(random_nonzero()),
            parent_id: Some(self.span_id),
            flags: self.flags,
        }
    }

    /// A span someone else made (the OpenTelemetry tracer, when traces are exported),
    /// as a position in the trace; `None` if either id is all zeros.
    pub fn from_parts(
        trace_id: [u8; 16],
        span_id: [u8; 8],
        parent_id: Option<[u8; 8]>,
        sampled: bool,
    ) -> Option<Self> {
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(Self {
            trace_id: TraceId(trace_id),
            span_id: SpanId(span_id),
            parent_id: parent_id.filter(|id| *id != [0; 8]).map(SpanId),
            flags: if sampled { SAMPLED } else { 0 },
        })
    }

    /// The caller's context from a `traceparent` value; `None` if it is not valid.
    ///
    /// Version `00` must be exactly `00-<32 hex>-<16 hex>-<2 hex>`, lowercase, with
    /// neither id all zeros. A higher version (not `ff`) is read for its first four
    /// fields, as the specification asks, and is continued as version `00`.
    pub fn parse(value: &str) -> Option<Self> {
        let value = value.trim_matches([' ', '\t']);
        let bytes = value.as_bytes();
        let version = decode::<1>(bytes.get(0..2)?)?[0];
        match version {
            0x00 if bytes.len() != 55 => return None,
            0xff => return None,
            _ if bytes.len() < 55 || (bytes.len() > 55 && bytes[55] != b'-') => return None,
            _ => {}
        }
        if bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
            return None;
        }
        let trace_id = decode::<16>(&bytes[3..35]).filter(|id| *id != [0; 16])?;
        let span_id = decode::<8>(&bytes[36..52]).filter(|id| *id != [0; 8])?;
        let flags = decode::<1>(&bytes[53..55])?[0];
        Some(Self {
            trace_id: TraceId(trace_id),
            span_id: SpanId(span_id),
            parent_id: None,
            // Only the flag version 00 defines is passed on.
            flags: flags & SAMPLED,
        })
    }

    /// The caller's context from the `traceparent` header: `None` when it is absent,
    /// invalid, or given more than once (which of two to believe is anyone's guess).
    pub fn from_headers(headers: &HeaderMap) -> Option<Self> {
        let mut values = headers.get_all(TRACEPARENT).iter();
        let value = values.next()?;
        if values.next().is_some() {
            return None;
        }
        Self::parse(value.to_str().ok()?)
    }

    pub fn trace_id(&self) -> TraceId {
        self.trace_id
    }

    pub fn span_id(&self) -> SpanId {
        self.span_id
    }

    pub fn parent_id(&self) -> Option<SpanId> {
        self.parent_id
    }

    pub fn sampled(&self) -> bool {
        self.flags & SAMPLED != 0
    }

    /// `00-<trace id>-<this span's id>-<flags>`: the `traceparent` to send on a request
    /// made from this span (also valid as `_meta.traceparent` in an MCP request).
    pub fn header_value(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{}-{}-{:02x}",
            self.trace_id, self.span_id, self.flags
        )
    }
}

impl TraceId {
    pub fn to_bytes(self) -> [u8; 16] {
        self.0
    }
}

impl SpanId {
    pub fn to_bytes(self) -> [u8; 8] {
        self.0
    }
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceId({self})")
    }
}

impl fmt::Display for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SpanId({self})")
    }
}

/// The request's own span, as the middleware set it (a new trace if the router was
/// not wrapped in the common middleware, so a handler always has one).
impl<S: Send + Sync> FromRequestParts<S> for TraceContext {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(parts
            .extensions
            .get::<TraceContext>()
            .copied()
            .unwrap_or_else(TraceContext::new_root))
    }
}

/// `N` bytes from `2N` lowercase hex digits (uppercase is not allowed in traceparent).
fn decode<const N: usize>(hex: &[u8]) -> Option<[u8; N]> {
    if hex.len() != 2 * N || !hex.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0u8; N];
    hex::decode_to_slice(hex, &mut out).ok()?;
    Some(out)
}

fn random_nonzero<const N: usize>() -> [u8; N] {
    loop {
        let mut id = [0u8; N];
        id.copy_from_slice(&crate::random::bytes(N));
        if id != [0; N] {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_header_round_trips() {
        let ctx = TraceContext::parse(VALID).unwrap();
        assert_eq!(
            ctx.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(ctx.span_id().to_string(), "00f067aa0ba902b7");
        assert!(ctx.sampled());
        assert_eq!(ctx.header_value(), VALID);
        let unsampled = TraceContext::parse(&VALID.replace("-01", "-00")).unwrap();
        assert!(!unsampled.sampled());
        assert!(unsampled.header_value().ends_with("-00"));
    }

    #[test]
    fn a_child_keeps_the_trace_and_gets_its_own_span() {
        let parent = TraceContext::parse(VALID).unwrap();
        let child = parent.child();
        assert_eq!(child.trace_id(), parent.trace_id());
        assert_ne!(child.span_id(), parent.span_id());
        assert_eq!(child.parent_id(), Some(parent.span_id()));
        assert_eq!(child.sampled(), parent.sampled());
        let sent = TraceContext::parse(&child.header_value()).unwrap();
        assert_eq!(sent.trace_id(), parent.trace_id());
        assert_eq!(sent.span_id(), child.span_id());
    }

    #[test]
    fn new_roots_are_valid_and_distinct() {
        let a = TraceContext::new_root();
        let b = TraceContext::new_root();
        assert_ne!(a.trace_id(), b.trace_id());
        assert_eq!(a.parent_id(), None);
        assert_eq!(TraceContext::parse(&a.header_value()), Some(a));
    }

    #[test]
    fn hostile_values_are_refused() {
        let refused = [
            "",
            "00",
            "00-",
            // Wrong lengths.
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e47366-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            // Uppercase and non-hex.
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",
            "0A-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            // All-zero ids.
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            // Version 00 has exactly four fields.
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
            // Version ff is forbidden.
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            // Wrong delimiters.
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
            // A multi-byte character where a delimiter belongs must not panic.
            "00-4bf92f3577b34da6a3ce929d0e0e473é00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0é",
        ];
        for value in refused {
            assert_eq!(TraceContext::parse(value), None, "{value:?} was accepted");
        }
    }

    #[test]
    fn a_higher_version_is_read_for_its_known_fields() {
        let future = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-what-comes-next";
        let ctx = TraceContext::parse(future).unwrap();
        assert_eq!(
            ctx.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        // Passed on as the version we speak, with only the flag it defines.
        assert_eq!(ctx.header_value(), VALID);
        assert_eq!(
            TraceContext::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x"),
            None
        );
    }

    #[test]
    fn surrounding_whitespace_is_ignored() {
        assert!(TraceContext::parse(&format!(" {VALID}\t")).is_some());
    }

    #[test]
    fn headers_with_one_valid_traceparent_only() {
        let mut headers = HeaderMap::new();
        assert_eq!(TraceContext::from_headers(&headers), None);
        headers.insert(TRACEPARENT, VALID.parse().unwrap());
        assert!(TraceContext::from_headers(&headers).is_some());
        headers.append(TRACEPARENT, VALID.parse().unwrap());
        assert_eq!(TraceContext::from_headers(&headers), None);
        let mut headers = HeaderMap::new();
        headers.insert(TRACEPARENT, "00-zz".parse().unwrap());
        assert_eq!(TraceContext::from_headers(&headers), None);
    }
}
