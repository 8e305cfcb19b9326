//! `verify`: re-hashes installed copies and reports any whose content no longer matches its
//! `git-tree-sha1` (and its `git-tree-sha256`, when the entry gives one: both are computed in
//! one pass). Overridden artifacts are skipped unless `--include-overrides` (they can be
//! huge, and the admins who set them vouch for them).

use crate::progress::Ui;
use std::path::{Path, PathBuf};

use clima_artifact_runtime::tree_hash::Formats;

use crate::args::VerifyArgs;
use crate::cmd;
use crate::depots;
use crate::error::{CliError, CliResult};

/// One checked copy.
#[derive(Debug, serde::Serialize)]
struct Checked {
    name: String,
    expected: String,
    /// `ok`, `changed`, `not_installed`, `overridden_skipped` or `error`.
    status: &'static str,
    path: Option<PathBuf>,
    actual: Option<String>,
    /// The entry's `git-tree-sha256`, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    expected_sha256: Option<String>,
    /// The copy's git tree SHA-256, when `expected_sha256` is set and the copy was hashed.
    #[serde(skip_serializing_if = "Option::is_none")]
    actual_sha256: Option<String>,
    /// Files modified after the copy was installed (a hint for where the change is).
    modified_files: Vec<PathBuf>,
    error: Option<String>,
    /// The `Overrides.toml` whose line points at `path`, when the copy is an override's folder
    /// (never to be deleted: it may be the only copy).
    #[serde(skip_serializing_if = "Option::is_none")]
    override_file: Option<PathBuf>,
    /// What to do about a changed copy (a command that runs as printed).
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

/// Files under `dir` whose mtime is later than the moment `dir` was renamed into place (its ctime).
/// Installs write every file before that rename, so these were changed afterwards.
fn modified_since_install(dir: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return Vec::new();
    };
    let installed = (meta.ctime(), meta.ctime_nsec());
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for item in rd.flatten() {
            let path = item.path();
            let Ok(m) = path.symlink_metadata() else {
                continue;
            };
            if m.is_dir() {
                stack.push(path);
            } else if (m.mtime(), m.mtime_nsec()) > installed {
                out.push(path.strip_prefix(dir).unwrap_or(&path).to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// Entry point of `verify`.
pub fn run(args: VerifyArgs, ui: &Ui) -> CliResult {
    let manifest = cmd::load_manifest(args.manifest.manifest.as_deref())?;
    cmd::check_names(&manifest, &args.names)?;
    let names: Vec<String> = if args.all {
        manifest.names().map(str::to_string).collect()
    } else {
        args.names.clone()
    };
    // A broken entry cannot be verified: with --all it fails the command (as a named one does).
    if args.all
        && let Some((name, errors)) = manifest.broken().first()
    {
        return Err(CliError::usage(format!(
            "artifact `{name}` cannot be verified: {}",
            errors[0]
        )));
    }
    let config = ui.config()?;
    let overrides = depots::overrides(&config)?;
    let mut checked = Vec::new();
    for name in &names {
        check_one(name, &manifest, &config, &overrides, &args, &mut checked)?;
    }
    if args.json {
        cmd::print_json(&checked)?;
    } else {
        print_checked(&checked);
    }
    failures(&checked, args.all, &manifest.path)
}

/// Hashes every installed copy of `name` (or its override's folder with
/// `--include-overrides`) and adds what it found to `checked`.
fn check_one(
    name: &str,
    manifest: &clima_artifact_manifest::Manifest,
    config: &clima_artifact_runtime::Config,
    overrides: &clima_artifact_runtime::depot::Overrides,
    args: &VerifyArgs,
    checked: &mut Vec<Checked>,
) -> CliResult {
    let variant = match cmd::select(manifest, name) {
        Ok(v) => v,
        Err(_) if args.all => return Ok(()),
        Err(e) => return Err(e),
    };
    let hash = variant.git_tree_sha1;
    let hash_sha256 = variant.git_tree_sha256;
    let base = |status, path: Option<PathBuf>| Checked {
        name: name.to_owned(),
        expected: hash.to_hex(),
        status,
        path,
        actual: None,
        expected_sha256: hash_sha256.map(|h| h.to_hex()),
        actual_sha256: None,
        modified_files: Vec::new(),
        error: None,
        override_file: None,
        fix: None,
    };
    let mut targets = Vec::new();
    let mut override_file = None;
    match depots::resolve_override(overrides, &hash)? {
        Some(o) if !args.include_overrides => {
            checked.push(base("overridden_skipped", Some(o.path)));
            return Ok(());
        }
        Some(o) => {
            targets.push(o.path);
            override_file = Some(o.overrides_file);
        }
        None => targets.extend(depots::installed_everywhere(config, &hash)),
    }
    if targets.is_empty() {
        checked.push(base("not_installed", None));
        return Ok(());
    }
    for path in targets {
        let mut c = base("ok", Some(path.clone()));
        c.override_file.clone_from(&override_file);
        let formats = Formats::with_sha256(hash_sha256.is_some());
        match clima_artifact_runtime::tree_hash::tree_hashes(&path, formats) {
            Ok(actual) => {
                c.actual_sha256 = actual.sha256.map(|h| h.to_hex());
                if actual.sha1 != hash || actual.sha256 != hash_sha256 {
                    c.status = "changed";
                    c.actual = Some(actual.sha1.to_hex());
                    if c.override_file.is_none() {
                        c.modified_files = modified_since_install(&path);
                    }
                    c.fix = Some(fix_for(&c, variant, &manifest.path));
                }
            }
            Err(e) => {
                c.status = "error";
                c.error = Some(e.to_string());
            }
        }
        checked.push(c);
    }
    Ok(())
}

/// What to do about the changed copy `c` of `variant` (of `manifest`), as a command that runs
/// as printed. An installed copy is deleted and fetched again; an override's folder never is
/// (for an entry with no download it is the only copy): the override is pointed elsewhere, or
/// the folder's hash recorded when its content is the one wanted.
fn fix_for(
    c: &Checked,
    variant: &clima_artifact_manifest::ArtifactVariant,
    manifest: &Path,
) -> String {
    use clima_artifact_fs::shell_word;
    let manifest = std::path::absolute(manifest).unwrap_or_else(|_| manifest.to_path_buf());
    let (name, m) = (shell_word(&c.name), shell_word(&manifest.to_string_lossy()));
    let Some(file) = &c.override_file else {
        return format!(
            "delete that folder and run `clima-artifacts fetch {name} --manifest {m}` to \
             reinstall it"
        );
    };
    let path = c.path.clone().unwrap_or_default();
    let record =
        clima_artifact_manifest::validate::record_hash_command(&c.name, &manifest, Some(&path));
    let placeholder =
        clima_artifact_manifest::validate::is_name_placeholder(&c.name, &variant.git_tree_sha1);
    let keep = format!(
        "this folder is an override's (set in `{}`), possibly the only copy of the data: do not \
         delete it",
        file.display()
    );
    if placeholder {
        format!(
            "{keep}; its git-tree-sha1 is a placeholder (the SHA-1 of the name), which no \
             content matches: record the real hash with `{record}`"
        )
    } else if variant.downloads.is_empty() {
        format!(
            "{keep}; point the override at the folder that holds the content the manifest names \
             or, if this folder's content is the one wanted, record its hash with `{record}`"
        )
    } else {
        format!(
            "{keep}; point the override at the folder that holds the content the manifest names, \
             or remove it to use the download: `clima-artifacts override unset {name} \
             --manifest {m}`"
        )
    }
}

/// One line per check, for people.
fn print_checked(checked: &[Checked]) {
    for c in checked {
        let where_ = c
            .path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let status = match c.status {
            "ok" => "ok".to_string(),
            "changed" => format!("CHANGED ({})", mismatch(c)),
            "not_installed" => "not installed".to_string(),
            "overridden_skipped" => "overridden, not hashed (--include-overrides)".to_string(),
            _ => format!("ERROR {}", c.error.as_deref().unwrap_or("")),
        };
        println!("{:<24} {status} {where_}", c.name);
    }
}

/// Which hash of a changed copy differs: its git-tree-sha1, or (the SHA-1 matching) its
/// git-tree-sha256, which says the manifest's SHA-256 is wrong or the copy collides in SHA-1.
fn mismatch(c: &Checked) -> String {
    let found = |h: &Option<String>| h.clone().unwrap_or_else(|| "?".to_owned());
    if c.actual.as_deref() == Some(c.expected.as_str())
        && let Some(expected) = &c.expected_sha256
    {
        format!(
            "git-tree-sha256 {expected} expected, {} found, although its git-tree-sha1 matches: \
             the manifest's git-tree-sha256 is wrong or the copy was made to collide in SHA-1",
            found(&c.actual_sha256)
        )
    } else {
        format!(
            "git-tree-sha1 {} expected, {} found",
            c.expected,
            found(&c.actual)
        )
    }
}

/// An error listing every changed, unhashable or (named and) missing artifact, if any.
fn failures(checked: &[Checked], all: bool, manifest: &Path) -> CliResult {
    let bad: Vec<&Checked> = checked
        .iter()
        .filter(|c| matches!(c.status, "changed" | "error"))
        .collect();
    let missing: Vec<&Checked> = checked
        .iter()
        .filter(|c| c.status == "not_installed" && !all)
        .collect();
    if bad.is_empty() && missing.is_empty() {
        return Ok(());
    }
    let mut lines = Vec::new();
    for c in bad {
        let path = c
            .path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        if c.status == "changed" {
            let hint = if c.modified_files.is_empty() {
                String::new()
            } else {
                let shown: Vec<String> = c
                    .modified_files
                    .iter()
                    .take(10)
                    .map(|f| format!("`{}`", f.display()))
                    .collect();
                let more = c.modified_files.len().saturating_sub(shown.len());
                format!(
                    "; modified after install: {}{}",
                    shown.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                )
            };
            lines.push(format!(
                "  artifact `{}` at `{path}`: content changed ({}){hint}; {}",
                c.name,
                mismatch(c),
                c.fix.as_deref().unwrap_or_default()
            ));
        } else {
            lines.push(format!(
                "  artifact `{}` at `{path}` could not be hashed: {}",
                c.name,
                c.error.as_deref().unwrap_or("")
            ));
        }
    }
    let manifest = std::path::absolute(manifest).unwrap_or_else(|_| manifest.to_path_buf());
    for c in missing {
        lines.push(format!(
            "  artifact `{}` is not installed; run `clima-artifacts fetch {} --manifest {}`",
            c.name,
            clima_artifact_fs::shell_word(&c.name),
            clima_artifact_fs::shell_word(&manifest.to_string_lossy())
        ));
    }
    Err(CliError::failure(format!(
        "verification failed:\n{}",
        lines.join("\n")
    )))
}
