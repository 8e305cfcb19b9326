//! `list` / `status`: one line per artifact of a manifest.

use crate::progress::Ui;
use std::io::Write;
use std::path::{Path, PathBuf};

use clima_artifact_manifest::ArtifactEntry;

use crate::args::ListArgs;
use crate::cmd;
use crate::depots;
use crate::error::{CliResult, io_error};

/// One artifact's state, as printed with `--json`.
#[derive(Debug, Default, serde::Serialize)]
struct Status {
    name: String,
    /// The host variant's hash; `None` when no variant fits this platform.
    git_tree_sha1: Option<String>,
    /// Its `git-tree-sha256`, if the entry gives one (installs check it too).
    #[serde(skip_serializing_if = "Option::is_none")]
    git_tree_sha256: Option<String>,
    /// Platform tags of the selected variant (`None` for `[name]` entries).
    platform: Option<String>,
    /// Why no variant fits, if none does.
    unavailable: Option<String>,
    lazy: bool,
    /// Has at least one download source.
    downloadable: bool,
    /// Number of platform variants (1 for a `[name]` entry).
    variants: usize,
    /// Depot holding an installed copy.
    installed_depot: Option<PathBuf>,
    /// The installed copy.
    installed_path: Option<PathBuf>,
    /// Override target, if overridden.
    override_path: Option<PathBuf>,
    /// The Overrides.toml that set it.
    override_file: Option<PathBuf>,
    /// A broken override (missing target, cycle), with the file to fix.
    override_error: Option<String>,
    /// Bytes of the installed copy (overridden folders are not walked).
    size_bytes: Option<u64>,
    /// The download size the manifest declares (`size` of its first download that has one).
    declared_size: Option<u64>,
    /// Why the entry cannot be read (file:line:col), if it is broken; listed, not fatal.
    error: Option<String>,
    /// The entry's `recipe` key: its recipe folder, relative to the manifest.
    recipe: Option<String>,
    /// Files of the artifact fetched one by one (`fetch --only`, a sub-path of a seekable
    /// artifact), when it is not installed whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    partial_files: Option<u64>,
    /// How many files the whole artifact has, when recorded with them.
    #[serde(skip_serializing_if = "Option::is_none")]
    partial_of: Option<u64>,
    /// The folder holding them (`<depot>/clima_partial/<git-tree-sha1>`).
    #[serde(skip_serializing_if = "Option::is_none")]
    partial_path: Option<PathBuf>,
    /// The hash is the SHA-1 of the name, not of content (see
    /// [`clima_artifact_manifest::validate::is_name_placeholder`]): never verifiable.
    placeholder_hash: bool,
}

/// Entry point of `list` / `status`.
// Long: one row per artifact, its fields filled in the order of the table.
pub fn run(args: ListArgs, ui: &Ui) -> CliResult {
    let manifest = cmd::load_manifest(args.manifest.manifest.as_deref())?;
    let config = ui.config()?;
    let overrides = depots::overrides(&config)?;
    // Once, not per artifact (it reads the environment for Julia's depots).
    let searched = config.search_depots();
    let mut rows = Vec::new();
    for (name, entry) in manifest.artifacts() {
        let variants = match entry {
            ArtifactEntry::Single(_) => 1,
            ArtifactEntry::PlatformSpecific(v) => v.len(),
        };
        let mut s = Status {
            name: name.clone(),
            variants,
            ..Status::default()
        };
        match cmd::select_for(&manifest, name, args.platform.platform.as_ref()) {
            Err(e) => s.unavailable = Some(e.message),
            Ok(v) => {
                s.git_tree_sha1 = Some(v.git_tree_sha1.to_hex());
                s.git_tree_sha256 = v.git_tree_sha256.map(|h| h.to_hex());
                s.platform = v.platform.as_ref().map(|p| p.to_string());
                s.lazy = v.lazy;
                s.downloadable = !v.downloads.is_empty();
                s.declared_size = v.downloads.iter().find_map(|d| d.size);
                s.recipe = v.metadata.get(crate::recipe::RECIPE_KEY).cloned();
                s.placeholder_hash =
                    clima_artifact_manifest::validate::is_name_placeholder(name, &v.git_tree_sha1);
                match depots::resolve_override(&overrides, &v.git_tree_sha1) {
                    Ok(Some(o)) => {
                        s.override_path = Some(o.path);
                        s.override_file = Some(o.overrides_file);
                    }
                    Ok(None) => {}
                    Err(e) => s.override_error = Some(e.into_message()),
                }
                if let Some((depot, path)) = depots::installed_in(&searched, &v.git_tree_sha1) {
                    s.size_bytes = Some(depots::size_on_disk(&path));
                    s.installed_depot = Some(depot.root().to_path_buf());
                    s.installed_path = Some(path);
                } else {
                    partial_state(&mut s, &searched, &v.git_tree_sha1);
                }
            }
        }
        rows.push(s);
    }
    // Broken entries are listed with their error (listing is not using: exit 0).
    for (name, errors) in manifest.broken() {
        rows.push(Status {
            name: name.clone(),
            error: Some(
                errors
                    .iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            ..Status::default()
        });
    }
    if args.json {
        return cmd::print_json(&rows);
    }
    // Rows go through one buffer: stdout is line-buffered, so printing each row was a system
    // call per artifact.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    print_rows(&mut out, &manifest.path, &rows)
        .and_then(|()| out.flush())
        .map_err(|e| io_error("write to", Path::new("standard output"), &e))
}

/// The table of `list`, one line per row.
fn print_rows(out: &mut impl Write, manifest: &Path, rows: &[Status]) -> std::io::Result<()> {
    writeln!(out, "manifest {}", manifest.display())?;
    writeln!(
        out,
        "{:<24} {:<8} {:<5} {:<12} {:>10}  WHERE",
        "NAME", "HASH", "LAZY", "STATE", "SIZE"
    )?;
    // The hints name the manifest as an absolute path, so that they run from anywhere.
    let absolute = std::path::absolute(manifest).unwrap_or_else(|_| manifest.to_path_buf());
    let manifest_word = clima_artifact_fs::shell_word(&absolute.to_string_lossy());
    for s in rows {
        let hash = s.git_tree_sha1.as_deref().map(|h| &h[..8]).unwrap_or("-");
        let (state, where_) = if let Some(e) = &s.error {
            ("broken".to_string(), e.clone())
        } else if let Some(why) = &s.unavailable {
            ("unavailable".to_string(), why.clone())
        } else if let Some(e) = &s.override_error {
            ("bad override".to_string(), e.clone())
        } else if let Some(p) = &s.override_path {
            (
                "overridden".to_string(),
                format!(
                    "{} (set in {})",
                    p.display(),
                    s.override_file
                        .as_ref()
                        .map(|f| f.display().to_string())
                        .unwrap_or_default()
                ),
            )
        } else if let Some(p) = &s.installed_path {
            ("installed".to_string(), p.display().to_string())
        } else if let (Some(n), Some(p)) = (s.partial_files, &s.partial_path) {
            let of = s
                .partial_of
                .map(|total| format!(" of {}", thousands(total)))
                .unwrap_or_default();
            (
                "partial".to_string(),
                format!(
                    "partial: {}{of} files in {}; `clima-artifacts fetch {} --manifest                      {manifest_word}` installs it whole",
                    thousands(n),
                    p.display(),
                    clima_artifact_fs::shell_word(&s.name)
                ),
            )
        } else if s.downloadable {
            (
                "missing".to_string(),
                format!(
                    "downloadable: run `clima-artifacts fetch {} --manifest {manifest_word}`",
                    clima_artifact_fs::shell_word(&s.name)
                ),
            )
        } else {
            (
                "missing".to_string(),
                format!(
                    "no download: set its folder with `clima-artifacts override set {} FOLDER \
                     --manifest {manifest_word}`",
                    clima_artifact_fs::shell_word(&s.name)
                ),
            )
        };
        // Installed: its size on disk; not yet: the declared download size, marked `~`.
        let size = match (s.size_bytes, s.declared_size) {
            (Some(n), _) => depots::human_bytes(n),
            (None, Some(n)) => format!("~{}", depots::human_bytes(n)),
            (None, None) => "-".into(),
        };
        let recipe = s
            .recipe
            .as_deref()
            .map(|r| format!(" (recipe {})", clima_artifact_fs::printable(r)))
            .unwrap_or_default();
        let recipe = if s.placeholder_hash {
            format!(
                "{recipe} (placeholder hash: the SHA-1 of the name, not of content; record the \
                 real one with `{}`)",
                clima_artifact_manifest::validate::record_hash_command(
                    &s.name,
                    manifest,
                    s.override_path.as_deref()
                )
            )
        } else {
            recipe
        };
        writeln!(
            out,
            "{:<24} {:<8} {:<5} {:<12} {:>10}  {where_}{recipe}",
            s.name,
            hash,
            if s.lazy { "yes" } else { "no" },
            state,
            size
        )?;
    }
    Ok(())
}

/// The files of `hash` fetched one by one in the first of `depots` that has some.
fn partial_state(
    s: &mut Status,
    depots: &[clima_artifact_runtime::depot::Depot],
    hash: &clima_artifact_manifest::GitTreeSha1,
) {
    for depot in depots {
        let held = depot.partial_file_paths(hash);
        if held.is_empty() {
            continue;
        }
        s.partial_files = Some(held.len() as u64);
        s.partial_of = depot.partial_count(hash);
        s.partial_path = Some(depot.partial_files_dir(hash));
        return;
    }
}

/// `n` with a comma every three digits: `1,000`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
