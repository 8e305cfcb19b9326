//! Safe tar extraction that hashes every blob while writing it (specified in full by the
//! storage helper).

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::GitTreeSha1;

/// Limits applied while extracting.
#[derive(Debug, Clone)]
pub struct ExtractLimits {
    /// Maximum total bytes of file content written (decompression-bomb cap).
    pub max_unpacked_bytes: u64,
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
        "archive unpacks to more than {limit} bytes; raise CLIMA_ARTIFACTS_MAX_UNPACKED_BYTES if this artifact is really that large"
    )]
    TooLarge {
        /// The cap in bytes.
        limit: u64,
    },
    /// Not a (complete) tar archive, or a compression error.
    #[error("not a valid archive: {0}")]
    Corrupt(String),
    /// Writing into the destination failed.
    #[error("cannot write `{path}`: {source}")]
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
    /// Total bytes of file content written.
    pub unpacked_bytes: u64,
    /// Number of files and symlinks written.
    pub entries: u64,
}

/// Detects the compression (gzip, zstd, xz if available, or plain tar) by magic bytes, then
/// extracts the tar stream into `dest` (an existing, empty directory), hashing as it writes.
/// The caller must drain `reader` afterwards if it needs a digest of every byte.
pub fn extract_archive<R: Read>(
    reader: R,
    dest: &Path,
    limits: &ExtractLimits,
) -> Result<Extracted, ExtractError> {
    todo!("storage helper {} {limits:?}", dest.display())
}
