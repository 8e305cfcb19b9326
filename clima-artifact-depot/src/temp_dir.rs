//! An install's temp dir in a depot's `artifacts` folder, private and open since it was made.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use clima_artifact_fs::{Dir, euid};
use clima_artifact_manifest::GitTreeSha1;
use clima_artifact_progress::notice::{self, Event};

use crate::Error;
use crate::depot::Depot;

/// An install's temp dir, open since it was created: the extraction writes through its
/// [`Dir`], and `path` is checked to still name that folder before it is renamed or removed.
/// Removes itself unless [`TempDir::keep`] is called.
pub struct TempDir {
    path: Option<PathBuf>,
    dir: Dir,
}

impl TempDir {
    /// Creates `path` private (0o700 whatever the umask or a default ACL says, so no other
    /// user can reach into it) and opens it, refusing anything but the folder just made.
    pub fn create(path: PathBuf) -> io::Result<TempDir> {
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        let replaced = || {
            io::Error::other(
                "the folder just created was replaced by another user's before it was \
                 opened; make the depot's `artifacts` folder sticky (`chmod +t`) or \
                 writable only by trusted users",
            )
        };
        let dir = match Dir::open_no_follow(&path) {
            Ok(d) if d.metadata().is_ok_and(|m| m.uid() == euid()) => d,
            // Not ours any more (renamed and replaced between mkdir and open): leave it.
            Ok(_) => return Err(replaced()),
            Err(e) => {
                let still_a_folder = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
                return Err(if still_a_folder { e } else { replaced() });
            }
        };
        let tmp = TempDir {
            path: Some(path),
            dir,
        };
        tmp.dir.set_mode(0o700)?;
        Ok(tmp)
    }

    /// The folder, open.
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// The folder's path (empty once it was kept).
    pub fn path(&self) -> &Path {
        self.path.as_deref().unwrap_or(Path::new(""))
    }

    /// Whether `path` still names the folder opened as `dir` (another user who may rename
    /// entries of the depot's `artifacts` folder could have moved it and put something else
    /// there).
    pub fn still_in_place(&self) -> bool {
        match (std::fs::symlink_metadata(self.path()), self.dir.metadata()) {
            (Ok(at_path), Ok(opened)) => {
                at_path.dev() == opened.dev() && at_path.ino() == opened.ino()
            }
            _ => false,
        }
    }

    /// Leaves the folder in place when dropped (it was renamed into the depot).
    pub fn keep(mut self) {
        self.path = None;
    }
}

impl Depot {
    /// Commits the verified install in `tmp` as `artifacts/<hash>` of this depot (`name` in
    /// messages): the folder made 0o755 like every folder inside it, whatever the umask,
    /// checked to still be the folder that was filled, and renamed into place. Another process
    /// that put the artifact there first (without a working lock, e.g. on NFS) is success.
    pub fn commit(&self, tmp: TempDir, hash: &GitTreeSha1, name: &str) -> Result<PathBuf, Error> {
        let failed = |action: String, path: &Path, e: io::Error| Error::Io {
            action,
            path: path.to_path_buf(),
            cause: e.into(),
        };
        let dest = self.artifact_dir(hash);
        tmp.dir()
            .set_mode(0o755)
            .map_err(|e| failed("set the permissions of".to_owned(), tmp.path(), e))?;
        // What is renamed must be the folder that was verified, not what someone put at its
        // path meanwhile.
        if !tmp.still_in_place() {
            return Err(failed(
                format!("move verified artifact `{name}` into place from"),
                tmp.path(),
                io::Error::other(
                    "the folder was moved away and something else put at its path while it \
                     was filled; nothing was installed. Another user can rename entries of \
                     this depot's `artifacts` folder: make it sticky (`chmod +t`) or writable \
                     only by trusted users",
                ),
            ));
        }
        match std::fs::rename(tmp.path(), &dest) {
            Ok(()) => {
                tmp.keep();
                Ok(dest)
            }
            // Another process (without a working lock, e.g. on NFS) won the race: success.
            Err(_) if dest.is_dir() => Ok(dest),
            Err(e) => Err(failed(
                format!("move verified artifact `{name}` into place as"),
                &dest,
                e,
            )),
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if self.path.is_some() && !self.still_in_place() {
            // What is there now is someone else's: never removed. Our folder was moved away.
            notice::emit(Event::TempDirMovedAway {
                path: self.path().to_path_buf(),
            });
            return;
        }
        if let Some(p) = self.path.take() {
            remove_tree(&p);
        }
    }
}

/// [`clima_artifact_fs::remove_tree`], logging instead of failing (cleanup of temp dirs).
pub(crate) fn remove_tree(path: &Path) {
    if let Err(e) = clima_artifact_fs::remove_tree(path) {
        notice::emit(Event::CannotRemove {
            path: path.to_path_buf(),
            error: e.to_string(),
        });
    }
}
