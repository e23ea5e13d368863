//! Unguessable values from the operating system's generator.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// `bytes` random bytes as unpadded base64url: secrets, codes, tokens.
pub fn token(bytes: usize) -> String {
    URL_SAFE_NO_PAD.encode(self::bytes(bytes))
}

pub fn bytes(len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    // The OS generator failing leaves nothing safe to do but stop.
    #[expect(
        clippy::expect_used,
        reason = "no random bytes: nothing safe is left to do"
    )]
    getrandom::fill(&mut buf).expect("the operating system's random generator failed");
    buf
}

/// A number in `[0, 1)`, for jitter.
pub fn fraction() -> f64 {
    let mut buf = [0u8; 8];
    buf.copy_from_slice(&bytes(8));
    (u64::from_le_bytes(buf) >> 11) as f64 / (1u64 << 53) as f64
}

/// A resOS-style `_id`: 24 hex characters.
pub fn object_id() -> String {
    hex::encode(bytes(12))
}

/// A password a person can type: letters and digits without look-alikes.
pub fn password(len: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    bytes(len)
        .into_iter()
        .map(|b| ALPHABET[usize::from(b) % ALPHABET.len()] as char)
        .collect()
}
