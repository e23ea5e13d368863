//! The issuer's signing keys, kept in the database (with a `kid`) so tokens issued
//! before a restart still validate after it. Ed25519: small keys, fast to make.

use anyhow::Context;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ed25519_dalek::SigningKey;
use ed25519_dalek::pkcs8::EncodePrivateKey;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header};
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use maitred_core::db::{Db, canonical_now};

#[derive(sqlx::FromRow)]
struct StoredKey {
    kid: String,
    private_key: String,
    public_key: String,
    created_at: String,
}

pub(super) struct KeyRing {
    active_kid: String,
    active: EncodingKey,
    /// (kid, public key) of every stored key, newest first: what the JWKS publishes.
    public: Vec<(String, String)>,
}

impl KeyRing {
    /// Loads the keys; on an empty table makes one. Two replicas starting at once
    /// may both insert; both then sign with the oldest key, and the JWKS lists all.
    pub(super) async fn load_or_create(db: &Db) -> anyhow::Result<Self> {
        if Self::rows(db).await?.is_empty() {
            let mut seed = [0u8; 32];
            seed.copy_from_slice(&maitred_core::random::bytes(32));
            let key = SigningKey::from_bytes(&seed);
            let private = key
                .to_pkcs8_der()
                .context("encoding the signing key")?
                .as_bytes()
                .to_vec();
            let public = URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes());
            let kid = hex::encode(&Sha256::digest(public.as_bytes())[..8]);
            sqlx::query(
                "INSERT INTO signing_keys (kid, alg, private_key, public_key, created_at) VALUES ($1, 'EdDSA', $2, $3, $4)",
            )
            .bind(&kid)
            .bind(STANDARD.encode(&private))
            .bind(&public)
            .bind(canonical_now())
            .execute(db.pool())
            .await
            .context("storing a new signing key")?;
            tracing::info!(kid, "created a new signing key");
        }
        let mut rows = Self::rows(db).await?;
        // Oldest first: every replica picks the same active key.
        rows.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.kid.cmp(&b.kid)));
        let active = rows.first().context("no signing key after creating one")?;
        let der = STANDARD
            .decode(&active.private_key)
            .context("decoding the stored signing key")?;
        Ok(Self {
            active_kid: active.kid.clone(),
            active: EncodingKey::from_ed_der(&der),
            public: rows
                .into_iter()
                .rev()
                .map(|row| (row.kid, row.public_key))
                .collect(),
        })
    }

    async fn rows(db: &Db) -> anyhow::Result<Vec<StoredKey>> {
        sqlx::query_as::<_, StoredKey>(
            "SELECT kid, private_key, public_key, created_at FROM signing_keys WHERE alg = 'EdDSA'",
        )
        .fetch_all(db.pool())
        .await
        .context("reading signing keys")
    }

    pub(super) fn sign<T: Serialize>(&self, claims: &T) -> anyhow::Result<String> {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(self.active_kid.clone());
        jsonwebtoken::encode(&header, claims, &self.active).context("signing a token")
    }

    pub(super) fn jwks(&self) -> Value {
        json!({ "keys": self.public.iter().map(|(kid, x)| json!({
            "kty": "OKP", "crv": "Ed25519", "use": "sig", "alg": "EdDSA", "kid": kid, "x": x,
        })).collect::<Vec<_>>() })
    }

    /// The key for `kid`, to check our own tokens without a round trip through the JWKS.
    pub(super) fn decoding_key(&self, kid: &str) -> Option<DecodingKey> {
        self.public
            .iter()
            .find(|(k, _)| k == kid)
            .and_then(|(_, x)| DecodingKey::from_ed_components(x).ok())
    }
}
