//! The issuer's public keys: discovered from its metadata, cached, and fetched again
//! when a token names a key we do not know, at most once per `min_refresh` so a
//! flood of tokens with made-up `kid`s cannot turn into a flood of fetches.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet, KeyAlgorithm};
use serde::Deserialize;
use tokio::sync::{Mutex, RwLock};

use crate::issuer::Issuer;

/// Keys beyond this many in one JWKS are ignored.
const MAX_KEYS: usize = 32;

#[derive(Clone)]
pub struct CachedKey {
    pub key: DecodingKey,
    /// The `alg` the JWK declares, if any; a token must then use exactly it.
    pub alg: Option<String>,
}

#[derive(Default)]
struct Cache {
    jwks_uri: Option<String>,
    keys: HashMap<String, CachedKey>,
    fetched_at: Option<Instant>,
}

pub struct JwksCache {
    http: reqwest::Client,
    issuer: Issuer,
    min_refresh: Duration,
    max_age: Duration,
    cache: RwLock<Cache>,
    refresh: Mutex<()>,
}

#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    #[error("the issuer's keys could not be fetched: {0}")]
    Unavailable(String),
    #[error("the token's signing key {0:?} is not one of the issuer's keys")]
    UnknownKey(String),
}

#[derive(Deserialize)]
struct IssuerMetadata {
    jwks_uri: String,
}

impl JwksCache {
    pub fn new(http: reqwest::Client, issuer: Issuer) -> Self {
        Self {
            http,
            issuer,
            min_refresh: Duration::from_secs(10),
            max_age: Duration::from_secs(3600),
            cache: RwLock::new(Cache::default()),
            refresh: Mutex::new(()),
        }
    }

    pub async fn key(&self, kid: &str) -> Result<CachedKey, JwksError> {
        {
            let cache = self.cache.read().await;
            let fresh = cache
                .fetched_at
                .is_some_and(|at| at.elapsed() < self.max_age);
            if let Some(key) = cache.keys.get(kid)
                && fresh
            {
                return Ok(key.clone());
            }
        }
        let refreshed = self.refresh_if_due().await;
        let cache = self.cache.read().await;
        match (cache.keys.get(kid), refreshed) {
            (Some(key), Ok(())) => Ok(key.clone()),
            // The issuer is down but the key is one we already know: keep serving.
            (Some(key), Err(error)) => {
                tracing::warn!(%error, "using cached issuer keys");
                Ok(key.clone())
            }
            (None, Err(error)) => Err(error),
            (None, Ok(())) => Err(JwksError::UnknownKey(kid.to_owned())),
        }
    }

    /// Single-flight: concurrent callers wait for one fetch instead of each making one.
    async fn refresh_if_due(&self) -> Result<(), JwksError> {
        let _guard = self.refresh.lock().await;
        let (jwks_uri, due) = {
            let cache = self.cache.read().await;
            let due = cache
                .fetched_at
                .is_none_or(|at| at.elapsed() >= self.min_refresh);
            (cache.jwks_uri.clone(), due)
        };
        if !due {
            return Ok(());
        }
        let jwks_uri = match jwks_uri {
            Some(uri) => uri,
            None => self.discover().await?,
        };
        let set: JwkSet = self
            .get_json(&jwks_uri)
            .await
            .map_err(JwksError::Unavailable)?;
        let keys = usable_keys(set);
        tracing::debug!(issuer = %self.issuer.public, keys = keys.len(), "fetched the issuer's JWKS");
        let mut cache = self.cache.write().await;
        cache.jwks_uri = Some(jwks_uri);
        cache.keys = keys;
        cache.fetched_at = Some(Instant::now());
        Ok(())
    }

    async fn discover(&self) -> Result<String, JwksError> {
        let mut last_error = String::new();
        for url in self.issuer.metadata_urls() {
            match self.get_json::<IssuerMetadata>(&url).await {
                Ok(metadata) => return Ok(self.issuer.internalize(&metadata.jwks_uri)),
                Err(error) => last_error = error,
            }
        }
        Err(JwksError::Unavailable(last_error))
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, String> {
        let response = self
            .http
            .get(url)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .map_err(|e| format!("GET {url}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("GET {url}: HTTP {}", response.status()));
        }
        response
            .json::<T>()
            .await
            .map_err(|e| format!("GET {url}: {e}"))
    }
}

/// Only asymmetric keys with a `kid` are usable: a symmetric (`oct`) key published
/// in a JWKS would let anyone who read it mint tokens.
fn usable_keys(set: JwkSet) -> HashMap<String, CachedKey> {
    set.keys
        .into_iter()
        .filter(|jwk| !matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)))
        .filter_map(|jwk| {
            let kid = jwk.common.key_id.clone()?;
            let key = DecodingKey::from_jwk(&jwk).ok()?;
            let alg = jwk.common.key_algorithm.map(key_algorithm_name);
            Some((kid, CachedKey { key, alg }))
        })
        .take(MAX_KEYS)
        .collect()
}

fn key_algorithm_name(alg: KeyAlgorithm) -> String {
    // The serde name is the JOSE name (`RS256`, `EdDSA`, …).
    serde_json::to_value(alg)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

impl std::fmt::Debug for JwksCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwksCache")
            .field("issuer", &self.issuer.public)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::routing::get;
    use serde_json::json;

    use super::*;

    /// An issuer that counts how often its JWKS is fetched.
    async fn issuer(fetches: Arc<AtomicUsize>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let metadata = json!({ "jwks_uri": format!("{url}/jwks") });
        let app = axum::Router::new()
            .route(
                "/.well-known/openid-configuration",
                get(move || async move { axum::Json(metadata) }),
            )
            .route(
                "/jwks",
                get(move || async move {
                    fetches.fetch_add(1, Ordering::SeqCst);
                    axum::Json(json!({ "keys": [
                        { "kty": "OKP", "crv": "Ed25519", "kid": "k1", "alg": "EdDSA",
                          "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" },
                        { "kty": "oct", "kid": "shared", "k": "c2VjcmV0" },
                    ] }))
                }),
            );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        url
    }

    #[tokio::test]
    async fn unknown_kids_cannot_force_a_fetch_storm() {
        let fetches = Arc::new(AtomicUsize::new(0));
        let jwks = JwksCache::new(
            crate::http_client::new().unwrap(),
            Issuer::new(issuer(fetches.clone()).await, None),
        );
        assert!(jwks.key("k1").await.is_ok());
        for n in 0..50 {
            let error = jwks.key(&format!("made-up-{n}")).await.err().unwrap();
            assert!(matches!(error, JwksError::UnknownKey(_)));
        }
        assert!(jwks.key("k1").await.is_ok());
        assert_eq!(
            fetches.load(Ordering::SeqCst),
            1,
            "one fetch, then at most one per 10 s"
        );
    }

    #[tokio::test]
    async fn symmetric_keys_in_a_jwks_are_ignored() {
        let jwks = JwksCache::new(
            crate::http_client::new().unwrap(),
            Issuer::new(issuer(Arc::default()).await, None),
        );
        assert!(matches!(
            jwks.key("shared").await,
            Err(JwksError::UnknownKey(_))
        ));
        assert_eq!(jwks.key("k1").await.unwrap().alg.as_deref(), Some("EdDSA"));
    }

    #[tokio::test]
    async fn an_unreachable_issuer_is_unavailable_not_invalid() {
        let jwks = JwksCache::new(
            crate::http_client::new().unwrap(),
            Issuer::new("http://127.0.0.1:9", None),
        );
        assert!(matches!(
            jwks.key("k1").await,
            Err(JwksError::Unavailable(_))
        ));
    }
}
