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
//! The lock only saves duplicate downloads: network filesystems may fake `flock`, so correctness
//! comes from installing into a temp dir and renaming it into place. For the same reason a lock
//! that cannot be taken at all (no permission to create or open the lock file in a shared depot,
//! `flock` refused) is logged and the install proceeds without it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::Error;

/// An exclusively locked file; unlocked when dropped.
#[derive(Debug)]
pub struct LockedFile {
    /// `None` when the lock could not be taken at all (the caller proceeds unlocked).
    file: Option<File>,
    path: PathBuf,
}

impl LockedFile {
    /// Locks `path` (created if missing, with its parent folders), waiting at most `timeout` for
    /// another holder. `what` says what the lock protects, for the log (e.g. `artifact era5`).
    ///
    /// A lock file that cannot be created or opened (e.g. a shared depot whose `.locks` folder
    /// belongs to another user), or a filesystem that refuses `flock`, is logged and yields an
    /// unlocked guard: the lock only saves duplicate downloads, so it never stops an install.
    /// Only waiting longer than `timeout` for a live holder is an error.
    pub fn acquire(path: &Path, what: &str, timeout: Duration) -> Result<LockedFile, Error> {
        let file = match open_lock_file(path) {
            Ok(file) => file,
            Err(e) => {
                tracing::warn!("{e}; continuing without the lock");
                return Ok(LockedFile::unlocked(path));
            }
        };
        match try_lock_once(&file, path) {
            Some(true) => return Ok(LockedFile::held(file, path)),
            Some(false) => {}
            None => return Ok(LockedFile::unlocked(path)),
        }
        let holder = read_holder(&file);
        tracing::info!(
            "waiting for {what}: `{}` is locked by {holder} (at most {}s, CLIMA_ARTIFACTS_LOCK_TIMEOUT)",
            path.display(),
            timeout.as_secs()
        );
        let start = Instant::now();
        let mut pause = Duration::from_millis(5);
        loop {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(200));
            match try_lock_once(&file, path) {
                Some(true) => {
                    tracing::info!(
                        "got `{}` after waiting {:.1}s",
                        path.display(),
                        start.elapsed().as_secs_f64()
                    );
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

    fn held(mut file: File, path: &Path) -> LockedFile {
        // Best effort: who holds the lock, for the log of waiters (fails on a read-only open).
        let _ = file.set_len(0).and_then(|()| {
            file.seek(SeekFrom::Start(0))?;
            writeln!(file, "pid {} on {}", std::process::id(), hostname())
        });
        LockedFile {
            file: Some(file),
            path: path.to_owned(),
        }
    }

    fn unlocked(path: &Path) -> LockedFile {
        LockedFile {
            file: None,
            path: path.to_owned(),
        }
    }

    /// Whether the lock is really held (`false` when the lock file was unusable and the
    /// caller proceeds without it).
    pub fn is_locked(&self) -> bool {
        self.file.is_some()
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// One non-blocking `flock` attempt on `file` (the lock file at `path`): `Some(true)` when taken,
/// `Some(false)` when another holder has it, `None` when the filesystem refuses `flock` (logged;
/// some network filesystems do, and correctness does not depend on the lock, so the caller
/// proceeds unlocked).
fn try_lock_once(file: &File, path: &Path) -> Option<bool> {
    match file.try_lock() {
        Ok(()) => Some(true),
        Err(TryLockError::WouldBlock) => Some(false),
        Err(TryLockError::Error(e)) => {
            tracing::warn!(
                "cannot lock `{}` ({e}); continuing without the lock",
                path.display()
            );
            None
        }
    }
}

impl Drop for LockedFile {
    fn drop(&mut self) {
        if let Some(file) = &self.file {
            let _ = file.set_len(0);
            let _ = file.unlock();
        }
    }
}

/// Opens (creating it and its folder if needed) a lock file. Without write access to an existing
/// lock file, opens it read-only: `flock` works on read-only descriptors too.
fn open_lock_file(path: &Path) -> Result<File, String> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create lock folder `{}`: {e}", parent.display()))?;
    }
    let read_write = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path);
    match read_write {
        Ok(file) => Ok(file),
        Err(e) => OpenOptions::new()
            .read(true)
            .open(path)
            .ok()
            .filter(|f| f.metadata().is_ok_and(|m| m.is_file()))
            .ok_or_else(|| format!("cannot open lock file `{}`: {e}", path.display())),
    }
}

fn read_holder(file: &File) -> String {
    let mut s = String::new();
    let mut f = file;
    let _ = f.seek(SeekFrom::Start(0));
    let _ = f.take(200).read_to_string(&mut s);
    let s = s.trim();
    if s.is_empty() {
        "another process".to_owned()
    } else {
        s.to_owned()
    }
}

/// This machine's host name (empty string if unknown).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for writes of its length; gethostname NUL-terminates within it
    // or truncates, and we stop at the first NUL or the end.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn excludes_threads_and_releases_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/a.lock");
        let inside = Arc::new(AtomicUsize::new(0));
        let max = Arc::new(AtomicUsize::new(0));
        std::thread::scope(|s| {
            for _ in 0..6 {
                s.spawn(|| {
                    let _l = LockedFile::acquire(&path, "test", Duration::from_secs(20)).unwrap();
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
        let guard = LockedFile::acquire(&path, "test", Duration::from_secs(1)).unwrap();
        assert!(!guard.is_locked());
        drop(guard);
        assert!(path.is_dir());
        // A folder that cannot be created (a file is in the way).
        std::fs::write(dir.path().join("f"), b"x").unwrap();
        let guard =
            LockedFile::acquire(&dir.path().join("f/d.lock"), "test", Duration::from_secs(1))
                .unwrap();
        assert!(!guard.is_locked());
        let ok = LockedFile::acquire(&dir.path().join("e.lock"), "t", Duration::from_secs(1));
        assert!(ok.unwrap().is_locked());
    }

    #[test]
    fn timeout_names_the_variable_and_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.lock");
        let _held = LockedFile::acquire(&path, "test", Duration::from_secs(1)).unwrap();
        let e = LockedFile::acquire(&path, "test", Duration::from_millis(100)).unwrap_err();
        let s = e.to_string();
        assert!(s.contains("CLIMA_ARTIFACTS_LOCK_TIMEOUT"), "{s}");
        assert!(s.contains(&format!("pid {}", std::process::id())), "{s}");
        assert!(s.contains("b.lock"), "{s}");
    }
}
