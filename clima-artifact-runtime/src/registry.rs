//! The global provenance registry: every artifact access in this process (specified in full by
//! the provenance helper).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::GitTreeSha1;
use crate::install::Origin;

/// One access, as reported by the code paths that resolve artifacts (the `Artifacts` API, the
/// macro's static path, the MPI collective path).
#[derive(Debug, Clone)]
pub struct AccessEvent {
    /// Artifact name as written in the manifest.
    pub name: String,
    /// Its git tree SHA-1.
    pub hash: GitTreeSha1,
    /// The resolved directory (without any sub-path).
    pub path: PathBuf,
    /// Override, depot, or downloaded now (with bytes and seconds).
    pub origin: Origin,
    /// `file:line` of the `clima_artifact!` call, when known.
    pub call_site: Option<(&'static str, u32)>,
    /// The manifest that defined it.
    pub manifest: PathBuf,
    /// Provenance metadata keys of the entry (`license`, `citation`, ...).
    pub metadata: BTreeMap<String, String>,
    /// Rank of the calling process in its context (0 when serial).
    pub rank: usize,
}

/// Records an access in the process-wide registry. Cheap and thread-safe.
pub fn record(event: AccessEvent) {
    todo!("provenance helper {event:?}")
}
