//! The client side of RFC 8693 token exchange: a hop that acts for a person trades
//! the person's token at the issuer for one for the next hop's audience, naming the
//! person as `sub` and this client in `act`.
//!
//! Exchanged tokens are kept per subject token until shortly before they expire,
//! so a person's answer with ten tool calls costs one exchange; concurrent calls
//! for the same subject token share one request. A different subject token (another
//! person, or the same person's next token) never shares an entry: the key is the
//! SHA-256 of the subject token itself, so nothing can cross between people.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::issuer::Issuer;
use crate::oauth_client::discover_token_url;

pub const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";

/// The header in which a hop names the gateway's tool call behind a request, so the
/// backend's audit can tie a write to it (the MCP role sends it, the backend reads it).
pub const TOOL_CALL_HEADER: &str = "maitred-tool-call-id";
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// Entries beyond this are swept of the expired before another is added.
const SWEEP_AT: usize = 4096;

/// Who exchanges, for what.
#[derive(Debug, Clone)]
pub struct ExchangeClient {
    /// Empty: discovered from the issuer's metadata.
    pub token_url: String,
    pub client_id: String,
    pub client_secret: SecretString,
    /// The audience of the tokens asked for (RFC 8707 `resource`).
    pub resource: Option<String>,
    /// Empty: whatever the issuer grants.
    pub scopes: Vec<String>,
}

/// Why an exchange failed: the issuer's refusal (the person's token is expired or
/// revoked, say) is not the same as an issuer that cannot be reached.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    #[error("the issuer refused to exchange the token: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Refused {
        error: String,
        description: Option<String>,
    },
    #[error("{0:#}")]
    Unavailable(anyhow::Error),
}

#[derive(Deserialize)]
struct Issued {
    access_token: String,
    expires_in: Option<u64>,
}

#[derive(Deserialize)]
struct Refusal {
    error: String,
    error_description: Option<String>,
}

struct Cached {
    token: String,
    refresh_at: Instant,
}

type Slot = Arc<tokio::sync::Mutex<Option<Cached>>>;

pub struct Exchanger {
    http: reqwest::Client,
    issuer: Issuer,
    client: ExchangeClient,
    token_url: tokio::sync::OnceCell<String>,
    slots: Mutex<HashMap<[u8; 32], Slot>>,
}

impl std::fmt::Debug for Exchanger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchanger")
            .field("client_id", &self.client.client_id)
            .field("resource", &self.client.resource)
            .finish_non_exhaustive()
    }
}

impl Exchanger {
    pub fn new(http: reqwest::Client, issuer: Issuer, client: ExchangeClient) -> Self {
        Self {
            http,
            issuer,
            client,
            token_url: tokio::sync::OnceCell::new(),
            slots: Mutex::new(HashMap::new()),
        }
    }

    pub fn client_id(&self) -> &str {
        &self.client.client_id
    }

    /// A token for the next hop that acts for `subject_token`'s subject.
    pub async fn token_for(&self, subject_token: &str) -> Result<String, ExchangeError> {
        self.get(subject_token, None).await
    }

    /// After `rejected` was refused by the next hop: exchange again, unless another
    /// caller already has.
    pub async fn refresh(
        &self,
        subject_token: &str,
        rejected: &str,
    ) -> Result<String, ExchangeError> {
        self.get(subject_token, Some(rejected)).await
    }

    /// Forgets what was exchanged for `subject_token` (a person who signed out).
    pub fn forget(&self, subject_token: &str) {
        self.lock().remove(&key(subject_token));
    }

    async fn get(
        &self,
        subject_token: &str,
        rejected: Option<&str>,
    ) -> Result<String, ExchangeError> {
        let slot = self.slot(subject_token);
        let mut cached = slot.lock().await;
        if let Some(c) = cached.as_ref()
            && Instant::now() < c.refresh_at
            && rejected != Some(c.token.as_str())
        {
            return Ok(c.token.clone());
        }
        let issued = self.exchange(subject_token).await?;
        // Renew a tenth of the lifetime early (at least 2 s, at most 30 s).
        let lifetime = Duration::from_secs(issued.expires_in.unwrap_or(60));
        let margin = (lifetime / 10).clamp(Duration::from_secs(2), Duration::from_secs(30));
        *cached = Some(Cached {
            token: issued.access_token.clone(),
            refresh_at: Instant::now() + lifetime.saturating_sub(margin),
        });
        Ok(issued.access_token)
    }

    fn slot(&self, subject_token: &str) -> Slot {
        let mut slots = self.lock();
        if slots.len() >= SWEEP_AT {
            let now = Instant::now();
            slots.retain(|_, slot| {
                // A slot in use (locked) is kept; a settled one only while fresh.
                slot.try_lock()
                    .map_or(true, |c| c.as_ref().is_some_and(|c| c.refresh_at > now))
            });
        }
        slots.entry(key(subject_token)).or_default().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Slot>> {
        self.slots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    async fn exchange(&self, subject_token: &str) -> Result<Issued, ExchangeError> {
        let token_url = self
            .token_url
            .get_or_try_init(|| async {
                if self.client.token_url.is_empty() {
                    discover_token_url(&self.http, &self.issuer).await
                } else {
                    Ok(self.client.token_url.clone())
                }
            })
            .await
            .map_err(ExchangeError::Unavailable)?;
        let mut form = vec![
            ("grant_type", GRANT_TYPE.to_owned()),
            ("subject_token", subject_token.to_owned()),
            ("subject_token_type", ACCESS_TOKEN_TYPE.to_owned()),
            ("requested_token_type", ACCESS_TOKEN_TYPE.to_owned()),
        ];
        if let Some(resource) = &self.client.resource {
            form.push(("resource", resource.clone()));
        }
        if !self.client.scopes.is_empty() {
            form.push(("scope", self.client.scopes.join(" ")));
        }
        let response = self
            .http
            .post(token_url)
            .basic_auth(
                form_encoded(&self.client.client_id),
                Some(form_encoded(self.client.client_secret.expose_secret())),
            )
            .form(&form)
            .send()
            .await
            .context("cannot reach the issuer's token endpoint")
            .map_err(ExchangeError::Unavailable)?;
        let status = response.status();
        if status.is_success() {
            return response
                .json::<Issued>()
                .await
                .context("the issuer's token response is not what RFC 8693 describes")
                .map_err(ExchangeError::Unavailable);
        }
        if status.is_client_error()
            && let Ok(refusal) = response.json::<Refusal>().await
        {
            return Err(ExchangeError::Refused {
                error: refusal.error,
                description: refusal.error_description,
            });
        }
        Err(ExchangeError::Unavailable(anyhow!(
            "the issuer answered the token exchange with HTTP {status}"
        )))
    }
}

fn key(subject_token: &str) -> [u8; 32] {
    Sha256::digest(subject_token.as_bytes()).into()
}

/// RFC 6749 §2.3.1: id and secret are form-urlencoded before Basic encodes them.
fn form_encoded(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}
