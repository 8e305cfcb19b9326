//! The extraction itself; what it does is documented at the crate root.

use std::cell::Cell;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, channel, sync_channel};

use tar::EntryType;

use clima_artifact_fs::{Dir, read_full};

use crate::dirs::Dirs;
use crate::listing::{Blob, DirId, Listing, ROOT, Written};
use crate::tree_hash::{BlobHasher, EntryMode, Formats, ObjectId, TreeBuilder, blob_ids};
use clima_artifact_manifest::{GitTreeSha1, GitTreeSha256};

/// Copy buffer size, also the buffer [`extract_archive`] puts in front of the decompressor.
const BUFFER: usize = 256 * 1024;

/// Whether the pax header of `entry` describes a sparse file (GNU tar's pax sparse formats 0.0,
/// 0.1 and 1.0 all use `GNU.sparse.*` records; the entry itself looks like a regular file named
/// `GNUSparseFile.<pid>/<name>` whose data is a sparse map, not the file).
fn is_pax_sparse<R: Read>(entry: &mut tar::Entry<'_, R>) -> bool {
    let Ok(Some(extensions)) = entry.pax_extensions() else {
        return false;
    };
    extensions
        .flatten()
        .any(|ext| ext.key_bytes().starts_with(b"GNU.sparse."))
}

/// Most bytes of extension headers (GNU long names, pax records) read for one entry.
const MAX_EXTENSION_BYTES: u64 = 1024 * 1024;

/// Limits applied while extracting.
#[derive(Debug, Clone)]
pub struct ExtractLimits {
    /// Maximum size of the decompressed tar stream (file contents plus tar headers and
    /// padding): the decompression-bomb cap.
    pub max_unpacked_bytes: u64,
    /// Maximum number of tar entries (files, directories, links; extension headers not
    /// counted): bounds inodes and the memory that tracks written paths.
    pub max_entries: u64,
    /// Free-space reserve of the destination's filesystem: unpacking stops with
    /// [`ExtractError::LowDiskSpace`] before a file would leave less than this many bytes free
    /// (checked before each large file and every 16 MiB of content). Every entry is counted
    /// by what it costs on disk (a folder or symlink a block, a file its blocks and one more,
    /// a copied hard link like a file), and 1% of the filesystem's inodes are kept free too.
    /// `None`: not checked.
    pub min_free_bytes: Option<u64>,
    /// Write only what the tree hash covers: entries inside a `.git` folder and folders that
    /// end up without hashed content are dropped. For sources whose bytes are not checked
    /// against a sha256 (a package server), where nothing else vouches for them.
    pub only_hashed: bool,
    /// Also compute the git tree SHA-256 ([`Extracted::tree_hash_sha256`]) from the same bytes
    /// in the same pass, for an entry that carries a `git-tree-sha256`. Off by default: the
    /// SHA-1 alone is cheaper.
    pub tree_hash_sha256: bool,
}

/// How much content may be written between two free-space checks.
const FREE_SPACE_CHECK_EVERY: u64 = 16 << 20;

/// What an entry costs on disk besides its content, counted against the free-space reserve:
/// a block (a folder's or a symlink's, a file's inode and the rounding of its last block).
const ENTRY_COST: u64 = 4096;

/// What a filesystem has free, as an extraction counts it against its reserves.
pub(crate) struct Room {
    /// Bytes free.
    pub(crate) free: u64,
    /// Inodes free and in all, where the filesystem counts them (1% of them is kept free).
    pub(crate) inodes: Option<(u64, u64)>,
    /// Bytes kept free.
    pub(crate) reserve: u64,
}

impl Room {
    /// Fails unless `cost` more bytes (counted as [`entry_cost`] does) and `entries` more
    /// inodes fit above the reserves of the filesystem holding `dest`.
    pub(crate) fn check(&self, dest: &Path, cost: u64, entries: u64) -> Result<(), ExtractError> {
        if self.free < self.reserve.saturating_add(cost) {
            return Err(ExtractError::LowDiskSpace {
                path: dest.to_path_buf(),
                free: self.free,
                needed: cost,
                reserve: self.reserve,
            });
        }
        if let Some((free, total)) = self.inodes {
            let reserve = total / 100;
            if free < reserve.saturating_add(entries) {
                return Err(ExtractError::LowInodes {
                    path: dest.to_path_buf(),
                    free,
                    reserve,
                });
            }
        }
        Ok(())
    }
}

/// The bytes an entry of `kind` (a file of `size` bytes, or else a folder or a symlink) is
/// counted for against the free-space reserve.
pub(crate) fn entry_cost(file: bool, size: u64) -> u64 {
    if file { file_cost(size) } else { ENTRY_COST }
}

/// The bytes a file of `size` bytes is counted for against the free-space reserve.
fn file_cost(size: u64) -> u64 {
    size.div_ceil(ENTRY_COST)
        .saturating_mul(ENTRY_COST)
        .saturating_add(ENTRY_COST)
}

pub use clima_artifact_fs::{default_free_reserve, free_space};

/// Default of [`ExtractLimits::max_entries`] (and of the runtime's `CLIMA_ARTIFACTS_MAX_ENTRIES`):
/// 10 million archive entries.
pub const DEFAULT_MAX_ENTRIES: u64 = 10_000_000;

/// Default of [`ExtractLimits::max_unpacked_bytes`] (and of the runtime's
/// `CLIMA_ARTIFACTS_MAX_UNPACKED_BYTES`): 1 TiB.
pub const DEFAULT_MAX_UNPACKED_BYTES: u64 = 1 << 40;

impl Default for ExtractLimits {
    /// The runtime's defaults: 1 TiB unpacked, 10 million entries, no free-space check.
    fn default() -> ExtractLimits {
        ExtractLimits {
            max_unpacked_bytes: DEFAULT_MAX_UNPACKED_BYTES,
            max_entries: DEFAULT_MAX_ENTRIES,
            min_free_bytes: None,
            only_hashed: false,
            tree_hash_sha256: false,
        }
    }
}

/// Why an archive was refused. Messages name the entry and say what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    /// An entry that cannot be extracted safely (absolute path, `..`, device, escaping link...).
    #[error("unsafe archive entry `{entry}`: {reason}")]
    Unsafe {
        /// The entry's path as written in the archive.
        entry: String,
        /// What is wrong.
        reason: String,
    },
    /// More than [`ExtractLimits::max_unpacked_bytes`] of content.
    #[error(
        "archive unpacks to more than {limit} bytes; raise {MAX_UNPACKED_BYTES} if this artifact is really that large",
        MAX_UNPACKED_BYTES = clima_artifact_vars::MAX_UNPACKED_BYTES
    )]
    TooLarge {
        /// The cap in bytes.
        limit: u64,
    },
    /// More than [`ExtractLimits::max_entries`] entries.
    #[error(
        "archive has more than {limit} entries; raise {MAX_ENTRIES} if this artifact really has that many files",
        MAX_ENTRIES = clima_artifact_vars::MAX_ENTRIES
    )]
    TooManyEntries {
        /// The cap on entries.
        limit: u64,
    },
    /// Not a (complete) tar archive, or a compression error.
    #[error("not a valid archive: {0}")]
    Corrupt(String),
    /// The destination's filesystem would fall below its free-space reserve.
    #[error(
        "stopped unpacking before `{}` fills up: {} free, {} needed for the next file, and a \
         reserve of {} is kept ({MIN_FREE_SPACE}; default 1% of the filesystem or \
         1 GiB); free space there or put the depot on a larger filesystem",
        path.display(),
        clima_artifact_fs::human_bytes(*free),
        clima_artifact_fs::human_bytes(*needed),
        clima_artifact_fs::human_bytes(*reserve),
        MIN_FREE_SPACE = clima_artifact_vars::MIN_FREE_SPACE
    )]
    LowDiskSpace {
        /// The destination directory.
        path: PathBuf,
        /// Bytes free when unpacking stopped.
        free: u64,
        /// Bytes of the file about to be written.
        needed: u64,
        /// The reserve kept free.
        reserve: u64,
    },
    /// The destination's filesystem would fall below its reserve of free inodes.
    #[error(
        "stopped unpacking before `{}` runs out of inodes: {free} free, and a reserve of \
         {reserve} (1% of the filesystem's) is kept; free some files there or put the depot on \
         a larger filesystem",
        path.display()
    )]
    LowInodes {
        /// The destination directory.
        path: PathBuf,
        /// Inodes free when unpacking stopped.
        free: u64,
        /// The reserve kept free.
        reserve: u64,
    },
    /// Writing into the destination failed.
    #[error("{}", io_message(path, source))]
    Io {
        /// The path being written.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// What an extraction produced.
#[derive(Debug, Clone)]
pub struct Extracted {
    /// The git tree hash of what was written, computed while writing.
    pub tree_hash: GitTreeSha1,
    /// Its git tree SHA-256, if [`ExtractLimits::tree_hash_sha256`] asked for it.
    pub tree_hash_sha256: Option<GitTreeSha256>,
    /// Total bytes of file content written.
    pub unpacked_bytes: u64,
    /// Number of files and symlinks written.
    pub entries: u64,
}

/// Detects the compression (gzip, zstd, xz, bzip2, or plain tar) by magic bytes, then
/// extracts the tar stream into `dest` (an existing, empty directory), hashing as it writes.
/// The caller must drain `reader` afterwards if it needs a digest of every byte.
///
/// Zip and 7z files are recognised and refused with [`ExtractError::Corrupt`] saying how to
/// repack them.
pub fn extract_archive<R: Read>(
    reader: R,
    dest: &Path,
    limits: &ExtractLimits,
) -> Result<Extracted, ExtractError> {
    extract_buffered(BufReader::with_capacity(BUFFER, reader), dest, limits)
}

/// [`extract_archive`] from a reader that has its own buffer: the decompressor takes its
/// input straight from that buffer (no copy into a second one).
pub fn extract_buffered<R: BufRead>(
    reader: R,
    dest: &Path,
    limits: &ExtractLimits,
) -> Result<Extracted, ExtractError> {
    let dir = Dir::open_no_follow(dest).map_err(|source| ExtractError::Io {
        path: dest.to_path_buf(),
        source,
    })?;
    extract_buffered_at(reader, &dir, limits)
}

/// [`extract_buffered`] into the folder open as `dir` (an empty directory; its path is used
/// in messages only). Everything is created relative to `dir` and to handles on the
/// folders created inside it (`openat` and friends, never following a symlink), so a folder
/// that is renamed or swapped for a symlink while the extraction runs cannot redirect a write.
/// A caller that opened `dir` right after creating it can check, before using `dest`, that
/// `dest` is still that folder.
pub fn extract_buffered_at<R: BufRead>(
    mut reader: R,
    dir: &Dir,
    limits: &ExtractLimits,
) -> Result<Extracted, ExtractError> {
    let dest = dir.path();
    let io_err = |source| ExtractError::Io {
        path: dest.to_path_buf(),
        source,
    };
    check_destination(dir)?;
    let dir = dir.try_clone().map_err(io_err)?;
    let new = |dir| Extraction::new(dest, dir, limits);

    let mut magic = [0u8; 6];
    let have = read_full(&mut reader, &mut magic)
        .map_err(|e| ExtractError::Corrupt(format!("cannot read the archive: {e}")))?;
    let magic = &magic[..have];
    let stream = io::Cursor::new(magic.to_vec()).chain(reader);

    if magic.is_empty() {
        Err(ExtractError::Corrupt(
            "the input is empty; expected a tar archive (plain, gzip, zstd, xz or bzip2)".into(),
        ))
    } else if magic.starts_with(&[0x1f, 0x8b]) {
        let decoder = flate2::bufread::MultiGzDecoder::new(stream);
        new(dir).run(decoder)
    } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let decoder = zstd::stream::read::Decoder::with_buffer(stream)
            .map_err(|e| ExtractError::Corrupt(format!("cannot start zstd decompression: {e}")))?;
        new(dir).run(decoder)
    } else if magic.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
        // Concatenated streams allowed (as `xz -d`); at most 1 GiB of decoder memory per
        // block, so a hostile header cannot make us allocate more.
        let decoder = lzma_rust2::XzReader::new_mem_limit(stream, true, 1 << 20);
        new(dir).run(decoder)
    } else if magic.starts_with(b"BZh") {
        let decoder = bzip2::bufread::MultiBzDecoder::new(stream);
        new(dir).run(decoder)
    } else if magic.starts_with(b"PK\x03\x04") || magic.starts_with(b"PK\x05\x06") {
        Err(ExtractError::Corrupt(
            "this is a zip file, not a tar archive; artifacts are tarballs (as in Julia): \
             repack it, e.g. `unzip data.zip -d data && clima-artifacts create data ...`, or \
             `tar czf data.tar.gz -C data .`"
                .into(),
        ))
    } else if magic.starts_with(b"7z\xbc\xaf\x27\x1c") {
        Err(ExtractError::Corrupt(
            "this is a 7z archive, not a tar archive; repack its content as a .tar.gz (e.g. \
             with `clima-artifacts create`)"
                .into(),
        ))
    } else {
        new(dir).run(stream)
    }
}

/// The folder open as `dir` must be an empty directory.
fn check_destination(dir: &Dir) -> Result<(), ExtractError> {
    let io_err = |source| ExtractError::Io {
        path: dir.path().to_path_buf(),
        source,
    };
    let meta = dir.metadata().map_err(io_err)?;
    if !meta.is_dir() {
        return Err(io_err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "extraction destination is not a directory",
        )));
    }
    if !dir.is_empty().map_err(io_err)? {
        return Err(io_err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "extraction destination is not empty",
        )));
    }
    Ok(())
}

/// Shared accounting of the decompressed bytes read by the tar parser.
struct Meter {
    /// Bytes read so far.
    total: Cell<u64>,
    /// The cap on `total`.
    cap: u64,
    /// While parsing headers: `total` may not exceed this.
    header_stop: Cell<u64>,
    /// The cap was exceeded.
    over_cap: Cell<bool>,
    /// The extension-header limit was exceeded.
    over_header: Cell<bool>,
    /// The decompressed stream reached its end.
    eof: Cell<bool>,
}

impl Meter {
    fn remaining(&self) -> u64 {
        self.cap.saturating_sub(self.total.get())
    }

    /// Turns an error out of the tar parser or the decompressor into an [`ExtractError`].
    fn classify(&self, err: io::Error, context: &str) -> ExtractError {
        if self.over_cap.get() {
            ExtractError::TooLarge { limit: self.cap }
        } else if self.over_header.get() {
            ExtractError::Corrupt(format!(
                "{context}: extension headers (long names, pax records) larger than \
                 {MAX_EXTENSION_BYTES} bytes"
            ))
        } else {
            ExtractError::Corrupt(format!("{context}: {err}"))
        }
    }
}

/// A reader that counts bytes into a [`Meter`] and fails past its limits.
struct Metered<R> {
    inner: R,
    meter: Rc<Meter>,
}

impl<R: Read> Read for Metered<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let meter = &*self.meter;
        let stop = meter.cap.min(meter.header_stop.get());
        let allowed = stop.saturating_sub(meter.total.get());
        // Ask for one byte more than allowed, to tell "exactly at the limit" from "past it".
        let want = (buf.len() as u64).min(allowed.saturating_add(1)) as usize;
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 && !buf.is_empty() {
            meter.eof.set(true);
        }
        let total = meter.total.get() + n as u64;
        if total > stop {
            if total > meter.cap {
                meter.over_cap.set(true);
            } else {
                meter.over_header.set(true);
            }
            return Err(io::Error::other("size limit exceeded"));
        }
        meter.total.set(total);
        Ok(n)
    }
}

/// The message of [`ExtractError::Io`]: the cause alone when it names the path already (the
/// errors of [`Dir`] do), else "cannot write `path`: cause".
fn io_message(path: &Path, source: &io::Error) -> String {
    let cause = source.to_string();
    if cause.contains(&format!("`{}`", path.display())) {
        cause
    } else {
        format!("cannot write `{}`: {cause}", path.display())
    }
}

/// A file for the [`BlobWriter`] thread to create (see [`create_file_at`]).
struct NewFile {
    /// The folder to create it in, and its name there.
    dir: Arc<Dir>,
    name: OsString,
    /// Its path, for messages.
    path: PathBuf,
    permissions: u32,
    /// The umask removes some of `permissions`.
    masked: bool,
}

/// A job for the [`BlobWriter`] thread.
enum Job {
    /// Create a file: the following `Data` belongs to it.
    Open { file: NewFile, len: u64 },
    /// The next bytes of the open file.
    Data(Vec<u8>),
    /// The open file is complete: send its blob id (or the write error).
    Close,
    /// Whole small files, one after the other. One hand-off for many files keeps the two
    /// threads from waking each other up three times per file.
    Files(Batch),
}

/// What the writer thread answers for each file: its blob id, or the path and the error.
type WriterResult = Result<ObjectId, (PathBuf, io::Error)>;

/// Small files handed over together: their contents are `data`, concatenated in the order
/// of `files`, each with its length.
#[derive(Default)]
struct Batch {
    data: Vec<u8>,
    files: Vec<(NewFile, usize)>,
    /// Bytes of `data` that hold files (a recycled buffer is not cleared, so that what was
    /// initialised once is not zeroed again before every batch).
    used: usize,
}

/// A file of at most this many bytes goes into a [`Batch`].
const BATCH_FILE_MAX: u64 = 64 * 1024;
/// At most this many files per batch (a batch of empty files holds no bytes).
const BATCH_FILES_MAX: usize = 256;

/// Creates files, writes their contents and hashes them on a second thread while the
/// extraction thread decompresses and parses the next bytes (this takes SHA-1 and the `open`,
/// `write` and `close` system calls off the critical path). Small files travel in batches.
/// Jobs are answered in order, one result per file, so file `n`'s blob is the `n`-th result.
/// At most [`IN_FLIGHT`] jobs are queued.
struct BlobWriter {
    jobs: Option<SyncSender<Job>>,
    results: Receiver<WriterResult>,
    free: Receiver<Vec<u8>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Blob ids received so far, by file number.
    blobs: Vec<ObjectId>,
    /// Files handed to the thread so far (including those still in `batch`).
    files: usize,
    /// Small files not handed over yet.
    batch: Batch,
}

/// Buffers queued for the [`BlobWriter`] thread.
const IN_FLIGHT: usize = 4;

impl BlobWriter {
    fn spawn(formats: Formats) -> io::Result<BlobWriter> {
        let (jobs, rx) = sync_channel::<Job>(IN_FLIGHT);
        let (tx_results, results) = channel();
        let (recycle, free) = sync_channel::<Vec<u8>>(IN_FLIGHT + 2);
        let thread = std::thread::Builder::new()
            .name("clima-artifacts-writer".into())
            .spawn(move || {
                // A file that cannot be created or written ends the thread at once with
                // its error, which the extraction picks up at its next hand-off: a large
                // file on a full disk stops the extraction there, not after the rest of
                // its bytes were decompressed (and, for a download, fetched).
                let mut open: Option<(File, PathBuf, BlobHasher)> = None;
                for job in rx {
                    match job {
                        Job::Open { file, len } => match file.create() {
                            Ok(f) => {
                                open = Some((f, file.path, BlobHasher::with_formats(len, formats)))
                            }
                            Err(e) => {
                                let _ = tx_results.send(Err((file.path, e)));
                                return;
                            }
                        },
                        Job::Data(buf) => {
                            if let Some((file, path, hasher)) = &mut open {
                                hasher.update(&buf);
                                if let Err(e) = file.write_all(&buf) {
                                    let _ = tx_results.send(Err((std::mem::take(path), e)));
                                    return;
                                }
                            }
                            let _ = recycle.try_send(buf);
                        }
                        Job::Close => {
                            let Some((file, path, hasher)) = open.take() else {
                                return;
                            };
                            drop(file);
                            if tx_results
                                .send(hasher.finish().map_err(|e| (path, e)))
                                .is_err()
                            {
                                return;
                            }
                        }
                        Job::Files(Batch { data, files, .. }) => {
                            let mut at = 0;
                            for (file, len) in files {
                                let bytes = &data[at..at + len];
                                at += len;
                                let mut hasher = BlobHasher::with_formats(len as u64, formats);
                                hasher.update(bytes);
                                let result =
                                    match file.create().and_then(|mut f| f.write_all(bytes)) {
                                        Err(e) => Err((file.path, e)),
                                        Ok(()) => hasher.finish().map_err(|e| (file.path, e)),
                                    };
                                if tx_results.send(result).is_err() {
                                    return;
                                }
                            }
                            let _ = recycle.try_send(data);
                        }
                    }
                }
            })?;
        Ok(BlobWriter {
            jobs: Some(jobs),
            results,
            free,
            thread: Some(thread),
            blobs: Vec::new(),
            files: 0,
            batch: Batch::default(),
        })
    }

    /// An empty buffer of [`BUFFER`] bytes (recycled when possible).
    fn buffer(&self) -> Vec<u8> {
        let mut buf = self.free.try_recv().unwrap_or_default();
        buf.resize(BUFFER, 0);
        buf
    }

    fn send(&mut self, job: Job) -> Result<(), ExtractError> {
        if !matches!(job, Job::Files(_)) {
            self.flush()?;
        }
        self.poll()?;
        let sent = self
            .jobs
            .as_ref()
            .is_some_and(|jobs| jobs.send(job).is_ok());
        if sent {
            return Ok(());
        }
        // The thread is gone: its last result says why.
        self.receive(self.files)?;
        Err(ExtractError::Corrupt("the writer thread stopped".into()))
    }

    /// Hands the batch of small files over (if there is one).
    fn flush(&mut self) -> Result<(), ExtractError> {
        if self.batch.files.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.batch);
        self.send(Job::Files(batch))
    }

    /// Starts file number `self.files` (returned).
    fn open(&mut self, file: NewFile, len: u64) -> Result<usize, ExtractError> {
        self.send(Job::Open { file, len })?;
        self.files += 1;
        Ok(self.files - 1)
    }

    /// Adds a whole small file (at most [`BATCH_FILE_MAX`] bytes, read by `fill` into the
    /// slice it is given) to the batch, handing the batch over first if it is full. Returns
    /// the file's number.
    fn small(
        &mut self,
        file: NewFile,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), ExtractError>,
    ) -> Result<usize, ExtractError> {
        if self.batch.files.len() >= BATCH_FILES_MAX || self.batch.used + len > BUFFER {
            self.flush()?;
        }
        if self.batch.files.is_empty() {
            self.batch.data = self.free.try_recv().unwrap_or_default();
            self.batch.used = 0;
        }
        let at = self.batch.used;
        if self.batch.data.len() < at + len {
            self.batch.data.resize(at + len, 0);
        }
        fill(&mut self.batch.data[at..at + len])?;
        self.batch.used += len;
        self.batch.files.push((file, len));
        self.files += 1;
        Ok(self.files - 1)
    }

    /// Waits for the blob id of file `n` (and every file before it).
    fn wait(&mut self, n: usize) -> Result<ObjectId, ExtractError> {
        self.flush()?;
        self.receive(n)
    }

    /// Takes the results that are already there, so that a file the writer could not create
    /// or write (no permission, quota, inodes) stops the extraction at the next hand-off
    /// rather than after the whole archive was decompressed.
    fn poll(&mut self) -> Result<(), ExtractError> {
        while let Ok(result) = self.results.try_recv() {
            self.accept(result)?;
        }
        Ok(())
    }

    /// Keeps a file's blob id, or turns its failure into the extraction's error.
    fn accept(&mut self, result: WriterResult) -> Result<(), ExtractError> {
        let blob = result.map_err(|(path, source)| ExtractError::Io { path, source })?;
        self.blobs.push(blob);
        Ok(())
    }

    /// Receives blob ids up to file `n` (which must have been handed over).
    fn receive(&mut self, n: usize) -> Result<ObjectId, ExtractError> {
        while self.blobs.len() <= n {
            match self.results.recv() {
                Ok(result) => self.accept(result)?,
                Err(_) => return Err(ExtractError::Corrupt("the writer thread stopped".into())),
            }
        }
        Ok(self.blobs[n])
    }

    /// Waits for every file and returns all blob ids, by file number.
    fn finish(mut self) -> Result<Vec<ObjectId>, ExtractError> {
        if self.files > 0 {
            self.wait(self.files - 1)?;
        }
        Ok(std::mem::take(&mut self.blobs))
    }
}

impl Drop for BlobWriter {
    fn drop(&mut self) {
        self.jobs = None; // ends the thread's loop
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// State of one extraction.
struct Extraction<'a> {
    /// The destination's path, for messages only: everything is reached through `dirs`.
    dest: &'a Path,
    dirs: Dirs,
    limits: &'a ExtractLimits,
    /// What each name became, by folder (see [`Listing`]: memory per entry is its name).
    written: Listing,
    tree: TreeBuilder,
    writer: Option<BlobWriter>,
    /// Files whose blob the writer is still computing, by file number: their folder, name and
    /// mode, or `None` once replaced by a later entry (or inside `.git`). Added to the tree at
    /// the end; as a replaced file was taken out, "later entries win" still holds.
    pending: Vec<Option<PendingFile>>,
    content_bytes: u64,
    /// Bytes counted against the free-space reserve so far (see [`file_cost`]).
    disk_bytes: u64,
    /// Entries counted against the reserve of inodes so far.
    disk_entries: u64,
    /// `disk_bytes` at which free space is checked again.
    next_free_check: u64,
    /// The filesystem's free bytes and inodes, `disk_bytes` and `disk_entries` at the first
    /// free-space check.
    free_baseline: Option<FreeBaseline>,
    entries: u64,
    /// Number of tar entries parsed so far.
    headers: u64,
    /// The umask when the extraction started, if it alone decides the modes of new files in
    /// `dest` (see [`trusted_umask`]).
    umask: Option<u32>,
}

/// A file whose blob the writer is still computing: its folder, its name and its mode.
type PendingFile = (DirId, Box<[u8]>, EntryMode);

/// What the first free-space check found, to count down from.
#[derive(Clone, Copy)]
struct FreeBaseline {
    free: u64,
    inodes: Option<u64>,
    disk_bytes: u64,
    disk_entries: u64,
}

/// The path of an entry, split into safe components.
struct EntryPath {
    /// As written in the archive (for messages).
    display: String,
    components: Vec<Vec<u8>>,
}

impl EntryPath {
    fn joined(&self, upto: usize) -> Vec<u8> {
        self.components[..upto].join(&b'/')
    }

    fn key(&self) -> Vec<u8> {
        self.joined(self.components.len())
    }

    /// The components of the folder holding the first `depth` components, and the last one.
    fn split(&self, depth: usize) -> (&[Vec<u8>], &[u8]) {
        (&self.components[..depth - 1], &self.components[depth - 1])
    }

    fn unsafe_entry(&self, reason: impl Into<String>) -> ExtractError {
        ExtractError::Unsafe {
            entry: self.display.clone(),
            reason: reason.into(),
        }
    }
}

/// Bytes from the archive (a name, a link target) as text safe to print: invalid UTF-8
/// replaced, control characters escaped (no escape sequence from an archive reaches a
/// terminal or forges a log line).
fn shown(bytes: &[u8]) -> String {
    clima_artifact_fs::printable(&String::from_utf8_lossy(bytes)).into_owned()
}

/// Splits an archive path into components, refusing absolute paths, `..` and NUL bytes.
fn safe_components(raw: &[u8]) -> Result<Vec<Vec<u8>>, &'static str> {
    if raw.contains(&0) {
        return Err("the path contains a NUL byte");
    }
    if raw.starts_with(b"/") {
        return Err("absolute paths are not allowed in an artifact");
    }
    let mut out = Vec::new();
    for component in raw.split(|&b| b == b'/') {
        match component {
            b"" | b"." => {}
            b".." => return Err("`..` path components are not allowed in an artifact"),
            name => out.push(name.to_vec()),
        }
    }
    Ok(out)
}

/// Checks that a symlink at depth `depth` (number of directories above it) pointing at `target`
/// cannot resolve outside the artifact.
pub(crate) fn check_symlink_target(target: &[u8], depth: usize) -> Result<(), String> {
    if target.is_empty() {
        return Err("the symlink has an empty target".into());
    }
    if target.contains(&0) {
        return Err("the symlink target contains a NUL byte".into());
    }
    if target.starts_with(b"/") {
        return Err(format!(
            "the symlink points to the absolute path `{}`; only relative links inside the \
             artifact are allowed",
            shown(target)
        ));
    }
    let mut ups = 0;
    let mut seen_name = false;
    for component in target.split(|&b| b == b'/') {
        match component {
            b"" | b"." => {}
            b".." if seen_name => {
                return Err(format!(
                    "the symlink target `{}` has `..` after a directory name, which could \
                     climb out through another symlink",
                    shown(target)
                ));
            }
            b".." => {
                ups += 1;
                if ups > depth {
                    return Err(format!(
                        "the symlink target `{}` points outside the artifact",
                        shown(target)
                    ));
                }
            }
            _ => seen_name = true,
        }
    }
    Ok(())
}

impl<'a> Extraction<'a> {
    fn new(dest: &'a Path, dir: Dir, limits: &'a ExtractLimits) -> Self {
        let umask = trusted_umask(dir.as_fd());
        Extraction {
            dest,
            dirs: Dirs::new(dir),
            limits,
            written: Listing::new(),
            tree: TreeBuilder::with_formats(Formats::with_sha256(limits.tree_hash_sha256)),
            writer: None,
            pending: Vec::new(),
            content_bytes: 0,
            disk_bytes: 0,
            disk_entries: 0,
            next_free_check: 0,
            free_baseline: None,
            entries: 0,
            headers: 0,
            umask,
        }
    }

    /// Counts an entry that costs `cost` bytes on disk (and an inode) against the free-space
    /// reserve, checking the filesystem first when it is due: before the first entry, before
    /// a large file, and then after at most half the headroom left at the last check (at most
    /// 16 MiB), so many small entries cannot slip under the reserve between two checks.
    fn charge(&mut self, cost: u64) -> Result<(), ExtractError> {
        let due = cost >= FREE_SPACE_CHECK_EVERY
            || self.disk_entries == 0
            || self.disk_bytes.saturating_add(cost) >= self.next_free_check;
        if let (true, Some(reserve)) = (due, self.limits.min_free_bytes) {
            self.check_free_space(cost, reserve)?;
        }
        self.disk_bytes = self.disk_bytes.saturating_add(cost);
        self.disk_entries += 1;
        Ok(())
    }

    /// Fails before an entry of `cost` bytes would leave the destination's filesystem with
    /// less than `reserve` bytes, or 1% of its inodes, free.
    fn check_free_space(&mut self, cost: u64, reserve: u64) -> Result<(), ExtractError> {
        let Ok(clima_artifact_fs::Space {
            available: reported,
            inodes,
            ..
        }) = self.dirs.root().space()
        else {
            return Ok(()); // cannot tell: a write that does not fit fails on its own
        };
        // The writer thread may not have written what it was handed yet, so the filesystem
        // can report more than will be left. Also count down from the first check by what we
        // handed over, and trust the smaller of the two.
        let base = *self.free_baseline.get_or_insert(FreeBaseline {
            free: reported,
            inodes: inodes.map(|(free, _)| free),
            disk_bytes: self.disk_bytes,
            disk_entries: self.disk_entries,
        });
        let free = reported.min(base.free.saturating_sub(self.disk_bytes - base.disk_bytes));
        let inodes = inodes.map(|(reported, total)| {
            let ours = self.disk_entries - base.disk_entries;
            let free = reported.min(base.inodes.unwrap_or(reported).saturating_sub(ours));
            (free, total)
        });
        let room = Room {
            free,
            inodes,
            reserve,
        };
        room.check(self.dest, cost, 1)?;
        let mut headroom = (free - reserve - cost) / 2;
        if let Some((free, total)) = inodes {
            let reserve = total / 100;
            // Every entry is counted for at least ENTRY_COST bytes: this many bytes until the
            // next check cannot use more than half the inodes left above the reserve.
            headroom = headroom.min((free - reserve - 1) / 2 * ENTRY_COST);
        }
        self.next_free_check = self.disk_bytes + cost + headroom.min(FREE_SPACE_CHECK_EVERY);
        Ok(())
    }

    fn run<D: Read>(mut self, decoded: D) -> Result<Extracted, ExtractError> {
        let meter = Rc::new(Meter {
            total: Cell::new(0),
            cap: self.limits.max_unpacked_bytes,
            header_stop: Cell::new(u64::MAX),
            over_cap: Cell::new(false),
            over_header: Cell::new(false),
            eof: Cell::new(false),
        });
        let mut archive = tar::Archive::new(Metered {
            inner: decoded,
            meter: Rc::clone(&meter),
        });
        let mut entries = archive
            .entries()
            .map_err(|e| meter.classify(e, "cannot read the tar stream"))?;
        loop {
            meter
                .header_stop
                .set(meter.total.get().saturating_add(MAX_EXTENSION_BYTES + 1024));
            let next = entries.next();
            meter.header_stop.set(u64::MAX);
            let mut entry = match next {
                None => break,
                Some(Ok(entry)) => entry,
                Some(Err(e)) if self.headers == 0 => {
                    return Err(meter.classify(
                        e,
                        "not a tar archive (plain, gzip, zstd, xz or bzip2): its first header is unreadable",
                    ));
                }
                Some(Err(e)) => return Err(meter.classify(e, "cannot read a tar header")),
            };
            self.headers += 1;
            if self.headers > self.limits.max_entries {
                return Err(ExtractError::TooManyEntries {
                    limit: self.limits.max_entries,
                });
            }
            self.entry(&mut entry, &meter)?;
            // Read what the entry did not use (e.g. data attached to a directory header) so
            // that it is metered like everything else.
            io::copy(&mut entry, &mut io::sink())
                .map_err(|e| meter.classify(e, "cannot read the tar stream"))?;
        }
        if meter.eof.get() {
            return Err(ExtractError::Corrupt(
                "the archive is truncated: it ends without tar's end-of-archive marker".into(),
            ));
        }
        // Read to the end of the decompressed stream (tar's padding), so that gzip's CRC and
        // zstd's checksum are verified and the cap covers everything.
        io::copy(&mut archive.into_inner(), &mut io::sink())
            .map_err(|e| meter.classify(e, "after the end of the tar archive"))?;
        if let Some(writer) = self.writer.take() {
            let blobs = writer.finish()?;
            for (n, pending) in self.pending.iter().enumerate() {
                if let Some((dir, name, mode)) = pending {
                    let mut components = self.written.components(*dir);
                    components.push(name);
                    self.tree.insert_components(&components, *mode, blobs[n]);
                }
            }
        }
        let hashes = self.tree.finish_hashes();
        Ok(Extracted {
            tree_hash: hashes.sha1,
            tree_hash_sha256: hashes.sha256,
            unpacked_bytes: self.content_bytes,
            entries: self.entries,
        })
    }

    fn entry<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        meter: &Meter,
    ) -> Result<(), ExtractError> {
        let raw = entry.path_bytes().into_owned();
        let display = shown(&raw);
        let entry_type = entry.header().entry_type();
        if entry_type == EntryType::XGlobalHeader {
            return Ok(());
        }
        let components = safe_components(&raw).map_err(|reason| ExtractError::Unsafe {
            entry: display.clone(),
            reason: reason.into(),
        })?;
        let path = EntryPath {
            display,
            components,
        };
        if is_pax_sparse(entry) {
            return Err(path.unsafe_entry(
                "sparse files (pax GNU.sparse records) are not supported; repackage without \
                 --sparse",
            ));
        }
        // Without a sha256 only the tree hash vouches for the content: what it does not cover
        // (a `.git` folder, folders without hashed content) is not written at all. Its bytes
        // are still read and metered.
        if self.limits.only_hashed
            && (entry_type == EntryType::Directory || path.components.iter().any(|c| c == b".git"))
        {
            return Ok(());
        }
        if path.components.is_empty() {
            return if entry_type == EntryType::Directory {
                Ok(())
            } else {
                Err(path.unsafe_entry("the entry has an empty path"))
            };
        }
        match entry_type {
            EntryType::Regular | EntryType::Continuous => self.file(entry, &path, meter),
            EntryType::Directory => {
                let parent = self.parents(&path)?;
                self.directory(parent, &path, path.components.len())
                    .map(|_| ())
            }
            EntryType::Symlink => self.symlink(entry, &path),
            EntryType::Link => self.hardlink(entry, &path),
            EntryType::Char | EntryType::Block => {
                Err(path.unsafe_entry("device files are not allowed in an artifact"))
            }
            EntryType::Fifo => Err(path.unsafe_entry("fifos are not allowed in an artifact")),
            EntryType::GNUSparse => {
                Err(path.unsafe_entry("sparse files are not supported; repackage without --sparse"))
            }
            other => Err(path.unsafe_entry(format!(
                "unsupported tar entry type {:?}",
                other.as_byte() as char
            ))),
        }
    }

    /// Whether a mode given at creation may come out with fewer `permissions` (then it is set
    /// again): unless the umask is trusted and keeps all of them (see [`trusted_umask`]).
    fn masked(&self, permissions: u32) -> bool {
        self.umask.is_none_or(|m| m & permissions != 0)
    }

    fn disk_path(&self, key: &[u8]) -> PathBuf {
        self.dest.join(OsStr::from_bytes(key))
    }

    /// The handle of the folder holding the first `depth` components of `path` (created by
    /// this extraction) and the last component's name.
    fn parent_of(
        &mut self,
        path: &EntryPath,
        depth: usize,
    ) -> Result<(Arc<Dir>, OsString), ExtractError> {
        let (parent, name) = path.split(depth);
        let looked_up = self.dirs.get(parent);
        let dir = looked_up.map_err(|e| self.io_error(&path.joined(depth), e))?;
        Ok((dir, OsStr::from_bytes(name).to_os_string()))
    }

    fn io_error(&self, key: &[u8], source: io::Error) -> ExtractError {
        ExtractError::Io {
            path: self.disk_path(key),
            source,
        }
    }

    /// Makes sure every directory above the entry exists and was created by this extraction;
    /// returns the number of the one holding it.
    fn parents(&mut self, path: &EntryPath) -> Result<DirId, ExtractError> {
        let mut dir = ROOT;
        for depth in 1..path.components.len() {
            dir = self.directory(dir, path, depth)?;
        }
        Ok(dir)
    }

    /// Creates the directory made of the first `depth` components of `path` (if needed) in
    /// `parent` (the folder of the first `depth - 1`); returns its number.
    fn directory(
        &mut self,
        parent: DirId,
        path: &EntryPath,
        depth: usize,
    ) -> Result<DirId, ExtractError> {
        let name = &path.components[depth - 1];
        match self.written.get(parent, name) {
            Some(Written::Dir(id)) => Ok(*id),
            Some(Written::File { .. }) => Err(path.unsafe_entry(format!(
                "`{}` is a file extracted earlier in the archive, not a directory",
                shown(&path.joined(depth))
            ))),
            Some(Written::Symlink) => Err(path.unsafe_entry(format!(
                "`{}` is a symlink extracted earlier in the archive; refusing to write through it",
                shown(&path.joined(depth))
            ))),
            None => {
                self.charge(ENTRY_COST)?;
                let key = path.joined(depth);
                let (parent_fd, c_name) = self.parent_of(path, depth)?;
                let masked = self.masked(0o755);
                let create = || -> io::Result<Dir> {
                    let dir = parent_fd.create_dir_new(&c_name, 0o755)?;
                    if masked {
                        dir.set_mode(0o755)?;
                    }
                    Ok(dir)
                };
                let dir = create().map_err(|e| self.io_error(&key, e))?;
                self.dirs.insert(key, Arc::new(dir));
                Ok(self.written.add_dir(parent, name))
            }
        }
    }

    /// Frees the entry's own path for a new file or link: an earlier file or symlink there is
    /// unlinked (never opened), a directory is refused.
    fn replace(&mut self, path: &EntryPath, parent: DirId) -> Result<(), ExtractError> {
        let name = path.components.last().expect("entries have a name");
        match self.written.get(parent, name) {
            None => Ok(()),
            Some(Written::Dir(_)) => Err(path
                .unsafe_entry("a directory of the same name was extracted earlier in the archive")),
            Some(Written::File { .. } | Written::Symlink) => {
                if let Some(&Written::File {
                    blob: Blob::Pending(n),
                    ..
                }) = self.written.get(parent, name)
                {
                    self.pending[n] = None;
                    // The writer creates files: let it create this one before it is unlinked.
                    self.writer()?.wait(n)?;
                }
                // A later entry of this name wins: the earlier file is complete (waited for
                // above if it was pending) and is unlinked, never opened.
                let (parent_fd, c_name) = self.parent_of(path, path.components.len())?;
                parent_fd
                    .remove_file(&c_name)
                    .map_err(|e| self.io_error(&path.key(), e))?;
                self.written.remove(parent, name);
                Ok(())
            }
        }
    }

    /// Records a written file or symlink in the tree (unless it is inside `.git`); a pending
    /// blob goes into the tree when the writer is done.
    fn record(&mut self, path: &EntryPath, parent: DirId, written: Written, mode: EntryMode) {
        let in_git = path.components.iter().any(|c| c == b".git");
        let name = path.components.last().expect("entries have a name");
        match &written {
            Written::File {
                blob: Blob::Pending(n),
                ..
            } => {
                if !in_git {
                    self.pending[*n] = Some((parent, name.as_slice().into(), mode));
                }
            }
            Written::File {
                blob: Blob::Known(id),
                ..
            } if !in_git => {
                let components: Vec<&[u8]> = path.components.iter().map(Vec::as_slice).collect();
                self.tree.insert_components(&components, mode, *id);
            }
            Written::Symlink | Written::File { .. } | Written::Dir(_) => {}
        }
        self.written.set(parent, name, written);
        self.entries += 1;
    }

    /// The writer thread, started on the first file.
    fn writer(&mut self) -> Result<&mut BlobWriter, ExtractError> {
        if self.writer.is_none() {
            let formats = Formats::with_sha256(self.limits.tree_hash_sha256);
            let writer = BlobWriter::spawn(formats).map_err(|e| ExtractError::Io {
                path: self.dest.to_path_buf(),
                source: io::Error::new(e.kind(), format!("cannot start a writer thread: {e}")),
            })?;
            self.writer = Some(writer);
        }
        Ok(self.writer.as_mut().expect("just set"))
    }

    fn file<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        path: &EntryPath,
        meter: &Meter,
    ) -> Result<(), ExtractError> {
        let size = entry.size();
        if size > meter.remaining() {
            return Err(ExtractError::TooLarge { limit: meter.cap });
        }
        let header_mode = entry
            .header()
            .mode()
            .map_err(|e| ExtractError::Corrupt(format!("entry `{}`: {e}", path.display)))?;
        let mode = EntryMode::for_file_mode(header_mode);
        let permissions = mode.installed_permissions();

        self.charge(file_cost(size))?;
        let parent = self.parents(path)?;
        let key = path.key();
        self.replace(path, parent)?;
        // The writer thread creates the file, off the thread that decompresses.
        let (dir, name) = self.parent_of(path, path.components.len())?;
        let file = NewFile {
            dir,
            name,
            path: self.disk_path(&key),
            permissions,
            masked: self.masked(permissions),
        };
        // The next bytes of the entry into `buf`: how many there were before its end.
        let mut read = |buf: &mut [u8]| {
            read_full(entry, buf)
                .map_err(|e| meter.classify(e, &format!("inside `{}`", path.display)))
        };
        let truncated = |missing: u64| {
            ExtractError::Corrupt(format!(
                "the archive is truncated inside `{}` ({missing} of {size} bytes missing)",
                path.display
            ))
        };
        let n = if size <= BATCH_FILE_MAX {
            let len = size as usize;
            self.writer()?.small(file, len, |slot| match read(slot)? {
                filled if filled < len => Err(truncated((len - filled) as u64)),
                _ => Ok(()),
            })?
        } else {
            let n = self.writer()?.open(file, size)?;
            let mut left = size;
            while left > 0 {
                let mut buffer = self.writer()?.buffer();
                let want = (buffer.len() as u64).min(left) as usize;
                let filled = read(&mut buffer[..want])?;
                if filled == 0 {
                    return Err(truncated(left));
                }
                buffer.truncate(filled);
                self.writer()?.send(Job::Data(buffer))?;
                left -= filled as u64;
            }
            self.writer()?.send(Job::Close)?;
            n
        };
        self.pending.push(None);
        self.content_bytes += size;
        let blob = Blob::Pending(n);
        self.record(path, parent, Written::File { mode, blob }, mode);
        Ok(())
    }

    fn symlink<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        path: &EntryPath,
    ) -> Result<(), ExtractError> {
        let target = entry
            .link_name_bytes()
            .ok_or_else(|| path.unsafe_entry("the symlink has no target"))?
            .into_owned();
        check_symlink_target(&target, path.components.len() - 1)
            .map_err(|reason| path.unsafe_entry(reason))?;
        self.charge(ENTRY_COST)?;
        let parent = self.parents(path)?;
        let key = path.key();
        self.replace(path, parent)?;
        let (parent_fd, name) = self.parent_of(path, path.components.len())?;
        parent_fd
            .symlink(OsStr::from_bytes(&target), &name)
            .map_err(|e| self.io_error(&key, e))?;
        let id = blob_ids(&target, Formats::with_sha256(self.limits.tree_hash_sha256));
        if !path.components.iter().any(|c| c == b".git") {
            let components: Vec<&[u8]> = path.components.iter().map(Vec::as_slice).collect();
            self.tree
                .insert_components(&components, EntryMode::Symlink, id);
        }
        self.record(path, parent, Written::Symlink, EntryMode::Symlink);
        Ok(())
    }

    // Long: a hard link's rules (target inside the archive, mode, self link, copy with its
    // bytes counted) are checked in one place, in the order they apply.
    fn hardlink<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        path: &EntryPath,
    ) -> Result<(), ExtractError> {
        let raw = entry
            .link_name_bytes()
            .ok_or_else(|| path.unsafe_entry("the hardlink has no target"))?
            .into_owned();
        let target_display = shown(&raw);
        let target = safe_components(&raw).map_err(|reason| {
            path.unsafe_entry(format!(
                "hardlink to `{target_display}` outside the artifact: {reason}"
            ))
        })?;
        let target_key = target.join(&b'/');
        let same = target == path.components;
        // As Tar.jl: the link's own mode applies to its copy of the content (a 0o755 link to a
        // 0o644 file is an executable file with that content); the target keeps its mode.
        let link_mode = entry
            .header()
            .mode()
            .map(EntryMode::for_file_mode)
            .map_err(|e| ExtractError::Corrupt(format!("entry `{}`: {e}", path.display)))?;
        let (target_mode, blob) = match self.written.lookup(&target) {
            Some(Written::File { mode, blob }) => (*mode, *blob),
            _ => {
                return Err(path.unsafe_entry(format!(
                    "hardlink to `{target_display}`, which is not a regular file extracted \
                     earlier in this archive"
                )));
            }
        };
        let key = path.key();
        if same && link_mode == target_mode {
            return Ok(());
        }
        // The target must be complete on disk before it is linked, copied or changed.
        let blob = match blob {
            Blob::Known(id) => id,
            Blob::Pending(n) => {
                if same {
                    // Recorded below with the link's mode instead of when the writer is done.
                    self.pending[n] = None;
                }
                self.writer()?.wait(n)?
            }
        };
        if same {
            // A link to itself (Tar.jl's "self hardlink"): the same file, with the link's mode.
            let parent = self.parents(path)?;
            let (parent_fd, name) = self.parent_of(path, path.components.len())?;
            let chmod = || -> io::Result<()> {
                let file = open_file(&parent_fd, &name)?;
                file.set_permissions(fs::Permissions::from_mode(
                    link_mode.installed_permissions(),
                ))
            };
            chmod().map_err(|e| self.io_error(&key, e))?;
            let written = Written::File {
                mode: link_mode,
                blob: Blob::Known(blob),
            };
            self.record(path, parent, written, link_mode);
            return Ok(());
        }
        let parent = self.parents(path)?;
        self.replace(path, parent)?;
        let target_path = EntryPath {
            display: target_display,
            components: target,
        };
        let (from_dir, from_name) = self.parent_of(&target_path, target_path.components.len())?;
        let (to_dir, to_name) = self.parent_of(path, path.components.len())?;
        let mode = link_mode;
        // Same mode: one inode (read-only, so sharing it is safe). Another mode, or a
        // filesystem that refuses hard links: a copy.
        let linked =
            mode == target_mode && from_dir.hard_link(&from_name, &to_dir, &to_name).is_ok();
        if !linked {
            // Copy, counting the bytes against the cap and the free-space reserve.
            let mut from =
                open_file(&from_dir, &from_name).map_err(|e| self.io_error(&target_key, e))?;
            let size = from
                .metadata()
                .map_err(|e| self.io_error(&target_key, e))?
                .len();
            if self.content_bytes.saturating_add(size) > self.limits.max_unpacked_bytes {
                return Err(ExtractError::TooLarge {
                    limit: self.limits.max_unpacked_bytes,
                });
            }
            self.charge(file_cost(size))?;
            let permissions = mode.installed_permissions();
            let masked = self.masked(permissions);
            let mut copy = || -> io::Result<()> {
                let mut to = create_file_at(&to_dir, &to_name, permissions, masked)?;
                // Bounded by the size counted above, whatever the file became meanwhile.
                io::copy(&mut (&mut from).take(size), &mut to)?;
                Ok(())
            };
            copy().map_err(|e| self.io_error(&key, e))?;
            self.content_bytes += size;
        }
        let blob = Blob::Known(blob);
        self.record(path, parent, Written::File { mode, blob }, mode);
        Ok(())
    }
}

impl NewFile {
    fn create(&self) -> io::Result<File> {
        create_file_at(&self.dir, &self.name, self.permissions, self.masked)
    }
}

/// Creates the new regular file `name` in `dir`, never following a symlink and never reusing
/// an existing file. `masked`: the umask removes some of `permissions`, which are then set
/// again.
fn create_file_at(dir: &Dir, name: &OsStr, permissions: u32, masked: bool) -> io::Result<File> {
    let file = dir.create_new(name, permissions)?;
    // The umask may have removed bits we promise (e.g. 0o444 under umask 0o277).
    if masked {
        file.set_permissions(fs::Permissions::from_mode(permissions))?;
    }
    Ok(file)
}

/// Opens the regular file `name` of `dir` for reading (never through a symlink, never a
/// fifo); a missing file is an error.
fn open_file(dir: &Dir, name: &OsStr) -> io::Result<File> {
    dir.open_file(name)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "`{}` was removed while the extraction ran",
                dir.path().join(name).display()
            ),
        )
    })
}

/// The umask to go by when deciding whether a mode given at creation is final: `None` (set
/// every mode again) unless the umask is known and nothing else shapes the modes of new files
/// and folders in `dest`: a default POSIX ACL there replaces the umask (e.g. `d:o::---` makes
/// 0o444 come out 0o440), and a setgid folder passes its setgid bit on to new subfolders.
/// Both are common on shared project folders.
fn trusted_umask(dest: BorrowedFd<'_>) -> Option<u32> {
    let umask = current_umask()?;
    let meta = File::from(dest.try_clone_to_owned().ok()?)
        .metadata()
        .ok()?;
    if meta.permissions().mode() & 0o2000 != 0 || has_default_acl(dest) {
        return None;
    }
    Some(umask)
}

/// Whether `dir` carries a default POSIX ACL (true when that cannot be told).
#[cfg(target_os = "linux")]
fn has_default_acl(dir: BorrowedFd<'_>) -> bool {
    // SAFETY: the name is NUL-terminated, `dir` is live; a null buffer of size 0 only asks
    // for the value's size.
    let n = unsafe {
        libc::fgetxattr(
            dir.as_raw_fd(),
            c"system.posix_acl_default".as_ptr(),
            std::ptr::null_mut(),
            0,
        )
    };
    if n >= 0 {
        return true;
    }
    let err = io::Error::last_os_error().raw_os_error();
    !matches!(err, Some(libc::ENODATA) | Some(libc::EOPNOTSUPP))
}

#[cfg(not(target_os = "linux"))]
fn has_default_acl(_dir: BorrowedFd<'_>) -> bool {
    true
}

/// The process's umask, read without changing it (Linux's `/proc/self/status`; `umask(2)`
/// can only be read by setting it, which would race with other threads creating files).
/// `None` where it cannot be read: then every mode is set again after creation. Read once per
/// extraction: a program that tightens its umask while an install runs may get files with
/// fewer permission bits than promised (never more).
fn current_umask() -> Option<u32> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let value = status.lines().find_map(|l| l.strip_prefix("Umask:"))?;
    u32::from_str_radix(value.trim(), 8).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::tree_hash::tree_hash;

    fn limits() -> ExtractLimits {
        ExtractLimits {
            max_unpacked_bytes: 1 << 30,
            ..ExtractLimits::default()
        }
    }

    /// A tar with a GNU long name, a long symlink target, a pax path and an executable.
    fn sample_tar() -> (Vec<u8>, String, String) {
        let long_dir = "d".repeat(120);
        let long_name = format!("{long_dir}/{}", "f".repeat(150));
        let pax_name = format!("pax/{}", "p".repeat(180));
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_mode(0o755);
        header.set_size(5);
        builder
            .append_data(&mut header, &long_name, &b"hello"[..])
            .unwrap();
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(EntryType::Symlink);
        header.set_size(0);
        builder
            .append_link(
                &mut header,
                "long-link",
                format!("{long_dir}/{}", "f".repeat(150)),
            )
            .unwrap();
        // pax: an `x` header whose `path` record names the next entry.
        let record = format!("path={pax_name}\n");
        let mut len = record.len() + 4;
        if format!("{len} {record}").len() != len {
            len += 1;
        }
        let pax = format!("{len} {record}");
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(EntryType::XHeader);
        header.set_path("PaxHeader").unwrap();
        header.set_size(pax.len() as u64);
        header.set_cksum();
        builder.append(&header, pax.as_bytes()).unwrap();
        let mut header = tar::Header::new_ustar();
        header.set_path("short").unwrap();
        header.set_mode(0o644);
        header.set_size(3);
        header.set_cksum();
        builder.append(&header, &b"pax"[..]).unwrap();
        (builder.into_inner().unwrap(), long_name, pax_name)
    }

    #[test]
    fn long_names_pax_paths_and_every_compression_round_trip() {
        let (tar, long_name, pax_name) = sample_tar();
        let gz = {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&tar).unwrap();
            e.finish().unwrap()
        };
        let zst = zstd::encode_all(tar.as_slice(), 3).unwrap();
        let mut hashes = Vec::new();
        for bytes in [&tar, &gz, &zst] {
            let dest = tempfile::tempdir().unwrap();
            let got = extract_archive(bytes.as_slice(), dest.path(), &limits()).unwrap();
            assert_eq!(got.tree_hash, tree_hash(dest.path()).unwrap());
            assert_eq!(got.entries, 3);
            assert_eq!(got.unpacked_bytes, 8);
            assert_eq!(fs::read(dest.path().join(&long_name)).unwrap(), b"hello");
            assert_eq!(fs::read(dest.path().join(&pax_name)).unwrap(), b"pax");
            assert!(!dest.path().join("short").exists());
            let link = fs::read_link(dest.path().join("long-link")).unwrap();
            assert_eq!(fs::read(dest.path().join(link)).unwrap(), b"hello");
            hashes.push(got.tree_hash);
        }
        assert!(hashes.windows(2).all(|w| w[0] == w[1]));
    }

    #[test]
    fn dot_git_entries_are_written_but_not_hashed() {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, data) in [("a", &b"a"[..]), (".git/config", b"x"), ("s/.git", b"y")] {
            let mut header = tar::Header::new_gnu();
            header.set_mode(0o644);
            header.set_size(data.len() as u64);
            builder.append_data(&mut header, path, data).unwrap();
        }
        let tar = builder.into_inner().unwrap();
        let dest = tempfile::tempdir().unwrap();
        let got = extract_archive(tar.as_slice(), dest.path(), &limits()).unwrap();
        assert!(dest.path().join(".git/config").exists());
        assert_eq!(got.tree_hash, tree_hash(dest.path()).unwrap());
        let mut only_a = TreeBuilder::new();
        only_a.insert("a", EntryMode::File, crate::tree_hash::blob_id(b"a"));
        assert_eq!(got.tree_hash, only_a.finish());
    }

    #[test]
    fn components_are_checked() {
        assert_eq!(
            safe_components(b"./a//b/./c").unwrap(),
            vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]
        );
        assert!(safe_components(b"/etc/passwd").is_err());
        assert!(safe_components(b"a/../../b").is_err());
        assert!(safe_components(b"a\0b").is_err());
        assert!(safe_components(b"./").unwrap().is_empty());
    }

    #[test]
    fn symlink_targets_stay_inside() {
        assert!(check_symlink_target(b"b", 0).is_ok());
        assert!(check_symlink_target(b"./x/y", 0).is_ok());
        assert!(check_symlink_target(b"../x", 1).is_ok());
        assert!(check_symlink_target(b"../x", 0).is_err());
        assert!(check_symlink_target(b"../../x", 1).is_err());
        assert!(check_symlink_target(b"x/../y", 3).is_err());
        assert!(check_symlink_target(b"/etc", 3).is_err());
        assert!(check_symlink_target(b"", 3).is_err());
    }
}
