//! The seekable tarball of a download entry read by byte ranges, for the runtime's two users:
//! the fetch of some files (`partial`) and the whole install that reuses files fetched before
//! (`install::reuse`): opening a download (HTTP through the network crate's checked ranges, or
//! a local file), the order downloads are tried in, its authenticated index (remembered for
//! the rest of the process), its spans read over several connections and written through one
//! rule, and what a failure becomes. A layer below its users: it calls none of them.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use clima_artifact_depot::{PartialFiles, Pending};
use clima_artifact_extract::seekable::remote::{
    FIRST_TAIL, RangeSource, RemoteError, SpanReader, remote_index,
};
use clima_artifact_extract::seekable::{
    self, Authenticated, Expected, IndexEntry, IndexError, IndexLimits,
};
use clima_artifact_extract::tree_hash::EntryMode;
use clima_artifact_manifest::{ArtifactVariant, Download};
use clima_artifact_net::ranges::{RangeError, RemoteFile};
use clima_artifact_net::source::{self as download, Location};
use clima_artifact_net::trust::redact_url;
use clima_artifact_net::{NetConfig, NetError};

use crate::{Config, Error, SourceFailure};

/// A tarball read by ranges: over HTTP, or a local file (`file://`, a path).
pub(crate) enum Ranges {
    Http(Box<RemoteFile>),
    Local { file: File, len: u64, url: String },
}

impl RangeSource for Ranges {
    type Error = RangeError;

    fn len(&self) -> u64 {
        match self {
            Ranges::Http(r) => r.len(),
            Ranges::Local { len, .. } => *len,
        }
    }

    fn read(&mut self, start: u64, len: u64) -> Result<Vec<u8>, RangeError> {
        match self {
            Ranges::Http(r) => r.read(start, len),
            Ranges::Local { file, url, .. } => {
                let mut buf = vec![0; usize::try_from(len).unwrap_or(0)];
                file.read_exact_at(&mut buf, start).map_err(|e| {
                    RangeError::Net(NetError::Transport {
                        url: url.clone(),
                        reason: format!("cannot read bytes {start}..+{len}: {e}"),
                        transient: false,
                    })
                })?;
                Ok(buf)
            }
        }
    }
}

impl Ranges {
    pub(crate) fn received(&self) -> u64 {
        match self {
            Ranges::Http(r) => r.received(),
            Ranges::Local { .. } => 0,
        }
    }

    /// Another reader of the same tarball, for a connection of its own (the same URL after
    /// redirects, validator and size, every answer checked the same way).
    fn another(&self) -> std::io::Result<Ranges> {
        Ok(match self {
            Ranges::Http(r) => Ranges::Http(Box::new(r.another())),
            Ranges::Local { file, len, url } => Ranges::Local {
                file: file.try_clone()?,
                len: *len,
                url: url.clone(),
            },
        })
    }

    /// Counts what `other` (made by [`Ranges::another`]) received as this reader's.
    fn add_counts(&mut self, other: &Ranges) {
        if let (Ranges::Http(mine), Ranges::Http(theirs)) = (self, other) {
            mine.add_counts(theirs);
        }
    }
}

/// What [`for_each_span`] does with each entry of a span: checks it while it writes it.
pub(crate) type EachEntry<'a> =
    dyn Fn(usize, &mut SpanReader<'_, Ranges>) -> Result<(), Refusal> + Sync + 'a;

/// Reads the spans holding `todo` (entries of `auth`) over up to `connections` readers of
/// `src` at once, each span by one reader from its start to its end, and hands each entry of
/// a span to `each` with the span's reader (which checks the entry's members against the
/// index before a byte of it is handed on). The first failure stops the others (no reader
/// takes another span after it; a reader that panics too); the answer is the error of the
/// lowest span that failed ([`on_threads`]); what `each` wrote for other spans is the
/// caller's to make visible or not, so the order in which spans end does not matter. The
/// bytes the readers received are counted in `src`.
pub(crate) fn for_each_span(
    src: &mut Ranges,
    auth: &Authenticated,
    todo: &[usize],
    connections: usize,
    each: &EachEntry<'_>,
) -> Result<(), Refusal> {
    let spans = auth.spans(todo);
    let workers = connections.clamp(1, spans.len().max(1));
    if workers == 1 {
        for span in &spans {
            let mut reader = SpanReader::new(src, span);
            for i in &span.entries {
                each(*i, &mut reader)?;
            }
        }
        return Ok(());
    }
    let mut readers = Vec::with_capacity(workers);
    for _ in 0..workers {
        readers.push(src.another().map_err(|e| {
            Refusal::Fatal(Error::Internal {
                message: format!("cannot open the tarball again for another connection: {e}"),
            })
        })?);
    }
    let run = |reader: &mut Ranges, k: usize, stop: &AtomicBool| {
        let span = &spans[k];
        let mut span_reader = SpanReader::new(reader, span);
        span.entries.iter().try_for_each(|i| {
            match stop.load(Ordering::SeqCst) {
                // Another span failed: the fetch is over, its answer that error.
                true => Err(None),
                false => each(*i, &mut span_reader).map_err(Some),
            }
        })
    };
    let result = on_threads(&mut readers, spans.len(), &run);
    for reader in &readers {
        src.add_counts(reader);
    }
    result
}

/// What a span's work of [`on_threads`] does: `Ok`, or stopped by an error (`None`: it saw
/// that another span failed, and stopped without one of its own).
type SpanWork<'a, R> =
    dyn Fn(&mut R, usize, &AtomicBool) -> Result<(), Option<Refusal>> + Sync + 'a;

/// Runs `work` for spans `0..count` on one thread per reader of `readers`, each taking the
/// next span when done with one. The first failure stops the others (the flag `work` is
/// given is set: no thread takes another span). The answer is the error of the lowest span
/// that failed, whichever thread noticed first, so it is the same from run to run; a thread
/// that panics (a bug) stops the others too, and is an internal error.
fn on_threads<R: Send>(
    readers: &mut [R],
    count: usize,
    work: &SpanWork<'_, R>,
) -> Result<(), Refusal> {
    let next = AtomicUsize::new(0);
    let failures = SpanFailures::default();
    std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(readers.len());
        for reader in readers.iter_mut() {
            let (next, failures) = (&next, &failures);
            handles.push(scope.spawn(move || {
                let _guard = SpanPanicGuard(failures);
                while !failures.stop.load(Ordering::SeqCst) {
                    let k = next.fetch_add(1, Ordering::SeqCst);
                    if k >= count {
                        return;
                    }
                    if let Err(e) = work(reader, k, &failures.stop) {
                        failures.fail(k, e);
                        return;
                    }
                }
            }));
        }
        // Joined here, so a panic is not raised again by the scope: the guard recorded it.
        for handle in handles {
            let _ = handle.join();
        }
    });
    match failures
        .first
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
    {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// The failures of [`on_threads`]: whether to stop, and the error of the lowest span.
#[derive(Default)]
struct SpanFailures {
    stop: AtomicBool,
    first: Mutex<Option<(usize, Refusal)>>,
}

impl SpanFailures {
    /// Span `k` failed with `e` (`None`: it stopped because another did).
    fn fail(&self, k: usize, e: Option<Refusal>) {
        self.stop.store(true, Ordering::SeqCst);
        let Some(e) = e else { return };
        let mut first = self.first.lock().unwrap_or_else(|p| p.into_inner());
        if first.as_ref().is_none_or(|(at, _)| k < *at) {
            *first = Some((k, e));
        }
    }
}

/// Stops the other threads of [`on_threads`] when one unwinds, with an internal error.
struct SpanPanicGuard<'a>(&'a SpanFailures);

impl Drop for SpanPanicGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Counted as the first span's: a bug is reported whatever else failed.
            self.0.fail(
                0,
                Some(Refusal::Fatal(Error::Internal {
                    message: "a connection of the ranged fetch failed unexpectedly (a bug: \
                              please report it); no file was made visible"
                        .into(),
                })),
            );
        }
    }
}

/// Why only some files could not be fetched from one download.
pub(crate) enum Refusal {
    /// Not possible from this source: install the whole artifact instead.
    Whole(String),
    /// This source failed: try the next one.
    Failed(SourceFailure),
    /// Not a matter of the source (a path the artifact does not have, a depot that refuses):
    /// the call fails.
    Fatal(Error),
}

/// The downloads of `variant` usable now, those that say they are seekable first.
pub(crate) fn ordered<'a>(
    variant: &'a ArtifactVariant,
    config: &Config,
    folder: &Path,
) -> Vec<&'a Download> {
    let network = |url: &str| matches!(download::locate(url, folder), Location::Http(_));
    let mut usable: Vec<&Download> = variant
        .downloads
        .iter()
        .filter(|d| !config.offline || !network(&d.url))
        .collect();
    usable.sort_by_key(|d| d.index_sha256.is_none());
    usable
}

/// How a download is reached: the network settings (retries, timeouts) and, when the caller
/// has one, the HTTP client to share (its connections and TLS roots); `None` makes one from
/// the settings.
#[derive(Clone, Copy)]
pub(crate) struct Via<'a> {
    pub(crate) net: &'a NetConfig,
    pub(crate) agent: Option<&'a download::Agent>,
}

impl<'a> Via<'a> {
    /// The configuration's network settings, with a client of its own.
    pub(crate) fn config(config: &'a Config) -> Via<'a> {
        Via {
            net: &config.net,
            agent: None,
        }
    }
}

/// Opens `dl` for reading by ranges: its last bytes (the footer, and the index's end) and the
/// source.
pub(crate) fn open(
    dl: &Download,
    folder: &Path,
    config: &Config,
) -> Result<(Ranges, Vec<u8>), Refusal> {
    open_with_tail(dl, folder, Via::config(config), FIRST_TAIL)
}

/// [`open`] through `via`, asking for the last `tail` bytes (at least one; all of a shorter
/// file).
pub(crate) fn open_with_tail(
    dl: &Download,
    folder: &Path,
    via: Via<'_>,
    tail: u64,
) -> Result<(Ranges, Vec<u8>), Refusal> {
    let failed = |error: NetError| Refusal::Failed(SourceFailure::Net { error, attempts: 1 });
    match download::locate(&dl.url, folder) {
        Location::File(path) => {
            let file = File::open(&path).map_err(|e| {
                failed(NetError::LocalSource {
                    url: dl.url.clone(),
                    path: path.clone(),
                    cause: e.into(),
                })
            })?;
            let len = file.metadata().map(|m| m.len()).unwrap_or(0);
            let mut src = Ranges::Local {
                file,
                len,
                url: dl.url.clone(),
            };
            let n = len.min(tail.max(1));
            let tail = src.read(len - n, n).map_err(range_refusal)?;
            Ok((src, tail))
        }
        Location::Unsupported(reason) => Err(failed(NetError::UnsupportedUrl {
            url: dl.url.clone(),
            reason,
        })),
        Location::Http(_) => {
            let made;
            let agent = match via.agent {
                Some(agent) => agent,
                None => {
                    made = download::agent(via.net).map_err(failed)?;
                    &made
                }
            };
            let (file, tail) =
                RemoteFile::open(agent, &dl.url, via.net, tail).map_err(range_refusal)?;
            Ok((Ranges::Http(Box::new(file)), tail))
        }
    }
}

/// What a failure to read a range becomes: no ranges, the whole artifact; else a failure of
/// the source (its error names the URL).
fn range_refusal(e: RangeError) -> Refusal {
    match e {
        RangeError::NoRanges { .. } => Refusal::Whole(e.to_string()),
        RangeError::Net(error) => Refusal::Failed(SourceFailure::Net { error, attempts: 1 }),
    }
}

/// What a failure while reading the tarball of `url` becomes.
pub(crate) fn remote_refusal(url: &str, e: RemoteError<RangeError>) -> Refusal {
    match e {
        RemoteError::Source(e) => range_refusal(e),
        RemoteError::Index(e) => Refusal::Failed(SourceFailure::Archive {
            url: url.to_owned(),
            reason: format!("the seekable tarball, read by byte ranges: {e}"),
        }),
    }
}

/// The source of `dl` and its authenticated index: remembered from an earlier fetch of this
/// process ([`IndexKey`]: only the first request is made, for one byte), else read from the
/// tarball's last bytes (and one more request when the index did not fit in them).
pub(crate) fn authenticated_index(
    variant: &ArtifactVariant,
    dl: &Download,
    folder: &Path,
    config: &Config,
) -> Result<(Ranges, Arc<Authenticated>), Refusal> {
    let expected = Expected {
        tree_sha1: variant.git_tree_sha1,
        tree_sha256: variant.git_tree_sha256,
        index_sha256: dl.index_sha256,
    };
    authenticated_index_via(&expected, dl, (folder, config), Via::config(config))
}

/// [`authenticated_index`] against `expected`, the download reached through `via`.
pub(crate) fn authenticated_index_via(
    expected: &Expected,
    dl: &Download,
    (folder, config): (&Path, &Config),
    via: Via<'_>,
) -> Result<(Ranges, Arc<Authenticated>), Refusal> {
    let url = dl.url.as_str();
    let expected = *expected;
    let key = IndexKey::of(url, &expected, config);
    let remembered = key.as_ref().and_then(IndexKey::recall);
    // With the index remembered, the first request only learns the file's size and
    // validator (one byte); else its last bytes bring the footer and the index's end.
    let first_tail = match remembered {
        Some(_) => 1,
        None => FIRST_TAIL,
    };
    let (mut src, tail) = open_with_tail(dl, folder, via, first_tail)?;
    let auth = match remembered {
        Some(auth) => auth,
        None => {
            let limits = IndexLimits {
                max_entries: config.max_entries,
                ..IndexLimits::default()
            };
            let auth = remote_index(&mut src, &tail, &expected, &limits)
                .map_err(|e| remote_refusal(url, e))?
                .ok_or_else(|| {
                    Refusal::Whole(format!(
                        "`{}` is not a seekable tarball (it has no index)",
                        redact_url(url)
                    ))
                })?;
            let auth = Arc::new(auth);
            if let Some(key) = key {
                key.remember(&auth);
            }
            auth
        }
    };
    Ok((src, auth))
}

/// Most authenticated indexes a process remembers (the oldest forgotten first).
const REMEMBERED_INDEXES: usize = 4;

/// Most memory the remembered indexes take together (as [`held_bytes`] counts it): an index
/// of a million files takes some hundred MiB, and is not remembered at all.
const REMEMBERED_BYTES: u64 = 64 << 20;

/// What an authenticated index is remembered by, for the rest of the process: the URL it was
/// read from and everything it was authenticated against. Only indexes whose download entry
/// gives `index-sha256` are remembered: that hash covers every byte of the index (offsets and
/// block digests too), so the index is the same whatever the server sends later; a server that
/// then sends other bytes for a member is caught by the member's checks, as always.
#[derive(Clone, PartialEq, Eq)]
struct IndexKey {
    url: String,
    tree_sha1: clima_artifact_manifest::GitTreeSha1,
    tree_sha256: Option<clima_artifact_manifest::GitTreeSha256>,
    index_sha256: clima_artifact_manifest::Sha256,
    max_entries: u64,
}

type Remembered = std::sync::Mutex<Memory<IndexKey, Arc<Authenticated>>>;

impl IndexKey {
    fn of(url: &str, expected: &Expected, config: &Config) -> Option<IndexKey> {
        Some(IndexKey {
            url: url.to_owned(),
            tree_sha1: expected.tree_sha1,
            tree_sha256: expected.tree_sha256,
            index_sha256: expected.index_sha256?,
            max_entries: config.max_entries,
        })
    }

    fn remembered() -> std::sync::MutexGuard<'static, Memory<IndexKey, Arc<Authenticated>>> {
        static REMEMBERED: Remembered =
            std::sync::Mutex::new(Memory::new(REMEMBERED_INDEXES, REMEMBERED_BYTES));
        REMEMBERED.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The index authenticated earlier in this process under this key, if any.
    fn recall(&self) -> Option<Arc<Authenticated>> {
        Self::remembered().recall(self)
    }

    /// Remembers `auth` under this key (see [`Memory::remember`]).
    fn remember(self, auth: &Arc<Authenticated>) {
        let bytes = held_bytes(auth);
        Self::remembered().remember(self, auth.clone(), bytes);
    }
}

/// About the memory `auth` takes: its entries, their paths and their blocks.
fn held_bytes(auth: &Authenticated) -> u64 {
    let entries = &auth.index().entries;
    let each = entries
        .iter()
        .map(|e| e.path.capacity() + e.blocks.capacity() * std::mem::size_of::<seekable::Block>());
    let outer = entries.capacity() * std::mem::size_of::<IndexEntry>();
    (outer as u64).saturating_add(each.map(|n| n as u64).sum())
}

/// Values kept by key, oldest first, bounded in count and in bytes.
struct Memory<K, V> {
    items: Vec<(K, V, u64)>,
    most: usize,
    budget: u64,
}

impl<K: PartialEq, V: Clone> Memory<K, V> {
    const fn new(most: usize, budget: u64) -> Memory<K, V> {
        Memory {
            items: Vec::new(),
            most,
            budget,
        }
    }

    fn recall(&self, key: &K) -> Option<V> {
        self.items
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, v, _)| v.clone())
    }

    /// Remembers `value` (taking `bytes`) under `key`, forgetting the oldest until at most
    /// `most` values of at most `budget` bytes together are kept; a value larger than
    /// `budget` alone is not remembered (and whatever `key` held is forgotten).
    fn remember(&mut self, key: K, value: V, bytes: u64) {
        self.items.retain(|(k, _, _)| *k != key);
        if bytes > self.budget || self.most == 0 {
            return;
        }
        let total = |items: &[(K, V, u64)]| items.iter().map(|(_, _, b)| *b).sum::<u64>();
        while self.items.len() >= self.most || total(&self.items) + bytes > self.budget {
            self.items.remove(0);
        }
        self.items.push((key, value, bytes));
    }
}

/// Fetches `todo` (entries of `auth`) from `src` into `files`, neighbours together, over up
/// to `connections` connections at once. Each file is checked as it is written under its
/// temp name; they are renamed to their names, one by one, only once every one was, so a
/// failure while fetching (a range that lies, on any connection) leaves none of them,
/// whatever the order the connections ended in.
pub(crate) fn fetch_entries(
    auth: &Authenticated,
    src: &mut Ranges,
    files: &PartialFiles<'_>,
    (url, connections): (&str, usize),
    todo: &[usize],
) -> Result<(), Refusal> {
    let pending = std::sync::Mutex::new(Vec::new());
    for_each_span(src, auth, todo, connections, &|i, reader| {
        let staged = fetch_entry(files, auth, i, reader, url)?;
        pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(staged);
        Ok(())
    })?;
    for staged in pending.into_inner().unwrap_or_else(|p| p.into_inner()) {
        staged
            .publish()
            .map_err(|e| Destination::failure(files, url, e.into()))?;
    }
    Ok(())
}

/// Where a verified entry of an authenticated index is written: the partial folder of an
/// artifact (files fetched one by one, each made visible by the caller) or an install's temp
/// dir (the reuse install, committed whole). Both ranged installs write every entry, fetched
/// ([`fetch_entry`]) or copied from a file the depots hold
/// ([`Held::copy_into`](crate::held::Held::copy_into)), through this one rule: a file is
/// created fresh, filled by a writer that checks it, made read-only
/// (`EntryMode::installed_permissions`) only when the check passed, else removed.
pub(crate) trait Destination: Sync {
    /// What a written entry leaves to do (a partial folder's file to make visible).
    type Done<'d>
    where
        Self: 'd;
    /// Where entry `e` goes (for messages).
    fn path_of(&self, e: &IndexEntry) -> PathBuf;
    /// What a failure of this destination makes of a fetch from `url`.
    fn failure(&self, url: &str, error: Error) -> Refusal;
    /// Why entry `e` cannot be written here at all, if it cannot.
    fn refuses(&self, e: &IndexEntry, url: &str) -> Option<Refusal>;
    /// Makes entry `e` a symlink to `target` (read from its checked members).
    fn symlink<'d>(&'d self, e: &IndexEntry, target: &[u8]) -> Result<Self::Done<'d>, Error>;
    /// Creates entry `e`'s file and fills it with `write`, which flushes what it wrote and
    /// says whether it is `e`'s content: then the file is made read-only and its `Done`
    /// returned, else it is removed (`None`). The outer error is the destination's, the inner
    /// one `write`'s.
    fn file<'d, E>(
        &'d self,
        e: &IndexEntry,
        write: &mut dyn FnMut(&mut dyn Write) -> Result<bool, E>,
    ) -> Result<Result<Option<Self::Done<'d>>, E>, Error>;
}

/// Entry `i` of `auth`, read from `reader` (which checks its members against the index before
/// a byte of it is handed on), written into `dest`.
pub(crate) fn fetch_entry<'d, D: Destination>(
    dest: &'d D,
    auth: &Authenticated,
    i: usize,
    reader: &mut SpanReader<'_, Ranges>,
    url: &str,
) -> Result<D::Done<'d>, Refusal> {
    let e = &auth.index().entries[i];
    if let Some(refusal) = dest.refuses(e, url) {
        return Err(refusal);
    }
    if e.mode == EntryMode::Symlink {
        let mut target = Vec::new();
        reader
            .copy_entry(auth, i, &mut target)
            .map_err(|err| remote_refusal(url, err))?;
        return dest
            .symlink(e, &target)
            .map_err(|err| dest.failure(url, err));
    }
    let written = dest
        .file(e, &mut |mut out| {
            reader.copy_entry(auth, i, &mut out)?;
            out.flush().map_err(|err| {
                RemoteError::<RangeError>::Index(IndexError::Io(format!(
                    "cannot write `{}`: {err}",
                    dest.path_of(e).display()
                )))
            })?;
            Ok(true)
        })
        .map_err(|err| dest.failure(url, err))?;
    match written {
        Ok(Some(done)) => Ok(done),
        Ok(None) => Err(dest.failure(
            url,
            Error::Internal {
                message: format!(
                    "`{}` was refused although its members were checked",
                    dest.path_of(e).display()
                ),
            },
        )),
        Err(err) => Err(remote_refusal(url, err)),
    }
}

impl Destination for PartialFiles<'_> {
    type Done<'d>
        = Pending<'d>
    where
        Self: 'd;

    fn path_of(&self, e: &IndexEntry) -> PathBuf {
        self.path().join(OsStr::from_bytes(&e.path))
    }

    fn failure(&self, url: &str, error: Error) -> Refusal {
        Refusal::Failed(SourceFailure::Install {
            url: url.to_owned(),
            error: Box::new(error),
        })
    }

    fn refuses(&self, e: &IndexEntry, url: &str) -> Option<Refusal> {
        std::str::from_utf8(&e.path).is_err().then(|| {
            Refusal::Failed(SourceFailure::Archive {
                url: url.to_owned(),
                reason: format!(
                    "entry `{}`: a path that is not UTF-8 cannot be fetched alone; install the \
                     whole artifact",
                    String::from_utf8_lossy(&e.path).escape_debug()
                ),
            })
        })
    }

    fn symlink<'d>(&'d self, e: &IndexEntry, target: &[u8]) -> Result<Pending<'d>, Error> {
        Ok(self.stage_symlink(utf8_path(e)?, target)?)
    }

    fn file<'d, E>(
        &'d self,
        e: &IndexEntry,
        write: &mut dyn FnMut(&mut dyn Write) -> Result<bool, E>,
    ) -> Result<Result<Option<Pending<'d>>, E>, Error> {
        let staged = self.stage(utf8_path(e)?, e.mode.installed_permissions(), |file| {
            write(&mut BufWriter::with_capacity(1 << 20, file))
        })?;
        // Not the content: the staged file is dropped, which removes it.
        Ok(staged.map(|(same, pending)| same.then_some(pending)))
    }
}

/// Entry `e`'s path as a partial folder names files (UTF-8, which
/// [`Destination::refuses`] checked for a fetch).
fn utf8_path(e: &IndexEntry) -> Result<&str, Error> {
    std::str::from_utf8(&e.path).map_err(|_| Error::Internal {
        message: format!(
            "entry `{}` has a path that is not UTF-8",
            String::from_utf8_lossy(&e.path).escape_debug()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn refusal(k: usize) -> Refusal {
        Refusal::Whole(format!("span {k}"))
    }

    /// Whether `r` is the refusal of span `k`.
    fn is_span(r: &Result<(), Refusal>, k: usize) -> bool {
        matches!(r, Err(Refusal::Whole(m)) if *m == format!("span {k}"))
    }

    #[test]
    fn the_error_of_the_lowest_failed_span_is_the_answer_whichever_failed_first() {
        for _ in 0..20 {
            let mut readers = [(), ()];
            // Span 0 fails only after span 1 did (the other thread's): span 1's error came
            // first, span 0's is the answer.
            let work = |_: &mut (), k: usize, stop: &AtomicBool| {
                if k == 1 {
                    return Err(Some(refusal(1)));
                }
                let start = Instant::now();
                while !stop.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(10) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(Some(refusal(0)))
            };
            let got = on_threads(&mut readers, 2, &work);
            assert!(is_span(&got, 0), "not span 0's error");
        }
    }

    #[test]
    fn a_panicking_span_stops_the_other_connections_and_is_an_internal_error() {
        let mut readers = [(), ()];
        let ran = AtomicUsize::new(0);
        let work = |_: &mut (), k: usize, _: &AtomicBool| {
            ran.fetch_add(1, Ordering::SeqCst);
            if k == 0 {
                panic!("a bug in span 0");
            }
            std::thread::sleep(Duration::from_millis(2));
            Ok(())
        };
        let got = on_threads(&mut readers, 1000, &work);
        assert!(
            matches!(&got, Err(Refusal::Fatal(Error::Internal { message })) if message.contains("a bug")),
            "not an internal error"
        );
        let ran = ran.load(Ordering::SeqCst);
        assert!(ran < 100, "{ran} spans ran after the panic");
    }

    #[test]
    fn remembered_values_are_bounded_in_count_and_bytes() {
        let mut m = Memory::new(3, 100);
        m.remember("a", 1, 40);
        m.remember("b", 2, 40);
        assert_eq!((m.recall(&"a"), m.recall(&"b")), (Some(1), Some(2)));
        // 40 + 40 + 30 > 100: the oldest is forgotten.
        m.remember("c", 3, 30);
        assert_eq!((m.recall(&"a"), m.recall(&"b")), (None, Some(2)));
        assert_eq!(m.recall(&"c"), Some(3));
        // Larger than the whole budget: not remembered, and nothing else is forgotten.
        m.remember("huge", 4, 101);
        assert_eq!(m.recall(&"huge"), None);
        assert_eq!((m.recall(&"b"), m.recall(&"c")), (Some(2), Some(3)));
        // The count bound.
        m.remember("d", 5, 1);
        m.remember("e", 6, 1);
        assert_eq!((m.recall(&"b"), m.recall(&"c")), (None, Some(3)));
        assert_eq!((m.recall(&"d"), m.recall(&"e")), (Some(5), Some(6)));
        // Remembered again under the same key: replaced, not kept twice.
        m.remember("e", 7, 1);
        assert_eq!(m.recall(&"e"), Some(7));
        assert_eq!(m.items.len(), 3);
    }

    #[test]
    fn spans_that_all_succeed_run_once_each() {
        let mut readers = [(), (), ()];
        let seen = Mutex::new(Vec::new());
        let work = |_: &mut (), k: usize, _: &AtomicBool| {
            seen.lock().unwrap().push(k);
            Ok(())
        };
        assert!(on_threads(&mut readers, 50, &work).is_ok());
        let mut seen = seen.into_inner().unwrap();
        seen.sort_unstable();
        assert_eq!(seen, (0..50).collect::<Vec<_>>());
    }
}
