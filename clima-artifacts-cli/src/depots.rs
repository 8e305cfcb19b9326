//! Depot queries the subcommands share: configuration, the first writable depot, where an
//! artifact is installed, what overrides it, which manifests used a depot, and sizes on disk.
//!
//! ```text
//! <depot>/
//!   artifacts/
//!     Overrides.toml            hash = "/abs/path" lines (earlier depots win)
//!     <git-tree-sha1>/          installed artifacts
//!   logs/
//!     artifact_usage.toml       manifests that resolved artifacts from this depot (Julia's format)
//! ```

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use clima_artifact_manifest::{GitTreeSha1, OverrideTarget, OverridesFile};
use clima_artifact_runtime::Config;

use crate::error::{CliError, CliResult, io_error};

/// The runtime configuration from the `CLIMA_ARTIFACTS_*` environment variables.
pub fn config() -> CliResult<Config> {
    // Interim until the install branch's `Config::from_env` lands.
    let depots: Vec<PathBuf> = std::env::var_os("CLIMA_ARTIFACTS_DEPOT_PATH")
        .map(|v| std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()).collect())
        .unwrap_or_default();
    Ok(Config {
        depots,
        offline: false,
        julia_interop: false,
        connect_timeout: std::time::Duration::from_secs(10),
        stall_timeout: std::time::Duration::from_secs(30),
        retries: 3,
        lock_timeout: std::time::Duration::from_secs(600),
        max_unpacked_bytes: u64::MAX,
        progress: true,
    })
}

/// `<depot>/artifacts`.
pub fn artifacts_dir(depot: &Path) -> PathBuf {
    depot.join("artifacts")
}

/// `<depot>/artifacts/Overrides.toml`.
pub fn overrides_path(depot: &Path) -> PathBuf {
    artifacts_dir(depot).join("Overrides.toml")
}

/// The first depot in which `artifacts/` exists or can be created and written to.
pub fn first_writable_depot(config: &Config) -> CliResult<PathBuf> {
    let mut why = Vec::new();
    for depot in &config.depots {
        let dir = artifacts_dir(depot);
        match fs::create_dir_all(&dir).and_then(|()| tempfile::tempfile_in(&dir)) {
            Ok(_) => return Ok(depot.clone()),
            Err(e) => why.push(format!("`{}`: {e}", dir.display())),
        }
    }
    Err(CliError::failure(format!(
        "no writable depot (tried {}); set CLIMA_ARTIFACTS_DEPOT_PATH to a folder you can write to",
        if why.is_empty() { "none".to_string() } else { why.join("; ") }
    )))
}

/// The depot directory holding `hash`, searching depots in order.
pub fn installed_in(config: &Config, hash: &GitTreeSha1) -> Option<(PathBuf, PathBuf)> {
    config.depots.iter().find_map(|depot| {
        let dir = artifacts_dir(depot).join(hash.to_hex());
        dir.is_dir().then(|| (depot.clone(), dir))
    })
}

/// Every depot directory holding `hash` (a copy may sit in several depots).
pub fn installed_everywhere(config: &Config, hash: &GitTreeSha1) -> Vec<PathBuf> {
    config
        .depots
        .iter()
        .map(|depot| artifacts_dir(depot).join(hash.to_hex()))
        .filter(|dir| dir.is_dir())
        .collect()
}

/// Every depot's parsed `Overrides.toml`, in depot order (missing files are empty).
pub fn overrides_files(config: &Config) -> CliResult<Vec<OverridesFile>> {
    config
        .depots
        .iter()
        .map(|d| OverridesFile::load(&overrides_path(d)).map_err(CliError::from))
        .collect()
}

/// An effective override: what `hash` resolves to and which file says so.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ResolvedOverride {
    /// The folder used as the artifact's content.
    pub path: PathBuf,
    /// The `Overrides.toml` that set the override (the first link of a chain).
    pub file: PathBuf,
}

/// Resolves overrides of `hash` with Julia's rules: the first depot that mentions the hash decides;
/// `""` cancels; a hash value is followed (to its own override or installed copy); cycles are errors.
pub fn resolve_override(
    files: &[OverridesFile],
    config: &Config,
    hash: &GitTreeSha1,
) -> CliResult<Option<ResolvedOverride>> {
    let mut seen = BTreeSet::new();
    let mut current = *hash;
    let mut first_file: Option<PathBuf> = None;
    loop {
        if !seen.insert(current) {
            return Err(CliError::usage(format!(
                "overrides form a cycle through {current}; fix {}",
                files
                    .iter()
                    .map(|f| format!("`{}`", f.path.display()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let Some((file, entry)) = files
            .iter()
            .find_map(|f| f.get(&current).map(|e| (f.path.clone(), e.clone())))
        else {
            // Not overridden further: a chain ends at an installed copy (or nowhere).
            return Ok(match first_file {
                None => None,
                Some(file) => installed_in(config, &current).map(|(_, path)| ResolvedOverride {
                    path,
                    file,
                }),
            });
        };
        let file = first_file.get_or_insert(file).clone();
        match entry.target {
            OverrideTarget::Remove => return Ok(None),
            OverrideTarget::Path(path) => return Ok(Some(ResolvedOverride { path, file })),
            OverrideTarget::Hash(next) => current = next,
        }
    }
}

/// Manifest paths recorded in `<depot>/logs/artifact_usage.toml` (Julia's format: one
/// `[["/path/Artifacts.toml"]]` array-of-tables per manifest). A missing log records none.
pub fn recorded_manifests(depot: &Path) -> CliResult<Vec<PathBuf>> {
    let log = depot.join("logs").join("artifact_usage.toml");
    let text = match fs::read_to_string(&log) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error("read", &log, &e)),
    };
    let doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        CliError::failure(format!(
            "`{}` is not valid TOML ({}); remove it and let the next runs record manifest usage again",
            log.display(),
            e.to_string().trim_end()
        ))
    })?;
    Ok(doc.as_table().iter().map(|(k, _)| PathBuf::from(k)).collect())
}

/// Total bytes of regular files and symlinks under `dir`, not following symlinks.
pub fn size_on_disk(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for item in rd.flatten() {
            let Ok(meta) = item.path().symlink_metadata() else {
                continue;
            };
            if meta.is_dir() {
                stack.push(item.path());
            } else {
                total += meta.len();
            }
        }
    }
    total
}

/// `1234567` -> `1.2 MiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}
