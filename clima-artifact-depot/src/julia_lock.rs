//! Julia's install lock (Pkg 1.13): `<depot>/artifacts/<git-tree-sha1>.pid`.
//!
//! Pkg 1.13 (`download_artifact` in Pkg's `src/Artifacts.jl`, from Pkg.jl #4168) installs an
//! artifact inside `FileWatching.mkpidlock(artifact_paths(hash)[1] * ".pid", stale_age = 20)`:
//! a pidfile next to the artifact's folder in the first depot. Its format and rules are Base's
//! `Pidfile` module (`base/pidfile.jl`, re-exported by the FileWatching stdlib):
//!
//! - `tryopen_exclusive`: the file is created with `O_CREAT | O_EXCL`, mode `0o444` (less the
//!   umask); whoever creates it holds the lock;
//! - `write_pidfile`: its content is `"<pid> <gethostname()>"`, no newline;
//! - the `refresh` timer of `mkpidlock` (`refresh = stale_age / 2`, 10 s) `touch`es the open
//!   file, so its mtime says the holder is alive;
//! - `parse_pidfile`: the text up to the first space is the pid (`tryparse(Cuint, ...)`, 0 when
//!   that fails), the rest the host; the age is now less the mtime;
//! - `isvalidpid`: a pid of another host is always taken as alive (it cannot be inspected);
//!   on this host (or with an empty host) pid 0 and pids above `typemax(Cint)` are dead, else
//!   the pid is alive unless `kill(pid, 0)` says `ESRCH`;
//! - `stale_pidfile`: stale when older than `stale_age` and (older than 25 × `stale_age` or its
//!   pid is not valid): 20 s for a dead holder on this host, 500 s for another host's. We also
//!   take as stale a pidfile dated more than `stale_age` in the future whose pid is not valid
//!   (a dead holder of this host): Julia would wait until its date, however far;
//! - `open_exclusive`: a waiter removes a stale pidfile (`tryrmopenfile`) and tries again;
//! - `close(::LockMonitor)`: the holder removes the pidfile only while the path is still its
//!   own file (`samefile`), and stops the refresh timer.
//!
//! [`JuliaPidfile`] takes part: while we install, it holds that pidfile in Julia's format and
//! refreshes its mtime every `stale_age / 2` (10 s) from a thread, so a Julia process waits for us, and treats our
//! pidfile as stale exactly when it would treat its own as stale. We create it with its content
//! already in place (written to a temp file in `.locks`, then hard-linked to the pidfile's name,
//! which fails if anything is there), so ours is never seen empty. A pidfile in our way is
//! removed only when it is stale by Julia's own rule, or when it is provably one of ours: its
//! pid is dead on this host and is the pid our own lock file names as its last holder, which
//! died holding it (a killed Rust installer; its pidfile would otherwise stall the next install
//! for 20 s). Removal checks that the name still is the file judged (device and inode), and
//! nothing is ever followed through a symlink (the depot may be shared with hostile users).
//!
//! The same protocol guards Pkg's usage logs: `write_env_usage` (Pkg's `src/Types.jl`) reads
//! `logs/artifact_usage.toml` and replaces it by an atomic rename inside
//! `mkpidlock(usage_file * ".pid", stale_age = 3)`; our appends take that pidfile too
//! ([`JuliaPidfile::try_take_file`]), so they never land in a file Julia is replacing.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use clima_artifact_fs::Dir;

use crate::notice::{LockEvent, PidfileReason, StaleReason};
use clima_artifact_manifest::GitTreeSha1;
use clima_artifact_manifest::layout;
use clima_artifact_progress::Reporting;

/// Pkg's `stale_age` for artifact installs (`mkpidlock(pidfile, stale_age = 20)`), in seconds.
pub(crate) const STALE_AGE: f64 = 20.0;

/// How much of a pidfile is read (Julia reads it all; a host name is at most 255 bytes).
const MAX_PIDFILE_BYTES: usize = 4096;

/// The temp names of pidfiles being created (in `.locks`, linked into place at once).
const TEMP_MARK: &str = ".clima-pid-";

/// Who holds a pidfile, as Julia's `parse_pidfile` reads it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Holder {
    /// The pid (0 when the text before the first space is not one).
    pub(crate) pid: u32,
    /// The host name (everything after the first space).
    pub(crate) host: String,
    /// Seconds since its mtime (negative when the clocks are skewed).
    pub(crate) age: f64,
}

impl Holder {
    /// Julia's `parse_pidfile` of `bytes` with mtime `mtime`.
    pub(crate) fn parse(bytes: &[u8], mtime: SystemTime) -> Holder {
        let text = String::from_utf8_lossy(bytes);
        let (pid, host) = match text.split_once(' ') {
            Some((pid, host)) => (pid, host),
            None => (&*text, ""),
        };
        let age = match SystemTime::now().duration_since(mtime) {
            Ok(d) => d.as_secs_f64(),
            Err(e) => -e.duration().as_secs_f64(),
        };
        Holder {
            pid: parse_cuint(pid).unwrap_or(0),
            host: host.to_owned(),
            age,
        }
    }

    /// Julia's `isvalidpid(hostname, pid)`: whether the holder may be alive.
    pub(crate) fn may_be_alive(&self) -> bool {
        if !(self.host.is_empty() || self.host == clima_artifact_fs::hostname()) {
            return true; // another host's pid cannot be inspected
        }
        if self.pid == 0 || self.pid > i32::MAX as u32 {
            return false;
        }
        // kill(pid, 0) != ESRCH (EPERM: alive, another user's).
        clima_artifact_fs::pid_alive(self.pid as i32)
    }

    /// Julia's `stale_pidfile(path, stale_age)`, and one case more: a pidfile dated more than
    /// `stale_age` in the future (what Julia warns of as "filesystem time skew") whose holder
    /// is dead on this host. By Julia's rule alone it would block every install until the
    /// clock reaches its date; its holder cannot refresh it, and a live holder's file would
    /// not be taken (another host's holder is always taken as alive).
    pub(crate) fn is_stale(&self, stale_age: f64) -> bool {
        let julias = self.age > stale_age && (self.age > stale_age * 25.0 || !self.may_be_alive());
        julias || (self.age < -stale_age && !self.may_be_alive())
    }

    /// `pid N on host H`, for messages (escaped: anyone who can write to the depot wrote it).
    pub(crate) fn describe(&self) -> String {
        format!(
            "pid {} on host {}",
            self.pid,
            clima_artifact_fs::printable(&self.host)
        )
    }
}

/// Julia's `tryparse(Cuint, s)` for the decimal form (surrounding whitespace and a leading `+`
/// allowed).
fn parse_cuint(s: &str) -> Option<u32> {
    let s = s.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A held Julia pidfile: refreshed while held, removed (if still ours) when dropped.
#[derive(Debug)]
pub(crate) struct JuliaPidfile {
    dir: Dir,
    name: String,
    file: File,
    stop: Option<mpsc::Sender<()>>,
    refresher: Option<std::thread::JoinHandle<()>>,
}

/// What [`JuliaPidfile::try_take`] found.
#[derive(Debug)]
pub(crate) enum Take {
    /// We hold it now.
    Held(JuliaPidfile),
    /// A live holder (by Julia's rule) has it.
    Busy(Holder),
    /// The pidfile cannot be used (no permission, something planted): the reason, for a
    /// warning; the install goes on with our own lock only.
    Unusable(PidfileReason),
}

/// `<depot>/artifacts/<hash>.pid`, Pkg's pidfile of `hash` in `depot`.
pub(crate) fn pidfile_path(depot: &Path, hash: &GitTreeSha1) -> PathBuf {
    layout::julia_pidfile(depot, hash)
}

impl JuliaPidfile {
    /// One attempt at Julia's pidfile of `hash` in `depot`: a pidfile in the way that is stale
    /// by Julia's rule (or left by `dead_rust_holder`, the dead last holder of our own lock, as
    /// `(pid, host)`) is removed and the creation tried again.
    pub(crate) fn try_take(
        depot: &Path,
        hash: &GitTreeSha1,
        dead_rust_holder: Option<&(u32, String)>,
        reporting: &Reporting,
    ) -> Take {
        let path = pidfile_path(depot, hash);
        let artifacts = layout::artifacts_dir(depot);
        let unusable = |e: std::io::Error| {
            Take::Unusable(PidfileReason::CannotTakeInstallLock {
                path: path.clone(),
                error: e.into(),
            })
        };
        if let Err(e) = std::fs::create_dir_all(artifacts.join(layout::LOCKS)) {
            return unusable(e);
        }
        let dir = match Dir::open(&artifacts) {
            Ok(d) => d,
            Err(e) => return unusable(e),
        };
        let locks = match dir.open_dir(layout::LOCKS) {
            Ok(Some(d)) => d,
            Ok(None) => return unusable(std::io::ErrorKind::NotFound.into()),
            Err(e) => return unusable(e),
        };
        let name = layout::Entry::JuliaPidfile(*hash).name();
        take_in(
            dir,
            &locks,
            name,
            &path,
            STALE_AGE,
            dead_rust_holder,
            reporting,
        )
    }

    /// One attempt at the pidfile `name` in the folder `folder` (created if missing), with
    /// Julia's `stale_age` in seconds (Pkg's usage logs: `<log>.pid` with `stale_age = 3`).
    pub(crate) fn try_take_file(
        folder: &Path,
        name: &str,
        stale_age: f64,
        reporting: &Reporting,
    ) -> Take {
        let path = folder.join(name);
        let dir = std::fs::create_dir_all(folder).and_then(|()| Dir::open(folder));
        let (dir, temps) = match dir.and_then(|d| Ok((d.try_clone()?, d))) {
            Ok(pair) => pair,
            Err(e) => {
                return Take::Unusable(PidfileReason::CannotTake {
                    path,
                    error: e.into(),
                });
            }
        };
        take_in(
            dir,
            &temps,
            name.to_owned(),
            &path,
            stale_age,
            None,
            reporting,
        )
    }
}

/// [`JuliaPidfile::try_take`] of the pidfile `name` (at `path`) of `dir`, its temp file made
/// in `temps`.
fn take_in(
    dir: Dir,
    temps: &Dir,
    name: String,
    path: &Path,
    stale_age: f64,
    dead_rust_holder: Option<&(u32, String)>,
    reporting: &Reporting,
) -> Take {
    let unusable = |e: std::io::Error| {
        Take::Unusable(PidfileReason::CannotTake {
            path: path.to_owned(),
            error: e.into(),
        })
    };
    let mut last = None;
    for _ in 0..3 {
        match create_linked(temps, &dir, &name) {
            Ok(file) => {
                let refresh = Duration::from_secs_f64(stale_age / 2.0);
                return Take::Held(JuliaPidfile::held(dir, name, file, refresh));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return unusable(e),
        }
        let file = match dir.open_file(&name) {
            Ok(Some(f)) => f,
            Ok(None) => continue, // released meanwhile
            Err(e) => return unusable(e),
        };
        let Some(holder) = read_holder(&file) else {
            continue;
        };
        let ours_dead = dead_rust_holder.is_some_and(|(pid, host)| {
            holder.pid == *pid && holder.host == *host && !holder.may_be_alive()
        });
        if !(holder.is_stale(stale_age) || ours_dead) {
            return Take::Busy(holder);
        }
        if let Ok(true) = dir.remove_file_if_same(&name, &file) {
            let why = if holder.may_be_alive() {
                // Stale while it may live: older than the stale age, so `age` is positive.
                StaleReason::NotRefreshed {
                    age: Duration::try_from_secs_f64(holder.age).unwrap_or_default(),
                }
            } else {
                StaleReason::ProcessGone
            };
            reporting.emit(LockEvent::StalePidfileRemoved {
                path: path.to_path_buf(),
                holder: holder.describe(),
                why,
            });
        }
        last = Some(holder);
    }
    match last {
        Some(holder) => Take::Busy(holder),
        None => Take::Unusable(PidfileReason::KeepsChanging {
            path: path.to_owned(),
        }),
    }
}

impl JuliaPidfile {
    fn held(dir: Dir, name: String, file: File, refresh: Duration) -> JuliaPidfile {
        let (stop, stopped) = mpsc::channel::<()>();
        let refresher = file.try_clone().ok().map(|f| {
            std::thread::spawn(move || {
                // Julia's `Timer(t -> touch(fd), refresh; interval = refresh)`.
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(refresh) {
                    touch(&f);
                }
            })
        });
        JuliaPidfile {
            dir,
            name,
            file,
            stop: Some(stop),
            refresher,
        }
    }
}

impl Drop for JuliaPidfile {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.refresher.take() {
            let _ = t.join();
        }
        // As Julia's `close(::LockMonitor)`: removed only while the name is still our file.
        let _ = self.dir.remove_file_if_same(&self.name, &self.file);
    }
}

/// Sets the mtime (and atime) of `file` to now, as Julia's `touch(::File)`.
fn touch(file: &File) {
    let now = SystemTime::now();
    let _ = file.set_times(
        std::fs::FileTimes::new()
            .set_accessed(now)
            .set_modified(now),
    );
}

/// Julia's `parse_pidfile` of an open pidfile; `None` when it cannot be read.
fn read_holder(file: &File) -> Option<Holder> {
    let meta = file.metadata().ok()?;
    let mtime = meta.modified().ok()?;
    let mut buf = vec![0u8; MAX_PIDFILE_BYTES];
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(Holder::parse(&buf[..n], mtime))
}

/// Creates the pidfile `name` in `dir` with its content in place: written to a temp file in
/// `locks` (mode `0o444` less the umask, as `tryopen_exclusive`), then hard-linked to `name`
/// (which fails with `AlreadyExists` when anything is there, a symlink included), then the temp
/// name removed. Returns the open pidfile.
fn create_linked(locks: &Dir, dir: &Dir, name: &str) -> std::io::Result<File> {
    clima_artifact_fs::reclaim_stale_temps(locks.path(), TEMP_MARK);
    let tmp = clima_artifact_fs::temp_name(name, TEMP_MARK);
    let mut file = locks.create_new_rw(&tmp, 0o444)?;
    let content = format!("{} {}", std::process::id(), clima_artifact_fs::hostname());
    let linked = file
        .write_all(content.as_bytes())
        .and_then(|()| locks.hard_link(&tmp, dir, name));
    let _ = locks.remove_file(&tmp);
    // `Dir::hard_link` keeps the error's kind: `AlreadyExists` when anything is at `name`.
    linked.map(|()| file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_as_julia_does() {
        let now = SystemTime::now();
        let h = Holder::parse(b"1234 node7", now);
        assert_eq!((h.pid, h.host.as_str()), (1234, "node7"));
        let h = Holder::parse(b"x node7", now);
        assert_eq!(h.pid, 0);
        let h = Holder::parse(b"", now);
        assert_eq!((h.pid, h.host.as_str()), (0, ""));
        let h = Holder::parse(b" 12 ", now);
        assert_eq!((h.pid, h.host.as_str()), (0, "12 "));
        assert_eq!(parse_cuint(" +42\n"), Some(42));
        assert_eq!(parse_cuint("4294967296"), None);
    }

    #[test]
    fn stale_rule_is_julias() {
        let old = |age: u64, pid: u32, host: &str| Holder {
            pid,
            host: host.to_owned(),
            age: age as f64,
        };
        let me = clima_artifact_fs::hostname();
        let live = std::process::id();
        assert!(!old(19, 0, &me).is_stale(STALE_AGE));
        assert!(old(21, 0, &me).is_stale(STALE_AGE));
        assert!(old(21, 0, "").is_stale(STALE_AGE));
        assert!(!old(21, live, &me).is_stale(STALE_AGE));
        assert!(old(501, live, &me).is_stale(STALE_AGE));
        assert!(!old(499, 1, "elsewhere").is_stale(STALE_AGE));
        assert!(old(501, 1, "elsewhere").is_stale(STALE_AGE));
        assert!(old(21, u32::MAX, &me).is_stale(STALE_AGE));
    }

    /// A pidfile dated in the future: stale at once when its holder is dead on this host
    /// (beyond the skew Julia tolerates), waited on otherwise.
    #[test]
    fn a_future_pidfile_of_a_dead_local_holder_is_stale() {
        let future = |secs: f64, pid: u32, host: &str| Holder {
            pid,
            host: host.to_owned(),
            age: -secs,
        };
        let me = clima_artifact_fs::hostname();
        let live = std::process::id();
        assert!(future(3600.0, 0, &me).is_stale(STALE_AGE));
        assert!(future(3600.0, u32::MAX, "").is_stale(STALE_AGE));
        assert!(!future(3600.0, live, &me).is_stale(STALE_AGE));
        assert!(!future(3600.0, 1, "elsewhere").is_stale(STALE_AGE));
        // Within the skew Julia tolerates: a file being written on a server slightly ahead.
        assert!(!future(1.0, 0, &me).is_stale(STALE_AGE));
    }
}
