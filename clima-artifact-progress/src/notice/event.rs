//! What a notice says happened, as facts a program can `match` on ([`Event`]), and the line
//! the user reads of it (its `Display`).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clima_artifact_fs::{human_bytes, printable};
use clima_artifact_vars::{
    DEPOT_PATH, LOCK_TIMEOUT, NO_VERIFY_HOSTS, RETRIES, SYNC_ARTIFACTS, SYNC_EXCLUDE,
    SYNC_WARN_AFTER,
};

use super::Level;
use super::reason::{
    InstalledFrom, LockFileReason, NotRestoredReason, NotSyncedReason, PartialNotKeptReason,
    PartialOnNodeReason, PartialRestartReason, PartialUnusableReason, PidfileReason,
    RangeFallbackReason, StaleReason, UsageLogUnlockedReason, UsageNotRecordedReason,
};

/// What happened, one variant per kind of notice, with its facts as fields.
///
/// Its `Display` is the notice's line without the `clima-artifacts:` prefix, the text that
/// [`Notice::text`](super::Notice::text) carries; its [`Event::level`] says how much it
/// matters. Text that came from a file, a server or an archive is escaped by the `Display`
/// ([`printable`]) where the field says so; fields said to be *escaped* already are (they are
/// shown elsewhere too, in an error, escaped the same way). URLs are without credentials.
///
/// New kinds of notices are added as the work grows: match with a `_` arm.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    // --- Locks --------------------------------------------------------------------------
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
    /// Info: the wait of [`Event::LockWait`] goes on (said at most every few seconds, when
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

    // --- Downloads ------------------------------------------------------------------------
    /// Detail: a download of `artifact` starts from `url`.
    Downloading {
        /// The artifact's name.
        artifact: String,
        /// The URL, without credentials (escaped by the display).
        url: String,
    },
    /// Detail: a redirect was followed.
    Redirect {
        /// From this URL, without credentials (escaped by the display).
        from: String,
        /// To this one, without credentials (escaped by the display).
        to: String,
    },
    /// Warning: the TLS certificate of `host` is not verified (`CLIMA_ARTIFACTS_NO_VERIFY_HOSTS`).
    TlsNotVerified {
        /// The host (escaped by the display).
        host: String,
    },
    /// Warning: an attempt failed with `error`; the next, `attempt` of `attempts`, starts
    /// after `delay`.
    Retry {
        /// The failure.
        error: String,
        /// The failure without its URL: the same for every download that failed alike (a
        /// batch's log says it once: [`OncePerCause`](crate::OncePerCause)).
        cause: String,
        /// The pause before the next attempt.
        delay: Duration,
        /// The number of the next attempt (from 1).
        attempt: u32,
        /// How many attempts there are (`CLIMA_ARTIFACTS_RETRIES`).
        attempts: u32,
    },
    /// Warning: a source failed with `error`; the next URL is tried.
    NextSource {
        /// The failure.
        error: String,
        /// The failure without its URL (see [`Event::Retry`]).
        cause: String,
    },
    /// Warning: the package server could not provide `artifact`; the manifest's URLs are tried.
    PackageServerFallback {
        /// The artifact's name.
        artifact: String,
        /// The failure.
        error: String,
        /// The failure without its URL (see [`Event::Retry`]).
        cause: String,
    },
    /// Warning: only some files of `artifact` were asked for, but they cannot be fetched
    /// alone (`why`: the tarball is not seekable, or its server does not serve byte ranges):
    /// the artifact is downloaded whole.
    PartialFallback {
        /// The artifact's name.
        artifact: String,
        /// Why (a URL in it without credentials).
        why: String,
    },
    /// Warning: the depot itself failed (its disk full, say): no other source is tried. The
    /// display is the error's own.
    InstallFailed {
        /// The failure.
        error: String,
    },
    /// Info: a download broke at byte `at` and continues there.
    ResumingBroken {
        /// The artifact's name.
        artifact: String,
        /// Bytes received before it broke.
        at: u64,
        /// Why it broke.
        error: String,
    },
    /// Info: a download continues from `at` of `of` bytes kept in `kept_in` by an earlier
    /// attempt.
    Resuming {
        /// The artifact's name.
        artifact: String,
        /// Bytes kept.
        at: u64,
        /// The download's length.
        of: u64,
        /// The partial download's file.
        kept_in: PathBuf,
    },
    /// Warning: the download of `artifact` is not kept for resuming (`why`): a broken download
    /// starts over.
    PartialNotKept {
        /// The artifact's name.
        artifact: String,
        /// Why.
        why: PartialNotKeptReason,
    },
    /// Warning: the kept partial download at `path` is unusable (`why`, as in `is shorter than
    /// its header`); it is removed and the download starts over.
    PartialUnusable {
        /// The partial download's file.
        path: PathBuf,
        /// What is wrong with it.
        why: PartialUnusableReason,
    },
    /// Warning: the partial download at `path` cannot be continued (`why`: the server's file
    /// changed, say); the download starts over.
    PartialRestart {
        /// The partial download's file.
        path: PathBuf,
        /// Why.
        why: PartialRestartReason,
    },
    /// Warning: a download continued from `kept` bytes kept in `path` failed verification
    /// (`error`); the kept bytes were deleted and the download starts over.
    KeptBytesFailedVerification {
        /// The artifact's name.
        artifact: String,
        /// Bytes that had been kept.
        kept: u64,
        /// The partial download's file.
        path: PathBuf,
        /// The verification's failure.
        error: String,
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
    /// Info: a partial download that received nothing for `days` days was removed.
    PartialRemoved {
        /// The partial download's file.
        path: PathBuf,
        /// Its age limit, in days.
        days: u64,
    },
    /// Detail: a server answered a range request in a way that leaves one stream (`why`).
    RangeFallback {
        /// What the server did (`a range came without a validator`).
        why: RangeFallbackReason,
    },
    /// Detail: connection `id` of a download closed: the server answered HTTP `status` to a
    /// range request (it limits connections).
    ConnectionClosed {
        /// The connection's number.
        id: u64,
        /// The HTTP status.
        status: u16,
    },

    // --- Installs -------------------------------------------------------------------------
    /// Detail: `artifact` was installed into `path`, `from` somewhere (the package server,
    /// over MPI; `None`: from the manifest's URL), `reused` bytes of it from an earlier
    /// partial download.
    Installed {
        /// The artifact's name.
        artifact: String,
        /// Where from (`None` for the manifest's URL).
        from: Option<InstalledFrom>,
        /// Where it is now (escaped by the display).
        path: PathBuf,
        /// The tarball's bytes received now.
        received: u64,
        /// Its bytes kept by an earlier attempt.
        reused: u64,
    },
    /// Detail: `artifact` was received over MPI from `from_node` and installed into `path`.
    ReceivedOverMpi {
        /// The artifact's name.
        artifact: String,
        /// The node that sent it (escaped by the display).
        from_node: String,
        /// Where it is now (escaped by the display).
        path: PathBuf,
    },
    /// Info: `artifact` is in the shared depot `depot`, at `path`: no node-local copies.
    FoundInSharedDepot {
        /// The artifact's name.
        artifact: String,
        /// The shared depot.
        depot: PathBuf,
        /// The artifact's folder.
        path: PathBuf,
    },
    /// Warning: a debug build installed `artifact` (`bytes`) in `took`, hashing at
    /// `bytes_per_second`: its dependencies are unoptimised.
    SlowDebugBuild {
        /// The artifact's name.
        artifact: String,
        /// Its tarball's size.
        bytes: u64,
        /// How long the install took.
        took: Duration,
        /// The measured SHA-1 speed.
        bytes_per_second: f64,
    },
    /// Warning: a setting was out of range; the nearest allowed value is used.
    ConfigOutOfRange {
        /// The environment variable.
        variable: String,
        /// Its value (escaped by the display).
        value: String,
        /// The least allowed.
        min: u64,
        /// The most allowed.
        max: u64,
        /// What is used.
        used: u64,
    },

    // --- Depot upkeep ---------------------------------------------------------------------
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

    // --- Installed copies -----------------------------------------------------------------
    /// Info: the installed copy of `artifact` at `path` has no record of its git tree
    /// SHA-256, which its manifest entry gives: its tree is hashed once, and the result
    /// recorded.
    HashingInstalledCopy {
        /// The artifact's name.
        artifact: String,
        /// The copy's folder.
        path: PathBuf,
    },
    /// Detail: the git tree SHA-256 of the copy at `path` could not be recorded in any of
    /// this process's depots (`error`, the last one's); it is hashed again next time.
    TreeSha256NotRecorded {
        /// The copy's folder.
        path: PathBuf,
        /// Why.
        error: String,
    },

    // --- Provenance report ----------------------------------------------------------------
    /// Info: the provenance report was written.
    ReportWritten {
        /// Its Markdown file.
        markdown: PathBuf,
        /// Its JSON file.
        json: PathBuf,
        /// Its BibTeX file.
        bibtex: PathBuf,
    },
    /// Warning: the provenance report could not be written.
    ReportFailed {
        /// The error.
        error: String,
    },
    /// Warning: rank `rank` panics and writes its own records without gathering.
    ReportRankOnly {
        /// The rank.
        rank: u64,
    },
    /// Warning: the provenance records of ranks `first` to `last` are unreadable and left out
    /// of the report.
    RecordsUnreadable {
        /// The first rank.
        first: u64,
        /// The last rank.
        last: u64,
        /// Why (a few distinct reasons; escaped by the `Display`, since decoding errors may
        /// quote the bytes received).
        errors: Vec<String>,
    },

    // --- Run sync -------------------------------------------------------------------------
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

impl Event {
    /// How much it matters.
    pub fn level(&self) -> Level {
        use Event::*;
        match self {
            LockWait { .. }
            | LockStillWaiting { .. }
            | LockTaken { .. }
            | JuliaLockWait { .. }
            | JuliaLockFree { .. }
            | StalePidfileRemoved { .. }
            | ResumingBroken { .. }
            | Resuming { .. }
            | PartialOnNode { .. }
            | PartialRemoved { .. }
            | FoundInSharedDepot { .. }
            | UsageEntryKept { .. }
            | UsageLogNotCompacted { .. }
            | HashingInstalledCopy { .. }
            | LeftoverRemoved { .. }
            | ProbeFileRemoved { .. }
            | ReportWritten { .. }
            | UploadTempsRemoved { .. } => Level::Info,
            Downloading { .. }
            | Redirect { .. }
            | RangeFallback { .. }
            | ConnectionClosed { .. }
            | Installed { .. }
            | ReceivedOverMpi { .. }
            | LeftoverKept { .. }
            | UsageRecordFailed { .. }
            | UsageLogUnlocked { .. }
            | TreeSha256NotRecorded { .. } => Level::Detail,
            LockFileUnusable { .. }
            | LockRefused { .. }
            | JuliaLockUnusable { .. }
            | TlsNotVerified { .. }
            | Retry { .. }
            | NextSource { .. }
            | PackageServerFallback { .. }
            | PartialFallback { .. }
            | InstallFailed { .. }
            | PartialNotKept { .. }
            | PartialUnusable { .. }
            | PartialRestart { .. }
            | KeptBytesFailedVerification { .. }
            | SlowDebugBuild { .. }
            | ConfigOutOfRange { .. }
            | TempDirMovedAway { .. }
            | CannotRemove { .. }
            | UsageNotRecorded { .. }
            | ReportFailed { .. }
            | ReportRankOnly { .. }
            | RecordsUnreadable { .. }
            | SlowSync { .. }
            | NotSynced { .. }
            | NotRestored { .. } => Level::Warning,
        }
    }
}

impl fmt::Display for Event {
    #[expect(
        clippy::too_many_lines,
        reason = "one arm per kind of notice: every line the user reads, side by side in one place"
    )]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Event::*;
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
            Downloading { artifact, url } => {
                write!(f, "downloading `{artifact}` from `{}`", printable(url))
            }
            Redirect { from, to } => write!(
                f,
                "redirected from `{}` to `{}`",
                printable(from),
                printable(to)
            ),
            TlsNotVerified { host } => write!(
                f,
                "not verifying the TLS certificate of `{}` ({NO_VERIFY_HOSTS}); the sha256 and \
                 the tree hash still check what is downloaded",
                printable(host)
            ),
            Retry {
                error,
                delay,
                attempt,
                attempts,
                ..
            } => write!(
                f,
                "{error}; retrying in {:.1} s (attempt {attempt} of {attempts}, {RETRIES})",
                delay.as_secs_f64()
            ),
            NextSource { error, .. } => write!(f, "{error}; trying the next URL"),
            PackageServerFallback {
                artifact, error, ..
            } => write!(
                f,
                "the package server could not provide `{artifact}` ({error}); trying the \
                 manifest's URLs"
            ),
            PartialFallback { artifact, why } => write!(
                f,
                "cannot fetch only some files of `{artifact}` ({}); downloading it whole",
                printable(why)
            ),
            InstallFailed { error } => f.write_str(error),
            ResumingBroken {
                artifact,
                at,
                error,
            } => write!(
                f,
                "the download of `{artifact}` broke at byte {at} ({error}); resuming there"
            ),
            Resuming {
                artifact,
                at,
                of,
                kept_in,
            } => write!(
                f,
                "resuming the download of `{artifact}` at {} of {} (kept in `{}` by an earlier \
                 attempt)",
                human_bytes(*at),
                human_bytes(*of),
                kept_in.display()
            ),
            PartialNotKept { artifact, why } => write!(
                f,
                "the download of `{artifact}` is not kept for resuming: {why}"
            ),
            PartialUnusable { path, why } => write!(
                f,
                "the kept partial download `{}` {why}; removing it and starting over",
                path.display()
            ),
            PartialRestart { path, why } => write!(
                f,
                "the partial download `{}` cannot be continued: {why}; starting over",
                path.display()
            ),
            KeptBytesFailedVerification {
                artifact,
                kept,
                path,
                error,
            } => write!(
                f,
                "the download of `{artifact}` continued from {} kept in `{}` by an earlier \
                 attempt, and failed verification ({error}); the kept bytes were deleted and \
                 the download starts over",
                human_bytes(*kept),
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
            PartialRemoved { path, days } => write!(
                f,
                "removed the partial download `{}`: nothing was added to it for {days} days",
                path.display()
            ),
            RangeFallback { why } => write!(f, "{why}; one stream from now on"),
            ConnectionClosed { id, status } => write!(
                f,
                "connection {id} closed: HTTP {status} to a range request"
            ),
            Installed {
                artifact,
                from,
                path,
                received,
                reused,
            } => {
                let from = match from {
                    None => String::new(),
                    Some(words) => format!(" {words}"),
                };
                write!(
                    f,
                    "installed `{artifact}`{from} into `{}`",
                    printable(&path.display().to_string())
                )?;
                match reused {
                    0 => Ok(()),
                    n => write!(
                        f,
                        " ({} received, {} reused from an earlier partial download)",
                        human_bytes(*received),
                        human_bytes(*n)
                    ),
                }
            }
            ReceivedOverMpi {
                artifact,
                from_node,
                path,
            } => write!(
                f,
                "installed `{artifact}` received over MPI from node `{}` into `{}`",
                printable(from_node),
                printable(&path.display().to_string())
            ),
            FoundInSharedDepot {
                artifact,
                depot,
                path,
            } => write!(
                f,
                "`{artifact}` found in the shared depot `{}`: nothing copied to node depots \
                 (every rank reads `{}`; remove it from the shared depot to have node-local \
                 copies)",
                depot.display(),
                path.display()
            ),
            SlowDebugBuild {
                artifact,
                bytes,
                took,
                bytes_per_second,
            } => write!(
                f,
                "artifact `{artifact}` ({:.0} MiB) took {:.1} s to install: this debug build \
                 hashes at {:.0} MB/s, since its hashing and decompression crates are compiled \
                 unoptimised (cargo applies the dev-profile settings of the model's own \
                 workspace only). Add the `[profile.dev.package]` block of the clima-artifacts \
                 README (\"Using it in a model\") to your workspace's root Cargo.toml, or use \
                 `cargo run --release`: installs then run about 10x faster",
                *bytes as f64 / f64::from(1 << 20),
                took.as_secs_f64(),
                bytes_per_second / 1e6
            ),
            ConfigOutOfRange {
                variable,
                value,
                min,
                max,
                used,
            } => write!(
                f,
                "{variable}=`{}` is out of range ({min} to {max}): using {used}",
                printable(value)
            ),
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
            HashingInstalledCopy { artifact, path } => write!(
                f,
                "hashing the installed copy of `{artifact}` at `{}` once: its manifest entry \
                 gives a git-tree-sha256, and this copy was installed by its git-tree-sha1 \
                 alone (the result is recorded beside it)",
                printable(&path.display().to_string())
            ),
            TreeSha256NotRecorded { path, error } => write!(
                f,
                "cannot record the git-tree-sha256 of `{}` ({error}); it is hashed again next \
                 time",
                printable(&path.display().to_string())
            ),
            ReportWritten {
                markdown,
                json,
                bibtex,
            } => write!(
                f,
                "provenance report written to `{}`, `{}` and `{}`",
                markdown.display(),
                json.display(),
                bibtex.display()
            ),
            ReportFailed { error } => write!(f, "could not write the provenance report: {error}"),
            ReportRankOnly { rank } => write!(
                f,
                "panicking: writing rank {rank}'s own provenance records without gathering"
            ),
            RecordsUnreadable {
                first,
                last,
                errors,
            } => {
                let ranks = if first == last {
                    format!("rank {first}")
                } else {
                    format!("ranks {first}-{last}")
                };
                let why = match errors.as_slice() {
                    [] => String::new(),
                    errors => format!(
                        " ({}; are all ranks running the same binary?)",
                        printable(&errors.join("; "))
                    ),
                };
                write!(
                    f,
                    "provenance records from {ranks} are unreadable and left out of the \
                     report{why}"
                )
            }
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
