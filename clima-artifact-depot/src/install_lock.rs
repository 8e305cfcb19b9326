//! The locks an install of an artifact holds in the depot it installs into: ours
//! (`artifacts/.locks/<hash>.lock`, see [`LockedFile`]) and, taken under it, Julia's pidfile
//! (Pkg 1.13's install lock, see `julia_lock`), so that a Julia process and ours installing
//! the same artifact into the same depot download it once between them.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clima_artifact_manifest::GitTreeSha1;
use clima_artifact_progress::notice::{self, Event};

use crate::Error;
use crate::depot::{Depot, find_installed, first_writable};
use crate::installed::{Installed, Origin};
use crate::julia_lock::{self, JuliaPidfile, Take};
use crate::locked_file::{HolderNote, LockedFile};

/// Both install locks of an artifact, held until this value is dropped (Julia's pidfile is
/// released first).
#[must_use = "the locks are released when this value is dropped"]
pub struct InstallLock {
    _julia: Option<JuliaPidfile>,
    ours: LockedFile,
}

impl InstallLock {
    /// A handle that writes what the install is doing into our lock file, for another
    /// process waiting for it to tell its user (`None` where the lock file cannot hold it).
    pub fn note(&self) -> Option<HolderNote> {
        self.ours.note()
    }
}

/// What taking the install locks found.
pub enum Locked {
    /// Another process (ours or Julia's) installed the artifact while this one waited.
    Installed(Installed),
    /// The locks are held, and this is the depot to install into (its stale temp dirs and
    /// partial downloads of dead processes reclaimed).
    Held(InstallLock, Depot),
}

/// How long to wait for another holder, and whether to say so as it happens.
#[derive(Debug, Clone, Copy)]
pub struct Wait {
    /// At most this long for each lock (`CLIMA_ARTIFACTS_LOCK_TIMEOUT`).
    pub timeout: Duration,
    /// Whether waits are told to the user (progress on).
    pub tell: bool,
}

/// Locks the artifact `hash` (`name` in messages) in the first writable of `own`, waiting
/// for another holder (our lock, then Julia's pidfile), then looks again in `search`
/// (another process may have installed it meanwhile) and reclaims what dead installs left.
pub fn lock_for_install(
    name: &str,
    hash: &GitTreeSha1,
    own: &[Depot],
    search: &[Depot],
    wait: Wait,
) -> Result<Locked, Error> {
    let target = first_writable(own, name)?;
    let lock = LockedFile::acquire_telling(
        &target.lock_path(hash),
        &format!("artifact `{name}` ({hash})"),
        wait.timeout,
        wait.tell,
    )?;
    let julia = match wait_for_julia(name, hash, &target, search, wait, &lock)? {
        Ok(pidfile) => pidfile,
        Err(found) => return Ok(Locked::Installed(found)),
    };
    Ok(locked(lock, julia, target, hash, search))
}

/// [`lock_for_install`] without waiting: `None` when another holder (ours or Julia's) has
/// a lock.
pub fn try_lock_for_install(
    name: &str,
    hash: &GitTreeSha1,
    own: &[Depot],
    search: &[Depot],
) -> Result<Option<Locked>, Error> {
    let target = first_writable(own, name)?;
    let Some(lock) = target.try_lock(hash) else {
        return Ok(None);
    };
    let dead = lock.dead_holder();
    let julia = match JuliaPidfile::try_take(target.root(), hash, dead.as_ref()) {
        Take::Held(pidfile) => Some(pidfile),
        Take::Busy(_) => return Ok(None),
        Take::Unusable(why) => {
            notice::emit(Event::JuliaLockUnusable {
                why,
                artifact: None,
            });
            None
        }
    };
    Ok(Some(locked(lock, julia, target, hash, search)))
}

/// With our lock `lock` of `hash` in `target` held, takes Julia's pidfile of the artifact:
/// while a live Julia process holds it, waits (at most `wait.timeout`, as for our lock),
/// looking in `search` for the artifact meanwhile: `Err` with it when that process installed
/// it. `Ok(None)` when the pidfile cannot be used (said; the install goes on under our lock
/// alone).
fn wait_for_julia(
    name: &str,
    hash: &GitTreeSha1,
    target: &Depot,
    search: &[Depot],
    wait: Wait,
    lock: &LockedFile,
) -> Result<Result<Option<JuliaPidfile>, Installed>, Error> {
    let dead = lock.dead_holder();
    let path: PathBuf = julia_lock::pidfile_path(target.root(), hash);
    let start = Instant::now();
    let mut pause = Duration::from_millis(5);
    let mut told: Option<julia_lock::Holder> = None;
    loop {
        let holder = match JuliaPidfile::try_take(target.root(), hash, dead.as_ref()) {
            Take::Held(pidfile) => {
                if told.is_some() && wait.tell {
                    notice::emit(Event::JuliaLockFree {
                        artifact: name.to_owned(),
                        waited: start.elapsed(),
                    });
                }
                return Ok(Ok(Some(pidfile)));
            }
            Take::Unusable(why) => {
                notice::emit(Event::JuliaLockUnusable {
                    why,
                    artifact: Some(name.to_owned()),
                });
                return Ok(Ok(None));
            }
            Take::Busy(holder) => holder,
        };
        let changed = told
            .as_ref()
            .is_none_or(|t| (t.pid, &t.host) != (holder.pid, &holder.host));
        if changed && wait.tell {
            notice::emit(Event::JuliaLockWait {
                artifact: name.to_owned(),
                holder: holder.describe(),
                path: path.clone(),
                timeout: wait.timeout,
            });
        }
        if start.elapsed() >= wait.timeout {
            return Err(Error::LockTimeout {
                path,
                seconds: wait.timeout.as_secs_f64().ceil() as u64,
                holder: format!("held by a Julia process, {}", holder.describe()),
            });
        }
        told = Some(holder);
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(200));
        // The Julia process renames the artifact into place before it releases its pidfile.
        if let Some(path) = find_installed(search, hash) {
            return Ok(Err(Installed {
                path,
                origin: Origin::Depot,
            }));
        }
    }
}

/// With the artifact's `lock` (and Julia's pidfile `julia`) in `target` held: another look,
/// else the stale temp dirs reclaimed and the locks with their depot.
fn locked(
    lock: LockedFile,
    julia: Option<JuliaPidfile>,
    target: Depot,
    hash: &GitTreeSha1,
    search: &[Depot],
) -> Locked {
    if let Some(path) = find_installed(search, hash) {
        return Locked::Installed(Installed {
            path,
            origin: Origin::Depot,
        });
    }
    target.reclaim_stale(Some(hash));
    Locked::Held(
        InstallLock {
            _julia: julia,
            ours: lock,
        },
        target,
    )
}
