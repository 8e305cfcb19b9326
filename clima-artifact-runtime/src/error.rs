//! The runtime's one error enum. Every message says what to do next.

use std::path::PathBuf;

/// Everything that can go wrong when resolving, downloading or installing an artifact.
///
/// `Clone` so that an MPI root can broadcast its error and every rank returns the same one
/// (see [`Error::to_wire`] / [`Error::from_wire`]).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The manifest or an overrides file is malformed, or a name/sub-path is invalid.
    #[error(transparent)]
    Manifest(#[from] clima_artifact_manifest::ManifestError),
    /// The name is not in the manifest, or no platform variant fits.
    #[error(transparent)]
    Select(#[from] clima_artifact_manifest::SelectError),
    /// A bad `name/sub/path`.
    #[error(transparent)]
    SubPath(#[from] clima_artifact_manifest::SubPathError),
    /// Catch-all for the install pipeline until it gets its own variants; carries a full message.
    #[error("{message}")]
    Other {
        /// The complete, actionable message.
        message: String,
        /// A path involved, if any.
        path: Option<PathBuf>,
    },
}
