//! An install's temp dir in a depot's `artifacts` folder, private and open since it was made,
//! borrowed from its [`Staging`].

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::notice::DepotEvent;
use clima_artifact_fs::{Dir, euid};
use clima_artifact_manifest::layout::INSTALL_MARK;

use super::Staging;
use crate::Error;

/// An install's temp dir, open since it was created: the extraction writes through its
/// [`Dir`], and `path` is checked to still name that folder before it is renamed or removed.
/// Made by [`Staging::temp_dir`], which it borrows (the install's locks are held while it
/// exists); removes itself unless [`Staging::commit`] renamed it into place.
pub struct TempDir<'s> {
    staging: &'s Staging,
    path: Option<PathBuf>,
    dir: Dir,
}

impl<'s> TempDir<'s> {
    /// Creates a fresh temp dir of `staging` in its depot's `artifacts` folder, named for this
    /// process (`.<hash>.clima-install-<host>.<pid>.<random>`), private (0o700 whatever the
    /// umask or a default ACL says, so no other user can reach into it), and opens it,
    /// refusing anything but the folder just made.
    pub(crate) fn create(staging: &'s Staging) -> Result<TempDir<'s>, Error> {
        let name = clima_artifact_fs::temp_name(&staging.hash().to_hex(), INSTALL_MARK);
        let path = staging.depot().artifacts_dir().join(name);
        TempDir::create_at(staging, path.clone()).map_err(|e| Error::Io {
            action: "create temporary directory".to_owned(),
            path,
            cause: e.into(),
        })
    }

    fn create_at(staging: &'s Staging, path: PathBuf) -> io::Result<TempDir<'s>> {
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
            staging,
            path: Some(path),
            dir,
        };
        tmp.dir.set_mode(0o700)?;
        Ok(tmp)
    }

    /// The folder, open: what the verified tree is written into.
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// The folder's path (empty once it was renamed into place).
    pub fn path(&self) -> &Path {
        self.path.as_deref().unwrap_or(Path::new(""))
    }

    /// The staging it belongs to.
    pub(crate) fn staging(&self) -> &'s Staging {
        self.staging
    }

    /// Whether `path` still names the folder opened as `dir` (another user who may rename
    /// entries of the depot's `artifacts` folder could have moved it and put something else
    /// there).
    fn still_in_place(&self) -> bool {
        match (std::fs::symlink_metadata(self.path()), self.dir.metadata()) {
            (Ok(at_path), Ok(opened)) => {
                at_path.dev() == opened.dev() && at_path.ino() == opened.ino()
            }
            _ => false,
        }
    }

    /// Renames this folder to `dest` (artifact `name` in messages): made 0o755 first, and
    /// checked to still be the folder that was filled. Returns `dest`, and whether the folder
    /// there is this one (not another process's that won the race to the name, which is
    /// success too).
    pub(crate) fn rename_into(mut self, dest: &Path, name: &str) -> Result<(PathBuf, bool), Error> {
        let failed = |action: String, path: &Path, e: io::Error| Error::Io {
            action,
            path: path.to_path_buf(),
            cause: e.into(),
        };
        self.dir
            .set_mode(0o755)
            .map_err(|e| failed("set the permissions of".to_owned(), self.path(), e))?;
        // What is renamed must be the folder that was verified, not what someone put at its
        // path meanwhile.
        if !self.still_in_place() {
            return Err(failed(
                format!("move verified artifact `{name}` into place from"),
                self.path(),
                io::Error::other(
                    "the folder was moved away and something else put at its path while it \
                     was filled; nothing was installed. Another user can rename entries of \
                     this depot's `artifacts` folder: make it sticky (`chmod +t`) or writable \
                     only by trusted users",
                ),
            ));
        }
        match std::fs::rename(self.path(), dest) {
            Ok(()) => {
                self.path = None;
                // Renamed: the folder at `dest` is the one this process filled, unless
                // someone moved it on already.
                let ours = match (std::fs::metadata(dest), self.dir.metadata()) {
                    (Ok(at), Ok(opened)) => at.dev() == opened.dev() && at.ino() == opened.ino(),
                    _ => false,
                };
                Ok((dest.to_path_buf(), ours))
            }
            // Another process (without a working lock, e.g. on NFS) won the race: success.
            Err(_) if dest.is_dir() => Ok((dest.to_path_buf(), false)),
            Err(e) => Err(failed(
                format!("move verified artifact `{name}` into place as"),
                dest,
                e,
            )),
        }
    }
}

impl Drop for TempDir<'_> {
    fn drop(&mut self) {
        if self.path.is_some() && !self.still_in_place() {
            // What is there now is someone else's: never removed. Our folder was moved away.
            self.staging.reporting.emit(DepotEvent::TempDirMovedAway {
                path: self.path().to_path_buf(),
            });
            return;
        }
        if let Some(p) = self.path.take() {
            crate::depot::remove_tree(&p, &self.staging.reporting);
        }
    }
}
