//! A caller's `x-request-id` is kept only when it looks like an id: so that one id
//! follows a request across the roles, but no caller writes what it likes into every
//! log line of its request and into the response.

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;

use super::REQUEST_ID;

/// Longest request id kept (a UUID, which the roles mint, is 36).
const MAX_LEN: usize = 64;

/// At most [`MAX_LEN`] characters, each a letter, a digit, `.`, `_` or `-`.
fn acceptable(value: &HeaderValue) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_LEN
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Removes a caller's request id unless it is one acceptable value, so that the next
/// layer mints a fresh one in its place.
pub(super) async fn drop_unacceptable(mut request: Request, next: Next) -> Response {
    let headers = request.headers_mut();
    let mut given = headers.get_all(REQUEST_ID).iter();
    let keep = match (given.next(), given.next()) {
        (None, _) => true,
        (Some(value), None) => acceptable(value),
        (Some(_), Some(_)) => false,
    };
    if !keep {
        tracing::debug!("the caller's x-request-id is not an acceptable id: replaced");
        headers.remove(REQUEST_ID);
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_short_and_plain() {
        let long = "a".repeat(MAX_LEN + 1);
        let longest = "a".repeat(MAX_LEN);
        for (id, kept) in [
            ("0195f3a2-7c1e-7d4b-9a77-3c2b1d0e9f10", true),
            ("req_01J9ZX.retry-2", true),
            (longest.as_str(), true),
            (long.as_str(), false),
            ("", false),
            ("a b", false),
            ("a\tb", false),
            ("id\"><script>", false),
            ("forged id=admin", false),
            ("caf\u{e9}", false),
            ("a/b", false),
        ] {
            let value = HeaderValue::from_bytes(id.as_bytes()).unwrap();
            assert_eq!(acceptable(&value), kept, "{id:?}");
        }
    }
}
