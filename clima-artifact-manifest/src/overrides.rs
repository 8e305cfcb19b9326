//! One depot's `artifacts/Overrides.toml` (Julia semantics).
//!
//! ```toml
//! 0123...cdef = "/scratch/shared/era5"          # hash -> absolute path
//! 89ab...4567 = "0123...cdef"                   # hash -> another hash (chains are followed)
//! fedc...ba98 = ""                              # removes an override set by a later depot
//!
//! [d6f4376e-aef5-505a-96c1-9c027394607a]        # Julia's UUID tables: kept, not interpreted
//! libfoo = "/opt/libfoo"
//! ```
//!
//! Resolution across depots (earlier depots win) lives in the runtime; this module parses one file.

use std::path::{Path, PathBuf};

use crate::{GitTreeSha1, ManifestError};

/// What a hash is overridden with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OverrideTarget {
    /// An absolute path to use as the artifact's content.
    Path(PathBuf),
    /// Another artifact hash to use instead.
    Hash(GitTreeSha1),
    /// `""`: cancel an override from a later depot.
    Remove,
}

/// One `hash = value` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideEntry {
    /// The overridden artifact.
    pub hash: GitTreeSha1,
    /// What it is overridden with.
    pub target: OverrideTarget,
    /// 1-based line in the file.
    pub line: u32,
}

/// A parsed `Overrides.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OverridesFile {
    /// The file it came from.
    pub path: PathBuf,
    /// Hash-keyed entries in file order.
    pub entries: Vec<OverrideEntry>,
    /// Names of Julia `[<uuid>]` tables that were present and left alone.
    pub uuid_tables: Vec<String>,
}

impl OverridesFile {
    /// Parses overrides text; errors name the file and line.
    pub fn parse(text: &str, path: &Path) -> Result<OverridesFile, ManifestError> {
        todo!("manifest helper {text} {}", path.display())
    }

    /// Reads and parses an overrides file; a missing file is an empty set.
    pub fn load(path: &Path) -> Result<OverridesFile, ManifestError> {
        todo!("manifest helper {}", path.display())
    }

    /// The entry for `hash`, if any.
    pub fn get(&self, hash: &GitTreeSha1) -> Option<&OverrideEntry> {
        self.entries.iter().find(|e| &e.hash == hash)
    }
}
