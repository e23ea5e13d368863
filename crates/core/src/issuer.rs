//! Where an OAuth issuer is. Tokens name its public URL (`iss`); inside a deployment
//! the roles may have to reach it at another address (a container name), so URLs
//! from its metadata are rewritten onto that address, and checked against the
//! deployment's [`UrlPolicy`] (production mode sends no token over plain http to
//! an address the operator did not acknowledge, whatever the metadata says).

use crate::settings::{InsecureUrl, UrlPolicy};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issuer {
    /// The URL in tokens' `iss` and in the issuer's own metadata.
    pub public: String,
    /// Where this process fetches metadata, keys and tokens.
    pub internal: String,
    /// Which URLs from its metadata may be used.
    pub policy: UrlPolicy,
}

impl Issuer {
    pub fn new(public: impl Into<String>, internal: Option<&str>) -> Self {
        let public = public.into();
        let internal = internal.map_or_else(|| public.clone(), str::to_owned);
        Self {
            public,
            internal,
            policy: UrlPolicy::permissive(),
        }
    }

    /// The same issuer, its metadata's URLs held to `policy`.
    #[must_use]
    pub fn with_policy(mut self, policy: UrlPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The two well-known metadata documents, at the internal address.
    pub fn metadata_urls(&self) -> [String; 2] {
        [
            format!("{}/.well-known/openid-configuration", self.internal),
            format!("{}/.well-known/oauth-authorization-server", self.internal),
        ]
    }

    /// A URL from the issuer's metadata, moved onto the internal address.
    pub fn internalize(&self, url: &str) -> String {
        match url.strip_prefix(&self.public) {
            Some(rest) if self.public != self.internal => format!("{}{rest}", self.internal),
            _ => url.to_owned(),
        }
    }

    /// A URL from the issuer's metadata (`what`: which one), moved onto the internal
    /// address, if the policy lets tokens travel there.
    pub fn endpoint(&self, what: &str, url: &str) -> Result<String, InsecureUrl> {
        let url = self.internalize(url);
        self.policy.check(what, &url)?;
        Ok(url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_urls_move_onto_the_internal_address() {
        let issuer = Issuer::new("https://id.example.com", Some("http://backend:8080"));
        assert_eq!(
            issuer.internalize("https://id.example.com/oauth2/jwks"),
            "http://backend:8080/oauth2/jwks"
        );
        assert_eq!(
            issuer.internalize("https://elsewhere.example/jwks"),
            "https://elsewhere.example/jwks"
        );
        let same = Issuer::new("http://localhost:8080", None);
        assert_eq!(
            same.internalize("http://localhost:8080/x"),
            "http://localhost:8080/x"
        );
    }
}
