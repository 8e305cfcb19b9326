//! A seekable tarball unpacked on every core: [`extract_parallel`].
//!
//! ```text
//!  calling thread: limits, folders (serially, fresh), multi-block files created
//!  N workers:      take the next member (in file order, once the budget has room for it)
//!                  -> pread its compressed bytes (or, from a tarball still arriving,
//!                     read them from the stream in the member's turn)
//!                  -> decompress (exactly the index's length)
//!                  -> header / padding / block SHA-256 checked against the index
//!                  -> write (a one-member file: create + write; a block: pwrite at its offset)
//!                  -> blob id (one-member file) or hand the block to its file's in-order hasher
//!  calling thread: every blob id against the index, tree of the written blob ids
//! ```
//!
//! The budget bounds the bytes in flight (compressed and decompressed buffers of the members
//! taken and not yet hashed). Members are taken in file order and charged to the budget when
//! taken, so the block a file's hasher waits for was always charged before any later one: a
//! worker never waits for room that only a later member could free. A failing member (or a
//! worker that panics) sets the shared failure, which wakes every waiter; the workers stop
//! taking members, and of the failures the one of the earliest member is returned (the blob
//! id of a file of several blocks counts as its last member's): every member before a failing
//! one was taken before it and is finished, so the error is the same on any number of workers.
//!
//! From a stream ([`extract_parallel_stream`]), the unit taken k-th reads its bytes once the
//! k-1 before it have read theirs (a turn, separate from the queue's lock, so that a worker
//! waiting for bytes still to arrive never holds back the others' budget or failures); every
//! unit taken reads its bytes, or the unpacking has stopped, so no turn is ever waited for in
//! vain. The stream is read no further than the budget allows: a slow disk holds the download
//! back instead of buffering it.
//!
//! Folders are reached through a bounded cache of handles (as in the one-pass extraction), and
//! a file of several blocks is open only while its blocks are being written (created by the
//! first of them to arrive, closed when the last one is in), so the descriptors held do not
//! grow with the number of folders or files.
//!
//! A file of several blocks is written block by block by any worker, but its blob SHA-1 (and
//! SHA-256) is one hash over the content in order: whichever worker finds the next block
//! ready hashes it, and the blocks after it that are already there, while the others go on.
//! So a single large file is hashed at one core's speed (each block's own SHA-256 is checked
//! on the worker that decompressed it).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::{File, Permissions};
use std::io::{self, BufRead};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use clima_artifact_fs::Dir;
use sha2::Digest;

use super::format::{Index, IndexEntry, MemberSpan, decode_member_reusing};
use super::{Authenticated, IndexError, shown};
use crate::dirs::Dirs;
use crate::tree_hash::{BlobHasher, EntryMode, Formats, ObjectId, TreeBuilder};
use crate::unpack::{Room, entry_cost};
use crate::{ExtractError, ExtractLimits, Extracted};

/// Bytes of buffers in flight by default (compressed and decompressed members, taken and not
/// yet hashed): 48 MiB.
pub const DEFAULT_BUDGET: u64 = 48 << 20;

/// Most worker threads of [`extract_parallel`] (more are not started).
pub const MAX_THREADS: usize = 256;

/// How [`extract_parallel`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parallelism {
    /// Worker threads (at least 1; no more are started than there are members, nor than
    /// [`MAX_THREADS`]).
    pub threads: usize,
    /// Bytes of buffers in flight ([`DEFAULT_BUDGET`] by default). A member larger than the
    /// whole budget is still taken, alone.
    pub budget: u64,
}

impl Parallelism {
    /// `threads` workers (the available cores when `None`; from 1 to [`MAX_THREADS`]), the
    /// default budget.
    pub fn with_threads(threads: Option<usize>) -> Parallelism {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Parallelism {
            threads: threads.unwrap_or(cores).clamp(1, MAX_THREADS),
            budget: DEFAULT_BUDGET,
        }
    }
}

/// One member to decompress: entry `entry`'s member `block` (0 for a one-member entry).
struct Unit {
    entry: usize,
    block: usize,
    span: MemberSpan,
    last: bool,
    /// The index of its entry's last unit (where a wrong blob id of the entry is counted).
    last_unit: usize,
}

/// What a member holds of the budget: its compressed and its decompressed bytes.
fn cost(span: &MemberSpan) -> u64 {
    span.length.saturating_add(span.plain_len)
}

/// The file of several blocks, open while its blocks are written, and its in-order hash.
struct Blocks {
    open: Mutex<Open>,
    path: PathBuf,
    seq: Mutex<Sequence>,
}

/// A file of several blocks while it is written.
#[derive(Default)]
struct Open {
    /// Created by the first block to arrive, dropped when the last one is written.
    file: Option<Arc<File>>,
    /// Blocks written.
    written: usize,
}

/// Blocks of one file that arrived before the one its hasher needs next.
struct Sequence {
    next: usize,
    /// Each with its decompressed member, the content's range in it, and its budget.
    held: BTreeMap<usize, (Vec<u8>, std::ops::Range<usize>, u64)>,
    /// `None` while a worker is hashing (it puts it back), and once the last block is in.
    hasher: Option<BlobHasher>,
    done: Option<ObjectId>,
}

/// The budget, the queue of units and the first failure, shared by the workers.
struct Shared {
    state: Mutex<Queue>,
    wake: Condvar,
    budget: u64,
    /// Whose turn it is to read its member from a stream (unused for a file).
    turn: Mutex<Turn>,
    turn_wake: Condvar,
}

/// The unit whose compressed bytes come next in a stream, and whether the unpacking stopped
/// (a failure: the units waiting for their turn give up).
#[derive(Default)]
struct Turn {
    next: usize,
    stopped: bool,
}

/// The units in file order, walked as they are taken (none is described ahead of time).
struct Queue {
    /// The index of the next unit, and its entry and member in the entry.
    next: usize,
    entry: usize,
    block: usize,
    in_flight: u64,
    /// The failure of the earliest unit (its index) that failed.
    failed: Option<(usize, ExtractError)>,
}

/// Budget taken by one unit, given back when dropped (also when a worker unwinds).
struct Charge<'a> {
    shared: &'a Shared,
    bytes: u64,
}

impl Drop for Charge<'_> {
    fn drop(&mut self) {
        self.shared.release(self.bytes);
    }
}

impl Charge<'_> {
    /// The bytes charged, now to be given back by whoever drops the buffers they stand for
    /// ([`Shared::release`]); a failure wakes the waiters should that never happen.
    fn keep(self) -> u64 {
        let bytes = self.bytes;
        std::mem::forget(self);
        bytes
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next unit of `index` (its index) and its charge, waiting for room in the budget;
    /// `None` when all are taken or an install failed.
    fn take(&self, index: &Index) -> Option<(usize, Unit, Charge<'_>)> {
        let mut q = self.lock();
        loop {
            if q.failed.is_some() {
                return None;
            }
            let e = index.entries.get(q.entry)?;
            let span = e.member(index.block_size, q.block)?;
            let cost = cost(&span);
            if q.in_flight == 0 || q.in_flight.saturating_add(cost) <= self.budget {
                let n = e.blocks.len().max(1);
                let unit = Unit {
                    entry: q.entry,
                    block: q.block,
                    span,
                    last: q.block + 1 == n,
                    last_unit: q.next - q.block + n - 1,
                };
                let at = q.next;
                q.in_flight += cost;
                q.next += 1;
                q.block += 1;
                if q.block == n {
                    (q.entry, q.block) = (q.entry + 1, 0);
                }
                let charge = Charge {
                    shared: self,
                    bytes: cost,
                };
                return Some((at, unit, charge));
            }
            q = self.wake.wait(q).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Gives `bytes` of the budget back.
    fn release(&self, bytes: u64) {
        let mut q = self.lock();
        q.in_flight = q.in_flight.saturating_sub(bytes);
        drop(q);
        self.wake.notify_all();
    }

    /// Records `e`, the failure of unit `at` (the earliest unit's failure wins), and wakes
    /// every waiter.
    fn fail(&self, at: usize, e: ExtractError) {
        let mut q = self.lock();
        if q.failed.as_ref().is_none_or(|(first, _)| at < *first) {
            q.failed = Some((at, e));
        }
        drop(q);
        self.wake.notify_all();
        self.turn_lock().stopped = true;
        self.turn_wake.notify_all();
    }

    fn turn_lock(&self) -> MutexGuard<'_, Turn> {
        self.turn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until unit `at` may read its bytes from the stream (every unit before it read
    /// theirs); `false` when the unpacking stopped first.
    fn my_turn(&self, at: usize) -> bool {
        let mut turn = self.turn_lock();
        while turn.next != at && !turn.stopped {
            turn = self
                .turn_wake
                .wait(turn)
                .unwrap_or_else(PoisonError::into_inner);
        }
        !turn.stopped
    }

    /// Passes the turn to the next unit after unit `at` read its bytes (`ok`), or stops
    /// every waiter (the stream failed).
    fn pass_turn(&self, at: usize, ok: bool) {
        let mut turn = self.turn_lock();
        if ok {
            turn.next = at + 1;
        } else {
            turn.stopped = true;
        }
        drop(turn);
        self.turn_wake.notify_all();
    }
}

/// Sets the failure when a worker unwinds, so that nobody waits for it.
struct PanicGuard<'a>(&'a Shared);

impl Drop for PanicGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Counted as the first unit's: a bug is reported whatever else failed.
            self.0.fail(
                0,
                ExtractError::Corrupt(
                    "a worker of the parallel unpacking failed unexpectedly (a bug: please report \
                 it); nothing was installed"
                        .into(),
                ),
            );
        }
    }
}

/// Where the workers take the members' compressed bytes from.
enum Input<'a> {
    /// A file (the tarball kept whole), read at each member's offset: `tarball`, at `path`
    /// (named when it cannot be read), the tarball's byte 0 at `base` in it.
    File {
        tarball: &'a File,
        path: &'a Path,
        base: u64,
    },
    /// The tarball as it arrives, from its byte 0: each unit reads its member in turn.
    Stream(Mutex<StreamAt<'a>>),
}

/// A stream of the tarball and the offset in the file of its next byte.
struct StreamAt<'a> {
    reader: &'a mut (dyn BufRead + Send),
    pos: u64,
}

/// Everything the workers read.
struct Job<'a> {
    auth: &'a Authenticated,
    input: Input<'a>,
    dest: &'a Dir,
    /// Handles on the folders created, a bounded number of them kept open.
    dirs: Mutex<Dirs>,
    /// For an entry of several blocks, its file while written and its hasher.
    blocks: HashMap<usize, Blocks>,
    /// Blob ids of one-member entries, as written.
    ids: Mutex<Vec<Option<ObjectId>>>,
    formats: Formats,
    /// What a test asks of the workers (always `None` outside tests).
    hook: Option<Hook>,
    /// Buffers of decompressed members given back, for the next members: allocating and
    /// freeing megabytes per member maps and unmaps memory, and every unmap interrupts the
    /// other workers' cores (a TLB shootdown), which a loaded machine pays dearly.
    spare: Mutex<Vec<Vec<u8>>>,
}

/// Most buffers kept in [`Job::spare`].
const SPARE: usize = 64;

/// Unpacks the seekable tarball `tarball`, the file at `tarball_path` (its index `auth`,
/// authenticated against the manifest) into `dest` (an empty folder) on `how.threads` workers,
/// checking every member against the index as it is written, and returns the git tree hashes
/// of the blob ids written (SHA-256 too when `limits.tree_hash_sha256`), for the caller to
/// compare with the manifest's.
///
/// The rules of the one-pass extraction hold: files are created new (never through anything
/// already there), read-only, `0o444` or `0o555`; folders `0o755`; symlink targets stay inside
/// the artifact; `limits.max_unpacked_bytes`, `limits.max_entries` (folders included) and the
/// free-space reserves (bytes and inodes, each entry and folder charged as in the one-pass
/// extraction) are checked against the index before anything is written. A member that does
/// not hold what the index says is [`ExtractError::Corrupt`] naming the entry (of several,
/// the earliest in the file); a write, or a read of `tarball`, that fails is
/// [`ExtractError::Io`]. What was written is left for the caller to remove, as with a failed
/// extraction.
pub fn extract_parallel(
    auth: &Authenticated,
    (tarball, tarball_path): (&File, &Path),
    dest: &Dir,
    limits: &ExtractLimits,
    how: &Parallelism,
) -> Result<Extracted, ExtractError> {
    extract_with(auth, (tarball, tarball_path), dest, limits, how, None)
}

/// [`extract_parallel`] of a tarball that starts `base` bytes into `tarball` (a download kept
/// whole in a partial file, behind that file's header): the index's offsets count from there.
pub fn extract_parallel_at(
    auth: &Authenticated,
    (tarball, tarball_path, base): (&File, &Path, u64),
    dest: &Dir,
    limits: &ExtractLimits,
    how: &Parallelism,
) -> Result<Extracted, ExtractError> {
    extract_at(auth, (tarball, tarball_path, base), dest, limits, how, None)
}

/// [`extract_parallel`] of a tarball that is still arriving: `stream` gives its bytes from
/// byte 0 (a download as it is received, hashed by its reader), and the workers take the
/// members from it in file order as the budget lets them, so that members are decompressed,
/// checked and written while the rest of the file arrives. Nothing is read ahead of the
/// budget: a slow consumer holds the stream back. Returns with `stream` at the end of the
/// entries' members (the index's `data_size`): the end-of-archive member, the index and the
/// footer are left for the caller, who reads the stream to its end for its whole-file hash.
///
/// The checks are [`extract_parallel`]'s. A stream that fails or ends early is
/// [`ExtractError::Corrupt`] naming the entry whose member it cut (the caller, which knows
/// why its stream stopped, reports that first).
pub fn extract_parallel_stream(
    auth: &Authenticated,
    stream: &mut (dyn BufRead + Send),
    dest: &Dir,
    limits: &ExtractLimits,
    how: &Parallelism,
) -> Result<Extracted, ExtractError> {
    extract_stream_with(auth, stream, dest, (limits, how), None)
}

/// [`extract_parallel_stream`]; `hook`: what a test asks of the workers (always `None`
/// outside tests).
pub(super) fn extract_stream_with(
    auth: &Authenticated,
    stream: &mut (dyn BufRead + Send),
    dest: &Dir,
    (limits, how): (&ExtractLimits, &Parallelism),
    hook: Option<Hook>,
) -> Result<Extracted, ExtractError> {
    let input = Input::Stream(Mutex::new(StreamAt {
        reader: stream,
        pos: 0,
    }));
    extract_from(auth, input, dest, (limits, how), hook)
}

/// What a test asks of the workers of [`extract_with`].
#[derive(Debug, Clone, Copy)]
pub(super) enum Hook {
    /// The worker of this entry panics (tests of the failure path).
    #[cfg_attr(not(test), allow(dead_code))]
    Panic(usize),
    /// The worker of this entry's members waits a while before it decompresses them (tests
    /// of which failure is reported).
    #[cfg_attr(not(test), allow(dead_code))]
    Slow(usize),
}

/// [`extract_parallel`]; `hook`: what a test asks of the workers (always `None` outside
/// tests).
pub(super) fn extract_with(
    auth: &Authenticated,
    (tarball, tarball_path): (&File, &Path),
    dest: &Dir,
    limits: &ExtractLimits,
    how: &Parallelism,
    hook: Option<Hook>,
) -> Result<Extracted, ExtractError> {
    extract_at(auth, (tarball, tarball_path, 0), dest, limits, how, hook)
}

/// [`extract_with`] of a tarball `base` bytes into `tarball`.
fn extract_at(
    auth: &Authenticated,
    (tarball, path, base): (&File, &Path, u64),
    dest: &Dir,
    limits: &ExtractLimits,
    how: &Parallelism,
    hook: Option<Hook>,
) -> Result<Extracted, ExtractError> {
    let input = Input::File {
        tarball,
        path,
        base,
    };
    extract_from(auth, input, dest, (limits, how), hook)
}

/// [`extract_with`] of the members of `input`.
fn extract_from<'a>(
    auth: &'a Authenticated,
    input: Input<'a>,
    dest: &'a Dir,
    (limits, how): (&ExtractLimits, &Parallelism),
    hook: Option<Hook>,
) -> Result<Extracted, ExtractError> {
    let index = auth.index();
    if index.tar_size > limits.max_unpacked_bytes {
        return Err(ExtractError::TooLarge {
            limit: limits.max_unpacked_bytes,
        });
    }
    let content: u64 = index.entries.iter().map(|e| e.size).sum();
    let folders = folders_of(&index.entries);
    let count = (index.entries.len() + folders.len()) as u64;
    if count > limits.max_entries {
        return Err(ExtractError::TooManyEntries {
            limit: limits.max_entries,
        });
    }
    check_room(dest, &index.entries, folders.len() as u64, limits)?;
    let formats = Formats::with_sha256(limits.tree_hash_sha256);
    let root = dest.try_clone().map_err(|e| io_error(dest, b"", e))?;
    let mut job = Job {
        auth,
        input,
        dest,
        dirs: Mutex::new(Dirs::new(root)),
        blocks: HashMap::new(),
        ids: Mutex::new(vec![None; index.entries.len()]),
        formats,
        hook,
        spare: Mutex::new(Vec::new()),
    };
    job.prepare(&folders)?;
    let units: usize = index.entries.iter().map(|e| e.blocks.len().max(1)).sum();
    let shared = Shared {
        state: Mutex::new(Queue {
            next: 0,
            entry: 0,
            block: 0,
            in_flight: 0,
            failed: None,
        }),
        wake: Condvar::new(),
        budget: how.budget.max(1),
        turn: Mutex::new(Turn::default()),
        turn_wake: Condvar::new(),
    };
    let threads = how.threads.min(MAX_THREADS).clamp(1, units.max(1));
    run_workers(&job, &shared, threads);
    if let Some((_, e)) = shared.lock().failed.take() {
        return Err(e);
    }
    job.finish(content)
}

/// Fails when `dest`'s filesystem cannot take `entries` and `folders` folders above its
/// reserves of bytes and inodes, each charged as the one-pass extraction charges it.
fn check_room(
    dest: &Dir,
    entries: &[IndexEntry],
    folders: u64,
    limits: &ExtractLimits,
) -> Result<(), ExtractError> {
    let (Some(reserve), Ok(space)) = (limits.min_free_bytes, dest.space()) else {
        return Ok(());
    };
    let cost = entries
        .iter()
        .map(|e| entry_cost(e.mode != EntryMode::Symlink, e.size))
        .fold(
            entry_cost(false, 0).saturating_mul(folders),
            u64::saturating_add,
        );
    let room = Room {
        free: space.available,
        inodes: space.inodes,
        reserve,
    };
    room.check(dest.path(), cost, entries.len() as u64 + folders)
}

/// The folders holding `entries`, each once, every folder after its parent.
fn folders_of(entries: &[IndexEntry]) -> Vec<&[u8]> {
    let mut seen: HashSet<&[u8]> = HashSet::new();
    let mut out = Vec::new();
    for e in entries {
        let mut new = Vec::new();
        let mut path = split_parent(&e.path).0;
        while !path.is_empty() && !seen.contains(path) {
            new.push(path);
            path = split_parent(path).0;
        }
        for path in new.into_iter().rev() {
            seen.insert(path);
            out.push(path);
        }
    }
    out
}

/// Starts `threads` workers on the units of `job`'s index and waits for them; a worker that
/// panicked, or one that could not be started, leaves its failure in `shared`.
fn run_workers(job: &Job<'_>, shared: &Shared, threads: usize) {
    std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(threads);
        for k in 0..threads {
            let worker = || {
                let _guard = PanicGuard(shared);
                let mut compressed = Vec::new();
                while let Some((i, unit, charge)) = shared.take(job.auth.index()) {
                    if let Err((at, e)) = job.unit(i, &unit, charge, &mut compressed) {
                        shared.fail(at, e);
                    }
                }
            };
            let started = std::thread::Builder::new()
                .name(format!("unpack-{k}"))
                .spawn_scoped(s, worker);
            match started {
                Ok(h) => handles.push(h),
                Err(e) => {
                    let reason = format!(
                        "cannot start worker {} of {threads} of the parallel unpacking ({e}); \
                         set {var} lower",
                        k + 1,
                        var = clima_artifact_vars::INSTALL_THREADS
                    );
                    let source = io::Error::new(e.kind(), reason);
                    shared.fail(0, io_error(job.dest, b"", source));
                    break;
                }
            }
        }
        for h in handles {
            // The panic was recorded by the worker's guard.
            let _ = h.join();
        }
    });
}

fn io_error(dest: &Dir, path: &[u8], source: io::Error) -> ExtractError {
    ExtractError::Io {
        path: dest.path().join(OsStr::from_bytes(path)),
        source,
    }
}

fn corrupt(e: IndexError) -> ExtractError {
    ExtractError::Corrupt(e.to_string())
}

/// The last component of `path`.
fn name_of(path: &[u8]) -> &OsStr {
    OsStr::from_bytes(split_parent(path).1)
}

/// `path`'s folder (empty at the top) and last component.
fn split_parent(path: &[u8]) -> (&[u8], &[u8]) {
    match path.iter().rposition(|b| *b == b'/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (&[], path),
    }
}

impl Job<'_> {
    fn entry(&self, i: usize) -> &IndexEntry {
        &self.auth.index().entries[i]
    }

    /// Creates every folder of `folders` (fresh, `0o755`, each after its parent), serially,
    /// and sets up the files of several blocks (created by their first block to arrive).
    fn prepare(&mut self, folders: &[&[u8]]) -> Result<(), ExtractError> {
        let dest = self.dest;
        let dirs = self.dirs.get_mut().unwrap_or_else(PoisonError::into_inner);
        for path in folders {
            let (parent, name) = split_parent(path);
            let dir = dirs
                .get_path(parent)
                .and_then(|p| p.create_dir_new(OsStr::from_bytes(name), 0o755))
                .and_then(|d| d.set_mode(0o755).map(|()| d))
                .map_err(|e| io_error(dest, path, e))?;
            dirs.insert(path.to_vec(), Arc::new(dir));
        }
        for (i, e) in self.auth.index().entries.iter().enumerate() {
            if e.blocks.is_empty() {
                continue;
            }
            let hasher = BlobHasher::with_formats(e.size, self.formats);
            self.blocks.insert(
                i,
                Blocks {
                    open: Mutex::new(Open::default()),
                    path: dest.path().join(OsStr::from_bytes(&e.path)),
                    seq: Mutex::new(Sequence {
                        next: 0,
                        held: BTreeMap::new(),
                        hasher: Some(hasher),
                        done: None,
                    }),
                },
            );
        }
        Ok(())
    }

    /// The folder holding entry `path`, from the cache or opened again (without following a
    /// symlink) from the destination.
    fn folder(&self, path: &[u8]) -> Result<Arc<Dir>, ExtractError> {
        let parent = split_parent(path).0;
        let mut dirs = self.dirs.lock().unwrap_or_else(PoisonError::into_inner);
        dirs.get_path(parent)
            .map_err(|e| io_error(self.dest, parent, e))
    }

    /// Creates entry `e`'s file, new, in its folder, with its read-only mode.
    fn create_file(&self, e: &IndexEntry) -> Result<File, ExtractError> {
        let mode = e.mode.installed_permissions();
        let file = self
            .folder(&e.path)?
            .create_new(name_of(&e.path), mode)
            .map_err(|err| io_error(self.dest, &e.path, err))?;
        // The umask (or a default ACL) may have removed bits that are promised.
        file.set_permissions(Permissions::from_mode(mode))
            .map_err(|err| io_error(self.dest, &e.path, err))?;
        Ok(file)
    }

    /// A buffer for a decompressed member.
    fn buffer(&self) -> Vec<u8> {
        let mut spare = self.spare.lock().unwrap_or_else(PoisonError::into_inner);
        spare.pop().unwrap_or_default()
    }

    /// Keeps `buf` for a later member.
    fn give_back(&self, buf: Vec<u8>) {
        let mut spare = self.spare.lock().unwrap_or_else(PoisonError::into_inner);
        if spare.len() < SPARE {
            spare.push(buf);
        }
    }

    /// Decompresses, checks and writes unit `i` (`compressed`: the worker's buffer for the
    /// member's bytes): on failure, the error and the unit it counts for.
    fn unit(
        &self,
        i: usize,
        unit: &Unit,
        charge: Charge<'_>,
        compressed: &mut Vec<u8>,
    ) -> Result<(), (usize, ExtractError)> {
        let Some((blocks, plain, range)) = self
            .member((i, unit), compressed, charge.shared)
            .map_err(|e| (i, e))?
        else {
            return Ok(());
        };
        self.hand_in(unit, blocks, (plain, range, charge))
            .map_err(|e| (unit.last_unit, e))
    }

    /// Decompresses, checks and writes one member; for a block of a file of several, the file,
    /// the member decompressed and the range of the block's content in it, to be hashed.
    #[allow(clippy::type_complexity)]
    fn member(
        &self,
        (at, unit): (usize, &Unit),
        compressed: &mut Vec<u8>,
        shared: &Shared,
    ) -> Result<Option<(&Blocks, Vec<u8>, std::ops::Range<usize>)>, ExtractError> {
        let e = self.entry(unit.entry);
        match self.hook {
            Some(Hook::Panic(i)) => assert!(i != unit.entry, "the panic a test asked for"),
            Some(Hook::Slow(i)) if i == unit.entry => {
                std::thread::sleep(std::time::Duration::from_millis(300));
            }
            _ => {}
        }
        let span = &unit.span;
        let member = |reason: String| IndexError::Member {
            path: shown(&e.path),
            offset: span.offset,
            reason,
        };
        // The buffers are reused as they are (grown, never cleared): zeroing them for every
        // member would cost a pass over every byte.
        let len = span.length as usize;
        if compressed.len() < len {
            compressed.resize(len, 0);
        }
        let compressed = &mut compressed[..len];
        if !self.read_compressed((at, e, span), compressed, shared)? {
            // Another unit failed first: its failure is the one reported.
            return Ok(None);
        }
        let flavour = self.auth.locator().flavour;
        let mut plain = self.buffer();
        decode_member_reusing(flavour, compressed, span.plain_len, &mut plain)
            .map_err(|err| corrupt(member(err.to_string())))?;
        let first = unit.block == 0;
        let content = self
            .auth
            .member_content(e, span, first, unit.last, &plain[..span.plain_len as usize])
            .map_err(corrupt)?;
        if let Some(digest) = span.sha256 {
            let got: [u8; 32] = sha2::Sha256::digest(&content).into();
            if got != digest {
                let k = unit.block;
                return Err(corrupt(member(format!(
                    "block {k}'s content does not have the index's digest"
                ))));
            }
        }
        let Some(blocks) = self.blocks.get(&unit.entry) else {
            let written = self.write_whole(unit.entry, &content);
            drop(content);
            self.give_back(plain);
            return written.map(|()| None);
        };
        // A block of a file: its content, after the headers in the first block.
        drop(content);
        let start = if first { e.header_len as usize } else { 0 };
        let range = start..start + (span.content.end - span.content.start) as usize;
        self.write_block(e, blocks, &plain[range.clone()], span.content.start)?;
        Ok(Some((blocks, plain, range)))
    }

    /// Reads the compressed bytes of unit `at` (a member of `e` at `span`) into `compressed`:
    /// from the file at its offset, or from the stream in its turn. `false`: the unpacking
    /// stopped before this unit's turn came.
    fn read_compressed(
        &self,
        (at, e, span): (usize, &IndexEntry, &MemberSpan),
        compressed: &mut [u8],
        shared: &Shared,
    ) -> Result<bool, ExtractError> {
        let stream = match &self.input {
            Input::File {
                tarball,
                path,
                base,
            } => {
                // The spooled file is ours: a failure to read it is the depot's, not the
                // download's.
                tarball
                    .read_exact_at(compressed, base.saturating_add(span.offset))
                    .map_err(|err| ExtractError::Io {
                        path: path.to_path_buf(),
                        source: err,
                    })?;
                return Ok(true);
            }
            Input::Stream(stream) => stream,
        };
        if !shared.my_turn(at) {
            return Ok(false);
        }
        let mut s = stream.lock().unwrap_or_else(PoisonError::into_inner);
        // The members tile the file from byte 0 (the authenticated index says so): each
        // starts where the one before it ended.
        let read = if s.pos == span.offset {
            s.reader.read_exact(compressed)
        } else {
            Err(io::Error::other(format!("the stream is at byte {}", s.pos)))
        };
        if read.is_ok() {
            s.pos += span.length;
        }
        drop(s);
        shared.pass_turn(at, read.is_ok());
        read.map(|()| true).map_err(|err| {
            ExtractError::Corrupt(format!(
                "the download stopped in entry `{}`, whose member is bytes {}..{} of the \
                 file: {err}",
                shown(&e.path),
                span.offset,
                span.offset.saturating_add(span.length)
            ))
        })
    }

    /// Writes one block of `e`, a file of several (created by the first block to arrive,
    /// closed once the last one is written), at `offset`.
    fn write_block(
        &self,
        e: &IndexEntry,
        blocks: &Blocks,
        bytes: &[u8],
        offset: u64,
    ) -> Result<(), ExtractError> {
        let lock = || blocks.open.lock().unwrap_or_else(PoisonError::into_inner);
        let file = {
            let mut open = lock();
            match &open.file {
                Some(file) => Arc::clone(file),
                None => {
                    let file = Arc::new(self.create_file(e)?);
                    open.file = Some(Arc::clone(&file));
                    file
                }
            }
        };
        file.write_all_at(bytes, offset)
            .map_err(|err| ExtractError::Io {
                path: blocks.path.clone(),
                source: err,
            })?;
        drop(file);
        let mut open = lock();
        open.written += 1;
        if open.written == e.blocks.len() {
            open.file = None;
        }
        Ok(())
    }

    /// Writes a one-member entry (a file, or a symlink whose target is `content`) and records
    /// its blob id, checked against the index's.
    fn write_whole(&self, i: usize, content: &[u8]) -> Result<(), ExtractError> {
        let e = self.entry(i);
        if e.mode == EntryMode::Symlink {
            let depth = e.path.iter().filter(|b| **b == b'/').count();
            crate::unpack::check_symlink_target(content, depth).map_err(|reason| {
                ExtractError::Unsafe {
                    entry: shown(&e.path),
                    reason,
                }
            })?;
            self.folder(&e.path)?
                .symlink(OsStr::from_bytes(content), name_of(&e.path))
                .map_err(|err| io_error(self.dest, &e.path, err))?;
        } else {
            let mut file = self.create_file(e)?;
            io::Write::write_all(&mut file, content)
                .map_err(|err| io_error(self.dest, &e.path, err))?;
        }
        let mut hasher = BlobHasher::with_formats(e.size, self.formats);
        hasher.update(content);
        let id = self.checked_id(e, hasher)?;
        self.ids.lock().unwrap_or_else(PoisonError::into_inner)[i] = Some(id);
        Ok(())
    }

    /// The blob id of `hasher`, which must be the index's for `e`.
    fn checked_id(&self, e: &IndexEntry, hasher: BlobHasher) -> Result<ObjectId, ExtractError> {
        let wrong = || {
            corrupt(IndexError::Member {
                path: shown(&e.path),
                offset: e.offset,
                reason: "its content does not have the index's blob id".into(),
            })
        };
        let id = hasher.finish().map_err(|_| wrong())?;
        if id.sha1 != e.blob.sha1 || (id.sha256.is_some() && id.sha256 != e.blob.sha256) {
            return Err(wrong());
        }
        Ok(id)
    }

    /// Gives block `unit.block` of a file to its in-order hasher: hashed now (with the held
    /// blocks after it) when it is the next one and nobody else is hashing, else held.
    fn hand_in(
        &self,
        unit: &Unit,
        blocks: &Blocks,
        (plain, range, charge): (Vec<u8>, std::ops::Range<usize>, Charge<'_>),
    ) -> Result<(), ExtractError> {
        let shared = charge.shared;
        let lock = || blocks.seq.lock().unwrap_or_else(PoisonError::into_inner);
        let mut seq = lock();
        seq.held.insert(unit.block, (plain, range, charge.keep()));
        let Some(mut hasher) = seq.hasher.take() else {
            return Ok(());
        };
        loop {
            let next = seq.next;
            let Some((plain, range, bytes)) = seq.held.remove(&next) else {
                seq.hasher = Some(hasher);
                return Ok(());
            };
            drop(seq);
            hasher.update(&plain[range]);
            self.give_back(plain);
            shared.release(bytes);
            seq = lock();
            seq.next += 1;
            if seq.next == self.entry(unit.entry).blocks.len() {
                let id = self.checked_id(self.entry(unit.entry), hasher)?;
                seq.done = Some(id);
                return Ok(());
            }
        }
    }

    /// Checks that every entry got its blob id and builds the tree of what was written.
    fn finish(self, content: u64) -> Result<Extracted, ExtractError> {
        let ids = self
            .ids
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        let mut tree = TreeBuilder::with_formats(self.formats);
        let entries = &self.auth.index().entries;
        for (i, e) in entries.iter().enumerate() {
            let id = match self.blocks.get(&i) {
                Some(b) => b.seq.lock().unwrap_or_else(PoisonError::into_inner).done,
                None => ids[i],
            };
            let Some(id) = id else {
                return Err(ExtractError::Corrupt(format!(
                    "`{}` was not written in full by the parallel unpacking",
                    shown(&e.path)
                )));
            };
            tree.insert_bytes(&e.path, e.mode, id);
        }
        let hashes = tree.finish_hashes();
        Ok(Extracted {
            tree_hash: hashes.sha1,
            tree_hash_sha256: hashes.sha256,
            unpacked_bytes: content,
            entries: entries.len() as u64,
        })
    }
}
