//! Issuer metadata (OpenID Connect Discovery and RFC 8414) and the JWKS.

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::SharedIdentity;

fn metadata(identity: &SharedIdentity) -> Value {
    let issuer = identity.issuer();
    json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/oauth2/authorize"),
        "token_endpoint": format!("{issuer}/oauth2/token"),
        "jwks_uri": format!("{issuer}/oauth2/jwks"),
        "userinfo_endpoint": format!("{issuer}/userinfo"),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": [
            "authorization_code",
            "client_credentials",
            "refresh_token",
            super::exchange::GRANT_TYPE,
        ],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["EdDSA"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
        "code_challenge_methods_supported": ["S256"],
        "scopes_supported": identity.registry().scopes(),
        "claims_supported": ["sub", "iss", "aud", "exp", "iat", "name", "preferred_username", "email", "roles", "act", "sid"],
        "authorization_response_iss_parameter_supported": true,
    })
}

pub(super) async fn openid_configuration(State(identity): State<SharedIdentity>) -> Json<Value> {
    Json(metadata(&identity))
}

pub(super) async fn authorization_server_metadata(
    State(identity): State<SharedIdentity>,
) -> Json<Value> {
    Json(metadata(&identity))
}

pub(super) async fn jwks(State(identity): State<SharedIdentity>) -> impl IntoResponse {
    (
        [(header::CACHE_CONTROL, "public, max-age=300")],
        Json(identity.tokens.keys.jwks()),
    )
}
