//! The MCP role: the restaurant's tools over MCP (Streamable HTTP at `/mcp`, or
//! stdio), as an OAuth 2 resource server that calls the backend with its own token.
//!
//! A call goes one way: `server` checks the scope and hands it to the tool's
//! [`catalogue::Entry`], which runs the step the entry declares (if any), parses the
//! arguments, runs the handler in `tools` (or `availability`), and returns its result
//! as structured content; `tools` calls the backend through `backend`, reading its
//! answers straight into the backend crate's model types.
//!
//! Adding a tool:
//! 1. its arguments: a `Deserialize + JsonSchema` struct in `args` (the input schema);
//! 2. its handler: `async fn(BackendClient, Args) -> Result<Out, Refusal>` in `tools`,
//!    `Out` being `Serialize + JsonSchema` (the output schema), a backend model type
//!    where it returns the backend's records;
//! 3. one entry in `catalogue::catalogue`: `entry(name, title, effect, description,
//!    handler)` (`reporting_entry` for a handler that also takes `Progress` steps),
//!    and `.first(step)` when something must happen before the handler, as
//!    `createBooking` asks for a missing guest; `job_entry` for a long tool given the
//!    whole call, which may answer it with a task (`getMonthReport`, in `report`,
//!    on `tasks`). The server needs no change.

mod access;
mod args;
mod audit;
mod availability;
mod backend;
mod booking_guest;
mod call;
pub mod catalogue;
mod error;
mod guest_form;
mod metrics;
mod progress;
mod report;
mod sealed_state;
mod server;
mod spans;
mod tasks;
mod tools;

use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::routing::get;
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use secrecy::SecretString;
use tokio_util::sync::CancellationToken;

pub use access::SessionOwners;
pub use server::{Access, McpServer};

use backend::BackendClient;
use maitred_core::auth::{TokenVerifier, VerifierConfig};
use maitred_core::delegation::{ExchangeClient, Exchanger};
use maitred_core::dev::DevCredentials;
use maitred_core::http;
use maitred_core::metrics::Metrics;
use maitred_core::oauth_client::{ClientCredentials, TokenSource};
use maitred_core::settings::Mode;
use maitred_core::settings::{API_PREFIX, Settings};
use metrics::McpMetrics;
use sealed_state::StateSeal;

/// The MCP role's own client secret at the issuer.
fn client_secret(settings: &Settings) -> anyhow::Result<SecretString> {
    let role = &settings.mcp;
    Ok(match (&role.client_secret, settings.mode) {
        (Some(secret), _) => secret.clone(),
        (None, Mode::Dev) => DevCredentials::load(&settings.data_dir)?
            .client_secret(&role.client_id)
            .map(SecretString::from)
            .with_context(|| format!("no dev secret for client {}", role.client_id))?,
        (None, Mode::Production) => anyhow::bail!(
            "the MCP role needs MAITRED_MCP_CLIENT_SECRET (its client secret at the issuer)"
        ),
    })
}

/// The backend client with the MCP role's own credentials: its client-credentials
/// token, and, when callers come with tokens (`delegates`), the same client's token
/// exchange to act for their person.
fn backend_client(
    settings: &Settings,
    secret: SecretString,
    http: reqwest::Client,
    metrics: &McpMetrics,
    delegates: bool,
) -> anyhow::Result<BackendClient> {
    let role = &settings.mcp;
    let scopes = vec!["backend.read".to_owned(), "backend.write".to_owned()];
    let exchanger = delegates.then(|| {
        Exchanger::new(
            http.clone(),
            settings.issuer_location(),
            ExchangeClient {
                token_url: String::new(),
                client_id: role.client_id.clone(),
                client_secret: secret.clone(),
                resource: Some(settings.backend_resource()),
                scopes: Vec::new(),
            },
        )
    });
    let tokens = TokenSource::new(
        http.clone(),
        settings.issuer_location(),
        ClientCredentials {
            token_url: String::new(),
            client_id: role.client_id.clone(),
            client_secret: secret,
            scopes,
            resource: Some(settings.backend_resource()),
        },
    )
    .with_metrics(metrics.token_requests.clone());
    Ok(BackendClient::new(
        http,
        format!("{}{API_PREFIX}", role.backend_url),
        tokens,
        exchanger,
        role.backend_timeout,
        metrics.backend_requests.clone(),
    ))
}

/// The MCP role's router: `/mcp`, its protected-resource metadata, health.
pub fn router(
    settings: &Settings,
    http: reqwest::Client,
    shutdown: CancellationToken,
) -> anyhow::Result<Router> {
    let metrics = Metrics::for_scrapes_with(settings.metrics_token.as_ref());
    let mcp_metrics = McpMetrics::register(&metrics);
    let secret = client_secret(settings)?;
    let seal = StateSeal::from_secret(&secret);
    let server = McpServer::new(
        backend_client(settings, secret, http.clone(), &mcp_metrics, true)?,
        Access::Token,
        mcp_metrics,
        seal,
        settings.mcp.report_step_delay,
        settings.mcp.caps,
        shutdown.child_token(),
    );
    let resource = settings.mcp_resource();
    let metadata_url = format!(
        "{}/.well-known/oauth-protected-resource/mcp",
        settings.mcp.endpoint.public_url
    );
    let mut verifier_config = VerifierConfig::new(settings.issuer_location(), resource.clone());
    verifier_config.challenge_extra = format!(", resource_metadata=\"{metadata_url}\"");
    verifier_config.scope_hint = Some(format!(
        "{} {}",
        catalogue::READ_SCOPE,
        catalogue::WRITE_SCOPE
    ));
    let verifier = Arc::new(TokenVerifier::new(http.clone(), verifier_config));

    let owners = SessionOwners::new(
        settings.mcp.caps.sessions_per_caller,
        settings.mcp.caps.sessions_in_all,
    );
    let sessions = access::OwnedSessions::new(LocalSessionManager::default(), owners.clone());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(settings.mcp.allowed_hosts.clone())
        .with_allowed_origins(settings.mcp.allowed_origins.clone())
        .with_json_response(true)
        .with_cancellation_token(shutdown.child_token());
    let service = StreamableHttpService::new(
        {
            let server = server.clone();
            move || Ok(server.clone())
        },
        Arc::new(sessions),
        config,
    );
    // Layers run outermost last: token, then session ownership, then tool scopes.
    let mcp = Router::new()
        .route_service("/mcp", service)
        .layer(from_fn_with_state(
            (server, verifier.clone()),
            access::require_tool_scope,
        ))
        .layer(from_fn_with_state(owners, access::bind_sessions))
        .layer(from_fn_with_state(
            (verifier, Arc::from(settings.mcp.trusted_actors.clone())),
            access::require_token,
        ));

    let metadata = Arc::new(access::resource_metadata(&resource, settings.issuer()));
    let discovery = Router::new()
        .route(
            "/.well-known/oauth-protected-resource",
            get(access::metadata_document),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(access::metadata_document),
        )
        .with_state(metadata);
    let health = http::health::routes(http::health::upstream(
        http,
        "the backend",
        format!("{}/readyz", settings.mcp.backend_url),
    ));
    Ok(http::middleware::wrap(
        mcp.merge(discovery).merge(health),
        &metrics,
        &settings.trusted_proxies,
        &settings.trace_callers,
    ))
}

/// `maitred mcp --stdio`: the same tools for a desktop client that started us.
pub async fn serve_stdio(settings: &Settings, http: reqwest::Client) -> anyhow::Result<()> {
    // Nothing scrapes a stdio server; the series are kept all the same.
    let metrics = McpMetrics::register(&Metrics::new());
    let secret = client_secret(settings)?;
    let seal = StateSeal::from_secret(&secret);
    let server = McpServer::new(
        backend_client(settings, secret, http, &metrics, false)?,
        Access::Local,
        metrics,
        seal,
        settings.mcp.report_step_delay,
        settings.mcp.caps,
        CancellationToken::new(),
    );
    tracing::info!("serving MCP over stdio");
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .context("starting the MCP stdio server")?;
    let reason = running.waiting().await.context("serving MCP over stdio")?;
    tracing::info!(?reason, "MCP stdio session ended");
    Ok(())
}
