//! `override set | unset | list`: Julia-compatible `Overrides.toml` lines in the first writable
//! depot, keyed by hash, commented with the artifact's name.

use crate::progress::Ui;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clima_artifact_manifest::{GitTreeSha1, Manifest, OverrideTarget};

use crate::args::{OverrideListArgs, OverrideSetArgs, OverrideUnsetArgs};
use crate::cmd;
use crate::depots;
use crate::error::{CliError, CliResult};
use crate::overrides_edit;

/// A name or hash from the command line, resolved to the hash (and name, and the manifest
/// naming it, when known).
fn resolve(
    spec: &str,
    manifest: Option<&Path>,
) -> CliResult<(GitTreeSha1, Option<(String, PathBuf)>)> {
    if spec.len() == 40
        && let Ok(h) = GitTreeSha1::from_hex(spec)
    {
        // Name it from the manifest if one is at hand; a bare hash works without one.
        let named = cmd::load_manifest(manifest)
            .ok()
            .and_then(|m| name_of(&m, &h).map(|n| (n, m.path)));
        return Ok((h, named));
    }
    let manifest = cmd::load_manifest(manifest)?;
    cmd::check_names(&manifest, &[spec.to_string()])?;
    let variant = cmd::select(&manifest, spec)?;
    Ok((
        variant.git_tree_sha1,
        Some((spec.to_string(), manifest.path.clone())),
    ))
}

fn name_of(manifest: &Manifest, hash: &GitTreeSha1) -> Option<String> {
    manifest.artifacts().iter().find_map(|(name, entry)| {
        let hit = match entry {
            clima_artifact_manifest::ArtifactEntry::Single(v) => &v.git_tree_sha1 == hash,
            clima_artifact_manifest::ArtifactEntry::PlatformSpecific(vs) => {
                vs.iter().any(|v| &v.git_tree_sha1 == hash)
            }
        };
        hit.then(|| name.clone())
    })
}

/// Entry point of `override set`.
pub fn set(args: OverrideSetArgs, ui: &Ui) -> CliResult {
    let (hash, named) = resolve(&args.name, args.manifest.manifest.as_deref())?;
    let name = named.as_ref().map(|(n, _)| n.clone());
    let path = cmd::existing_dir(&args.path, "override folder")?;
    // Keep an absolute path as the user wrote it (a stable mount point may be a symlink);
    // resolve relative ones.
    let path = if args.path.is_absolute() {
        args.path.clone()
    } else {
        path
    };
    let placeholder = named
        .as_ref()
        .filter(|(n, _)| clima_artifact_manifest::validate::is_name_placeholder(n, &hash));
    if let Some((n, manifest)) = placeholder {
        let text = clima_artifact_manifest::validate::placeholder_message(n, manifest, Some(&path));
        if args.verify {
            return Err(CliError::failure(format!(
                "artifact `{n}`: {text}; the override was not written (drop --verify to write \
                 it unverified)"
            )));
        }
        eprintln!("warning: artifact `{n}`: {text}");
    }
    if args.verify {
        let actual = cmd::hash_dir(&path)?;
        if actual != hash {
            return Err(CliError::failure(format!(
                "`{}` has git-tree-sha1 {actual}, but {} expects {hash}; the override was not \
                 written (use the right folder, or drop --verify if the difference is intended)",
                path.display(),
                name.as_deref()
                    .map_or("the manifest".to_string(), |n| format!("artifact `{n}`"))
            )));
        }
    }
    let config = ui.config()?;
    let depot = depots::first_writable_depot(&config)?;
    let path_str = path.to_str().ok_or_else(|| {
        CliError::usage(format!(
            "`{}` is not valid UTF-8 and cannot be written to Overrides.toml",
            path.display()
        ))
    })?;
    let (file, ()) = overrides_edit::edit_depot_file(
        depot.root(),
        config.lock_timeout,
        config.reporting(),
        |text, file| {
            let new = overrides_edit::set_override(
                text,
                file,
                &hash.to_hex(),
                path_str,
                name.as_deref(),
            )?;
            Ok((Some(new), ()))
        },
    )?;
    if args.json {
        return cmd::print_json(&serde_json::json!({
            "name": name,
            "git_tree_sha1": hash.to_hex(),
            "path": path,
            "overrides_file": file,
            "verified": args.verify,
        }));
    }
    println!(
        "{} ({}) -> {}\nwritten to {}{}",
        name.as_deref().unwrap_or("artifact"),
        hash,
        path.display(),
        file.display(),
        if args.verify {
            " (content verified)"
        } else {
            ""
        }
    );
    Ok(())
}

/// Entry point of `override unset`.
pub fn unset(args: OverrideUnsetArgs, ui: &Ui) -> CliResult {
    let (hash, named) = resolve(&args.name, args.manifest.manifest.as_deref())?;
    let name = named.map(|(n, _)| n);
    let config = ui.config()?;
    let depot = depots::first_writable_depot(&config)?;
    let label = name
        .as_deref()
        .map_or(hash.to_hex(), |n| format!("`{n}` ({hash})"));
    let (file, removed) = overrides_edit::edit_depot_file(
        depot.root(),
        config.lock_timeout,
        config.reporting(),
        |text, file| {
            let new = overrides_edit::unset_override(text, file, &hash.to_hex())?;
            let removed = new.is_some();
            Ok((new, removed))
        },
    )?;
    if removed {
        if args.json {
            return cmd::print_json(&serde_json::json!({
                "name": name,
                "git_tree_sha1": hash.to_hex(),
                "removed_from": file,
            }));
        }
        println!("removed the override of {label} from {}", file.display());
        return Ok(());
    }
    let elsewhere: Vec<String> = depots::overrides_files(&config)?
        .into_iter()
        .filter(|f| f.get(&hash).is_some())
        .map(|f| format!("`{}`", f.path.display()))
        .collect();
    let hint = if elsewhere.is_empty() {
        String::new()
    } else {
        format!(
            "; it is set in {} (another depot's file: edit it there, or shadow it with \
             `{hash} = \"\"` in `{}`)",
            elsewhere.join(", "),
            file.display()
        )
    };
    Err(CliError::failure(format!(
        "{label} has no override in `{}`{hint}",
        file.display()
    )))
}

/// One line of `override list`.
#[derive(Debug, serde::Serialize)]
struct Listed {
    git_tree_sha1: String,
    name: Option<String>,
    /// `path`, `hash` or `remove`.
    kind: &'static str,
    target: String,
    file: PathBuf,
    line: u32,
    /// First mention across depots (earlier depots win); later ones are shadowed.
    effective: bool,
}

/// Entry point of `override list`.
pub fn list(args: OverrideListArgs, ui: &Ui) -> CliResult {
    let manifest = match &args.manifest {
        Some(p) => Some(cmd::load_manifest(Some(p))?),
        None => cmd::load_manifest(None).ok(),
    };
    let config = ui.config()?;
    let files = depots::overrides_files(&config)?;
    let mut seen = std::collections::BTreeSet::new();
    let mut rows = Vec::new();
    for f in &files {
        let comments: BTreeMap<String, String> =
            clima_artifact_manifest::overrides::read_overrides_text(&f.path)?
                .map(|t| overrides_edit::comment_names(&t))
                .unwrap_or_default();
        for e in &f.entries {
            let name = manifest
                .as_ref()
                .and_then(|m| name_of(m, &e.hash))
                .or_else(|| comments.get(&e.hash.to_hex()).cloned());
            let (kind, target) = match &e.target {
                OverrideTarget::Path(p) => ("path", p.display().to_string()),
                OverrideTarget::Hash(h) => ("hash", h.to_hex()),
                OverrideTarget::Remove => ("remove", String::new()),
            };
            rows.push(Listed {
                git_tree_sha1: e.hash.to_hex(),
                name,
                kind,
                target,
                file: f.path.clone(),
                line: e.line,
                effective: seen.insert(e.hash),
            });
        }
    }
    if args.json {
        return cmd::print_json(&rows);
    }
    if rows.is_empty() {
        println!(
            "no overrides in {}",
            config
                .depots
                .iter()
                .map(|d| d.overrides_path().display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Ok(());
    }
    for r in &rows {
        let target = if r.kind == "remove" {
            "\"\" (cancels later depots)".to_string()
        } else {
            r.target.clone()
        };
        println!(
            "{:<24} {} -> {}  ({}:{}{})",
            r.name.as_deref().unwrap_or("?"),
            &r.git_tree_sha1,
            target,
            r.file.display(),
            r.line,
            if r.effective {
                ""
            } else {
                ", shadowed by an earlier depot"
            }
        );
    }
    Ok(())
}
