//! The client side of OAuth 2: asking an issuer for a client-credentials token
//! (RFC 6749 §4.4, with an RFC 8707 `resource`), through the `oauth2` crate.

use anyhow::{Context, anyhow};
use oauth2::basic::BasicClient;
use oauth2::{AuthType, ClientId, ClientSecret, Scope, TokenResponse, TokenUrl};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use secrecy::ExposeSecret;
use serde::Deserialize;

use crate::issuer::Issuer;

#[derive(Debug, Clone)]
pub struct ClientCredentials {
    pub token_url: String,
    pub client_id: String,
    pub client_secret: secrecy::SecretString,
    pub scopes: Vec<String>,
    pub resource: Option<String>,
}

#[derive(Debug, Clone)]
pub struct AccessToken {
    pub token: String,
    pub expires_in: Option<std::time::Duration>,
}

#[derive(Deserialize)]
struct Metadata {
    token_endpoint: String,
}

/// The issuer's token endpoint, from its discovery document.
pub async fn discover_token_url(http: &reqwest::Client, issuer: &Issuer) -> anyhow::Result<String> {
    let mut last_error = None;
    for url in issuer.metadata_urls() {
        let response = http.get(&url).send().await.with_context(|| {
            format!(
                "cannot reach the issuer at {} (is maitred running?)",
                issuer.internal
            )
        })?;
        if response.status().is_success() {
            let metadata = response.json::<Metadata>().await?;
            return issuer
                .endpoint("the issuer's token_endpoint", &metadata.token_endpoint)
                .map_err(Into::into);
        }
        last_error = Some(anyhow!("GET {url}: HTTP {}", response.status()));
    }
    Err(last_error.unwrap_or_else(|| anyhow!("the issuer publishes no metadata")))
}

pub async fn client_credentials(
    http: &reqwest::Client,
    request: &ClientCredentials,
) -> anyhow::Result<AccessToken> {
    let client = BasicClient::new(ClientId::new(request.client_id.clone()))
        .set_client_secret(ClientSecret::new(
            request.client_secret.expose_secret().to_owned(),
        ))
        .set_auth_type(AuthType::BasicAuth)
        .set_token_uri(TokenUrl::new(request.token_url.clone()).context("token URL")?);
    let mut exchange = client
        .exchange_client_credentials()
        .add_scopes(request.scopes.iter().cloned().map(Scope::new));
    if let Some(resource) = &request.resource {
        exchange = exchange.add_extra_param("resource", resource.clone());
    }
    // An owned client per request keeps the future 'static (and so Send everywhere).
    let send = |req: oauth2::HttpRequest| send(http.clone(), req);
    let response = exchange
        .request_async(&send)
        .await
        .map_err(|error| match error {
            oauth2::RequestTokenError::ServerResponse(response) => anyhow!(
                "the issuer refused: {}{}",
                response.error(),
                response
                    .error_description()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            ),
            other => anyhow!("token request failed: {other}"),
        })?;
    Ok(AccessToken {
        token: response.access_token().secret().clone(),
        expires_in: response.expires_in(),
    })
}

/// oauth2's HTTP hook, over our reqwest client.
async fn send(
    http: reqwest::Client,
    request: oauth2::HttpRequest,
) -> Result<oauth2::HttpResponse, reqwest::Error> {
    let (parts, body) = request.into_parts();
    let response = http
        .request(parts.method, parts.uri.to_string())
        .headers(parts.headers)
        .body(body)
        .send()
        .await?;
    let mut builder = axum::http::Response::builder().status(response.status());
    for (name, value) in response.headers() {
        builder = builder.header(name, value);
    }
    let bytes = response.bytes().await?;
    Ok(builder
        .body(bytes.to_vec())
        .unwrap_or_else(|_| axum::http::Response::new(Vec::new())))
}

/// A client-credentials token kept until shortly before it expires. Concurrent
/// callers share one request (the lock is held while fetching), and a caller whose
/// token was refused can force one refresh.
pub struct TokenSource {
    http: reqwest::Client,
    issuer: Issuer,
    request: ClientCredentials,
    cached: tokio::sync::Mutex<Option<Cached>>,
    fetches: Option<Family<TokenFetchLabels, Counter>>,
}

/// A token request a [`TokenSource`] made: why (`first`: none yet; `expiring`: the
/// cached one is due for renewal; `rejected`: the service refused it) and how it
/// went (`ok`, `error`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenFetchLabels {
    pub reason: &'static str,
    pub outcome: &'static str,
}

struct Cached {
    token: String,
    refresh_at: std::time::Instant,
}

impl TokenSource {
    /// `request.token_url` may be empty: it is then discovered from `issuer`.
    pub fn new(http: reqwest::Client, issuer: Issuer, request: ClientCredentials) -> Self {
        Self {
            http,
            issuer,
            request,
            cached: tokio::sync::Mutex::new(None),
            fetches: None,
        }
    }

    /// Counts every request to the issuer on `fetches` (the role registers it).
    pub fn with_metrics(mut self, fetches: Family<TokenFetchLabels, Counter>) -> Self {
        self.fetches = Some(fetches);
        self
    }

    pub fn client_id(&self) -> &str {
        &self.request.client_id
    }

    pub async fn token(&self) -> anyhow::Result<String> {
        let mut cached = self.cached.lock().await;
        if let Some(c) = cached.as_ref()
            && std::time::Instant::now() < c.refresh_at
        {
            return Ok(c.token.clone());
        }
        let reason = if cached.is_some() {
            "expiring"
        } else {
            "first"
        };
        self.fetch(&mut cached, reason).await
    }

    /// After `rejected` was refused (a 401): fetch a new token, unless another caller
    /// already replaced it.
    pub async fn refresh(&self, rejected: &str) -> anyhow::Result<String> {
        let mut cached = self.cached.lock().await;
        if let Some(c) = cached.as_ref()
            && c.token != rejected
        {
            return Ok(c.token.clone());
        }
        self.fetch(&mut cached, "rejected").await
    }

    async fn fetch(
        &self,
        cached: &mut Option<Cached>,
        reason: &'static str,
    ) -> anyhow::Result<String> {
        let result = self.issue(cached).await;
        if let Some(fetches) = &self.fetches {
            let outcome = if result.is_ok() { "ok" } else { "error" };
            fetches
                .get_or_create(&TokenFetchLabels { reason, outcome })
                .inc();
        }
        result
    }

    async fn issue(&self, cached: &mut Option<Cached>) -> anyhow::Result<String> {
        let mut request = self.request.clone();
        if request.token_url.is_empty() {
            request.token_url = discover_token_url(&self.http, &self.issuer).await?;
        }
        let issued = client_credentials(&self.http, &request).await?;
        // Refresh a tenth of the lifetime early (at least 5 s, at most 60 s).
        let lifetime = issued
            .expires_in
            .unwrap_or(std::time::Duration::from_secs(300));
        let margin = (lifetime / 10).clamp(
            std::time::Duration::from_secs(5),
            std::time::Duration::from_secs(60),
        );
        let refresh_at = std::time::Instant::now() + lifetime.saturating_sub(margin);
        tracing::debug!(client_id = %request.client_id, "fetched a client-credentials token");
        *cached = Some(Cached {
            token: issued.token.clone(),
            refresh_at,
        });
        Ok(issued.token)
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

    use axum::routing::post;
    use serde_json::json;

    use super::*;

    /// A token endpoint that counts requests and numbers its tokens.
    async fn issuer(issued: Arc<AtomicUsize>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new().route(
            "/token",
            post(move || async move {
                let n = issued.fetch_add(1, Ordering::SeqCst) + 1;
                // Slow enough that concurrent callers overlap.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                axum::Json(json!({ "access_token": format!("token-{n}"), "token_type": "Bearer", "expires_in": 600 }))
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        url
    }

    fn source(url: &str) -> Arc<TokenSource> {
        Arc::new(TokenSource::new(
            crate::http_client::new().unwrap(),
            Issuer::new(url, None),
            ClientCredentials {
                token_url: format!("{url}/token"),
                client_id: "c".into(),
                client_secret: "s".into(),
                scopes: vec![],
                resource: None,
            },
        ))
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_token_request() {
        let issued = Arc::new(AtomicUsize::new(0));
        let tokens = source(&issuer(issued.clone()).await);
        let handles: Vec<_> = (0..20)
            .map(|_| {
                let tokens = tokens.clone();
                tokio::spawn(async move { tokens.token().await.unwrap() })
            })
            .collect();
        for handle in handles {
            assert_eq!(handle.await.unwrap(), "token-1");
        }
        assert_eq!(issued.load(Ordering::SeqCst), 1);
        assert_eq!(tokens.token().await.unwrap(), "token-1", "cached");
    }

    /// An issuer (on loopback, so its own URL is fine) whose metadata sends the
    /// token requests to `token_endpoint`.
    async fn issuer_naming(token_endpoint: String) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let metadata = json!({ "issuer": url, "token_endpoint": token_endpoint });
        let app = axum::Router::new().route(
            "/.well-known/openid-configuration",
            axum::routing::get(move || async move { axum::Json(metadata) }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        url
    }

    /// Finding 1 of issue 37, at run time: an issuer's metadata names a plain-http
    /// token endpoint on another host. In production the gateway's client secret and
    /// a person's token would be posted there in the clear; neither a token request
    /// nor an exchange is made. (The sink is this machine reached as `0.0.0.0`, an
    /// address that is not loopback by its name: it stands for a remote host, and
    /// shows that without the rule the secrets do arrive.)
    #[tokio::test]
    async fn production_posts_no_secret_to_a_plain_http_endpoint_from_metadata() {
        use crate::delegation::{ExchangeClient, Exchanger};
        use crate::settings::UrlPolicy;

        let received = Arc::new(AtomicUsize::new(0));
        let sink = issuer(received.clone()).await;
        let port = url::Url::parse(&sink).unwrap().port().unwrap();
        let far = format!("http://0.0.0.0:{port}/token");
        let url = issuer_naming(far.clone()).await;
        let sources = |policy: UrlPolicy| {
            let issuer = Issuer::new(&url, None).with_policy(policy);
            let own = TokenSource::new(
                crate::http_client::new().unwrap(),
                issuer.clone(),
                ClientCredentials {
                    token_url: String::new(),
                    client_id: "gateway".into(),
                    client_secret: "the-gateway-secret".into(),
                    scopes: vec![],
                    resource: None,
                },
            );
            let exchanger = Exchanger::new(
                crate::http_client::new().unwrap(),
                issuer,
                ExchangeClient {
                    token_url: String::new(),
                    client_id: "gateway".into(),
                    client_secret: "the-gateway-secret".into(),
                    resource: None,
                    scopes: vec![],
                },
            );
            (own, exchanger)
        };

        let (own, exchanger) = sources(UrlPolicy::production(&[]));
        let refused = format!("{:#}", own.token().await.unwrap_err());
        assert!(
            refused.contains("token_endpoint") && refused.contains(&far),
            "{refused}"
        );
        let refused = exchanger
            .token_for("a-persons-access-token")
            .await
            .unwrap_err()
            .to_string();
        assert!(refused.contains("https"), "{refused}");
        assert_eq!(received.load(Ordering::SeqCst), 0, "nothing was sent");

        // The operator's acknowledgement of that very origin lets it through.
        let (own, _) = sources(UrlPolicy::production(&[format!("http://0.0.0.0:{port}")]));
        assert_eq!(own.token().await.unwrap(), "token-1");
        // As does dev mode: the refusal above is the rule, not a dead address.
        let (_, exchanger) = sources(UrlPolicy::permissive());
        assert_eq!(
            exchanger.token_for("a-persons-access-token").await.unwrap(),
            "token-2"
        );
        assert_eq!(received.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_refused_token_is_replaced_once_however_many_callers_saw_it_refused() {
        let issued = Arc::new(AtomicUsize::new(0));
        let tokens = source(&issuer(issued.clone()).await);
        let first = tokens.token().await.unwrap();
        let handles: Vec<_> = (0..10)
            .map(|_| {
                let tokens = tokens.clone();
                let first = first.clone();
                tokio::spawn(async move { tokens.refresh(&first).await.unwrap() })
            })
            .collect();
        for handle in handles {
            assert_eq!(handle.await.unwrap(), "token-2");
        }
        assert_eq!(issued.load(Ordering::SeqCst), 2);
    }
}
