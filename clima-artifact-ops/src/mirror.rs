//! `mirror`: keep every downloadable artifact of some manifests installed in one depot (a
//! cluster's shared depot), several installs at once, and the overrides the mirror manages in a
//! section of the depot's `Overrides.toml` of its own.
//!
//! ```text
//! manifests -> host variants -> one job per content hash (names merged across manifests)
//!           -> overrides section written under the depot's lock (when asked to)
//!           -> N workers: runtime install (verified, resumable, locked per artifact)
//!           -> one Outcome per hash, as it finishes; a Summary at the end
//! ```
//!
//! Installs go through the runtime's public [`ensure_variant`], so a mirror verifies, resumes,
//! renames into place and locks exactly as a model's first use does: mirrors and models on
//! other nodes share the per-artifact locks and download each artifact once between them.
//! Artifacts that cannot be downloaded (no download section, or a placeholder hash, the SHA-1
//! of the name) are listed with the override that provides them ([`OverrideFix`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use clima_artifact_fs::shell_word;
use clima_artifact_manifest::validate::is_name_placeholder;
use clima_artifact_manifest::{ArtifactVariant, GitTreeSha1, Manifest, Platform, layout};
use clima_artifact_runtime::depot::{self, Overrides};
use clima_artifact_runtime::{Config, Origin, ensure_variant};

use crate::error::{Error, Result};
use crate::override_check::{Check, Checker};
use crate::overrides_edit::{self, SectionConflict, SectionLine};

/// Installs at once when not told otherwise: Julia's Pkg downloads 8 artifacts concurrently.
pub const DEFAULT_JOBS: usize = 8;
/// The most installs at once (each holds a connection, a lock and a temp folder).
pub const MAX_JOBS: usize = 64;

/// `jobs` within `1..=`[`MAX_JOBS`], and the warning to print when it had to be changed.
pub fn clamp_jobs(jobs: u64) -> (usize, Option<String>) {
    let clamped = jobs.clamp(1, MAX_JOBS as u64) as usize;
    let warning = (clamped as u64 != jobs).then(|| {
        format!("--jobs {jobs} is outside 1..={MAX_JOBS}; using {clamped} installs at once")
    });
    (clamped, warning)
}

/// An override the mirror is asked to manage: an artifact (by name in the listed manifests, or
/// by its 40-digit hash) and the folder that provides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideRequest {
    /// An artifact name of the listed manifests, or a git-tree-sha1.
    pub artifact: String,
    /// The folder (made absolute when the section is written).
    pub path: PathBuf,
}

impl OverrideRequest {
    /// Parses `NAME=PATH` (the command line's `--override`).
    pub fn parse(spec: &str) -> Result<OverrideRequest> {
        match spec.split_once('=') {
            Some((name, path)) if !name.trim().is_empty() && !path.is_empty() => {
                Ok(OverrideRequest {
                    artifact: name.trim().to_owned(),
                    path: PathBuf::from(path),
                })
            }
            _ => Err(Error::input(format!(
                "--override `{}`: write it as NAME=PATH (an artifact name or hash, `=`, a folder)",
                clima_artifact_fs::printable(spec)
            ))),
        }
    }

    /// Reads a file of `NAME = "PATH"` lines (TOML: names or hashes as keys, folders as string
    /// values; relative folders are relative to the file's folder).
    pub fn load_file(file: &Path) -> Result<Vec<OverrideRequest>> {
        let text = clima_artifact_fs::read_shared_text(file, 1 << 20)
            .map_err(|e| Error::input(format!("cannot read `{}`: {e}", file.display())))?
            .ok_or_else(|| Error::input(format!("`{}` does not exist", file.display())))?;
        let doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
            Error::input(format!(
                "`{}` is not valid TOML (`NAME = \"/path\"` lines): {}",
                file.display(),
                e.to_string().trim_end()
            ))
        })?;
        let base = file.parent().unwrap_or(Path::new("."));
        let mut out = Vec::new();
        for (key, item) in doc.as_table() {
            let Some(path) = item.as_str() else {
                return Err(Error::input(format!(
                    "`{}`: `{}` must be a folder path in quotes (`NAME = \"/path\"`)",
                    file.display(),
                    clima_artifact_fs::printable(key)
                )));
            };
            out.push(OverrideRequest {
                artifact: key.to_owned(),
                path: base.join(path),
            });
        }
        Ok(out)
    }
}

/// What to mirror, where, and how.
#[derive(Debug, Clone)]
pub struct MirrorOptions {
    /// The manifests whose artifacts to install.
    pub manifests: Vec<PathBuf>,
    /// The depot to install into (must exist); only this depot is searched and written. Its
    /// path is checked as given ([`crate::depots::open_depot`]): one reached through another
    /// user's symlink is refused.
    pub depot: PathBuf,
    /// Installs at once (see [`clamp_jobs`]).
    pub jobs: usize,
    /// Whose variants to install (usually [`Platform::host`]).
    pub platform: Platform,
    /// `Some`: the overrides of this mirror's section (an empty list removes the section);
    /// `None`: the section is left as it is.
    pub overrides: Option<Vec<OverrideRequest>>,
    /// The section's id; `None`: one made from the manifests' paths ([`default_section_id`]).
    pub section_id: Option<String>,
    /// Hash the folders of overridden artifacts and compare with the hash they override
    /// ([`crate::override_check`]; cached by each folder's size and time).
    pub verify_overrides: bool,
    /// Timeouts, retries, TLS, proxies and the rest; its depots are replaced by `depot`, and
    /// Julia's depots are not searched (an artifact installed elsewhere is still installed
    /// here).
    pub config: Config,
}

/// How one artifact went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Downloaded, verified and installed by this run.
    Installed,
    /// Already installed in the depot.
    Already,
    /// Provided by an override in the depot's `Overrides.toml`.
    Overridden,
    /// Cannot be downloaded and has no override: see [`Outcome::fix`].
    NeedsOverride,
    /// The install failed: see [`Outcome::error`].
    Failed,
}

impl Status {
    /// The word the summary lines and the table use.
    pub fn word(self) -> &'static str {
        match self {
            Status::Installed => "installed",
            Status::Already => "already",
            Status::Overridden => "overridden",
            Status::NeedsOverride => "needs-override",
            Status::Failed => "failed",
        }
    }
}

/// The override a user must set for an artifact that cannot be downloaded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OverrideFix {
    /// The command that sets it (`clima-artifacts override set NAME /path/to/NAME ...`).
    pub command: String,
    /// The same as an `Overrides.toml` line.
    pub line: String,
    /// The file that line goes into.
    pub overrides_file: PathBuf,
    /// Why it cannot be downloaded.
    pub reason: String,
}

/// One artifact (one content hash) of the mirror.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    /// Its names across the manifests, in order of first appearance.
    pub names: Vec<String>,
    /// The manifests naming it.
    pub manifests: Vec<PathBuf>,
    /// The content hash.
    pub git_tree_sha1: GitTreeSha1,
    /// How it went.
    pub status: Status,
    /// Its folder (installed or overridden).
    pub path: Option<PathBuf>,
    /// Tarball bytes (downloaded by this run), else the manifest's `size` when given.
    pub bytes: Option<u64>,
    /// Wall time of its install.
    pub seconds: f64,
    /// Why it failed (the whole message, with what to do).
    pub error: Option<String>,
    /// What failed, without what is particular to this artifact (its name, URLs): the same for
    /// artifacts that failed alike (all refused by one proxy, say), which a log groups
    /// (`clima_artifact_runtime::Error::cause`).
    pub cause: Option<String>,
    /// Why it failed, in one line: each source's failure with its URL, without the advice
    /// (`clima_artifact_runtime::Error::one_line`); for a log line per artifact.
    #[serde(skip)]
    pub error_line: Option<String>,
    /// What to set when it needs an override.
    pub fix: Option<OverrideFix>,
    /// For an overridden artifact: whether its folder holds the content the manifests name.
    pub override_check: Option<Check>,
}

/// A manifest or entry that could not be read (the rest is mirrored; the run fails).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Problem {
    /// The manifest.
    pub manifest: PathBuf,
    /// The entry, when one entry is broken rather than the whole file.
    pub name: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// A placeholder hash whose override line the section keeps beside the line of the content
/// hash that replaced it, because mirrored manifests still name the placeholder.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KeptPlaceholder {
    /// The placeholder (the SHA-1 of the name).
    pub placeholder: GitTreeSha1,
    /// The content hash of the same name in the other manifests.
    pub replaced_by: GitTreeSha1,
    /// Its names.
    pub names: Vec<String>,
    /// The mirrored manifests that still name the placeholder.
    pub manifests: Vec<PathBuf>,
}

/// What was done to the overrides section.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SectionReport {
    /// The depot's `Overrides.toml`.
    pub file: PathBuf,
    /// The section's id.
    pub id: String,
    /// `(hash, folder, name)` of each line written.
    pub written: Vec<(String, String, Option<String>)>,
    /// Overrides left out: their hash is set elsewhere in the file.
    pub conflicts: Vec<(String, String, usize)>,
    /// Whether the file changed.
    pub changed: bool,
    /// Placeholder lines kept beside the line of their content hash.
    pub placeholders_kept: Vec<KeptPlaceholder>,
}

/// The whole run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Summary {
    /// The depot.
    pub depot: PathBuf,
    /// Installs at once.
    pub jobs: usize,
    /// One per content hash, in order of first appearance in the manifests.
    pub outcomes: Vec<Outcome>,
    /// Unreadable manifests and broken entries.
    pub problems: Vec<Problem>,
    /// Entries with no variant for the platform (skipped).
    pub other_platform: usize,
    /// The overrides section, when the run was given overrides.
    pub overrides: Option<SectionReport>,
    /// Wall time of the run.
    pub seconds: f64,
    /// Problems of the run itself that changed nothing mirrored (the cache of override checks
    /// could not be read or written).
    pub warnings: Vec<String>,
}

impl Summary {
    /// Artifacts with this status.
    pub fn count(&self, status: Status) -> usize {
        self.outcomes.iter().filter(|o| o.status == status).count()
    }

    /// Whether anything failed (an install, a manifest, an entry): the exit code is 1.
    pub fn failed(&self) -> bool {
        self.count(Status::Failed) > 0 || !self.problems.is_empty()
    }

    /// Whether the run installed nothing and found nothing to install: every downloadable
    /// artifact was there already (or overridden).
    pub fn nothing_to_do(&self) -> bool {
        !self.failed() && self.count(Status::Installed) == 0
    }

    /// `(installed now or before, downloadable or overridden)`: "18 of 18 installed".
    pub fn installed_of(&self) -> (usize, usize) {
        let have = self.count(Status::Installed) + self.count(Status::Already);
        (have, have + self.count(Status::Failed))
    }
}

/// The section id used when none is given: `m-` and 12 hex digits of the SHA-256 of the
/// manifests' absolute paths, sorted (the same list of manifests gives the same section).
pub fn default_section_id(manifests: &[PathBuf]) -> String {
    use sha2::Digest;
    let mut paths: Vec<String> = manifests
        .iter()
        .map(|m| {
            std::fs::canonicalize(m)
                .unwrap_or_else(|_| std::path::absolute(m).unwrap_or_else(|_| m.clone()))
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    paths.sort();
    paths.dedup();
    let digest = sha2::Sha256::digest(paths.join("\n").as_bytes());
    let hex: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    format!("m-{hex}")
}

/// One content hash to install, and everything known about it.
struct Job {
    names: Vec<String>,
    manifests: Vec<PathBuf>,
    /// The variant installed (the first with downloads) and its manifest.
    variant: ArtifactVariant,
    manifest: PathBuf,
}

/// The jobs of `manifests` for `platform`, one per content hash in order of first appearance,
/// with the problems met and the count of entries for other platforms.
fn plan(
    manifests: &[PathBuf],
    platform: &Platform,
) -> (Vec<Job>, Vec<Problem>, usize, Vec<PathBuf>) {
    let mut jobs: Vec<Job> = Vec::new();
    let mut index: HashMap<GitTreeSha1, usize> = HashMap::new();
    let mut problems = Vec::new();
    let mut other_platform = 0;
    let mut loaded = Vec::new();
    for path in manifests {
        let manifest = match Manifest::load_lenient(path) {
            Ok(m) => m,
            Err(e) => {
                problems.push(Problem {
                    manifest: path.clone(),
                    name: None,
                    message: e.to_string(),
                });
                continue;
            }
        };
        loaded.push(path.clone());
        for (name, errors) in manifest.broken() {
            problems.push(Problem {
                manifest: path.clone(),
                name: Some(name.clone()),
                message: errors
                    .iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("; "),
            });
        }
        for name in manifest.names() {
            let Ok(variant) = manifest.select(name, platform) else {
                other_platform += 1;
                continue;
            };
            let hash = variant.git_tree_sha1;
            match index.get(&hash) {
                Some(&i) => {
                    let job = &mut jobs[i];
                    if !job.names.iter().any(|n| n == name) {
                        job.names.push(name.to_owned());
                    }
                    if !job.manifests.contains(path) {
                        job.manifests.push(path.clone());
                    }
                    if job.variant.downloads.is_empty() && !variant.downloads.is_empty() {
                        job.variant = variant.clone();
                        job.manifest = path.clone();
                    }
                }
                None => {
                    index.insert(hash, jobs.len());
                    jobs.push(Job {
                        names: vec![name.to_owned()],
                        manifests: vec![path.clone()],
                        variant: variant.clone(),
                        manifest: path.clone(),
                    });
                }
            }
        }
    }
    (jobs, problems, other_platform, loaded)
}

/// Installs every artifact of `options.manifests` into `options.depot`, `options.jobs` at a
/// time, calling `on_done` with each outcome as it finishes (from the worker threads, for a
/// log line), and returns the summary. Errors only for bad options (a depot that does not
/// exist, cannot be written or is reached through another user's symlink, a bad section id, an override that names no artifact or no
/// folder, an `Overrides.toml` that is not TOML); failed installs and unreadable manifests are
/// in the summary.
pub fn mirror(options: &MirrorOptions, on_done: &(dyn Fn(&Outcome) + Sync)) -> Result<Summary> {
    let start = Instant::now();
    // The path as given, never resolved before the check of the links on the way to it.
    let depot = crate::depots::open_depot(&options.depot, "mirroring into")?;
    let depot_dir = depot.root().to_path_buf();
    let mut config = options.config.clone();
    config.depots = vec![depot.clone()];
    config.julia_interop = false;
    config.julia_depots = Some(Vec::new());
    config.node_local_depot = None;
    depot::first_writable(&config.depots, "mirror").map_err(|e| Error::input(e.to_string()))?;

    let (jobs, problems, other_platform, loaded) = plan(&options.manifests, &options.platform);
    let overrides = match &options.overrides {
        Some(requests) => {
            let id = match &options.section_id {
                Some(id) => id.clone(),
                None => default_section_id(&options.manifests),
            };
            Some(write_section(&depot_dir, &id, requests, &jobs, &config)?)
        }
        None => None,
    };
    let existing =
        Overrides::load(std::slice::from_ref(&depot)).map_err(|e| Error::input(e.to_string()))?;
    let (checker, warning) = Checker::load(&depot_dir, options.verify_overrides);
    let mut warnings: Vec<String> = warning.into_iter().collect();

    let queue = Mutex::new(jobs.iter().enumerate());
    let results: Mutex<Vec<(usize, Outcome)>> = Mutex::new(Vec::with_capacity(jobs.len()));
    let workers = options.jobs.clamp(1, MAX_JOBS).min(jobs.len()).max(1);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let next = queue.lock().map(|mut q| q.next()).unwrap_or(None);
                    let Some((i, job)) = next else { break };
                    let mut outcome = install(job, &config, &depot_dir, &existing);
                    if let (Status::Overridden, Some(path)) = (outcome.status, &outcome.path) {
                        let check = checker.check(&job.names, &job.variant, path);
                        outcome.override_check = Some(check);
                    }
                    on_done(&outcome);
                    if let Ok(mut r) = results.lock() {
                        r.push((i, outcome));
                    }
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|(i, _)| *i);
    warnings.extend(checker.save());
    // `gc` of the depot keeps what a recorded manifest names: record every manifest mirrored.
    for manifest in &loaded {
        let m = std::fs::canonicalize(manifest).unwrap_or_else(|_| manifest.clone());
        depot.record_usage(&m, options.config.reporting());
    }
    Ok(Summary {
        depot: depot_dir,
        jobs: workers,
        outcomes: results.into_iter().map(|(_, o)| o).collect(),
        problems,
        other_platform,
        overrides,
        seconds: start.elapsed().as_secs_f64(),
        warnings,
    })
}

/// Installs one job (or says why it cannot be).
fn install(job: &Job, config: &Config, depot: &Path, existing: &Overrides) -> Outcome {
    let start = Instant::now();
    let hash = job.variant.git_tree_sha1;
    let mut out = Outcome {
        names: job.names.clone(),
        manifests: job.manifests.clone(),
        git_tree_sha1: hash,
        status: Status::Failed,
        path: None,
        bytes: job.variant.downloads.first().and_then(|d| d.size),
        seconds: 0.0,
        error: None,
        cause: None,
        error_line: None,
        fix: None,
        override_check: None,
    };
    let placeholder = job.names.iter().find(|n| is_name_placeholder(n, &hash));
    let reason = match (placeholder, job.variant.downloads.is_empty()) {
        (Some(n), _) => Some(clima_artifact_manifest::validate::placeholder_message(
            n,
            &job.manifest,
            None,
        )),
        (None, true) => Some("no download section in the manifest".to_owned()),
        (None, false) => None,
    };
    if let Some(reason) = reason {
        // Not downloadable: only an override can provide it.
        match existing.resolve(&hash) {
            Ok(Some(o)) => {
                out.status = Status::Overridden;
                out.path = Some(o.path);
            }
            Ok(None) => {
                out.status = Status::NeedsOverride;
                out.fix = Some(fix_for(job, depot, reason));
            }
            Err(e) => out.failed(&e.into()),
        }
        out.seconds = start.elapsed().as_secs_f64();
        return out;
    }
    let name = job.names.join(", ");
    match ensure_variant(&name, &job.variant, &job.manifest, config) {
        Ok(installed) => {
            out.path = Some(installed.path);
            out.status = match installed.origin {
                Origin::Override { .. } => Status::Overridden,
                Origin::Depot => Status::Already,
                Origin::Downloaded { bytes, .. } | Origin::Received { bytes, .. } => {
                    out.bytes = Some(bytes);
                    Status::Installed
                }
            };
        }
        Err(e) => out.failed(&e),
    }
    out.seconds = start.elapsed().as_secs_f64();
    out
}

impl Outcome {
    /// Records why it failed: the message, its cause and its one line.
    fn failed(&mut self, e: &clima_artifact_runtime::Error) {
        self.error = Some(e.to_string());
        self.cause = Some(e.cause());
        self.error_line = Some(e.one_line());
    }
}

/// The override command and line for an artifact that cannot be downloaded.
fn fix_for(job: &Job, depot: &Path, reason: String) -> OverrideFix {
    let name = &job.names[0];
    let folder = format!("/path/to/{}", clima_artifact_fs::printable(name));
    let file = layout::overrides_file(depot);
    // Absolute, so that the command works from any folder.
    let manifest = std::fs::canonicalize(&job.manifest).unwrap_or_else(|_| job.manifest.clone());
    OverrideFix {
        command: format!(
            "{}={} clima-artifacts override set {} {} --manifest {}   # or: mirror --override {}={}",
            clima_artifact_runtime::vars::DEPOT_PATH,
            shell_word(&depot.to_string_lossy()),
            shell_word(name),
            shell_word(&folder),
            shell_word(&manifest.to_string_lossy()),
            shell_word(name),
            shell_word(&folder),
        ),
        line: format!(
            "{} = {} # {}",
            job.variant.git_tree_sha1,
            clima_artifact_manifest::toml_string(&folder),
            clima_artifact_fs::printable(&job.names.join(", "))
        ),
        overrides_file: file,
        reason,
    }
}

/// Writes this mirror's section of `<depot>/artifacts/Overrides.toml` under the depot's
/// overrides lock: the requests resolved to hashes of `jobs` (or given as hashes), their
/// folders made absolute.
fn write_section(
    depot: &Path,
    id: &str,
    requests: &[OverrideRequest],
    jobs: &[Job],
    config: &Config,
) -> Result<SectionReport> {
    if !overrides_edit::valid_section_id(id) {
        return Err(Error::input(format!(
            "--id `{}`: use 1 to 64 letters, digits, `.`, `_` or `-`",
            clima_artifact_fs::printable(id)
        )));
    }
    let mut lines = Vec::new();
    let mut kept = Vec::new();
    for r in requests {
        let (hash, name, placeholders) = resolve_request(r, jobs)?;
        let resolved = crate::error::existing_dir(&r.path, "override folder")?;
        // An absolute path is kept as written (a stable mount point may be a symlink).
        let folder = if r.path.is_absolute() {
            r.path.clone()
        } else {
            resolved
        };
        let target = folder.to_str().ok_or_else(|| {
            Error::input(format!(
                "`{}` is not valid UTF-8 and cannot be written to Overrides.toml",
                folder.display()
            ))
        })?;
        for p in &placeholders {
            // Manifests that still name the placeholder keep their override beside the real
            // hash's, until a run finds none of them.
            lines.push(SectionLine {
                hash: p.variant.git_tree_sha1.to_hex(),
                target: target.to_owned(),
                name: Some(p.names.join(", ")),
            });
            kept.push(KeptPlaceholder {
                placeholder: p.variant.git_tree_sha1,
                replaced_by: hash,
                names: p.names.clone(),
                manifests: p.manifests.clone(),
            });
        }
        lines.push(SectionLine {
            hash: hash.to_hex(),
            target: target.to_owned(),
            name,
        });
    }
    let intro = format!(
        "Written by `clima-artifacts mirror --id {id}`: its next run given overrides replaces\n\
         the lines between these markers. Edit outside them (or pass --override to it)."
    );
    let (file, (edit, changed)) = overrides_edit::edit_depot_file(
        depot,
        config.lock_timeout,
        config.reporting(),
        |text, file| {
            let edit = overrides_edit::set_section(text, file, id, &intro, &lines)?;
            let changed = edit.text != text;
            Ok((Some(edit.text.clone()), (edit, changed)))
        },
    )?;
    Ok(SectionReport {
        file,
        id: id.to_owned(),
        written: edit
            .written
            .into_iter()
            .map(|l| (l.hash, l.target, l.name))
            .collect(),
        conflicts: edit
            .conflicts
            .into_iter()
            .map(|SectionConflict { hash, set_by, line }| (hash, set_by, line))
            .collect(),
        changed,
        placeholders_kept: kept,
    })
}

/// The hash (and names) an override request means: a 40-digit hash as it is, else the one
/// artifact of that name in the manifests; and the jobs of that name whose hash is its
/// placeholder (the SHA-1 of the name) when the other is a content hash (the placeholder was
/// replaced in some manifests, not yet in these).
fn resolve_request<'j>(
    r: &OverrideRequest,
    jobs: &'j [Job],
) -> Result<(GitTreeSha1, Option<String>, Vec<&'j Job>)> {
    if r.artifact.len() == 40
        && let Ok(h) = GitTreeSha1::from_hex(&r.artifact)
    {
        let name = jobs
            .iter()
            .find(|j| j.variant.git_tree_sha1 == h)
            .map(|j| j.names.join(", "));
        return Ok((h, name, Vec::new()));
    }
    let hits: Vec<&Job> = jobs
        .iter()
        .filter(|j| j.names.contains(&r.artifact))
        .collect();
    let (placeholders, content): (Vec<&Job>, Vec<&Job>) = hits
        .iter()
        .partition(|j| is_name_placeholder(&r.artifact, &j.variant.git_tree_sha1));
    match (content.as_slice(), hits.as_slice()) {
        (_, [one]) => Ok((
            one.variant.git_tree_sha1,
            Some(one.names.join(", ")),
            Vec::new(),
        )),
        ([one], _) => Ok((
            one.variant.git_tree_sha1,
            Some(one.names.join(", ")),
            placeholders,
        )),
        (_, []) => Err(Error::input(format!(
            "--override `{}`: no artifact of that name in the manifests mirrored (give its \
             git-tree-sha1 instead)",
            clima_artifact_fs::printable(&r.artifact)
        ))),
        (_, many) => Err(Error::input(format!(
            "--override `{}`: the name means different content in the manifests ({}); give the \
             git-tree-sha1 of the one to override",
            clima_artifact_fs::printable(&r.artifact),
            many.iter()
                .map(|j| j.variant.git_tree_sha1.to_hex())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_are_clamped_with_a_warning() {
        assert_eq!(clamp_jobs(8), (8, None));
        let (n, w) = clamp_jobs(0);
        assert_eq!(n, 1);
        assert!(w.unwrap().contains("using 1"));
        assert_eq!(clamp_jobs(1000).0, MAX_JOBS);
    }

    #[test]
    fn override_specs_parse() {
        let r = OverrideRequest::parse("era5=/scratch/era5").unwrap();
        assert_eq!(r.artifact, "era5");
        assert_eq!(r.path, PathBuf::from("/scratch/era5"));
        assert!(OverrideRequest::parse("era5").is_err());
        assert!(OverrideRequest::parse("=/x").is_err());
    }
}
