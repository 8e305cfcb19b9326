//! Which redirects a download may follow: never from `https` to `http`, and never to
//! a loopback, link-local (the cloud metadata address 169.254.169.254) or private address
//! unless the original URL was already in that same class (so a download from a lab's
//! internal server, or a loopback test server, keeps working). Redirects are followed by
//! [`crate::source`] one hop at a time, each checked here before any connection to it.
//!
//! Host names are resolved once for the check; a name whose addresses change between this
//! check and the connection (DNS rebinding) is not caught, which is documented in SECURITY.md.

use std::net::{IpAddr, ToSocketAddrs};

/// Most redirects followed for one download.
pub(crate) const MAX_REDIRECTS: usize = 10;

/// Where an address sits, for the redirect rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Anything routable on the internet.
    Public,
    /// This machine (127.0.0.0/8, ::1, and the unspecified 0.0.0.0 / ::).
    Loopback,
    /// 169.254.0.0/16 and fe80::/10, where cloud metadata services answer.
    LinkLocal,
    /// 10/8, 172.16/12, 192.168/16, 100.64/10 (carrier-grade NAT), fc00::/7.
    Private,
}

impl Reach {
    fn of(ip: IpAddr) -> Reach {
        match ip {
            IpAddr::V4(v4) => {
                let o = v4.octets();
                if v4.is_loopback() || v4.is_unspecified() {
                    Reach::Loopback
                } else if v4.is_link_local() {
                    Reach::LinkLocal
                } else if v4.is_private() || (o[0] == 100 && (o[1] & 0xc0) == 64) {
                    Reach::Private
                } else {
                    Reach::Public
                }
            }
            IpAddr::V6(v6) => {
                if let Some(v4) = v6.to_ipv4_mapped() {
                    return Reach::of(IpAddr::V4(v4));
                }
                let first = v6.segments()[0];
                if v6.is_loopback() || v6.is_unspecified() {
                    Reach::Loopback
                } else if first & 0xffc0 == 0xfe80 {
                    Reach::LinkLocal
                } else if first & 0xfe00 == 0xfc00 {
                    Reach::Private
                } else {
                    Reach::Public
                }
            }
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Reach::Public => "a public address",
            Reach::Loopback => "a loopback address (this machine)",
            Reach::LinkLocal => {
                "a link-local address (where cloud metadata services such as 169.254.169.254 answer)"
            }
            Reach::Private => "a private-network address",
        }
    }
}

/// The parts of an `http(s)://` URL the rule looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Parts<'a> {
    /// `http` or `https`, lower case.
    pub scheme: String,
    /// The host, without brackets for IPv6.
    pub host: &'a str,
    /// The port, explicit or the scheme's default.
    pub port: u16,
}

/// Splits `url` into scheme, host and port; `None` when it is not an `http(s)://` URL with a
/// host.
pub(crate) fn parts(url: &str) -> Option<Parts<'_>> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let port = after.strip_prefix(':').map(str::parse).transpose().ok()?;
        (host, port)
    } else {
        match host_port.rsplit_once(':') {
            Some((h, p)) => (h, Some(p.parse().ok()?)),
            None => (host_port, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    Some(Parts {
        scheme,
        host,
        port: port.unwrap_or(default_port),
    })
}

/// The classes of the addresses `host` stands for (an IP literal, or a name resolved now; a
/// name that does not resolve gives none, and the connection will fail on its own).
fn reaches(host: &str, port: u16) -> Vec<(IpAddr, Reach)> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return vec![(ip, Reach::of(ip))];
    }
    match (host, port).to_socket_addrs() {
        Ok(addrs) => addrs.map(|a| (a.ip(), Reach::of(a.ip()))).collect(),
        Err(_) => Vec::new(),
    }
}

/// `location` (a `Location` header) made absolute against `current`.
pub(crate) fn join(current: &str, location: &str) -> String {
    let location = location.trim();
    if location.contains("://") {
        return location.to_owned();
    }
    let (scheme, rest) = current.split_once("://").unwrap_or(("http", current));
    if let Some(net) = location.strip_prefix("//") {
        return format!("{scheme}://{net}");
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    if location.starts_with('/') {
        return format!("{scheme}://{authority}{location}");
    }
    let path = &rest[authority_end..];
    let path = path.split(['?', '#']).next().unwrap_or("");
    let dir = path.rfind('/').map_or("/", |i| &path[..=i]);
    format!("{scheme}://{authority}{dir}{location}")
}

/// Checks one hop, from `current` to `next`, of a download that started at `original`. The
/// error says why the hop is refused.
pub(crate) fn check(original: &str, current: &str, next: &str) -> Result<(), String> {
    let Some(to) = parts(next) else {
        return Err("it is not an http(s) URL with a host".to_owned());
    };
    let from = parts(current);
    if from.as_ref().is_some_and(|f| f.scheme == "https") && to.scheme == "http" {
        return Err(
            "it goes from https to plain http, which would let anyone on the path change the \
             bytes (the hashes would catch that, but also see what was fetched)"
                .to_owned(),
        );
    }
    let allowed: Vec<Reach> = parts(original)
        .map(|o| reaches(o.host, o.port))
        .unwrap_or_default()
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    for (ip, reach) in reaches(to.host, to.port) {
        if reach != Reach::Public && !allowed.contains(&reach) {
            return Err(format!(
                "`{}` is {ip}, {}, and the original URL was not; a server must not send a \
                 download to internal addresses",
                to.host,
                reach.describe()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        for (ip, reach) in [
            ("127.0.0.1", Reach::Loopback),
            ("0.0.0.0", Reach::Loopback),
            ("::1", Reach::Loopback),
            ("169.254.169.254", Reach::LinkLocal),
            ("fe80::1", Reach::LinkLocal),
            ("10.1.2.3", Reach::Private),
            ("172.31.0.1", Reach::Private),
            ("192.168.0.1", Reach::Private),
            ("100.64.0.1", Reach::Private),
            ("fd00::1", Reach::Private),
            ("::ffff:10.0.0.1", Reach::Private),
            ("8.8.8.8", Reach::Public),
            ("172.32.0.1", Reach::Public),
            ("2001:db8::1", Reach::Public),
        ] {
            assert_eq!(Reach::of(ip.parse().unwrap()), reach, "{ip}");
        }
    }

    #[test]
    fn url_parts_and_joins() {
        let p = parts("https://user:pw@[::1]:8443/x?y").unwrap();
        assert_eq!((p.scheme.as_str(), p.host, p.port), ("https", "::1", 8443));
        let p = parts("HTTP://example.org/a").unwrap();
        assert_eq!(
            (p.scheme.as_str(), p.host, p.port),
            ("http", "example.org", 80)
        );
        assert!(parts("ftp://example.org/").is_none());
        assert!(parts("http:///nohost").is_none());
        let base = "http://h:1/a/b/c.tar.gz?q=1";
        assert_eq!(join(base, "d.tar.gz"), "http://h:1/a/b/d.tar.gz");
        assert_eq!(join(base, "/e"), "http://h:1/e");
        assert_eq!(join(base, "//other/f"), "http://other/f");
        assert_eq!(join(base, "https://x/y"), "https://x/y");
    }

    #[test]
    fn the_rule() {
        let lo = "http://127.0.0.1:8000/a";
        assert!(check(lo, lo, "http://127.0.0.1:9000/b").is_ok());
        let e = check(lo, lo, "http://169.254.169.254/latest/meta-data/").unwrap_err();
        assert!(e.contains("link-local"), "{e}");
        assert!(
            check(lo, lo, "http://10.0.0.7/x")
                .unwrap_err()
                .contains("private")
        );
        let public = "https://8.8.8.8/a";
        assert!(check(public, public, "https://127.0.0.1/x").is_err());
        assert!(
            check(public, public, "http://8.8.4.4/x")
                .unwrap_err()
                .contains("https to plain http")
        );
        assert!(check(public, public, "https://8.8.4.4/x").is_ok());
        let lab = "http://10.0.0.1/a";
        assert!(check(lab, lab, "http://10.0.0.2/b").is_ok());
        assert!(check(lab, lab, "http://127.0.0.1/b").is_err());
    }
}
