//! Why a request was not let in, with the `WWW-Authenticate` challenge to send back.
//! Each role turns this into its own error envelope.

use axum::http::{HeaderValue, StatusCode};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthErrorKind {
    /// No bearer token at all: the challenge carries no error code (RFC 6750 §3.1).
    MissingToken,
    /// A token that cannot be trusted: bad signature, wrong issuer or audience, expired…
    InvalidToken,
    /// A valid token without the scope this request needs.
    InsufficientScope { required: String },
    /// The issuer's keys could not be fetched, so no token can be checked right now.
    IssuerUnavailable,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct AuthError {
    pub kind: AuthErrorKind,
    pub message: String,
    pub challenge: HeaderValue,
}

impl AuthError {
    /// `extra` is appended to every challenge; `scope_hint` (the scopes a token for
    /// this resource should carry) to those without an insufficient-scope error.
    pub(crate) fn new(
        kind: AuthErrorKind,
        message: impl Into<String>,
        extra: &str,
        scope_hint: Option<&str>,
    ) -> Self {
        let message = message.into();
        let mut challenge = String::from("Bearer realm=\"maitred\"");
        match &kind {
            AuthErrorKind::MissingToken => {}
            AuthErrorKind::InvalidToken | AuthErrorKind::IssuerUnavailable => {
                challenge.push_str(", error=\"invalid_token\", error_description=\"");
                challenge.push_str(&quote_safe(&message));
                challenge.push('"');
            }
            AuthErrorKind::InsufficientScope { required } => {
                challenge.push_str(", error=\"insufficient_scope\", scope=\"");
                challenge.push_str(&quote_safe(required));
                challenge.push('"');
            }
        }
        if let Some(scope) = scope_hint
            && !matches!(kind, AuthErrorKind::InsufficientScope { .. })
        {
            challenge.push_str(", scope=\"");
            challenge.push_str(&quote_safe(scope));
            challenge.push('"');
        }
        challenge.push_str(extra);
        let challenge = HeaderValue::from_str(&challenge)
            .unwrap_or_else(|_| HeaderValue::from_static("Bearer realm=\"maitred\""));
        Self {
            kind,
            message,
            challenge,
        }
    }

    pub fn status(&self) -> StatusCode {
        match self.kind {
            AuthErrorKind::MissingToken | AuthErrorKind::InvalidToken => StatusCode::UNAUTHORIZED,
            AuthErrorKind::InsufficientScope { .. } => StatusCode::FORBIDDEN,
            AuthErrorKind::IssuerUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// Header values must be visible ASCII; quotes and backslashes would end the quoted string.
fn quote_safe(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_ascii() && !c.is_ascii_control() && *c != '"' && *c != '\\')
        .collect()
}

/// The plain OAuth rendering, for roles that have no envelope of their own.
impl axum::response::IntoResponse for AuthError {
    fn into_response(self) -> axum::response::Response {
        let code = match self.kind {
            AuthErrorKind::MissingToken | AuthErrorKind::InvalidToken => "invalid_token",
            AuthErrorKind::InsufficientScope { .. } => "insufficient_scope",
            AuthErrorKind::IssuerUnavailable => "temporarily_unavailable",
        };
        (
            self.status(),
            [(axum::http::header::WWW_AUTHENTICATE, self.challenge)],
            axum::Json(serde_json::json!({ "error": code, "error_description": self.message })),
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_follow_rfc_6750() {
        let missing = AuthError::new(AuthErrorKind::MissingToken, "no token", "", None);
        assert_eq!(missing.challenge, "Bearer realm=\"maitred\"");
        assert_eq!(missing.status(), StatusCode::UNAUTHORIZED);

        let scope = AuthError::new(
            AuthErrorKind::InsufficientScope {
                required: "backend.write".into(),
            },
            "needs backend.write",
            "",
            Some("backend.read"),
        );
        assert_eq!(
            scope.challenge,
            "Bearer realm=\"maitred\", error=\"insufficient_scope\", scope=\"backend.write\""
        );
        assert_eq!(scope.status(), StatusCode::FORBIDDEN);

        let invalid = AuthError::new(AuthErrorKind::InvalidToken, "bad \"sig\"\n", "", None);
        assert_eq!(
            invalid.challenge,
            "Bearer realm=\"maitred\", error=\"invalid_token\", error_description=\"bad sig\""
        );

        let hinted = AuthError::new(
            AuthErrorKind::MissingToken,
            "no token",
            ", resource_metadata=\"https://x/.well-known/oauth-protected-resource/mcp\"",
            Some("mcp.read mcp.write"),
        );
        assert_eq!(
            hinted.challenge,
            "Bearer realm=\"maitred\", scope=\"mcp.read mcp.write\", resource_metadata=\"https://x/.well-known/oauth-protected-resource/mcp\""
        );
    }
}
