//! Run sync's notices, each with the line the user reads ([`SyncEvent`]: files not synced or
//! not restored, slow syncs, cleanups), and the reasons they give, as values to match on.
//! They implement the progress crate's [`Event`] and are sent to the process's reporter with
//! [`emit`](clima_artifact_progress::Reporting::emit); the progress crate knows none of them.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clima_artifact_fs::{human_bytes, printable};
use clima_artifact_progress::notice::{Event, Level};
use clima_artifact_vars::{SYNC_ARTIFACTS, SYNC_EXCLUDE, SYNC_WARN_AFTER};

#[cfg(test)]
mod tests;

/// The notices of run sync: skipped files, slow syncs, files not restored, cleanups.
///
/// New kinds of notices are added as the work grows: match with a `_` arm.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SyncEvent {
    /// Info: upload temp files of killed syncs were removed.
    UploadTempsRemoved {
        /// How many.
        count: u64,
        /// In this folder.
        dir: PathBuf,
    },
    /// Warning: a sync took longer than `after`.
    SlowSync {
        /// What synced (`the sync of outputs to ...`).
        what: String,
        /// How long it has taken.
        took: Duration,
        /// The limit (`slow_warning_after`).
        after: Duration,
        /// The biggest files and their sizes.
        biggest: Vec<(String, u64)>,
    },
    /// Warning: a file is not synced (`why`: it vanished, its name is not UTF-8).
    NotSynced {
        /// The file (relative to the run folder, or its full path).
        path: PathBuf,
        /// Why.
        why: NotSyncedReason,
    },
    /// Warning: a file is not restored (`why`), from the storage at `from` when named.
    NotRestored {
        /// The file.
        path: PathBuf,
        /// The storage's URL, when the reason is about its copy.
        from: Option<String>,
        /// Why.
        why: NotRestoredReason,
    },
}

impl Event for SyncEvent {
    fn level(&self) -> Level {
        use SyncEvent::*;
        match self {
            UploadTempsRemoved { .. } => Level::Info,
            SlowSync { .. } | NotSynced { .. } | NotRestored { .. } => Level::Warning,
        }
    }
}

impl fmt::Display for SyncEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use SyncEvent::*;
        match self {
            UploadTempsRemoved { count, dir } => write!(
                f,
                "removed {count} upload temp file(s) of killed syncs in `{}`",
                dir.display()
            ),
            SlowSync {
                what,
                took,
                after,
                biggest,
            } => {
                let biggest = biggest
                    .iter()
                    .map(|(file, n)| format!("`{file}` ({})", human_bytes(*n)))
                    .collect::<Vec<_>>()
                    .join(", ");
                write!(
                    f,
                    "{what} has taken {:.1} s (more than the {:.1} s set by slow_warning_after \
                     / {SYNC_WARN_AFTER}); the biggest files are {biggest}. If another \
                     component already uploads them, add exclude globs for them \
                     ({SYNC_EXCLUDE}), or turn sync_artifacts off ({SYNC_ARTIFACTS}=0) to move \
                     only checkpoints",
                    took.as_secs_f64(),
                    after.as_secs_f64()
                )
            }
            NotSynced { path, why } => {
                write!(
                    f,
                    "not syncing `{}`: {why}",
                    printable(&path.to_string_lossy())
                )
            }
            NotRestored {
                path,
                from: None,
                why,
            } => write!(
                f,
                "not restoring `{}`: {why}",
                printable(&path.to_string_lossy())
            ),
            NotRestored {
                path,
                from: Some(url),
                why,
            } => write!(
                f,
                "not restoring `{}` from `{}`: {why}",
                printable(&path.to_string_lossy()),
                printable(url)
            ),
        }
    }
}

/// Why a file is not synced ([`SyncEvent::NotSynced`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotSyncedReason {
    /// Its name is not UTF-8 (storage keys are).
    NameNotUtf8,
    /// It was deleted between the listing of its folder and its inspection.
    VanishedWhileListing,
    /// It was deleted before it was hashed or uploaded.
    VanishedDuringSync,
}

impl fmt::Display for NotSyncedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NotSyncedReason::NameNotUtf8 => "its name is not UTF-8; rename it to sync it",
            NotSyncedReason::VanishedWhileListing => "it vanished while listing",
            NotSyncedReason::VanishedDuringSync => "it vanished during the sync",
        })
    }
}

/// Why a file is not restored ([`SyncEvent::NotRestored`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotRestoredReason {
    /// The local file is newer than the stored copy: it is kept as it is (and pushed at the
    /// next sync).
    LocalNewer {
        /// The storage's URL.
        storage: String,
    },
    /// The stored copy's content is not what the sync index records (changed, or only half
    /// uploaded).
    ContentMismatch {
        /// The SHA-256 of what was fetched, hex.
        sha256: String,
        /// The SHA-256 the index records (escaped by the display: the index is the storage's).
        recorded: String,
    },
    /// The stored object was refused before it was used (not a regular file, below something
    /// that is not a folder, larger than the index records): the storage error's message.
    Refused(String),
}

impl fmt::Display for NotRestoredReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotRestoredReason::LocalNewer { storage } => write!(
                f,
                "the local file is newer than the stored copy in `{storage}`; kept as it is"
            ),
            NotRestoredReason::ContentMismatch { sha256, recorded } => write!(
                f,
                "its content (sha256 {sha256}) is not what the sync index records ({}); it was \
                 changed or only half uploaded",
                printable(recorded)
            ),
            NotRestoredReason::Refused(error) => f.write_str(error),
        }
    }
}
