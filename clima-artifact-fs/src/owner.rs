//! Deciding by ownership whether to act through a symlink: a user's own symlinked folder (a
//! depot's `artifacts` on a bigger disk) keeps working, while a link that another user planted
//! in a folder they may write to is refused before anything is written or deleted through it.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The effective user id of this process.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// A symlink on the way to a folder that belongs to someone else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignLink {
    /// The symlink.
    pub link: PathBuf,
    /// Its owner's user id.
    pub owner: u32,
}

impl std::fmt::Display for ForeignLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` is a symbolic link owned by uid {}, neither you (uid {}) nor root: another \
             user may have planted it to make you act on their target",
            self.link.display(),
            self.owner,
            euid()
        )
    }
}

impl std::error::Error for ForeignLink {}

/// Most symlinks followed while checking one path (as the kernel's limit of 40).
const MAX_LINKS: usize = 40;

/// The first symlink, in `path` or in the targets of the links it goes through, that is owned
/// neither by this process's user nor by root (`Ok(None)` when there is none). Only
/// components that exist are checked; a missing one ends the walk. Relative paths are taken
/// from the current directory.
pub fn foreign_link(path: &Path) -> io::Result<Option<ForeignLink>> {
    let mut followed = 0;
    check(&std::path::absolute(path)?, &mut followed)
}

/// Whether a symlink owned by `uid` is followed: this user's own, and root's.
fn trusted(uid: u32) -> bool {
    uid == euid() || uid == 0
}

fn check(path: &Path, followed: &mut usize) -> io::Result<Option<ForeignLink>> {
    let mut at = PathBuf::from("/");
    for component in path.components().skip(1) {
        at.push(component);
        let meta = match std::fs::symlink_metadata(&at) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        if !meta.file_type().is_symlink() {
            continue;
        }
        if !trusted(meta.uid()) {
            return Ok(Some(ForeignLink {
                link: at,
                owner: meta.uid(),
            }));
        }
        *followed += 1;
        if *followed > MAX_LINKS {
            return Err(io::Error::other(format!(
                "too many levels of symbolic links at `{}`",
                at.display()
            )));
        }
        // A link of ours (or root's): what it points to is checked the same way.
        let target = std::fs::read_link(&at)?;
        let parent = at.parent().unwrap_or(Path::new("/")).to_path_buf();
        let resolved = std::path::absolute(parent.join(target))?;
        if let Some(found) = check(&resolved, followed)? {
            return Ok(Some(found));
        }
        at = match std::fs::canonicalize(&at) {
            Ok(real) => real,
            // A dangling link of ours: nothing beyond it to act on.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_links_are_trusted_and_followed() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir_all(real.join("artifacts")).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        let via = dir.path().join("link/artifacts/missing/deeper");
        assert_eq!(foreign_link(&via).unwrap(), None);
        assert_eq!(foreign_link(Path::new("/")).unwrap(), None);
    }

    #[test]
    fn a_loop_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(dir.path().join("b"), dir.path().join("a")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("a"), dir.path().join("b")).unwrap();
        assert!(foreign_link(&dir.path().join("a/x")).is_err());
    }
}
