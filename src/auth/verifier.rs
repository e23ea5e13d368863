//! Validates bearer JWTs: an allow-listed asymmetric `alg`, a signature by one of the
//! issuer's keys, the expected `iss` and `aud`, `exp`/`nbf` with a small leeway.

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation, decode, decode_header};
use serde::{Deserialize, Serialize};

use super::error::{AuthError, AuthErrorKind};
use super::jwks::{JwksCache, JwksError};
use crate::issuer::Issuer;

#[derive(Debug, Clone)]
pub struct VerifierConfig {
    /// The trusted issuer: `iss` must be its public URL; its keys are discovered.
    pub issuer: Issuer,
    /// This resource server's identifier; tokens must carry it in `aud`.
    pub audience: String,
    /// Never a symmetric algorithm: the keys are public.
    pub algorithms: Vec<Algorithm>,
    pub leeway_secs: u64,
    /// Appended to every `WWW-Authenticate` challenge (e.g. `, resource_metadata="…"`).
    pub challenge_extra: String,
    /// The scopes to name in a 401 challenge, telling a client what to ask for.
    pub scope_hint: Option<String>,
}

impl VerifierConfig {
    pub fn new(issuer: Issuer, audience: impl Into<String>) -> Self {
        Self {
            issuer,
            audience: audience.into(),
            algorithms: vec![
                Algorithm::EdDSA,
                Algorithm::RS256,
                Algorithm::RS384,
                Algorithm::RS512,
                Algorithm::PS256,
                Algorithm::PS384,
                Algorithm::PS512,
                Algorithm::ES256,
                Algorithm::ES384,
            ],
            leeway_secs: 30,
            challenge_extra: String::new(),
            scope_hint: None,
        }
    }
}

/// Who is calling, as the token says.
#[derive(Debug, Clone, Serialize)]
pub struct Principal {
    pub subject: String,
    pub client_id: Option<String>,
    pub scopes: Vec<String>,
    pub roles: Vec<String>,
    pub name: Option<String>,
    pub email: Option<String>,
    pub token_id: Option<String>,
    pub expires_at: i64,
}

impl Principal {
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }

    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r.eq_ignore_ascii_case(role))
    }
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
    exp: i64,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    roles: Vec<String>,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    azp: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    jti: Option<String>,
}

#[derive(Debug)]
pub struct TokenVerifier {
    config: VerifierConfig,
    jwks: JwksCache,
}

impl TokenVerifier {
    pub fn new(http: reqwest::Client, config: VerifierConfig) -> Self {
        let jwks = JwksCache::new(http, config.issuer.clone());
        Self { config, jwks }
    }

    pub fn config(&self) -> &VerifierConfig {
        &self.config
    }

    pub fn error(&self, kind: AuthErrorKind, message: impl Into<String>) -> AuthError {
        AuthError::new(
            kind,
            message,
            &self.config.challenge_extra,
            self.config.scope_hint.as_deref(),
        )
    }

    fn invalid(&self, message: impl Into<String>) -> AuthError {
        self.error(AuthErrorKind::InvalidToken, message)
    }

    pub async fn verify(&self, token: &str) -> Result<Principal, AuthError> {
        let header =
            decode_header(token).map_err(|_| self.invalid("the token is not a well-formed JWT"))?;
        if !self.config.algorithms.contains(&header.alg) {
            return Err(self.invalid(format!(
                "tokens signed with {:?} are not accepted",
                header.alg
            )));
        }
        let kid = header
            .kid
            .ok_or_else(|| self.invalid("the token names no signing key (kid)"))?;
        let key = self.jwks.key(&kid).await.map_err(|error| match error {
            JwksError::Unavailable(detail) => {
                // Warned once per failed fetch by the cache; not again per request.
                tracing::debug!(%detail, "cannot fetch the issuer's keys");
                self.error(
                    AuthErrorKind::IssuerUnavailable,
                    "the identity provider cannot be reached to check the token; try again shortly",
                )
            }
            JwksError::UnknownKey(_) => self.invalid(error.to_string()),
        })?;
        if let Some(alg) = &key.alg
            && serde_json::to_value(header.alg)
                .ok()
                .as_ref()
                .and_then(|v| v.as_str())
                != Some(alg.as_str())
        {
            return Err(self.invalid("the token's alg does not match its key"));
        }

        let mut validation = Validation::new(header.alg);
        validation.leeway = self.config.leeway_secs;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.config.issuer.public]);
        validation.set_audience(&[&self.config.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);

        let data = decode::<Claims>(token, &key.key, &validation).map_err(|error| {
            self.invalid(match error.kind() {
                ErrorKind::ExpiredSignature => "the token has expired".to_owned(),
                ErrorKind::ImmatureSignature => "the token is not valid yet".to_owned(),
                ErrorKind::InvalidIssuer => {
                    format!("the token was not issued by {}", self.config.issuer.public)
                }
                ErrorKind::InvalidAudience => {
                    format!("the token is not meant for {}", self.config.audience)
                }
                ErrorKind::InvalidSignature => "the token's signature is invalid".to_owned(),
                ErrorKind::MissingRequiredClaim(claim) => {
                    format!("the token has no {claim} claim")
                }
                _ => "the token is invalid".to_owned(),
            })
        })?;
        let claims = data.claims;
        Ok(Principal {
            subject: claims.sub,
            client_id: claims.client_id.or(claims.azp),
            scopes: claims
                .scope
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_owned)
                .collect(),
            roles: claims.roles,
            name: claims.name,
            email: claims.email,
            token_id: claims.jti,
            expires_at: claims.exp,
        })
    }

    pub fn require_scope(&self, principal: &Principal, scope: &str) -> Result<(), AuthError> {
        if principal.has_scope(scope) {
            Ok(())
        } else {
            Err(self.error(
                AuthErrorKind::InsufficientScope {
                    required: scope.to_owned(),
                },
                format!("this request needs the scope {scope}"),
            ))
        }
    }
}
