//! A depot's usage log, `logs/artifact_usage.toml` in Julia's format: which manifests used
//! the depot and when (what `gc`, ours and Pkg's, keeps artifacts for), and Pkg's lock of it.
//!
//! Pkg rewrites the log (read, add, condense, rename over it) under
//! `mkpidlock("<log>.pid", stale_age = 3)`, and waits for that lock as long as its holder is
//! alive by `Pidfile`'s stale rule. Nothing of ours writes to the log without that lock: an
//! append made while a Julia process rewrites the log would land in the file its rename
//! replaces, and a compaction would drop what that process adds. A run that cannot have the
//! lock within [`USAGE_LOCK_WAIT`] (a Julia process on a slow shared filesystem) keeps its entry
//! in a file of its own beside the log (`.artifact_usage.toml.clima-pending-<owner>`, written
//! atomically); the next run that writes the log, or `clima-artifacts gc`, merges it in under
//! the lock and removes it (only its own user's: another user's is merged and left for them).
//! `gc` counts those entries too.

use clima_artifact_progress::Reporting;
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::notice::{
    LockEvent, Planted, UsageEvent, UsageLogUnlockedReason, UsageNotRecordedReason,
};
use clima_artifact_fs::Dir;
use clima_artifact_manifest::layout::{self, USAGE_LOG, USAGE_PENDING_MARK};

use crate::depot::Depot;
use crate::installed::{Installed, Origin};
use crate::julia_lock::{Holder, JuliaPidfile, Take};

/// How recent an entry of a manifest in the usage log must be for [`Depot::record_usage`] to skip
/// writing another one (so the log grows by at most one entry per manifest and day; `gc`
/// compacts it).
pub const USAGE_RECORD_EVERY: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// How long a run ([`Depot::record_usage`]) waits for Pkg's lock of the usage log before it
/// keeps its entry for the next run to merge (a model's start is not held up longer).
pub const USAGE_LOCK_WAIT: Duration = Duration::from_secs(10);

/// Pkg's `stale_age` for its lock of the usage log (`write_env_usage`), in seconds.
const USAGE_STALE_AGE: f64 = 3.0;

/// The most read of one file of kept entries (a run keeps one entry in it).
const MAX_PENDING_BYTES: u64 = 64 << 10;

impl Depot {
    /// Records that `manifest` used the depot, in `<depot>/logs/artifact_usage.toml` (Julia's format:
    /// `[["<manifest>"]]` with a `time`), once per process and depot, and only when the log has no
    /// entry of that manifest from the last [`USAGE_RECORD_EVERY`]. Best effort: failures are
    /// logged at debug level and otherwise ignored. The CLI's `gc` reads this file and keeps every
    /// artifact a recorded manifest names.
    ///
    /// The entry is appended under Pkg's lock of the log, waited for at most
    /// [`USAGE_LOCK_WAIT`] by Julia's stale rule; past that, it is kept in a file of its own
    /// beside the log for the next run to merge ([`PendingUsage`]), which this run also does
    /// for the entries earlier runs of this user kept.
    /// What cannot be recorded is said through `reporting`.
    pub fn record_usage(&self, manifest: &Path, reporting: &Reporting) {
        static DONE: LazyLock<Mutex<HashSet<(PathBuf, PathBuf)>>> =
            LazyLock::new(|| Mutex::new(HashSet::new()));
        let key = (self.root().to_owned(), manifest.to_owned());
        {
            let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
            if !done.insert(key) {
                return;
            }
        }
        let logs = self.logs_dir();
        let path = self.usage_log();
        let now = SystemTime::now();
        let entry = log_entry(&manifest.to_string_lossy(), now);
        // Checked first: on the first lookup of a model's run this is usually all there is to do
        // (four system calls), and it needs no `logs` folder.
        let since = now
            .checked_sub(USAGE_RECORD_EVERY)
            .map(clima_artifact_fs::utc_timestamp);
        if let Some(since) = since
            && recorded_since(&path, &manifest.to_string_lossy(), &since)
        {
            return;
        }
        // Through another user's symlink the entry would land in their target (say, the
        // victim's own `~/.julia/logs`): not written, and said once.
        if let Ok(Some(link)) = clima_artifact_fs::foreign_link(&logs) {
            reporting.emit(UsageEvent::UsageNotRecorded {
                path: path.clone(),
                why: UsageNotRecordedReason::ForeignLink(link),
            });
            return;
        }
        if let Err(e) = std::fs::create_dir_all(&logs) {
            reporting.emit(UsageEvent::UsageRecordFailed {
                path: path.clone(),
                error: e.to_string(),
            });
            return;
        }
        let _julia = match usage_log_pidlock(&logs, USAGE_LOCK_WAIT, None, reporting) {
            LogLock::Held(pidfile) => pidfile,
            LogLock::Busy(holder) => {
                return keep_for_next_run(&logs, &path, &entry, &holder, reporting);
            }
        };
        // This user's entries that earlier runs could not write in time go in first.
        let pending = PendingUsage::read(self, true);
        let bytes = pending.as_log_text() + &entry;
        match append_to_regular_file(&path, bytes.as_bytes()) {
            Ok(()) => pending.remove_merged(),
            Err(Append::Planted(what)) => reporting.emit(UsageEvent::UsageNotRecorded {
                path: path.clone(),
                why: UsageNotRecordedReason::Planted(what),
            }),
            Err(Append::Io(e)) => reporting.emit(UsageEvent::UsageRecordFailed {
                path: path.clone(),
                error: e.to_string(),
            }),
        }
    }
}

/// One entry of the usage log, as Julia writes it and reads it back.
fn log_entry(manifest: &str, time: SystemTime) -> String {
    format!(
        "[[{}]]\ntime = {}\n",
        clima_artifact_manifest::toml_string(manifest),
        clima_artifact_fs::utc_timestamp(time)
    )
}

/// Keeps `entry` (for the usage log `log` in `logs`, whose lock `holder` held too long) in a
/// new file of its own for the next run to merge, and says so.
fn keep_for_next_run(logs: &Path, log: &Path, entry: &str, holder: &Holder, reporting: &Reporting) {
    let kept = logs.join(clima_artifact_fs::temp_name(USAGE_LOG, USAGE_PENDING_MARK));
    let event = match clima_artifact_fs::write_atomically(&kept, entry.as_bytes()) {
        Ok(()) => UsageEvent::UsageEntryKept {
            log: log.to_path_buf(),
            kept,
            holder: holder.describe(),
        },
        Err(e) => UsageEvent::UsageRecordFailed {
            path: log.to_path_buf(),
            error: format!(
                "its lock is held by {}, and the entry cannot be kept for the next run: {e}",
                holder.describe()
            ),
        },
    };
    reporting.emit(event);
}

/// Usage entries that runs kept beside a depot's log for the next run to merge (when Pkg's
/// lock of the log was held too long; `logs/.artifact_usage.toml.clima-pending-<owner>`), as read from
/// their files.
pub struct PendingUsage {
    /// The logs folder, and this user's files that were read (removed once merged).
    own: Option<(Dir, Vec<(std::ffi::OsString, std::fs::File)>)>,
    /// Every entry read: the manifest and its time.
    pub entries: Vec<(String, SystemTime)>,
}

impl PendingUsage {
    /// Reads the kept entries of `depot` (only this user's files with `only_own`). Each file is
    /// opened without following a link, without blocking, as a regular file only, at most
    /// 64 KiB, and must hold nothing but usage entries (any other file is left out): what is
    /// merged into the log is written anew from the parsed entries, so a planted file cannot
    /// change the log's syntax.
    pub fn read(depot: &Depot, only_own: bool) -> PendingUsage {
        let mut pending = PendingUsage {
            own: None,
            entries: Vec::new(),
        };
        let Ok(dir) = Dir::open(&depot.logs_dir()) else {
            return pending;
        };
        let mut own = Vec::new();
        for e in dir.entries().unwrap_or_default() {
            let Some(name) = e.name.to_str() else {
                continue;
            };
            let kept = clima_artifact_fs::temp_owner(name, USAGE_PENDING_MARK)
                .is_some_and(|(head, _, _)| head == USAGE_LOG);
            if !kept {
                continue;
            }
            let Ok(Some(file)) = dir.open_file(&e.name) else {
                continue;
            };
            let Ok(meta) = file.metadata() else {
                continue;
            };
            let mine = std::os::unix::fs::MetadataExt::uid(&meta) == clima_artifact_fs::euid();
            if only_own && !mine {
                continue;
            }
            let Some(entries) = parse_entries(&file) else {
                continue;
            };
            pending.entries.extend(entries);
            if mine {
                own.push((e.name.clone(), file));
            }
        }
        pending.own = Some((dir, own));
        pending
    }

    /// Whether no entry was read.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries as text of the usage log.
    pub fn as_log_text(&self) -> String {
        self.entries
            .iter()
            .map(|(manifest, time)| log_entry(manifest, *time))
            .collect()
    }

    /// Removes this user's files that were read, once their entries are in the log (under
    /// its lock); a file replaced since it was read is left alone.
    pub fn remove_merged(self) {
        if let Some((dir, files)) = self.own {
            for (name, file) in files {
                let _ = dir.remove_file_if_same(&name, &file);
            }
        }
    }
}

/// The entries of a file of kept usage entries: `None` unless it is nothing but entries in
/// the usage log's format (at most [`MAX_PENDING_BYTES`]).
fn parse_entries(file: &std::fs::File) -> Option<Vec<(String, SystemTime)>> {
    use std::io::Read;
    let mut text = String::new();
    file.take(MAX_PENDING_BYTES + 1)
        .read_to_string(&mut text)
        .ok()?;
    if text.len() as u64 > MAX_PENDING_BYTES {
        return None;
    }
    let table: toml::Table = text.parse().ok()?;
    let mut entries = Vec::new();
    for (manifest, infos) in table {
        for info in infos.as_array()? {
            let time = info.as_table()?.get("time")?.as_datetime()?.to_string();
            entries.push((
                manifest.clone(),
                clima_artifact_fs::parse_utc_timestamp(&time)?,
            ));
        }
    }
    Some(entries)
}

/// Pkg's lock of a depot's usage log, held while this value lives (see
/// [`Depot::lock_usage_log`]).
#[must_use = "the lock is released when this value is dropped"]
pub struct UsageLogLock {
    _held: Option<JuliaPidfile>,
}

/// Pkg's lock of a usage log stayed held for the whole wait of [`Depot::lock_usage_log`].
#[derive(Debug, Clone)]
pub struct UsageLogBusy {
    /// Who holds it (`pid N on host H`; escaped).
    pub holder: String,
}

impl Depot {
    /// Takes Pkg's lock of `depot`'s `logs/artifact_usage.toml` (the pidfile Julia 1.13's
    /// `write_env_usage` and `gc` take) before rewriting the log, as `clima-artifacts gc` does
    /// when it compacts it: waited for as Julia waits (while its holder is alive by Julia's
    /// stale rule; a stale pidfile is taken over), at most `wait`, saying so while it waits.
    /// [`UsageLogBusy`] when a live holder kept it that long: the log must not be rewritten.
    /// A pidfile that cannot be used at all (no permission, something planted at its name) is
    /// said, and the lock is then `Ok` without it, as Julia could not take it either.
    pub fn lock_usage_log(
        &self,
        wait: Duration,
        reporting: &Reporting,
    ) -> Result<UsageLogLock, UsageLogBusy> {
        match usage_log_pidlock(&self.logs_dir(), wait, Some(&self.usage_log()), reporting) {
            LogLock::Held(held) => Ok(UsageLogLock { _held: held }),
            LogLock::Busy(holder) => Err(UsageLogBusy {
                holder: holder.describe(),
            }),
        }
    }
}

/// What waiting for Pkg's lock of a usage log came to.
enum LogLock {
    /// Held (`None`: its pidfile cannot be used; said).
    Held(Option<JuliaPidfile>),
    /// A live holder (by Julia's rule) had it for the whole wait.
    Busy(Holder),
}

/// Pkg's lock of the usage log in `logs` (`write_env_usage`:
/// `mkpidlock("<log>.pid", stale_age = 3)`), waited for at most `wait`; with `tell` (the log),
/// the wait is said once, naming the holder.
fn usage_log_pidlock(
    logs: &Path,
    wait: Duration,
    tell: Option<&Path>,
    reporting: &Reporting,
) -> LogLock {
    let start = Instant::now();
    let name = layout::pidfile_name(USAGE_LOG);
    let mut pause = Duration::from_millis(20);
    let mut told = false;
    loop {
        match JuliaPidfile::try_take_file(logs, &name, USAGE_STALE_AGE, reporting) {
            Take::Held(pidfile) => return LogLock::Held(Some(pidfile)),
            Take::Unusable(why) => {
                reporting.emit(UsageEvent::UsageLogUnlocked {
                    why: UsageLogUnlockedReason::Pidfile(why),
                });
                return LogLock::Held(None);
            }
            Take::Busy(holder) if start.elapsed() >= wait => return LogLock::Busy(holder),
            Take::Busy(holder) => {
                if let Some(log) = tell.filter(|_| !told) {
                    told = true;
                    reporting.emit(LockEvent::LockWait {
                        what: format!("the usage log `{}`", log.display()),
                        path: logs.join(&name),
                        holder: holder.describe(),
                        timeout: wait,
                    });
                }
                let left = wait.saturating_sub(start.elapsed());
                std::thread::sleep(pause.min(left));
                pause = (pause * 2).min(Duration::from_millis(250));
            }
        }
    }
}

/// Records that `manifest` used the artifact `installed` (see [`Depot::record_usage`]): in
/// `first` (a process's first depot), and in the depot that holds the artifact when that is
/// another one. Julia's
/// `Pkg.gc()` reads only the usage logs of the depots it collects, and since Pkg 1.13 deletes
/// an unreachable artifact at once: a Julia user whose first depot is the shared depot that
/// holds this artifact must find its manifest in that depot's log.
pub fn record_usage_of(
    first: Option<&Depot>,
    installed: &Installed,
    manifest: &Path,
    reporting: &Reporting,
) {
    if let Some(first) = first {
        first.record_usage(manifest, reporting);
    }
    if matches!(installed.origin, Origin::Override { .. }) {
        return;
    }
    let holder = installed
        .path
        .parent()
        .filter(|a| a.file_name() == Some(std::ffi::OsStr::new(layout::ARTIFACTS)))
        .and_then(Path::parent);
    if let Some(holder) = holder
        && Some(holder) != first.map(Depot::root)
    {
        Depot::new(holder).record_usage(manifest, reporting);
    }
}

/// Whether the usage log at `path` has an entry of `manifest` with a `time` at or after `since`
/// (both RFC 3339 UTC, which compare as text). The log is read without following a symlink, as
/// a regular file only, and at most its last 16 MiB.
fn recorded_since(path: &Path, manifest: &str, since: &str) -> bool {
    use std::io::{Seek, SeekFrom};
    use std::os::unix::fs::OpenOptionsExt;
    const MAX: u64 = 16 << 20;
    let Ok(mut f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    else {
        return false;
    };
    let Ok(meta) = f.metadata() else { return false };
    if !meta.is_file() {
        return false;
    }
    let tail = meta.len() > MAX;
    if tail && f.seek(SeekFrom::Start(meta.len() - MAX)).is_err() {
        return false;
    }
    // Read what fstat promised, in as few reads as it takes (usually one).
    let mut bytes = vec![0u8; meta.len().min(MAX) as usize];
    let Ok(filled) = clima_artifact_fs::read_full(&mut f, &mut bytes) else {
        return false;
    };
    bytes.truncate(filled);
    if tail {
        // Reading from the middle of the log: start at the next whole line (the cut may be
        // inside a character).
        let start = bytes
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |i| i + 1);
        bytes.drain(..start);
    }
    let Ok(text) = String::from_utf8(bytes) else {
        // Not UTF-8 (or cut inside a character at the start): treat as not recorded.
        return false;
    };
    let header = format!("[[{}]]", clima_artifact_manifest::toml_string(manifest));
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() != header {
            continue;
        }
        if let Some(time) = lines
            .next()
            .and_then(|l| l.trim().strip_prefix("time"))
            .map(|rest| rest.trim_start().trim_start_matches('=').trim())
            && time >= since
        {
            return true;
        }
    }
    false
}

/// Why [`append_to_regular_file`] did not append.
enum Append {
    /// Something other than a regular file is at the path (what it is).
    Planted(Planted),
    /// Any other failure.
    Io(std::io::Error),
}

/// Appends `bytes` in one write to the regular file at `path` (created if missing), for files
/// in folders others may write to: a symlink at `path` is never followed (`O_NOFOLLOW`) and a
/// fifo never blocks (`O_NONBLOCK`); only a regular file is written.
fn append_to_regular_file(path: &Path, bytes: &[u8]) -> Result<(), Append> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => Append::Planted(Planted::Symlink),
            _ => Append::Io(e),
        })?;
    let meta = f.metadata().map_err(Append::Io)?;
    if !meta.is_file() {
        return Err(Append::Planted(Planted::SpecialFile));
    }
    // One write: appends from concurrent processes do not interleave.
    f.write_all(bytes).map_err(Append::Io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_log_appends_once_per_process() {
        let dir = tempfile::tempdir().unwrap();
        Depot::new(dir.path()).record_usage(Path::new("/p/Artifacts.toml"), &Reporting::default());
        Depot::new(dir.path()).record_usage(Path::new("/p/Artifacts.toml"), &Reporting::default());
        Depot::new(dir.path()).record_usage(Path::new("/q/\"odd\".toml"), &Reporting::default());
        let s = std::fs::read_to_string(dir.path().join("logs/artifact_usage.toml")).unwrap();
        assert_eq!(s.matches("[[").count(), 2, "{s}");
        assert!(s.contains("[[\"/p/Artifacts.toml\"]]\ntime = "), "{s}");
        assert!(s.contains("[[\"/q/\\\"odd\\\".toml\"]]"), "{s}");
    }

    #[test]
    fn usage_log_gets_at_most_one_entry_per_manifest_and_day() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        let log = logs.join("artifact_usage.toml");
        let now = clima_artifact_fs::utc_timestamp(std::time::SystemTime::now());
        std::fs::write(
            &log,
            format!("[[\"/day/Artifacts.toml\"]]\ntime = {now}\n[[\"/old/Artifacts.toml\"]]\ntime = 2020-01-01T00:00:00Z\n"),
        )
        .unwrap();
        // Recorded today already (by another process): not written again.
        Depot::new(dir.path())
            .record_usage(Path::new("/day/Artifacts.toml"), &Reporting::default());
        // Recorded long ago: a new entry.
        Depot::new(dir.path())
            .record_usage(Path::new("/old/Artifacts.toml"), &Reporting::default());
        let s = std::fs::read_to_string(&log).unwrap();
        assert_eq!(s.matches("[[\"/day/Artifacts.toml\"]]").count(), 1, "{s}");
        assert_eq!(s.matches("[[\"/old/Artifacts.toml\"]]").count(), 2, "{s}");
    }

    /// A log over 16 MiB is read from its last 16 MiB; a cut inside a character there must not
    /// hide today's entry (it would be written again on every run).
    #[test]
    fn a_long_log_cut_inside_a_character_still_finds_todays_entry() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        let log = logs.join("artifact_usage.toml");
        let now = clima_artifact_fs::utc_timestamp(std::time::SystemTime::now());
        let entry = format!("[[\"/day/Artifacts.toml\"]]\ntime = {now}\n");
        // Old entries of a manifest with a non-ASCII name (two-byte characters), so that the
        // 16 MiB cut falls inside a character, then today's entry.
        let old = "[[\"/données/Artifacts.toml\"]]\ntime = 2020-01-01T00:00:00Z\n";
        let old_part = old.repeat((16 << 20) / old.len() + 10);
        // Pad between the old entries and today's so that the cut (16 MiB from the end) falls
        // on the second byte of an `é`.
        let cut = old_part.len() + entry.len() - (16 << 20);
        let e = cut
            + old_part.as_bytes()[cut..]
                .windows(2)
                .position(|w| w == "é".as_bytes())
                .unwrap();
        let pad = e + 1 - cut;
        let text = format!("{old_part}{}\n{entry}", "#".repeat(pad - 1));
        let cut = text.len() - (16 << 20);
        assert!(
            !text.is_char_boundary(cut),
            "the test must cut inside a character"
        );
        std::fs::write(&log, &text).unwrap();
        Depot::new(dir.path())
            .record_usage(Path::new("/day/Artifacts.toml"), &Reporting::default());
        let after = std::fs::read_to_string(&log).unwrap();
        assert_eq!(after.len(), text.len(), "today's entry was written again");
    }

    #[test]
    fn usage_log_never_follows_a_planted_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        std::fs::create_dir(dir.path().join("logs")).unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join("logs/artifact_usage.toml")).unwrap();
        Depot::new(dir.path())
            .record_usage(Path::new("/planted/Artifacts.toml"), &Reporting::default());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    }
}
