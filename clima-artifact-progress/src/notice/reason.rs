//! Why a notice was given, as values a program can `match` on: the reasons of the [`Event`]s
//! whose causes form a small known set (a kept partial download that is unusable, a range
//! request answered in a way that leaves one stream, a file not synced).
//!
//! Each reason's `Display` is the words the notice's line has for it, so that
//! [`Event`]'s `Display` is the line users read. A reason that is really a failure of the
//! system (a file that cannot be opened) carries it as a [`SystemError`]: its
//! [`io::ErrorKind`] to match on, its message to show.
//!
//! [`Event`]: super::Event

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use clima_artifact_fs::{ForeignLink, printable};

/// A failure of the system, as a notice carries it: its kind, and its message (the error's
/// `Display`, often naming the file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemError {
    /// The error's kind (`NotFound`, `PermissionDenied`, ...).
    pub kind: io::ErrorKind,
    /// The error's message, as printed.
    pub message: String,
}

impl SystemError {
    /// A failure of `kind` saying `message`.
    pub fn new(kind: io::ErrorKind, message: impl Into<String>) -> SystemError {
        SystemError {
            kind,
            message: message.into(),
        }
    }
}

impl From<&io::Error> for SystemError {
    fn from(e: &io::Error) -> SystemError {
        SystemError::new(e.kind(), e.to_string())
    }
}

impl From<io::Error> for SystemError {
    fn from(e: io::Error) -> SystemError {
        SystemError::from(&e)
    }
}

impl fmt::Display for SystemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// What was found where a regular file belongs (something planted by someone with write
/// access to the depot, say).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Planted {
    /// A symbolic link (never followed).
    Symlink,
    /// A folder.
    Folder,
    /// A fifo, socket or device.
    SpecialFile,
}

impl fmt::Display for Planted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Planted::Symlink => "a symlink",
            Planted::Folder => "a folder",
            Planted::SpecialFile => "a special file",
        })
    }
}

/// Why a lock file cannot be used ([`Event::LockFileUnusable`](super::Event::LockFileUnusable)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockFileReason {
    /// The folder of the lock file cannot be created.
    CannotCreateFolder {
        /// The folder.
        folder: PathBuf,
        /// The system's error.
        error: SystemError,
    },
    /// The lock file cannot be opened (nor created).
    CannotOpen {
        /// The lock file.
        path: PathBuf,
        /// The system's error (of opening it for writing).
        error: SystemError,
    },
    /// The opened lock file cannot be inspected.
    CannotInspect {
        /// The lock file.
        path: PathBuf,
        /// The system's error.
        error: SystemError,
    },
    /// Something other than a regular file is at the lock file's place: left alone, not
    /// followed.
    Planted {
        /// The lock file's path.
        path: PathBuf,
        /// What is there.
        what: Planted,
    },
}

impl fmt::Display for LockFileReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockFileReason::CannotCreateFolder { folder, error } => write!(
                f,
                "cannot create lock folder `{}`: {error}",
                folder.display()
            ),
            LockFileReason::CannotOpen { path, error } => {
                write!(f, "cannot open lock file `{}`: {error}", path.display())
            }
            LockFileReason::CannotInspect { path, error } => {
                write!(f, "cannot inspect lock file `{}`: {error}", path.display())
            }
            LockFileReason::Planted { path, what } => {
                let what = match what {
                    Planted::SpecialFile => "a special file (fifo, socket or device)".to_owned(),
                    what => what.to_string(),
                };
                write!(
                    f,
                    "the lock file `{}` is {what}, not a regular file (planted by someone with \
                     write access to the depot?); it is left alone and not followed: remove it",
                    path.display()
                )
            }
        }
    }
}

/// Why a pidfile of Julia's cannot be used ([`Event::JuliaLockUnusable`](super::Event::JuliaLockUnusable),
/// [`UsageLogUnlockedReason::Pidfile`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PidfileReason {
    /// The folders Julia's install lock of an artifact lives in (the depot's `artifacts`
    /// folder and the folder of its temp files) cannot be created or opened.
    CannotTakeInstallLock {
        /// The pidfile.
        path: PathBuf,
        /// The system's error (escaped by the display).
        error: SystemError,
    },
    /// The pidfile (or the folder of a usage log's) cannot be created or opened.
    CannotTake {
        /// The pidfile.
        path: PathBuf,
        /// The system's error (escaped by the display).
        error: SystemError,
    },
    /// The pidfile kept being replaced while it was tried.
    KeepsChanging {
        /// The pidfile.
        path: PathBuf,
    },
}

impl fmt::Display for PidfileReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PidfileReason::CannotTakeInstallLock { path, error } => write!(
                f,
                "cannot take Julia's install lock `{}` ({})",
                path.display(),
                printable(&error.message)
            ),
            PidfileReason::CannotTake { path, error } => write!(
                f,
                "cannot take Julia's lock `{}` ({})",
                path.display(),
                printable(&error.message)
            ),
            PidfileReason::KeepsChanging { path } => {
                write!(f, "Julia's lock `{}` keeps changing", path.display())
            }
        }
    }
}

/// Why a pidfile of Julia's counts as stale ([`Event::StalePidfileRemoved`](super::Event::StalePidfileRemoved)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StaleReason {
    /// Its process (on this host) is gone.
    ProcessGone,
    /// Its holder may live (on another host, say) but has not refreshed it for `age`.
    NotRefreshed {
        /// How long since it was last refreshed.
        age: Duration,
    },
}

impl fmt::Display for StaleReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StaleReason::ProcessGone => f.write_str("its process is gone"),
            StaleReason::NotRefreshed { age } => {
                write!(f, "not refreshed for {:.0} s", age.as_secs_f64())
            }
        }
    }
}

/// Why a download is not kept for resuming ([`Event::PartialNotKept`](super::Event::PartialNotKept)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PartialNotKeptReason {
    /// What is at the partial download's name cannot be opened or inspected (a link, a
    /// folder, no permission).
    CannotOpen(SystemError),
    /// What is at the partial download's name is not this user's alone.
    NotOwned {
        /// The file.
        path: PathBuf,
        /// Its owner's user id.
        uid: u32,
    },
    /// The partial download's file cannot be created (or allocated, or its header written).
    CannotCreate(SystemError),
}

impl fmt::Display for PartialNotKeptReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartialNotKeptReason::CannotOpen(e) | PartialNotKeptReason::CannotCreate(e) => e.fmt(f),
            PartialNotKeptReason::NotOwned { path, uid } => write!(
                f,
                "`{}` belongs to uid {uid} or has other links",
                path.display()
            ),
        }
    }
}

/// What is wrong with a kept partial download ([`Event::PartialUnusable`](super::Event::PartialUnusable)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PartialUnusableReason {
    /// The file is shorter than its header.
    ShorterThanHeader,
    /// Its header is of another version, or out of bounds.
    UnreadableHeader,
    /// Its header claims more bytes than the download may have.
    TooLong {
        /// The length the header claims.
        length: u64,
        /// The most the download may have.
        max: u64,
    },
    /// It does not match its header (its length) or is of another URL.
    Mismatch,
    /// Its chunk counters cannot be read.
    Unreadable,
    /// A chunk counter is past its chunk's end.
    CountersPastChunks,
}

impl fmt::Display for PartialUnusableReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartialUnusableReason::ShorterThanHeader => f.write_str("is shorter than its header"),
            PartialUnusableReason::UnreadableHeader => {
                f.write_str("has no header this version can read, or one out of bounds")
            }
            PartialUnusableReason::TooLong { length, max } => write!(
                f,
                "claims a download of {length} bytes, more than the {max} it may have"
            ),
            PartialUnusableReason::Mismatch => f.write_str("does not match its header or this URL"),
            PartialUnusableReason::Unreadable => f.write_str("cannot be read"),
            PartialUnusableReason::CountersPastChunks => {
                f.write_str("has chunk counters past their chunks")
            }
        }
    }
}

/// The `Content-Range` a server answered a range request with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContentRange {
    /// `Content-Range: bytes first-last/total`.
    Bytes {
        /// The first byte.
        first: u64,
        /// The last byte.
        last: u64,
        /// The file's length.
        total: u64,
    },
    /// None, or none that could be read.
    Unusable,
}

impl fmt::Display for ContentRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContentRange::Bytes { first, last, total } => {
                write!(f, "`Content-Range: bytes {first}-{last}/{total}`")
            }
            ContentRange::Unusable => f.write_str("no usable Content-Range"),
        }
    }
}

/// Why a kept partial download cannot be continued ([`Event::PartialRestart`](super::Event::PartialRestart)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PartialRestartReason {
    /// The server answered the range request with bytes of another version of the file (or
    /// of one it cannot tell): another ETag or Last-Modified, or none.
    ValidatorChanged,
    /// The server answered the range request with another range than the one asked for.
    OtherRange(ContentRange),
    /// The server sent the whole file, and it is another one (another ETag or
    /// Last-Modified).
    FileChanged,
}

impl fmt::Display for PartialRestartReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartialRestartReason::ValidatorChanged => f.write_str(
                "the server answered its range request with another ETag or Last-Modified, or \
                 none (the file changed, and the server ignores If-Range)",
            ),
            PartialRestartReason::OtherRange(range) => {
                write!(f, "the server answered its range request with {range}")
            }
            PartialRestartReason::FileChanged => {
                f.write_str("the file on the server changed since (another ETag or Last-Modified)")
            }
        }
    }
}

/// How a server answered a range request so that a download goes on as one stream
/// ([`Event::RangeFallback`](super::Event::RangeFallback)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RangeFallbackReason {
    /// A range came without a validator (ETag or Last-Modified), so that its bytes cannot be
    /// told to be of the same file.
    NoValidator,
    /// A range request was answered with another range than the one asked for.
    OtherRange(ContentRange),
}

impl fmt::Display for RangeFallbackReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RangeFallbackReason::NoValidator => f.write_str("a range came without a validator"),
            RangeFallbackReason::OtherRange(range) => {
                write!(f, "a range request was answered with {range}")
            }
        }
    }
}

/// Why no shared depot keeps the partial download of a node-local install
/// ([`Event::PartialOnNode`](super::Event::PartialOnNode)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PartialOnNodeReason {
    /// Another installer holds the artifact's lock in the shared depot.
    SharedLockHeld {
        /// The shared depot.
        depot: PathBuf,
    },
    /// No shared depot is writable (the error says why).
    NoSharedDepot {
        /// The error's message.
        error: String,
    },
}

impl fmt::Display for PartialOnNodeReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartialOnNodeReason::SharedLockHeld { depot } => write!(
                f,
                "another installer holds its lock in the shared depot `{}`",
                depot.display()
            ),
            PartialOnNodeReason::NoSharedDepot { error } => {
                write!(f, "no shared depot can keep it ({error})")
            }
        }
    }
}

/// Where an installed artifact's bytes came from, when not from the manifest's URL
/// ([`Event::Installed`](super::Event::Installed)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InstalledFrom {
    /// The package server's copy.
    PackageServer,
    /// Another node's download or installed copy, received over MPI.
    OverMpi,
}

impl fmt::Display for InstalledFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InstalledFrom::PackageServer => "from the package server",
            InstalledFrom::OverMpi => "over MPI",
        })
    }
}

/// Why usage is not recorded in a depot's usage log, with what to do
/// ([`Event::UsageNotRecorded`](super::Event::UsageNotRecorded)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UsageNotRecordedReason {
    /// The way to the log goes through another user's symlink.
    ForeignLink(ForeignLink),
    /// Something other than a regular file is at the log's place: left alone, not followed.
    Planted(Planted),
}

impl fmt::Display for UsageNotRecordedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UsageNotRecordedReason::ForeignLink(link) => write!(f, "{link}; remove the link"),
            UsageNotRecordedReason::Planted(what) => write!(
                f,
                "it is {what}, not a regular file (planted by someone with write access to the \
                 depot?); left alone and not followed: remove it"
            ),
        }
    }
}

/// Why usage is recorded without Pkg's lock of the usage log
/// ([`Event::UsageLogUnlocked`](super::Event::UsageLogUnlocked)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UsageLogUnlockedReason {
    /// The lock's pidfile cannot be used.
    Pidfile(PidfileReason),
    /// Another process has held the lock for longer than the wait.
    Held {
        /// Who holds it (`pid N on host H`; escaped).
        holder: String,
    },
}

impl fmt::Display for UsageLogUnlockedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UsageLogUnlockedReason::Pidfile(why) => why.fmt(f),
            UsageLogUnlockedReason::Held { holder } => {
                write!(f, "the usage log's lock is held by {holder}")
            }
        }
    }
}

/// Why a file is not synced ([`Event::NotSynced`](super::Event::NotSynced)).
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

/// Why a file is not restored ([`Event::NotRestored`](super::Event::NotRestored)).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notice::{Event, line};

    fn io(kind: io::ErrorKind, message: &str) -> SystemError {
        SystemError::new(kind, message)
    }

    /// Every reason of every notice that has them, and the line it prints: today's lines,
    /// pinned word for word.
    #[test]
    #[allow(
        clippy::too_many_lines,
        reason = "a table of cases: each reason and the line it prints"
    )]
    fn every_reason_prints_todays_line() {
        let p = PathBuf::from;
        let lock_file = |why| Event::LockFileUnusable { why };
        let julia = |why| Event::JuliaLockUnusable {
            why,
            artifact: None,
        };
        let stale = |why| Event::StalePidfileRemoved {
            path: p("/d/artifacts/ab.pid"),
            holder: "pid 7 on host n1".into(),
            why,
        };
        let not_kept = |why| Event::PartialNotKept {
            artifact: "era5".into(),
            why,
        };
        let unusable = |why| Event::PartialUnusable {
            path: p("/d/artifacts/.partial/ab"),
            why,
        };
        let restart = |why| Event::PartialRestart {
            path: p("/d/artifacts/.partial/ab"),
            why,
        };
        let fallback = |why| Event::RangeFallback { why };
        let on_node = |why| Event::PartialOnNode {
            artifact: "era5".into(),
            depot: p("/tmp/node"),
            why,
        };
        let installed = |from| Event::Installed {
            artifact: "era5".into(),
            from,
            path: p("/d/artifacts/ab"),
            received: 5,
            reused: 0,
        };
        let usage = |why| Event::UsageNotRecorded {
            path: p("/d/logs/artifact_usage.toml"),
            why,
        };
        let unlocked = |why| Event::UsageLogUnlocked { why };
        let synced = |why| Event::NotSynced {
            path: p("out/a.nc"),
            why,
        };
        let restored = |from: Option<&str>, why| Event::NotRestored {
            path: p("out/a.nc"),
            from: from.map(str::to_owned),
            why,
        };
        let denied = io(
            io::ErrorKind::PermissionDenied,
            "Permission denied (os error 13)",
        );
        let link = ForeignLink {
            link: p("/d/logs"),
            owner: 4242,
        };
        let me = clima_artifact_fs::euid();
        let cases: Vec<(Event, String)> =
            vec![
            (
                lock_file(LockFileReason::CannotCreateFolder {
                    folder: p("/d/artifacts/.locks"),
                    error: denied.clone(),
                }),
                "clima-artifacts: warning: cannot create lock folder `/d/artifacts/.locks`: \
                 Permission denied (os error 13); continuing without the lock"
                    .into(),
            ),
            (
                lock_file(LockFileReason::CannotOpen {
                    path: p("/d/a.lock"),
                    error: denied.clone(),
                }),
                "clima-artifacts: warning: cannot open lock file `/d/a.lock`: Permission denied \
                 (os error 13); continuing without the lock"
                    .into(),
            ),
            (
                lock_file(LockFileReason::CannotInspect {
                    path: p("/d/a.lock"),
                    error: denied.clone(),
                }),
                "clima-artifacts: warning: cannot inspect lock file `/d/a.lock`: Permission \
                 denied (os error 13); continuing without the lock"
                    .into(),
            ),
            (
                lock_file(LockFileReason::Planted {
                    path: p("/d/a.lock"),
                    what: Planted::Symlink,
                }),
                "clima-artifacts: warning: the lock file `/d/a.lock` is a symlink, not a regular \
                 file (planted by someone with write access to the depot?); it is left alone and \
                 not followed: remove it; continuing without the lock"
                    .into(),
            ),
            (
                lock_file(LockFileReason::Planted {
                    path: p("/d/a.lock"),
                    what: Planted::Folder,
                }),
                "clima-artifacts: warning: the lock file `/d/a.lock` is a folder, not a regular \
                 file (planted by someone with write access to the depot?); it is left alone and \
                 not followed: remove it; continuing without the lock"
                    .into(),
            ),
            (
                lock_file(LockFileReason::Planted {
                    path: p("/d/a.lock"),
                    what: Planted::SpecialFile,
                }),
                "clima-artifacts: warning: the lock file `/d/a.lock` is a special file (fifo, \
                 socket or device), not a regular file (planted by someone with write access to \
                 the depot?); it is left alone and not followed: remove it; continuing without \
                 the lock"
                    .into(),
            ),
            // The system's message is escaped: the pidfile's folder is the depot's.
            (
                julia(PidfileReason::CannotTakeInstallLock {
                    path: p("/d/artifacts/ab.pid"),
                    error: io(io::ErrorKind::Other, "bad \u{1b}[2J"),
                }),
                "clima-artifacts: warning: cannot take Julia's install lock \
                 `/d/artifacts/ab.pid` (bad \\u{1b}[2J); continuing without it"
                    .into(),
            ),
            (
                julia(PidfileReason::CannotTake {
                    path: p("/d/artifacts/ab.pid"),
                    error: denied.clone(),
                }),
                "clima-artifacts: warning: cannot take Julia's lock `/d/artifacts/ab.pid` \
                 (Permission denied (os error 13)); continuing without it"
                    .into(),
            ),
            (
                julia(PidfileReason::KeepsChanging {
                    path: p("/d/artifacts/ab.pid"),
                }),
                "clima-artifacts: warning: Julia's lock `/d/artifacts/ab.pid` keeps changing; \
                 continuing without it"
                    .into(),
            ),
            (
                stale(StaleReason::ProcessGone),
                "clima-artifacts: removed the stale pidfile `/d/artifacts/ab.pid` of pid 7 on \
                 host n1 (its process is gone)"
                    .into(),
            ),
            (
                stale(StaleReason::NotRefreshed {
                    age: Duration::from_millis(40_400),
                }),
                "clima-artifacts: removed the stale pidfile `/d/artifacts/ab.pid` of pid 7 on \
                 host n1 (not refreshed for 40 s)"
                    .into(),
            ),
            (
                not_kept(PartialNotKeptReason::CannotOpen(io(
                    io::ErrorKind::Other,
                    "`/d/artifacts/.partial/ab` is a symlink",
                ))),
                "clima-artifacts: warning: the download of `era5` is not kept for resuming: \
                 `/d/artifacts/.partial/ab` is a symlink"
                    .into(),
            ),
            (
                not_kept(PartialNotKeptReason::NotOwned {
                    path: p("/d/artifacts/.partial/ab"),
                    uid: 65534,
                }),
                "clima-artifacts: warning: the download of `era5` is not kept for resuming: \
                 `/d/artifacts/.partial/ab` belongs to uid 65534 or has other links"
                    .into(),
            ),
            (
                not_kept(PartialNotKeptReason::CannotCreate(io(
                    io::ErrorKind::StorageFull,
                    "`/d/artifacts/.partial/ab`: No space left on device (os error 28)",
                ))),
                "clima-artifacts: warning: the download of `era5` is not kept for resuming: \
                 `/d/artifacts/.partial/ab`: No space left on device (os error 28)"
                    .into(),
            ),
            (
                unusable(PartialUnusableReason::ShorterThanHeader),
                "clima-artifacts: warning: the kept partial download `/d/artifacts/.partial/ab` \
                 is shorter than its header; removing it and starting over"
                    .into(),
            ),
            (
                unusable(PartialUnusableReason::UnreadableHeader),
                "clima-artifacts: warning: the kept partial download `/d/artifacts/.partial/ab` \
                 has no header this version can read, or one out of bounds; removing it and \
                 starting over"
                    .into(),
            ),
            (
                unusable(PartialUnusableReason::TooLong {
                    length: 5000,
                    max: 4096,
                }),
                "clima-artifacts: warning: the kept partial download `/d/artifacts/.partial/ab` \
                 claims a download of 5000 bytes, more than the 4096 it may have; removing it \
                 and starting over"
                    .into(),
            ),
            (
                unusable(PartialUnusableReason::Mismatch),
                "clima-artifacts: warning: the kept partial download `/d/artifacts/.partial/ab` \
                 does not match its header or this URL; removing it and starting over"
                    .into(),
            ),
            (
                unusable(PartialUnusableReason::Unreadable),
                "clima-artifacts: warning: the kept partial download `/d/artifacts/.partial/ab` \
                 cannot be read; removing it and starting over"
                    .into(),
            ),
            (
                unusable(PartialUnusableReason::CountersPastChunks),
                "clima-artifacts: warning: the kept partial download `/d/artifacts/.partial/ab` \
                 has chunk counters past their chunks; removing it and starting over"
                    .into(),
            ),
            (
                restart(PartialRestartReason::ValidatorChanged),
                "clima-artifacts: warning: the partial download `/d/artifacts/.partial/ab` cannot \
                 be continued: the server answered its range request with another ETag or \
                 Last-Modified, or none (the file changed, and the server ignores If-Range); \
                 starting over"
                    .into(),
            ),
            (
                restart(PartialRestartReason::OtherRange(ContentRange::Bytes {
                    first: 0,
                    last: 9,
                    total: 100,
                })),
                "clima-artifacts: warning: the partial download `/d/artifacts/.partial/ab` cannot \
                 be continued: the server answered its range request with `Content-Range: bytes \
                 0-9/100`; starting over"
                    .into(),
            ),
            (
                restart(PartialRestartReason::OtherRange(ContentRange::Unusable)),
                "clima-artifacts: warning: the partial download `/d/artifacts/.partial/ab` cannot \
                 be continued: the server answered its range request with no usable \
                 Content-Range; starting over"
                    .into(),
            ),
            (
                restart(PartialRestartReason::FileChanged),
                "clima-artifacts: warning: the partial download `/d/artifacts/.partial/ab` cannot \
                 be continued: the file on the server changed since (another ETag or \
                 Last-Modified); starting over"
                    .into(),
            ),
            (
                fallback(RangeFallbackReason::NoValidator),
                "clima-artifacts: detail: a range came without a validator; one stream from now \
                 on"
                .into(),
            ),
            (
                fallback(RangeFallbackReason::OtherRange(ContentRange::Bytes {
                    first: 10,
                    last: 19,
                    total: 100,
                })),
                "clima-artifacts: detail: a range request was answered with `Content-Range: \
                 bytes 10-19/100`; one stream from now on"
                    .into(),
            ),
            (
                fallback(RangeFallbackReason::OtherRange(ContentRange::Unusable)),
                "clima-artifacts: detail: a range request was answered with no usable \
                 Content-Range; one stream from now on"
                    .into(),
            ),
            (
                on_node(PartialOnNodeReason::SharedLockHeld { depot: p("/shared") }),
                "clima-artifacts: the partial download of `era5` is kept in the node-local depot \
                 `/tmp/node`, which the end of the job may wipe: another installer holds its \
                 lock in the shared depot `/shared`; a later job starts this download over. Set \
                 CLIMA_ARTIFACTS_DEPOT_PATH to a writable shared folder to continue it in the \
                 next job"
                    .into(),
            ),
            (
                on_node(PartialOnNodeReason::NoSharedDepot {
                    error: "no writable depot".into(),
                }),
                "clima-artifacts: the partial download of `era5` is kept in the node-local depot \
                 `/tmp/node`, which the end of the job may wipe: no shared depot can keep it (no \
                 writable depot); a later job starts this download over. Set \
                 CLIMA_ARTIFACTS_DEPOT_PATH to a writable shared folder to continue it in the \
                 next job"
                    .into(),
            ),
            (
                installed(Some(InstalledFrom::PackageServer)),
                "clima-artifacts: detail: installed `era5` from the package server into \
                 `/d/artifacts/ab`"
                    .into(),
            ),
            (
                installed(Some(InstalledFrom::OverMpi)),
                "clima-artifacts: detail: installed `era5` over MPI into `/d/artifacts/ab`".into(),
            ),
            (
                installed(None),
                "clima-artifacts: detail: installed `era5` into `/d/artifacts/ab`".into(),
            ),
            (
                usage(UsageNotRecordedReason::ForeignLink(link)),
                format!(
                    "clima-artifacts: warning: not recording usage in \
                     `/d/logs/artifact_usage.toml`: `/d/logs` is a symbolic link owned by uid \
                     4242, neither you (uid {me}) nor root: another user may have planted it to \
                     make you act on their target; remove the link"
                ),
            ),
            (
                usage(UsageNotRecordedReason::Planted(Planted::Symlink)),
                "clima-artifacts: warning: not recording usage in `/d/logs/artifact_usage.toml`: \
                 it is a symlink, not a regular file (planted by someone with write access to \
                 the depot?); left alone and not followed: remove it"
                    .into(),
            ),
            (
                usage(UsageNotRecordedReason::Planted(Planted::SpecialFile)),
                "clima-artifacts: warning: not recording usage in `/d/logs/artifact_usage.toml`: \
                 it is a special file, not a regular file (planted by someone with write access \
                 to the depot?); left alone and not followed: remove it"
                    .into(),
            ),
            (
                unlocked(UsageLogUnlockedReason::Pidfile(PidfileReason::CannotTake {
                    path: p("/d/logs/artifact_usage.toml.pid"),
                    error: denied.clone(),
                })),
                "clima-artifacts: detail: cannot take Julia's lock \
                 `/d/logs/artifact_usage.toml.pid` (Permission denied (os error 13)); recording \
                 usage without it"
                    .into(),
            ),
            (
                unlocked(UsageLogUnlockedReason::Held {
                    holder: "pid 9 on host n2".into(),
                }),
                "clima-artifacts: detail: the usage log's lock is held by pid 9 on host n2; \
                 recording usage without it"
                    .into(),
            ),
            (
                synced(NotSyncedReason::NameNotUtf8),
                "clima-artifacts: warning: not syncing `out/a.nc`: its name is not UTF-8; rename \
                 it to sync it"
                    .into(),
            ),
            (
                synced(NotSyncedReason::VanishedWhileListing),
                "clima-artifacts: warning: not syncing `out/a.nc`: it vanished while listing"
                    .into(),
            ),
            (
                synced(NotSyncedReason::VanishedDuringSync),
                "clima-artifacts: warning: not syncing `out/a.nc`: it vanished during the sync"
                    .into(),
            ),
            (
                restored(
                    None,
                    NotRestoredReason::LocalNewer {
                        storage: "file:///s".into(),
                    },
                ),
                "clima-artifacts: warning: not restoring `out/a.nc`: the local file is newer \
                 than the stored copy in `file:///s`; kept as it is"
                    .into(),
            ),
            // The recorded hash is the storage's index's: escaped.
            (
                restored(
                    Some("file:///s"),
                    NotRestoredReason::ContentMismatch {
                        sha256: "ab".into(),
                        recorded: "\u{1b}[2J".into(),
                    },
                ),
                "clima-artifacts: warning: not restoring `out/a.nc` from `file:///s`: its \
                 content (sha256 ab) is not what the sync index records (\\u{1b}[2J); it was \
                 changed or only half uploaded"
                    .into(),
            ),
            (
                restored(
                    None,
                    NotRestoredReason::Refused(
                        "`out/a.nc` in `file:///s` is a symlink, not a regular file".into(),
                    ),
                ),
                "clima-artifacts: warning: not restoring `out/a.nc`: `out/a.nc` in `file:///s` \
                 is a symlink, not a regular file"
                    .into(),
            ),
        ];
        for (event, text) in cases {
            assert_eq!(line(&event), text, "{event:?}");
        }
    }

    #[test]
    fn a_system_error_keeps_its_kind_and_message() {
        let e = io::Error::new(io::ErrorKind::PermissionDenied, "`/d/x`: no");
        let s = SystemError::from(&e);
        assert_eq!(s.kind, io::ErrorKind::PermissionDenied);
        assert_eq!(s.to_string(), "`/d/x`: no");
        assert_eq!(SystemError::from(e), s);
    }
}
