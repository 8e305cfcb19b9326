//! [`TestServer`]: a real HTTP/1.1 server on `127.0.0.1:0` (one thread per connection) serving
//! registered bodies by path, honouring `Range` under `If-Range`, with per-path [`Fault`]
//! injection, rate caps, latency, and counters readable over HTTP.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    /// Answer this range request (`bytes=a-b`) with other bytes than the body's (each byte
    /// inverted) under the `Content-Range` asked for: one lying answer among honest ones.
    CorruptRange,
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
    /// Answer range requests with other bytes than the body's (under the right
    /// `Content-Range`): a server that lies, or storage that rotted.
    corrupt_ranges: bool,
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
    /// server, counted in flight: [`TestServer::most_connections`]; the `/__count` and
    /// `/__sent` endpoints answer at once).
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

    /// Waits (at most 10 s) until no response for `path` is in flight, so that what
    /// [`TestServer::bytes_sent_for`] says next counts every byte of the responses already
    /// begun: a response cut short counts its last piece after writing it, which its client
    /// may have read, and failed on, first.
    pub fn wait_until_idle(&self, path: &str) {
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            let open = {
                let routes = self.state.routes.lock().unwrap();
                routes.get(&key(path)).map_or(0, |r| r.open)
            };
            if open == 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
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

    /// Makes `path` answer every range request `bytes=a-b` (not a suffix `bytes=-n`) with
    /// other bytes than the body's (each byte inverted) under the `Content-Range` asked for:
    /// a server that lies about what it sends.
    pub fn corrupt_ranges(&self, path: &str) {
        let mut routes = self.state.routes.lock().unwrap();
        routes.entry(key(path)).or_default().corrupt_ranges = true;
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
    // `bytes=a-`, `bytes=a-b` (inclusive) or `bytes=-n` (the last n bytes).
    let range_spec = request_headers
        .get("range")
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.split_once('-'))
        .map(|(a, b)| (a.to_owned(), b.to_owned()));
    let suffix = range_spec
        .as_ref()
        .filter(|(a, _)| a.is_empty())
        .and_then(|(_, b)| b.parse::<u64>().ok());
    let range = range_spec.as_ref().and_then(|(a, b)| {
        let start = a.parse::<u64>().ok()?;
        let end = match b.as_str() {
            "" => None,
            b => Some(b.parse::<u64>().ok()?),
        };
        Some((start, end))
    });
    let (body, etag, fault, ignore_ranges, ignore_if_range, corrupt_ranges) = {
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
                if let Some(n) = suffix {
                    r.ranges.push((r.body.len() as u64).saturating_sub(n));
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
                    r.corrupt_ranges,
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
    // The latency is part of the request's time in flight, as a distant server's is.
    let latency = state.latency_us.load(Ordering::Relaxed);
    if latency > 0 {
        std::thread::sleep(Duration::from_micros(latency));
    }
    // A range is honoured when asked for, not ignored by this route or fault, and the
    // If-Range validator (if any) is this body's ETag; otherwise the whole body is sent (as
    // HTTP says).
    let len = body.len() as u64;
    let range = range.or_else(|| suffix.filter(|n| *n > 0).map(|n| (len - n.min(len), None)));
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
    // A route that lies sends other bytes for a range (each byte inverted), under the right
    // `Content-Range`.
    let corrupt_ranges = corrupt_ranges || matches!(fault, Some(Fault::CorruptRange));
    let body = if corrupt_ranges && honoured.is_some() && suffix.is_none() {
        let mut other = body.to_vec();
        other[start..end].iter_mut().for_each(|b| *b = !*b);
        Arc::new(other)
    } else {
        body
    };
    // Writes `bytes` at the route's rate, counting them as they go; `last`: they end the
    // response (the request stops being counted as in flight before the last piece).
    let mut send = |out: &mut TcpStream, bytes: &[u8], last: bool| -> std::io::Result<()> {
        const PIECE: usize = 16 * 1024;
        // The end of a response is counted before it leaves, so that a client that read the
        // whole response (and its process, which may exit at once) always finds every byte of
        // it counted; counting after the write raced with that client under load.
        if rate == 0 {
            // Counted piece by piece as each leaves: a client that closes mid-body (a ranged
            // worker done with its part) finds what it was sent counted, not nothing.
            let split = bytes.len().saturating_sub(PIECE);
            for piece in bytes[..split].chunks(256 * 1024) {
                out.write_all(piece)?;
                count(piece.len());
            }
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
            | Fault::CorruptRange
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
