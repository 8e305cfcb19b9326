//! Reclaiming what dead installs left in a depot: install temp dirs of dead processes of this
//! host, old writability probes, and this user's partial downloads nobody continued.

use clima_artifact_progress::Reporting;
use std::path::Path;

use crate::notice::DepotEvent;
use clima_artifact_manifest::{GitTreeSha1, layout};

use crate::depot::{Depot, PARTIAL_MAX_AGE, PROBE_MAX_AGE, partial_owner};

impl Depot {
    /// Removes the install temp dirs (`<depot>/artifacts/.<hash>.clima-install-*`) left by dead
    /// processes of this host, and writability probe files (`.probe-*`, see [`PROBE_PREFIX`](layout::PROBE_PREFIX))
    /// older than [`PROBE_MAX_AGE`], and this user's partial downloads ([`PARTIAL_PREFIX`](layout::PARTIAL_PREFIX)) that
    /// received nothing for [`PARTIAL_MAX_AGE`] while nobody holds their artifact's lock. Returns
    /// how many temp dirs were removed.
    ///
    /// A pid that looks dead may be a live process in another PID namespace (a container with the
    /// same host name sharing the depot), so a temp dir is also left alone while anyone holds the
    /// lock of its artifact: a live installer always does (where `flock` works).
    pub fn reclaim_stale_temp_dirs(&self, reporting: &Reporting) -> usize {
        self.reclaim_stale(None, reporting)
    }

    /// [`Depot::reclaim_stale_temp_dirs`], called while this process holds the lock of `holding` (so that
    /// lock says nothing about other processes).
    pub(crate) fn reclaim_stale(
        &self,
        holding: Option<&GitTreeSha1>,
        reporting: &Reporting,
    ) -> usize {
        // Never clean up through another user's link (see [`planted_link`]).
        if !matches!(self.planted_link(), Ok(None)) {
            return 0;
        }
        let dir = self.artifacts_dir();
        let Ok(rd) = std::fs::read_dir(&dir) else {
            return 0;
        };
        let host = clima_artifact_fs::host_tag();
        let mut removed = 0;
        for entry in rd.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            match layout::Entry::parse(name) {
                Some(layout::Entry::Probe { .. }) => {
                    remove_if_older(&entry.path(), PROBE_MAX_AGE, reporting);
                    continue;
                }
                Some(layout::Entry::Partial { artifact, uid, .. }) => {
                    let _ = self.reclaim_partial(name, &artifact, uid, holding, reporting);
                    continue;
                }
                _ => {}
            }
            let Some((hash, tmp_host, pid)) = Depot::temp_dir_owner(name) else {
                continue;
            };
            if tmp_host != host || clima_artifact_fs::pid_alive(pid) {
                continue;
            }
            // Held until the dir is gone, so no installer of this artifact starts meanwhile.
            let _lock = if holding == Some(&hash) {
                None
            } else {
                match try_lock_existing(&self.lock_path(&hash)) {
                    LockProbe::Held => {
                        reporting.emit(DepotEvent::LeftoverKept {
                            path: entry.path(),
                            pid,
                        });
                        continue;
                    }
                    LockProbe::Free(file) => Some(file),
                    LockProbe::Unknown => None,
                }
            };
            reporting.emit(DepotEvent::LeftoverRemoved {
                path: entry.path(),
                pid,
            });
            crate::depot::remove_tree(&entry.path(), reporting);
            removed += 1;
        }
        removed
    }
}

impl Depot {
    /// Removes the partial download `name` (of `hash`, owned by `uid`) if it is this user's,
    /// received nothing for [`PARTIAL_MAX_AGE`], and nobody holds its artifact's lock (a live
    /// installer of any host always does, where `flock` works).
    fn reclaim_partial(
        &self,
        name: &str,
        hash: &GitTreeSha1,
        uid: u32,
        holding: Option<&GitTreeSha1>,
        reporting: &Reporting,
    ) -> bool {
        let path = self.artifacts_dir().join(name);
        let old = std::fs::symlink_metadata(&path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > PARTIAL_MAX_AGE);
        if uid != clima_artifact_fs::euid() || !old {
            return false;
        }
        let _lock = match holding == Some(hash) {
            true => None,
            false => match try_lock_existing(&self.lock_path(hash)) {
                LockProbe::Held => return false,
                LockProbe::Free(file) => Some(file),
                LockProbe::Unknown => None,
            },
        };
        let Ok(dir) = clima_artifact_fs::Dir::open(&self.artifacts_dir()) else {
            return false;
        };
        let removed = crate::staging::remove_own_file(&dir, name);
        if removed {
            reporting.emit(DepotEvent::PartialRemoved {
                path: path.to_path_buf(),
                days: PARTIAL_MAX_AGE.as_secs() / 86400,
            });
        }
        removed
    }
}

impl Depot {
    /// Removes this user's partial downloads in this depot that received nothing for
    /// [`PARTIAL_MAX_AGE`] while nobody holds their artifact's lock (what `gc` does besides
    /// collecting artifacts). Returns how many were removed.
    pub fn reclaim_stale_partials(&self, reporting: &Reporting) -> usize {
        let depot = self;
        let Ok(dir) = clima_artifact_fs::Dir::open(&depot.artifacts_dir()) else {
            return 0;
        };
        let mut removed = 0;
        for entry in dir.entries().unwrap_or_default() {
            let Some(name) = entry.name.to_str() else {
                continue;
            };
            if let Some((hash, uid)) = partial_owner(name)
                && depot.reclaim_partial(name, &hash, uid, None, reporting)
            {
                removed += 1;
            }
        }
        removed
    }
}

/// Removes the file at `path` if it was last modified more than `age` ago.
fn remove_if_older(path: &Path, age: std::time::Duration, reporting: &Reporting) {
    let old = std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|elapsed| elapsed > age);
    if old {
        reporting.emit(DepotEvent::ProbeFileRemoved {
            path: path.to_path_buf(),
        });
        let _ = std::fs::remove_file(path);
    }
}

enum LockProbe {
    /// Another open file description holds the lock.
    Held,
    /// Now locked by us (released when the file is dropped).
    Free(std::fs::File),
    /// No lock file, or locks do not work here.
    Unknown,
}

/// Tries, without blocking and without creating anything, to lock an existing lock file. The
/// file is opened without following a symlink and without blocking on a fifo (anyone who can
/// write to the depot can plant either), and must be a regular file.
fn try_lock_existing(path: &Path) -> LockProbe {
    let Ok(Some(file)) = clima_artifact_fs::open_shared_file(path) else {
        return LockProbe::Unknown;
    };
    match file.try_lock() {
        Ok(()) => LockProbe::Free(file),
        Err(std::fs::TryLockError::WouldBlock) => LockProbe::Held,
        Err(std::fs::TryLockError::Error(_)) => LockProbe::Unknown,
    }
}
