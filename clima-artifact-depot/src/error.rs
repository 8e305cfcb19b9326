//! What can go wrong in a depot: no writable depot, a planted link, an override that cannot
//! be followed, a lock held too long, a node-local depot that is not private.
//!
//! Messages say what to do next and hold the text of their cause, as the runtime's errors do
//! (they travel between MPI ranks as bytes, inside the runtime's error, and must read the
//! same on every rank).

use std::fmt::{self, Write as _};
use std::path::PathBuf;

use clima_artifact_fs::IoCause;
use clima_artifact_manifest::{GitTreeSha1, ManifestError};

/// Everything a depot operation can fail with. The runtime's error wraps it (its
/// `Depot` variant), except [`Error::Manifest`] and [`Error::Io`], which it keeps as its own.
#[derive(Clone, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum Error {
    /// An `Overrides.toml` is malformed or unreadable.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// A file-system operation failed (the runtime's error keeps it as its own `Io`).
    #[error("cannot {action} `{}`: {cause}", path.display())]
    Io {
        /// What was attempted, e.g. `set the permissions of`.
        action: String,
        /// The path concerned.
        path: PathBuf,
        /// The cause.
        #[source]
        cause: IoCause,
    },
    /// None of the depots can be written to.
    #[error(
        "no writable depot to install artifact `{name}` into; tried {}. Set {DEPOT_PATH} to a writable directory (colon-separated list)",
        render_tried(tried),
        DEPOT_PATH = clima_artifact_vars::DEPOT_PATH
    )]
    NoWritableDepot {
        /// The artifact being installed.
        name: String,
        /// Each depot tried and why it is not writable.
        tried: Vec<(PathBuf, String)>,
    },
    /// A depot's `artifacts` or `logs` folder is reached through a symlink that another user
    /// owns (see [`Depot::planted_link`](crate::Depot::planted_link)): installing there would write locks, partial
    /// downloads and temp dirs into that user's target, and clean up there.
    #[error(
        "not installing artifact `{name}` into the depot `{}`: {link}; nothing was written or \
         removed there. Remove the link (or have its owner remove it), or take this depot out \
         of {DEPOT_PATH}",
        depot.display(),
        DEPOT_PATH = clima_artifact_vars::DEPOT_PATH
    )]
    PlantedDepotLink {
        /// The artifact being installed.
        name: String,
        /// The depot.
        depot: PathBuf,
        /// The link, its owner and why it is refused (escaped for printing).
        link: String,
    },
    /// An override points to a path that does not exist.
    #[error(
        "`{}` line {line} overrides {hash} with `{}`, which does not exist; fix or remove that line",
        overrides_file.display(),
        target.display()
    )]
    OverrideTargetMissing {
        /// The overrides file holding the entry.
        overrides_file: PathBuf,
        /// Line of the entry.
        line: u32,
        /// The overridden hash.
        hash: GitTreeSha1,
        /// The missing target.
        target: PathBuf,
    },
    /// An override points to something that exists but is not a directory (artifacts are
    /// directories).
    #[error(
        "`{}` line {line} overrides {hash} with `{}`, which is {found}, not a directory; an \
         override must name the folder that holds the artifact's files: fix or remove that line",
        overrides_file.display(),
        target.display()
    )]
    OverrideTargetNotADirectory {
        /// The overrides file holding the entry.
        overrides_file: PathBuf,
        /// Line of the entry.
        line: u32,
        /// The overridden hash.
        hash: GitTreeSha1,
        /// The target that is not a directory.
        target: PathBuf,
        /// What it is instead.
        found: String,
    },
    /// Overrides map a hash to another hash that is not installed anywhere.
    #[error(
        "`{}` line {line} overrides {hash} with artifact {target}, which is not installed in any depot ({}); install {target} or fix that line",
        overrides_file.display(),
        render_paths(depots)
    )]
    OverrideTargetNotInstalled {
        /// The overrides file holding the entry.
        overrides_file: PathBuf,
        /// Line of the entry.
        line: u32,
        /// The overridden hash.
        hash: GitTreeSha1,
        /// The hash it points to.
        target: GitTreeSha1,
        /// Depots that were searched.
        depots: Vec<PathBuf>,
    },
    /// Hash-to-hash overrides form a cycle.
    #[error(
        "override cycle: {}; break the cycle by editing one of these files",
        render_cycle(chain)
    )]
    OverrideCycle {
        /// Each step: the hash, and the overrides file and line that redirects it.
        chain: Vec<(GitTreeSha1, PathBuf, u32)>,
    },
    /// Another process held the artifact's lock for too long.
    #[error(
        "timed out after {seconds}s waiting for `{}` ({holder}); if that process is stuck, stop it, or raise {LOCK_TIMEOUT} (seconds)",
        path.display(),
        LOCK_TIMEOUT = clima_artifact_vars::LOCK_TIMEOUT
    )]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// The timeout in seconds.
        seconds: u64,
        /// Who holds it, as written in the lock file (e.g. `pid 1234 on node7`).
        holder: String,
    },
    /// The node-local depot (MPI node-local mode) cannot be created.
    #[error(
        "cannot create the node-local depot `{}` (set by {NODE_LOCAL_DEPOT}): {cause}; point {NODE_LOCAL_DEPOT} at a writable folder on each node, or unset it to install into the shared depot",
        path.display(),
        NODE_LOCAL_DEPOT = clima_artifact_vars::NODE_LOCAL_DEPOT
    )]
    NodeLocalDepot {
        /// The node depot.
        path: PathBuf,
        /// The cause.
        #[source]
        cause: IoCause,
    },
    /// The node-local depot (MPI node-local mode) is not private to this user: another user
    /// could have planted what it holds: the folder or its `artifacts` folder belongs to
    /// someone else, others can write to it, or another user's symlink is on the way.
    #[error(
        "not using the node-local depot `{}` (set by {NODE_LOCAL_DEPOT}): {why}; \
         nothing was read or written there. A node depot must be yours and writable only by \
         you: point {NODE_LOCAL_DEPOT} at a folder of your own that does not \
         exist yet (the job creates it, e.g. `$TMPDIR/clima-depot`), or unset it to use the \
         shared depot",
        path.display(),
        NODE_LOCAL_DEPOT = clima_artifact_vars::NODE_LOCAL_DEPOT
    )]
    NodeLocalDepotNotPrivate {
        /// The node depot.
        path: PathBuf,
        /// What makes it not private (escaped for printing).
        why: String,
    },
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The message holds every cause's text already; printing the chain would repeat it.
        fmt::Display::fmt(self, f)
    }
}

/// Paths for a message: `` `a`, `b` ``, or "none configured" (the runtime's messages list
/// depots the same way).
#[doc(hidden)]
pub fn render_paths(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "none configured".to_owned();
    }
    paths
        .iter()
        .map(|p| format!("`{}`", p.display()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn render_tried(tried: &[(PathBuf, String)]) -> String {
    if tried.is_empty() {
        return "none (no depot is configured)".to_owned();
    }
    tried
        .iter()
        .map(|(p, why)| format!("`{}` ({why})", p.display()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn render_cycle(chain: &[(GitTreeSha1, PathBuf, u32)]) -> String {
    let mut s = String::new();
    for (i, (hash, file, line)) in chain.iter().enumerate() {
        if i > 0 {
            s.push_str(" -> ");
        }
        let _ = write!(s, "{hash} (`{}` line {line})", file.display());
    }
    if let Some((first, _, _)) = chain.first() {
        let _ = write!(s, " -> {first}");
    }
    s
}
