//! Names of temporary files and folders that say which process made them, and reclaiming the
//! ones whose process is gone (a restore, an upload, a gc or an install killed with `kill -9`
//! leaves its temp file or folder). Every temp name of the project has this one form:
//!
//! ```text
//! .<name><mark><host>.<pid>.<random>      e.g. .state.bin.clima-restore-node7.4242.9f3a...
//!                                              .<git-tree-sha1>.clima-install-node7.4242.9f3a...
//! ```
//!
//! A temp file is stale when its host is this host and its pid is not alive, or, for another
//! host (a shared filesystem), when it was not modified for [`OTHER_HOST_MAX_AGE`].

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Age after which a temp file made on another host counts as left behind (its pid cannot be
/// checked from here; a live transfer writes to its file far more often than this).
pub const OTHER_HOST_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// This machine's host name (empty if unknown).
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

/// A fresh temp name for `name` in the same folder: `.<name><mark><host>.<pid>.<random>`.
/// `mark` tells what kind of temp file it is, e.g. `.clima-restore-`.
pub fn temp_name(name: &str, mark: &str) -> String {
    let owner = format!("{}.{}.{:016x}", host_tag(), std::process::id(), unique());
    temp_name_of(name, mark, &owner)
}

/// The temp name of `name` with `mark` made by `owner` (`<host>.<pid>.<random>`):
/// `.<name><mark><owner>`. The one place the form is written; [`split_temp_name`] reads it
/// back (the depot layout's names of install and gc temp folders use both).
pub fn temp_name_of(name: &str, mark: &str, owner: &str) -> String {
    format!(".{name}{mark}{owner}")
}

/// The `<name>` and `<owner>` of the temp name `name` with `mark` (see [`temp_name_of`]);
/// `None` when `name` is not one.
pub fn split_temp_name<'a>(name: &'a str, mark: &str) -> Option<(&'a str, &'a str)> {
    name.strip_prefix('.')?.rsplit_once(mark)
}

/// A number that differs between calls, and with high probability between processes: the
/// random part of temp names.
pub fn unique() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u32(std::process::id());
    if let Ok(t) = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.finish()
}

/// Who made the temp entry `name` with `mark`: the `<name>` it stands for, the host tag and
/// the pid; `None` when `name` is not such a temp name.
pub fn temp_owner<'a>(name: &'a str, mark: &str) -> Option<(&'a str, &'a str, i32)> {
    let (head, tail) = split_temp_name(name, mark)?;
    let mut parts = tail.rsplitn(3, '.');
    let (_random, pid, host) = (parts.next()?, parts.next()?, parts.next()?);
    Some((head, host, pid.parse().ok()?))
}

/// Whether the file name `name` is a temp name with `mark` (ours or anyone's).
pub fn is_temp_name(name: &str, mark: &str) -> bool {
    name.starts_with('.') && name.contains(mark)
}

/// Whether the temp file `name` (with `mark`) in `dir` was left by a process that is gone.
fn is_stale(dir: &Path, name: &str, mark: &str, here: &str) -> bool {
    if !name.contains(mark) {
        return false;
    }
    match temp_owner(name, mark) {
        Some((_, host, pid)) if host == here => !crate::pid_alive(pid),
        _ => fs::symlink_metadata(dir.join(name))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_some_and(|age| age > OTHER_HOST_MAX_AGE),
    }
}

/// The stale temp entries with `mark` directly in `dir` (not below it), of any file type,
/// for callers whose temps are folders (gc renames an artifact folder before deleting it).
pub fn stale_temps(dir: &Path, mark: &str) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let here = host_tag();
    entries
        .flatten()
        .filter_map(|entry| {
            let file_name = entry.file_name();
            let name = file_name.to_str()?;
            (is_temp_name(name, mark) && is_stale(dir, name, mark, &here))
                .then(|| dir.join(OsStr::from_bytes(name.as_bytes())))
        })
        .collect()
}

/// Removes the stale temp files with `mark` directly in `dir` (not below it) and returns how
/// many. Only regular files and symlinks are removed (a symlink is removed itself, never what
/// it points to); failures are ignored (another process may be reclaiming the same file).
pub fn reclaim_stale_temps(dir: &Path, mark: &str) -> usize {
    stale_temps(dir, mark)
        .into_iter()
        .filter(|p| {
            fs::symlink_metadata(p).is_ok_and(|m| m.is_file() || m.file_type().is_symlink())
                && fs::remove_file(p).is_ok()
        })
        .count()
}

/// The host name as it appears in temp names (`/` and `.` replaced by `_`), e.g. to name the
/// temp file a process on this host would leave.
pub fn host_tag() -> String {
    hostname()
        .chars()
        .map(|c| if c == '/' || c == '.' { '_' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_only_dead_processes_temps_go() {
        let dir = tempfile::tempdir().unwrap();
        let mark = ".clima-test-";
        let mine = temp_name("a.bin", mark);
        assert!(mine.starts_with(".a.bin.clima-test-") && is_temp_name(&mine, mark));
        fs::write(dir.path().join(&mine), "live").unwrap();
        // A dead pid on this host: reclaimed. pid 0 is never a process.
        let host = host_tag();
        let dead = format!(".b.bin{mark}{host}.0.00ff");
        fs::write(dir.path().join(&dead), "dead").unwrap();
        // Another host, fresh: kept.
        let other = format!(".c.bin{mark}elsewhere.1.00ff");
        fs::write(dir.path().join(&other), "other").unwrap();
        // Not a temp name at all: kept.
        fs::write(dir.path().join("d.bin"), "data").unwrap();
        assert_eq!(reclaim_stale_temps(dir.path(), mark), 1);
        let mut left: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let mut want = vec![mine, other, "d.bin".to_owned()];
        want.sort();
        assert_eq!(left, want);
    }
}
