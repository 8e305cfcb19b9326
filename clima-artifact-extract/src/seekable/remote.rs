//! Reading some files of a seekable tarball that is not here, by byte ranges: its index from
//! the footer, then only the members of the files asked for, each checked against the
//! authenticated index exactly as an install checks it.
//!
//! ```text
//! last bytes (one request) -> footer -> locator -> index bytes (in those last bytes, or one
//! more request) -> index document -> authenticate (index-sha256, bounds, structure, tree)
//! -> for the files asked for: their members' bytes (neighbours in one request, read in
//!    chunks of at most CHUNK) -> decompress to the exact length -> tar header, block digests,
//!    blob id -> the caller's writer
//! ```
//!
//! The ranges come from a [`RangeSource`] the caller gives (HTTP in the network crate, a local
//! file in tests), so this module stays without network code; nothing it is given is trusted
//! before [`authenticate`] accepted the index, and no content is handed on before its member
//! decompressed to exactly the length the index gives. A source that answers a range with
//! other bytes than the file's is caught by the member's checks (its header, its block digest
//! when the index's hash is known, its blob id), and the error names the entry.

use std::io::{self, Read, Write};

use super::format::{Flavour, Locator, stored_index};
use super::{Authenticated, Expected, IndexError, IndexLimits, authenticate, shown};

/// Most bytes asked of the source at once while reading members (their memory bound).
pub const CHUNK: u64 = 8 << 20;

/// Bytes between two wanted files' members below which they are fetched in one request (the
/// bytes between are read and dropped: fewer requests for files stored side by side).
pub const MAX_GAP: u64 = 64 << 10;

/// How many of the file's last bytes to ask for first: the footer and, for an index of up to
/// a few dozen files, the whole index with it (one request instead of two). Small, so that
/// what is read for nothing stays small against one file.
pub const FIRST_TAIL: u64 = 4 << 10;

/// Where byte ranges of a tarball come from.
pub trait RangeSource {
    /// What reading a range fails with.
    type Error;
    /// The file's size in bytes.
    fn len(&self) -> u64;
    /// Whether the file is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The `len` bytes from byte `start` (exactly that many, or an error).
    fn read(&mut self, start: u64, len: u64) -> Result<Vec<u8>, Self::Error>;
}

/// Why reading a remote seekable tarball failed: its source, or what it holds.
#[derive(Debug)]
pub enum RemoteError<E> {
    /// Reading a range failed.
    Source(E),
    /// The index or a member is not what it must be.
    Index(IndexError),
}

impl<E> From<IndexError> for RemoteError<E> {
    fn from(e: IndexError) -> RemoteError<E> {
        RemoteError::Index(e)
    }
}

/// The authenticated index of the tarball `src` whose last `tail.len()` bytes are `tail`
/// (`tail` may be shorter than the file, or the whole file): the locator from the footer,
/// the stored index from `tail` when it holds it, else read from `src`, then
/// [`authenticate`]d against `expected`. `Ok(None)` when the file has no footer of ours (a
/// classic tarball: it can only be read whole).
pub fn remote_index<S: RangeSource>(
    src: &mut S,
    tail: &[u8],
    expected: &Expected,
    limits: &IndexLimits,
) -> Result<Option<Authenticated>, RemoteError<S::Error>> {
    let file_len = src.len();
    let tail_len = tail.len() as u64;
    if tail_len > file_len {
        return Err(IndexError::Io(format!(
            "{tail_len} last bytes were given of a file of {file_len}"
        ))
        .into());
    }
    let footer = &tail[tail
        .len()
        .saturating_sub(Flavour::Gzip.footer_len() as usize)..];
    let Some(locator) = Locator::find(footer, file_len, limits)? else {
        return Ok(None);
    };
    // The index ends where the footer starts, inside `tail`: only what precedes `tail` is
    // asked for.
    let tail_start = file_len - tail_len;
    let index_end = (locator.index_offset + locator.index_length - tail_start) as usize;
    let stored = if locator.index_offset >= tail_start {
        let at = (locator.index_offset - tail_start) as usize;
        tail[at..index_end].to_vec()
    } else {
        let mut head = src
            .read(locator.index_offset, tail_start - locator.index_offset)
            .map_err(RemoteError::Source)?;
        head.extend_from_slice(&tail[..index_end]);
        head
    };
    let doc = stored_index(&locator, &stored)?;
    drop(stored);
    authenticate(&doc, &locator, expected, limits)
        .map(Some)
        .map_err(RemoteError::Index)
}

/// A run of the file fetched together: from the first member of its first entry to the end
/// of its last entry's members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// Offset in the file of the first byte.
    pub start: u64,
    /// Offset in the file one past the last byte.
    pub end: u64,
    /// The entries (indexes into the index's entries) whose members it holds, in file order.
    pub entries: Vec<usize>,
}

impl Authenticated {
    /// The entries `path` names: the file or symlink of that path, or every entry below the
    /// folder of that path (`a/b` names `a/b/c` and `a/b/d/e`, not `a/bc`). A trailing `/` is
    /// ignored; `""` names nothing (the whole artifact is installed whole).
    pub fn select(&self, path: &str) -> Vec<usize> {
        let path = path.trim_end_matches('/').as_bytes();
        if path.is_empty() {
            return Vec::new();
        }
        let entries = &self.index.entries;
        let first = entries.partition_point(|e| e.path.as_slice() < path);
        let mut out = Vec::new();
        for (i, e) in entries.iter().enumerate().skip(first) {
            if !e.path.starts_with(path) {
                break;
            }
            let rest = &e.path[path.len()..];
            if rest.is_empty() || rest[0] == b'/' {
                out.push(i);
            }
        }
        out
    }

    /// The spans of the file that hold `entries` (indexes, in any order, duplicates
    /// ignored): entries whose members are at most [`MAX_GAP`] bytes apart share a span.
    pub fn spans(&self, entries: &[usize]) -> Vec<Span> {
        let mut sorted: Vec<usize> = entries
            .iter()
            .copied()
            .filter(|i| *i < self.index.entries.len())
            .collect();
        sorted.sort_by_key(|i| self.index.entries[*i].offset);
        sorted.dedup();
        let mut spans: Vec<Span> = Vec::new();
        for i in sorted {
            let e = &self.index.entries[i];
            let end = e.offset + e.length;
            match spans.last_mut() {
                Some(s) if e.offset >= s.end && e.offset - s.end <= MAX_GAP => {
                    s.end = end;
                    s.entries.push(i);
                }
                _ => spans.push(Span {
                    start: e.offset,
                    end,
                    entries: vec![i],
                }),
            }
        }
        spans
    }
}

/// The bytes of one [`Span`], read from a [`RangeSource`] in requests of at most [`CHUNK`]
/// bytes as they are consumed; [`SpanReader::copy_entry`] checks each entry's members.
pub struct SpanReader<'a, S: RangeSource> {
    src: &'a mut S,
    /// Offset in the file of the next byte to ask for.
    next: u64,
    end: u64,
    buf: Vec<u8>,
    at: usize,
    /// Offset in the file of the next byte read out.
    pos: u64,
    /// The source's failure, kept for the caller (an `io::Error` carries it through the
    /// member checks).
    failure: Option<S::Error>,
}

impl<'a, S: RangeSource> SpanReader<'a, S> {
    /// A reader of `span` from `src`.
    pub fn new(src: &'a mut S, span: &Span) -> SpanReader<'a, S> {
        SpanReader {
            src,
            next: span.start,
            end: span.end,
            buf: Vec::new(),
            at: 0,
            pos: span.start,
            failure: None,
        }
    }

    /// Reads entry `i` of `auth` (which must lie in this span at or after what was read so
    /// far), checks its members against the index, and writes its content (a symlink's
    /// target, for a symlink) to `out`. Returns the content's length.
    pub fn copy_entry<W: Write>(
        &mut self,
        auth: &Authenticated,
        i: usize,
        out: &mut W,
    ) -> Result<u64, RemoteError<S::Error>> {
        let Some(e) = auth.index.entries.get(i) else {
            return Err(IndexError::Io(format!("entry {i} is not in the index")).into());
        };
        if e.offset < self.pos || e.offset.saturating_add(e.length) > self.end {
            return Err(IndexError::Io(format!(
                "entry `{}` at byte {} is not in the part of the file read ({}..{})",
                shown(&e.path),
                e.offset,
                self.pos,
                self.end
            ))
            .into());
        }
        let skip = e.offset - self.pos;
        let result = io::copy(&mut self.by_ref().take(skip), &mut io::sink())
            .map_err(|err| IndexError::Io(err.to_string()))
            .and_then(|_| auth.copy_entry(i, self, out));
        match (result, self.failure.take()) {
            (_, Some(failure)) => Err(RemoteError::Source(failure)),
            (Ok(n), None) => Ok(n),
            (Err(e), None) => Err(RemoteError::Index(e)),
        }
    }
}

impl<S: RangeSource> Read for SpanReader<'_, S> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.at == self.buf.len() {
            if self.next >= self.end {
                return Ok(0);
            }
            let len = (self.end - self.next).min(CHUNK);
            match self.src.read(self.next, len) {
                Ok(bytes) if bytes.len() as u64 == len => {
                    self.buf = bytes;
                    self.at = 0;
                    self.next += len;
                }
                Ok(bytes) => {
                    return Err(io::Error::other(format!(
                        "the source gave {} bytes for the {len} asked from byte {}",
                        bytes.len(),
                        self.next
                    )));
                }
                Err(e) => {
                    self.failure = Some(e);
                    return Err(io::Error::other("the source failed"));
                }
            }
        }
        let n = out.len().min(self.buf.len() - self.at);
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        self.pos += n as u64;
        Ok(n)
    }
}
