//! Per-artifact lock files between processes (and threads).
//!
//! ```text
//! <depot>/artifacts/.locks/<git-tree-sha1>.lock    "pid 1234 on node7\n" while held
//! ```
//!
//! A [`LockedFile`] holds an exclusive `flock` on its file (std's [`File::lock`]); each acquisition
//! opens its own file description, so threads of one process exclude each other too. Acquiring
//! tries without blocking first; if another process holds the lock, it logs who holds it (the
//! holder writes its pid and host into the file) and polls until the lock is free or
//! `CLIMA_ARTIFACTS_LOCK_TIMEOUT` runs out, which is an [`Error::LockTimeout`] naming the variable.
//! The lock is released in `Drop`, and by the kernel when the holder dies, so a killed process
//! never leaves a stale lock. Lock files are never deleted (deleting races with waiters).
//!
//! The lock file may sit in a depot other users can write to, so it is opened without following
//! a symlink (`O_NOFOLLOW`) or blocking on a planted fifo (`O_NONBLOCK`), must be a regular file,
//! and is never truncated: the holder's line is written over the first [`HOLDER_BYTES`] bytes
//! (space padded) and blanked on release. A planted symlink or other non-file is reported by
//! name and the install proceeds unlocked, never touching what it points to.
//!
//! The lock only saves duplicate downloads: network filesystems may fake `flock`, so correctness
//! comes from installing into a temp dir and renaming it into place. For the same reason a lock
//! that cannot be taken at all (no permission to create or open the lock file in a shared depot,
//! `flock` refused) is logged and the install proceeds without it.

use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::notice::{LockEvent, LockFileReason, Planted};
use clima_artifact_progress::Reporting;

use crate::Error;

/// An exclusively locked file; unlocked when dropped.
#[derive(Debug)]
pub struct LockedFile {
    /// `None` when the lock could not be taken at all (the caller proceeds unlocked).
    file: Option<File>,
    path: PathBuf,
    /// The holder record found when the lock was taken: not blank when its last holder died
    /// holding it (a release blanks it).
    previous: Option<String>,
}

impl LockedFile {
    /// Locks `path` (created if missing, with its parent folders), waiting at most `timeout` for
    /// another holder. `what` says what the lock protects, for the log (e.g. `artifact era5`).
    ///
    /// A lock file that cannot be created or opened (e.g. a shared depot whose `.locks` folder
    /// belongs to another user), or a filesystem that refuses `flock`, is logged and yields an
    /// unlocked guard: the lock only saves duplicate downloads, so it never stops an install.
    /// Only waiting longer than `timeout` for a live holder is an error. The wait and the
    /// warnings are told through `reporting`.
    pub fn acquire(
        path: &Path,
        what: &str,
        timeout: Duration,
        reporting: &Reporting,
    ) -> Result<LockedFile, Error> {
        LockedFile::acquire_telling(path, what, timeout, true, reporting)
    }

    /// [`LockedFile::acquire`]; the wait is told as info notices only when `tell_wait` (the
    /// install's `Config::progress`), warnings always.
    pub(crate) fn acquire_telling(
        path: &Path,
        what: &str,
        timeout: Duration,
        tell_wait: bool,
        reporting: &Reporting,
    ) -> Result<LockedFile, Error> {
        let info = |event: LockEvent| {
            if tell_wait {
                reporting.emit(event);
            }
        };
        let file = match LockedFile::try_first(path, reporting) {
            Ok(guard) => return Ok(guard),
            Err(file) => file,
        };
        // The holder writes its record just after it takes the lock, and blanks it just before
        // it releases: a blank record is one of those moments. Look again a few times first,
        // so that the wait names its holder (200 processes at once on one depot: 2 of 44
        // waiters said "another process" without this).
        for _ in 0..BLANK_RECORD_LOOKS {
            if !read_record(&file).is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
            match try_lock_once(&file, path, reporting) {
                Some(true) => return Ok(LockedFile::held(file, path)),
                Some(false) => {}
                None => return Ok(LockedFile::unlocked(path)),
            }
        }
        let holder = read_holder(&file);
        info(LockEvent::LockWait {
            what: what.to_owned(),
            path: path.to_owned(),
            holder: holder.clone(),
            timeout,
        });
        let start = Instant::now();
        let mut pause = Duration::from_millis(5);
        let mut last_log = Instant::now();
        let mut last_holder = holder;
        loop {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(200));
            if last_log.elapsed() >= WAIT_LOG_EVERY {
                // Batch logs show that the wait goes on, and how far the holder is.
                let holder = read_holder(&file);
                if holder != last_holder || last_log.elapsed() >= 4 * WAIT_LOG_EVERY {
                    info(LockEvent::LockStillWaiting {
                        what: what.to_owned(),
                        path: path.to_owned(),
                        holder: holder.clone(),
                        waited: start.elapsed(),
                        timeout,
                    });
                    last_log = Instant::now();
                    last_holder = holder;
                }
            }
            match try_lock_once(&file, path, reporting) {
                Some(true) => {
                    info(LockEvent::LockTaken {
                        what: what.to_owned(),
                        waited: start.elapsed(),
                    });
                    return Ok(LockedFile::held(file, path));
                }
                Some(false) => {}
                None => return Ok(LockedFile::unlocked(path)),
            }
            if start.elapsed() >= timeout {
                return Err(Error::LockTimeout {
                    path: path.to_owned(),
                    seconds: timeout.as_secs_f64().ceil() as u64,
                    holder: read_holder(&file),
                });
            }
        }
    }

    /// Locks `path` if nobody holds it: `None` when another holder does. An unusable lock
    /// file yields an unlocked guard, as in [`LockedFile::acquire`].
    pub(crate) fn try_acquire(path: &Path, reporting: &Reporting) -> Option<LockedFile> {
        LockedFile::try_first(path, reporting).ok()
    }

    /// One try: the guard (held, or unlocked when the lock file is unusable), or the open
    /// lock file when another holder has it.
    fn try_first(path: &Path, reporting: &Reporting) -> Result<LockedFile, File> {
        let file = match open_lock_file(path) {
            Ok(file) => file,
            Err(e) => {
                reporting.emit(LockEvent::LockFileUnusable { why: e });
                return Ok(LockedFile::unlocked(path));
            }
        };
        match try_lock_once(&file, path, reporting) {
            Some(true) => Ok(LockedFile::held(file, path)),
            Some(false) => Err(file),
            None => Ok(LockedFile::unlocked(path)),
        }
    }

    fn held(file: File, path: &Path) -> LockedFile {
        // Best effort: who holds the lock, for the log of waiters (fails on a read-only open).
        let previous = Some(read_record(&file)).filter(|r| !r.is_empty());
        let _ = file.write_all_at(&holder_record(&holder_head()), 0);
        LockedFile {
            file: Some(file),
            path: path.to_owned(),
            previous,
        }
    }

    fn unlocked(path: &Path) -> LockedFile {
        LockedFile {
            file: None,
            path: path.to_owned(),
            previous: None,
        }
    }

    /// Whether the lock is really held (`false` when the lock file was unusable and the
    /// caller proceeds without it).
    pub fn is_locked(&self) -> bool {
        self.file.is_some()
    }

    /// The pid and host of the last holder when it died holding the lock (its record was
    /// `pid 1234 on node7: downloading ...`); `None` after a clean release.
    pub(crate) fn dead_holder(&self) -> Option<(u32, String)> {
        let rest = self.previous.as_deref()?.trim().strip_prefix("pid ")?;
        let (pid, host) = rest.split_once(" on ")?;
        let host = host.split(':').next()?.trim();
        Some((pid.parse().ok()?, host.to_owned()))
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A handle that updates the holder line waiters see (e.g. with download progress);
    /// `None` when the lock is not really held.
    pub(crate) fn note(&self) -> Option<HolderNote> {
        let file = self.file.as_ref()?.try_clone().ok()?;
        Some(HolderNote {
            file: std::sync::Arc::new(file),
            head: holder_head(),
        })
    }
}

/// The start of this process's holder record: `pid 1234 on node7` (what [`LockedFile::dead_holder`]
/// reads back).
fn holder_head() -> String {
    format!("pid {} on {}", std::process::id(), hostname())
}

/// Rewrites the holder record of a held lock, so that processes waiting for it can log what
/// the holder is doing and how far it is.
#[derive(Debug, Clone)]
pub struct HolderNote {
    file: std::sync::Arc<File>,
    head: String,
}

impl HolderNote {
    /// Sets the holder line to `pid <pid> on <host>: <status>` (best effort).
    pub fn set(&self, status: &str) {
        let _ = self
            .file
            .write_all_at(&holder_record(&format!("{}: {status}", self.head)), 0);
    }
}

/// One non-blocking `flock` attempt on `file` (the lock file at `path`): `Some(true)` when taken,
/// `Some(false)` when another holder has it, `None` when the filesystem refuses `flock` (logged;
/// some network filesystems do, and correctness does not depend on the lock, so the caller
/// proceeds unlocked).
fn try_lock_once(file: &File, path: &Path, reporting: &Reporting) -> Option<bool> {
    match file.try_lock() {
        Ok(()) => Some(true),
        Err(TryLockError::WouldBlock) => Some(false),
        Err(TryLockError::Error(e)) => {
            reporting.emit(LockEvent::LockRefused {
                path: path.to_owned(),
                error: e.to_string(),
            });
            None
        }
    }
}

impl Drop for LockedFile {
    fn drop(&mut self) {
        if let Some(file) = &self.file {
            let _ = file.write_all_at(&holder_record(""), 0);
            let _ = file.unlock();
        }
    }
}

/// How often a waiter re-reads the holder line and logs it when it changed.
const WAIT_LOG_EVERY: Duration = Duration::from_secs(15);

/// Bytes of the holder record at the start of a lock file: `pid <pid> on <host>`, padded with
/// spaces (the file is never truncated, so every record overwrites the whole previous one).
pub(crate) const HOLDER_BYTES: usize = 256;

/// `line` cut to fit and padded with spaces to [`HOLDER_BYTES`], ending in a newline.
fn holder_record(line: &str) -> Vec<u8> {
    let mut record: Vec<u8> = line.bytes().take(HOLDER_BYTES - 1).collect();
    record.resize(HOLDER_BYTES - 1, b' ');
    record.push(b'\n');
    record
}

/// Opens (creating it and its folder if needed) a lock file, never following a symlink at its
/// place and never blocking on a fifo; anything but a regular file is refused by name. Without
/// write access to an existing lock file, opens it read-only: `flock` works on read-only
/// descriptors too.
fn open_lock_file(path: &Path) -> Result<File, LockFileReason> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| LockFileReason::CannotCreateFolder {
            folder: parent.to_owned(),
            error: e.into(),
        })?;
    }
    let flags = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
    let read_write = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(flags)
        .open(path);
    let file = match read_write {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(planted(path, Planted::Symlink));
        }
        Err(e) => OpenOptions::new()
            .read(true)
            .custom_flags(flags)
            .open(path)
            .map_err(|_| LockFileReason::CannotOpen {
                path: path.to_owned(),
                error: e.into(),
            })?,
    };
    match file.metadata() {
        Ok(m) if m.is_file() => Ok(file),
        Ok(m) if m.is_dir() => Err(planted(path, Planted::Folder)),
        Ok(_) => Err(planted(path, Planted::SpecialFile)),
        Err(e) => Err(LockFileReason::CannotInspect {
            path: path.to_owned(),
            error: e.into(),
        }),
    }
}

/// Why something other than a regular file at a lock file's place is not used.
fn planted(path: &Path, what: Planted) -> LockFileReason {
    LockFileReason::Planted {
        path: path.to_owned(),
        what,
    }
}

/// The holder record at the start of a lock file, trimmed (empty when released).
/// How many times (5 ms apart) a waiter looks again at a blank holder record before it says
/// whom it waits for.
const BLANK_RECORD_LOOKS: usize = 10;

fn read_record(file: &File) -> String {
    let mut buf = [0u8; HOLDER_BYTES];
    let n = file.read_at(&mut buf, 0).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).trim().to_owned()
}

fn read_holder(file: &File) -> String {
    let s = read_record(file);
    let s = s.as_str();
    if s.is_empty() {
        "another process".to_owned()
    } else {
        // Anyone who can write to the depot can write this record: escaped before printing.
        clima_artifact_progress::notice::printable(s).into_owned()
    }
}

pub use clima_artifact_fs::hostname;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_dead_holders_record_is_read_back() {
        let left = |record: &str| LockedFile {
            file: None,
            path: PathBuf::from("x.lock"),
            previous: Some(record.to_owned()),
        };
        assert_eq!(
            left("pid 12 on n7: downloading `x`   \n").dead_holder(),
            Some((12, "n7".to_owned()))
        );
        assert_eq!(left("   ").dead_holder(), None);
        // What this process writes is what it reads back.
        let me = left(&holder_head()).dead_holder().unwrap();
        assert_eq!(me, (std::process::id(), hostname()));
    }

    #[test]
    fn excludes_threads_and_releases_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/a.lock");
        let inside = Arc::new(AtomicUsize::new(0));
        let max = Arc::new(AtomicUsize::new(0));
        std::thread::scope(|s| {
            for _ in 0..6 {
                s.spawn(|| {
                    let _l = LockedFile::acquire(
                        &path,
                        "test",
                        Duration::from_secs(20),
                        &Reporting::default(),
                    )
                    .unwrap();
                    let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    max.fetch_max(n, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(20));
                    inside.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        assert_eq!(max.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn an_unusable_lock_file_gives_an_unlocked_guard_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        // Something that is not a file sits where the lock file should be.
        let path = dir.path().join("c.lock");
        std::fs::create_dir(&path).unwrap();
        let guard =
            LockedFile::acquire(&path, "test", Duration::from_secs(1), &Reporting::default())
                .unwrap();
        assert!(!guard.is_locked());
        drop(guard);
        assert!(path.is_dir());
        // A folder that cannot be created (a file is in the way).
        std::fs::write(dir.path().join("f"), b"x").unwrap();
        let guard = LockedFile::acquire(
            &dir.path().join("f/d.lock"),
            "test",
            Duration::from_secs(1),
            &Reporting::default(),
        )
        .unwrap();
        assert!(!guard.is_locked());
        let ok = LockedFile::acquire(
            &dir.path().join("e.lock"),
            "t",
            Duration::from_secs(1),
            &Reporting::default(),
        );
        assert!(ok.unwrap().is_locked());
    }

    #[test]
    fn a_planted_symlink_is_not_followed_and_its_target_keeps_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, b"precious bytes").unwrap();
        let path = dir.path().join("x.lock");
        std::os::unix::fs::symlink(&secret, &path).unwrap();
        let guard =
            LockedFile::acquire(&path, "test", Duration::from_secs(1), &Reporting::default())
                .unwrap();
        assert!(!guard.is_locked());
        drop(guard);
        assert_eq!(std::fs::read(&secret).unwrap(), b"precious bytes");
        let e = open_lock_file(&path).unwrap_err();
        assert!(
            matches!(
                e,
                LockFileReason::Planted {
                    what: Planted::Symlink,
                    ..
                }
            ),
            "{e:?}"
        );
        let e = e.to_string();
        assert!(e.contains("x.lock") && e.contains("symlink"), "{e}");
        // A fifo neither blocks the open nor the holder read.
        let fifo = dir.path().join("f.lock");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let e = open_lock_file(&fifo).unwrap_err();
        assert!(
            matches!(
                e,
                LockFileReason::Planted {
                    what: Planted::SpecialFile,
                    ..
                }
            ),
            "{e:?}"
        );
        let e = e.to_string();
        assert!(e.contains("special file"), "{e}");
    }

    #[test]
    fn the_lock_file_is_never_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lock");
        let mut old = vec![b'x'; 1000];
        old[999] = b'\n';
        std::fs::write(&path, &old).unwrap();
        let held =
            LockedFile::acquire(&path, "test", Duration::from_secs(1), &Reporting::default())
                .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 1000);
        assert!(bytes.starts_with(format!("pid {} on ", std::process::id()).as_bytes()));
        assert_eq!(&bytes[HOLDER_BYTES..], &old[HOLDER_BYTES..]);
        drop(held);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 1000);
        assert!(bytes[..HOLDER_BYTES - 1].iter().all(|&b| b == b' '));
    }

    #[test]
    fn waiters_see_how_far_the_holder_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.lock");
        let held =
            LockedFile::acquire(&path, "test", Duration::from_secs(1), &Reporting::default())
                .unwrap();
        held.note()
            .unwrap()
            .set("downloading `era5`: 1.2 GiB of 40.0 GiB");
        let e = LockedFile::acquire(
            &path,
            "test",
            Duration::from_millis(50),
            &Reporting::default(),
        )
        .unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains(&format!(
                "pid {} on {}: downloading `era5`: 1.2 GiB of 40.0 GiB",
                std::process::id(),
                hostname()
            )),
            "{s}"
        );
    }

    #[test]
    fn a_holder_that_never_writes_its_record_is_waited_for_as_another_process() {
        // A blank record (a holder between taking the lock and writing it, or a foreign
        // `flock`): the waiter looks again a few times, then waits as usual.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.lock");
        let raw = File::create(&path).unwrap();
        raw.lock().unwrap();
        let e = LockedFile::acquire(
            &path,
            "test",
            Duration::from_millis(100),
            &Reporting::default(),
        )
        .unwrap_err();
        let Error::LockTimeout { holder, .. } = &e else {
            panic!("{e}")
        };
        assert_eq!(holder, "another process");
        raw.unlock().unwrap();
        let got = LockedFile::acquire(
            &path,
            "test",
            Duration::from_millis(100),
            &Reporting::default(),
        )
        .unwrap();
        drop(got);
    }

    #[test]
    fn timeout_names_the_variable_and_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.lock");
        let _held =
            LockedFile::acquire(&path, "test", Duration::from_secs(1), &Reporting::default())
                .unwrap();
        let e = LockedFile::acquire(
            &path,
            "test",
            Duration::from_millis(100),
            &Reporting::default(),
        )
        .unwrap_err();
        let s = e.to_string();
        assert!(s.contains("CLIMA_ARTIFACTS_LOCK_TIMEOUT"), "{s}");
        assert!(s.contains(&format!("pid {}", std::process::id())), "{s}");
        assert!(s.contains("b.lock"), "{s}");
    }
}
