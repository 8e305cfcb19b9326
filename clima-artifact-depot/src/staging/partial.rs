//! A staging's partial downloads: the file a large download keeps its bytes in for resuming,
//! its name (one per artifact, URL and user) and the key of its URL, which its header records.

use crate::notice::PartialOnNodeReason;
use clima_artifact_fs::Dir;
use clima_artifact_manifest::GitTreeSha1;
use clima_artifact_manifest::layout::Entry;

use super::Staging;
use crate::depot::{Depot, first_writable, partial_owner};

/// The file a large download keeps its bytes in, for resuming: `name` in `dir` (the
/// `artifacts` folder of the depot that keeps partials), and the key of its URL, which the
/// file's header records.
pub struct PartialFile {
    /// The folder, open.
    pub dir: Dir,
    /// The file's name there (one per artifact, URL and user).
    pub name: String,
    /// The key of the URL it is downloaded from.
    pub key: String,
}

impl Staging {
    /// Keeps partial downloads in the first writable of `candidates` instead of this depot
    /// (in node-local mode, a shared depot: the end of a job may wipe the node's), with its
    /// lock of the artifact held while they are used. When none is writable, or another
    /// installer holds that lock, they stay here, and the reason says why.
    pub fn keep_partials_in(&mut self, candidates: &[Depot]) -> Result<(), PartialOnNodeReason> {
        let depot = first_writable(candidates, &self.name).map_err(|e| {
            PartialOnNodeReason::NoSharedDepot {
                error: e.to_string(),
            }
        })?;
        let Some(lock) = depot.try_lock(&self.hash, &self.reporting) else {
            return Err(PartialOnNodeReason::SharedLockHeld {
                depot: depot.root().to_path_buf(),
            });
        };
        self.partials = Some((depot, lock));
        Ok(())
    }

    /// The depot whose `artifacts` folder keeps this install's partial downloads: this one,
    /// or the one [`Staging::keep_partials_in`] chose.
    pub fn partials_depot(&self) -> &Depot {
        self.partials.as_ref().map_or(&self.depot, |(d, _)| d)
    }

    /// The partial file of a large download of the artifact from `url` by this user, in the
    /// depot that keeps partials (`None` when its `artifacts` folder cannot be opened: the
    /// download then keeps nothing).
    pub fn partial(&self, url: &str) -> Option<PartialFile> {
        let dir = Dir::open(&self.partials_depot().artifacts_dir()).ok()?;
        Some(PartialFile {
            dir,
            name: partial_name(&self.hash, url),
            key: url_key(url),
        })
    }

    /// Removes the partial file `partial` if it is this user's own regular file (a download
    /// that failed in a way another attempt would not mend); returns whether it did.
    pub fn remove_partial(&self, partial: &PartialFile) -> bool {
        remove_own_file(&partial.dir, &partial.name)
    }

    /// Removes this user's partial downloads of the artifact from every URL (once it is
    /// installed, they are of no use).
    pub fn remove_partials(&self) {
        let Ok(dir) = Dir::open(&self.partials_depot().artifacts_dir()) else {
            return;
        };
        let euid = clima_artifact_fs::euid();
        for entry in dir.entries().unwrap_or_default() {
            let Some(name) = entry.name.to_str() else {
                continue;
            };
            if partial_owner(name) == Some((self.hash, euid)) {
                remove_own_file(&dir, name);
            }
        }
    }
}

/// The name of the partial file a large download of `hash` from `url` by this user keeps its
/// bytes in (in the depot's `artifacts` folder): one per artifact, URL and user, so that any
/// process of the user, on any host sharing the depot, continues it, and users never write to
/// each other's.
pub fn partial_name(hash: &GitTreeSha1, url: &str) -> String {
    Entry::Partial {
        artifact: *hash,
        url_key: &url_key(url),
        uid: clima_artifact_fs::euid(),
    }
    .name()
}

/// The key of `url` in partial file names and headers (hex of its SHA-256's first 8 bytes).
fn url_key(url: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(url.as_bytes())[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Removes the file `name` of `dir` if it is this user's own regular file (a partial
/// download); returns whether it did.
pub(crate) fn remove_own_file(dir: &Dir, name: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    match dir.open_file(name) {
        Ok(Some(f))
            if f.metadata()
                .is_ok_and(|m| m.uid() == clima_artifact_fs::euid()) =>
        {
            dir.remove_file_if_same(name, &f).unwrap_or(false)
        }
        _ => false,
    }
}
