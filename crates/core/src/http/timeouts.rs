//! Slow clients and stuck requests, in every role. The connection itself has the
//! header-read timeout (hyper's, set in [`super::serve`]); this layer has the rest:
//!
//! - the request body: a pause longer than `body_idle`, or a whole body slower than
//!   `body_read`, ends in `408` and the connection is closed (a body dribbled a byte
//!   every few seconds would otherwise hold it for as long as the client likes);
//! - the request: from its head to the end of its response, `request` at most, then
//!   `503`. An event stream (SSE) is exempt once its head is out: a chat answer or an
//!   MCP stream rightly lasts minutes, and has its own keep-alives and limits. A
//!   handler that rightly waits longer for its head lifts the deadline with
//!   [`RequestDeadline`].
//!
//! The layer wraps the whole router, outside the common stack, so the time counted
//! is all of the request's.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::body::Body;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower_http::timeout::{DeadlineBody, TimeoutBody, TimeoutError};

use super::error::Envelope;
use crate::settings::HttpTimeouts;

/// This request's deadline, for a handler that rightly waits longer than the request
/// timeout before its response begins (a non-streamed chat completion waits for the
/// whole answer). Lifting it leaves the handler's own limits in charge.
#[derive(Debug, Clone, Default)]
pub struct RequestDeadline(Option<CancellationToken>);

impl RequestDeadline {
    /// No request timeout for this request from now on; call it once the caller is known.
    pub fn lift(&self) {
        if let Some(lifted) = &self.0 {
            lifted.cancel();
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for RequestDeadline {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(parts.extensions.get::<Self>().cloned().unwrap_or_default())
    }
}

/// The layer (`from_fn_with_state`): times the request body and the request.
pub(super) async fn limit(
    State(limits): State<HttpTimeouts>,
    mut request: Request,
    next: Next,
) -> Response {
    let deadline = Instant::now() + limits.request;
    let lifted = CancellationToken::new();
    request
        .extensions_mut()
        .insert(RequestDeadline(Some(lifted.clone())));
    let (method, uri) = (request.method().clone(), request.uri().clone());
    let slow_body = Arc::new(AtomicBool::new(false));
    let request = request.map(|body| timed_body(body, limits, slow_body.clone()));

    let mut handling = std::pin::pin!(next.run(request));
    let expired = async {
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => true,
            () = lifted.cancelled() => false,
        }
    };
    let response = tokio::select! {
        biased;
        response = &mut handling => response,
        expired = expired => {
            if expired {
                return if slow_body.load(Ordering::Relaxed) {
                    body_too_slow(&method, &uri)
                } else {
                    took_too_long(&method, &uri)
                };
            }
            handling.await
        }
    };
    // The handler gave up on a body that stopped or crawled: whatever it answered, the
    // client was too slow, and what is left of its body is not read.
    if slow_body.load(Ordering::Relaxed) {
        return body_too_slow(&method, &uri);
    }
    if lifted.is_cancelled() || is_event_stream(&response) {
        return response;
    }
    // The rest of the deadline is the response's: a client that reads it too slowly
    // loses the connection.
    let left = deadline.saturating_duration_since(Instant::now());
    response.map(|body| Body::new(DeadlineBody::new(left, body)))
}

/// The request body, with both body timeouts; `slow` is set if either fires.
fn timed_body(body: Body, limits: HttpTimeouts, slow: Arc<AtomicBool>) -> Body {
    let timed = TimeoutBody::new(limits.body_idle, DeadlineBody::new(limits.body_read, body));
    Body::new(timed.map_err(move |error| {
        if error.is::<TimeoutError>() {
            slow.store(true, Ordering::Relaxed);
        }
        error
    }))
}

fn is_event_stream(response: &Response) -> bool {
    const SSE: &[u8] = b"text/event-stream";
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.as_bytes().get(..SSE.len()))
        .is_some_and(|essence| essence.eq_ignore_ascii_case(SSE))
}

fn body_too_slow(method: &Method, uri: &Uri) -> Response {
    tracing::warn!(%method, path = uri.path(), "request body too slow; closing the connection");
    Envelope::new(
        StatusCode::REQUEST_TIMEOUT,
        "REQUEST_TIMEOUT",
        "the request body did not arrive in time",
    )
    .header(header::CONNECTION, HeaderValue::from_static("close"))
    .into_response()
}

fn took_too_long(method: &Method, uri: &Uri) -> Response {
    tracing::warn!(%method, path = uri.path(), "request timed out");
    Envelope::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "TIMEOUT",
        "the request took too long; please try again",
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::Router;
    use axum::body::Bytes;
    use axum::middleware::from_fn_with_state;
    use axum::response::sse::{Event, Sse};
    use axum::routing::{get, post};
    use futures::StreamExt;
    use tower::ServiceExt;

    use super::*;

    fn limits() -> HttpTimeouts {
        HttpTimeouts {
            header_read: Duration::from_secs(1),
            body_idle: Duration::from_secs(2),
            body_read: Duration::from_secs(5),
            request: Duration::from_secs(10),
        }
    }

    fn app() -> Router {
        Router::new()
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    "late"
                }),
            )
            .route(
                "/lifted",
                get(|deadline: RequestDeadline| async move {
                    deadline.lift();
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    "late but allowed"
                }),
            )
            .route(
                "/stream",
                get(|| async {
                    let ticks = futures::stream::iter(0..5).then(|n| async move {
                        tokio::time::sleep(Duration::from_secs(8)).await;
                        Ok::<_, Infallible>(Event::default().data(n.to_string()))
                    });
                    Sse::new(ticks)
                }),
            )
            .route("/echo", post(|body: Bytes| async move { body }))
            .layer(from_fn_with_state(limits(), limit))
    }

    /// A body that sends `chunks` one by one, `gap` apart.
    fn dribbled(chunks: usize, gap: Duration) -> Body {
        Body::from_stream(futures::stream::iter(0..chunks).then(move |_| async move {
            tokio::time::sleep(gap).await;
            Ok::<_, Infallible>(Bytes::from_static(b"x"))
        }))
    }

    async fn status_of(request: axum::http::Request<Body>) -> (StatusCode, Response) {
        let response = app().oneshot(request).await.unwrap();
        (response.status(), response)
    }

    #[tokio::test(start_paused = true)]
    async fn a_handler_that_takes_too_long_is_answered_503() {
        let started = Instant::now();
        let (status, _) = status_of(Request::get("/slow").body(Body::empty()).unwrap()).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(started.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_lifted_deadline_lets_the_handler_finish() {
        let (status, response) =
            status_of(Request::get("/lifted").body(Body::empty()).unwrap()).await;
        assert_eq!(status, StatusCode::OK);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "late but allowed");
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_stream_outlives_the_request_timeout() {
        let started = Instant::now();
        let (status, response) =
            status_of(Request::get("/stream").body(Body::empty()).unwrap()).await;
        assert_eq!(status, StatusCode::OK);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(String::from_utf8_lossy(&body).matches("data:").count(), 5);
        assert!(started.elapsed() >= Duration::from_secs(40));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_or_dribbled_body_is_answered_408_and_closed() {
        // A byte, then silence longer than the idle timeout.
        let stalled = Body::from_stream(
            futures::stream::iter([Bytes::from_static(b"x")])
                .map(Ok::<_, Infallible>)
                .chain(futures::stream::pending()),
        );
        let (status, response) = status_of(Request::post("/echo").body(stalled).unwrap()).await;
        assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
        assert_eq!(response.headers()[header::CONNECTION], "close");

        // A byte a second: never idle for long, but slower than the whole body may be.
        let started = Instant::now();
        let slow = dribbled(100, Duration::from_secs(1));
        let (status, _) = status_of(Request::post("/echo").body(slow).unwrap()).await;
        assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
        assert_eq!(started.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_but_steady_body_within_the_limits_is_read() {
        let (status, response) = status_of(
            Request::post("/echo")
                .body(dribbled(4, Duration::from_secs(1)))
                .unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "xxxx");
    }

    #[tokio::test(start_paused = true)]
    async fn a_response_read_too_slowly_is_cut_at_the_deadline() {
        let slow = Router::new()
            .route(
                "/big",
                get(|| async {
                    Body::from_stream(futures::stream::iter(0..100).then(|_| async {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        Ok::<_, Infallible>(Bytes::from_static(b"x"))
                    }))
                }),
            )
            .layer(from_fn_with_state(limits(), limit));
        let response = slow
            .oneshot(Request::get("/big").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let error = response.into_body().collect().await.unwrap_err();
        assert!(error.to_string().contains("timeout"), "{error}");
    }
}
