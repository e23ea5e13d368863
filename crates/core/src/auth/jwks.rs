//! The issuer's public keys: discovered from its metadata, cached, and fetched again
//! when a token names a key we do not know, at most once per `min_refresh` so a
//! flood of tokens with made-up `kid`s cannot turn into a flood of fetches.
//!
//! While the issuer cannot be reached, a failed fetch is remembered and not tried
//! again for a back-off (1 s, doubling to 30 s): cached keys keep being served, and
//! a token whose key is not cached fails at once as "unavailable" instead of every
//! request waiting out its own fetch timeout in turn.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet, KeyAlgorithm};
use serde::Deserialize;
use tokio::sync::{Mutex, MutexGuard, RwLock};

use crate::issuer::Issuer;

/// Keys beyond this many in one JWKS are ignored.
const MAX_KEYS: usize = 32;
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

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
    /// The last fetch failed: why, how many in a row, and when to try again.
    failure: Option<Failure>,
}

struct Failure {
    error: String,
    in_a_row: u32,
    retry_at: Instant,
}

pub struct JwksCache {
    http: reqwest::Client,
    issuer: Issuer,
    min_refresh: Duration,
    max_age: Duration,
    /// How long one fetch (discovery and JWKS together) may take.
    fetch_timeout: Duration,
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

/// A failed GET: `answered` when the issuer replied (with an error status or a bad
/// body), as opposed to not being reachable at all.
struct FetchError {
    message: String,
    answered: bool,
}

/// The wait after `in_a_row` failed fetches: 1 s, 2 s, 4 s, … at most 30 s.
fn backoff(in_a_row: u32) -> Duration {
    FIRST_BACKOFF
        .saturating_mul(1 << in_a_row.saturating_sub(1).min(16))
        .min(MAX_BACKOFF)
}

impl JwksCache {
    pub fn new(http: reqwest::Client, issuer: Issuer) -> Self {
        Self {
            http,
            issuer,
            min_refresh: Duration::from_secs(10),
            max_age: Duration::from_secs(3600),
            fetch_timeout: Duration::from_secs(5),
            cache: RwLock::new(Cache::default()),
            refresh: Mutex::new(()),
        }
    }

    pub async fn key(&self, kid: &str) -> Result<CachedKey, JwksError> {
        let cached = {
            let cache = self.cache.read().await;
            let fresh = cache
                .fetched_at
                .is_some_and(|at| at.elapsed() < self.max_age);
            match cache.keys.get(kid) {
                Some(key) if fresh => return Ok(key.clone()),
                found => found.cloned(),
            }
        };
        // A key we know, only stale: whoever holds the lock is refreshing already,
        // and nobody needs to wait for it.
        let guard = match (&cached, self.refresh.try_lock()) {
            (_, Ok(guard)) => guard,
            (Some(key), Err(_)) => return Ok(key.clone()),
            (None, Err(_)) => self.refresh.lock().await,
        };
        let refreshed = self.refresh_if_due(guard).await;
        let cache = self.cache.read().await;
        match (cache.keys.get(kid), refreshed) {
            (Some(key), Ok(())) => Ok(key.clone()),
            // The issuer is down but the key is one we already know: keep serving.
            (Some(key), Err(error)) => {
                tracing::debug!(%error, "using cached issuer keys");
                Ok(key.clone())
            }
            (None, Err(error)) => Err(error),
            (None, Ok(())) => Err(JwksError::UnknownKey(kid.to_owned())),
        }
    }

    /// Single-flight (the caller holds `refresh`): concurrent callers wait for one
    /// fetch instead of each making one, and after a failure they fail at once.
    async fn refresh_if_due(&self, _guard: MutexGuard<'_, ()>) -> Result<(), JwksError> {
        let jwks_uri = {
            let cache = self.cache.read().await;
            let due = cache
                .fetched_at
                .is_none_or(|at| at.elapsed() >= self.min_refresh);
            if !due {
                return Ok(());
            }
            if let Some(failure) = &cache.failure {
                let now = Instant::now();
                if now < failure.retry_at {
                    return Err(JwksError::Unavailable(format!(
                        "{} (trying again in {} s)",
                        failure.error,
                        (failure.retry_at - now).as_secs().max(1)
                    )));
                }
            }
            cache.jwks_uri.clone()
        };
        let fetched = tokio::time::timeout(self.fetch_timeout, self.fetch(jwks_uri))
            .await
            .unwrap_or_else(|_| {
                Err(FetchError {
                    message: format!(
                        "the issuer {} did not answer within {} s",
                        self.issuer.internal,
                        self.fetch_timeout.as_secs_f32()
                    ),
                    answered: false,
                })
            })
            .map_err(|error| error.message);
        let mut cache = self.cache.write().await;
        match fetched {
            Ok((jwks_uri, keys)) => {
                tracing::debug!(issuer = %self.issuer.public, keys = keys.len(), "fetched the issuer's JWKS");
                cache.jwks_uri = Some(jwks_uri);
                cache.keys = keys;
                cache.fetched_at = Some(Instant::now());
                cache.failure = None;
                Ok(())
            }
            Err(error) => {
                let in_a_row = cache.failure.as_ref().map_or(0, |f| f.in_a_row) + 1;
                let wait = backoff(in_a_row);
                tracing::warn!(
                    %error,
                    in_a_row,
                    retry_in_secs = wait.as_secs(),
                    "cannot fetch the issuer's keys"
                );
                cache.failure = Some(Failure {
                    error: error.clone(),
                    in_a_row,
                    retry_at: Instant::now() + wait,
                });
                Err(JwksError::Unavailable(error))
            }
        }
    }

    /// Discovery (when the JWKS URI is not known yet) and the JWKS.
    async fn fetch(
        &self,
        jwks_uri: Option<String>,
    ) -> Result<(String, HashMap<String, CachedKey>), FetchError> {
        let jwks_uri = match jwks_uri {
            Some(uri) => uri,
            None => self.discover().await?,
        };
        let set: JwkSet = self.get_json(&jwks_uri).await?;
        Ok((jwks_uri, usable_keys(set)))
    }

    async fn discover(&self) -> Result<String, FetchError> {
        let mut last_error = FetchError {
            message: "the issuer has no metadata document".to_owned(),
            answered: false,
        };
        for url in self.issuer.metadata_urls() {
            match self.get_json::<IssuerMetadata>(&url).await {
                // Keys over plain http could be swapped on the way: held to the
                // same rule as the URLs that carry tokens.
                Ok(metadata) => {
                    return self
                        .issuer
                        .endpoint("the issuer's jwks_uri", &metadata.jwks_uri)
                        .map_err(|refused| FetchError {
                            message: refused.to_string(),
                            answered: true,
                        });
                }
                // Unreachable: the other document is on the same host, so don't wait twice.
                Err(error) if !error.answered => return Err(error),
                Err(error) => last_error = error,
            }
        }
        Err(last_error)
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, FetchError> {
        let response = self
            .http
            .get(url)
            .timeout(self.fetch_timeout)
            .send()
            .await
            .map_err(|e| FetchError {
                message: format!("GET {url}: {e}"),
                answered: false,
            })?;
        if !response.status().is_success() {
            return Err(FetchError {
                message: format!("GET {url}: HTTP {}", response.status()),
                answered: true,
            });
        }
        response.json::<T>().await.map_err(|e| FetchError {
            message: format!("GET {url}: {e}"),
            answered: true,
        })
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
#[expect(
    clippy::disallowed_methods,
    reason = "tests start their own servers and concurrent callers"
)]
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

    /// An issuer that accepts connections and never answers; counts them.
    async fn black_hole(accepts: Arc<AtomicUsize>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                accepts.fetch_add(1, Ordering::SeqCst);
                held.push(socket);
            }
        });
        url
    }

    fn quick(issuer: String) -> JwksCache {
        let mut jwks = JwksCache::new(
            crate::http_client::new().unwrap(),
            Issuer::new(issuer, None),
        );
        jwks.fetch_timeout = Duration::from_millis(300);
        jwks
    }

    #[test]
    fn the_backoff_doubles_up_to_thirty_seconds() {
        let waits: Vec<u64> = (1..=8).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }

    #[tokio::test]
    async fn a_down_issuer_is_asked_once_per_backoff_window() {
        let accepts = Arc::new(AtomicUsize::new(0));
        let jwks = quick(black_hole(accepts.clone()).await);
        let unavailable =
            |r: &Result<CachedKey, JwksError>| matches!(r, Err(JwksError::Unavailable(_)));

        // Twenty verifications at once: one fetch between them, and all fail with it.
        let results = futures::future::join_all((0..20).map(|_| jwks.key("k1"))).await;
        assert!(results.iter().all(unavailable));
        assert_eq!(accepts.load(Ordering::SeqCst), 1, "one fetch for the burst");

        // Twenty more one after another, inside the back-off: they do not ask the
        // issuer, so none waits out the fetch timeout (twenty would take 6 s).
        let started = Instant::now();
        for _ in 0..20 {
            assert!(unavailable(&jwks.key("k1").await));
        }
        assert!(
            started.elapsed() < jwks.fetch_timeout * 5,
            "failing fast took {:?}",
            started.elapsed()
        );
        assert_eq!(
            accepts.load(Ordering::SeqCst),
            1,
            "no fetch during the back-off"
        );

        // The window passes: one more fetch for the next burst, then a window twice as long.
        if let Some(failure) = jwks.cache.write().await.failure.as_mut() {
            failure.retry_at = Instant::now();
        }
        let results = futures::future::join_all((0..20).map(|_| jwks.key("k1"))).await;
        assert!(results.iter().all(unavailable));
        assert_eq!(accepts.load(Ordering::SeqCst), 2);
        let cache = jwks.cache.read().await;
        let failure = cache.failure.as_ref().unwrap();
        assert_eq!(failure.in_a_row, 2);
        assert!(failure.retry_at > Instant::now() + Duration::from_millis(1500));
    }

    #[tokio::test]
    async fn cached_keys_are_served_while_the_issuer_is_down() {
        let fetches = Arc::new(AtomicUsize::new(0));
        let accepts = Arc::new(AtomicUsize::new(0));
        let mut jwks = quick(issuer(fetches.clone()).await);
        // Every verification would refresh: the worst case for an outage.
        jwks.max_age = Duration::ZERO;
        jwks.min_refresh = Duration::ZERO;
        assert!(jwks.key("k1").await.is_ok());
        // The issuer stops answering.
        jwks.cache.write().await.jwks_uri =
            Some(format!("{}/jwks", black_hole(accepts.clone()).await));

        let results = futures::future::join_all((0..20).map(|_| jwks.key("k1"))).await;
        assert!(
            results.iter().all(Result::is_ok),
            "the cached key is still served"
        );
        for _ in 0..20 {
            assert!(jwks.key("k1").await.is_ok());
        }
        assert!(matches!(
            jwks.key("not-cached").await,
            Err(JwksError::Unavailable(_))
        ));
        assert_eq!(
            accepts.load(Ordering::SeqCst),
            1,
            "one fetch for the whole outage so far"
        );
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
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
