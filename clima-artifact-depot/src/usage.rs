//! A depot's usage log, `logs/artifact_usage.toml` in Julia's format: which manifests used
//! the depot and when (what `gc`, ours and Pkg's, keeps artifacts for), and Pkg's lock of it.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

use clima_artifact_manifest::layout;
use clima_artifact_progress::notice::{
    Event, Planted, UsageLogUnlockedReason, UsageNotRecordedReason,
};

use crate::depot::Depot;
use crate::installed::{Installed, Origin};
use crate::julia_lock::{JuliaPidfile, Take};

/// How recent an entry of a manifest in the usage log must be for [`Depot::record_usage`] to skip
/// writing another one (so the log grows by at most one entry per manifest and day; `gc`
/// compacts it).
pub const USAGE_RECORD_EVERY: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

impl Depot {
    /// Records that `manifest` used the depot, in `<depot>/logs/artifact_usage.toml` (Julia's format:
    /// `[["<manifest>"]]` with a `time`), once per process and depot, and only when the log has no
    /// entry of that manifest from the last [`USAGE_RECORD_EVERY`]. Best effort: failures are
    /// logged at debug level and otherwise ignored. The CLI's `gc` reads this file and keeps every
    /// artifact a recorded manifest names.
    pub fn record_usage(&self, manifest: &Path) {
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
        let entry = format!(
            "[[{}]]\ntime = {}\n",
            clima_artifact_manifest::toml_string(&manifest.to_string_lossy()),
            clima_artifact_fs::utc_timestamp(std::time::SystemTime::now())
        );
        // Checked first: on the first lookup of a model's run this is usually all there is to do
        // (four system calls), and it needs no `logs` folder.
        let since = std::time::SystemTime::now()
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
            clima_artifact_progress::notice::emit(Event::UsageNotRecorded {
                path: path.clone(),
                why: UsageNotRecordedReason::ForeignLink(link),
            });
            return;
        }
        if let Err(e) = std::fs::create_dir_all(&logs) {
            clima_artifact_progress::notice::emit(Event::UsageRecordFailed {
                path: path.clone(),
                error: e.to_string(),
            });
            return;
        }
        let _julia = usage_log_pidlock(&logs);
        match append_to_regular_file(&path, entry.as_bytes()) {
            Ok(()) => {}
            Err(Append::Planted(what)) => {
                clima_artifact_progress::notice::emit(Event::UsageNotRecorded {
                    path: path.clone(),
                    why: UsageNotRecordedReason::Planted(what),
                })
            }
            Err(Append::Io(e)) => clima_artifact_progress::notice::emit(Event::UsageRecordFailed {
                path: path.clone(),
                error: e.to_string(),
            }),
        }
    }
}

/// Pkg's lock of a depot's usage log, held while this value lives (see
/// [`Depot::lock_usage_log`]).
#[must_use = "the lock is released when this value is dropped"]
pub struct UsageLogLock {
    _held: Option<JuliaPidfile>,
}

impl Depot {
    /// Takes Pkg's lock of `depot`'s `logs/artifact_usage.toml` (the pidfile Julia 1.13's
    /// `write_env_usage` and `gc` take) before rewriting the log, as `clima-artifacts gc` does when
    /// it compacts it: waited for at most 10 s, then the caller goes on without it (a log that
    /// cannot be locked is still better compacted than never).
    pub fn lock_usage_log(&self) -> UsageLogLock {
        UsageLogLock {
            _held: usage_log_pidlock(&self.logs_dir()),
        }
    }
}

/// Pkg's lock of the usage log (`write_env_usage`: `mkpidlock("<log>.pid", stale_age = 3)`),
/// waited for at most 10 s (Julia holds it for a read and a rename); `None` when it cannot be
/// had (the entry is appended anyway: usage records are best effort).
fn usage_log_pidlock(logs: &Path) -> Option<JuliaPidfile> {
    let start = std::time::Instant::now();
    loop {
        match JuliaPidfile::try_take_file(logs, "artifact_usage.toml.pid", 3.0) {
            Take::Held(pidfile) => return Some(pidfile),
            Take::Unusable(why) => {
                clima_artifact_progress::notice::emit(Event::UsageLogUnlocked {
                    why: UsageLogUnlockedReason::Pidfile(why),
                });
                return None;
            }
            Take::Busy(holder) if start.elapsed() > std::time::Duration::from_secs(10) => {
                clima_artifact_progress::notice::emit(Event::UsageLogUnlocked {
                    why: UsageLogUnlockedReason::Held {
                        holder: holder.describe(),
                    },
                });
                return None;
            }
            Take::Busy(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
}

/// Records that `manifest` used the artifact `installed` (see [`Depot::record_usage`]): in
/// `first` (a process's first depot), and in the depot that holds the artifact when that is
/// another one. Julia's
/// `Pkg.gc()` reads only the usage logs of the depots it collects, and since Pkg 1.13 deletes
/// an unreachable artifact at once: a Julia user whose first depot is the shared depot that
/// holds this artifact must find its manifest in that depot's log.
pub fn record_usage_of(first: Option<&Depot>, installed: &Installed, manifest: &Path) {
    if let Some(first) = first {
        first.record_usage(manifest);
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
        Depot::new(holder).record_usage(manifest);
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
        Depot::new(dir.path()).record_usage(Path::new("/p/Artifacts.toml"));
        Depot::new(dir.path()).record_usage(Path::new("/p/Artifacts.toml"));
        Depot::new(dir.path()).record_usage(Path::new("/q/\"odd\".toml"));
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
        Depot::new(dir.path()).record_usage(Path::new("/day/Artifacts.toml"));
        // Recorded long ago: a new entry.
        Depot::new(dir.path()).record_usage(Path::new("/old/Artifacts.toml"));
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
        Depot::new(dir.path()).record_usage(Path::new("/day/Artifacts.toml"));
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
        Depot::new(dir.path()).record_usage(Path::new("/planted/Artifacts.toml"));
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    }
}
