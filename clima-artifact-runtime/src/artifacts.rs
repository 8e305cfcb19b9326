//! The public entry point: a loaded manifest plus configuration (specified in full by the install
//! helper).
//!
//! Planned API (install helper owns the bodies; other helpers rely on these signatures):
//! - `Artifacts::load(manifest_path) -> Result<Artifacts, Error>` and `Artifacts::from_dir(dir)`
//! - `Artifacts::with_config(self, Config) -> Artifacts`
//! - `ensure_installed(&self, "name" | "name/sub/path") -> Result<PathBuf, Error>`
//! - `ensure_installed_detailed(&self, spec) -> Result<Installed, Error>`
//! - `artifact_path(&self, spec) -> Result<Option<PathBuf>, Error>` (no install) and `is_installed`
//! - `hash(&self, name) -> Result<GitTreeSha1, Error>`

/// A loaded manifest and the configuration used to resolve its artifacts.
pub struct Artifacts {
    _private: (),
}
