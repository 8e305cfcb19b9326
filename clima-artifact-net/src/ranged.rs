//! Large downloads: several ranged connections at once, and received bytes that outlive the
//! process.
//!
//! ```text
//!  first request: a GET (or, with a kept partial file, a ranged GET of its first missing bytes)
//!    -> Content-Length >= NetConfig::parallel_min_size, Accept-Ranges: bytes, a validator
//!  workers (up to NetConfig::connections): Range: bytes=a-b + If-Range: <validator>
//!    -> pwrite into the partial file's data, then that chunk's counter in its record
//!  reader: the file's complete prefix, in order -> Body (SHA-256, size bound, low-speed rule)
//!    -> the same extraction and verification as any download
//! ```
//!
//! The partial file (one per artifact, URL and user; named by the caller, 0600) holds a
//! 4 KiB header (format line, length, chunk size, validator, SHA-256 of the URL), then one
//! little-endian `u64` per chunk (bytes received from the chunk's start), then the tarball's
//! bytes at their offsets. A worker writes a chunk's bytes before its counter, so a killed
//! process never leaves a counter claiming bytes that were not written. The next attempt (any
//! process, any host sharing the depot) opens the file without following links, checks that
//! it is this user's, has one link and the size its header says, asks for the first missing
//! bytes under `If-Range`, and feeds the kept bytes through the same verification pass: kept
//! bytes are never trusted, only reused. A changed file (another validator, another size) is
//! a restart, never a mixed tarball: every `206` must carry the validator the partial file
//! was started with (a server that ignores `If-Range` answers with another version's bytes).
//!
//! Every request waits for a place among the [`NetConfig::connections`] allowed in flight to
//! its server (for the whole process: the first request, every chunk, re-asked ones, a
//! download of another artifact from the same server), and keeps it until its body is read
//! or its connection closed. While the first response (the whole file from byte 0) fills
//! the chunks from the start, the other connections take theirs from the end, so that it is
//! cut short only when nothing is left to ask for: a response cut short stays in flight at
//! the server until it notices.
//!
//! A server that answers a range request with `200` (same validator) or a wrong
//! `Content-Range` gets one stream from then on; a chunk that breaks, stalls or meets a 5xx is
//! retried where it stopped, and a 429 or 503 while other connections run closes that
//! connection instead, as [`crate::retry`] says (its policy, in one place).
//!
//! Here: the partial file (its record, finding and creating it), the first request, and the
//! reader of the complete prefix; the workers that fetch the chunks are in module `workers`.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::notice::{
    ContentRange, NetEvent, PartialNotKeptReason, PartialRestartReason, PartialUnusableReason,
};
use clima_artifact_fs::Dir;
use clima_artifact_progress::Reporting;

use crate::limit::Permit;
use crate::partial::{Partial, Watch};
use crate::source::{
    CheckedLength, Location, Reply, ResumeRefused, Source, accepts_ranges, get_following_redirects,
    locate, plain_source, validator_of,
};
use crate::{NetConfig, NetError};

mod workers;

use workers::advance;

/// The first line of a partial file's header.
const FORMAT: &str = "clima-artifacts partial download 1";
/// The header's size; the chunk counters follow it.
const HEADER: u64 = 4096;
const MIN_CHUNK: u64 = 256 * 1024;
const MAX_CHUNK: u64 = 16 * 1024 * 1024;
/// Most chunks of one partial file (8 MiB of counters; 16 TiB at the largest chunks): a
/// larger download is read as one stream, and a header claiming more is not one of ours.
const MAX_CHUNKS: u64 = 1 << 20;
/// Longest validator kept (ETags are short; a longer one is not kept, and the download is
/// not resumable across processes).
const MAX_VALIDATOR: usize = 1024;
const BUF: usize = 256 * 1024;

pub use crate::limit::MAX_CONNECTIONS;
pub use crate::partial::Kept;

/// Where and how a large download keeps its bytes.
pub struct Large<'a> {
    /// The folder the partial file goes in (the depot's `artifacts` folder).
    pub dir: &'a Dir,
    /// The partial file's name there (one per artifact, URL and user).
    pub name: &'a str,
    /// The key of the URL, which the file's header records: a kept file of another URL is
    /// not continued (the depot makes it, with the name: `Staging::partial`).
    pub key: &'a str,
    /// The artifact, for notices.
    pub artifact: &'a str,
    /// The most bytes the download may have (the manifest's `size`): a longer
    /// `Content-Length` is read as one stream, which the body's size bound stops.
    pub max_bytes: Option<u64>,
    /// Called with the bytes the partial file will newly take and the tarball's length
    /// before anything is allocated; an `Err` (its text) fails the download.
    pub room: &'a dyn Fn(u64, u64) -> Result<(), String>,
    /// Whether resumes are told as info notices.
    pub tell: bool,
    /// The most bytes the connections may fetch past what the reader has read (`None`: no
    /// bound), but never less than a chunk per connection. A download whose reader is paced by others (one sent over MPI, which stops
    /// at the receivers' next checkpoint when one of them fails) stops with its reader,
    /// instead of going on to the end; what it received stays in the partial file.
    pub lead: Option<u64>,
}

/// What a partial file's header says.
#[derive(Debug, Clone, PartialEq)]
struct Record {
    length: u64,
    chunk: u64,
    validator: String,
    url: String,
}

impl Record {
    fn chunks(&self) -> usize {
        self.length.div_ceil(self.chunk) as usize
    }
    fn data_at(&self) -> u64 {
        HEADER + (8 * self.chunks() as u64).next_multiple_of(4096)
    }
    fn file_len(&self) -> u64 {
        self.data_at() + self.length
    }
    fn start(&self, k: usize) -> u64 {
        k as u64 * self.chunk
    }
    fn len(&self, k: usize) -> u64 {
        self.chunk.min(self.length - self.start(k))
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = format!(
            "{FORMAT}\nlength {}\nchunk {}\nvalidator {}\nurl-sha256 {}\n",
            self.length, self.chunk, self.validator, self.url
        )
        .into_bytes();
        out.resize(HEADER as usize, 0);
        out
    }

    /// The header in `bytes`, if it is one this version wrote and its values are sane: a
    /// chunk size that [`chunk_for`] gives, at most [`MAX_CHUNKS`] chunks (what is read and
    /// allocated for the counters is bounded whatever the header claims).
    fn decode(bytes: &[u8]) -> Option<Record> {
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        let text = std::str::from_utf8(&bytes[..end]).ok()?;
        let mut lines = text.lines();
        if lines.next()? != FORMAT {
            return None;
        }
        let mut field = |key: &str| lines.next()?.strip_prefix(key)?.strip_prefix(' ');
        let length = field("length")?.parse::<u64>().ok()?;
        let chunk = field("chunk")?.parse::<u64>().ok()?;
        let validator = field("validator")?.to_owned();
        let url = field("url-sha256")?.to_owned();
        let sane = length >= 1
            && (MIN_CHUNK..=MAX_CHUNK).contains(&chunk)
            && chunk % (64 * 1024) == 0
            && length.div_ceil(chunk) <= MAX_CHUNKS
            && usable_validator(&validator);
        sane.then_some(Record {
            length,
            chunk,
            validator,
            url,
        })
    }
}

/// Whether `v` can be kept in a header: short, printable ASCII.
fn usable_validator(v: &str) -> bool {
    !v.is_empty() && v.len() <= MAX_VALIDATOR && v.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// The chunk size of a download of `length` bytes over `connections`: about four chunks per
/// connection, 256 KiB to 16 MiB, a multiple of 64 KiB.
fn chunk_for(length: u64, connections: usize) -> u64 {
    (length / (connections as u64 * 4))
        .clamp(MIN_CHUNK, MAX_CHUNK)
        .next_multiple_of(64 * 1024)
}

/// Why a worker stopped the whole download.
#[derive(Debug, Clone)]
enum Failure {
    /// The file changed on the server (another validator or size): the attempt starts over.
    Changed(String),
    /// A request failed for good, or too often.
    Net(NetError),
    /// Reading or writing failed.
    Io(io::ErrorKind, String),
}

impl Failure {
    fn to_io(&self) -> io::Error {
        match self {
            Failure::Changed(why) => io::Error::other(ResumeRefused(why.clone())),
            Failure::Net(e) => io::Error::other(e.clone()),
            Failure::Io(kind, text) => io::Error::new(*kind, text.clone()),
        }
    }
}

struct State {
    /// Bytes received of each chunk, from its start.
    done: Vec<u64>,
    /// Whether a worker is fetching the chunk.
    taken: Vec<bool>,
    /// Failures of each chunk in a row without progress.
    failures: Vec<u32>,
    /// The first chunk not complete.
    first: usize,
    /// One stream from now on (the server does not serve ranges as it said).
    single: bool,
    /// The worker that reads that stream.
    filler: Option<usize>,
    /// The first response (the whole file from byte 0) is being read into the chunks from
    /// the start: the other connections take chunks from the end, so that it is never cut
    /// short while there is work left (a response cut short stays in flight at the server
    /// until it notices, and the server would count one request too many).
    leading: bool,
    fatal: Option<Failure>,
    /// Workers still running.
    workers: usize,
}

struct Shared {
    file: File,
    dir: Dir,
    name: String,
    record: Record,
    /// The manifest's URL (for errors) and the one that answered, after redirects.
    url: String,
    answered: String,
    agent: ureq::Agent,
    config: NetConfig,
    state: Mutex<State>,
    cond: Condvar,
    received: AtomicU64,
    open: AtomicUsize,
    cancel: AtomicBool,
    resumed_at: u64,
    /// Bytes the reader has read ([`PartialReader`]'s position).
    read: AtomicU64,
    /// [`Large::lead`].
    lead: Option<u64>,
    /// What the lead's unit tests observe and steer (the waits for the reader).
    #[cfg(test)]
    hooks: lead_tests::Hooks,
}

impl Partial for Shared {
    fn resumed_at(&self) -> u64 {
        self.resumed_at
    }
    fn path(&self) -> PathBuf {
        self.dir.path().join(&self.name)
    }
    fn remove(&self) {
        self.stop_connections();
        let _ = self.dir.remove_file_if_same(&self.name, &self.file);
    }
    fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }
    fn connections(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }
    fn length(&self) -> u64 {
        self.record.length
    }
    fn whole(&self) -> Option<io::Result<(File, u64)>> {
        let st = self.state();
        (st.first >= st.done.len() && st.fatal.is_none())
            .then(|| self.file.try_clone().map(|f| (f, self.record.data_at())))
    }
}

/// A kept partial file, opened and checked.
struct Found {
    file: File,
    record: Record,
    done: Vec<u64>,
    /// Bytes of the file not yet allocated on disk.
    unallocated: u64,
}

/// The partial file `large.name`, if one of this user's is there for its URL (`large.key`).
/// `Err` says why the name cannot be used (something of another user's, a link, a folder): the
/// download then keeps nothing. A file of this user's that is not a usable partial file is removed.
fn find_kept(
    large: &Large<'_>,
    reporting: &Reporting,
) -> Result<Option<Found>, PartialNotKeptReason> {
    let file = match large.dir.open_file_rw(large.name) {
        Ok(None) => return Ok(None),
        Ok(Some(f)) => f,
        Err(e) => return Err(PartialNotKeptReason::CannotOpen(e.into())),
    };
    let meta = file
        .metadata()
        .map_err(|e| PartialNotKeptReason::CannotOpen(e.into()))?;
    let path = large.dir.path().join(large.name);
    if meta.uid() != clima_artifact_fs::euid() || meta.nlink() != 1 {
        return Err(PartialNotKeptReason::NotOwned {
            path,
            uid: meta.uid(),
        });
    }
    let unusable = |why: PartialUnusableReason| {
        reporting.emit(NetEvent::PartialUnusable {
            path: path.clone(),
            why,
        });
        let _ = large.dir.remove_file_if_same(large.name, &file);
        Ok(None)
    };
    let mut header = vec![0; HEADER as usize];
    if file.read_exact_at(&mut header, 0).is_err() {
        return unusable(PartialUnusableReason::ShorterThanHeader);
    }
    let Some(record) = Record::decode(&header) else {
        return unusable(PartialUnusableReason::UnreadableHeader);
    };
    // Every field is bounded before anything is read or allocated by it: the length by the
    // most the download may have, the file by the size its header implies.
    if let Some(max) = large.max_bytes
        && record.length > max
    {
        return unusable(PartialUnusableReason::TooLong {
            length: record.length,
            max,
        });
    }
    if record.url != large.key || meta.len() != record.file_len() {
        return unusable(PartialUnusableReason::Mismatch);
    }
    let mut counters = vec![0; 8 * record.chunks()];
    if file.read_exact_at(&mut counters, HEADER).is_err() {
        return unusable(PartialUnusableReason::Unreadable);
    }
    let done: Vec<u64> = counters
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect();
    if done.iter().enumerate().any(|(k, &d)| d > record.len(k)) {
        return unusable(PartialUnusableReason::CountersPastChunks);
    }
    let unallocated = record.file_len().saturating_sub(meta.blocks() * 512);
    Ok(Some(Found {
        file,
        record,
        done,
        unallocated,
    }))
}

/// Opens `url` like [`open`](crate::source::open), as a large download when it is one: a
/// kept partial file of an earlier attempt is continued, and a response of at least
/// [`NetConfig::parallel_min_size`] bytes from a server that serves byte ranges with a
/// validator is fetched over up to [`NetConfig::connections`] connections into a partial file
/// (see the [module docs](self)). Anything else is read as one stream, as `open` does.
pub fn open_large(
    agent: &ureq::Agent,
    url: &str,
    manifest_dir: &std::path::Path,
    config: &NetConfig,
    large: &Large<'_>,
) -> Result<Source, NetError> {
    let Location::Http(u) = locate(url, manifest_dir) else {
        return crate::source::open(agent, url, manifest_dir, config);
    };
    let found = match find_kept(large, &config.reporting) {
        Ok(found) => found,
        Err(why) => {
            config.reporting.emit(NetEvent::PartialNotKept {
                artifact: large.artifact.to_owned(),
                why,
            });
            return crate::source::open(agent, url, manifest_dir, config);
        }
    };
    let Some(found) = found else {
        let reply = get_following_redirects(agent, url, &u, config, &[])?;
        return fresh(url, reply, config, large);
    };
    room_for(large, url, found.unallocated, found.record.length)?;
    let record = found.record.clone();
    let first = (0..record.chunks()).find(|&k| found.done[k] < record.len(k));
    let Some(first) = first else {
        // Everything was received: only verification is left, no request needed.
        let via = Via::new(url, url.to_owned(), agent.clone());
        return start(found, None, via, config, large);
    };
    let from = record.start(first) + found.done[first];
    let to = record.start(first) + record.len(first) - 1;
    let headers = [
        ("Range", format!("bytes={from}-{to}")),
        ("If-Range", record.validator.clone()),
    ];
    let reply = get_following_redirects(agent, url, &u, config, &headers)?;
    let status = reply.resp.status().as_u16();
    let path = large.dir.path().join(large.name);
    let drop_kept = |why: PartialRestartReason| {
        config.reporting.emit(NetEvent::PartialRestart {
            path: path.clone(),
            why,
        });
        let _ = large.dir.remove_file_if_same(large.name, &found.file);
    };
    let validator = validator_of(&reply.resp);
    let same = validator.as_deref() == Some(record.validator.as_str());
    let range = content_range(&reply.resp);
    match status {
        206 if same && range == Some((from, to, record.length)) => {
            let first = First::new(
                ranged_stream(reply.resp, from, reply.permit),
                Some(first),
                false,
            );
            let via = Via::new(url, reply.answered, reply.agent);
            start(found, Some(first), via, config, large)
        }
        206 => {
            // Bytes of another version of the file (a server that ignores If-Range), of one
            // that cannot be told, or of another range: never spliced onto the kept ones.
            drop_kept(match same {
                false => PartialRestartReason::ValidatorChanged,
                true => PartialRestartReason::OtherRange(described(range)),
            });
            let agent = reply.agent.clone();
            // This response ends before the next request is sent.
            drop(reply);
            let reply = get_following_redirects(&agent, url, &u, config, &[])?;
            fresh(url, reply, config, large)
        }
        200 if same => {
            // The same file, but the range is not served: one stream, skipping kept bytes.
            let first = First::new(whole_stream(reply.resp, reply.permit), None, true);
            let via = Via::new(url, reply.answered, reply.agent);
            start(found, Some(first), via, config, large)
        }
        200 => {
            drop_kept(PartialRestartReason::FileChanged);
            fresh(url, reply, config, large)
        }
        _ => plain_source(url, reply, config),
    }
}

/// [`Large::room`] for `partial` more bytes of a partial file of a `length`-byte tarball.
fn room_for(large: &Large<'_>, url: &str, partial: u64, length: u64) -> Result<(), NetError> {
    (large.room)(partial, length).map_err(|reason| NetError::Transport {
        url: url.to_owned(),
        reason,
        transient: false,
    })
}

/// `Content-Range: bytes a-b/total` of `resp`.
fn content_range(resp: &ureq::http::Response<ureq::Body>) -> Option<(u64, u64, u64)> {
    let v = crate::source::header(resp, "content-range")?;
    let (range, total) = v.strip_prefix("bytes ")?.split_once('/')?;
    let (a, b) = range.split_once('-')?;
    Some((a.parse().ok()?, b.parse().ok()?, total.parse().ok()?))
}

/// The range `r` (of [`content_range`]) as a notice tells it.
fn described(r: Option<(u64, u64, u64)>) -> ContentRange {
    match r {
        Some((first, last, total)) => ContentRange::Bytes { first, last, total },
        None => ContentRange::Unusable,
    }
}

/// The response to a fresh GET: a large download when it qualifies, else one stream.
fn fresh(
    url: &str,
    reply: Reply,
    config: &NetConfig,
    large: &Large<'_>,
) -> Result<Source, NetError> {
    let resp = &reply.resp;
    let length = resp.body().content_length();
    let validator = validator_of(resp).filter(|v| usable_validator(v));
    let qualifies = resp.status().as_u16() == 200
        && accepts_ranges(resp)
        && length.is_some_and(|n| n >= config.parallel_min_size.max(1))
        && length.is_some_and(|n| large.max_bytes.is_none_or(|max| n <= max));
    let (Some(length), Some(validator), true) = (length, validator, qualifies) else {
        return plain_source(url, reply, config);
    };
    let record = Record {
        length,
        chunk: chunk_for(length, config.connections.clamp(1, MAX_CONNECTIONS)),
        validator,
        url: large.key.to_owned(),
    };
    if record.chunks() as u64 > MAX_CHUNKS {
        return plain_source(url, reply, config);
    }
    room_for(large, url, record.file_len(), length)?;
    let file = match create_partial(large, &record) {
        Ok(file) => file,
        Err(e) => {
            config.reporting.emit(NetEvent::PartialNotKept {
                artifact: large.artifact.to_owned(),
                why: PartialNotKeptReason::CannotCreate(e.into()),
            });
            return plain_source(url, reply, config);
        }
    };
    let found = Found {
        file,
        done: vec![0; record.chunks()],
        record,
        unallocated: 0,
    };
    let first = First::new(whole_stream(reply.resp, reply.permit), Some(0), false);
    let via = Via::new(url, reply.answered, reply.agent);
    start(found, Some(first), via, config, large)
}

/// Creates the partial file of `record` (0600, exclusively), writes its header and allocates
/// its full size where the filesystem can (so a full disk shows now, not half way).
fn create_partial(large: &Large<'_>, record: &Record) -> io::Result<File> {
    let file = large.dir.create_new_rw(large.name, 0o600)?;
    let path = large.dir.path().join(large.name);
    let fail = |e: io::Error| {
        let _ = large.dir.remove_file_if_same(large.name, &file);
        io::Error::new(e.kind(), format!("`{}`: {e}", path.display()))
    };
    let len = record.file_len();
    // SAFETY: the descriptor is open; fallocate only changes the file's allocation.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len as libc::off_t) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL) => {
                file.set_len(len).map_err(fail)?
            }
            _ => return Err(fail(e)),
        }
    }
    file.write_all_at(&record.encode(), 0).map_err(fail)?;
    Ok(file)
}

/// Counts an open connection while it lives.
struct Conn<'a>(&'a AtomicUsize);

impl<'a> Conn<'a> {
    fn new(open: &'a AtomicUsize) -> Conn<'a> {
        open.fetch_add(1, Ordering::Relaxed);
        Conn(open)
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A response body being read, at byte `pos` of the file.
struct Stream {
    reader: Box<dyn Read + Send>,
    pos: u64,
    /// The whole file from byte 0 (a `200`), not one chunk's range.
    whole: bool,
}

fn whole_stream(resp: ureq::http::Response<ureq::Body>, permit: Permit) -> Stream {
    Stream {
        pos: 0,
        whole: true,
        reader: body_reader(resp, permit),
    }
}

fn ranged_stream(resp: ureq::http::Response<ureq::Body>, from: u64, permit: Permit) -> Stream {
    Stream {
        pos: from,
        whole: false,
        reader: body_reader(resp, permit),
    }
}

/// The body of `resp`, holding `permit` until it is dropped.
fn body_reader(resp: ureq::http::Response<ureq::Body>, permit: Permit) -> Box<dyn Read + Send> {
    let expected = resp.body().content_length();
    Box::new(CheckedLength::new(
        resp.into_body().into_reader(),
        expected,
        Some(permit),
    ))
}

/// Who answered the first request: the manifest's URL, the URL it ended at after redirects,
/// and the agent that asked it (every later request goes there, the same way).
struct Via<'a> {
    url: &'a str,
    answered: String,
    agent: ureq::Agent,
}

/// The first stream of a download: a response body, the chunk it starts in (`None`: the
/// whole file from byte 0), and whether it is the one stream.
struct First {
    stream: Stream,
    chunk: Option<usize>,
    single: bool,
}

impl<'a> Via<'a> {
    fn new(url: &'a str, answered: String, agent: ureq::Agent) -> Via<'a> {
        Via {
            url,
            answered,
            agent,
        }
    }
}

impl First {
    fn new(stream: Stream, chunk: Option<usize>, single: bool) -> First {
        First {
            stream,
            chunk,
            single,
        }
    }
}

/// Starts the workers of `found` (the first with `first`) and returns the source that reads
/// the file's complete prefix.
fn start(
    found: Found,
    first: Option<First>,
    via: Via<'_>,
    config: &NetConfig,
    large: &Large<'_>,
) -> Result<Source, NetError> {
    let Via {
        url,
        answered,
        agent,
    } = via;
    let single = first.as_ref().is_some_and(|f| f.single);
    let leading = first.as_ref().is_some_and(|f| f.stream.whole && !f.single);
    let first = first.map(|f| (f.stream, f.chunk));
    let Found {
        file, record, done, ..
    } = found;
    let dir = large.dir.try_clone().map_err(|e| NetError::Transport {
        url: url.to_owned(),
        reason: format!("cannot keep the download: {e}"),
        transient: false,
    })?;
    let n = record.chunks();
    let kept: u64 = done.iter().sum();
    let todo = (0..n).filter(|&k| done[k] < record.len(k)).count();
    let workers = match single {
        true => 1,
        false => config
            .connections
            .clamp(1, MAX_CONNECTIONS)
            .min(todo.max(1)),
    };
    let mut taken = vec![false; n];
    if let Some((_, Some(k))) = &first {
        taken[*k] = true;
    }
    let mut state = State {
        done,
        taken,
        failures: vec![0; n],
        first: 0,
        single,
        filler: single.then_some(0),
        leading,
        fatal: None,
        workers,
    };
    advance(&record, &mut state);
    // Never less than a chunk per connection, so that each has one to fetch.
    let lead = large
        .lead
        .map(|lead| lead.max(workers as u64 * record.chunk));
    let shared = Arc::new(Shared {
        file,
        dir,
        name: large.name.to_owned(),
        record,
        url: url.to_owned(),
        answered,
        agent,
        config: config.clone(),
        state: Mutex::new(state),
        cond: Condvar::new(),
        received: AtomicU64::new(kept),
        open: AtomicUsize::new(0),
        cancel: AtomicBool::new(false),
        resumed_at: kept,
        read: AtomicU64::new(0),
        lead,
        #[cfg(test)]
        hooks: Default::default(),
    });
    if kept > 0 && large.tell {
        config.reporting.emit(NetEvent::Resuming {
            artifact: large.artifact.to_owned(),
            at: kept,
            of: shared.record.length,
            kept_in: shared.dir.path().join(&shared.name),
        });
    }
    let mut first = first;
    for id in 0..workers {
        let s = shared.clone();
        let stream = if id == 0 { first.take() } else { None };
        let spawned = std::thread::Builder::new()
            .name(format!("clima-artifacts-conn-{id}"))
            .spawn(move || s.work(id, stream));
        if spawned.is_err() {
            shared.worker_exit(false);
        }
    }
    Ok(Source {
        reader: Box::new(PartialReader {
            shared: shared.clone(),
            pos: 0,
        }),
        length: Some(shared.record.length),
        resume: None,
        partial: Some(Kept(shared.clone())),
        watch: Some(Watch(shared)),
    })
}

/// The file's complete prefix, in order, as the download's body.
struct PartialReader {
    shared: Arc<Shared>,
    pos: u64,
}

impl Read for PartialReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let s = &self.shared;
        let length = s.record.length;
        if buf.is_empty() || self.pos >= length {
            return Ok(0);
        }
        let avail = {
            let mut st = s.state();
            loop {
                if let Some(f) = &st.fatal {
                    return Err(f.to_io());
                }
                let avail = match st.first < st.done.len() {
                    true => s.record.start(st.first) + st.done[st.first],
                    false => length,
                };
                if avail > self.pos {
                    break avail;
                }
                st = s
                    .cond
                    .wait_timeout(st, Duration::from_secs(1))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        };
        let n = (avail - self.pos).min(buf.len() as u64) as usize;
        let got = s
            .file
            .read_at(&mut buf[..n], s.record.data_at() + self.pos)?;
        if got == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "the partial download `{}` is shorter than its header says",
                    s.dir.path().join(&s.name).display()
                ),
            ));
        }
        self.pos += got as u64;
        if s.lead.is_some() {
            s.reader_at(self.pos);
        }
        Ok(got)
    }
}

impl Drop for PartialReader {
    /// The consumer gave up or finished: the connections stop.
    fn drop(&mut self) {
        self.shared.stop_connections();
    }
}

#[cfg(test)]
mod lead_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_refuse_what_they_did_not_write() {
        let r = Record {
            length: 5 << 20,
            chunk: MIN_CHUNK,
            validator: "\"abc-1\"".into(),
            url: "44573502db60dd3c".into(),
        };
        let bytes = r.encode();
        assert_eq!(bytes.len(), HEADER as usize);
        assert_eq!(Record::decode(&bytes), Some(r.clone()));
        assert_eq!(r.chunks(), 20);
        assert_eq!(r.data_at(), HEADER + 4096);
        let mut bad = bytes.clone();
        bad[0] = b'X';
        assert_eq!(Record::decode(&bad), None);
        let huge = Record {
            chunk: 1,
            ..r.clone()
        }
        .encode();
        assert_eq!(Record::decode(&huge), None, "chunks below the minimum");
        // 1 PiB: 2^32 counters (32 GiB) if it were believed.
        let pib = Record {
            length: 1 << 50,
            ..r.clone()
        }
        .encode();
        assert_eq!(Record::decode(&pib), None, "more chunks than the maximum");
        let odd = Record {
            chunk: MIN_CHUNK + 1,
            ..r.clone()
        }
        .encode();
        assert_eq!(Record::decode(&odd), None, "a chunk size never written");
        let ctl = Record {
            validator: "a\nb".into(),
            ..r
        }
        .encode();
        assert_eq!(Record::decode(&ctl), None);
    }

    #[test]
    fn chunks_are_a_few_per_connection_within_bounds() {
        assert_eq!(chunk_for(108_000_000, 8), 3_407_872);
        assert_eq!(chunk_for(1 << 20, 8), MIN_CHUNK);
        assert_eq!(chunk_for(41 << 30, 8), MAX_CHUNK);
    }
}
