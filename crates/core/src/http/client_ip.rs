//! The address a request came from, for rate limits and audit logs: the TCP peer, or,
//! when that peer is a reverse proxy we were told to trust, the address the proxies
//! say they were reached from.
//!
//! Each proxy appends the address it was reached from to the forwarding header, so the
//! chain reads `client, proxy1, proxy2` with the TCP peer after the last one. Only the
//! right end is written by proxies we trust; anything to its left may be written by
//! the client. So the chain is read from the right, and the first address that is not
//! a trusted proxy is the client: a client can add entries on the left, never
//! remove or replace the one its proxy added.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::Response;
use ipnet::IpNet;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientIp(pub IpAddr);

impl<S: Send + Sync> FromRequestParts<S> for ClientIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        // Put there by `resolve` for every request the common layers serve.
        if let Some(ip) = parts.extensions.get::<ClientIp>() {
            return Ok(*ip);
        }
        // Served without connect info (an in-process test), every caller is one caller.
        let ip = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |info| info.0.ip());
        Ok(Self(ip))
    }
}

/// Which header the trusted proxies write. One only: a proxy that writes one of them
/// passes the other on untouched from the client, so believing both would let a
/// client choose its own address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1` (nginx, HAProxy, Traefik, cloud load balancers).
    #[default]
    XForwardedFor,
    /// `Forwarded: for=client, for=proxy1` (RFC 7239).
    Forwarded,
}

/// The reverse proxies whose forwarding header is believed (none by default).
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies {
    nets: Arc<[IpNet]>,
    header: ForwardedHeader,
}

impl TrustedProxies {
    /// Addresses and networks (`10.0.0.7`, `172.16.0.0/12`, `fd00::/8`); blank entries
    /// are skipped so an empty environment variable means none.
    pub fn parse(entries: &[String], header: ForwardedHeader) -> anyhow::Result<Self> {
        let nets = entries
            .iter()
            .map(|entry| entry.trim())
            .filter(|entry| !entry.is_empty())
            .map(|entry| {
                IpNet::from_str(entry)
                    .or_else(|_| IpAddr::from_str(entry).map(IpNet::from))
                    .map_err(|_| {
                        anyhow::anyhow!(
                            "MAITRED_TRUSTED_PROXIES: {entry:?} is neither an IP address nor a CIDR network"
                        )
                    })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Self {
            nets: nets.into(),
            header,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.nets.is_empty()
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        self.nets.iter().any(|net| net.contains(&ip))
    }

    /// The client's address for a request from `peer` carrying `headers`.
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        // A dual-stack listener sees IPv4 peers as ::ffff:a.b.c.d; the lists name them as IPv4.
        let mut current = peer.to_canonical();
        if !self.trusts(current) {
            return current;
        }
        for hop in self.hops(headers).into_iter().rev() {
            if !self.trusts(current) {
                break;
            }
            match hop {
                Some(ip) => current = ip.to_canonical(),
                // A trusted proxy passed on something that is no address: it is the
                // last hop we can vouch for.
                None => break,
            }
        }
        current
    }

    /// The addresses of the configured header, left to right, `None` for an entry that
    /// is not an address (`unknown`, an obfuscated name, garbage).
    fn hops(&self, headers: &HeaderMap) -> Vec<Option<IpAddr>> {
        let name = match self.header {
            ForwardedHeader::XForwardedFor => "x-forwarded-for",
            ForwardedHeader::Forwarded => "forwarded",
        };
        let mut hops = Vec::new();
        // Several header lines are one list, in order (RFC 9110 §5.3).
        for value in headers.get_all(name) {
            let Ok(value) = value.to_str() else {
                hops.push(None);
                continue;
            };
            match self.header {
                ForwardedHeader::XForwardedFor => {
                    hops.extend(value.split(',').map(|node| parse_node(node.trim())));
                }
                ForwardedHeader::Forwarded => {
                    hops.extend(split_unquoted(value, ',').into_iter().map(forwarded_for));
                }
            }
        }
        hops
    }
}

/// The callers whose W3C `traceparent` is continued: the roles of this deployment
/// calling each other (by default, loopback: `maitred all` and a laptop). Anyone
/// else's request starts a new trace, with theirs kept only as a link, so an outside
/// caller can neither choose a trace id nor switch recording off with a `-00` flag.
/// Judged on the request's [`ClientIp`]: behind trusted proxies, the client they
/// name, never the proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceCallers {
    nets: Arc<[IpNet]>,
}

impl Default for TraceCallers {
    fn default() -> Self {
        Self {
            nets: [
                IpNet::new_assert(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 0)), 8),
                IpNet::new_assert(IpAddr::V6(std::net::Ipv6Addr::LOCALHOST), 128),
            ]
            .into(),
        }
    }
}

impl TraceCallers {
    /// Addresses and networks; an empty list (or only blank entries) trusts nobody.
    pub fn parse(entries: &[String]) -> anyhow::Result<Self> {
        let nets = entries
            .iter()
            .map(|entry| entry.trim())
            .filter(|entry| !entry.is_empty())
            .map(|entry| {
                IpNet::from_str(entry)
                    .or_else(|_| IpAddr::from_str(entry).map(IpNet::from))
                    .map_err(|_| {
                        anyhow::anyhow!(
                            "MAITRED_TRUSTED_TRACE_CALLERS: {entry:?} is neither an IP address nor a CIDR network"
                        )
                    })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Self { nets: nets.into() })
    }

    pub fn trusts(&self, client: IpAddr) -> bool {
        let client = client.to_canonical();
        self.nets.iter().any(|net| net.contains(&client))
    }
}

/// The `for=` of one `Forwarded` element (`for=192.0.2.60;proto=http;by=203.0.113.43`).
fn forwarded_for(element: &str) -> Option<IpAddr> {
    split_unquoted(element, ';').into_iter().find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("for") {
            return None;
        }
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        parse_node(value)
    })
}

/// An address as proxies write it: `192.0.2.1`, `2001:db8::1`, and with a port
/// `192.0.2.1:4711` or `[2001:db8::1]:4711` (or bracketed without one).
fn parse_node(node: &str) -> Option<IpAddr> {
    IpAddr::from_str(node)
        .ok()
        .or_else(|| SocketAddr::from_str(node).ok().map(|s| s.ip()))
        .or_else(|| {
            node.strip_prefix('[')
                .and_then(|n| n.strip_suffix(']'))
                .and_then(|n| IpAddr::from_str(n).ok())
        })
}

/// Splits on `separator` outside double quotes (`Forwarded` values may be quoted).
fn split_unquoted(text: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            c if c == separator && !quoted => {
                parts.push(text[start..i].trim());
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(text[start..].trim());
    parts
}

/// Middleware: decides the request's [`ClientIp`] once, for the handlers and the
/// access log alike.
pub async fn resolve(
    State(proxies): State<TrustedProxies>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Some(peer) = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0.ip())
    {
        let ip = proxies.client_ip(peer, request.headers());
        request.extensions_mut().insert(ClientIp(ip));
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn proxies(entries: &[&str]) -> TrustedProxies {
        let entries: Vec<String> = entries.iter().map(|e| (*e).to_owned()).collect();
        TrustedProxies::parse(&entries, ForwardedHeader::XForwardedFor).unwrap()
    }

    fn forwarded(entries: &[&str]) -> TrustedProxies {
        let entries: Vec<String> = entries.iter().map(|e| (*e).to_owned()).collect();
        TrustedProxies::parse(&entries, ForwardedHeader::Forwarded).unwrap()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn with_no_trusted_proxy_the_header_is_ignored() {
        let none = TrustedProxies::default();
        let spoofed = headers(&[("x-forwarded-for", "1.2.3.4")]);
        assert_eq!(
            none.client_ip(ip("203.0.113.9"), &spoofed),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn an_untrusted_peer_cannot_choose_its_address() {
        let trusted = proxies(&["10.0.0.0/8"]);
        for value in ["1.2.3.4", "10.0.0.1", "1.2.3.4, 10.0.0.1"] {
            let spoofed = headers(&[("x-forwarded-for", value)]);
            assert_eq!(
                trusted.client_ip(ip("203.0.113.9"), &spoofed),
                ip("203.0.113.9"),
                "{value}"
            );
        }
    }

    #[test]
    fn a_trusted_peer_is_believed() {
        let trusted = proxies(&["10.0.0.2"]);
        let forwarded = headers(&[("x-forwarded-for", "198.51.100.7")]);
        assert_eq!(
            trusted.client_ip(ip("10.0.0.2"), &forwarded),
            ip("198.51.100.7")
        );
        // Without a header, the proxy itself is the caller (e.g. its own health check).
        assert_eq!(
            trusted.client_ip(ip("10.0.0.2"), &HeaderMap::new()),
            ip("10.0.0.2")
        );
    }

    #[test]
    fn entries_a_client_prepends_are_not_believed() {
        // The client sent `X-Forwarded-For: 1.1.1.1`; nginx appended the real address.
        let trusted = proxies(&["10.0.0.2"]);
        let chain = headers(&[("x-forwarded-for", "1.1.1.1, 198.51.100.7")]);
        assert_eq!(
            trusted.client_ip(ip("10.0.0.2"), &chain),
            ip("198.51.100.7")
        );
    }

    #[test]
    fn a_chain_of_trusted_proxies_is_walked_to_the_first_untrusted_address() {
        let trusted = proxies(&["10.0.0.0/8", "192.168.1.1"]);
        let chain = headers(&[(
            "x-forwarded-for",
            "1.1.1.1, 198.51.100.7, 192.168.1.1, 10.1.2.3",
        )]);
        assert_eq!(
            trusted.client_ip(ip("10.0.0.2"), &chain),
            ip("198.51.100.7")
        );
        // Several header lines are one list.
        let lines = headers(&[
            ("x-forwarded-for", "1.1.1.1, 198.51.100.7"),
            ("x-forwarded-for", "192.168.1.1"),
        ]);
        assert_eq!(
            trusted.client_ip(ip("10.0.0.2"), &lines),
            ip("198.51.100.7")
        );
        // Every hop trusted: the request began inside; the left-most is the caller.
        let inside = headers(&[("x-forwarded-for", "10.9.9.9, 192.168.1.1")]);
        assert_eq!(trusted.client_ip(ip("10.0.0.2"), &inside), ip("10.9.9.9"));
    }

    #[test]
    fn a_malformed_entry_stops_the_walk_at_the_last_trusted_hop() {
        let trusted = proxies(&["10.0.0.0/8"]);
        // Garbage left of the real client is never reached.
        let prepended = headers(&[("x-forwarded-for", "not-an-ip, 198.51.100.7")]);
        assert_eq!(
            trusted.client_ip(ip("10.0.0.2"), &prepended),
            ip("198.51.100.7")
        );
        for value in [
            "not-an-ip",
            "",
            "1.2.3.4, ",
            "999.1.1.1",
            "unknown, 10.0.0.5",
        ] {
            let garbage = headers(&[("x-forwarded-for", value)]);
            let expected = if value.ends_with("10.0.0.5") {
                "10.0.0.5"
            } else {
                "10.0.0.2"
            };
            assert_eq!(
                trusted.client_ip(ip("10.0.0.2"), &garbage),
                ip(expected),
                "{value:?}"
            );
        }
        // Bytes that are not text at all.
        let mut binary = HeaderMap::new();
        binary.insert(
            "x-forwarded-for",
            HeaderValue::from_bytes(b"1.2.3.4\xff").unwrap(),
        );
        assert_eq!(trusted.client_ip(ip("10.0.0.2"), &binary), ip("10.0.0.2"));
    }

    #[test]
    fn ports_brackets_and_ipv6_are_understood() {
        let trusted = proxies(&["fd00::/8", "10.0.0.0/8"]);
        for (value, expected) in [
            ("198.51.100.7:4711", "198.51.100.7"),
            ("[2001:db8::1]:4711", "2001:db8::1"),
            ("[2001:db8::1]", "2001:db8::1"),
            ("2001:db8::1", "2001:db8::1"),
        ] {
            let chain = headers(&[("x-forwarded-for", value)]);
            assert_eq!(trusted.client_ip(ip("fd00::2"), &chain), ip(expected));
        }
        // An IPv4 proxy seen by a dual-stack listener as an IPv4-mapped address.
        let chain = headers(&[("x-forwarded-for", "198.51.100.7")]);
        assert_eq!(
            trusted.client_ip(ip("::ffff:10.0.0.2"), &chain),
            ip("198.51.100.7")
        );
    }

    #[test]
    fn the_forwarded_header_when_configured() {
        let trusted = forwarded(&["10.0.0.0/8"]);
        let chain = headers(&[(
            "forwarded",
            r#"for=1.1.1.1, for="[2001:db8:cafe::17]:4711";proto=https, For=10.0.0.9;by=10.0.0.2"#,
        )]);
        assert_eq!(
            trusted.client_ip(ip("10.0.0.2"), &chain),
            ip("2001:db8:cafe::17")
        );
        // `unknown` and obfuscated identifiers are no address.
        let hidden = headers(&[("forwarded", "for=1.1.1.1, for=_hidden")]);
        assert_eq!(trusted.client_ip(ip("10.0.0.2"), &hidden), ip("10.0.0.2"));
        // An element without `for=`.
        let no_for = headers(&[("forwarded", "proto=https")]);
        assert_eq!(trusted.client_ip(ip("10.0.0.2"), &no_for), ip("10.0.0.2"));
        // A quoted comma does not split the list.
        let quoted = headers(&[("forwarded", r#"for=198.51.100.7;host="a,b""#)]);
        assert_eq!(
            trusted.client_ip(ip("10.0.0.2"), &quoted),
            ip("198.51.100.7")
        );
    }

    #[test]
    fn the_header_the_proxy_does_not_write_is_not_believed() {
        // The proxy appends to X-Forwarded-For and passes a client's Forwarded on.
        let trusted = proxies(&["10.0.0.2"]);
        let spoofed = headers(&[
            ("forwarded", "for=1.1.1.1"),
            ("x-forwarded-for", "198.51.100.7"),
        ]);
        assert_eq!(
            trusted.client_ip(ip("10.0.0.2"), &spoofed),
            ip("198.51.100.7")
        );
        let other_way = forwarded(&["10.0.0.2"]);
        let spoofed = headers(&[
            ("x-forwarded-for", "1.1.1.1"),
            ("forwarded", "for=198.51.100.7"),
        ]);
        assert_eq!(
            other_way.client_ip(ip("10.0.0.2"), &spoofed),
            ip("198.51.100.7")
        );
    }

    #[test]
    fn the_list_takes_addresses_and_networks_and_refuses_anything_else() {
        let list = proxies(&[" 10.0.0.7 ", "172.16.0.0/12", "fd00::/8", ""]);
        assert!(list.trusts(ip("10.0.0.7")));
        assert!(!list.trusts(ip("10.0.0.8")));
        assert!(list.trusts(ip("172.31.255.1")));
        assert!(list.trusts(ip("fd12::1")));
        assert!(
            TrustedProxies::parse(&[String::new()], ForwardedHeader::default())
                .unwrap()
                .is_empty()
        );
        for bad in ["nginx", "10.0.0.0/33", "10.0.0.0/8,", "*"] {
            assert!(
                TrustedProxies::parse(&[bad.to_owned()], ForwardedHeader::default()).is_err(),
                "{bad}"
            );
        }
    }
}
