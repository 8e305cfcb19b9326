//! A seekable tarball unpacked on every core: [`extract_parallel`].
//!
//! ```text
//!  calling thread: limits, folders (serially, fresh), multi-block files created
//!  N workers:      take the next member (in file order, once the budget has room for it)
//!                  -> pread its compressed bytes -> decompress (exactly the index's length)
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
//! taking members and the first error is returned.
//!
//! A file of several blocks is written block by block by any worker, but its blob SHA-1 (and
//! SHA-256) is one hash over the content in order: whichever worker finds the next block
//! ready hashes it, and the blocks after it that are already there, while the others go on.
//! So a single large file is hashed at one core's speed (each block's own SHA-256 is checked
//! on the worker that decompressed it).

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::fs::{File, Permissions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use clima_artifact_fs::Dir;
use sha2::Digest;

use super::format::{IndexEntry, MemberSpan, decode_member_into};
use super::{Authenticated, IndexError, shown};
use crate::tree_hash::{BlobHasher, EntryMode, Formats, ObjectId, TreeBuilder};
use crate::{ExtractError, ExtractLimits, Extracted};

/// Bytes of buffers in flight by default (compressed and decompressed members, taken and not
/// yet hashed): 48 MiB.
pub const DEFAULT_BUDGET: u64 = 48 << 20;

/// How [`extract_parallel`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parallelism {
    /// Worker threads (at least 1; no more are started than there are members).
    pub threads: usize,
    /// Bytes of buffers in flight ([`DEFAULT_BUDGET`] by default). A member larger than the
    /// whole budget is still taken, alone.
    pub budget: u64,
}

impl Parallelism {
    /// `threads` workers (the available cores when `None`), the default budget.
    pub fn with_threads(threads: Option<usize>) -> Parallelism {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Parallelism {
            threads: threads.unwrap_or(cores).max(1),
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
}

impl Unit {
    /// What it holds of the budget: its compressed and its decompressed bytes.
    fn cost(&self) -> u64 {
        self.span.length.saturating_add(self.span.plain_len)
    }
}

/// The file of several blocks, open for writing, and its in-order hash.
struct Blocks {
    file: File,
    path: PathBuf,
    seq: Mutex<Sequence>,
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
}

struct Queue {
    next: usize,
    in_flight: u64,
    failed: Option<ExtractError>,
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

    /// The next unit of `units` and its charge, waiting for room in the budget; `None` when
    /// all are taken or an install failed.
    fn take(&self, units: &[Unit]) -> Option<(usize, Charge<'_>)> {
        let mut q = self.lock();
        loop {
            if q.failed.is_some() || q.next >= units.len() {
                return None;
            }
            let cost = units[q.next].cost();
            if q.in_flight == 0 || q.in_flight.saturating_add(cost) <= self.budget {
                q.in_flight += cost;
                q.next += 1;
                let charge = Charge {
                    shared: self,
                    bytes: cost,
                };
                return Some((q.next - 1, charge));
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

    /// Records `e` (the first failure wins) and wakes every waiter.
    fn fail(&self, e: ExtractError) {
        let mut q = self.lock();
        if q.failed.is_none() {
            q.failed = Some(e);
        }
        drop(q);
        self.wake.notify_all();
    }
}

/// Sets the failure when a worker unwinds, so that nobody waits for it.
struct PanicGuard<'a>(&'a Shared);

impl Drop for PanicGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.fail(ExtractError::Corrupt(
                "a worker of the parallel unpacking failed unexpectedly (a bug: please report \
                 it); nothing was installed"
                    .into(),
            ));
        }
    }
}

/// Everything the workers read.
struct Job<'a> {
    auth: &'a Authenticated,
    tarball: &'a File,
    dest: &'a Dir,
    /// The folder of each entry (an index into `folders`).
    folder_of: Vec<usize>,
    folders: Vec<Dir>,
    /// For an entry of several blocks, its open file and hasher.
    blocks: HashMap<usize, Blocks>,
    /// Blob ids of one-member entries, as written.
    ids: Mutex<Vec<Option<ObjectId>>>,
    formats: Formats,
    /// The entry whose worker panics (tests of the failure path).
    panic_on: Option<usize>,
    /// Buffers of decompressed members given back, for the next members: allocating and
    /// freeing megabytes per member maps and unmaps memory, and every unmap interrupts the
    /// other workers' cores (a TLB shootdown), which a loaded machine pays dearly.
    spare: Mutex<Vec<Vec<u8>>>,
}

/// Most buffers kept in [`Job::spare`].
const SPARE: usize = 64;

/// Unpacks the seekable tarball `tarball` (its index `auth`, authenticated against the manifest)
/// into `dest` (an empty folder) on `how.threads` workers, checking every member against the
/// index as it is written, and returns the git tree hashes of the blob ids written (SHA-256
/// too when `limits.tree_hash_sha256`), for the caller to compare with the manifest's.
///
/// The rules of the one-pass extraction hold: files are created new (never through anything
/// already there), read-only, `0o444` or `0o555`; folders `0o755`; symlink targets stay inside
/// the artifact; `limits.max_unpacked_bytes` and the free-space reserve are checked against the
/// index's sizes before anything is written. A member that does not hold what the index says
/// is [`ExtractError::Corrupt`] naming the entry; a write that fails is [`ExtractError::Io`].
/// What was written is left for the caller to remove, as with a failed extraction.
pub fn extract_parallel(
    auth: &Authenticated,
    tarball: &File,
    dest: &Dir,
    limits: &ExtractLimits,
    how: &Parallelism,
) -> Result<Extracted, ExtractError> {
    extract_with(auth, tarball, dest, limits, how, None)
}

/// [`extract_parallel`]; `panic_on`: the entry whose worker panics (tests of the failure
/// path; always `None` outside them).
pub(super) fn extract_with(
    auth: &Authenticated,
    tarball: &File,
    dest: &Dir,
    limits: &ExtractLimits,
    how: &Parallelism,
    panic_on: Option<usize>,
) -> Result<Extracted, ExtractError> {
    let index = auth.index();
    if index.tar_size > limits.max_unpacked_bytes {
        return Err(ExtractError::TooLarge {
            limit: limits.max_unpacked_bytes,
        });
    }
    let content: u64 = index.entries.iter().map(|e| e.size).sum();
    check_room(dest, content, limits)?;
    let formats = Formats::with_sha256(limits.tree_hash_sha256);
    let mut job = Job {
        auth,
        tarball,
        dest,
        folder_of: Vec::with_capacity(index.entries.len()),
        folders: vec![dest.try_clone().map_err(|e| io_error(dest, b"", e))?],
        blocks: HashMap::new(),
        ids: Mutex::new(vec![None; index.entries.len()]),
        formats,
        panic_on,
        spare: Mutex::new(Vec::new()),
    };
    job.prepare()?;
    let units = units(auth);
    let shared = Shared {
        state: Mutex::new(Queue {
            next: 0,
            in_flight: 0,
            failed: None,
        }),
        wake: Condvar::new(),
        budget: how.budget.max(1),
    };
    run_workers(
        &job,
        &units,
        &shared,
        how.threads.clamp(1, units.len().max(1)),
    );
    if let Some(e) = shared.lock().failed.take() {
        return Err(e);
    }
    job.finish(content)
}

/// Fails when `dest`'s filesystem cannot take `content` bytes above the reserve.
fn check_room(dest: &Dir, content: u64, limits: &ExtractLimits) -> Result<(), ExtractError> {
    let (Some(reserve), Ok(space)) = (limits.min_free_bytes, dest.space()) else {
        return Ok(());
    };
    if space.available < reserve.saturating_add(content) {
        return Err(ExtractError::LowDiskSpace {
            path: dest.path().to_path_buf(),
            free: space.available,
            needed: content,
            reserve,
        });
    }
    Ok(())
}

/// Every member of the index, in file order.
fn units(auth: &Authenticated) -> Vec<Unit> {
    let index = auth.index();
    let mut units = Vec::new();
    for (i, e) in index.entries.iter().enumerate() {
        let spans = e.members(index.block_size);
        let n = spans.len();
        for (k, span) in spans.into_iter().enumerate() {
            units.push(Unit {
                entry: i,
                block: k,
                span,
                last: k + 1 == n,
            });
        }
    }
    units
}

/// Starts `threads` workers on `units` and waits for them; a worker that panicked leaves its
/// failure in `shared`.
fn run_workers(job: &Job<'_>, units: &[Unit], shared: &Shared, threads: usize) {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let _guard = PanicGuard(shared);
                    let mut compressed = Vec::new();
                    while let Some((i, charge)) = shared.take(units) {
                        if let Err(e) = job.unit(&units[i], charge, &mut compressed) {
                            shared.fail(e);
                        }
                    }
                })
            })
            .collect();
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

    /// Creates every folder (fresh, `0o755`) and every file of several blocks, serially.
    fn prepare(&mut self) -> Result<(), ExtractError> {
        let mut by_path: HashMap<Vec<u8>, usize> = HashMap::from([(Vec::new(), 0)]);
        let entries = &self.auth.index().entries;
        for (i, e) in entries.iter().enumerate() {
            let parent = split_parent(&e.path).0;
            let folder = self.folder(&mut by_path, parent)?;
            self.folder_of.push(folder);
            if e.blocks.is_empty() {
                continue;
            }
            let file = self.create_file(folder, e)?;
            let hasher = BlobHasher::with_formats(e.size, self.formats);
            self.blocks.insert(
                i,
                Blocks {
                    file,
                    path: self.dest.path().join(OsStr::from_bytes(&e.path)),
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

    /// The folder `path` (created with its parents when new), as an index into `folders`.
    fn folder(
        &mut self,
        by_path: &mut HashMap<Vec<u8>, usize>,
        path: &[u8],
    ) -> Result<usize, ExtractError> {
        if let Some(&i) = by_path.get(path) {
            return Ok(i);
        }
        let (parent, name) = split_parent(path);
        let parent = self.folder(by_path, parent)?;
        let dir = self.folders[parent]
            .create_dir_new(OsStr::from_bytes(name), 0o755)
            .and_then(|d| d.set_mode(0o755).map(|()| d))
            .map_err(|e| io_error(self.dest, path, e))?;
        self.folders.push(dir);
        by_path.insert(path.to_vec(), self.folders.len() - 1);
        Ok(self.folders.len() - 1)
    }

    /// Creates entry `e`'s file, new, in folder `folder`, with its read-only mode.
    fn create_file(&self, folder: usize, e: &IndexEntry) -> Result<File, ExtractError> {
        let mode = if e.mode == EntryMode::Executable {
            0o555
        } else {
            0o444
        };
        let file = self.folders[folder]
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

    /// Decompresses, checks and writes one member; `compressed` is the worker's buffer for
    /// the member's bytes.
    fn unit(
        &self,
        unit: &Unit,
        charge: Charge<'_>,
        compressed: &mut Vec<u8>,
    ) -> Result<(), ExtractError> {
        let e = self.entry(unit.entry);
        assert!(
            self.panic_on != Some(unit.entry),
            "the panic a test asked for"
        );
        let span = &unit.span;
        let member = |reason: String| IndexError::Member {
            path: shown(&e.path),
            offset: span.offset,
            reason,
        };
        compressed.clear();
        compressed.resize(span.length as usize, 0);
        self.tarball
            .read_exact_at(compressed, span.offset)
            .map_err(|err| corrupt(member(format!("cannot read it: {err}"))))?;
        let flavour = self.auth.locator().flavour;
        let mut plain = self.buffer();
        decode_member_into(flavour, compressed, span.plain_len, &mut plain)
            .map_err(|err| corrupt(member(err.to_string())))?;
        let first = unit.block == 0;
        let content = self
            .auth
            .member_content(e, span, first, unit.last, &plain)
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
            return written;
        };
        // A block of a file: its content, after the headers in the first block.
        drop(content);
        let start = if first { e.header_len as usize } else { 0 };
        let range = start..start + (span.content.end - span.content.start) as usize;
        blocks
            .file
            .write_all_at(&plain[range.clone()], span.content.start)
            .map_err(|err| ExtractError::Io {
                path: blocks.path.clone(),
                source: err,
            })?;
        self.hand_in(unit, blocks, (plain, range, charge))
    }

    /// Writes a one-member entry (a file, or a symlink whose target is `content`) and records
    /// its blob id, checked against the index's.
    fn write_whole(&self, i: usize, content: &[u8]) -> Result<(), ExtractError> {
        let e = self.entry(i);
        let folder = self.folder_of[i];
        if e.mode == EntryMode::Symlink {
            let depth = e.path.iter().filter(|b| **b == b'/').count();
            crate::unpack::check_symlink_target(content, depth).map_err(|reason| {
                ExtractError::Unsafe {
                    entry: shown(&e.path),
                    reason,
                }
            })?;
            self.folders[folder]
                .symlink(OsStr::from_bytes(content), name_of(&e.path))
                .map_err(|err| io_error(self.dest, &e.path, err))?;
        } else {
            let mut file = self.create_file(folder, e)?;
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
