//! Each role's router out of the settings, and the database they share.

use std::sync::Arc;

use axum::Router;

use crate::auth::{TokenVerifier, VerifierConfig};
use crate::backend::{self, BackendState, seed};
use crate::db::Db;
use crate::http;
use crate::identity::{self, Identity};
use crate::metrics::{Metrics, PoolCollector};
use crate::settings::{Mode, Settings};

/// Connects and migrates; seeds in dev mode when `seed` (the backend's data is the
/// backend's to create: other roles sharing the database leave it alone).
pub async fn open_database(settings: &Settings, seed: bool) -> anyhow::Result<Db> {
    let db = Db::connect(settings.database_url()).await?;
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
        &settings.backend,
        &settings.timeouts,
    );
    let metrics = Metrics::for_scrapes_with(settings.metrics_token.as_ref());
    metrics.register_collector(PoolCollector(db.clone()));
    let mut router = http::health::routes(http::health::database(db.clone())).merge(api);
    let mut banner = None;
    if settings.builtin_identity() {
        let (identity, dev_banner) = Identity::start(settings, db).await?;
        router = router.merge(identity::router(identity));
        banner = dev_banner;
    }
    Ok((
        http::middleware::wrap(
            router,
            &metrics,
            &settings.trusted_proxies,
            &settings.trace_callers,
        ),
        banner,
    ))
}
