//! The outbound HTTP client every role uses (JWKS, token requests, later MCP and LLM
//! calls): rustls with the ring provider, so no C toolchain is needed to build.

use std::sync::Once;
use std::time::Duration;

static CRYPTO: Once = Once::new();

pub fn new() -> anyhow::Result<reqwest::Client> {
    CRYPTO.call_once(|| {
        // Fails only if another provider was installed first, which is just as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    Ok(reqwest::Client::builder()
        .user_agent(concat!("maitred/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(30))
        .build()?)
}
