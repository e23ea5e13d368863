//! How long a slow client may hold a connection, in every role: the time to send a
//! request's head, its body, and to finish an exchange that is not an event stream.

use std::time::Duration;

use super::defaults;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpTimeouts {
    /// From a connection's opening (or its previous response) to the end of the next
    /// request's head; then the connection is closed. Also how long a kept-alive
    /// connection may sit idle.
    pub header_read: Duration,
    /// Longest pause while a request body arrives; then `408` and the connection closes.
    pub body_idle: Duration,
    /// Longest a whole request body may take to arrive, counted from its head: a body
    /// dribbled a byte at a time is cut here; then `408` and the connection closes.
    pub body_read: Duration,
    /// Longest from a request's head to the end of its response, unless the response
    /// is an event stream (SSE) or the handler lifts it (a non-streamed chat
    /// completion): then `503`.
    pub request: Duration,
}

impl Default for HttpTimeouts {
    fn default() -> Self {
        Self {
            header_read: defaults::HEADER_READ_TIMEOUT,
            body_idle: defaults::BODY_IDLE_TIMEOUT,
            body_read: defaults::BODY_READ_TIMEOUT,
            request: defaults::REQUEST_TIMEOUT,
        }
    }
}
