//! maitred's client metadata document: where an authorization server that accepts
//! a URL as a client id (Client ID Metadata Documents) reads who maitred is. Its
//! URL is its own `client_id`. maitred is a public client (PKCE, no secret), so the
//! document names no JWKS.

use serde_json::{Value, json};

use super::Accounts;

impl Accounts {
    pub fn metadata_document(&self) -> Value {
        json!({
            "client_id": self.metadata_document_url(),
            "client_name": "maitred",
            "client_uri": self.public_url,
            "redirect_uris": [self.redirect_uri()],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "application_type": self.application_type(),
        })
    }
}
