//! The staging of an install: everything between "this artifact is missing" and "it is in
//! place", owned by the depot it goes into.
//!
//! [`Depot::stage`] takes the artifact's locks in the depot: ours
//! (`artifacts/.locks/<hash>.lock`, see [`LockedFile`]) and, under it, Julia's pidfile (Pkg
//! 1.13's install lock, see `julia_lock`), so that a Julia process and ours installing the
//! same artifact into the same depot download it once between them. It looks again for the
//! artifact (another process may have installed it meanwhile), reclaims what dead installs
//! left, and returns a [`Staging`], which owns the rest of the install's business with the
//! depot:
//!
//! - [`Staging::temp_dir`]: a private temp dir for the unpacked files, named for this process
//!   ([`TempDir`], which cannot outlive the staging and so the locks);
//! - [`Staging::partial`]: the file a large download keeps its bytes in, and its URL key, in
//!   this depot or the one chosen by [`Staging::keep_partials_in`];
//! - [`Staging::commit`]: the atomic rename of the verified folder into
//!   `artifacts/<hash>`, and the record of its git tree SHA-256.
//!
//! Dropping a [`Staging`] releases the locks (Julia's pidfile first); a [`TempDir`] dropped
//! without a commit removes itself, so nothing unverified is ever visible in the depot.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::notice::{DepotEvent, LockEvent};
use clima_artifact_manifest::{GitTreeSha1, GitTreeSha256};
use clima_artifact_progress::Reporting;

use crate::Error;
use crate::depot::{Depot, find_installed};
use crate::installed::{Installed, Origin};
use crate::julia_lock::{self, JuliaPidfile, Take};
use crate::locked_file::{HolderNote, LockedFile};

mod partial;
mod temp_dir;
pub(crate) use partial::remove_own_file;
pub use partial::{PartialFile, partial_name};
pub use temp_dir::TempDir;

/// How an install asks for its staging: see [`Depot::stage`].
#[derive(Debug, Clone, Copy)]
pub struct Stage<'a> {
    /// The artifact's name, for messages.
    pub name: &'a str,
    /// Every depot searched for the artifact (another process may install it while this one
    /// waits for the locks).
    pub search: &'a [Depot],
    /// `Some`: wait for another holder of the locks as it says; `None`: do not wait
    /// ([`Staged::Busy`] when another holder has them).
    pub wait: Option<Wait>,
    /// Where the locks' waits and warnings, and the staging's, are told.
    pub reporting: &'a Reporting,
}

/// How long to wait for another holder, and whether to say so as it happens.
#[derive(Debug, Clone, Copy)]
pub struct Wait {
    /// At most this long for each lock (`CLIMA_ARTIFACTS_LOCK_TIMEOUT`).
    pub timeout: Duration,
    /// Whether waits are told to the user (progress on).
    pub tell: bool,
}

/// What [`Depot::stage`] found.
pub enum Staged {
    /// The locks are held: install through this staging.
    Ready(Box<Staging>),
    /// Another process (ours or Julia's) installed the artifact while this one waited, or
    /// before it took the locks.
    Installed(Installed),
    /// Another holder (ours or Julia's) has the locks, and [`Stage::wait`] said not to wait.
    Busy,
}

/// An install of one artifact in progress in one depot: its locks, held until this value is
/// dropped, and the depot's side of the install: [`Staging::temp_dir`], [`Staging::partial`],
/// [`Staging::commit`] (see [`Depot::stage`]).
#[must_use = "the locks are released when this value is dropped"]
pub struct Staging {
    depot: Depot,
    hash: GitTreeSha1,
    name: String,
    /// What writes the install's progress into our lock file, for waiters (made once;
    /// dropped first: fields drop in order).
    note: Option<HolderNote>,
    /// Released before `_ours`.
    _julia: Option<JuliaPidfile>,
    _ours: LockedFile,
    /// The depot that keeps partial downloads when it is not `depot`, with its lock of the
    /// artifact held while they are used.
    partials: Option<(Depot, LockedFile)>,
    /// Where the staging's notices go ([`Stage::reporting`]).
    reporting: Reporting,
}

impl Depot {
    /// Stages an install of `hash` into this depot: takes its locks (ours, then Julia's
    /// pidfile; waiting for another holder as [`Stage::wait`] says, at most its timeout for
    /// each: [`Error::LockTimeout`]), looks again in [`Stage::search`] (another process may
    /// have installed it meanwhile) and reclaims the temp dirs and partial downloads dead
    /// installs left here.
    ///
    /// A lock that cannot be used at all (a read-only lock folder, a filesystem without
    /// `flock`, an unusable pidfile) is said and the install goes on without it: the locks
    /// only save duplicate downloads; the temp dir and the atomic rename keep the depot right.
    pub fn stage(&self, hash: &GitTreeSha1, stage: Stage<'_>) -> Result<Staged, Error> {
        let name = stage.name;
        let (ours, julia) = match stage.wait {
            Some(wait) => {
                let ours = LockedFile::acquire_telling(
                    &self.lock_path(hash),
                    &format!("artifact `{name}` ({hash})"),
                    wait.timeout,
                    wait.tell,
                    stage.reporting,
                )?;
                match self.wait_for_julia(hash, &stage, wait, &ours)? {
                    Ok(julia) => (ours, julia),
                    Err(found) => return Ok(Staged::Installed(found)),
                }
            }
            None => {
                let Some(ours) = self.try_lock(hash, stage.reporting) else {
                    return Ok(Staged::Busy);
                };
                let dead = ours.dead_holder();
                let julia =
                    match JuliaPidfile::try_take(self.root(), hash, dead.as_ref(), stage.reporting)
                    {
                        Take::Held(pidfile) => Some(pidfile),
                        Take::Busy(_) => return Ok(Staged::Busy),
                        Take::Unusable(why) => {
                            stage.reporting.emit(LockEvent::JuliaLockUnusable {
                                why,
                                artifact: None,
                            });
                            None
                        }
                    };
                (ours, julia)
            }
        };
        if let Some(path) = find_installed(stage.search, hash) {
            return Ok(Staged::Installed(Installed {
                path,
                origin: Origin::Depot,
            }));
        }
        self.reclaim_stale(Some(hash), stage.reporting);
        Ok(Staged::Ready(Box::new(Staging {
            depot: self.clone(),
            hash: *hash,
            name: name.to_owned(),
            _julia: julia,
            note: ours.note(),
            _ours: ours,
            partials: None,
            reporting: stage.reporting.clone(),
        })))
    }

    /// With our lock `ours` of `hash` held, takes Julia's pidfile of the artifact: while a
    /// live Julia process holds it, waits (at most `wait.timeout`, as for our lock), looking
    /// in `stage.search` for the artifact meanwhile: `Err` with it when that process installed
    /// it. `Ok(None)` when the pidfile cannot be used (said; the install goes on under our
    /// lock alone).
    fn wait_for_julia(
        &self,
        hash: &GitTreeSha1,
        stage: &Stage<'_>,
        wait: Wait,
        ours: &LockedFile,
    ) -> Result<Result<Option<JuliaPidfile>, Installed>, Error> {
        let name = stage.name;
        let dead = ours.dead_holder();
        let path: PathBuf = julia_lock::pidfile_path(self.root(), hash);
        let start = Instant::now();
        let mut pause = Duration::from_millis(5);
        let mut told: Option<julia_lock::Holder> = None;
        loop {
            let holder =
                match JuliaPidfile::try_take(self.root(), hash, dead.as_ref(), stage.reporting) {
                    Take::Held(pidfile) => {
                        if told.is_some() && wait.tell {
                            stage.reporting.emit(LockEvent::JuliaLockFree {
                                artifact: name.to_owned(),
                                waited: start.elapsed(),
                            });
                        }
                        return Ok(Ok(Some(pidfile)));
                    }
                    Take::Unusable(why) => {
                        stage.reporting.emit(LockEvent::JuliaLockUnusable {
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
                stage.reporting.emit(LockEvent::JuliaLockWait {
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
            if let Some(path) = find_installed(stage.search, hash) {
                return Ok(Err(Installed {
                    path,
                    origin: Origin::Depot,
                }));
            }
        }
    }
}

impl Staging {
    /// The depot the artifact is installed into.
    pub fn depot(&self) -> &Depot {
        &self.depot
    }

    /// The artifact staged.
    pub fn hash(&self) -> &GitTreeSha1 {
        &self.hash
    }

    /// A handle that writes what the install is doing into our lock file, for another
    /// process waiting for it to tell its user (`None` where the lock file cannot hold it).
    pub fn note(&self) -> Option<HolderNote> {
        self.note.clone()
    }

    /// A fresh private temp dir for the unpacked files, in the depot's `artifacts` folder and
    /// named for this process (`.<hash>.clima-install-<host>.<pid>.<random>`), so that a
    /// later install reclaims it should this process die. It is removed when dropped, unless
    /// [`Staging::commit`] renamed it into place.
    pub fn temp_dir(&self) -> Result<TempDir<'_>, Error> {
        TempDir::create(self)
    }

    /// Commits the verified install in `tmp` as `artifacts/<hash>`: the folder made 0o755
    /// like every folder inside it, whatever the umask, checked to still be the folder that
    /// was filled, and renamed into place. Another process that put the artifact there first
    /// (without a working lock, e.g. on NFS) is success. When `sha256` is given (the entry's
    /// `git-tree-sha256`, checked in the same pass) it is recorded for the folder, so that it
    /// is never hashed again; not when another process's copy won the race to that name (that
    /// copy is checked when it is used). A record that cannot be written is said; the copy is
    /// then hashed once when next used.
    pub fn commit(
        &self,
        tmp: TempDir<'_>,
        sha256: Option<&GitTreeSha256>,
    ) -> Result<PathBuf, Error> {
        if !std::ptr::eq(tmp.staging(), self) {
            return Err(Error::Io {
                action: format!("commit artifact `{}` from", self.name),
                path: tmp.path().to_path_buf(),
                cause: std::io::Error::other(
                    "this temp dir belongs to the staging of another install; please report this",
                )
                .into(),
            });
        }
        let (dest, ours) = tmp.rename_into(&self.depot.artifact_dir(&self.hash), &self.name)?;
        if let Some(sha256) = sha256
            && ours
            && let Err(e) = self.depot.record_tree_sha256(&self.hash, &dest, sha256)
        {
            self.reporting.emit(DepotEvent::TreeSha256NotRecorded {
                path: dest.clone(),
                error: e.to_string(),
            });
        }
        Ok(dest)
    }
}
