//! The client side of OAuth 2: asking an issuer for a client-credentials token
//! (RFC 6749 §4.4, with an RFC 8707 `resource`), through the `oauth2` crate.

use anyhow::{Context, anyhow};
use oauth2::basic::BasicClient;
use oauth2::{AuthType, ClientId, ClientSecret, Scope, TokenResponse, TokenUrl};
use serde::Deserialize;

#[derive(Debug, Clone)]
pub struct ClientCredentials {
    pub token_url: String,
    pub client_id: String,
    pub client_secret: String,
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
pub async fn discover_token_url(http: &reqwest::Client, issuer: &str) -> anyhow::Result<String> {
    let url = format!("{issuer}/.well-known/openid-configuration");
    let response =
        http.get(&url).send().await.with_context(|| {
            format!("cannot reach the issuer at {issuer} (is maitred running?)")
        })?;
    if !response.status().is_success() {
        anyhow::bail!("GET {url}: HTTP {}", response.status());
    }
    Ok(response.json::<Metadata>().await?.token_endpoint)
}

pub async fn client_credentials(
    http: &reqwest::Client,
    request: &ClientCredentials,
) -> anyhow::Result<AccessToken> {
    let client = BasicClient::new(ClientId::new(request.client_id.clone()))
        .set_client_secret(ClientSecret::new(request.client_secret.clone()))
        .set_auth_type(AuthType::BasicAuth)
        .set_token_uri(TokenUrl::new(request.token_url.clone()).context("token URL")?);
    let mut exchange = client
        .exchange_client_credentials()
        .add_scopes(request.scopes.iter().cloned().map(Scope::new));
    if let Some(resource) = &request.resource {
        exchange = exchange.add_extra_param("resource", resource.clone());
    }
    let send = |req: oauth2::HttpRequest| send(http, req);
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
    http: &reqwest::Client,
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
