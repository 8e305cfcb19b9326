//! [`Depot`]: one depot folder and every path of its layout, the search order of a process's
//! depots, lookups, the first writable depot, and the node-local depot's privacy check.
//!
//! ```text
//! <depot>/                              one entry of CLIMA_ARTIFACTS_DEPOT_PATH (or the cache dir)
//!   artifacts/
//!     <git-tree-sha1>/                  an installed artifact (Julia's layout)
//!     Overrides.toml                    this depot's overrides
//!     .locks/<git-tree-sha1>.lock       per-artifact install locks
//!     .<hash>.clima-install-<host>.<pid>.<rand>/
//!                                       an install in progress (renamed into place when verified)
//!   logs/
//!     artifact_usage.toml               manifests that used this depot (Julia's format; for `gc`)
//!     orphaned.toml                     artifacts gc found unreferenced, and since when
//! ```
//!
//! [`Depot`] owns this layout: every path above is a method of it, and so are the temp dirs
//! of installs and their reclamation (`reclaim`), and the usage log (`usage`).
//!
//! Lookups search every depot in order (a process's own depots, then Julia's depots when
//! interop is on: [`search_order`]); installs go to the first writable one of its own depots
//! ([`first_writable`]; Julia's depots are searched, never written).

use crate::notice::DepotEvent;
use clima_artifact_progress::Reporting;
use std::path::{Path, PathBuf};

use clima_artifact_manifest::GitTreeSha1;
use clima_artifact_manifest::layout::{self, INSTALL_MARK, PROBE_PREFIX};
use clima_artifact_vars as vars;

use crate::Error;
use crate::locked_file::LockedFile;

/// One depot folder and the layout inside it (see the [crate docs](crate)).
///
/// Its serde form is the folder's path.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct Depot {
    root: PathBuf,
}

impl Depot {
    /// The depot at `root` (nothing is created or checked).
    pub fn new(root: impl Into<PathBuf>) -> Depot {
        Depot { root: root.into() }
    }

    /// The depot folder itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<depot>/artifacts`.
    pub fn artifacts_dir(&self) -> PathBuf {
        layout::artifacts_dir(&self.root)
    }

    /// `<depot>/artifacts/<hash>`.
    pub fn artifact_dir(&self, hash: &GitTreeSha1) -> PathBuf {
        layout::artifact_dir(&self.root, hash)
    }

    /// The installed copy of `hash` here, if its folder exists (nothing is hashed).
    pub fn installed(&self, hash: &GitTreeSha1) -> Option<PathBuf> {
        Some(self.artifact_dir(hash)).filter(|p| p.is_dir())
    }

    /// `<depot>/artifacts/Overrides.toml`.
    pub fn overrides_path(&self) -> PathBuf {
        layout::overrides_file(&self.root)
    }

    /// `<depot>/artifacts/.locks/<hash>.lock`.
    pub fn lock_path(&self, hash: &GitTreeSha1) -> PathBuf {
        layout::lock_file(&self.root, hash)
    }

    /// `<depot>/logs`.
    pub fn logs_dir(&self) -> PathBuf {
        layout::logs_dir(&self.root)
    }

    /// `<depot>/logs/artifact_usage.toml`: the manifests that used this depot (Julia's format).
    pub fn usage_log(&self) -> PathBuf {
        layout::usage_log(&self.root)
    }

    /// `<depot>/logs/orphaned.toml`: artifacts that gc found unreferenced, and since when.
    pub fn orphan_log(&self) -> PathBuf {
        layout::orphan_log(&self.root)
    }

    /// The artifact, host tag and pid of the install temp dir named `name`, if it is one.
    pub fn temp_dir_owner(name: &str) -> Option<(GitTreeSha1, &str, i32)> {
        let (hash, host, pid) = clima_artifact_fs::temp_owner(name, INSTALL_MARK)?;
        Some((GitTreeSha1::from_hex(hash).ok()?, host, pid))
    }

    /// Takes this depot's lock of `hash` if nobody holds it, without waiting (`None` when
    /// another process, or another open lock file of this one, holds it).
    /// An unusable lock file is said through `reporting` and yields an unlocked guard.
    pub fn try_lock(&self, hash: &GitTreeSha1, reporting: &Reporting) -> Option<LockedFile> {
        LockedFile::try_acquire(&self.lock_path(hash), reporting)
    }

    /// The rule that keeps installs and `gc` out of a victim's folders: the first symlink on
    /// the way to this depot's `artifacts` or `logs` folder that neither this user nor root
    /// owns (`Ok(None)` when there is none; see [`clima_artifact_fs::foreign_link`]). Another
    /// user of a shared depot could point such a link at folders of the victim's (their
    /// `~/.julia/artifacts`), for an install to write its locks, partial downloads and temp
    /// dirs into, or for the cleanup of stale ones and `gc` to delete in. A user's own
    /// symlinks (a depot moved to a bigger disk) are followed.
    pub fn planted_link(&self) -> std::io::Result<Option<clima_artifact_fs::ForeignLink>> {
        for folder in [self.artifacts_dir(), self.logs_dir()] {
            if let Some(link) = clima_artifact_fs::foreign_link(&folder)? {
                return Ok(Some(link));
            }
        }
        Ok(None)
    }
}

impl From<&PathBuf> for Depot {
    fn from(root: &PathBuf) -> Depot {
        Depot::new(root)
    }
}

impl From<PathBuf> for Depot {
    fn from(root: PathBuf) -> Depot {
        Depot::new(root)
    }
}

impl From<&Path> for Depot {
    fn from(root: &Path) -> Depot {
        Depot::new(root)
    }
}

impl AsRef<Path> for Depot {
    fn as_ref(&self) -> &Path {
        &self.root
    }
}

/// Julia's depots: `JULIA_DEPOT_PATH` (colon-separated; an empty entry means the default
/// `~/.julia`, as in Julia), else `~/.julia`.
pub fn julia_depots() -> Vec<Depot> {
    let home_julia = dirs::home_dir().map(|h| Depot::new(h.join(".julia")));
    match std::env::var_os(vars::JULIA_DEPOT_PATH) {
        Some(v) if !v.is_empty() => {
            let mut out = Vec::new();
            for part in v.to_string_lossy().split(':') {
                if part.is_empty() {
                    out.extend(home_julia.clone());
                } else {
                    out.push(Depot::new(part));
                }
            }
            out.dedup();
            out
        }
        _ => home_julia.into_iter().collect(),
    }
}

/// Every depot searched by lookups, in order: `own`, then (with Julia interop, `julia` is
/// `Some`) Julia's depots that are not among them already.
pub fn search_order(own: &[Depot], julia: Option<Vec<Depot>>) -> Vec<Depot> {
    let mut out = own.to_vec();
    for d in julia.into_iter().flatten() {
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// The installed copy of `hash` in the first depot that has it. Checks existence only (no
/// hashing).
pub fn find_installed(depots: &[Depot], hash: &GitTreeSha1) -> Option<PathBuf> {
    depots.iter().find_map(|d| d.installed(hash))
}

/// The first of `depots` where a file can be created in `<depot>/artifacts` (created if
/// missing), for installing the artifact `name` (named in the error, which lists each depot
/// and why it was refused).
///
/// A depot whose `artifacts` or `logs` folder is reached through another user's symlink
/// ([`Depot::planted_link`]) is refused with [`Error::PlantedDepotLink`] before anything is
/// created in it, and the search stops there (installing into a later depot instead would
/// hide it).
pub fn first_writable(depots: &[Depot], name: &str) -> Result<Depot, Error> {
    let mut tried = Vec::new();
    for depot in depots {
        match depot.planted_link() {
            Ok(Some(link)) => {
                return Err(Error::PlantedDepotLink {
                    name: name.to_owned(),
                    depot: depot.root.clone(),
                    link: clima_artifact_fs::printable(&link.to_string()).into_owned(),
                });
            }
            Ok(None) => {}
            Err(e) => {
                tried.push((
                    depot.root.clone(),
                    format!("cannot check `{}`: {e}", depot.root.display()),
                ));
                continue;
            }
        }
        match probe_writable(&depot.root) {
            Ok(()) => return Ok(depot.clone()),
            Err(why) => tried.push((depot.root.clone(), why)),
        }
    }
    Err(Error::NoWritableDepot {
        name: name.to_owned(),
        tried,
    })
}

impl Depot {
    /// Creates this node-local depot if missing (mode 0o755, whatever the umask adds) and
    /// checks that it is private to this user before anything in it is used: no symlink of
    /// another user's on the way ([`clima_artifact_fs::foreign_link`]), the folder and its
    /// `artifacts` folder owned by this user and writable by nobody else, and `artifacts` no
    /// symlink at all (opened without following one). Node depots are trusted like the user's
    /// own files (what `artifacts/<hash>/` holds there is used without hashing), so a folder
    /// that another user created first, or one they could write to, is refused
    /// ([`Error::NodeLocalDepotNotPrivate`]).
    pub fn create_private_node(&self) -> Result<(), Error> {
        let path = self.root();
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        let refuse = |why: String| Error::NodeLocalDepotNotPrivate {
            path: path.to_path_buf(),
            why: clima_artifact_fs::printable(&why).into_owned(),
        };
        let cannot = |e: std::io::Error| Error::NodeLocalDepot {
            path: path.to_path_buf(),
            cause: e.into(),
        };
        if let Some(link) = clima_artifact_fs::foreign_link(path).map_err(cannot)? {
            return Err(refuse(link.to_string()));
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(path)
            .map_err(cannot)?;
        let root = clima_artifact_fs::Dir::open(path).map_err(cannot)?;
        let artifacts = root.create_dir(layout::ARTIFACTS, 0o755).map_err(|e| {
            match clima_artifact_fs::Unexpected::of(&e) {
                Some(planted) => refuse(planted.to_string()),
                None => cannot(e),
            }
        })?;
        let me = clima_artifact_fs::euid();
        for dir in [&root, &artifacts] {
            let meta = dir.metadata().map_err(cannot)?;
            let shown = dir.path().display();
            if meta.uid() != me {
                return Err(refuse(format!(
                    "`{shown}` belongs to uid {}, not to you (uid {me}): its owner can put any \
                     content under `artifacts/<hash>/` for the job to use",
                    meta.uid()
                )));
            }
            if meta.mode() & 0o022 != 0 {
                return Err(refuse(format!(
                    "`{shown}` can be written by its group or by others (mode {:o}): anyone who \
                     can write there can put content under `artifacts/<hash>/` for the job to use",
                    meta.mode() & 0o7777
                )));
            }
        }
        Ok(())
    }
}

/// The artifact and owner uid of the partial download named `name`, if it is one.
pub(crate) fn partial_owner(name: &str) -> Option<(GitTreeSha1, u32)> {
    match layout::Entry::parse(name)? {
        layout::Entry::Partial { artifact, uid, .. } => Some((artifact, uid)),
        _ => None,
    }
}

/// How long a partial download nobody works on is kept for a later attempt to continue:
/// 7 days since it last received a byte.
pub const PARTIAL_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// Age after which a leftover probe file is removed (a live probe exists for microseconds).
pub const PROBE_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(60);

fn probe_writable(depot: &Path) -> Result<(), String> {
    let dir = layout::artifacts_dir(depot);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
    // An unnamed file (O_TMPFILE) never appears in the directory, even if we are killed.
    // Where the filesystem does not support it, fall back to a named probe removed at once.
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        if std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_TMPFILE)
            .open(&dir)
            .is_ok()
        {
            return Ok(());
        }
    }
    let probe = dir.join(format!(
        "{PROBE_PREFIX}{}-{}",
        std::process::id(),
        clima_artifact_fs::unique()
    ));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!("cannot create a file in `{}`: {e}", dir.display())),
    }
}

/// [`clima_artifact_fs::remove_tree`], logging instead of failing (cleanup of temp dirs).
pub(crate) fn remove_tree(path: &Path, reporting: &Reporting) {
    if let Err(e) = clima_artifact_fs::remove_tree(path) {
        reporting.emit(DepotEvent::CannotRemove {
            path: path.to_path_buf(),
            error: e.to_string(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_temp_dirs_name_their_artifact_host_and_pid() {
        let hash = GitTreeSha1::from_hex(&"ab".repeat(20)).unwrap();
        let depot = Depot::new("/d");
        let tmp = depot
            .artifacts_dir()
            .join(clima_artifact_fs::temp_name(&hash.to_hex(), INSTALL_MARK));
        assert_eq!(tmp.parent(), Some(Path::new("/d/artifacts")));
        let name = tmp.file_name().unwrap().to_str().unwrap();
        let (h, host, pid) = Depot::temp_dir_owner(name).unwrap();
        assert_eq!(
            (h, host, pid),
            (
                hash,
                clima_artifact_fs::host_tag().as_str(),
                std::process::id() as i32
            )
        );
        assert_eq!(
            Depot::temp_dir_owner(&format!(".{}.clima-install-n7.12.00ff", "ab".repeat(20))),
            Some((hash, "n7", 12))
        );
        assert_eq!(Depot::temp_dir_owner(".zz.clima-install-n7.12.00ff"), None);
        assert_eq!(Depot::temp_dir_owner(&"ab".repeat(20)), None);
    }

    #[test]
    fn first_writable_skips_unusable_depots() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, b"x").unwrap();
        let good = dir.path().join("good");
        let depots = [Depot::new(&file), Depot::new(&good)];
        assert_eq!(first_writable(&depots, "x").unwrap(), Depot::new(&good));
        let e = first_writable(&depots[..1], "x").unwrap_err().to_string();
        assert!(
            e.contains("a-file") && e.contains("CLIMA_ARTIFACTS_DEPOT_PATH"),
            "{e}"
        );
    }
}
