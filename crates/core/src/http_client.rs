//! The outbound HTTP client every role uses (JWKS, token requests, later MCP and LLM
//! calls): rustls with the ring provider, so no C toolchain is needed to build.

use std::sync::Once;
use std::time::Duration;

static CRYPTO: Once = Once::new();

fn builder() -> reqwest::ClientBuilder {
    CRYPTO.call_once(|| {
        // Fails only if another provider was installed first, which is just as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::builder()
        .user_agent(concat!("maitred/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(Duration::from_secs(5))
}

/// For request/response calls: a whole exchange may take 30 s at most.
pub fn new() -> anyhow::Result<reqwest::Client> {
    Ok(builder().timeout(Duration::from_secs(30)).build()?)
}

/// For streams (LLM completions, MCP event streams) that may rightly last minutes;
/// callers bound them with their own timeouts.
pub fn streaming() -> anyhow::Result<reqwest::Client> {
    Ok(builder().build()?)
}
