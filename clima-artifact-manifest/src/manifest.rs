//! `Artifacts.toml`: the manifest that names artifacts and says where to download them.
//!
//! ```toml
//! [era5]                                  # a table entry: one artifact for every platform
//! git-tree-sha1 = "<40 hex>"
//! lazy = true                             # optional
//! license = "CC-BY-4.0"                   # any other key is kept as metadata
//!     [[era5.download]]                   # zero or more, tried in order
//!     url = "https://..."
//!     sha256 = "<64 hex>"
//!     size = 1234                         # optional
//!
//! [[OpenBLAS]]                            # an array entry: one variant per platform
//! os = "linux"
//! arch = "x86_64"
//! libc = "glibc"                          # further string keys are platform tags
//! git-tree-sha1 = "<40 hex>"
//!     [[OpenBLAS.download]]
//!     ...
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::{GitTreeSha1, ManifestError, Platform, SelectError, Sha256};

/// File names searched for a manifest, in order (Julia's rule).
pub const MANIFEST_FILE_NAMES: [&str; 2] = ["JuliaArtifacts.toml", "Artifacts.toml"];

/// One `[[name.download]]` source.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Download {
    /// Where to fetch the tarball: `http(s)://`, `file://`, or a path (relative to the manifest's
    /// folder, an extension Julia does not read).
    pub url: String,
    /// The SHA-256 of the tarball bytes.
    pub sha256: Sha256,
    /// The tarball's size in bytes, if the manifest gives it.
    pub size: Option<u64>,
}

/// One concrete artifact: the whole entry of a `[name]` table, or one element of a `[[name]]` array.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ArtifactVariant {
    /// The git tree SHA-1 of the artifact's content; names its depot directory.
    pub git_tree_sha1: GitTreeSha1,
    /// `lazy = true`: installed only when first used, never by an eager prefetch.
    pub lazy: bool,
    /// Download sources, tried in order. Empty: the artifact needs an override.
    pub downloads: Vec<Download>,
    /// Platform tags of a `[[name]]` element (`os`, `arch`, `libc`, ...); `None` for a `[name]` table.
    pub platform: Option<Platform>,
    /// Every other key, as its string value (non-string values are kept in TOML syntax).
    pub metadata: BTreeMap<String, String>,
    /// 1-based line of the entry's header in the manifest.
    pub line: u32,
}

/// An artifact as written in the manifest.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ArtifactEntry {
    /// `[name]`: one variant for every platform.
    Single(ArtifactVariant),
    /// `[[name]]`: one variant per platform.
    PlatformSpecific(Vec<ArtifactVariant>),
}

/// A parsed `Artifacts.toml`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Manifest {
    /// The file it was read from (as given; callers canonicalise if they need to).
    pub path: PathBuf,
    /// Artifacts in file order.
    pub artifacts: Vec<(String, ArtifactEntry)>,
}

/// Why a `name/sub/path` string is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubPathError {
    /// The name part is empty.
    #[error("empty artifact name in `{0}`")]
    EmptyName(String),
    /// The sub-path contains `..`.
    #[error("sub-path `{0}` contains `..`; artifact sub-paths must stay inside the artifact")]
    ParentDir(String),
    /// The sub-path is absolute or contains an empty component, `.` or NUL.
    #[error("sub-path `{0}` is not a plain relative path inside the artifact")]
    NotRelative(String),
}

/// Splits `"era5/2008/u.nc"` into `("era5", Some("2008/u.nc"))`; rejects `..`, absolute paths,
/// empty components and NUL bytes.
pub fn split_name_and_subpath(spec: &str) -> Result<(&str, Option<&str>), SubPathError> {
    todo!("manifest helper: implement {spec}")
}

impl Manifest {
    /// Parses manifest text; `path` is used in error messages and to resolve relative URLs.
    pub fn parse(text: &str, path: &Path) -> Result<Manifest, ManifestError> {
        todo!("manifest helper: implement {text} {}", path.display())
    }

    /// Reads and parses a manifest file.
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        todo!("manifest helper: implement {}", path.display())
    }

    /// Finds `JuliaArtifacts.toml`, else `Artifacts.toml`, in `dir`. The error lists where it looked.
    pub fn find_in_dir(dir: &Path) -> Result<PathBuf, ManifestError> {
        todo!("manifest helper: implement {}", dir.display())
    }

    /// The folder containing the manifest (relative download paths resolve against it).
    pub fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    /// Looks an artifact up by name.
    pub fn get(&self, name: &str) -> Option<&ArtifactEntry> {
        self.artifacts
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, e)| e)
    }

    /// Names in file order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.artifacts.iter().map(|(n, _)| n.as_str())
    }

    /// The variant of `name` for `platform` (the host's, usually: [`Platform::host`]).
    pub fn select(&self, name: &str, platform: &Platform) -> Result<&ArtifactVariant, SelectError> {
        todo!("manifest helper: implement {name} {platform:?}")
    }
}
