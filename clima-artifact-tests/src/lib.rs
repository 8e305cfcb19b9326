//! Shared test support for clima-artifacts integration tests.
//!
//! - [`TestServer`]: a real HTTP/1.1 server on `127.0.0.1:0` (one thread per connection) serving
//!   registered bodies by path, honouring `Range` (`bytes=a-` and `bytes=a-b`) under `If-Range`,
//!   optionally capping each connection's rate and delaying each response (latency), counting GETs per path (also readable over
//!   HTTP at `/__count/<path>`, and body bytes sent and most connections at once at
//!   `/__sent/<path>`, for multi-process tests and benchmarks), with per-path [`Fault`]
//!   injection.
//! - [`invenio::InvenioServer`]: a loopback InvenioRDM archive (CaltechDATA, Zenodo) for
//!   `publish --archive`, its downloads served by a [`TestServer`].
//! - [`TarballBuilder`]: tarballs (plain, gzip, zstd, xz, bzip2) from an in-memory file list,
//!   with their SHA-256 and git tree hash (computed by real `git`, see [`git_tree_hash`]).
//! - [`artifacts_toml`] / [`write_manifest`]: an `Artifacts.toml` for test artifacts.
//! - [`test_config`], [`variant`], [`tree_files`], [`temp_entries`]: small helpers.

pub mod invenio;
mod proxy;
mod tls;
pub use proxy::{ConnectProxy, ProxyRules};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
pub use tls::TlsServer;

use clima_artifact_manifest::{ArtifactVariant, Download, GitTreeSha1, GitTreeSha256, Sha256};
use clima_artifact_runtime::Config;
use clima_artifact_runtime::depot::Depot;
use sha2::Digest;

/// A fault applied to one request of a path (or to every request, see [`TestServer::always`]).
#[derive(Debug, Clone)]
pub enum Fault {
    /// Answer with this status code and a short text body.
    Status(u16),
    /// Send the headers and `after` bytes of the body, then reset the connection (RST).
    Reset {
        /// Body bytes sent before the reset.
        after: usize,
    },
    /// Announce the full `Content-Length`, send only `after` bytes, then close cleanly.
    Short {
        /// Body bytes sent.
        after: usize,
    },
    /// Send the headers and `after` bytes, then send nothing more until the server is dropped.
    Stall {
        /// Body bytes sent before stalling.
        after: usize,
    },
    /// Send the whole body in `chunk`-byte pieces with `delay` between them.
    Trickle {
        /// Bytes per piece.
        chunk: usize,
        /// Pause between pieces.
        delay: Duration,
    },
    /// Serve these bytes instead of the registered body.
    Body(Vec<u8>),
    /// Answer `302 Found` with this `Location` (absolute or relative).
    Redirect(String),
    /// Send the body without a `Content-Length`, then keep sending zeros until the client
    /// goes away or the server is dropped (a hostile or broken server).
    Endless,
    /// Answer `200` with `Accept-Ranges: bytes`, the body's ETag and this `Content-Length`
    /// (whatever the request's range), send the registered body, then close: a server that
    /// announces far more than it has (a petabyte).
    Announce(u64),
    /// Serve this request normally (to place the faults after it on later requests).
    Pass,
    /// Answer this request with the whole body (`200`) even if it asks for a range.
    IgnoreRange,
    /// Answer a range request with a `Content-Range` one byte off the one asked for.
    WrongRange,
    /// From this request on, the path's body is these bytes (another ETag): a file replaced on
    /// the server during a download.
    Replace(Vec<u8>),
    /// [`Fault::Replace`] on a server that ignores `If-Range`: from this request on, a range
    /// is answered `206` with the new body's bytes and ETag, whatever validator it was asked
    /// under.
    ReplaceIgnoringIfRange(Vec<u8>),
}

#[derive(Default)]
struct Route {
    /// Shared, so a request does not copy it (a benchmark serves 100s of MB to many ranges).
    body: Arc<Vec<u8>>,
    /// The body's ETag, computed once when it is set (hashing 100s of MB per request would
    /// delay every response).
    etag: String,
    next: VecDeque<Fault>,
    always: Option<Fault>,
    /// Answer range requests with the whole body (200), as servers without range support do.
    ignore_ranges: bool,
    /// Serve ranges whatever their `If-Range` says.
    ignore_if_range: bool,
    /// Body bytes sent for this path.
    sent: u64,
    /// Range requests received for this path (the `Range` header's start offsets).
    ranges: Vec<u64>,
    /// Requests of this path in flight now (from the request to the last byte of its response
    /// or the client's close), and the most there were at once.
    open: usize,
    most_open: usize,
}

#[derive(Default)]
struct State {
    /// Body bytes written to clients, all paths together.
    sent: std::sync::atomic::AtomicU64,
    routes: Mutex<HashMap<String, Route>>,
    gets: Mutex<HashMap<String, usize>>,
    /// Folder whose files answer paths without a route (read at request time).
    dir: Mutex<Option<PathBuf>>,
    /// Body bytes per second per connection (`0`: as fast as the socket takes them).
    rate: std::sync::atomic::AtomicU64,
    /// Microseconds every GET waits before its response starts (a distant server's latency).
    latency_us: std::sync::atomic::AtomicU64,
    /// Microseconds a request stays counted in flight after its client closed the
    /// connection (`0`: the close is noticed at once; see [`TestServer::notice_closes_late`]).
    late_us: std::sync::atomic::AtomicU64,
}

/// A loopback HTTP/1.1 server for tests. Dropping it stops it (stalled responses end too).
pub struct TestServer {
    addr: SocketAddr,
    state: Arc<State>,
    stop: Arc<AtomicBool>,
}

impl Default for TestServer {
    fn default() -> Self {
        TestServer::start()
    }
}

impl TestServer {
    /// Starts a server on `127.0.0.1:<free port>`.
    pub fn start() -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let addr = listener.local_addr().expect("local addr");
        let state = Arc::new(State::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        std::thread::spawn(move || {
            while !sp.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (st, sp) = (st.clone(), sp.clone());
                        std::thread::spawn(move || {
                            let _ = handle(stream, &st, &sp);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        TestServer { addr, state, stop }
    }

    /// `http://127.0.0.1:<port>/<path>` (`path` without a leading slash).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{}", self.addr, path.trim_start_matches('/'))
    }

    /// The base URL, `http://127.0.0.1:<port>`.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Serves `body` at `path` (replacing any earlier body; faults are kept).
    pub fn serve(&self, path: &str, body: impl Into<Vec<u8>>) {
        let mut routes = self.state.routes.lock().unwrap();
        let route = routes.entry(key(path)).or_default();
        route.body = Arc::new(body.into());
        route.etag = etag_of(&route.body);
    }

    /// Also serves the files under `root`, read at request time, for every path without a route
    /// of its own (a static file host: what the CLI's `publish`/`create --tarball-out` write).
    pub fn serve_dir(&self, root: &Path) {
        *self.state.dir.lock().unwrap() = Some(root.to_path_buf());
    }

    /// Applies `faults` to the next requests of `path`, one per request, then serves normally.
    pub fn fail_next(&self, path: &str, faults: impl IntoIterator<Item = Fault>) {
        let mut routes = self.state.routes.lock().unwrap();
        routes.entry(key(path)).or_default().next.extend(faults);
    }

    /// Applies `fault` to every request of `path` (after any [`TestServer::fail_next`] faults).
    pub fn always(&self, path: &str, fault: Fault) {
        let mut routes = self.state.routes.lock().unwrap();
        routes.entry(key(path)).or_default().always = Some(fault);
    }

    /// Caps every response body at `bytes_per_second` per connection (a link whose streams
    /// are capped, as archival servers and object stores do).
    pub fn cap_rate(&self, bytes_per_second: u64) {
        self.state.rate.store(bytes_per_second, Ordering::Relaxed);
    }

    /// Delays the start of every response to a GET by `latency` (the round trips to a distant
    /// server; the `/__count` and `/__sent` endpoints answer at once).
    pub fn set_latency(&self, latency: Duration) {
        self.state
            .latency_us
            .store(latency.as_micros() as u64, Ordering::Relaxed);
    }

    /// Makes the server notice a connection its client closed late, as servers that only
    /// learn of a close when a write fails, or on their event loop's next turn, do: a paced
    /// response stops watching for the close between its pieces (the next write fails), and
    /// a request whose client went away stays counted in flight for `late` more
    /// ([`TestServer::most_connections`]).
    pub fn notice_closes_late(&self, late: Duration) {
        self.state
            .late_us
            .store(late.as_micros() as u64, Ordering::Relaxed);
    }

    /// The most requests of `path` in flight at the same time so far, as a server limiting
    /// connections per client counts them: from the request to the last byte of its response,
    /// or until the server noticed that the client closed the connection (at once, or late:
    /// [`TestServer::notice_closes_late`]).
    pub fn most_connections(&self, path: &str) -> usize {
        let routes = self.state.routes.lock().unwrap();
        routes.get(&key(path)).map_or(0, |r| r.most_open)
    }

    /// Number of GET requests received for `path` so far.
    pub fn gets(&self, path: &str) -> usize {
        self.state
            .gets
            .lock()
            .unwrap()
            .get(&key(path))
            .copied()
            .unwrap_or(0)
    }

    /// Makes `path` answer range requests with the whole body (`200`), like a server without
    /// range support.
    pub fn ignore_ranges(&self, path: &str) {
        let mut routes = self.state.routes.lock().unwrap();
        routes.entry(key(path)).or_default().ignore_ranges = true;
    }

    /// Body bytes sent for `path` so far.
    pub fn bytes_sent_for(&self, path: &str) -> u64 {
        let routes = self.state.routes.lock().unwrap();
        routes.get(&key(path)).map_or(0, |r| r.sent)
    }

    /// The start offsets of the range requests received for `path`, in order.
    pub fn ranges_of(&self, path: &str) -> Vec<u64> {
        let routes = self.state.routes.lock().unwrap();
        routes
            .get(&key(path))
            .map_or_else(Vec::new, |r| r.ranges.clone())
    }

    /// Body bytes sent so far, all paths together (bytes the endless faults pushed included).
    pub fn bytes_sent(&self) -> u64 {
        self.state.sent.load(Ordering::Relaxed)
    }

    /// Total GET requests received for all paths (the `/__count/` endpoint excluded).
    pub fn total_gets(&self) -> usize {
        self.state.gets.lock().unwrap().values().sum()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn key(path: &str) -> String {
    format!("/{}", path.trim_start_matches('/'))
}

/// Reads the GET count of `path` from a server at `base` over HTTP (for other processes).
pub fn count_over_http(base: &str, path: &str) -> usize {
    let addr = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).expect("connect to test server");
    write!(
        s,
        "GET /__count{} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n",
        key(path)
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.rsplit("\r\n\r\n")
        .next()
        .and_then(|b| b.trim().parse().ok())
        .expect("count body")
}

#[expect(
    clippy::too_many_lines,
    reason = "the test server's request handler: one arm per fault it can inject, each a few \
              lines; split, the faults' effect on one response would be spread over functions"
)]
fn handle(stream: TcpStream, state: &State, stop: &AtomicBool) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    // Headers are written in pieces: without this, Nagle's algorithm and the client's delayed
    // ACK hold each response's first bytes back by up to 200 ms (a real server sends its
    // headers in one segment).
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut request_headers = HashMap::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            request_headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or("");
    let path = parts.next().unwrap_or("/").to_owned();
    let mut out = stream;
    if method != "GET" {
        return respond(&mut out, 405, b"only GET");
    }
    if let Some(p) = path.strip_prefix("/__count") {
        let n = state.gets.lock().unwrap().get(p).copied().unwrap_or(0);
        return respond(&mut out, 200, n.to_string().as_bytes());
    }
    if let Some(p) = path.strip_prefix("/__sent") {
        let routes = state.routes.lock().unwrap();
        let (sent, most) = routes.get(p).map_or((0, 0), |r| (r.sent, r.most_open));
        drop(routes);
        return respond(&mut out, 200, format!("{sent} {most}").as_bytes());
    }
    *state.gets.lock().unwrap().entry(path.clone()).or_default() += 1;
    let latency = state.latency_us.load(Ordering::Relaxed);
    if latency > 0 {
        std::thread::sleep(Duration::from_micros(latency));
    }
    // `bytes=a-` or `bytes=a-b` (inclusive).
    let range = request_headers
        .get("range")
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.split_once('-'))
        .and_then(|(a, b)| {
            let start = a.parse::<u64>().ok()?;
            let end = match b {
                "" => None,
                b => Some(b.parse::<u64>().ok()?),
            };
            Some((start, end))
        });
    let (body, etag, fault, ignore_ranges, ignore_if_range) = {
        let mut routes = state.routes.lock().unwrap();
        match routes.get_mut(&path) {
            None => {
                drop(routes);
                return match file_under(state, &path) {
                    Some(body) => respond(&mut out, 200, &body),
                    None => respond(&mut out, 404, b"not found"),
                };
            }
            Some(r) => {
                let mut f = r.next.pop_front().or_else(|| r.always.clone());
                if let Some(Fault::Replace(new) | Fault::ReplaceIgnoringIfRange(new)) = &f {
                    r.ignore_if_range |= matches!(f, Some(Fault::ReplaceIgnoringIfRange(_)));
                    r.body = Arc::new(new.clone());
                    r.etag = etag_of(&r.body);
                    f = None;
                }
                if let Some((start, _)) = range {
                    r.ranges.push(start);
                }
                r.open += 1;
                r.most_open = r.most_open.max(r.open);
                if r.etag.is_empty() {
                    r.etag = etag_of(&r.body);
                }
                (
                    r.body.clone(),
                    r.etag.clone(),
                    f,
                    r.ignore_ranges,
                    r.ignore_if_range,
                )
            }
        }
    };
    // The request is in flight until the last byte of its response leaves: `done` is called
    // just before that byte is written (or the connection is reset or shut), so a client that
    // read the whole response can never find it still counted.
    let open = std::cell::RefCell::new(Some(OpenGuard {
        state,
        path: &path,
        late: Duration::from_micros(state.late_us.load(Ordering::Relaxed)),
    }));
    let done = || open.borrow_mut().take().map(OpenGuard::ended);
    // A range is honoured when asked for, not ignored by this route or fault, and the
    // If-Range validator (if any) is this body's ETag; otherwise the whole body is sent (as
    // HTTP says).
    let honoured = range
        .filter(|_| !ignore_ranges && !matches!(fault, Some(Fault::IgnoreRange)))
        .filter(|_| ignore_if_range || request_headers.get("if-range").is_none_or(|v| *v == etag))
        .filter(|&(s, _)| s <= body.len() as u64);
    let start = honoured.map_or(0, |(s, _)| s as usize);
    let end = honoured
        .and_then(|(_, e)| e)
        .map_or(body.len(), |e| (e as usize + 1).min(body.len()));
    let count = |n: usize| {
        state.sent.fetch_add(n as u64, Ordering::Relaxed);
        if let Some(r) = state.routes.lock().unwrap().get_mut(&path) {
            r.sent += n as u64;
        }
    };
    let rate = state.rate.load(Ordering::Relaxed);
    let late = state.late_us.load(Ordering::Relaxed) > 0;
    let began = Instant::now();
    let mut paced = 0u64;
    // Writes `bytes` at the route's rate, counting them as they go; `last`: they end the
    // response (the request stops being counted as in flight before the last piece).
    let mut send = |out: &mut TcpStream, bytes: &[u8], last: bool| -> std::io::Result<()> {
        const PIECE: usize = 16 * 1024;
        // The end of a response is counted before it leaves, so that a client that read the
        // whole response (and its process, which may exit at once) always finds every byte of
        // it counted; counting after the write raced with that client under load.
        if rate == 0 {
            let split = bytes.len().saturating_sub(PIECE);
            out.write_all(&bytes[..split])?;
            count(split);
            if last {
                done();
                count(bytes.len() - split);
                out.write_all(&bytes[split..])?;
            } else {
                out.write_all(&bytes[split..])?;
                count(bytes.len() - split);
            }
            return Ok(());
        }
        let pieces = bytes.len().div_ceil(PIECE);
        for (i, piece) in bytes.chunks(PIECE).enumerate() {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            // Each piece leaves when the ones before it have taken their time, so the last
            // one ends the response at once.
            let due = Duration::from_secs_f64(paced as f64 / rate as f64);
            let wait = due.saturating_sub(began.elapsed());
            // A server that notices closes late learns of one when a write fails.
            if late {
                std::thread::sleep(wait);
            } else if peer_closed_within(out, wait) {
                return Err(std::io::ErrorKind::BrokenPipe.into());
            }
            if last && i + 1 == pieces {
                done();
                count(piece.len());
                out.write_all(piece)?;
            } else {
                out.write_all(piece)?;
                count(piece.len());
            }
            paced += piece.len() as u64;
        }
        Ok(())
    };
    let shift = usize::from(matches!(fault, Some(Fault::WrongRange)));
    let ranged = |out: &mut TcpStream| -> std::io::Result<()> {
        if honoured.is_some() {
            write!(
                out,
                "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {}-{}/{}\r\nETag: {etag}\r\nAccept-Ranges: bytes\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
                end - start,
                start + shift,
                (end + shift).saturating_sub(1),
                body.len()
            )
        } else {
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nETag: {etag}\r\nAccept-Ranges: {}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
                body.len(),
                if ignore_ranges { "none" } else { "bytes" }
            )
        }
    };
    // Fault offsets are positions in the whole body: a resumed request past `after` gets
    // nothing more before the fault strikes again.
    let upto = |after: usize| after.clamp(start, end);
    match fault {
        None
        | Some(
            Fault::Pass
            | Fault::IgnoreRange
            | Fault::WrongRange
            | Fault::Replace(_)
            | Fault::ReplaceIgnoringIfRange(_),
        ) => {
            ranged(&mut out)?;
            if start == end {
                done();
            }
            send(&mut out, &body[start..end], true)?;
            out.flush()
        }
        Some(Fault::Status(code)) => {
            done();
            respond(&mut out, code, b"injected failure")
        }
        Some(Fault::Body(other)) => {
            count(other.len());
            done();
            respond(&mut out, 200, &other)
        }
        Some(Fault::Reset { after }) => {
            ranged(&mut out)?;
            send(&mut out, &body[start..upto(after)], false)?;
            out.flush()?;
            std::thread::sleep(Duration::from_millis(20));
            done();
            reset(out);
            Ok(())
        }
        Some(Fault::Short { after }) => {
            ranged(&mut out)?;
            send(&mut out, &body[start..upto(after)], false)?;
            out.flush()?;
            done();
            out.shutdown(std::net::Shutdown::Both)
        }
        Some(Fault::Stall { after }) => {
            ranged(&mut out)?;
            send(&mut out, &body[start..upto(after)], false)?;
            out.flush()?;
            // Stalled until the client gives up (closes) or the server is dropped.
            let begun = Instant::now();
            while !stop.load(Ordering::Relaxed) && begun.elapsed() < Duration::from_secs(120) {
                if peer_closed_within(&out, Duration::from_millis(20)) {
                    break;
                }
            }
            Ok(())
        }
        Some(Fault::Redirect(location)) => {
            done();
            write!(
                out,
                "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )?;
            out.flush()
        }
        Some(Fault::Announce(length)) => {
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Length: {length}\r\nETag: {etag}\r\nAccept-Ranges: bytes\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n"
            )?;
            send(&mut out, &body, false)?;
            out.flush()?;
            done();
            out.shutdown(std::net::Shutdown::Both)
        }
        Some(Fault::Endless) => {
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n"
            )?;
            out.write_all(&body)?;
            count(body.len());
            let zeros = vec![0u8; 64 * 1024];
            let begun = Instant::now();
            while !stop.load(Ordering::Relaxed) && begun.elapsed() < Duration::from_secs(120) {
                out.write_all(&zeros)?;
                count(zeros.len());
            }
            Ok(())
        }
        Some(Fault::Trickle { chunk, delay }) => {
            ranged(&mut out)?;
            let pieces = (end - start).div_ceil(chunk.max(1));
            for (i, piece) in body[start..end].chunks(chunk.max(1)).enumerate() {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                if i + 1 == pieces {
                    done();
                }
                out.write_all(piece)?;
                count(piece.len());
                out.flush()?;
                std::thread::sleep(delay);
            }
            Ok(())
        }
    }
}

/// Waits up to `wait` and says whether the client closed the connection meanwhile (so that a
/// paced response ends as soon as the client goes away, and connection counts are exact).
fn peer_closed_within(out: &TcpStream, wait: Duration) -> bool {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd {
        fd: out.as_raw_fd(),
        events: libc::POLLRDHUP,
        revents: 0,
    };
    let ms = wait.as_millis().min(10_000) as libc::c_int;
    // SAFETY: `fd` is one valid pollfd for an open socket.
    let n = unsafe { libc::poll(&mut fd, 1, ms) };
    n > 0 && fd.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

/// Counts a connection of a path as open while it lives. Dropped without [`OpenGuard::ended`],
/// the response did not end (its client went away, or the server stops): it counts `late`
/// longer.
struct OpenGuard<'a> {
    state: &'a State,
    path: &'a str,
    late: Duration,
}

impl OpenGuard<'_> {
    /// The response ended (or is about to): it stops counting now.
    fn ended(mut self) {
        self.late = Duration::ZERO;
    }
}

impl Drop for OpenGuard<'_> {
    fn drop(&mut self) {
        std::thread::sleep(self.late);
        if let Some(r) = self.state.routes.lock().unwrap().get_mut(self.path) {
            r.open = r.open.saturating_sub(1);
        }
    }
}

/// A strong ETag for `body` (its length and an FNV-1a hash).
fn etag_of(body: &[u8]) -> String {
    let hash = body.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("\"{}-{hash:016x}\"", body.len())
}

/// The bytes of `path` under the folder of [`TestServer::serve_dir`], if any (no `..`).
fn file_under(state: &State, path: &str) -> Option<Vec<u8>> {
    let dir = state.dir.lock().unwrap().clone()?;
    let rel = Path::new(path.trim_start_matches('/'));
    if rel
        .components()
        .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return None;
    }
    std::fs::read(dir.join(rel)).ok()
}

fn headers(out: &mut TcpStream, code: u16, len: usize) -> std::io::Result<()> {
    let reason = match code {
        200 => "OK",
        404 => "Not Found",
        403 => "Forbidden",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    };
    write!(
        out,
        "HTTP/1.1 {code} {reason}\r\nContent-Length: {len}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n"
    )
}

fn respond(out: &mut TcpStream, code: u16, body: &[u8]) -> std::io::Result<()> {
    headers(out, code, body.len())?;
    out.write_all(body)?;
    out.flush()
}

/// Closes with RST instead of FIN (SO_LINGER 0): a connection cut mid-transfer.
pub(crate) fn reset(stream: TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: valid socket fd owned by `stream`; the option value is a properly sized linger.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(stream);
}

/// One entry of a test tarball.
#[derive(Debug, Clone)]
pub enum Entry {
    /// A regular file.
    File {
        /// Relative path (`/`-separated).
        path: String,
        /// Content.
        bytes: Vec<u8>,
        /// Owner exec bit.
        exec: bool,
    },
    /// A directory (possibly empty).
    Dir {
        /// Relative path.
        path: String,
    },
    /// A symbolic link.
    Symlink {
        /// Relative path.
        path: String,
        /// Link target.
        target: String,
    },
}

/// Builds tarballs from an in-memory list of entries.
#[derive(Debug, Clone, Default)]
pub struct TarballBuilder {
    entries: Vec<Entry>,
}

impl TarballBuilder {
    /// An empty tarball.
    pub fn new() -> TarballBuilder {
        TarballBuilder::default()
    }
    /// Adds a regular file (mode 0644).
    pub fn file(mut self, path: &str, bytes: impl Into<Vec<u8>>) -> Self {
        self.entries.push(Entry::File {
            path: path.into(),
            bytes: bytes.into(),
            exec: false,
        });
        self
    }
    /// Adds an executable file (mode 0755).
    pub fn exec(mut self, path: &str, bytes: impl Into<Vec<u8>>) -> Self {
        self.entries.push(Entry::File {
            path: path.into(),
            bytes: bytes.into(),
            exec: true,
        });
        self
    }
    /// Adds a directory.
    pub fn dir(mut self, path: &str) -> Self {
        self.entries.push(Entry::Dir { path: path.into() });
        self
    }
    /// Adds a symlink.
    pub fn symlink(mut self, path: &str, target: &str) -> Self {
        self.entries.push(Entry::Symlink {
            path: path.into(),
            target: target.into(),
        });
        self
    }
    /// The entries so far.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// An uncompressed tar stream.
    pub fn tar(&self) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for e in &self.entries {
            let mut h = tar::Header::new_gnu();
            h.set_mtime(1_600_000_000);
            match e {
                Entry::File { path, bytes, exec } => {
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_mode(if *exec { 0o755 } else { 0o644 });
                    h.set_size(bytes.len() as u64);
                    b.append_data(&mut h, path, bytes.as_slice()).unwrap();
                }
                Entry::Dir { path } => {
                    h.set_entry_type(tar::EntryType::Directory);
                    h.set_mode(0o755);
                    h.set_size(0);
                    b.append_data(&mut h, path, std::io::empty()).unwrap();
                }
                Entry::Symlink { path, target } => {
                    h.set_entry_type(tar::EntryType::Symlink);
                    h.set_mode(0o777);
                    h.set_size(0);
                    b.append_link(&mut h, path, target).unwrap();
                }
            }
        }
        b.into_inner().unwrap()
    }

    /// A gzip-compressed tarball.
    pub fn gzip(&self) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&self.tar()).unwrap();
        e.finish().unwrap()
    }

    /// A zstd-compressed tarball.
    pub fn zstd(&self) -> Vec<u8> {
        zstd::encode_all(self.tar().as_slice(), 3).unwrap()
    }

    /// An xz-compressed tarball (`.tar.xz`).
    pub fn xz(&self) -> Vec<u8> {
        let mut w =
            lzma_rust2::XzWriter::new(Vec::new(), lzma_rust2::XzOptions::with_preset(6)).unwrap();
        w.write_all(&self.tar()).unwrap();
        w.finish().unwrap()
    }

    /// A bzip2-compressed tarball (`.tar.bz2`).
    pub fn bzip2(&self) -> Vec<u8> {
        let mut w = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        w.write_all(&self.tar()).unwrap();
        w.finish().unwrap()
    }

    /// Writes the entries into `dir` (as extraction should).
    pub fn write_to(&self, dir: &Path) {
        for e in &self.entries {
            match e {
                Entry::File { path, bytes, exec } => {
                    let p = dir.join(path);
                    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                    std::fs::write(&p, bytes).unwrap();
                    let mode = if *exec { 0o755 } else { 0o644 };
                    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
                }
                Entry::Dir { path } => std::fs::create_dir_all(dir.join(path)).unwrap(),
                Entry::Symlink { path, target } => {
                    let p = dir.join(path);
                    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                    std::os::unix::fs::symlink(target, &p).unwrap();
                }
            }
        }
    }

    /// The git tree hash of the content, by real `git` (see [`git_tree_hash`]).
    pub fn git_tree_hash(&self) -> GitTreeSha1 {
        let dir = tempfile::tempdir().unwrap();
        self.write_to(dir.path());
        git_tree_hash(dir.path())
    }

    /// The git tree SHA-256 of the content, by real `git` in a SHA-256 repository (see
    /// [`git_tree_hash_sha256`]).
    pub fn git_tree_hash_sha256(&self) -> GitTreeSha256 {
        let dir = tempfile::tempdir().unwrap();
        self.write_to(dir.path());
        git_tree_hash_sha256(dir.path())
    }
}

/// SHA-256 of bytes.
pub fn sha256(bytes: &[u8]) -> Sha256 {
    Sha256(sha2::Sha256::digest(bytes).into())
}

/// Prints the line the MPI test programs (`src/bin/mpi_*.rs`) report one resolution with, the
/// format `tests/it/mpi.rs` parses, and returns whether it succeeded:
///
/// ```text
/// RESULT rank=<r> size=<n> name=<name> ok path=<path>
/// RESULT rank=<r> size=<n> name=<name> err=<message on one line>
/// ```
pub fn print_result(
    rank: usize,
    size: usize,
    name: &str,
    result: Result<&Path, &clima_artifact_runtime::Error>,
) -> bool {
    match result {
        Ok(p) => {
            println!(
                "RESULT rank={rank} size={size} name={name} ok path={}",
                p.display()
            );
            true
        }
        Err(e) => {
            let one_line = e.to_string().replace('\n', " | ");
            println!("RESULT rank={rank} size={size} name={name} err={one_line}");
            false
        }
    }
}

/// The stdout (as text) of a finished process; panics with its stderr unless it exited
/// successfully. For helper binaries and tools the tests run.
pub fn success_stdout(out: std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The target directory `cargo metadata` reports for this workspace (trybuild builds under its
/// `tests/trybuild`), found with the `cargo` running the tests.
pub fn cargo_target_dir() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    let meta: serde_json::Value = serde_json::from_slice(success_stdout(out).as_bytes()).unwrap();
    PathBuf::from(meta["target_directory"].as_str().expect("target_directory"))
}

/// Says that the calling test does nothing, and why: prints `skipped: <reason>` on stderr and,
/// when `CLIMA_TEST_SKIP_DIR` is set (`scripts/test.sh` sets it), writes the reason into a file
/// of that folder named after the test binary and the test (the thread's name, which libtest
/// sets to the test's path), so that the script counts the test as skipped, not passed. The
/// caller returns right after.
pub fn skip(reason: &str) {
    eprintln!("skipped: {reason}");
    let Some(dir) = std::env::var_os("CLIMA_TEST_SKIP_DIR") else {
        return;
    };
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|s| {
            s.rsplit_once('-')
                .map_or(s.clone(), |(name, _hash)| name.to_owned())
        })
        .unwrap_or_else(|| "test".to_owned());
    let test = std::thread::current()
        .name()
        .unwrap_or("main")
        .replace("::", ".");
    let file = Path::new(&dir).join(format!("{binary}--{test}").replace('/', "_"));
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(file, format!("{reason}\n"));
}

/// The uid [`as_other_user`] runs commands as: `nobody`.
pub const OTHER_UID: u32 = 65534;

/// A command prefix (`setpriv`) that runs what follows as another user ([`OTHER_UID`], no
/// groups): the co-user of a shared depot or store who plants things in it. `None`, after
/// [`skip`] said why, unless this process is root and `/usr/bin/setpriv` exists. In CI
/// (`CI=true`, where tests run as root) a missing setpriv panics.
pub fn as_other_user() -> Option<Command> {
    let setpriv = Path::new("/usr/bin/setpriv");
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root && !setpriv.exists() && std::env::var("CI").as_deref() == Ok("true") {
        panic!("/usr/bin/setpriv (util-linux) is required in CI");
    }
    if !root || !setpriv.exists() {
        skip("needs root and /usr/bin/setpriv to act as another user");
        return None;
    }
    let mut cmd = Command::new(setpriv);
    cmd.arg(format!("--reuid={OTHER_UID}"))
        .arg(format!("--regid={OTHER_UID}"))
        .args(["--clear-groups", "--"]);
    Some(cmd)
}

/// Whether `git` runs. In CI (`CI=true`) a missing git panics; elsewhere it returns `false`
/// after printing why, so the caller can skip.
pub fn have_git() -> bool {
    let ok = Command::new("git")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("`git` is required in CI but cannot be run");
        }
        skip("`git` is not installed");
    }
    ok
}

/// The git tree hash of `dir` computed by real `git` (`add -A --force` into a scratch
/// repository outside `dir`, then `write-tree`), ignoring user and system git configuration.
pub fn git_tree_hash(dir: &Path) -> GitTreeSha1 {
    GitTreeSha1::from_hex(&git_write_tree(dir, "sha1")).unwrap()
}

/// [`git_tree_hash`] in a repository made with `git init --object-format=sha256`: the git tree
/// SHA-256 of `dir` (`git-tree-sha256`) as real `git` computes it.
pub fn git_tree_hash_sha256(dir: &Path) -> GitTreeSha256 {
    GitTreeSha256::from_hex(&git_write_tree(dir, "sha256")).unwrap()
}

/// `git write-tree` of `dir` added to a scratch repository of `object_format`.
fn git_write_tree(dir: &Path, object_format: &str) -> String {
    let git_dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new("git")
            .env("GIT_DIR", git_dir.path())
            .env("GIT_WORK_TREE", dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("GIT_INDEX_FILE")
            .args(["-c", "core.fileMode=true", "-c", "core.symlinks=true"])
            .args(["-c", "core.autocrlf=false"])
            .args(["-c", "core.looseCompression=0", "-c", "gc.auto=0"])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let object_format = format!("--object-format={object_format}");
    run(&["init", "-q", object_format.as_str()]);
    run(&["add", "-A", "--force", "."]);
    run(&["write-tree"]).trim().to_owned()
}

/// A test artifact ready to serve: its tarball bytes and hashes.
#[derive(Debug, Clone)]
pub struct TestArtifact {
    /// The tarball's content.
    pub builder: TarballBuilder,
    /// The served bytes.
    pub tarball: Vec<u8>,
    /// SHA-256 of `tarball`.
    pub sha256: Sha256,
    /// Git tree hash of the content.
    pub tree_hash: GitTreeSha1,
}

impl TestArtifact {
    /// From a builder, gzip-compressed.
    pub fn gzip(builder: TarballBuilder) -> TestArtifact {
        let tarball = builder.gzip();
        TestArtifact::with_bytes(builder, tarball)
    }

    /// From a builder and the bytes to serve (e.g. [`TarballBuilder::zstd`]).
    pub fn with_bytes(builder: TarballBuilder, tarball: Vec<u8>) -> TestArtifact {
        let tree_hash = builder.git_tree_hash();
        TestArtifact {
            sha256: sha256(&tarball),
            tarball,
            tree_hash,
            builder,
        }
    }

    /// A small artifact with a nested folder, an executable and a symlink; `seed` varies the
    /// content.
    pub fn sample(seed: u32) -> TestArtifact {
        TestArtifact::gzip(
            TarballBuilder::new()
                .file("README.md", format!("sample artifact {seed}\n"))
                .dir("data")
                .file("data/values.csv", format!("x,y\n{seed},2\n").repeat(50))
                .exec("bin/run.sh", "#!/bin/sh\necho hi\n")
                .symlink("latest.csv", "data/values.csv"),
        )
    }

    /// An artifact of `files` files of `size` pseudo-random (incompressible) bytes each.
    pub fn large(seed: u64, files: usize, size: usize) -> TestArtifact {
        let mut b = TarballBuilder::new();
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        for i in 0..files {
            let mut bytes = Vec::with_capacity(size);
            while bytes.len() < size {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                bytes.extend_from_slice(&x.to_le_bytes());
            }
            bytes.truncate(size);
            b = b.file(&format!("part{}/file{i}.bin", i % 4), bytes);
        }
        TestArtifact::gzip(b)
    }

    /// A manifest variant downloading from `urls` in order.
    pub fn variant(&self, urls: &[String]) -> ArtifactVariant {
        variant(self.tree_hash, urls, self.sha256)
    }

    /// Checks that `dir` holds exactly this artifact's content (by real git).
    pub fn assert_content(&self, dir: &Path) {
        assert_eq!(
            git_tree_hash(dir),
            self.tree_hash,
            "content of `{}`",
            dir.display()
        );
    }
}

impl TestArtifact {
    /// Checks that `dir` holds exactly the builder's entries (content, exec bits, symlink
    /// targets; nothing else), without git.
    pub fn assert_files(&self, dir: &Path) {
        let mut expected = Vec::new();
        for e in self.builder.entries() {
            match e {
                Entry::File { path, bytes, exec } => {
                    let p = dir.join(path);
                    let got = std::fs::read(&p)
                        .unwrap_or_else(|err| panic!("cannot read `{}`: {err}", p.display()));
                    assert!(got == *bytes, "content of `{}` differs", p.display());
                    let mode = std::fs::metadata(&p).unwrap().permissions().mode();
                    assert_eq!(mode & 0o100 != 0, *exec, "exec bit of `{}`", p.display());
                    expected.push(path.clone());
                }
                Entry::Symlink { path, target } => {
                    let p = dir.join(path);
                    assert_eq!(std::fs::read_link(&p).unwrap(), Path::new(target));
                    expected.push(path.clone());
                }
                Entry::Dir { .. } => {}
            }
        }
        expected.sort();
        assert_eq!(tree_files(dir), expected, "files in `{}`", dir.display());
    }
}

/// A `[name]`-style variant with these downloads (all with the same `sha256`).
pub fn variant(hash: GitTreeSha1, urls: &[String], sha256: Sha256) -> ArtifactVariant {
    ArtifactVariant {
        git_tree_sha1: hash,
        git_tree_sha256: None,
        lazy: false,
        downloads: urls
            .iter()
            .map(|u| Download {
                url: u.clone(),
                sha256,
                size: None,
                index_sha256: None,
            })
            .collect(),
        platform: None,
        metadata: BTreeMap::new(),
        line: 1,
    }
}

/// An artifact served by a fresh loopback server at one path, and an empty depot in a temp dir.
pub struct Served {
    /// Owns the temp dir holding the depot.
    pub dir: tempfile::TempDir,
    /// `<dir>/depot` (not created yet).
    pub depot: PathBuf,
    /// The server.
    pub server: TestServer,
    /// What it serves.
    pub art: TestArtifact,
}

/// Serves `art`'s tarball at `path` on a new server, with a depot in a new temp dir.
pub fn served(art: TestArtifact, path: &str) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let server = TestServer::start();
    server.serve(path, art.tarball.clone());
    Served {
        dir,
        depot,
        server,
        art,
    }
}

/// The reason of each failed source of an install error (one line each), or the error's own
/// text when it is not a [`clima_artifact_runtime::Error::DownloadFailed`].
pub fn failure_reasons(e: &clima_artifact_runtime::Error) -> String {
    match e {
        clima_artifact_runtime::Error::DownloadFailed { failures, .. } => failures
            .iter()
            .map(|f| f.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

/// A configuration for tests: these depots, short timeouts, fast retries, no progress bars.
pub fn test_config(depots: &[PathBuf]) -> Config {
    let mut config = Config {
        depots: depots.iter().map(Depot::new).collect(),
        offline: false,
        julia_interop: false,
        lock_timeout: Duration::from_secs(60),
        max_unpacked_bytes: 1 << 30,
        progress: false,
        ..Config::default()
    };
    config.net.connect_timeout = Duration::from_secs(2);
    config.net.stall_timeout = Duration::from_millis(700);
    config.net.retry.attempts = 3;
    config.net.retry.base = Duration::from_millis(20);
    config
}

/// The environment variables that make a child process use `config`'s depots and timeouts.
pub fn config_env(config: &Config) -> Vec<(String, String)> {
    let depots: Vec<String> = config
        .depots
        .iter()
        .map(|d| d.root().display().to_string())
        .collect();
    vec![
        ("CLIMA_ARTIFACTS_DEPOT_PATH".into(), depots.join(":")),
        (
            "CLIMA_ARTIFACTS_STALL_TIMEOUT".into(),
            config.net.stall_timeout.as_secs_f64().to_string(),
        ),
        (
            "CLIMA_ARTIFACTS_LOCK_TIMEOUT".into(),
            config.lock_timeout.as_secs_f64().to_string(),
        ),
        (
            "CLIMA_ARTIFACTS_RETRIES".into(),
            config.net.retry.attempts.to_string(),
        ),
        (
            "CLIMA_ARTIFACTS_CONNECTIONS".into(),
            config.net.connections.to_string(),
        ),
        (
            "CLIMA_ARTIFACTS_PARALLEL_MIN_SIZE".into(),
            config.net.parallel_min_size.to_string(),
        ),
        ("CLIMA_ARTIFACTS_PROGRESS".into(), "0".into()),
        ("CLIMA_ARTIFACTS_OFFLINE".into(), "0".into()),
    ]
}

/// One artifact of an `Artifacts.toml`: name, hash, and `(url, sha256)` downloads.
pub struct ManifestEntry<'a> {
    /// Artifact name.
    pub name: &'a str,
    /// Git tree hash.
    pub hash: GitTreeSha1,
    /// Downloads in order.
    pub downloads: Vec<(String, Sha256)>,
    /// Extra `key = "value"` lines (metadata).
    pub extra: Vec<(&'a str, &'a str)>,
}

/// The text of an `Artifacts.toml` with these entries (`[name]` tables).
pub fn artifacts_toml(entries: &[ManifestEntry<'_>]) -> String {
    let mut s = String::new();
    for e in entries {
        s.push_str(&format!("[{}]\ngit-tree-sha1 = \"{}\"\n", e.name, e.hash));
        for (k, v) in &e.extra {
            s.push_str(&format!("{k} = {v:?}\n"));
        }
        for (url, sha) in &e.downloads {
            s.push_str(&format!(
                "\n    [[{}.download]]\n    url = {url:?}\n    sha256 = \"{sha}\"\n",
                e.name
            ));
        }
        s.push('\n');
    }
    s
}

/// Writes `Artifacts.toml` into `dir` and returns its path.
pub fn write_manifest(dir: &Path, entries: &[ManifestEntry<'_>]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join("Artifacts.toml");
    std::fs::write(&p, artifacts_toml(entries)).unwrap();
    p
}

/// Writes `<depot>/artifacts/Overrides.toml` with this text.
pub fn write_overrides(depot: &Path, text: &str) -> PathBuf {
    let dir = depot.join("artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("Overrides.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// Names in `<depot>/artifacts/` that are partial downloads (`.partial-*`).
pub fn partial_entries(depot: &Path) -> Vec<String> {
    names_in(&depot.join("artifacts"))
        .into_iter()
        .filter(|n| n.starts_with(clima_artifact_runtime::manifest::layout::PARTIAL_PREFIX))
        .collect()
}

/// Names in `<depot>/artifacts/` that are install temp dirs (`.<hash>.clima-install-*`).
pub fn temp_entries(depot: &Path) -> Vec<String> {
    names_in(&depot.join("artifacts"))
        .into_iter()
        .filter(|n| clima_artifact_runtime::depot::Depot::temp_dir_owner(n).is_some())
        .collect()
}

/// The name of the install temp dir of `hash` that process `pid` on host `host` would leave
/// in `<depot>/artifacts/` (`host` as temp names spell it: `.` and `/` as `_`).
pub fn install_temp_name(hash: &GitTreeSha1, host: &str, pid: u32) -> String {
    format!(
        ".{hash}{}{host}.{pid}.00000000000000ff",
        clima_artifact_runtime::manifest::layout::INSTALL_MARK
    )
}

/// This host as temp names spell it (`.` and `/` as `_`).
pub use clima_artifact_fs::host_tag;

/// Names in `<depot>/artifacts/` that look like installed artifacts (40 hex digits).
pub fn installed_entries(depot: &Path) -> Vec<String> {
    names_in(&depot.join("artifacts"))
        .into_iter()
        .filter(|n| n.len() == 40 && n.bytes().all(|b| b.is_ascii_hexdigit()))
        .collect()
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Asserts that a depot holds nothing partial: no temp dirs and no installed artifacts.
pub fn assert_depot_clean(depot: &Path) {
    assert_eq!(temp_entries(depot), Vec::<String>::new(), "temp dirs left");
    assert_eq!(
        installed_entries(depot),
        Vec::<String>::new(),
        "unexpected artifacts"
    );
}

/// Relative paths of every file and symlink under `dir`, sorted.
pub fn tree_files(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}
