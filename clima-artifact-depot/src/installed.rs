//! What making an artifact available returns: where it is and where it came from. A module of
//! its own: this crate's lookups and staging (which find installed copies) return it, and so
//! does the runtime's install (which makes them), which re-exports both types. [`Origin`] is
//! the manifest crate's, the one type the provenance report records too.

use std::path::PathBuf;

pub use clima_artifact_manifest::Origin;

/// The result of making one artifact available.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Installed {
    /// The artifact's directory (or override target).
    pub path: PathBuf,
    /// Where it came from.
    pub origin: Origin,
}
