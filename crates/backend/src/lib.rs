//! The backend role: the resOS-compatible REST API under `/api/v1/resos`, its
//! OpenAPI description, and (unless an external issuer is configured) the built-in
//! identity provider.

mod audit;
pub mod author;
mod bookings;
pub mod contact;
mod customers;
mod error;
mod extract;
mod feedback;
pub mod idempotency;
mod list;
pub mod model;
mod opening_hours;
pub mod query;
pub mod resources;
pub mod seed;
mod sql;
mod tables;

use std::sync::Arc;

use axum::extract::FromRef;
use axum::extract::{DefaultBodyLimit, Request};
use axum::middleware::{self, Next};
use axum::routing::get;
use serde::Serialize;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use error::{ApiError, FieldError};
pub use model::{Booking, Customer, Feedback, OpeningHours, Table};

use extract::BodyLimit;
use maitred_core::auth::{RequiredScope, Scoped, TokenVerifier};
use maitred_core::db::Db;
use maitred_core::settings::{API_PREFIX, BackendSettings, HttpTimeouts};

pub use axum::Json;

#[derive(Clone)]
pub struct BackendState {
    pub db: Db,
    pub verifier: Arc<TokenVerifier>,
}

impl FromRef<BackendState> for Arc<TokenVerifier> {
    fn from_ref(state: &BackendState) -> Self {
        state.verifier.clone()
    }
}

pub struct ReadScope;
impl RequiredScope for ReadScope {
    const SCOPE: &'static str = "backend.read";
}

pub struct WriteScope;
impl RequiredScope for WriteScope {
    const SCOPE: &'static str = "backend.write";
}

/// A caller whose token carries `backend.read`.
pub type Reader = Scoped<ReadScope, ApiError>;
/// A caller whose token carries `backend.write`, and whose person may write.
pub use author::Writer;

/// The resOS error envelope, for the OpenAPI description.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    /// INVALID_REQUEST, AUTHENTICATION_ERROR, AUTHORIZATION_ERROR, RESOURCE_NOT_FOUND,
    /// VALIDATION_ERROR, CONFLICT, RATE_LIMIT_EXCEEDED, INTERNAL_ERROR or SERVICE_UNAVAILABLE;
    /// IDEMPOTENCY_KEY_REUSED (422) and IDEMPOTENCY_KEY_IN_FLIGHT (409) about an
    /// `Idempotency-Key`
    pub code: String,
    pub message: String,
    #[schema(value_type = Object)]
    pub details: Option<serde_json::Value>,
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "maitred backend (resOS API v1.2 compatible)",
        description = "Customers, bookings, tables, opening hours and feedback of one restaurant. Every call needs a bearer token from the issuer with audience <backend URL>/api/v1/resos: backend.read for reads, backend.write for writes. A write may carry an Idempotency-Key header (1 to 255 visible ASCII characters): a repeat of it with the same method, path and body gets the stored response with Idempotent-Replayed: true instead of running again; the same key with another request is 422 IDEMPOTENCY_KEY_REUSED."
    ),
    modifiers(&BearerAuth),
    components(schemas(ErrorBody, FieldError))
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .build(),
            ),
        );
    }
}

/// The API routes and their OpenAPI description, from the same declarations.
fn api() -> (axum::Router<BackendState>, utoipa::openapi::OpenApi) {
    let resos = OpenApiRouter::new()
        .routes(routes!(customers::list))
        .routes(routes!(customers::get))
        .routes(routes!(feedback::list))
        .routes(routes!(feedback::get))
        .routes(routes!(opening_hours::list))
        .routes(routes!(opening_hours::get))
        .routes(routes!(tables::list))
        .routes(routes!(bookings::list, bookings::create))
        .routes(routes!(bookings::get, bookings::update))
        .routes(routes!(bookings::available_dates))
        .routes(routes!(bookings::available_times))
        .routes(routes!(bookings::add_comment))
        .routes(routes!(bookings::add_note))
        .routes(routes!(audit::list));
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .nest(API_PREFIX, resos)
        .split_for_parts()
}

pub fn openapi() -> utoipa::openapi::OpenApi {
    api().1
}

/// The backend's router, set up by the backend's settings and the request timeout
/// (how long an unfinished write may hold its idempotency key).
pub fn router(
    state: BackendState,
    settings: &BackendSettings,
    timeouts: &HttpTimeouts,
) -> axum::Router {
    let body_limit = settings.body_limit;
    let (routes, doc) = api();
    let doc = Arc::new(doc);
    let idempotency = idempotency::Config::new(
        settings.idempotency_ttl,
        settings.idempotency_wait,
        timeouts.request,
    );
    routes
        .route_layer(middleware::from_fn_with_state(
            (state.clone(), idempotency),
            idempotency::layer,
        ))
        .route(
            "/api-docs/openapi.json",
            get(move || {
                let doc = doc.clone();
                async move { Json(doc.as_ref().clone()) }
            }),
        )
        .fallback(|request: Request| async move {
            ApiError::NoRoute(format!(
                "there is no {} {}; the API is described at /api-docs/openapi.json",
                request.method(),
                request.uri().path()
            ))
        })
        .method_not_allowed_fallback(|request: Request| async move {
            ApiError::MethodNotAllowed(format!(
                "{} is not allowed on {}",
                request.method(),
                request.uri().path()
            ))
        })
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn(
            move |mut request: Request, next: Next| async move {
                request.extensions_mut().insert(BodyLimit(body_limit));
                next.run(request).await
            },
        ))
        .with_state(state)
}

pub(crate) fn parse_metadata(text: Option<&str>) -> Option<serde_json::Value> {
    text.and_then(|t| serde_json::from_str(t).ok())
}
