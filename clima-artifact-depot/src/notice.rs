//! The depot's notices, each with the line the user reads: its locks and Julia's pidfiles
//! ([`LockEvent`]), its upkeep ([`DepotEvent`]) and its usage log ([`UsageEvent`]), and the
//! reasons they give, as values to match on. They implement the progress crate's
//! [`Event`] and are sent to the process's reporter with
//! [`emit`](clima_artifact_progress::Reporting::emit); the progress crate knows none of them.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clima_artifact_fs::{ForeignLink, printable};
use clima_artifact_progress::notice::{Event, Level, SystemError};
use clima_artifact_vars::{DEPOT_PATH, LOCK_TIMEOUT};

#[cfg(test)]
mod tests;

/// The notices of the depot's locks: ours (lock waits, a lock file that cannot be used) and
/// Julia's Pkg pidfiles (waits for a Julia process, stale pidfiles removed).
///
/// New kinds of notices are added as the work grows: match with a `_` arm.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum LockEvent {
    /// Info: another process holds our lock of `what` (an artifact's install, a depot's
    /// partial downloads); waiting at most `timeout`.
    LockWait {
        /// What the lock guards (`` the install of `era5` ``).
        what: String,
        /// The lock file.
        path: PathBuf,
        /// Who holds it, from its record (escaped), or `another process`.
        holder: String,
        /// The longest wait (`CLIMA_ARTIFACTS_LOCK_TIMEOUT`).
        timeout: Duration,
    },
    /// Info: the wait of [`LockEvent::LockWait`] goes on (said at most every few seconds, when
    /// the holder changed or after a while).
    LockStillWaiting {
        /// What the lock guards.
        what: String,
        /// The lock file.
        path: PathBuf,
        /// Who holds it now (escaped).
        holder: String,
        /// How long this process has waited so far.
        waited: Duration,
        /// The longest wait.
        timeout: Duration,
    },
    /// Info: the lock waited for is ours now.
    LockTaken {
        /// What the lock guards.
        what: String,
        /// How long the wait took.
        waited: Duration,
    },
    /// Warning: the lock file cannot be opened as one (`why`); the work goes on unlocked.
    LockFileUnusable {
        /// Why (naming the file).
        why: LockFileReason,
    },
    /// Warning: the filesystem refuses to lock `path`; the work goes on unlocked.
    LockRefused {
        /// The lock file.
        path: PathBuf,
        /// The system's error.
        error: String,
    },
    /// Info: a Julia process holds Pkg's install lock (pidfile) of `artifact`; waiting at most
    /// `timeout`.
    JuliaLockWait {
        /// The artifact's name.
        artifact: String,
        /// The Julia process, as its pidfile names it (`pid N on host H`; escaped).
        holder: String,
        /// The pidfile.
        path: PathBuf,
        /// The longest wait.
        timeout: Duration,
    },
    /// Info: Julia's install lock of `artifact`, waited for, is free.
    JuliaLockFree {
        /// The artifact's name.
        artifact: String,
        /// How long the wait took.
        waited: Duration,
    },
    /// Warning: Julia's pidfile cannot be used (`why`); the install goes on under our lock
    /// alone. `artifact` is named when a Julia process may then download it too.
    JuliaLockUnusable {
        /// Why.
        why: PidfileReason,
        /// The artifact whose install goes on without Julia's lock, when waiting was meant.
        artifact: Option<String>,
    },
    /// Info: a pidfile of Julia's whose process is gone, or that was not refreshed, was
    /// removed.
    StalePidfileRemoved {
        /// The pidfile.
        path: PathBuf,
        /// Its holder as its record tells.
        holder: String,
        /// Why it counts as stale (`its process is gone`, `not refreshed for 40 s`).
        why: StaleReason,
    },
}

impl Event for LockEvent {
    fn level(&self) -> Level {
        use LockEvent::*;
        match self {
            LockWait { .. }
            | LockStillWaiting { .. }
            | LockTaken { .. }
            | JuliaLockWait { .. }
            | JuliaLockFree { .. }
            | StalePidfileRemoved { .. } => Level::Info,
            LockFileUnusable { .. } | LockRefused { .. } | JuliaLockUnusable { .. } => {
                Level::Warning
            }
        }
    }
}

impl fmt::Display for LockEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use LockEvent::*;
        match self {
            LockWait {
                what,
                path,
                holder,
                timeout,
            } => write!(
                f,
                "waiting for {what}: another process holds its lock `{}`: {holder}; waiting at \
                 most {} s ({LOCK_TIMEOUT})",
                path.display(),
                timeout.as_secs()
            ),
            LockStillWaiting {
                what,
                path,
                holder,
                waited,
                timeout,
            } => write!(
                f,
                "still waiting for {what} after {:.0} s (at most {} s, {LOCK_TIMEOUT}): `{}` is \
                 held by {holder}",
                waited.as_secs_f64(),
                timeout.as_secs(),
                path.display()
            ),
            LockTaken { what, waited } => write!(
                f,
                "got the lock for {what} after waiting {:.1} s",
                waited.as_secs_f64()
            ),
            LockFileUnusable { why } => write!(f, "{why}; continuing without the lock"),
            LockRefused { path, error } => write!(
                f,
                "cannot lock `{}` ({error}); continuing without the lock",
                path.display()
            ),
            JuliaLockWait {
                artifact,
                holder,
                path,
                timeout,
            } => write!(
                f,
                "waiting for a Julia process ({holder}) installing `{artifact}`: it holds Pkg's \
                 install lock `{}`; waiting at most {} s ({LOCK_TIMEOUT})",
                path.display(),
                timeout.as_secs()
            ),
            JuliaLockFree { artifact, waited } => write!(
                f,
                "Julia's install lock of `{artifact}` is free after {:.1} s",
                waited.as_secs_f64()
            ),
            JuliaLockUnusable {
                why,
                artifact: None,
            } => write!(f, "{why}; continuing without it"),
            JuliaLockUnusable {
                why,
                artifact: Some(name),
            } => write!(
                f,
                "{why}; continuing without it (a Julia 1.13 process installing `{name}` at the \
                 same time downloads it too)"
            ),
            StalePidfileRemoved { path, holder, why } => write!(
                f,
                "removed the stale pidfile `{}` of {holder} ({why})",
                path.display()
            ),
        }
    }
}

/// The notices of a depot's upkeep: what dead processes left, removed or kept, temp folders,
/// partial downloads kept on a node or removed, records that could not be written.
///
/// New kinds of notices are added as the work grows: match with a `_` arm.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum DepotEvent {
    /// Info: a temporary folder of a dead process was removed.
    LeftoverRemoved {
        /// The folder.
        path: PathBuf,
        /// The dead process.
        pid: i32,
    },
    /// Detail: a temporary folder of a process that looks dead is kept: its artifact's lock is
    /// held (the process may live in another PID namespace).
    LeftoverKept {
        /// The folder.
        path: PathBuf,
        /// The process named in its name.
        pid: i32,
    },
    /// Info: an old probe file (of a writability check) was removed.
    ProbeFileRemoved {
        /// The file.
        path: PathBuf,
    },
    /// Warning: a temporary folder was moved away by someone else while being filled; what
    /// is at its path now was left alone.
    TempDirMovedAway {
        /// The folder's path.
        path: PathBuf,
    },
    /// Warning: a temporary file or folder could not be removed.
    CannotRemove {
        /// It.
        path: PathBuf,
        /// Why.
        error: String,
    },
    /// Info: a partial download that received nothing for `days` days was removed.
    PartialRemoved {
        /// The partial download's file.
        path: PathBuf,
        /// Its age limit, in days.
        days: u64,
    },
    /// Info: the partial download of `artifact` is kept in a node-local depot that the end of
    /// the job may wipe (`why` not in a shared one); `CLIMA_ARTIFACTS_DEPOT_PATH` would keep it.
    PartialOnNode {
        /// The artifact's name.
        artifact: String,
        /// The node-local depot.
        depot: PathBuf,
        /// Why no shared depot keeps it.
        why: PartialOnNodeReason,
    },
    /// Detail: the git tree SHA-256 of the copy at `path` could not be recorded in any of
    /// this process's depots (`error`, the last one's); it is hashed again next time.
    TreeSha256NotRecorded {
        /// The copy's folder.
        path: PathBuf,
        /// Why.
        error: String,
    },
}

impl Event for DepotEvent {
    fn level(&self) -> Level {
        use DepotEvent::*;
        match self {
            LeftoverRemoved { .. }
            | ProbeFileRemoved { .. }
            | PartialRemoved { .. }
            | PartialOnNode { .. } => Level::Info,
            LeftoverKept { .. } | TreeSha256NotRecorded { .. } => Level::Detail,
            TempDirMovedAway { .. } | CannotRemove { .. } => Level::Warning,
        }
    }
}

impl fmt::Display for DepotEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use DepotEvent::*;
        match self {
            LeftoverRemoved { path, pid } => write!(
                f,
                "removing `{}` left by dead process {pid}",
                path.display()
            ),
            LeftoverKept { path, pid } => write!(
                f,
                "keeping `{}`: its artifact's lock is held (pid {pid} may live in another PID \
                 namespace)",
                path.display()
            ),
            ProbeFileRemoved { path } => {
                write!(f, "removing leftover probe file `{}`", path.display())
            }
            TempDirMovedAway { path } => write!(
                f,
                "the temporary folder `{}` was moved away by someone else while it was being \
                 filled; what is at its path now was left alone",
                path.display()
            ),
            CannotRemove { path, error } => {
                write!(f, "cannot remove `{}`: {error}", path.display())
            }
            PartialRemoved { path, days } => write!(
                f,
                "removed the partial download `{}`: nothing was added to it for {days} days",
                path.display()
            ),
            PartialOnNode {
                artifact,
                depot,
                why,
            } => write!(
                f,
                "the partial download of `{artifact}` is kept in the node-local depot `{}`, \
                 which the end of the job may wipe: {why}; a later job starts this download \
                 over. Set {DEPOT_PATH} to a writable shared folder to continue it in the next \
                 job",
                depot.display()
            ),
            TreeSha256NotRecorded { path, error } => write!(
                f,
                "cannot record the git-tree-sha256 of `{}` ({error}); it is hashed again next \
                 time",
                printable(&path.display().to_string())
            ),
        }
    }
}

/// The notices of a depot's usage log (`logs/artifact_usage.toml`, shared with Julia's Pkg).
///
/// New kinds of notices are added as the work grows: match with a `_` arm.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum UsageEvent {
    /// Warning: usage is not recorded in the log at `path` (`why`, with what to do).
    UsageNotRecorded {
        /// The usage log.
        path: PathBuf,
        /// Why, with what to do.
        why: UsageNotRecordedReason,
    },
    /// Detail: usage could not be recorded in the log at `path`.
    UsageRecordFailed {
        /// The usage log.
        path: PathBuf,
        /// The error.
        error: String,
    },
    /// Detail: usage is recorded without Pkg's lock of the usage log (`why`).
    UsageLogUnlocked {
        /// Why.
        why: UsageLogUnlockedReason,
    },
    /// Info: Pkg's lock of the usage log `log` stayed held by `holder` longer than a run
    /// waits for it, so the usage entry was kept in `kept`, which the next run merges into
    /// the log under that lock.
    UsageEntryKept {
        /// The usage log.
        log: PathBuf,
        /// The file the entry is kept in.
        kept: PathBuf,
        /// Who holds the lock (`pid N on host H`; escaped).
        holder: String,
    },
    /// Info: `gc` leaves the usage log `log` as it is this time: Pkg's lock of it stayed held
    /// by `holder` for `waited`, and rewriting it without that lock could drop the entries its
    /// holder is writing.
    UsageLogNotCompacted {
        /// The usage log.
        log: PathBuf,
        /// Who holds the lock (escaped).
        holder: String,
        /// How long `gc` waited.
        waited: Duration,
    },
}

impl Event for UsageEvent {
    fn level(&self) -> Level {
        use UsageEvent::*;
        match self {
            UsageEntryKept { .. } | UsageLogNotCompacted { .. } => Level::Info,
            UsageRecordFailed { .. } | UsageLogUnlocked { .. } => Level::Detail,
            UsageNotRecorded { .. } => Level::Warning,
        }
    }
}

impl fmt::Display for UsageEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use UsageEvent::*;
        match self {
            UsageNotRecorded { path, why } => {
                write!(f, "not recording usage in `{}`: {why}", path.display())
            }
            UsageRecordFailed { path, error } => {
                write!(f, "cannot record usage in `{}`: {error}", path.display())
            }
            UsageLogUnlocked { why } => write!(f, "{why}; recording usage without it"),
            UsageEntryKept { log, kept, holder } => write!(
                f,
                "the lock of `{}` is held by {holder}: usage is kept in `{}` until the next \
                 run (or `clima-artifacts gc`) merges it into the log",
                log.display(),
                kept.display()
            ),
            UsageLogNotCompacted {
                log,
                holder,
                waited,
            } => write!(
                f,
                "not compacting `{}`: its lock is held by {holder} (waited {} s); the next gc \
                 compacts it",
                log.display(),
                waited.as_secs()
            ),
        }
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

/// Why a lock file cannot be used ([`LockEvent::LockFileUnusable`]).
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

/// Why a pidfile of Julia's cannot be used ([`LockEvent::JuliaLockUnusable`],
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

/// Why a pidfile of Julia's counts as stale ([`LockEvent::StalePidfileRemoved`]).
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

/// Why no shared depot keeps the partial download of a node-local install
/// ([`DepotEvent::PartialOnNode`]).
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

/// Why usage is not recorded in a depot's usage log, with what to do
/// ([`UsageEvent::UsageNotRecorded`]).
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
/// ([`UsageEvent::UsageLogUnlocked`]).
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
