//! How a request to the model's server fails: the error answers it sends (with the
//! wait they ask for), the connections it breaks, told apart from a server that is
//! not there.

use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use serde_json::Value;

use crate::ModelError;

/// A client for the model's server over `http`, with our own transport instead of
/// async-openai's default, which retries 429s and 5xx by itself: retrying is the
/// gateway's decision (it must not repeat a request once tokens reached the user), and
/// it needs Retry-After to decide.
pub(super) fn client(http: reqwest::Client, config: OpenAIConfig) -> Client<OpenAIConfig> {
    let transport = tower::service_fn(move |factory: HttpRequestFactory| {
        let http = http.clone();
        async move {
            let request = factory.build().await?;
            let response = http.execute(request).await.map_err(OpenAIError::Reqwest)?;
            if response.status().is_client_error() || response.status().is_server_error() {
                let failure = HttpFailure::read(response).await;
                return Err(OpenAIError::Boxed(Box::new(failure)));
            }
            Ok(response)
        }
    });
    Client::with_config(config).with_http_service(transport)
}

/// A request that got no answer to use.
#[derive(Debug)]
pub(super) struct Failed {
    pub error: ModelError,
    /// The connection closed after the request went out and before any answer: the
    /// server was there, took the request, and said nothing (unlike a refused
    /// connection or a timeout).
    pub dropped: bool,
}

impl From<OpenAIError> for Failed {
    fn from(failure: OpenAIError) -> Self {
        let dropped = matches!(&failure, OpenAIError::Reqwest(e)
            if e.is_request() && !e.is_connect() && !e.is_timeout());
        Self {
            error: error(failure),
            dropped,
        }
    }
}

/// An error answer, with the wait the provider asked for (async-openai would drop
/// the `Retry-After` header, which 429s and 503s carry).
#[derive(Debug, thiserror::Error)]
#[error("HTTP {status}: {message}")]
struct HttpFailure {
    status: u16,
    message: String,
    retry_after: Option<Duration>,
}

/// Most of an error body read; the rest is not worth waiting for.
const ERROR_BODY_LIMIT: usize = 16 * 1024;

impl HttpFailure {
    async fn read(mut response: reqwest::Response) -> Self {
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let mut body = Vec::new();
        while body.len() < ERROR_BODY_LIMIT {
            match response.chunk().await {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                _ => break,
            }
        }
        let text = String::from_utf8_lossy(&body);
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
            .unwrap_or_else(|| text.chars().take(300).collect());
        Self {
            status,
            message,
            retry_after,
        }
    }
}

/// `retry-after-ms` (OpenAI's), else `Retry-After` in seconds or as an HTTP date.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = value("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Some(Duration::from_secs_f64(
            ms.clamp(0.0, 86_400_000.0) / 1000.0,
        ));
    }
    let raw = value("retry-after")?;
    if let Ok(secs) = raw.parse::<f64>() {
        return Some(Duration::from_secs_f64(secs.clamp(0.0, 86_400.0)));
    }
    let at = httpdate::parse_http_date(raw).ok()?;
    Some(
        at.duration_since(std::time::SystemTime::now())
            .unwrap_or_default(),
    )
}

pub(super) fn error(error: OpenAIError) -> ModelError {
    match error {
        OpenAIError::ApiError(response) if response.status_code.as_u16() == 429 => {
            ModelError::RateLimited { retry_after: None }
        }
        OpenAIError::ApiError(response) => ModelError::Upstream {
            status: response.status_code.as_u16(),
            message: response.api_error.message,
            retry_after: None,
        },
        OpenAIError::Reqwest(e) if e.is_timeout() => ModelError::Timeout(e.to_string()),
        OpenAIError::Reqwest(e) => ModelError::Connection(root_cause(&e)),
        OpenAIError::JSONDeserialize(e, _) => ModelError::Protocol(e.to_string()),
        OpenAIError::StreamError(e) => ModelError::Connection(e.to_string()),
        OpenAIError::Boxed(boxed) => match boxed.downcast::<HttpFailure>() {
            Ok(failure) if failure.status == 429 => ModelError::RateLimited {
                retry_after: failure.retry_after,
            },
            Ok(failure) => ModelError::Upstream {
                status: failure.status,
                message: failure.message,
                retry_after: failure.retry_after,
            },
            Err(other) => ModelError::Connection(other.to_string()),
        },
        other => ModelError::Protocol(other.to_string()),
    }
}

fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_read_in_every_form_providers_send() {
        use reqwest::header::{HeaderMap, HeaderValue};
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, HeaderValue::from_str(value).unwrap());
            }
            map
        };
        assert_eq!(
            retry_after(&headers(&[("retry-after", "3")])),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            retry_after(&headers(&[
                ("retry-after", "2"),
                ("retry-after-ms", "1500")
            ])),
            Some(Duration::from_millis(1500))
        );
        let later = std::time::SystemTime::now() + Duration::from_secs(30);
        let date = httpdate::fmt_http_date(later);
        let wait = retry_after(&headers(&[("retry-after", &date)])).unwrap();
        assert!(
            wait > Duration::from_secs(25) && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")])), None);
        assert_eq!(retry_after(&headers(&[])), None);
    }
}
