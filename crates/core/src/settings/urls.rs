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

/// Which URLs may carry tokens (persons', the gateway's, a client secret).
///
/// In production: https, loopback, and the plain-http origins the operator
/// acknowledged one by one (`MAITRED_PLAIN_HTTP_ORIGINS`, for services inside the
/// deployment's own network, such as docker-compose's `http://backend:8080`). In dev
/// mode: anything. The same rule holds for URLs in the configuration (checked at
/// start) and for endpoints learnt at run time from an issuer's metadata, which a
/// start-up check never sees.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UrlPolicy {
    enforced: bool,
    /// `http://host:port` origins, port spelt out.
    acknowledged: Vec<String>,
}

/// A URL the [`UrlPolicy`] refuses: what it is for, and the URL.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "{what} is {url}: production mode sends tokens only over https (plain http is allowed for loopback, and for an origin listed in MAITRED_PLAIN_HTTP_ORIGINS, for services inside the deployment's own network)"
)]
pub struct InsecureUrl {
    pub what: String,
    pub url: String,
}

impl UrlPolicy {
    /// Dev mode: every URL is taken.
    pub fn permissive() -> Self {
        Self::default()
    }

    /// Production mode: https, loopback, and `acknowledged` (origins, as
    /// [`plain_http_origin`] checks them).
    pub fn production(acknowledged: &[String]) -> Self {
        Self {
            enforced: true,
            acknowledged: acknowledged
                .iter()
                .map(String::as_str)
                .map(origin)
                .collect(),
        }
    }

    pub fn permits(&self, url: &str) -> bool {
        !self.enforced
            || secure_or_loopback(url)
            || (url::Url::parse(url).is_ok_and(|u| u.scheme() == "http")
                && self.acknowledged.contains(&origin(url)))
    }

    /// `url`, if it may carry tokens; `what` names it in the refusal.
    pub fn check(&self, what: &str, url: &str) -> Result<(), InsecureUrl> {
        if self.permits(url) {
            Ok(())
        } else {
            Err(InsecureUrl {
                what: what.to_owned(),
                url: url.to_owned(),
            })
        }
    }
}

/// An entry of `MAITRED_PLAIN_HTTP_ORIGINS`: an http origin (`http://backend:8080`),
/// nothing more, so that acknowledging one service acknowledges no other.
pub fn plain_http_origin(raw: &str) -> anyhow::Result<String> {
    let url = url::Url::parse(raw.trim())
        .with_context(|| format!("MAITRED_PLAIN_HTTP_ORIGINS: {raw:?} is not a URL"))?;
    if url.scheme() != "http"
        || url.host().is_none()
        || !url.username().is_empty()
        || url.password().is_some()
        || !matches!(url.path(), "" | "/")
        || url.query().is_some()
        || url.fragment().is_some()
    {
        bail!(
            "MAITRED_PLAIN_HTTP_ORIGINS: {raw:?} must be an http origin such as http://backend:8080 (no path, no credentials)"
        );
    }
    Ok(origin(url.as_str()))
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
    fn production_lets_tokens_travel_over_https_loopback_and_acknowledged_origins_only() {
        let acknowledged = [plain_http_origin("http://backend:8080/").unwrap()];
        let policy = UrlPolicy::production(&acknowledged);
        for allowed in [
            "https://id.example.com/oauth2/token",
            "http://localhost:8080/token",
            "http://127.0.0.1:9/x",
            "http://[::1]:9/x",
            "http://backend:8080/oauth2/token",
            "http://BACKEND:8080/mcp",
        ] {
            assert!(policy.permits(allowed), "{allowed}");
        }
        for refused in [
            "http://id.example.com/oauth2/token",
            // The acknowledgement is for one origin: not another port, nor the
            // same host over another scheme's default.
            "http://backend:8081/mcp",
            "http://backend/mcp",
            "http://0.0.0.0:8080/token",
            "ftp://backend:8080/x",
            "not a url",
        ] {
            let error = policy.check("an issuer", refused).unwrap_err().to_string();
            assert!(error.contains("an issuer"), "{error}");
        }
        assert!(UrlPolicy::permissive().permits("http://id.example.com/token"));
        for bad in [
            "https://backend:8080",
            "http://backend:8080/api",
            "http://user:pw@backend:8080",
            "backend:8080",
        ] {
            assert!(plain_http_origin(bad).is_err(), "{bad}");
        }
    }

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
