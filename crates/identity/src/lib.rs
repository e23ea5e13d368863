//! The built-in OAuth 2 / OpenID Connect identity provider, served by the backend
//! role: discovery, JWKS, the token endpoint (client credentials, authorization code
//! with PKCE, rotating refresh tokens, token exchange), a login page and userinfo.

mod authorize;
pub use maitred_core::dev;
mod discovery;
mod error;
mod exchange;
mod form;
mod keys;
mod pkce;
mod policy;
mod rate_limit;
mod registry;
mod store;
mod token_endpoint;
mod tokens;
mod userinfo;

use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use axum::routing::{get, post};
use tower_http::csrf::CsrfLayer;

pub use error::OAuthError;
pub use maitred_core::settings::identity_file::{
    ClientConfig, Grant, IdentityFile, Role, UserConfig,
};
pub use registry::{Client, Registry, User};

use keys::KeyRing;
use maitred_core::db::Db;
use maitred_core::settings::Mode;
use maitred_core::settings::Settings;
use rate_limit::AuthRateLimit;
use tokens::TokenIssuer;

pub struct Identity {
    db: Db,
    registry: Registry,
    tokens: TokenIssuer,
    rate_limit: AuthRateLimit,
    /// Cookies get `Secure` when the issuer is served over https.
    secure_cookies: bool,
    /// Verified against when the username is unknown, so timing does not tell.
    dummy_hash: String,
}

pub type SharedIdentity = Arc<Identity>;

impl Identity {
    /// Loads users and clients (the config file, or dev mode's demo identity) and the
    /// signing keys; returns the banner to print in dev mode.
    pub async fn start(
        settings: &Settings,
        db: Db,
    ) -> anyhow::Result<(SharedIdentity, Option<String>)> {
        let (config, banner) = if settings.identity.file.users.is_empty()
            && settings.identity.file.clients.is_empty()
        {
            if settings.mode == Mode::Production {
                anyhow::bail!(
                    "production mode: no users or clients are configured, and demo credentials are refused"
                );
            }
            let dev = dev::DevCredentials::load_or_create(&settings.data_dir)?;
            (dev.identity_config(settings), Some(dev.banner(settings)))
        } else {
            (settings.identity.file.clone(), None)
        };
        let registry =
            Registry::from_config(&config, settings).context("identity configuration")?;
        let keys = KeyRing::load_or_create(&db).await?;
        let dummy_hash = {
            use argon2::password_hash::PasswordHasher;
            argon2::Argon2::default()
                .hash_password(maitred_core::random::token(16).as_bytes())
                .map_err(|e| anyhow::anyhow!("hashing: {e}"))?
                .to_string()
        };
        let identity = Identity {
            db,
            registry,
            tokens: TokenIssuer {
                issuer: settings.issuer().to_owned(),
                keys,
                access_ttl: settings.identity.access_token_ttl,
                delegated_ttl: settings.identity.delegated_token_ttl,
            },
            rate_limit: AuthRateLimit::per_minute(settings.identity.rate_limit_per_minute),
            secure_cookies: settings.issuer().starts_with("https://"),
            dummy_hash,
        };
        Ok((Arc::new(identity), banner))
    }

    pub fn issuer(&self) -> &str {
        &self.tokens.issuer
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

pub fn router(identity: SharedIdentity) -> Router {
    Router::new()
        .route(
            "/.well-known/openid-configuration",
            get(discovery::openid_configuration),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(discovery::authorization_server_metadata),
        )
        .route("/oauth2/jwks", get(discovery::jwks))
        .route("/oauth2/token", post(token_endpoint::token))
        .route(
            "/oauth2/authorize",
            get(authorize::show_login)
                .post(authorize::submit_login)
                // Beside the form's own token: browsers' Sec-Fetch-Site and Origin
                // headers refuse a cross-site login POST outright.
                .layer(CsrfLayer::new()),
        )
        .route(
            "/userinfo",
            get(userinfo::userinfo).post(userinfo::userinfo),
        )
        .with_state(identity)
}
