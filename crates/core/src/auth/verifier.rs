//! Validates bearer JWTs: an allow-listed asymmetric `alg`, a signature by one of the
//! issuer's keys, the expected `iss` and `aud`, `exp`/`nbf` with a small leeway (none
//! past `exp` for a delegated token).

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation, decode, decode_header};
use serde::{Deserialize, Serialize};

use super::error::{AuthError, AuthErrorKind};
use super::jwks::{JwksCache, JwksError};
use super::remembered::Remembered;
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
#[derive(Debug, Clone, Serialize, Default)]
pub struct Principal {
    pub subject: String,
    pub client_id: Option<String>,
    pub scopes: Vec<String>,
    pub roles: Vec<String>,
    pub name: Option<String>,
    pub email: Option<String>,
    pub token_id: Option<String>,
    pub expires_at: i64,
    /// RFC 8693 `act`: the clients acting for `subject`, the one that presented the
    /// token first (the newest actor), then whom it acted for. Empty for a token
    /// the subject (a person or a client) holds itself.
    pub actors: Vec<String>,
    /// The subject is a client (its own client-credentials token, or one exchanged
    /// for it), not a person. Decided from the token: an explicit
    /// `subject_type` claim when the issuer sends one, else `sub == client_id`
    /// (RFC 9068 §2.2). Anything else is a person, with or without roles.
    pub client_subject: bool,
    /// The login (`sid`) a person's token descends from, where the issuer names one:
    /// a resource server that can see the issuer's revocations refuses a token of a
    /// revoked login before its `exp`.
    pub login: Option<String>,
}

/// The `subject_type` claim's values: who `sub` is.
pub const SUBJECT_CLIENT: &str = "client";
pub const SUBJECT_PERSON: &str = "person";

impl Principal {
    /// A client acting for itself or for another client: never a person, whatever
    /// roles (none) its token names.
    pub fn is_client(&self) -> bool {
        self.client_subject
    }

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
    #[serde(default)]
    act: Option<Act>,
    #[serde(default)]
    subject_type: Option<String>,
    #[serde(default)]
    sid: Option<String>,
}

/// Whether the claims are about a client: the issuer says so, or (an issuer that
/// does not) the subject is the client that holds the token.
fn client_subject(claims: &Claims) -> bool {
    match claims.subject_type.as_deref() {
        Some(kind) => kind == SUBJECT_CLIENT,
        None => {
            claims.act.is_none()
                && claims.client_id.as_deref().or(claims.azp.as_deref())
                    == Some(claims.sub.as_str())
        }
    }
}

/// An `act` claim: an actor and, nested, whom it acted for.
#[derive(Deserialize)]
struct Act {
    sub: String,
    #[serde(default)]
    act: Option<Box<Act>>,
}

/// Deeper chains than any issuer of ours makes are cut here rather than followed.
const MAX_ACTORS: usize = 8;

fn actors(act: Option<Act>) -> Vec<String> {
    let mut chain = Vec::new();
    let mut next = act;
    while let Some(actor) = next {
        if chain.len() == MAX_ACTORS {
            break;
        }
        chain.push(actor.sub);
        next = actor.act.map(|boxed| *boxed);
    }
    chain
}

#[derive(Debug)]
pub struct TokenVerifier {
    config: VerifierConfig,
    jwks: JwksCache,
    remembered: Remembered,
}

impl TokenVerifier {
    pub fn new(http: reqwest::Client, config: VerifierConfig) -> Self {
        let jwks = JwksCache::new(http, config.issuer.clone());
        Self {
            config,
            jwks,
            remembered: Remembered::default(),
        }
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
        let key = Remembered::key(token);
        let principal = match self.remembered.get(&key, self.config.leeway_secs) {
            Some(principal) => principal,
            None => {
                let principal = self.check(token).await?;
                self.remembered.insert(key, principal.clone());
                principal
            }
        };
        // A delegated token (RFC 8693, with `act`) lives minutes and is exchanged
        // again by the hop before it runs out: it gets no leeway past its `exp`. The
        // leeway is for tokens a caller holds for long (clock skew), not for these.
        if !principal.actors.is_empty() && chrono::Utc::now().timestamp() >= principal.expires_at {
            return Err(self.invalid("the token has expired"));
        }
        Ok(principal)
    }

    /// The whole check of a token not seen before.
    async fn check(&self, token: &str) -> Result<Principal, AuthError> {
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
        let client_subject = client_subject(&claims);
        Ok(Principal {
            client_subject,
            login: claims.sid,
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
            actors: actors(claims.act),
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

#[cfg(test)]
#[expect(clippy::disallowed_methods, reason = "the test starts its own issuer")]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use ed25519_dalek::SigningKey;
    use ed25519_dalek::pkcs8::EncodePrivateKey;
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::{Value, json};

    use super::*;

    const AUDIENCE: &str = "http://resource.test";

    /// An issuer serving one Ed25519 key; returns the verifier that trusts it and
    /// a signer of tokens for it.
    async fn issuer() -> (TokenVerifier, impl Fn(&Value) -> String) {
        let signing = SigningKey::from_bytes(&[7; 32]);
        let x = URL_SAFE_NO_PAD.encode(signing.verifying_key().as_bytes());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let metadata = json!({ "jwks_uri": format!("{url}/jwks") });
        let jwks = json!({ "keys": [
            { "kty": "OKP", "crv": "Ed25519", "kid": "k1", "alg": "EdDSA", "x": x },
        ] });
        let app = axum::Router::new()
            .route(
                "/.well-known/openid-configuration",
                axum::routing::get(move || async move { axum::Json(metadata) }),
            )
            .route(
                "/jwks",
                axum::routing::get(move || async move { axum::Json(jwks) }),
            );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let issuer = Issuer::new(url, None);
        let verifier = TokenVerifier::new(
            crate::http_client::new().unwrap(),
            VerifierConfig::new(issuer.clone(), AUDIENCE),
        );
        let key = EncodingKey::from_ed_der(signing.to_pkcs8_der().unwrap().as_bytes());
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some("k1".into());
        let issuer_url = issuer.public.clone();
        let sign = move |overrides: &Value| {
            let now = chrono::Utc::now().timestamp();
            let mut claims = json!({
                "iss": issuer_url, "aud": AUDIENCE, "sub": "ann", "exp": now + 300,
                "iat": now, "scope": "chat.write",
            });
            for (k, v) in overrides.as_object().unwrap() {
                claims[k] = v.clone();
            }
            jsonwebtoken::encode(&header, &claims, &key).unwrap()
        };
        (verifier, sign)
    }

    /// Swaps one part of a token (0: header, 1: claims, 2: signature) for `part`.
    fn with_part(token: &str, index: usize, part: String) -> String {
        let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
        parts[index] = part;
        parts.join(".")
    }

    #[tokio::test]
    async fn a_remembered_token_does_not_vouch_for_tokens_made_from_it() {
        let (verifier, sign) = issuer().await;
        let token = sign(&json!({}));
        assert_eq!(verifier.verify(&token).await.unwrap().subject, "ann");
        assert_eq!(verifier.remembered.len(), 1);

        let signature = token.rsplit('.').next().unwrap();
        let mut flipped = URL_SAFE_NO_PAD.decode(signature).unwrap();
        flipped[0] ^= 1;
        let claims = |value: Value| URL_SAFE_NO_PAD.encode(value.to_string());
        let exp = chrono::Utc::now().timestamp() + 300;
        let forgeries = [
            (
                "a flipped signature bit",
                with_part(&token, 2, URL_SAFE_NO_PAD.encode(&flipped)),
            ),
            (
                "other claims under its signature",
                with_part(
                    &token,
                    1,
                    claims(
                        json!({ "iss": verifier.config.issuer.public, "aud": AUDIENCE,
                        "sub": "admin", "exp": exp, "scope": "chat.write admin" }),
                    ),
                ),
            ),
            (
                "its claims unsigned",
                with_part(
                    &with_part(
                        &token,
                        0,
                        URL_SAFE_NO_PAD.encode(json!({ "alg": "none", "kid": "k1" }).to_string()),
                    ),
                    2,
                    String::new(),
                ),
            ),
            ("a trailing space inside", format!("{token} ")),
        ];
        for (what, forged) in forgeries {
            let error = verifier.verify(&forged).await.err();
            assert!(error.is_some(), "{what} was accepted");
        }
        assert_eq!(verifier.remembered.len(), 1, "nothing forged is remembered");
        assert_eq!(verifier.verify(&token).await.unwrap().subject, "ann");
    }

    #[tokio::test]
    async fn a_remembered_token_expires_as_if_checked_afresh() {
        let (verifier, sign) = issuer().await;
        let leeway = i64::try_from(verifier.config.leeway_secs).unwrap();
        // Valid for two more seconds, counting the leeway.
        let token = sign(&json!({ "exp": chrono::Utc::now().timestamp() - leeway + 2 }));
        verifier.verify(&token).await.unwrap();
        assert_eq!(verifier.remembered.len(), 1);
        verifier.verify(&token).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(3100)).await;
        let error = verifier.verify(&token).await.unwrap_err();
        assert!(
            format!("{error:?}").contains("expired"),
            "a remembered token past its exp must be refused as expired: {error:?}"
        );
        assert_eq!(verifier.remembered.len(), 0);
    }

    /// Issue 37, finding 8: a delegated token (with `act`) was taken 30 s past its
    /// `exp`, the leeway meant for clock skew; it gets none now, checked afresh or
    /// remembered. A token without `act` keeps the leeway.
    #[tokio::test]
    async fn a_delegated_token_gets_no_leeway_past_its_exp() {
        let (verifier, sign) = issuer().await;
        let now = chrono::Utc::now().timestamp();
        let act = json!({ "sub": "maitred-gateway" });
        let expired = sign(&json!({ "exp": now - 2, "act": act }));
        let error = verifier.verify(&expired).await.unwrap_err();
        assert!(format!("{error:?}").contains("expired"), "{error:?}");
        let own = sign(&json!({ "exp": now - 2 }));
        assert_eq!(verifier.verify(&own).await.unwrap().subject, "ann");
        // Remembered while valid, refused the moment its exp passes.
        let short = sign(&json!({ "exp": now + 2, "act": act }));
        assert_eq!(
            verifier.verify(&short).await.unwrap().actors,
            ["maitred-gateway"]
        );
        tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
        let error = verifier.verify(&short).await.unwrap_err();
        assert!(format!("{error:?}").contains("expired"), "{error:?}");
    }
}
