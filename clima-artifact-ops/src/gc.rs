//! Garbage collection of depots (the work of `clima-artifacts gc`): removes installed artifacts
//! that no live manifest references, after a grace period.
//!
//! As the Pkg of Julia before 1.13 (our choice for shared depots; see docs/depots.md): an
//! unreferenced artifact is first only marked as orphaned, with the time, in the depot's
//! `logs/orphaned.toml`; a later [`collect`] deletes it once it has been orphaned for longer
//! than [`Options::delay`] (zero deletes at once). An artifact that is referenced again leaves
//! the list. Only the first depot is collected unless [`Options::all_depots`]. Models record
//! their manifests in the usage log when they use them (at most once a day); a collection
//! compacts that log to one entry per manifest.
//!
//! Kept: every hash of every variant (all platforms) of every manifest recorded in any depot's
//! `logs/artifact_usage.toml` that still exists, plus those of [`Options::manifests`]; hashes
//! that overrides point to; and anything at or around an override's target path. Manifests that
//! no longer exist stop counting. A folder is first renamed out of the way and then deleted, so
//! no process ever sees a half-removed artifact under its final name.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use clima_artifact_manifest::{ArtifactEntry, GitTreeSha1, Manifest, OverrideTarget};
use clima_artifact_runtime::depot::Depot;

use crate::depots;
use crate::error::{Error, Result};

/// A manifest considered.
#[derive(Debug, serde::Serialize)]
pub struct ManifestUse {
    /// Where it is.
    pub path: PathBuf,
    /// `live`, `missing` (no longer counts) or `given` (from [`Options::manifests`]).
    pub status: &'static str,
}

/// An installed artifact that no live manifest references.
#[derive(Debug, serde::Serialize)]
pub struct Unreferenced {
    /// Its content hash.
    pub git_tree_sha1: String,
    /// Its folder.
    pub path: PathBuf,
    /// Its size on disk.
    pub bytes: u64,
    /// When it was first found orphaned (now, if this run marked it).
    pub orphaned_since: String,
    /// Orphaned for longer than the delay: deleted by this run (or, in a dry run, it would be).
    pub due: bool,
    /// Deleted by this run.
    pub removed: bool,
    /// Why it could not be deleted.
    pub error: Option<String>,
}

/// What to collect, and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// Manifests to keep the artifacts of, besides those recorded in the usage logs.
    pub manifests: Vec<Manifest>,
    /// Collect every depot, not only the first.
    pub all_depots: bool,
    /// How long an artifact stays orphaned before it is deleted (Pkg's default is 7 days).
    pub delay: std::time::Duration,
    /// Change nothing: report what a collection would do.
    pub dry_run: bool,
    /// Remove every unreferenced artifact even when no recorded manifest still exists.
    pub force: bool,
}

/// What a collection found and did.
#[derive(Debug, serde::Serialize)]
pub struct Report {
    /// Nothing was changed.
    pub dry_run: bool,
    /// Every manifest considered.
    pub manifests: Vec<ManifestUse>,
    /// Installed artifacts kept.
    pub kept: usize,
    /// Folders left by killed gc runs (their process is gone) and partial downloads nobody
    /// added to for 7 days, removed now.
    pub reclaimed: usize,
    /// The grace period, in seconds.
    pub delay_seconds: f64,
    /// The depots collected (the first one unless [`Options::all_depots`]).
    pub collected: Vec<PathBuf>,
    /// The unreferenced artifacts: deleted, due, or waiting.
    pub unreferenced: Vec<Unreferenced>,
    /// In a dry run, the refusal a real run would end with (no live manifest, no force).
    #[serde(skip)]
    pub refusal: Option<String>,
}

fn hashes_of(manifest: &Manifest, into: &mut BTreeSet<GitTreeSha1>) {
    for (_, entry) in manifest.artifacts() {
        match entry {
            ArtifactEntry::Single(v) => {
                into.insert(v.git_tree_sha1);
            }
            ArtifactEntry::PlatformSpecific(vs) => {
                into.extend(vs.iter().map(|v| v.git_tree_sha1));
            }
        }
    }
}

fn canonical(p: &Path) -> PathBuf {
    fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Marks the folder an artifact is renamed to before it is deleted
/// (`.<hash>.gc-<host>.<pid>.<random>`); a killed gc leaves it, the next gc removes it.
use clima_artifact_manifest::layout::GC_MARK;

/// Collects the depots of `config` as `options` say: marks the unreferenced artifacts as
/// orphaned, deletes those orphaned for longer than the delay, reclaims what killed gc runs
/// and abandoned downloads left, and compacts the usage logs. Folders that could not be
/// deleted are listed in the report ([`Report::removal_failures`]), not an error.
pub fn collect(config: &clima_artifact_runtime::Config, options: &Options) -> Result<Report> {
    let take = if options.all_depots { usize::MAX } else { 1 };
    let collected: Vec<PathBuf> = config
        .depots
        .iter()
        .take(take)
        .map(|d| d.root().to_path_buf())
        .collect();
    for depot in &collected {
        crate::depots::refuse_planted_links(depot, "collecting")?;
    }
    let (manifests, mut referenced) = referencing_manifests(config, &options.manifests)?;
    let protected_paths = protected_by_overrides(config, &mut referenced)?;
    let keep = Keep {
        referenced,
        protected_paths,
        now: std::time::SystemTime::now(),
        delay: options.delay,
    };
    let (mut installed, mut reclaimed) = (0usize, 0usize);
    let mut unreferenced = Vec::new();
    let mut orphanages = Vec::new();
    for depot in &collected {
        let mut orphanage = Orphanage::load(depot)?;
        if !options.dry_run {
            reclaimed += reclaim_killed_gcs(depot);
            reclaimed += Depot::new(depot).reclaim_stale_partials(config.reporting());
        }
        installed += keep.scan(depot, &mut orphanage, &mut unreferenced);
        orphanage.keep_only_marked();
        orphanages.push(orphanage);
    }
    let mut refusal = None;
    let live = manifests.iter().filter(|m| m.status != "missing").count();
    if live == 0 && !unreferenced.is_empty() && !options.force {
        let why = format!(
            "no manifest that still exists is recorded in {} and none was given, so gc would \
             remove all {} installed artifact(s); pass --manifest PATH for the manifests you use, \
             or --force to remove them all",
            config
                .depots
                .iter()
                .map(|d| format!("`{}`", d.usage_log().display()))
                .collect::<Vec<_>>()
                .join(", "),
            unreferenced.len()
        );
        // A dry run removes nothing: it lists what a real run would refuse to remove.
        if !options.dry_run {
            return Err(Error::input(why));
        }
        refusal = Some(why);
    }
    if !options.dry_run {
        remove_due(&mut unreferenced);
        for mut orphanage in orphanages {
            for u in unreferenced.iter().filter(|u| u.removed) {
                orphanage.forget(&u.path);
            }
            orphanage.save()?;
        }
        for depot in &collected {
            depots::compact_usage_log(depot, config.lock_timeout, config.reporting())?;
        }
    }
    Ok(Report {
        dry_run: options.dry_run,
        kept: installed - unreferenced.len(),
        reclaimed,
        delay_seconds: options.delay.as_secs_f64(),
        collected,
        manifests,
        unreferenced,
        refusal,
    })
}

/// Every manifest recorded in a searched depot's usage log (a missing one stops counting) and
/// every `--manifest`, with the hashes they reference (every variant, every platform).
fn referencing_manifests(
    config: &clima_artifact_runtime::Config,
    given: &[Manifest],
) -> Result<(Vec<ManifestUse>, BTreeSet<GitTreeSha1>)> {
    let mut manifests = Vec::new();
    let mut referenced = BTreeSet::new();
    let mut recorded = BTreeSet::new();
    for depot in config.search_depots() {
        recorded.extend(depots::recorded_manifests(depot.root())?);
    }
    for path in recorded {
        if !path.is_file() {
            manifests.push(ManifestUse {
                path,
                status: "missing",
            });
            continue;
        }
        let m = Manifest::load(&path).map_err(|e| {
            Error::failed(format!(
                "{e}\n(gc reads every recorded manifest to know what to keep; fix this one, or \
                 delete it if nothing uses it any more, then run gc again)"
            ))
        })?;
        hashes_of(&m, &mut referenced);
        manifests.push(ManifestUse {
            path,
            status: "live",
        });
    }
    for m in given {
        hashes_of(m, &mut referenced);
        manifests.push(ManifestUse {
            path: m.path.clone(),
            status: "given",
        });
    }
    Ok((manifests, referenced))
}

/// What the overrides of every searched depot keep: the hashes they point to (added to
/// `referenced`), and the folders they point to (returned, canonical).
fn protected_by_overrides(
    config: &clima_artifact_runtime::Config,
    referenced: &mut BTreeSet<GitTreeSha1>,
) -> Result<Vec<PathBuf>> {
    let mut protected_paths = Vec::new();
    for file in depots::overrides_files(config)? {
        for e in file.entries {
            match e.target {
                OverrideTarget::Hash(h) => {
                    referenced.insert(h);
                }
                OverrideTarget::Path(p) => protected_paths.push(canonical(&p)),
                OverrideTarget::Remove => {}
            }
        }
    }
    Ok(protected_paths)
}

/// Removes the folders that killed gc runs left in `depot` (renamed, not yet deleted).
fn reclaim_killed_gcs(depot: &Path) -> usize {
    let partial = depot.join(clima_artifact_manifest::layout::PARTIAL_FILES);
    [Depot::new(depot).artifacts_dir(), partial]
        .iter()
        .flat_map(|folder| clima_artifact_fs::stale_temps(folder, GC_MARK))
        .filter(|stale| clima_artifact_fs::remove_tree(stale).is_ok())
        .count()
}

/// What gc keeps, and when an orphan is due.
struct Keep {
    referenced: BTreeSet<GitTreeSha1>,
    protected_paths: Vec<PathBuf>,
    now: std::time::SystemTime,
    delay: std::time::Duration,
}

impl Keep {
    /// Lists the installed artifacts of `depot`, and the partial folders of artifacts fetched
    /// file by file (`clima_partial/<hash>`, collected alike), marks the unreferenced ones in
    /// `orphanage` and adds them to `unreferenced`; returns how many there are.
    fn scan(
        &self,
        depot: &Path,
        orphanage: &mut Orphanage,
        unreferenced: &mut Vec<Unreferenced>,
    ) -> usize {
        let partial = depot.join(clima_artifact_manifest::layout::PARTIAL_FILES);
        [Depot::new(depot).artifacts_dir(), partial]
            .into_iter()
            .map(|folder| self.scan_folder(&folder, orphanage, unreferenced))
            .sum()
    }

    /// [`Keep::scan`] of one folder of artifact folders named by their hash.
    fn scan_folder(
        &self,
        folder: &Path,
        orphanage: &mut Orphanage,
        unreferenced: &mut Vec<Unreferenced>,
    ) -> usize {
        let Ok(rd) = fs::read_dir(folder) else {
            return 0;
        };
        let mut entries: Vec<_> = rd.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        let mut installed = 0;
        for item in entries {
            let name = item.file_name();
            let Some(hash) = name.to_str().and_then(|n| GitTreeSha1::from_hex(n).ok()) else {
                continue;
            };
            let path = item.path();
            if !path.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                continue;
            }
            installed += 1;
            let real = canonical(&path);
            let touches_override = self
                .protected_paths
                .iter()
                .any(|p| p.starts_with(&real) || real.starts_with(p));
            if self.referenced.contains(&hash) || touches_override {
                continue;
            }
            let since = orphanage.mark(&path, self.now);
            unreferenced.push(Unreferenced {
                git_tree_sha1: hash.to_hex(),
                bytes: depots::size_on_disk(&path),
                orphaned_since: clima_artifact_fs::utc_timestamp(since),
                due: self.now.duration_since(since).unwrap_or_default() >= self.delay,
                path,
                removed: false,
                error: None,
            });
        }
        installed
    }
}

/// Deletes the orphans that are due: each is renamed out of the way first, so no process sees
/// a half-removed artifact under its final name.
fn remove_due(unreferenced: &mut [Unreferenced]) {
    for u in unreferenced.iter_mut().filter(|u| u.due) {
        let parent = u.path.parent().unwrap_or(Path::new("."));
        let doomed = parent.join(clima_artifact_fs::temp_name(&u.git_tree_sha1, GC_MARK));
        let result =
            fs::rename(&u.path, &doomed).and_then(|()| clima_artifact_fs::remove_tree(&doomed));
        match result {
            Ok(()) => {
                u.removed = true;
                // The record of its git tree SHA-256 (or, for a partial folder, of its
                // number of files) speaks for a folder that is gone.
                if let Ok(hash) = GitTreeSha1::from_hex(&u.git_tree_sha1) {
                    let record = clima_artifact_manifest::layout::Entry::TreeSha256Record(hash);
                    let _ = fs::remove_file(parent.join(record.name()));
                    let count = clima_artifact_manifest::layout::PARTIAL_COUNT_SUFFIX;
                    let _ = fs::remove_file(parent.join(format!("{hash}{count}")));
                }
            }
            Err(e) => u.error = Some(e.to_string()),
        }
    }
}

impl Report {
    /// An error naming every folder that could not be removed, if any.
    pub fn removal_failures(&self) -> Result {
        let failed: Vec<String> = self
            .unreferenced
            .iter()
            .filter_map(|u| {
                u.error
                    .as_ref()
                    .map(|e| format!("  `{}`: {e}", u.path.display()))
            })
            .collect();
        if failed.is_empty() {
            Ok(())
        } else {
            Err(Error::failed(format!(
                "could not remove {} folder(s) (check permissions):\n{}",
                failed.len(),
                failed.join("\n")
            )))
        }
    }
}

/// A depot's `logs/orphaned.toml`: artifact path => when it was first found orphaned (Julia's
/// file; its times may lack a zone and are then read as UTC).
struct Orphanage {
    path: PathBuf,
    entries: std::collections::BTreeMap<String, std::time::SystemTime>,
    /// Paths marked (or confirmed) by this run; the others are no longer orphaned.
    marked: BTreeSet<String>,
}

impl Orphanage {
    fn load(depot: &Path) -> Result<Orphanage> {
        let path = Depot::new(depot).orphan_log();
        let mut entries = std::collections::BTreeMap::new();
        match depots::read_log(&path) {
            Ok(Some(text)) => {
                let doc: toml_edit::DocumentMut =
                    text.parse().map_err(|e: toml_edit::TomlError| {
                        Error::failed(format!(
                            "`{}` is not valid TOML ({}); remove it (orphans are then marked \
                             again and deleted one delay later)",
                            path.display(),
                            clima_artifact_fs::printable(e.to_string().trim_end())
                        ))
                    })?;
                for (k, v) in doc.as_table() {
                    let text = match v.as_value() {
                        Some(toml_edit::Value::Datetime(d)) => d.value().to_string(),
                        Some(toml_edit::Value::String(s)) => s.value().clone(),
                        _ => continue,
                    };
                    if let Some(t) = clima_artifact_fs::parse_utc_timestamp(&text) {
                        entries.insert(k.to_owned(), t);
                    }
                }
            }
            Ok(None) => {}
            Err(e) => return Err(Error::failed(e.to_string())),
        }
        Ok(Orphanage {
            path,
            entries,
            marked: BTreeSet::new(),
        })
    }

    /// Marks `artifact` as orphaned (now, unless it already was) and returns since when.
    fn mark(&mut self, artifact: &Path, now: std::time::SystemTime) -> std::time::SystemTime {
        let key = artifact.to_string_lossy().into_owned();
        self.marked.insert(key.clone());
        *self.entries.entry(key).or_insert(now)
    }

    /// Drops entries this run did not mark: referenced again, or gone.
    fn keep_only_marked(&mut self) {
        let marked = &self.marked;
        self.entries.retain(|k, _| marked.contains(k));
    }

    /// Drops `artifact` (deleted).
    fn forget(&mut self, artifact: &Path) {
        self.entries.remove(artifact.to_string_lossy().as_ref());
    }

    fn save(&self) -> Result {
        if self.entries.is_empty() && !self.path.exists() {
            return Ok(());
        }
        let mut text = String::from(
            "# Artifacts no manifest references, with when they were first found so; a later gc\n\
             # deletes those orphaned for longer than its --delay (clima-artifacts gc, Pkg.gc).\n",
        );
        for (k, t) in &self.entries {
            text.push_str(&format!(
                "{} = {}\n",
                clima_artifact_manifest::toml_string(k),
                clima_artifact_fs::utc_timestamp(*t)
            ));
        }
        if let Some(dir) = self.path.parent() {
            fs::create_dir_all(dir).map_err(|e| crate::error::io_error("create", dir, &e))?;
        }
        clima_artifact_fs::write_atomically(&self.path, text.as_bytes())
            .map_err(|e| Error::failed(e.to_string()))
    }
}
