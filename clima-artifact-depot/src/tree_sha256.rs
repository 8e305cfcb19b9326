//! The record of an installed copy's git tree SHA-256: `artifacts/<git-tree-sha1>.git-tree-sha256`.
//!
//! A manifest entry with a `git-tree-sha256` is checked by it when it is downloaded, in the same
//! pass as the SHA-1. A copy that is already installed may have been installed by SHA-1 alone
//! (by Julia, by a package server's tarball through Julia, by an older clima-artifacts): before
//! such a copy is used for an entry with a `git-tree-sha256`, its SHA-256 tree hash is computed
//! once and recorded here, so that the next runs do not hash it again (an artifact may be 1 TB).
//! The folder keeps its SHA-1 name, so Julia and the Rust models still share one copy; Julia
//! ignores this file (Pkg's `gc` walks only the folders of `artifacts`).
//!
//! What a record says is trusted only as far as it can be:
//!
//! - it is bound to the folder it was computed for: its device, inode and ctime (seconds and
//!   nanoseconds). A folder renamed into the place of another, or replaced after the record was
//!   written, or whose top level was changed since, has another identity and is hashed again;
//! - it is read only if its owner is this user, root, or the owner of the artifact's folder
//!   (who controls that folder's content anyway, so a record of theirs claims nothing they
//!   could not already do). A record another user planted for someone else's folder is
//!   ignored, and never replaced or removed: this user's record then goes to one of its own
//!   depots;
//! - it is opened without following a symlink, without blocking on a fifo, as a regular file
//!   only, and at most [`MAX_RECORD_BYTES`] of it are read;
//! - it is written to a temp file created exclusively beside it and renamed into place, so a
//!   reader sees a whole record or none.

use std::io::{self, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use clima_artifact_fs::Dir;
use clima_artifact_manifest::layout::{Entry, RECORD_MARK};
use clima_artifact_manifest::{GitTreeSha1, GitTreeSha256};

use crate::depot::Depot;

/// How much of a record is read: one line of a 64-digit hash and four numbers.
pub const MAX_RECORD_BYTES: u64 = 256;

/// What identifies one folder for a record: device, inode and ctime; and its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FolderId {
    dev: u64,
    ino: u64,
    ctime: i64,
    ctime_nsec: i64,
    uid: u32,
}

impl FolderId {
    /// The identity of the folder at `dir` (symlinks followed: the folder that is used).
    fn of(dir: &Path) -> io::Result<FolderId> {
        let meta = std::fs::metadata(dir)?;
        if !meta.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{}` is not a folder", dir.display()),
            ));
        }
        Ok(FolderId {
            dev: meta.dev(),
            ino: meta.ino(),
            ctime: meta.ctime(),
            ctime_nsec: meta.ctime_nsec(),
            uid: meta.uid(),
        })
    }

    /// The record of `sha256` for this folder: one line.
    fn line(&self, sha256: &GitTreeSha256) -> String {
        format!(
            "{sha256} {} {} {} {}\n",
            self.dev, self.ino, self.ctime, self.ctime_nsec
        )
    }

    /// The hash `text` records for this folder, if it is a record of this folder.
    fn recorded_in(&self, text: &str) -> Option<GitTreeSha256> {
        let fields: Vec<&str> = text.split_ascii_whitespace().collect();
        let [hash, dev, ino, ctime, nsec] = fields.as_slice() else {
            return None;
        };
        let same = dev.parse() == Ok(self.dev)
            && ino.parse() == Ok(self.ino)
            && ctime.parse() == Ok(self.ctime)
            && nsec.parse() == Ok(self.ctime_nsec);
        same.then(|| GitTreeSha256::from_hex(hash).ok()).flatten()
    }

    /// Whether a record owned by `uid` may speak for this folder.
    fn trusts(&self, uid: u32) -> bool {
        uid == clima_artifact_fs::euid() || uid == 0 || uid == self.uid
    }
}

impl Depot {
    /// The git tree SHA-256 this depot's record says the installed copy `copy` of `hash` has
    /// (`copy` may be in another depot); `None` when there is no record of that very folder
    /// that can be trusted: bound to that folder's device, inode and ctime, and owned by this
    /// user, root or the folder's owner, read without following a link, at most
    /// [`MAX_RECORD_BYTES`]. Never hashes.
    pub fn recorded_tree_sha256(&self, hash: &GitTreeSha1, copy: &Path) -> Option<GitTreeSha256> {
        let id = FolderId::of(copy).ok()?;
        let dir = Dir::open(&self.artifacts_dir()).ok()?;
        let file = dir
            .open_file(Entry::TreeSha256Record(*hash).name())
            .ok()??;
        if !id.trusts(file.metadata().ok()?.uid()) {
            return None;
        }
        let mut text = String::new();
        file.take(MAX_RECORD_BYTES).read_to_string(&mut text).ok()?;
        id.recorded_in(&text)
    }

    /// Records in this depot that the installed copy `copy` of `hash` has the git tree SHA-256
    /// `sha256` (computed by the caller from that very folder). Refused, changing nothing, when
    /// the depot's `artifacts` folder is reached through another user's symlink or when
    /// another user's file holds the record's name; a record of this user's (or root's) is
    /// replaced.
    pub fn record_tree_sha256(
        &self,
        hash: &GitTreeSha1,
        copy: &Path,
        sha256: &GitTreeSha256,
    ) -> io::Result<()> {
        let id = FolderId::of(copy)?;
        if let Some(link) = self.planted_link()? {
            return Err(io::Error::other(link.to_string()));
        }
        let dir = Dir::open(&self.artifacts_dir())?;
        let name = Entry::TreeSha256Record(*hash).name();
        let path = dir.path().join(&name);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.uid() != clima_artifact_fs::euid() && meta.uid() != 0 => {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "`{}` belongs to another user (uid {}); it is left alone",
                        path.display(),
                        meta.uid()
                    ),
                ));
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        dir.reclaim_stale_temps(RECORD_MARK);
        let tmp = clima_artifact_fs::temp_name(&name, RECORD_MARK);
        let written = dir
            .create_new(&tmp, 0o644)
            .and_then(|mut f| f.write_all(id.line(sha256).as_bytes()))
            .and_then(|()| dir.rename(&tmp, &name));
        if written.is_err() {
            let _ = dir.remove_file(&tmp);
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_speaks_only_for_the_folder_it_was_made_for() {
        let t = tempfile::tempdir().unwrap();
        let depot = Depot::new(t.path());
        let hash = GitTreeSha1([7; 20]);
        let copy = depot.artifact_dir(&hash);
        std::fs::create_dir_all(&copy).unwrap();
        let sha = GitTreeSha256([9; 32]);
        assert_eq!(depot.recorded_tree_sha256(&hash, &copy), None);
        depot.record_tree_sha256(&hash, &copy, &sha).unwrap();
        assert_eq!(depot.recorded_tree_sha256(&hash, &copy), Some(sha));
        // Rewritten (a second verification): still one record, no temp file left.
        depot.record_tree_sha256(&hash, &copy, &sha).unwrap();
        let names: Vec<_> = std::fs::read_dir(depot.artifacts_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        // Another folder at the same name (replaced): not the recorded one.
        std::fs::rename(&copy, t.path().join("old")).unwrap();
        std::fs::create_dir(&copy).unwrap();
        assert_eq!(depot.recorded_tree_sha256(&hash, &copy), None);
        // Garbage, or a record of another shape: nothing.
        let record = layout_record(&depot, &hash);
        std::fs::write(&record, "not a record\n").unwrap();
        assert_eq!(depot.recorded_tree_sha256(&hash, &copy), None);
        std::fs::remove_file(&record).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &record).unwrap();
        assert_eq!(depot.recorded_tree_sha256(&hash, &copy), None);
    }

    fn layout_record(depot: &Depot, hash: &GitTreeSha1) -> std::path::PathBuf {
        clima_artifact_manifest::layout::tree_sha256_record(depot.root(), hash)
    }
}
