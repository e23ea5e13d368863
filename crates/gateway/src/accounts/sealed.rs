//! People's tokens at rest: sealed with XChaCha20-Poly1305 under a key from the
//! settings (`MAITRED_ACCOUNT_KEYS`). Each sealed value names its key, so keys can
//! rotate: the first key seals, every listed key opens, and values under an older key
//! are sealed again under the first at start (`reseal`). The additional data binds a
//! value to its owner, server and purpose: a value copied into another person's row
//! does not open there.
//!
//! Format: `v1.<key id>.<base64url(nonce ‖ ciphertext)>`; the nonce is random (24
//! bytes), so replicas need no shared counter.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, bail};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use secrecy::{ExposeSecret, SecretString};

const NONCE_LEN: usize = 24;

/// The keys: the first seals, all open.
#[derive(Clone)]
pub struct KeyRing {
    current: String,
    keys: HashMap<String, XChaCha20Poly1305>,
}

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyRing")
            .field("current", &self.current)
            .finish_non_exhaustive()
    }
}

/// What a value is sealed for: part of the additional data.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Purpose {
    Credentials,
    Authorization,
    ClientSecret,
    /// A browser session's refresh or access token (the person's at maitred).
    Session,
}

impl Purpose {
    fn label(self) -> &'static str {
        match self {
            Self::Credentials => "credentials",
            Self::Authorization => "authorization",
            Self::ClientSecret => "client-secret",
            Self::Session => "session",
        }
    }
}

/// A sealed value would not open: a wrong or missing key, or a value that was
/// changed or moved.
#[derive(Debug, thiserror::Error)]
#[error("a sealed value does not open: {0}")]
pub struct Unsealable(&'static str);

impl Unsealable {
    /// It opened, but holds something else than what is sealed there.
    pub(crate) fn corrupt(_: impl std::fmt::Display) -> Self {
        Self("it opened to something unreadable")
    }
}

impl KeyRing {
    /// `id:base64key,…` as `MAITRED_ACCOUNT_KEYS` has it.
    pub(crate) fn parse(text: &SecretString) -> anyhow::Result<Self> {
        let mut current = None;
        let mut keys = HashMap::new();
        for entry in text.expose_secret().split(',').map(str::trim) {
            if entry.is_empty() {
                continue;
            }
            let Some((id, key)) = entry.split_once(':') else {
                bail!("MAITRED_ACCOUNT_KEYS: each key is id:base64 (32 bytes)");
            };
            let valid_id = !id.is_empty()
                && id.len() <= 32
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if !valid_id {
                bail!("MAITRED_ACCOUNT_KEYS: a key id is 1 to 32 letters, digits, - or _");
            }
            let bytes = STANDARD
                .decode(key.trim())
                .or_else(|_| URL_SAFE_NO_PAD.decode(key.trim()))
                .with_context(|| format!("MAITRED_ACCOUNT_KEYS: key {id} is not base64"))?;
            let Ok(bytes) = <[u8; 32]>::try_from(bytes.as_slice()) else {
                bail!(
                    "MAITRED_ACCOUNT_KEYS: key {id} is {} bytes; it must be 32",
                    bytes.len()
                );
            };
            if keys
                .insert(id.to_owned(), XChaCha20Poly1305::new(&Key::from(bytes)))
                .is_some()
            {
                bail!("MAITRED_ACCOUNT_KEYS: key id {id} is listed twice");
            }
            current.get_or_insert_with(|| id.to_owned());
        }
        let Some(current) = current else {
            bail!("MAITRED_ACCOUNT_KEYS holds no key");
        };
        Ok(Self { current, keys })
    }

    /// Development: a key kept in the data dir, made on first use, so a restart
    /// still opens what was sealed.
    pub(crate) fn in_data_dir(dir: &Path) -> anyhow::Result<Self> {
        let path = maitred_core::dev::sealing_key_file(dir)?;
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&SecretString::from(text))
    }

    pub(crate) fn current(&self) -> &str {
        &self.current
    }

    pub(crate) fn seal(&self, plain: &[u8], purpose: Purpose, owner: &str, server: &str) -> String {
        let mut nonce_bytes = [0u8; NONCE_LEN];
        nonce_bytes.copy_from_slice(&maitred_core::random::bytes(NONCE_LEN));
        let nonce = XNonce::from(nonce_bytes);
        let aad = additional_data(purpose, owner, server);
        let cipher = &self.keys[&self.current];
        // Encryption with a valid key and nonce length cannot fail (only a message
        // past the cipher's limit, which tokens are not).
        let sealed = cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: plain,
                    aad: &aad,
                },
            )
            .unwrap_or_default();
        let mut body = nonce_bytes.to_vec();
        body.extend(sealed);
        format!("v1.{}.{}", self.current, URL_SAFE_NO_PAD.encode(body))
    }

    pub(crate) fn open(
        &self,
        sealed: &str,
        purpose: Purpose,
        owner: &str,
        server: &str,
    ) -> Result<Vec<u8>, Unsealable> {
        let mut parts = sealed.splitn(3, '.');
        let (Some("v1"), Some(id), Some(body)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(Unsealable("not a sealed value"));
        };
        let cipher = self
            .keys
            .get(id)
            .ok_or(Unsealable("its key is not in MAITRED_ACCOUNT_KEYS"))?;
        let body = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| Unsealable("not base64"))?;
        if body.len() < NONCE_LEN {
            return Err(Unsealable("too short"));
        }
        let (nonce, ciphertext) = body.split_at(NONCE_LEN);
        let mut nonce_bytes = [0u8; NONCE_LEN];
        nonce_bytes.copy_from_slice(nonce);
        let aad = additional_data(purpose, owner, server);
        cipher
            .decrypt(
                &XNonce::from(nonce_bytes),
                Payload {
                    msg: ciphertext,
                    aad: &aad,
                },
            )
            .map_err(|_| Unsealable("it was changed, or belongs to another row"))
    }
}

/// The key id a sealed value names.
pub(crate) fn key_id(sealed: &str) -> Option<&str> {
    sealed.split('.').nth(1)
}

fn additional_data(purpose: Purpose, owner: &str, server: &str) -> Vec<u8> {
    format!("maitred-account\0{}\0{owner}\0{server}", purpose.label()).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(text: &str) -> KeyRing {
        KeyRing::parse(&SecretString::from(text.to_owned())).unwrap()
    }

    fn key(byte: u8) -> String {
        STANDARD.encode([byte; 32])
    }

    #[test]
    fn a_sealed_value_opens_for_its_row_only_and_is_not_the_plain_text() {
        let keys = ring(&format!("k1:{}", key(7)));
        let sealed = keys.seal(b"the-token", Purpose::Credentials, "alice", "notes");
        assert!(!sealed.contains("the-token"));
        assert_eq!(
            keys.open(&sealed, Purpose::Credentials, "alice", "notes")
                .unwrap(),
            b"the-token"
        );
        assert!(
            keys.open(&sealed, Purpose::Credentials, "bob", "notes")
                .is_err()
        );
        assert!(
            keys.open(&sealed, Purpose::Credentials, "alice", "other")
                .is_err()
        );
        assert!(
            keys.open(&sealed, Purpose::Authorization, "alice", "notes")
                .is_err()
        );
        // The same plain text twice is sealed differently (random nonces).
        assert_ne!(
            sealed,
            keys.seal(b"the-token", Purpose::Credentials, "alice", "notes")
        );
    }

    #[test]
    fn after_rotation_old_values_open_and_new_ones_use_the_new_key() {
        let old = ring(&format!("k1:{}", key(1)));
        let sealed = old.seal(b"t", Purpose::Credentials, "a", "s");
        let rotated = ring(&format!("k2:{},k1:{}", key(2), key(1)));
        assert_eq!(
            rotated
                .open(&sealed, Purpose::Credentials, "a", "s")
                .unwrap(),
            b"t"
        );
        let resealed = rotated.seal(b"t", Purpose::Credentials, "a", "s");
        assert_eq!(key_id(&resealed), Some("k2"));
        let dropped = ring(&format!("k2:{}", key(2)));
        assert!(
            dropped
                .open(&sealed, Purpose::Credentials, "a", "s")
                .is_err()
        );
    }

    #[test]
    fn bad_key_lists_are_refused_with_a_reason() {
        for text in [
            "",
            "nokey",
            "k1:short",
            &format!("k1:{},k1:{}", key(1), key(2)),
        ] {
            assert!(
                KeyRing::parse(&SecretString::from(text.to_owned())).is_err(),
                "{text}"
            );
        }
    }
}
