//! OAuth request parameters (query string or form body). Parameters may not repeat
//! (RFC 6749 §3.1) except `resource` (RFC 8707), so a plain map will not do.

use axum::body::Bytes;
use axum::http::{HeaderMap, header};

use super::error::OAuthError;

pub(super) struct Params(Vec<(String, String)>);

impl Params {
    pub(super) fn from_query(query: Option<&str>) -> Self {
        Self(parse(query.unwrap_or_default().as_bytes()))
    }

    pub(super) fn from_form(headers: &HeaderMap, body: &Bytes) -> Result<Self, OAuthError> {
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !content_type
            .to_ascii_lowercase()
            .starts_with("application/x-www-form-urlencoded")
        {
            return Err(OAuthError::invalid_request(
                "the body must be application/x-www-form-urlencoded",
            ));
        }
        Ok(Self(parse(body)))
    }

    /// A parameter that may appear at most once; empty counts as absent.
    pub(super) fn one(&self, name: &str) -> Result<Option<&str>, OAuthError> {
        let mut values = self.0.iter().filter(|(k, _)| k == name).map(|(_, v)| v);
        let first = values.next();
        if values.next().is_some() {
            return Err(OAuthError::invalid_request(format!(
                "the parameter {name} must not repeat"
            )));
        }
        Ok(first.map(String::as_str).filter(|v| !v.is_empty()))
    }

    pub(super) fn required(&self, name: &str) -> Result<&str, OAuthError> {
        self.one(name)?
            .ok_or_else(|| OAuthError::invalid_request(format!("the parameter {name} is missing")))
    }

    pub(super) fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, v)| k == name && !v.is_empty())
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub(super) fn pairs(&self) -> &[(String, String)] {
        &self.0
    }
}

fn parse(bytes: &[u8]) -> Vec<(String, String)> {
    url::form_urlencoded::parse(bytes).into_owned().collect()
}
