//! Opening download sources: `http(s)://` (ureq with rustls), `file://` URLs and plain paths.
//!
//! - A relative path resolves against the manifest's folder. This is an extension: Julia only
//!   reads URLs, so a manifest meant for Julia too should use `http(s)://` or `file://` URLs.
//! - HTTP: connect timeout `CLIMA_ARTIFACTS_CONNECT_TIMEOUT`; every read times out after
//!   `CLIMA_ARTIFACTS_STALL_TIMEOUT` without a byte (a stall, not a cap on the total time);
//!   proxies from [`NetConfig::proxy`](crate::NetConfig::proxy) (curl's reading of `HTTP_PROXY`,
//!   `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY`) and TLS roots from [`crate::trust`];
//!   `Accept-Encoding: identity` is sent so the bytes hashed are the bytes published.
//! - A body shorter than its `Content-Length` is an error, never a silent truncation.
//! - A server that says `Accept-Ranges: bytes` and gives a strong ETag or a Last-Modified gets
//!   a [`Resumer`]: after a break the install continues at the byte where it stopped with
//!   `Range` + `If-Range` (a `200` or a wrong `Content-Range` is [`ResumeRefused`], and the
//!   attempt starts over).
//! - Retrying is the caller's job (the whole pipeline restarts); [`NetError::is_transient`] says which
//!   failures deserve it and [`crate::retry::RetryPolicy`] how often and after how long.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::{NetConfig, NetError, redirect};

use crate::notice::NetEvent;
use clima_artifact_vars as vars;
use clima_artifact_vars::{CONNECT_TIMEOUT, STALL_TIMEOUT};
/// The HTTP client that [`open`] takes (made by [`agent`]): connection pool, timeouts, TLS.
pub use ureq::Agent;

/// An open source of tarball bytes.
pub struct Source {
    /// The bytes, as they arrive (already checked against `Content-Length` when there is one).
    pub reader: Box<dyn Read + Send>,
    /// Total size, if the server or file system says.
    pub length: Option<u64>,
    /// How to continue after a broken transfer, when the server supports ranges and gave a
    /// validator (ETag or Last-Modified).
    pub resume: Option<Resumer>,
    /// The partial file a large download keeps its bytes in ([`crate::ranged`]): removed by
    /// the caller once the install is verified, kept for the next process when the attempt
    /// failed transiently.
    pub partial: Option<crate::partial::Kept>,
    /// Bytes received and connections open, for progress, when several connections feed
    /// the reader.
    pub(crate) watch: Option<crate::partial::Watch>,
}

impl Source {
    /// A source of bytes that come from elsewhere than a URL (for example from another
    /// process): no resume, no partial file.
    pub fn from_reader(reader: Box<dyn Read + Send>, length: Option<u64>) -> Source {
        Source {
            reader,
            length,
            resume: None,
            partial: None,
            watch: None,
        }
    }
}

/// Continues an HTTP download at a byte offset with `Range: bytes=N-`, guarded by `If-Range`
/// with the validator of the first response, so a changed file is never spliced onto the old
/// one's bytes.
pub struct Resumer {
    agent: ureq::Agent,
    /// The URL that answered (after redirects).
    url: String,
    /// The ETag (preferred) or Last-Modified of the first response.
    validator: String,
    /// The total size from the first response, if it said.
    total: Option<u64>,
    /// The most requests in flight to the server (the broken one has ended).
    limit: usize,
}

impl std::fmt::Debug for Resumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resumer")
            .field("url", &self.url)
            .field("validator", &self.validator)
            .finish_non_exhaustive()
    }
}

/// Why a transfer could not be continued where it broke (the server ignored the range, or the
/// file changed): the attempt starts over from byte 0.
#[derive(Debug)]
pub struct ResumeRefused(pub String);

impl std::fmt::Display for ResumeRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ResumeRefused {}

impl ResumeRefused {
    /// The refusal inside `e`, if that is what it is.
    pub fn of(e: &io::Error) -> Option<&ResumeRefused> {
        e.get_ref()?.downcast_ref::<ResumeRefused>()
    }
}

impl Resumer {
    /// The rest of the body from byte `offset`. A `206` whose `Content-Range` starts at
    /// `offset` continues; anything else is [`ResumeRefused`] (or a transport error). Drop
    /// the broken body first: the request waits while the server has as many requests of
    /// this process in flight as `CLIMA_ARTIFACTS_CONNECTIONS` allows.
    pub fn reopen(&self, offset: u64) -> io::Result<Box<dyn Read + Send>> {
        let permit = crate::limit::wait_for(&self.url, self.limit);
        let resp = self
            .agent
            .get(&self.url)
            .header("Range", format!("bytes={offset}-"))
            .header("If-Range", &self.validator)
            .call()
            .map_err(|e| match e {
                ureq::Error::Io(io) => io,
                other => io::Error::other(other.to_string()),
            })?;
        let status = resp.status().as_u16();
        let content_range = resp
            .headers()
            .get("content-range")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let refused = |why: String| io::Error::other(ResumeRefused(why));
        match status {
            // A server that ignores If-Range may send bytes of another version of the file.
            206 if validator_of(&resp).as_deref() != Some(self.validator.as_str()) => {
                return Err(refused(format!(
                    "the server answered the range request for byte {offset} with another \
                     ETag or Last-Modified than the transfer began with, or none (the file \
                     changed since)"
                )));
            }
            206 if content_range.starts_with(&format!("bytes {offset}-")) => {}
            206 => {
                return Err(refused(format!(
                    "the server answered the range request for byte {offset} with \
                     `Content-Range: {content_range}`"
                )));
            }
            200 => {
                return Err(refused(format!(
                    "the server ignored the range request for byte {offset} (or the file \
                     changed since the transfer began)"
                )));
            }
            other => {
                return Err(refused(format!(
                    "the server answered the range request with HTTP {other}"
                )));
            }
        }
        if let (Some(total), Some(all)) = (
            self.total,
            content_range
                .rsplit('/')
                .next()
                .and_then(|t| t.parse::<u64>().ok()),
        ) && total != all
        {
            return Err(refused(format!(
                "the file is now {all} bytes, not {total}: it changed since the transfer began"
            )));
        }
        let length = resp.body().content_length();
        Ok(Box::new(CheckedLength::new(
            resp.into_body().into_reader(),
            length,
            Some(permit),
        )))
    }
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("length", &self.length)
            .finish_non_exhaustive()
    }
}

/// Where a download URL points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// `http://` or `https://`.
    Http(String),
    /// A local file (`file://` URL, absolute path, or path relative to the manifest folder).
    File(PathBuf),
    /// A URL that cannot be fetched (another scheme, or a `file://` URL naming a remote host);
    /// the text says why and what to write instead.
    Unsupported(String),
}

/// What a download `url` may be, for messages.
const SUPPORTED: &str = "use an `https://` or `http://` URL, a `file:///absolute/path` URL, or a \
                         path relative to the manifest's folder";

/// Classifies `url`; relative paths resolve against `manifest_dir`.
pub fn locate(url: &str, manifest_dir: &Path) -> Location {
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        Location::Http(url.to_owned())
    } else if lower.starts_with("file://") {
        // `file:///abs/path` or `file://localhost/abs/path`; any other host is not local.
        let rest = &url["file://".len()..];
        let path = if rest.starts_with('/') {
            rest
        } else if rest
            .get(..10)
            .is_some_and(|h| h.eq_ignore_ascii_case("localhost/"))
        {
            &rest["localhost".len()..]
        } else {
            let host = rest.split('/').next().unwrap_or(rest);
            return Location::Unsupported(format!(
                "`file://` URLs must name a local absolute path, but this one names the host \
                 `{host}`; {SUPPORTED}"
            ));
        };
        Location::File(PathBuf::from(percent_decode(path)))
    } else if let Some((scheme, _)) = url.split_once("://")
        && !scheme.is_empty()
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        Location::Unsupported(format!("unsupported URL scheme `{scheme}://`; {SUPPORTED}"))
    } else {
        Location::File(manifest_dir.join(url))
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(hi), Some(lo)) = (
                (b[i + 1] as char).to_digit(16),
                (b[i + 2] as char).to_digit(16),
            )
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// An HTTP agent configured from `config` (timeouts, proxies from the environment, no
/// automatic status errors, identity encoding).
pub fn agent(config: &NetConfig) -> Result<ureq::Agent, NetError> {
    agent_verifying(config, true, None)
}

/// [`agent`], with certificate verification on or off (off only for the hosts named in
/// [`NetConfig::no_verify_hosts`]).
fn agent_verifying(
    config: &NetConfig,
    verify: bool,
    proxy: Option<&(String, String)>,
) -> Result<ureq::Agent, NetError> {
    // Proxies are chosen per URL from `config.proxy` (curl's rules), never by ureq itself.
    let proxy = match proxy {
        None => None,
        Some((variable, url)) => Some(ureq::Proxy::new(url).map_err(|e| NetError::Config {
            variable: variable.clone(),
            value: url.clone(),
            reason: format!("not a usable proxy URL: {e}"),
        })?),
    };
    let roots = crate::trust::root_certs(config).map_err(|reason| NetError::Config {
        variable: config
            .ca_roots
            .as_ref()
            .map_or(vars::SSL_CERT_FILE.to_owned(), |(v, _)| v.clone()),
        value: config
            .ca_roots
            .as_ref()
            .map_or(String::new(), |(_, p)| p.display().to_string()),
        reason,
    })?;
    let tls = ureq::tls::TlsConfig::builder()
        .root_certs(roots)
        .disable_verification(!verify)
        .build();
    Ok(ureq::Agent::config_builder()
        .tls_config(tls)
        .proxy(proxy)
        .timeout_connect(Some(config.connect_timeout))
        .timeout_per_read(Some(config.stall_timeout))
        .timeout_recv_response(Some(config.stall_timeout + config.connect_timeout))
        .http_status_as_error(false)
        .accept_encoding("identity")
        .user_agent(concat!("clima-artifacts/", env!("CARGO_PKG_VERSION")))
        // Redirects are followed by `open`, one checked hop at a time (see `redirect`).
        .max_redirects(0)
        .build()
        .new_agent())
}

/// Opens `url` for reading (relative paths against `manifest_dir`).
pub fn open(
    agent: &ureq::Agent,
    url: &str,
    manifest_dir: &Path,
    config: &NetConfig,
) -> Result<Source, NetError> {
    match locate(url, manifest_dir) {
        Location::File(path) => {
            let file = std::fs::File::open(&path).map_err(|e| NetError::LocalSource {
                url: url.to_owned(),
                path: path.clone(),
                cause: e.into(),
            })?;
            let length = file.metadata().ok().map(|m| m.len());
            Ok(Source {
                reader: Box::new(file),
                length,
                resume: None,
                partial: None,
                watch: None,
            })
        }
        Location::Unsupported(reason) => Err(NetError::UnsupportedUrl {
            url: url.to_owned(),
            reason,
        }),
        Location::Http(u) => {
            let reply = get_following_redirects(agent, url, &u, config, &[])?;
            plain_source(url, reply, config)
        }
    }
}

/// A response's header `name`, if it is text.
pub(crate) fn header(resp: &ureq::http::Response<ureq::Body>, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The validator a byte range can be guarded by: a strong ETag, else Last-Modified (a weak
/// ETag cannot guard a range, RFC 9110 If-Range).
pub(crate) fn validator_of(resp: &ureq::http::Response<ureq::Body>) -> Option<String> {
    header(resp, "etag")
        .filter(|e| !e.starts_with("W/"))
        .or_else(|| header(resp, "last-modified"))
}

/// Whether the server says it serves byte ranges (`Accept-Ranges: bytes`).
pub(crate) fn accepts_ranges(resp: &ureq::http::Response<ureq::Body>) -> bool {
    header(resp, "accept-ranges").is_some_and(|v| v.eq_ignore_ascii_case("bytes"))
}

/// The body of the response `reply` to the GET of `url` as one stream, resumable in process
/// when the server allows it.
pub(crate) fn plain_source(
    url: &str,
    reply: Reply,
    config: &NetConfig,
) -> Result<Source, NetError> {
    let Reply {
        resp,
        answered,
        agent,
        permit,
    } = reply;
    let status = resp.status().as_u16();
    if !(200..300).contains(&status) {
        // The response ends before its place among the requests in flight is given back.
        drop(resp);
        drop(permit);
        return Err(NetError::HttpStatus {
            url: url.to_owned(),
            status,
        });
    }
    let length = resp.body().content_length();
    let resume = match (accepts_ranges(&resp), validator_of(&resp)) {
        (true, Some(validator)) => Some(Resumer {
            agent,
            url: answered,
            validator,
            total: length,
            limit: crate::limit::limit_of(config),
        }),
        _ => None,
    };
    let reader = resp.into_body().into_reader();
    Ok(Source {
        reader: Box::new(CheckedLength::new(reader, length, Some(permit))),
        length,
        resume,
        partial: None,
        watch: None,
    })
}

/// The agent for a request to `url` (one hop of a download): `agent`, unless that URL's host
/// is named in CLIMA_ARTIFACTS_NO_VERIFY_HOSTS (an agent of its own that does not verify
/// certificates, with a warning every time) or a proxy applies to it (an agent through that
/// proxy). Decided per hop: a redirect from a no-verify host to another host is verified.
fn agent_for(agent: &ureq::Agent, url: &str, config: &NetConfig) -> Result<ureq::Agent, NetError> {
    let proxy = config.proxy.for_url(url);
    match redirect::parts(url).map(|p| p.host.to_owned()) {
        Some(host) if crate::trust::skips_verification(config, &host) => {
            config.reporting.emit(NetEvent::TlsNotVerified { host });
            agent_verifying(config, false, proxy)
        }
        _ if proxy.is_some() => agent_verifying(config, true, proxy),
        _ => Ok(agent.clone()),
    }
}

/// A response to a download's first request.
pub(crate) struct Reply {
    pub(crate) resp: ureq::http::Response<ureq::Body>,
    /// The URL that gave it (after redirects).
    pub(crate) answered: String,
    /// The agent that asked it.
    pub(crate) agent: ureq::Agent,
    /// Its place among the requests in flight to its server, for as long as its body is read.
    pub(crate) permit: crate::limit::Permit,
}

/// GETs `u` (the download `url`), following at most [`redirect::MAX_REDIRECTS`] redirects, each
/// hop checked by [`redirect::check`] before anything connects to it, each with the agent its
/// own URL calls for ([`agent_for`]), each sent when fewer requests to its server are in
/// flight than [`NetConfig::connections`] allows.
pub(crate) fn get_following_redirects(
    base: &ureq::Agent,
    url: &str,
    u: &str,
    config: &NetConfig,
    headers: &[(&str, String)],
) -> Result<Reply, NetError> {
    let refused = |reason: String| NetError::Transport {
        url: url.to_owned(),
        reason,
        transient: false,
    };
    let mut current = u.to_owned();
    for hop in 0..=redirect::MAX_REDIRECTS {
        let agent = agent_for(base, &current, config)?;
        let permit = crate::limit::wait_for(&current, crate::limit::limit_of(config));
        let mut request = agent.get(&current);
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let resp = request
            .call()
            .map_err(|e| transport_at(url, &current, &e, config))?;
        let status = resp.status().as_u16();
        let reply = |resp, current| Reply {
            resp,
            answered: current,
            agent,
            permit,
        };
        if !matches!(status, 301 | 302 | 303 | 307 | 308) {
            return Ok(reply(resp, current));
        }
        let Some(location) = resp.headers().get("location").and_then(|v| v.to_str().ok()) else {
            return Ok(reply(resp, current));
        };
        let location = location.to_owned();
        // The redirect's own request ends here, before the next one is sent.
        drop(resp);
        drop(reply);
        if hop == redirect::MAX_REDIRECTS {
            break;
        }
        let next = redirect::join(&current, &location);
        redirect::check(u, &current, &next).map_err(|why| {
            refused(format!(
                "refused to follow redirect {} from `{}` to `{}`: {why}",
                hop + 1,
                crate::trust::redact_url(&current),
                crate::trust::redact_url(&next)
            ))
        })?;
        config.reporting.emit(NetEvent::Redirect {
            from: crate::trust::redact_url(&current),
            to: crate::trust::redact_url(&next),
        });
        current = next;
    }
    Err(refused(format!(
        "more than {} redirects (last at `{}`); the server is in a redirect loop",
        redirect::MAX_REDIRECTS,
        crate::trust::redact_url(&current)
    )))
}

/// The error of a request to `hop` (the download `url`, or a redirect target of it) as an
/// error of `url` whose reason says what to check; the proxy and the certificate it names are
/// those of `hop`.
pub(crate) fn transport_at(url: &str, hop: &str, e: &ureq::Error, config: &NetConfig) -> NetError {
    let text = e.to_string();
    if let Some((variable, proxy)) = config.proxy.for_url(hop) {
        return through_proxy(url, e, config, variable, &crate::trust::redact_url(proxy));
    }
    if text.contains("certificate")
        || text.contains("UnknownIssuer")
        || matches!(e, ureq::Error::Rustls(_))
    {
        let host = redirect::parts(hop).map_or(hop.to_owned(), |p| p.host.to_owned());
        let hop_note = match hop == url {
            true => String::new(),
            false => format!(
                " at `{}`, where it was redirected",
                crate::trust::redact_url(hop)
            ),
        };
        return NetError::Transport {
            url: url.to_owned(),
            reason: format!(
                "TLS error{hop_note} ({text}): {}",
                crate::trust::certificate_hint(config, &host)
            ),
            transient: false,
        };
    }
    let (reason, transient) = match e {
        ureq::Error::Timeout(_) => (
            format!(
                "timed out ({e}); connect timeout {}s ({CONNECT_TIMEOUT}), stall timeout {}s ({STALL_TIMEOUT})",
                config.connect_timeout.as_secs_f64(),
                config.stall_timeout.as_secs_f64()
            ),
            true,
        ),
        ureq::Error::Io(io) => (describe_io(io, config), crate::retry::is_transient_io(io)),
        // No explanation from the connector: treat like a refused connection.
        ureq::Error::ConnectionFailed => (e.to_string(), true),
        ureq::Error::HostNotFound => (
            format!("{e}: the host name does not resolve; check the URL"),
            false,
        ),
        // TLS (certificates, a server that does not speak TLS), malformed URLs, protocol
        // violations, redirect loops, proxy settings: the same request fails the same way.
        other => (other.to_string(), false),
    };
    NetError::Transport {
        url: url.to_owned(),
        reason,
        transient,
    }
}

/// The error of a request sent through the proxy `proxy` (redacted) that `variable` selected:
/// every message says it was the proxy, which one, and which variable to change. Without a
/// response the only connection made was to the proxy, so a refused, reset or timed-out
/// connection or an unknown host is the proxy's; `CONNECT` refusals (407 for credentials, 403,
/// 502) are the proxy's answer; a TLS failure is met through the proxy's tunnel (a
/// TLS-inspecting proxy presents a certificate of its own).
fn through_proxy(
    url: &str,
    e: &ureq::Error,
    config: &NetConfig,
    variable: &str,
    proxy: &str,
) -> NetError {
    let which = format!("the proxy `{proxy}` (from {variable})");
    let fix = format!(
        "check the proxy's address and that it runs, or change {variable}, or list the host in NO_PROXY to connect directly"
    );
    let text = e.to_string();
    let tls = matches!(e, ureq::Error::Rustls(_))
        || text.contains("certificate")
        || text.contains("UnknownIssuer");
    let (reason, transient) = match e {
        _ if tls => {
            let host = redirect::parts(url).map_or(url.to_owned(), |p| p.host.to_owned());
            (
                format!(
                    "TLS error through {which} ({text}): {}",
                    crate::trust::certificate_hint(config, &host)
                ),
                false,
            )
        }
        ureq::Error::ConnectProxyFailed(answer) => {
            let creds = if answer.contains("407") {
                "; it wants credentials: put them in the proxy URL (`http://user:password@proxy:port`)"
            } else {
                ""
            };
            (
                format!(
                    "{which} did not open a connection to the server: it answered `{answer}`{creds}; {fix}"
                ),
                false,
            )
        }
        ureq::Error::InvalidProxyUrl => (format!("{which} is not a valid proxy URL; {fix}"), false),
        ureq::Error::Io(io) if io.kind() == io::ErrorKind::ConnectionRefused => (
            format!("{which} refused the connection ({io}); {fix}"),
            true,
        ),
        ureq::Error::Io(io) => (
            format!("{which} failed: {}; {fix}", describe_io(io, config)),
            crate::retry::is_transient_io(io),
        ),
        ureq::Error::ConnectionFailed => {
            (format!("could not connect to {which}: {e}; {fix}"), true)
        }
        ureq::Error::HostNotFound => (
            format!("the host of {which} does not resolve ({e}); {fix}"),
            false,
        ),
        ureq::Error::Timeout(_) => (
            format!(
                "{which} did not answer in time ({e}; connect timeout {}s, \
                 {CONNECT_TIMEOUT}); {fix}",
                config.connect_timeout.as_secs_f64()
            ),
            true,
        ),
        other => (format!("through {which}: {other}"), false),
    };
    NetError::Transport {
        url: url.to_owned(),
        reason,
        transient,
    }
}

/// A human description of an I/O error met while reading a download.
pub fn describe_io(e: &io::Error, config: &NetConfig) -> String {
    match e.kind() {
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => format!(
            "stalled: no data for {}s (raise {STALL_TIMEOUT} for slow servers)",
            config.stall_timeout.as_secs_f64()
        ),
        io::ErrorKind::ConnectionReset => format!("connection reset by the server ({e})"),
        io::ErrorKind::ConnectionRefused => format!("connection refused ({e})"),
        io::ErrorKind::UnexpectedEof => format!("connection closed early: {e}"),
        // rustls reports certificate problems and non-TLS peers as invalid data.
        io::ErrorKind::InvalidData => format!("TLS or protocol error: {e}"),
        _ => e.to_string(),
    }
}

/// Fails with `UnexpectedEof` when the body ends before its `Content-Length`.
pub(crate) struct CheckedLength<R> {
    inner: R,
    expected: Option<u64>,
    seen: u64,
    /// The body was read to its end, or the server closed the connection: nothing is left
    /// for the server to send.
    ended: bool,
    /// The request's place among those in flight to its server: given back after `inner` is
    /// dropped (its connection closed), fields dropping in order; a while after that when
    /// the body is given up before its end ([`crate::limit::Permit::linger`]).
    permit: Option<crate::limit::Permit>,
}

impl<R> CheckedLength<R> {
    /// The body `inner` of a response that announced `expected` bytes, holding `permit`.
    pub(crate) fn new(
        inner: R,
        expected: Option<u64>,
        permit: Option<crate::limit::Permit>,
    ) -> CheckedLength<R> {
        CheckedLength {
            inner,
            expected,
            seen: 0,
            ended: false,
            permit,
        }
    }
}

impl<R> Drop for CheckedLength<R> {
    /// A body given up before its end is a request the server is still serving until it
    /// notices the close: its permit counts a while longer.
    fn drop(&mut self) {
        if let (false, Some(permit)) = (self.ended, self.permit.as_mut()) {
            permit.linger();
        }
    }
}

impl<R: Read> Read for CheckedLength<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf).map_err(|e| {
            // ureq wraps socket errors; surface the io::Error kind for classification.
            let e = match e.get_ref().and_then(|r| r.downcast_ref::<ureq::Error>()) {
                Some(ureq::Error::Io(inner)) => io::Error::new(inner.kind(), inner.to_string()),
                Some(ureq::Error::Timeout(t)) => {
                    io::Error::new(io::ErrorKind::TimedOut, t.to_string())
                }
                _ => e,
            };
            // The server closed the connection: it counts the request no longer.
            self.ended |= matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::UnexpectedEof
                    | io::ErrorKind::BrokenPipe
            );
            e
        })?;
        self.seen += n as u64;
        self.ended |= (n == 0 && !buf.is_empty()) || self.expected == Some(self.seen);
        if n == 0
            && !buf.is_empty()
            && let Some(expected) = self.expected
            && self.seen < expected
        {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "body ended after {} of {expected} bytes (Content-Length)",
                    self.seen
                ),
            ));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locates_urls_and_paths() {
        let d = Path::new("/m");
        assert_eq!(
            locate("https://x/y.tar.gz", d),
            Location::Http("https://x/y.tar.gz".into())
        );
        assert_eq!(
            locate("file:///a/b%20c.tar", d),
            Location::File("/a/b c.tar".into())
        );
        assert_eq!(locate("file://localhost/a", d), Location::File("/a".into()));
        assert_eq!(
            locate("data/x.tar", d),
            Location::File("/m/data/x.tar".into())
        );
        assert_eq!(locate("/abs/x.tar", d), Location::File("/abs/x.tar".into()));
        assert_eq!(locate("FILE:///a", d), Location::File("/a".into()));
        assert_eq!(locate("file://LOCALHOST/a", d), Location::File("/a".into()));
        for bad in [
            "file://server/a",
            "file://aaaaaaaaaé/a",
            "file://localhost",
            "ftp://h/x",
            "s3://b/k",
        ] {
            assert!(matches!(locate(bad, d), Location::Unsupported(_)), "{bad}");
        }
        // Not a scheme: a relative path that happens to contain `://` later on.
        assert_eq!(
            locate("data/a://b", d),
            Location::File("/m/data/a://b".into())
        );
    }

    #[test]
    fn transient_classification() {
        let s = |status| NetError::HttpStatus {
            url: "u".into(),
            status,
        };
        assert!(s(503).is_transient() && s(429).is_transient() && s(500).is_transient());
        assert!(!s(404).is_transient() && !s(403).is_transient());
        let t = |url: &str, e: ureq::Error| {
            transport_at(url, url, &e, &NetConfig::default()).is_transient()
        };
        assert!(t("u", ureq::Error::ConnectionFailed));
        assert!(t(
            "u",
            ureq::Error::Io(io::Error::from(io::ErrorKind::ConnectionRefused))
        ));
        assert!(!t("u", ureq::Error::HostNotFound));
        assert!(!t("u", ureq::Error::BadUri("no host".into())));
        assert!(!t("u", ureq::Error::Tls("bad certificate")));
        assert!(!t(
            "u",
            ureq::Error::Io(io::Error::new(
                io::ErrorKind::InvalidData,
                "invalid peer certificate: UnknownIssuer"
            ))
        ));
    }
}
