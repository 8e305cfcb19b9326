//! Seekable tarballs (the format is `docs/seekable.md` of the repository):
//! a `.tar.gz` (`.tar.zst`) of independent members, one or more per file, with an index that
//! locates every file's bytes, carried where no tar reader sees it (gzip `FEXTRA` fields of
//! empty members, zstd skippable frames).
//!
//! | where | what |
//! |---|---|
//! | [`format`](mod@format) | the bytes: members ([`MemberEncoder`], [`decode_member`]), tar headers ([`tar_header`]), the index document ([`Index`]), the locator footer ([`Locator`]), the tail after the entries ([`write_tail`]) |
//! | `auth` (private) | [`authenticate`]: hash, bounds, structure and tree checks, giving an [`Authenticated`] index |
//! | `member` (private) | [`Authenticated::copy_entry`], [`Authenticated::verify_file`]: a member's bytes checked against the authenticated index |
//! | [`remote`] | some files of a tarball that is not here, by byte ranges: [`remote::remote_index`], [`Authenticated::select`], [`Authenticated::spans`], [`remote::SpanReader`] |
//! | [`parallel`] | [`extract_parallel`]: an authenticated tarball unpacked into a folder by several workers (threads, files, folders); [`extract_parallel_stream`]: the same from a tarball still arriving |
//!
//! Nothing an index says is trusted before [`authenticate`] accepted it: the only way to an
//! index's entries is an [`Authenticated`] value. `format`, `auth` and `member` are pure and
//! bounded: their only I/O is reading from a reader given by the caller ([`read_index`]) or
//! writing to a writer; [`parallel`] alone creates files and folders and starts threads.

mod auth;
pub mod format;
mod member;
pub mod parallel;
pub mod remote;

pub use auth::{Authenticated, Expected, authenticate};
pub use format::{
    Block, Flavour, HeaderKind, Index, IndexEntry, Locator, MemberEncoder, decode_member,
    read_index, stored_index, tar_header, write_tail,
};
pub use parallel::{
    MAX_THREADS, Parallelism, extract_parallel, extract_parallel_at, extract_parallel_stream,
};

use clima_artifact_fs::printable;

/// Default block size: files larger than this are cut into members of this many bytes.
pub const DEFAULT_BLOCK_SIZE: u64 = 4 << 20;
/// Smallest block size an index may declare.
pub const MIN_BLOCK_SIZE: u64 = 1 << 20;
/// Largest block size an index may declare.
pub const MAX_BLOCK_SIZE: u64 = 16 << 20;
/// Largest index document (decompressed).
pub const MAX_INDEX_BYTES: u64 = 256 << 20;
/// Longest path (and symlink target) of an entry, in bytes.
pub const MAX_PATH: usize = 4096;
/// Longest component of a path, in bytes.
pub const MAX_NAME: usize = 255;
/// Longest run of tar headers before an entry's content (long-name headers included).
pub const MAX_HEADER: u32 = 16 << 10;
/// Largest end-of-archive member (1024 zero bytes compress to a few dozen).
pub const MAX_EOA_MEMBER: u64 = 1024;

/// The bounds of reading an index: what a hostile file cannot make us allocate or accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexLimits {
    /// Largest decompressed index document ([`MAX_INDEX_BYTES`] by default).
    pub max_index_bytes: u64,
    /// Most entries (the extraction's [`crate::DEFAULT_MAX_ENTRIES`] by default).
    pub max_entries: u64,
}

impl Default for IndexLimits {
    fn default() -> IndexLimits {
        IndexLimits {
            max_index_bytes: MAX_INDEX_BYTES,
            max_entries: crate::DEFAULT_MAX_ENTRIES,
        }
    }
}

/// The most a member of `len` uncompressed bytes may take compressed: compression never grows
/// data by more than this (deflate's stored blocks, zstd's raw blocks, headers and trailers).
pub fn max_compressed_len(len: u64) -> u64 {
    len.saturating_add(len / 1024).saturating_add(1024)
}

/// Why a seekable tarball's index or a member was refused. Each names what it is about; entry
/// paths are printed escaped.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IndexError {
    /// The footer is ours but says something impossible.
    #[error("the index locator at the end of the file is invalid: {0}")]
    Locator(String),
    /// The index is larger than the file, or than the limit.
    #[error("the index is too large: {0}")]
    TooLarge(String),
    /// The index's SHA-256 differs from the download entry's `index-sha256`.
    #[error(
        "the index's SHA-256 is {actual}, the download entry's `index-sha256` is {expected}: \
         the index is not the one the manifest was made with"
    )]
    Hash {
        /// From the manifest.
        expected: String,
        /// Of the index read.
        actual: String,
    },
    /// The index document cannot be decoded.
    #[error("the index is malformed at byte {at}: {reason}")]
    Malformed {
        /// Offset in the decompressed document.
        at: u64,
        /// What is wrong.
        reason: String,
    },
    /// An entry's path is not allowed, out of order, or duplicated.
    #[error("index entry `{path}`: {reason}")]
    Path {
        /// The entry's path, escaped.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// An entry's offsets or sizes do not fit the file or its neighbours.
    #[error("index entry `{path}`: {reason}")]
    Layout {
        /// The entry's path, escaped (or a description of the position).
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The tree built from the index differs from the manifest's.
    #[error(
        "the index describes tree {actual}, the manifest's `{key}` is {expected}: the index lies \
         about a path, mode or blob"
    )]
    Tree {
        /// `git-tree-sha1` or `git-tree-sha256`.
        key: &'static str,
        /// From the manifest.
        expected: String,
        /// Built from the index.
        actual: String,
    },
    /// The manifest has a `git-tree-sha256` but the index has no SHA-256 blob ids.
    #[error(
        "the manifest entry has a `git-tree-sha256` but the index carries no SHA-256 blob ids, \
         so it cannot be checked against it"
    )]
    NoSha256Ids,
    /// A member does not hold what the authenticated index says.
    #[error("entry `{path}`, member at byte {offset} of the file: {reason}")]
    Member {
        /// The entry's path, escaped.
        path: String,
        /// The member's offset in the file.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// Reading the file failed.
    #[error("cannot read the tarball: {0}")]
    Io(String),
}

/// A path as it may be printed: lossy UTF-8, control characters escaped.
pub(crate) fn shown(path: &[u8]) -> String {
    printable(&String::from_utf8_lossy(path)).into_owned()
}

#[cfg(test)]
mod tests;
