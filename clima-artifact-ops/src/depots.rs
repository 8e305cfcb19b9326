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

use std::fs;
use std::path::{Path, PathBuf};

use clima_artifact_manifest::{GitTreeSha1, OverridesFile};
use clima_artifact_runtime::Config;
use clima_artifact_runtime::depot::{self, Depot, Overrides, ResolvedOverride};

use crate::error::{Error, Result};

/// The runtime configuration from the `CLIMA_ARTIFACTS_*` environment variables.
pub fn config() -> Result<Config> {
    Config::from_env().map_err(|e| Error::input(e.to_string()))
}

/// The depot folder `path` named on the command line (`mirror --depot`), opened by the rule of
/// every command that writes in a depot: it must be an existing folder, and its path is kept as
/// given (made absolute, never resolved first), so that [`refuse_planted_links`] sees a symlink
/// of another user's on the way and refuses it before anything is written there. `doing` says
/// what the command does, for the error (`mirroring into`).
pub fn open_depot(path: &Path, doing: &str) -> Result<Depot> {
    match fs::metadata(path) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(Error::input(format!(
                "depot `{}` is not a folder",
                path.display()
            )));
        }
        Err(e) => {
            return Err(Error::input(format!(
                "depot `{}` cannot be used: {e}",
                path.display()
            )));
        }
    }
    let absolute =
        std::path::absolute(path).map_err(|e| crate::error::io_error("resolve", path, &e))?;
    refuse_planted_links(&absolute, doing)?;
    Ok(Depot::new(absolute))
}

/// The depot-opening rule (the depot crate's [`Depot::planted_link`], which installs apply
/// too): a depot whose `artifacts` or `logs` folder is reached through a symlink that neither
/// this user nor root owns is refused, naming the link and its owner, before anything is
/// written or deleted there; another user of a shared depot could point it at the victim's own
/// folders. A user's own symlinks (a depot moved to a bigger disk) are followed. `doing` says
/// what the command does, for the error (`collecting`, `mirroring into`).
pub fn refuse_planted_links(depot: &Path, doing: &str) -> Result {
    let found = Depot::new(depot)
        .planted_link()
        .map_err(|e| crate::error::io_error("check", depot, &e))?;
    if let Some(link) = found {
        return Err(Error::failed(format!(
            "not {doing} `{}`: {}; nothing was removed or written there. Remove the link (or \
             have its owner remove it) and run again",
            clima_artifact_fs::printable(&depot.display().to_string()),
            clima_artifact_fs::printable(&link.to_string())
        )));
    }
    Ok(())
}

/// The first configured depot in which `artifacts/` exists or can be created and written to.
pub fn first_writable_depot(config: &Config) -> Result<Depot> {
    depot::first_writable(&config.depots, "overrides").map_err(|e| Error::failed(e.to_string()))
}

/// The depot and directory of the first installed copy of `hash` among `depots` (the
/// [`Config::search_depots`], computed once by a caller that looks many hashes up).
pub fn installed_in(depots: &[Depot], hash: &GitTreeSha1) -> Option<(Depot, PathBuf)> {
    depots
        .iter()
        .find_map(|d| d.installed(hash).map(|dir| (d.clone(), dir)))
}

/// Every depot directory holding `hash` (a copy may sit in several depots).
pub fn installed_everywhere(config: &Config, hash: &GitTreeSha1) -> Vec<PathBuf> {
    config
        .search_depots()
        .iter()
        .filter_map(|d| d.installed(hash))
        .collect()
}

/// Every searched depot's parsed `Overrides.toml`, in depot order (missing files are empty).
pub fn overrides_files(config: &Config) -> Result<Vec<OverridesFile>> {
    config
        .search_depots()
        .iter()
        .map(|d| OverridesFile::load(&d.overrides_path()).map_err(Error::from))
        .collect()
}

/// The merged overrides of every searched depot (Julia's rules: earlier depots win).
pub fn overrides(config: &Config) -> Result<Overrides> {
    Overrides::load(&config.search_depots()).map_err(|e| Error::input(e.to_string()))
}

/// Resolves the override of `hash`, if any (chains followed; broken ones are errors that name
/// the Overrides.toml to fix).
pub fn resolve_override(
    overrides: &Overrides,
    hash: &GitTreeSha1,
) -> Result<Option<ResolvedOverride>> {
    overrides
        .resolve(hash)
        .map_err(|e| Error::input(e.to_string()))
}

/// Records in the first configured depot's usage log that `manifest` used it (what `gc` keeps).
pub fn record_usage(config: &Config, manifest: &Path) {
    if let Some(first) = config.depots.first() {
        let manifest = fs::canonicalize(manifest).unwrap_or_else(|_| manifest.to_path_buf());
        first.record_usage(&manifest, config.reporting());
    }
}

/// Rewrites `<depot>/logs/artifact_usage.toml` with one entry per manifest, its latest time
/// (models add at most one per manifest and day; this keeps the log small), with the entries
/// runs kept beside it because they could not have its lock in time merged in (this user's
/// files of them are then removed). Manifests that no longer exist are kept: gc reports them,
/// and a manifest on an unmounted filesystem may come back. A missing log with no kept entries,
/// or an unreadable log, is left alone.
///
/// Only under Pkg's lock of the log (Julia 1.13 rewrites it under that lock), waited for at
/// most `wait` while its holder is alive by Julia's rule: when the holder keeps it longer, the
/// log is left as it is (said through `reporting`), since rewriting it then could drop what
/// the holder adds.
pub fn compact_usage_log(
    depot: &Path,
    wait: std::time::Duration,
    reporting: &clima_artifact_runtime::progress::Reporting,
) -> Result {
    let depot = Depot::new(depot);
    let start = std::time::Instant::now();
    let log = depot.usage_log();
    let _lock = match depot.lock_usage_log(wait, reporting) {
        Ok(lock) => lock,
        Err(busy) => {
            reporting.emit(
                clima_artifact_runtime::depot::notice::UsageEvent::UsageLogNotCompacted {
                    log,
                    holder: busy.holder,
                    waited: start.elapsed(),
                },
            );
            return Ok(());
        }
    };
    let pending = depot::PendingUsage::read(&depot, false);
    let text = match read_log(&log) {
        Ok(Some(text)) => text,
        Ok(None) if !pending.is_empty() => String::new(),
        _ => return Ok(()),
    };
    let Ok(doc) = text.parse::<toml_edit::DocumentMut>() else {
        return Ok(());
    };
    let mut latest: std::collections::BTreeMap<String, String> = Default::default();
    let mut entries = 0;
    let kept = pending
        .entries
        .iter()
        .map(|(manifest, time)| (manifest.clone(), clima_artifact_fs::utc_timestamp(*time)));
    for (manifest, time) in logged_times(&doc).chain(kept) {
        entries += 1;
        let later = latest.get(&manifest).is_none_or(|t| {
            clima_artifact_fs::parse_utc_timestamp(t)
                < clima_artifact_fs::parse_utc_timestamp(&time)
        });
        if later {
            latest.insert(manifest, time);
        }
    }
    if entries == latest.len() && pending.is_empty() {
        return Ok(()); // already compact
    }
    let mut out = String::new();
    for (manifest, time) in &latest {
        out.push_str(&format!(
            "[[{}]]\ntime = {time}\n",
            clima_artifact_manifest::toml_string(manifest)
        ));
    }
    clima_artifact_fs::write_atomically(&log, out.as_bytes())
        .map_err(|e| Error::failed(e.to_string()))?;
    pending.remove_merged();
    Ok(())
}

/// Every `(manifest, time)` of a usage log, times as written.
fn logged_times(doc: &toml_edit::DocumentMut) -> impl Iterator<Item = (String, String)> + '_ {
    doc.as_table().iter().flat_map(|(manifest, item)| {
        let times: Vec<String> = match item {
            toml_edit::Item::ArrayOfTables(a) => a
                .iter()
                .filter_map(|t| t.get("time"))
                .filter_map(|t| t.as_value().map(|v| v.to_string().trim().to_owned()))
                .collect(),
            _ => Vec::new(),
        };
        times.into_iter().map(move |t| (manifest.to_owned(), t))
    })
}

/// Manifest paths recorded in `<depot>/logs/artifact_usage.toml` (Julia's format: one
/// `[["/path/Artifacts.toml"]]` array-of-tables per manifest), and in the entries runs kept
/// beside it for the next run to merge. A missing log records none.
pub fn recorded_manifests(depot: &Path) -> Result<Vec<PathBuf>> {
    let log = Depot::new(depot).usage_log();
    let pending = depot::PendingUsage::read(&Depot::new(depot), false);
    let kept = pending.entries.iter().map(|(m, _)| PathBuf::from(m));
    let text = match read_log(&log) {
        Ok(Some(t)) => t,
        Ok(None) => return Ok(kept.collect()),
        Err(e) => return Err(Error::failed(e.to_string())),
    };
    let doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        Error::failed(format!(
            "`{}` is not valid TOML ({}); remove it and let the next runs record manifest usage again",
            log.display(),
            clima_artifact_fs::printable(e.to_string().trim_end())
        ))
    })?;
    let mut manifests: Vec<PathBuf> = doc
        .as_table()
        .iter()
        .map(|(k, _)| PathBuf::from(k))
        .collect();
    for m in kept {
        if !manifests.contains(&m) {
            manifests.push(m);
        }
    }
    Ok(manifests)
}

/// The most a depot log may hold (the runtime bounds its reads of the usage log the same way).
pub const MAX_LOG_BYTES: u64 = clima_artifact_manifest::manifest::MAX_TOML_BYTES;

/// Reads a depot log (`logs/*.toml`) that other users of a shared depot could have planted:
/// no symlink, no fifo, a regular file of at most [`MAX_LOG_BYTES`] (see
/// [`clima_artifact_fs::read_shared_text`]). Errors have control characters escaped.
pub fn read_log(path: &Path) -> std::io::Result<Option<String>> {
    clima_artifact_fs::read_shared_text(path, MAX_LOG_BYTES).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            clima_artifact_fs::printable(&e.to_string()).into_owned(),
        )
    })
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

/// `1234567` -> `1.2 MiB` (the workspace's one formatter, `clima_artifact_fs`'s, so sizes read
/// the same everywhere).
pub use clima_artifact_fs::human_bytes;
