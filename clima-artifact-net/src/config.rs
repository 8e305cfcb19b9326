//! What the network code needs to know: timeouts, the low-speed rule, TLS roots, hosts without
//! verification, proxies. The runtime's `Config` holds a [`NetConfig`] (read from the
//! `CLIMA_ARTIFACTS_*` variables, defaults from here); nothing else reaches this crate.

use clima_artifact_progress::Reporting;
use clima_artifact_vars as vars;
use std::path::PathBuf;
use std::time::Duration;

/// Default of [`NetConfig::parallel_min_size`]: 64 MiB.
pub const DEFAULT_PARALLEL_MIN_SIZE: u64 = 64 << 20;

/// The network settings of downloads. Their defaults ([`NetConfig::default`]) are the
/// defaults of the runtime's `Config` too, which holds one of these.
#[derive(Debug, Clone, PartialEq)]
pub struct NetConfig {
    /// TCP connect timeout (`CLIMA_ARTIFACTS_CONNECT_TIMEOUT`).
    pub connect_timeout: Duration,
    /// Longest time without receiving a byte (`CLIMA_ARTIFACTS_STALL_TIMEOUT`).
    pub stall_timeout: Duration,
    /// Bytes per second below which, averaged over [`NetConfig::low_speed_time`], a download
    /// is abandoned (`CLIMA_ARTIFACTS_LOW_SPEED_LIMIT`); `0` = never.
    pub low_speed_limit: u64,
    /// The window of the low-speed rule (`CLIMA_ARTIFACTS_LOW_SPEED_TIME`).
    pub low_speed_time: Duration,
    /// How often and after how long a failed transfer, chunk or attempt is tried again
    /// (`CLIMA_ARTIFACTS_RETRIES` sets the attempts; see [`crate::retry`]).
    pub retry: crate::retry::RetryPolicy,
    /// TLS roots named by a variable: (variable, PEM file or folder); `None`: the system's CA
    /// bundle, else the bundled Mozilla roots (see [`trust`](crate::trust)).
    pub ca_roots: Option<(String, PathBuf)>,
    /// Hosts whose certificates are not verified (`CLIMA_ARTIFACTS_NO_VERIFY_HOSTS`).
    pub no_verify_hosts: Vec<String>,
    /// The proxies requests go through.
    pub proxy: ProxySettings,
    /// Most connections of one large download (`CLIMA_ARTIFACTS_CONNECTIONS`, 1 to
    /// [`MAX_CONNECTIONS`](crate::ranged::MAX_CONNECTIONS)); `1`: one stream. Also the most
    /// requests the process has in flight to one server (scheme, host and port) at once.
    pub connections: usize,
    /// Smallest `Content-Length` downloaded as a large download (several connections, a
    /// partial file kept for resuming; `CLIMA_ARTIFACTS_PARALLEL_MIN_SIZE`).
    pub parallel_min_size: u64,
    /// Where the network's notices (redirects, retries, resumes, partial files) and downloads'
    /// progress go: the program's [`Reporting`], passed down from its entry point; by default
    /// today's lines on stderr.
    pub reporting: Reporting,
}

impl Default for NetConfig {
    /// The defaults of the `CLIMA_ARTIFACTS_*` variables: 30 s to connect, 60 s without a byte,
    /// the low-speed rule at 1 KiB/s over 60 s, 0.5 s before a resume, the system's roots, no
    /// proxy, 8 connections for downloads of 64 MiB or more.
    fn default() -> NetConfig {
        NetConfig {
            connect_timeout: Duration::from_secs(30),
            stall_timeout: Duration::from_secs(60),
            low_speed_limit: 1024,
            low_speed_time: Duration::from_secs(60),
            retry: crate::retry::RetryPolicy::default(),
            ca_roots: None,
            no_verify_hosts: Vec::new(),
            proxy: ProxySettings::default(),
            connections: crate::ranged::MAX_CONNECTIONS,
            parallel_min_size: DEFAULT_PARALLEL_MIN_SIZE,
            reporting: Reporting::default(),
        }
    }
}

/// Proxies as curl reads them: `HTTP_PROXY` for `http://` URLs and `HTTPS_PROXY` for
/// `https://` ones (lower-case forms too), `ALL_PROXY` for both when the specific one is unset,
/// and `NO_PROXY` (comma-separated hosts, `.domain` or `*.domain` for a domain, `*` for all) for
/// hosts reached directly. Credentials go in the proxy URL (`http://user:pass@proxy:3128`);
/// `https://` targets go through a CONNECT tunnel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxySettings {
    /// The proxy for `http://` URLs, with the variable it came from.
    pub http: Option<(String, String)>,
    /// The proxy for `https://` URLs, with the variable it came from.
    pub https: Option<(String, String)>,
    /// Hosts reached without a proxy.
    pub no_proxy: Vec<String>,
}

impl ProxySettings {
    /// The proxy (variable, URL) for `url`, or `None` to connect directly.
    pub fn for_url(&self, url: &str) -> Option<&(String, String)> {
        // The same reading of scheme and host as the redirect rule's.
        let parts = crate::redirect::parts(url)?;
        let host = parts.host.to_ascii_lowercase();
        let bypass = self.no_proxy.iter().any(|p| {
            let p = p.trim().to_ascii_lowercase();
            p == "*"
                || p == host
                || p.strip_prefix("*.")
                    .or_else(|| p.strip_prefix('.'))
                    .is_some_and(|d| host.ends_with(&format!(".{d}")) || host == d)
        });
        if bypass {
            return None;
        }
        match parts.scheme.as_str() {
            "http" => self.http.as_ref(),
            "https" => self.https.as_ref(),
            _ => None,
        }
    }

    /// Reads `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` and `NO_PROXY` (upper case first, then
    /// lower case) through `get`. A proxy URL that cannot be used is `Err((variable, value,
    /// reason))`.
    pub fn from_vars(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<ProxySettings, (String, String, String)> {
        let first = |names: &[&str]| {
            names.iter().find_map(|n| {
                get(n)
                    .filter(|v| !v.trim().is_empty())
                    .map(|v| ((*n).to_owned(), v.trim().to_owned()))
            })
        };
        let mut proxy = ProxySettings::default();
        let all = first(&[vars::ALL_PROXY, "all_proxy"]);
        proxy.http = first(&[vars::HTTP_PROXY, "http_proxy"]).or_else(|| all.clone());
        proxy.https = first(&[vars::HTTPS_PROXY, "https_proxy"]).or(all);
        if let Some((_, v)) = first(&[vars::NO_PROXY, "no_proxy"]) {
            proxy.no_proxy = v
                .split(',')
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .map(str::to_owned)
                .collect();
        }
        for (name, url) in [&proxy.http, &proxy.https].into_iter().flatten() {
            if ureq::Proxy::new(url).is_err() {
                return Err((
                    name.clone(),
                    crate::trust::redact_url(url),
                    "not a proxy URL; expected e.g. `http://proxy.example.org:3128` (credentials \
                     as `http://user:password@host:port`)"
                        .to_owned(),
                ));
            }
        }
        Ok(proxy)
    }
}
