//! Reading a download's body: bounded, watched by the low-speed rule, resumed after a break,
//! hashed, and handed over in order to whoever unpacks it.
//!
//! ```text
//!  reader thread: Source -> read (>= half a buffer or 250 ms) -> size bound, low-speed rule
//!                 -> SHA-256 -> bounded channel of 256 KiB buffers -> Body (BufRead)
//!  on a transient break with a Resumer: Range + If-Range at the byte it broke, same SHA-256
//! ```

use std::io::{self, BufRead, Read};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::time::{Duration, Instant};

use crate::notice::NetEvent;
use clima_artifact_fs::human_bytes;
use clima_artifact_manifest::Sha256;
use clima_artifact_progress::Reporting;
use clima_artifact_progress::Transfer;
use clima_artifact_vars::{LOW_SPEED_LIMIT, LOW_SPEED_TIME};
use sha2::Digest;

use crate::NetConfig;
use crate::source::Source;

const CHUNK: usize = 256 * 1024;

/// Bounds on what the reader thread takes from a source.
#[derive(Debug, Clone)]
pub struct BodyRules {
    /// The manifest's `size`: reading byte `size + 1` is an error ([`RuleBroken::TooLong`]).
    pub max_bytes: Option<u64>,
    /// Bytes per second below which (averaged over `low_speed_time`) the source is abandoned;
    /// `0` = never. Over several connections, the bytes all of them received count.
    pub low_speed_limit: u64,
    /// The window of the low-speed rule.
    pub low_speed_time: Duration,
    /// When a broken transfer is resumed, and when it is given up ([`crate::retry`]).
    pub retry: crate::retry::RetryPolicy,
    /// Whether resumes are told as info notices.
    pub tell_resumes: bool,
    /// Where they are told (the configuration's [`NetConfig::reporting`]).
    pub reporting: Reporting,
}

impl BodyRules {
    /// The rules of `config`, for a body of at most `max_bytes` (the manifest's `size`).
    pub fn new(config: &NetConfig, max_bytes: Option<u64>, tell_resumes: bool) -> BodyRules {
        BodyRules {
            max_bytes,
            low_speed_limit: config.low_speed_limit,
            low_speed_time: config.low_speed_time,
            retry: config.retry,
            tell_resumes,
            reporting: config.reporting.clone(),
        }
    }
}

/// Why the reader thread stopped a source that was still sending, carried inside the
/// `io::Error` it reports (so the consumer can name the rule).
#[derive(Debug)]
#[non_exhaustive]
pub enum RuleBroken {
    /// The body is longer than [`BodyRules::max_bytes`].
    TooLong {
        /// The size it may have.
        size: u64,
    },
    /// The low-speed rule: fewer than `limit` bytes per second over the window.
    TooSlow {
        /// Bytes received in the window.
        bytes: u64,
        /// The window's length.
        seconds: f64,
        /// The limit, bytes per second.
        limit: u64,
    },
}

impl std::fmt::Display for RuleBroken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuleBroken::TooLong { size } => {
                write!(f, "longer than the manifest's size of {size} bytes")
            }
            RuleBroken::TooSlow {
                bytes,
                seconds,
                limit,
            } => write!(
                f,
                "too slow: {} in the last {seconds:.0} s, below {}/s (the low-speed rule: \
                 {LOW_SPEED_LIMIT} and {LOW_SPEED_TIME}; set the \
                 limit to 0 to wait for any speed)",
                human_bytes(*bytes),
                human_bytes(*limit)
            ),
        }
    }
}

impl std::error::Error for RuleBroken {}

impl RuleBroken {
    fn into_io(self) -> io::Error {
        io::Error::other(self)
    }

    /// The broken rule inside `e`, if that is why the source was stopped.
    pub fn of(e: &io::Error) -> Option<&RuleBroken> {
        e.get_ref()?.downcast_ref::<RuleBroken>()
    }
}

/// The low-speed rule's window: bytes since the window started. Over several connections,
/// the bytes any of them received count (`watch`) when they are more than the in-order part
/// read (a chunk far ahead of the next one needed is progress too), and once every byte was
/// received there is nothing left to be slow.
struct SpeedWindow {
    start: Instant,
    /// Bytes read in order.
    bytes: u64,
    watch: Option<crate::partial::Watch>,
    /// `watch`'s count when the window started.
    base: u64,
}

impl SpeedWindow {
    fn new(watch: Option<crate::partial::Watch>) -> SpeedWindow {
        SpeedWindow {
            start: Instant::now(),
            bytes: 0,
            base: watch.as_ref().map_or(0, |w| w.received()),
            watch,
        }
    }

    /// Counts `n` more bytes read; an error when a full window passed below the limit.
    fn check(&mut self, n: usize, rules: &BodyRules) -> io::Result<()> {
        self.bytes += n as u64;
        if rules.low_speed_limit == 0 || self.watch.as_ref().is_some_and(|w| w.complete()) {
            return Ok(());
        }
        let bytes = match &self.watch {
            Some(w) => self.bytes.max(w.received().saturating_sub(self.base)),
            None => self.bytes,
        };
        let elapsed = self.start.elapsed();
        if elapsed < rules.low_speed_time {
            return Ok(());
        }
        let needed = (rules.low_speed_limit as f64 * elapsed.as_secs_f64()) as u64;
        if bytes < needed {
            return Err(RuleBroken::TooSlow {
                bytes,
                seconds: elapsed.as_secs_f64(),
                limit: rules.low_speed_limit,
            }
            .into_io());
        }
        *self = SpeedWindow::new(self.watch.take());
        Ok(())
    }
}
const IN_FLIGHT: usize = 8;

/// The reader thread's next buffer: one the consumer handed back, else a new one, of [`CHUNK`]
/// bytes; with a `size` (`max_bytes`), never more than one byte past it after the `total` read.
fn next_buffer(free: &Receiver<Vec<u8>>, max_bytes: Option<u64>, total: u64) -> Vec<u8> {
    let mut buf = match free.try_recv() {
        Ok(b) => b,
        Err(TryRecvError::Empty | TryRecvError::Disconnected) => Vec::with_capacity(CHUNK),
    };
    // A buffer handed back keeps its length (the bytes of its last use are overwritten by the
    // next read): only a new or shortened one is zero-filled, not every buffer of a download.
    if buf.len() != CHUNK {
        buf.resize(CHUNK, 0);
    }
    // With a `size`, never ask for more than one byte past it.
    if let Some(max) = max_bytes {
        let room = max.saturating_add(1).saturating_sub(total);
        buf.truncate(room.clamp(1, CHUNK as u64) as usize);
    }
    buf
}

/// `read` (of the bytes after the `total` read before), made [`RuleBroken::TooLong`] when it
/// goes past the manifest's `size` (`max_bytes`).
fn within_size(read: io::Result<usize>, max_bytes: Option<u64>, total: u64) -> io::Result<usize> {
    read.and_then(|n| match max_bytes {
        Some(size) if total + n as u64 > size => Err(RuleBroken::TooLong { size }.into_io()),
        _ => Ok(n),
    })
}

/// Tells `transfer` the bytes received (`total` in order); over several connections (`watch`),
/// what all of them received, and their number when it changed from `connections` (the number
/// told last, updated here).
fn tell_received(
    transfer: &mut dyn Transfer,
    watch: Option<&crate::partial::Watch>,
    connections: &mut usize,
    total: u64,
) {
    match watch {
        Some(w) => {
            if w.connections() != *connections {
                *connections = w.connections();
                transfer.connections(*connections);
            }
            transfer.received(w.received().max(total));
        }
        None => transfer.received(total),
    }
}

/// What [`Body::spawn_tapped`] hands a copy of the bytes to (to forward them elsewhere while
/// they are verified here).
pub trait Tap: Send {
    /// The next bytes of the body. An error stops the body with it.
    fn bytes(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// The body ended: every byte was handed over.
    fn end(&mut self);
}

enum Msg {
    /// A buffer and how many bytes at its start were received.
    Data(Vec<u8>, usize),
    Failed(io::Error),
    End(Sha256, u64),
}

/// A download's body as a [`BufRead`]: a thread reads the source under the [`BodyRules`],
/// continues a broken transfer with range requests where the source allows it, computes the
/// SHA-256 of every byte and sends the buffers here, where the decompressor reads them in
/// place. Memory is a few buffers in flight, whatever the size.
pub struct Body {
    rx: Receiver<Msg>,
    recycle: SyncSender<Vec<u8>>,
    current: Vec<u8>,
    /// How many bytes at the start of `current` were received (the rest is a recycled
    /// buffer's old content).
    filled: usize,
    pos: usize,
    /// Bytes handed to the consumer so far.
    consumed: u64,
    done: Option<(Sha256, u64)>,
    failure: Option<io::Error>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Body {
    /// Starts reading `source` on a thread of its own; `name` (the artifact) is used in
    /// notices, `transfer` receives the progress.
    pub fn spawn(
        source: Source,
        transfer: Box<dyn Transfer>,
        rules: BodyRules,
        name: String,
    ) -> Body {
        Self::spawn_tapped(source, transfer, rules, name, None)
    }

    /// [`Body::spawn`], handing every byte to `tap` as well, in order, as the SHA-256 sees it
    /// (so after any resume): the bytes on the reader thread before the consumer gets them,
    /// then [`Tap::end`] at the end of the source. An error of the tap stops the body with
    /// that error. A tap dropped without `end` saw a body that broke or was abandoned.
    pub fn spawn_tapped(
        source: Source,
        mut transfer: Box<dyn Transfer>,
        rules: BodyRules,
        name: String,
        mut tap: Option<Box<dyn Tap>>,
    ) -> Body {
        let Source {
            reader: mut source,
            resume,
            watch,
            ..
        } = source;
        let (tx, rx) = sync_channel::<Msg>(IN_FLIGHT);
        let (recycle, free) = sync_channel::<Vec<u8>>(IN_FLIGHT + 2);
        let thread = std::thread::Builder::new()
            .name("clima-artifacts-reader".into())
            .spawn(move || {
                let mut sha = sha2::Sha256::new();
                let mut total = 0u64;
                let started = Instant::now();
                let mut window = SpeedWindow::new(watch.clone());
                let (mut resumes, mut stuck, mut opened_at) = (0u32, 0u32, 0u64);
                let mut connections = 0;
                loop {
                    let mut buf = next_buffer(&free, rules.max_bytes, total);
                    let read = read_retrying(&mut source, &mut buf, &mut window, &rules);
                    let read = within_size(read, rules.max_bytes, total);
                    let n = match read {
                        Ok(n) => n,
                        // A broken connection: continue at `total` with a range request, the
                        // same sha256 and decompressor state (one pass over the bytes).
                        Err(e)
                            if resume.is_some()
                                && crate::retry::is_transient_io(&e)
                                && RuleBroken::of(&e).is_none()
                                && let Some(wait) = rules.retry.next_resume(
                                    resumes,
                                    if total > opened_at { 0 } else { stuck + 1 },
                                ) =>
                        {
                            stuck = if total > opened_at { 0 } else { stuck + 1 };
                            resumes += 1;
                            // The broken request ends (its connection closes) before the
                            // wait, so that the server has the wait to notice the close.
                            drop(std::mem::replace(&mut source, Box::new(io::empty())));
                            std::thread::sleep(wait);
                            let resumer = resume.as_ref().expect("checked above");
                            match resumer.reopen(total) {
                                Ok(rest) => {
                                    if rules.tell_resumes {
                                        rules.reporting.emit(NetEvent::ResumingBroken {
                                            artifact: name.clone(),
                                            at: total,
                                            error: e.to_string(),
                                        });
                                    }
                                    source = rest;
                                    opened_at = total;
                                    continue;
                                }
                                Err(refused) => {
                                    transfer.failed(&refused.to_string());
                                    let _ = tx.send(Msg::Failed(refused));
                                    return;
                                }
                            }
                        }
                        Err(e) => {
                            transfer.failed(&e.to_string());
                            let _ = tx.send(Msg::Failed(e));
                            return;
                        }
                    };
                    if n == 0 {
                        if let Some(tap) = tap.as_mut() {
                            tap.end();
                        }
                        transfer.done(total, started.elapsed());
                        let digest = Sha256(sha.finalize().into());
                        let _ = tx.send(Msg::End(digest, total));
                        return;
                    }
                    sha.update(&buf[..n]);
                    if let Some(Err(e)) = tap.as_mut().map(|t| t.bytes(&buf[..n])) {
                        transfer.failed(&e.to_string());
                        let _ = tx.send(Msg::Failed(e));
                        return;
                    }
                    total += n as u64;
                    tell_received(&mut *transfer, watch.as_ref(), &mut connections, total);
                    if tx.send(Msg::Data(buf, n)).is_err() {
                        return; // the consumer gave up
                    }
                }
            })
            .ok();
        Body {
            rx,
            recycle,
            current: Vec::new(),
            filled: 0,
            pos: 0,
            consumed: 0,
            done: None,
            failure: None,
            thread,
        }
    }

    /// Bytes handed to the reader so far.
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Why the source stopped early, once it did: a broken rule ([`RuleBroken::of`]), a
    /// refused resume ([`ResumeRefused::of`](crate::source::ResumeRefused::of)), or the transport's error.
    pub fn failure(&self) -> Option<&io::Error> {
        self.failure.as_ref()
    }

    /// The SHA-256 and byte count of the whole source (call after reading to the end).
    pub fn finish(mut self) -> (Sha256, u64) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.done.unwrap_or((Sha256([0; 32]), 0))
    }
}

/// Reads into `buf`: at least half of it, unless the source ends or has sent something and a
/// quarter second passed (so a slow source still reports progress and meets the low-speed
/// rule's checks). Every read counts toward the low-speed rule.
fn read_retrying(
    source: &mut dyn Read,
    buf: &mut [u8],
    window: &mut SpeedWindow,
    rules: &BodyRules,
) -> io::Result<usize> {
    // An error abandons the attempt, so bytes read before it do not matter.
    let started = Instant::now();
    let mut filled = 0;
    while filled < buf.len() {
        match source.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => {
                filled += n;
                window.check(n, rules)?;
                if filled >= buf.len() / 2 || started.elapsed() >= Duration::from_millis(250) {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

impl Read for Body {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        let have = self.fill_buf()?;
        let n = out.len().min(have.len());
        out[..n].copy_from_slice(&have[..n]);
        self.consume(n);
        Ok(n)
    }
}

/// The decompressor reads the received buffers in place.
impl BufRead for Body {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.pos >= self.filled {
            if self.done.is_some() {
                return Ok(&[]);
            }
            if let Some(e) = &self.failure {
                return Err(io::Error::new(e.kind(), e.to_string()));
            }
            match self.rx.recv() {
                Ok(Msg::Data(buf, filled)) => {
                    let old = std::mem::replace(&mut self.current, buf);
                    let _ = self.recycle.try_send(old);
                    self.filled = filled;
                    self.pos = 0;
                }
                Ok(Msg::End(digest, total)) => self.done = Some((digest, total)),
                Ok(Msg::Failed(e)) => self.failure = Some(e),
                Err(_) => {
                    self.failure = Some(io::Error::other("the download thread stopped"));
                }
            }
        }
        Ok(&self.current[self.pos..self.filled])
    }

    fn consume(&mut self, n: usize) {
        let n = n.min(self.filled - self.pos);
        self.pos += n;
        self.consumed += n as u64;
    }
}
