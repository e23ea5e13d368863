//! Where a role listens and the URL the world knows it by, and the URL rules every
//! setting shares.

use std::path::Path;

use anyhow::{Context, bail};

/// Where a role listens and the URL the outside world knows it by (they differ
/// behind a reverse proxy).
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub port: u16,
    pub public_url: String,
    /// The public URL was not given, so it follows the port (port 0 in tests: the
    /// port the listener really got).
    derived: bool,
}

impl Endpoint {
    pub fn new(port: u16, public_url: Option<&str>) -> anyhow::Result<Self> {
        Ok(match public_url {
            Some(url) => Self {
                port,
                public_url: normalize_url(url)?,
                derived: false,
            },
            None => Self::local("localhost", port),
        })
    }

    /// On this machine, at `host:port`.
    pub fn local(host: &str, port: u16) -> Self {
        Self {
            port,
            public_url: format!("http://{host}:{port}"),
            derived: true,
        }
    }

    /// The port a listener was bound to; a derived public URL follows it.
    pub fn bound_to(&mut self, port: u16) {
        if self.derived && self.port != port {
            let host = url::Url::parse(&self.public_url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_owned))
                .unwrap_or_else(|| "localhost".to_owned());
            *self = Self::local(&host, port);
        }
        self.port = port;
    }
}

/// `scheme://host:port` of a URL, with the port spelt out.
pub fn origin(url: &str) -> String {
    url::Url::parse(url)
        .ok()
        .and_then(|u| {
            let port = u.port_or_known_default()?;
            Some(format!("{}://{}:{port}", u.scheme(), u.host_str()?))
        })
        .unwrap_or_else(|| url.to_owned())
}

/// https, or http to this machine only (a TLS-terminating proxy on the same host).
pub(super) fn secure_or_loopback(url: &str) -> bool {
    let Ok(url) = url::Url::parse(url) else {
        return false;
    };
    match (url.scheme(), url.host()) {
        ("https", _) => true,
        ("http", Some(url::Host::Domain(host))) => host.eq_ignore_ascii_case("localhost"),
        ("http", Some(url::Host::Ipv4(ip))) => ip.is_loopback(),
        ("http", Some(url::Host::Ipv6(ip))) => ip.is_loopback(),
        _ => false,
    }
}

pub fn sqlite_url(path: &Path) -> String {
    format!("sqlite://{}?mode=rwc", path.display())
}

/// An http(s) URL without its trailing slash.
pub fn normalize_url(raw: &str) -> anyhow::Result<String> {
    let url = url::Url::parse(raw).with_context(|| format!("{raw:?} is not a URL"))?;
    if !matches!(url.scheme(), "http" | "https") {
        bail!("{raw:?} must be an http or https URL");
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_urls_lose_their_trailing_slash() {
        let endpoint = Endpoint::new(8080, Some("https://api.example.com/")).unwrap();
        assert_eq!(endpoint.public_url, "https://api.example.com");
        assert!(Endpoint::new(1, Some("ftp://x")).is_err());
        assert_eq!(
            Endpoint::new(8082, None).unwrap().public_url,
            "http://localhost:8082"
        );
    }

    #[test]
    fn a_derived_public_url_follows_the_bound_port_and_a_given_one_does_not() {
        let mut derived = Endpoint::local("127.0.0.1", 0);
        derived.bound_to(41234);
        assert_eq!(derived.public_url, "http://127.0.0.1:41234");
        let mut given = Endpoint::new(0, Some("https://chat.example.com")).unwrap();
        given.bound_to(41235);
        assert_eq!(given.public_url, "https://chat.example.com");
        assert_eq!(given.port, 41235);
    }
}
