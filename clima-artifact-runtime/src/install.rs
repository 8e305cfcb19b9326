//! The one-pass install pipeline (specified in full by the install helper).

use std::path::PathBuf;

/// How an artifact was made available.
#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    /// An `Overrides.toml` entry points here (never hashed, never downloaded).
    Override {
        /// The overrides file that set it.
        overrides_file: PathBuf,
    },
    /// Already installed in a depot.
    Depot,
    /// Downloaded and installed by this call.
    Downloaded {
        /// The URL that succeeded.
        url: String,
        /// Bytes read from the source.
        bytes: u64,
        /// Wall time of the install in seconds.
        seconds: f64,
    },
}

/// The result of making one artifact available.
#[derive(Debug, Clone, PartialEq)]
pub struct Installed {
    /// The artifact's directory (or override target).
    pub path: PathBuf,
    /// Where it came from.
    pub origin: Origin,
}

/// Makes one artifact variant available: override, else an installed copy in any depot, else a
/// verified download into the first writable depot. The core every higher-level API calls
/// (the `Artifacts` API, the `clima_artifact!` macro's static path, the MPI root).
///
/// `manifest_dir` resolves relative download paths; `name` is used in messages.
pub fn ensure_variant(
    name: &str,
    variant: &clima_artifact_manifest::ArtifactVariant,
    manifest_dir: &std::path::Path,
    config: &crate::Config,
) -> Result<Installed, crate::Error> {
    todo!(
        "install helper {name} {variant:?} {} {config:?}",
        manifest_dir.display()
    )
}
