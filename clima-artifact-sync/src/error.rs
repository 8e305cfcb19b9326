//! The run-sync error type. Every message says what to do next, and every error can travel
//! between MPI ranks ([`clima_comms::WireError`]), so all ranks of a collective sync report the
//! same failure.

use std::path::PathBuf;

use clima_artifact_fs::{IoCause, printable};
use clima_comms::{CollectiveError, WireError};

/// Everything that can go wrong in a run sync, a restore or a storage operation.
#[derive(Clone, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum SyncError {
    /// An environment variable has a value that cannot be used.
    #[error("environment variable {variable}=`{value}` is invalid: {reason}")]
    Config {
        /// The variable, e.g. `CLIMA_SYNC_WARN_AFTER`.
        variable: String,
        /// Its value.
        value: String,
        /// What is wrong and what is expected.
        reason: String,
    },
    /// An exclude pattern is not a valid glob.
    #[error(
        "sync exclude pattern `{pattern}` is not a valid glob: {reason}; write e.g. `*.nc` or `diag/**/*.png`"
    )]
    BadExclude {
        /// The pattern as given.
        pattern: String,
        /// What the glob parser said.
        reason: String,
    },
    /// A file-system operation failed.
    #[error("cannot {action} `{}`: {cause}", path.display())]
    Io {
        /// What was attempted, e.g. `create folder`.
        action: String,
        /// The path concerned.
        path: PathBuf,
        /// The cause.
        #[source]
        cause: IoCause,
    },
    /// A storage URL or path cannot be used.
    #[error("storage `{url}` cannot be used: {reason}")]
    BadStorage {
        /// The URL or path as given.
        url: String,
        /// Why, and what to give instead.
        reason: String,
    },
    /// A storage key is not a clean relative path.
    #[error(
        "`{}` is not a valid storage key: keys are relative paths like `a/b.txt` without `.`/`..` segments, empty segments, backslashes or NUL",
        printable(key)
    )]
    BadKey {
        /// The key.
        key: String,
    },
    /// A storage operation failed (network, permissions, a missing bucket...).
    #[error(
        "cannot {action} `{}` in storage `{storage}`: {reason}; check that the storage is reachable and writable (for S3: AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION)",
        printable(key)
    )]
    Storage {
        /// The storage URL.
        storage: String,
        /// What was attempted, e.g. `upload`.
        action: String,
        /// The key concerned.
        key: String,
        /// The backend's error.
        reason: String,
    },
    /// A sync manifest (`.clima-sync/index.json`) cannot be read.
    #[error(
        "the sync manifest {origin} is not valid ({reason}); if it is damaged, delete it: the next sync re-hashes every file and re-sends the ones that differ"
    )]
    BadIndex {
        /// Where it came from, e.g. "in `s3://b/run7`".
        origin: String,
        /// The parser's error, or the bad entry.
        reason: String,
    },
    /// A sync manifest of another format version than this build reads (written by a newer
    /// clima-artifacts): not damaged, so it is neither used nor to be deleted.
    #[error(
        "the sync manifest {origin} is of format version {version}, which this build does not read (it reads version {supported}): it was written by a newer clima-artifacts; sync this run folder with that version (keep the manifest: it records what is stored)"
    )]
    IndexVersion {
        /// Where it came from, e.g. "in `s3://b/run7`".
        origin: String,
        /// The version it says it is.
        version: u32,
        /// The version this build reads and writes.
        supported: u32,
    },
    /// The checkpoint folder passed to `on_checkpoint` is not inside the run folder.
    #[error(
        "checkpoint folder `{}` is not a folder inside the synced run folder `{}`; write checkpoints below the run folder",
        checkpoint.display(),
        run_dir.display()
    )]
    CheckpointOutsideRun {
        /// The folder given.
        checkpoint: PathBuf,
        /// The run folder.
        run_dir: PathBuf,
    },
    /// Restoring a file is blocked by something that is not a file.
    #[error(
        "cannot restore `{}`: something that is not a file is in the way; move it away and restore again",
        printable(&path.to_string_lossy())
    )]
    InTheWay {
        /// The path in the run folder.
        path: PathBuf,
    },
    /// A stored object is not a regular file (a symlink, fifo or device planted in a shared
    /// store): it is never read; restores skip it with a warning.
    #[error(
        "`{}` in `{url}` is {what}, not a regular file; it was not read (someone who can write to the storage may have planted it): remove it",
        printable(key)
    )]
    NotARegularFile {
        /// The storage URL.
        url: String,
        /// The object's key.
        key: String,
        /// What it is instead.
        what: String,
    },
    /// A folder on the way to a key of a folder store is not a folder (a symlink, file or
    /// special file planted by someone who can write to the store): nothing is read or written
    /// through it, so a planted link cannot make a push, publish or pull reach outside the
    /// store. Restores skip the files below it with a warning.
    #[error(
        "`{}` in storage `{url}` is {what}, not a folder; nothing is read or written through it (someone who can write to the storage may have planted it): remove it, or replace it with a real folder",
        printable(&path.to_string_lossy())
    )]
    NotAFolder {
        /// The storage URL.
        url: String,
        /// The offending path (the store's root joined with the key's folders up to it).
        path: PathBuf,
        /// What it is instead, e.g. "a symlink".
        what: String,
    },
    /// A small object read whole (the sync manifest) is larger than anything it can be.
    #[error(
        "`{key}` in `{url}` is larger than {max_text}, more than a sync manifest can be; reading stopped there and it was not used (someone who can write to the storage may have replaced it): remove it, and the next push writes a new one"
    )]
    TooLarge {
        /// The storage URL.
        url: String,
        /// The object's key.
        key: String,
        /// The bound, in bytes.
        max: u64,
        /// The bound, for people (e.g. "64.0 MiB").
        max_text: String,
    },
    /// A stored object is larger than the index records: reading stopped one byte past it.
    #[error(
        "`{}` in `{url}` is larger than the {max} bytes the sync index records; reading stopped there",
        printable(key)
    )]
    LargerThanRecorded {
        /// The storage URL.
        url: String,
        /// The object's key.
        key: String,
        /// The size the index records.
        max: u64,
    },
    /// A sync failed on another rank (per-rank mode); every rank reports it.
    #[error("run sync failed on rank {rank} of {context}: {message}")]
    OnRank {
        /// The failing rank.
        rank: usize,
        /// The context's description.
        context: String,
        /// That rank's error.
        message: String,
    },
    /// The sync code panicked (a bug).
    #[error("run sync panicked: {message}; this is a bug, please report it")]
    Panicked {
        /// The panic message.
        message: String,
    },
    /// The collective step itself failed (an undecodable answer, a panicking root).
    #[error(transparent)]
    Collective(#[from] CollectiveError),
}

impl SyncError {
    /// An [`SyncError::Io`] for `action` on `path`.
    pub fn io(action: impl Into<String>, path: impl Into<PathBuf>, e: std::io::Error) -> SyncError {
        SyncError::Io {
            action: action.into(),
            path: path.into(),
            cause: IoCause::new(e),
        }
    }

    /// The kind of the underlying I/O error, if this is a local I/O failure.
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            SyncError::Io { cause, .. } => Some(cause.kind()),
            _ => None,
        }
    }
}

/// `Debug` prints exactly the readable message of `Display` (what `fn main() -> Result<..>`
/// shows): the message already holds its cause's text, which is also `source()`.
impl std::fmt::Debug for SyncError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl WireError for SyncError {
    fn to_wire(&self) -> Vec<u8> {
        clima_comms::json_to_wire(self)
    }

    fn from_wire(bytes: &[u8]) -> SyncError {
        clima_comms::json_from_wire(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_round_trip_and_debug_reads_like_display() {
        let samples = [
            SyncError::io("open", "/run/x", std::io::Error::from_raw_os_error(2)),
            SyncError::BadKey { key: "../x".into() },
            SyncError::OnRank {
                rank: 3,
                context: "MPI_COMM_WORLD (4 ranks)".into(),
                message: "disk full".into(),
            },
        ];
        for e in samples {
            let back = SyncError::from_wire(&e.to_wire());
            assert_eq!(back.to_string(), e.to_string());
            assert_eq!(back.io_kind(), e.io_kind());
            assert!(format!("{e:?}").starts_with(&e.to_string()));
        }
        let garbled = SyncError::from_wire(b"\xffnope");
        assert!(
            garbled.to_string().contains("could not be decoded"),
            "{garbled}"
        );
    }
}
