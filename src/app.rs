//! Assembling roles from settings: the database, the routers, the listeners. `main`
//! calls `run`; tests call the builders directly to start roles on port 0.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use axum::Router;

use crate::auth::{TokenVerifier, VerifierConfig};
use crate::backend::{self, BackendState, seed};
use crate::cli::{Cli, Command, Mode, TokenArgs};
use crate::config::{API_PREFIX, Settings};
use crate::db::Db;
use crate::identity::{self, Identity};
use crate::metrics::{Metrics, PoolCollector};
use crate::{gateway, http, http_client, mcp, oauth_client, shutdown};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Connects, migrates and (in dev mode) seeds.
pub async fn prepare_database(settings: &Settings) -> anyhow::Result<Db> {
    open_database(settings, true).await
}

/// Connects and migrates; seeds in dev mode when `seed` (the backend's data is the
/// backend's to create: other roles sharing the database leave it alone).
async fn open_database(settings: &Settings, seed: bool) -> anyhow::Result<Db> {
    let db = Db::connect(&settings.database_url).await?;
    db.migrate().await?;
    if seed && settings.mode == Mode::Dev {
        if seed::seed_if_empty(&db).await? {
            tracing::info!("seeded the empty database with the demo restaurant");
        }
        let added = seed::ensure_opening_hours(&db).await?;
        if added > 0 {
            tracing::info!(periods = added, "added opening hours for the coming days");
        }
    }
    Ok(db)
}

/// The backend role's whole router; the banner lists dev credentials, if any.
pub async fn backend_router(
    settings: &Settings,
    db: Db,
    http: reqwest::Client,
) -> anyhow::Result<(Router, Option<String>)> {
    let verifier = Arc::new(TokenVerifier::new(
        http,
        VerifierConfig::new(settings.issuer_location(), settings.backend_resource()),
    ));
    let api = backend::router(
        BackendState {
            db: db.clone(),
            verifier,
        },
        settings.body_limit,
    );
    let metrics = Metrics::new();
    metrics.register_collector(PoolCollector(db.clone()));
    let mut router = http::health::routes(http::health::database(db.clone())).merge(api);
    let mut banner = None;
    if settings.builtin_identity() {
        let (identity, dev_banner) = Identity::start(settings, db).await?;
        router = router.merge(identity::router(identity));
        banner = dev_banner;
    }
    Ok((
        http::middleware::wrap(router, &metrics, &settings.trusted_proxies),
        banner,
    ))
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let settings = Settings::from_args(&cli.global, &cli.gateway)?;
    match cli.command.unwrap_or(Command::All) {
        Command::All => serve(&settings, Roles::All).await,
        Command::Backend => serve(&settings, Roles::Backend).await,
        Command::Mcp(args) if args.stdio => mcp::serve_stdio(&settings, http_client::new()?).await,
        Command::Mcp(_) => serve(&settings, Roles::Mcp).await,
        Command::Gateway => serve(&settings, Roles::Gateway).await,
        Command::Migrate => {
            let db = Db::connect(&settings.database_url).await?;
            db.migrate().await?;
            tracing::info!("migrations applied");
            db.close().await;
            Ok(())
        }
        Command::Token(args) => print_token(&settings, &args).await,
        Command::ScriptedLlm(args) => {
            let addr = SocketAddr::new(settings.bind, args.port);
            crate::scripted_llm::serve_from_file(&args.script, addr).await
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Roles {
    All,
    Backend,
    Mcp,
    Gateway,
}

async fn serve(settings: &Settings, roles: Roles) -> anyhow::Result<()> {
    settings.check()?;
    if settings.mode == Mode::Production && settings.database_url.starts_with("sqlite:") {
        tracing::warn!(
            "production mode on SQLite: fine for one process, use PostgreSQL to scale out"
        );
    }
    let shutdown = shutdown::on_signal();
    let http = http_client::new()?;
    let mut servers = tokio::task::JoinSet::new();
    let db = if roles == Roles::Mcp {
        None
    } else {
        Some(open_database(settings, roles != Roles::Gateway).await?)
    };
    let tasks = TaskTracker::new();
    let grace = crate::gateway::config::Resilience::secs(
        settings.gateway_role.file.resilience.shutdown_grace_secs,
    ) + std::time::Duration::from_secs(5);
    // In one process, answers finishing at shutdown still call the backend and MCP
    // roles: those stop only once the gateway's answers have ended.
    let upstream_shutdown = if roles == Roles::All {
        let upstream = CancellationToken::new();
        tokio::spawn({
            let (shutdown, upstream, tasks) = (shutdown.clone(), upstream.clone(), tasks.clone());
            async move {
                shutdown.cancelled().await;
                tasks.close();
                let _ = tokio::time::timeout(grace, tasks.wait()).await;
                upstream.cancel();
            }
        });
        upstream
    } else {
        shutdown.clone()
    };
    if matches!(roles, Roles::All | Roles::Backend) {
        let database = db.clone().context("the backend needs its database")?;
        let (router, banner) = backend_router(settings, database.clone(), http.clone()).await?;
        let listener = http::bind(SocketAddr::new(settings.bind, settings.backend.port)).await?;
        if let Some(banner) = banner {
            identity::dev::print_banner(&banner, &settings.data_dir);
        }
        tracing::info!(
            issuer = %settings.issuer(),
            "backend role: resOS API at {}{API_PREFIX}, OpenAPI at /api-docs/openapi.json",
            settings.backend.public_url,
        );
        servers.spawn(http::serve(
            "backend",
            listener,
            router,
            upstream_shutdown.clone(),
        ));
    }
    if matches!(roles, Roles::All | Roles::Mcp) {
        let router = mcp::router(settings, http.clone(), upstream_shutdown.clone())?;
        let listener = http::bind(SocketAddr::new(settings.bind, settings.mcp.port)).await?;
        tracing::info!(
            backend = %settings.mcp_role.backend_url,
            "mcp role: MCP at {}, protected-resource metadata at {}/.well-known/oauth-protected-resource/mcp",
            settings.mcp_resource(),
            settings.mcp.public_url,
        );
        servers.spawn(http::serve(
            "mcp",
            listener,
            router,
            upstream_shutdown.clone(),
        ));
    }
    if matches!(roles, Roles::All | Roles::Gateway) {
        let database = db.clone().context("the gateway needs its database")?;
        let model = gateway::model(settings, http_client::streaming()?);
        let (router, _) =
            gateway::router(settings, database, model, shutdown.clone(), tasks.clone()).await?;
        let listener = http::bind(SocketAddr::new(settings.bind, settings.gateway.port)).await?;
        tracing::info!(
            "gateway role: chat at {}{API_PREFIX}/stream/chat, browser login at {}/login",
            settings.gateway.public_url,
            settings.gateway.public_url,
        );
        servers.spawn(http::serve("gateway", listener, router, shutdown.clone()));
    }
    // One role failing stops the others: a half-running system is worse than none.
    let mut outcome = Ok(());
    while let Some(result) = servers.join_next().await {
        let result = result.map_err(anyhow::Error::from).and_then(|r| r);
        if let Err(error) = result {
            shutdown.cancel();
            upstream_shutdown.cancel();
            outcome = Err(error);
        }
    }
    // Answers still being written get their grace period (then are interrupted) and a
    // moment more to be stored.
    tasks.close();
    if tokio::time::timeout(grace, tasks.wait()).await.is_err() {
        tracing::warn!("some answers were still running at shutdown");
    }
    if let Some(db) = db {
        db.close().await;
    }
    outcome
}

/// `maitred token`: only the token goes to stdout, so `TOKEN=$(maitred token …)` works.
async fn print_token(settings: &Settings, args: &TokenArgs) -> anyhow::Result<()> {
    let secret = match &args.secret {
        Some(secret) => secret.clone(),
        None => identity::dev::DevCredentials::load(&settings.data_dir)?
            .client_secret(&args.client)
            .map(str::to_owned)
            .with_context(|| {
                format!(
                    "no secret for client {} in the dev credentials; pass --secret or MAITRED_CLIENT_SECRET",
                    args.client
                )
            })?,
    };
    let http = http_client::new()?;
    let token_url = oauth_client::discover_token_url(&http, &settings.issuer_location()).await?;
    let token = oauth_client::client_credentials(
        &http,
        &oauth_client::ClientCredentials {
            token_url,
            client_id: args.client.clone(),
            client_secret: secret,
            scopes: args
                .scope
                .as_deref()
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_owned)
                .collect(),
            resource: args.resource.clone(),
        },
    )
    .await?;
    println!("{}", token.token);
    Ok(())
}
