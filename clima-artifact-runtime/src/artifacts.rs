//! The public entry point: a loaded manifest plus configuration.
//!
//! ```no_run
//! use clima_artifact_runtime::Artifacts;
//!
//! let artifacts = Artifacts::from_dir(env!("CARGO_MANIFEST_DIR"))?;
//! let era5 = artifacts.ensure_installed("era5")?;            // the artifact's folder
//! let u = artifacts.ensure_installed("era5/2008/u.nc")?;     // a file inside it
//! # Ok::<(), clima_artifact_runtime::Error>(())
//! ```
//!
//! - [`Artifacts::load`] / [`Artifacts::from_dir`] read a manifest and the configuration from the
//!   environment ([`Config::from_env`]); [`Artifacts::with_config`] replaces it.
//! - [`Artifacts::ensure_installed`] accepts `"name"` or `"name/sub/path"` (like Julia's
//!   `artifact"name/sub/path"`) and downloads if needed; [`Artifacts::artifact_path`] and
//!   [`Artifacts::is_installed`] never download; [`Artifacts::hash`] gives the git tree SHA-1.
//! - Every successful `ensure_installed*` call is recorded in the provenance
//!   [`crate::access_log`].

use std::path::{Path, PathBuf};

use clima_artifact_manifest::{ArtifactVariant, Manifest, Platform, split_name_and_subpath};

use crate::Installed;
use crate::access_log;
use crate::install;
use crate::resolve::with_subpath;
use crate::{Config, Error, GitTreeSha1};

/// A loaded manifest and the configuration used to resolve its artifacts.
#[derive(Debug, Clone)]
pub struct Artifacts {
    manifest: Manifest,
    /// Absolute path of the manifest (for messages, provenance and the depot usage log).
    manifest_path: PathBuf,
    config: Config,
    platform: Platform,
}

impl Artifacts {
    /// Loads the manifest at `path` (an `Artifacts.toml`); configuration from the environment.
    pub fn load(path: impl AsRef<Path>) -> Result<Artifacts, Error> {
        let path = path.as_ref();
        let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
        // As Julia: a broken entry fails when it is used, the others stay usable.
        let manifest = Manifest::load_lenient(&abs)?;
        Artifacts::from_manifest(manifest)
    }

    /// Loads `JuliaArtifacts.toml`, else `Artifacts.toml`, from `dir` (e.g.
    /// `env!("CARGO_MANIFEST_DIR")`); configuration from the environment.
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Artifacts, Error> {
        let dir = dir.as_ref();
        let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
        let path = Manifest::find_in_dir(&abs)?;
        Artifacts::load(path)
    }

    /// Wraps an already parsed manifest; configuration from the environment.
    pub fn from_manifest(manifest: Manifest) -> Result<Artifacts, Error> {
        let manifest_path =
            std::path::absolute(&manifest.path).unwrap_or_else(|_| manifest.path.clone());
        Ok(Artifacts {
            manifest,
            manifest_path,
            config: Config::from_env()?,
            platform: Platform::host(),
        })
    }

    /// Replaces the configuration (depots, offline mode, timeouts...).
    pub fn with_config(mut self, config: Config) -> Artifacts {
        self.config = config;
        self
    }

    /// Replaces the platform used to pick `[[name]]` variants (default: [`Platform::host`]).
    pub fn with_platform(mut self, platform: Platform) -> Artifacts {
        self.platform = platform;
        self
    }

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The parsed manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The manifest's absolute path.
    pub fn manifest_path(&self) -> &Path {
        &self.manifest_path
    }

    /// The variant of `name` for this platform.
    pub fn variant(&self, name: &str) -> Result<&ArtifactVariant, Error> {
        Ok(self.manifest.select(name, &self.platform)?)
    }

    /// The git tree SHA-1 of `name` (for this platform).
    pub fn hash(&self, name: &str) -> Result<GitTreeSha1, Error> {
        Ok(self.variant(name)?.git_tree_sha1)
    }

    /// Makes `spec` (`"name"` or `"name/sub/path"`) available, downloading and verifying the
    /// artifact if needed, and returns its path. A sub-path that does not exist in the artifact
    /// is an [`Error::SubPathMissing`] (as for `clima_artifact!`).
    pub fn ensure_installed(&self, spec: &str) -> Result<PathBuf, Error> {
        Ok(self.ensure_installed_detailed(spec)?.path)
    }

    /// Like [`Artifacts::ensure_installed`], also saying where the artifact came from
    /// (override, depot, or downloaded now). `path` includes the sub-path, if any. A sub-path
    /// of a seekable artifact (its download has `index-sha256`) that is not installed is
    /// fetched alone, as `clima_artifact!` does ([`ensure_files`](crate::ensure_files)).
    pub fn ensure_installed_detailed(&self, spec: &str) -> Result<Installed, Error> {
        let (name, sub) = split_name_and_subpath(spec)?;
        let variant = self.variant(name)?;
        if let Some(sub) = sub
            && crate::partial::prefers_partial(variant)
        {
            let files =
                crate::ensure_files(name, variant, &self.manifest_path, &self.config, &[sub])?;
            if files.whole.is_none()
                && let Some(path) = files.paths.first().cloned()
            {
                let installed = Installed {
                    path,
                    origin: files.origin(),
                };
                if let Some(first) = self.config.depots.first() {
                    first.record_usage(&self.manifest_path, self.config.reporting());
                }
                access_log::record(crate::access::access_event(
                    &installed,
                    name,
                    variant,
                    self.manifest_path.clone(),
                    None,
                    0,
                ));
                return Ok(installed);
            }
        }
        let installed = install::ensure_variant(name, variant, &self.manifest_path, &self.config)?;
        let full = with_subpath(name, &installed.path, sub)?;
        clima_artifact_depot::record_usage_of(
            self.config.depots.first(),
            &installed,
            &self.manifest_path,
            self.config.reporting(),
        );
        access_log::record(crate::access::access_event(
            &installed,
            name,
            variant,
            self.manifest_path.clone(),
            None,
            0,
        ));
        Ok(Installed {
            path: full,
            origin: installed.origin,
        })
    }

    /// The path of `spec` if the artifact is available (overridden or installed), `None` if it
    /// would need a download. Never downloads; never hashes, except once, the first time, an
    /// installed copy for an entry that gives a `git-tree-sha256` (a copy installed by SHA-1
    /// alone, see [`ensure_variant`](crate::ensure_variant)): a copy whose SHA-256 tree hash
    /// is not the entry's is [`Error::InstalledTreeSha256Mismatch`].
    pub fn artifact_path(&self, spec: &str) -> Result<Option<PathBuf>, Error> {
        let (name, sub) = split_name_and_subpath(spec)?;
        match self.available(name)? {
            Some(found) => Ok(Some(with_subpath(name, &found.path, sub)?)),
            None => Ok(None),
        }
    }

    /// Whether `spec`'s artifact is available without downloading (see
    /// [`Artifacts::artifact_path`]).
    pub fn is_installed(&self, spec: &str) -> Result<bool, Error> {
        let (name, _) = split_name_and_subpath(spec)?;
        Ok(self.available(name)?.is_some())
    }

    /// The override or installed copy of `name` that may be used, if any.
    fn available(&self, name: &str) -> Result<Option<Installed>, Error> {
        let variant = self.variant(name)?;
        install::Install::new(name, variant, &self.manifest_path, &self.config).found()
    }
}
