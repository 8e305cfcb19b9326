//! `create`: folder -> tree hash -> deterministic `.tar.gz` + sha256 -> manifest entry.
//! With `--external`: tree hash and an entry without downloads, plus the Overrides.toml line for
//! the cluster's admins.

use std::path::{Path, PathBuf};

use clima_artifact_fs::shell_word;
use clima_artifact_manifest::{GitTreeSha1, Manifest};
use std::os::unix::ffi::OsStrExt;

use clima_artifact_runtime::extract::seekable::{self, Flavour};
use clima_artifact_runtime::tree_hash::Formats;

use crate::args::CreateArgs;
use crate::cmd::plan::{MetadataArgs, Plan};
use crate::cmd::{self, check_name, existing_dir};
use crate::error::{CliError, CliResult};
use crate::manifest_edit::{self, EditOutcome, EntryUpdate, NewDownload, upsert_entry};
use crate::{depots, progress, recipe, tarball};

/// The manifest `create` edits: `--manifest`, else the one found from the current folder
/// upwards (as every other command), else `Artifacts.toml` in the current folder (created).
pub fn default_manifest(given: Option<PathBuf>) -> CliResult<PathBuf> {
    if let Some(p) = given {
        return Ok(p);
    }
    let cwd = std::env::current_dir()
        .map_err(|e| crate::error::io_error("find", Path::new("the current folder"), &e))?;
    Ok(Manifest::find_upwards(&cwd).unwrap_or_else(|_| PathBuf::from("Artifacts.toml")))
}

/// Entry point of `create`.
pub fn run(mut args: CreateArgs) -> CliResult {
    if let Some(folder) = args.recipe.clone() {
        return run_recipe(&folder, args);
    }
    let plan = if args.guided {
        args.manifest = Some(default_manifest(args.manifest.take())?);
        ask_guided(args, false)?
    } else {
        Plan {
            metadata: MetadataArgs::from_args(&args).entries(),
            dir: args.dir.expect("clap requires DIR without --guided"),
            name: args.name.expect("clap requires --name without --guided"),
            manifest: default_manifest(args.manifest)?,
            url: args.url,
            tarball_out: args.tarball_out,
            classic: args.classic,
            lazy: args.lazy,
            external: args.external,
            json: args.json,
            recipe: None,
        }
    };
    execute(&plan)
}

/// The guided prompts on stdin and stdout; `from_recipe`: the content is a recipe's output.
fn ask_guided(args: CreateArgs, from_recipe: bool) -> CliResult<Plan> {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut output = std::io::stdout();
    cmd::guided::ask(args, from_recipe, &mut input, &mut output)
}

/// `create --recipe FOLDER`: runs the recipe into a temp folder, adds its README, and creates
/// the artifact from that folder, recording `recipe = "<folder relative to the manifest>"`.
/// With `--guided`, the settings are asked for first and the recipe runs after.
fn run_recipe(folder: &Path, mut args: CreateArgs) -> CliResult {
    if args.name.is_none() {
        args.name = Some(
            folder
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .ok_or_else(|| {
                    CliError::usage(format!(
                        "cannot tell the artifact's name from `{}`; pass --name",
                        folder.display()
                    ))
                })?,
        );
    }
    args.manifest = Some(default_manifest(args.manifest.take())?);
    let timeout = args.timeout;
    let mut plan = if args.guided {
        args.dir = Some(folder.to_path_buf());
        ask_guided(args, true)?
    } else {
        Plan {
            metadata: MetadataArgs::from_args(&args).entries(),
            dir: PathBuf::new(),
            name: args.name.unwrap_or_default(),
            manifest: args.manifest.unwrap_or_default(),
            url: args.url,
            tarball_out: args.tarball_out,
            classic: args.classic,
            lazy: args.lazy,
            external: false,
            json: args.json,
            recipe: None,
        }
    };
    check_name(&plan.name)?;
    let recipe = recipe::from_folder(folder, &plan.manifest, &plan.name)?;
    let output = recipe::run(&recipe, timeout)?;
    plan.metadata.push((recipe::RECIPE_KEY, recipe.key.clone()));
    plan.dir = output.dir.clone();
    plan.external = false;
    plan.recipe = Some(recipe.key);
    execute(&plan)
}

/// The JSON output of `create`.
#[derive(Debug, serde::Serialize)]
struct Created {
    name: String,
    git_tree_sha1: String,
    /// The new `git-tree-sha256`, when the entry carries one.
    #[serde(skip_serializing_if = "Option::is_none")]
    git_tree_sha256: Option<String>,
    external: bool,
    tarball: Option<PathBuf>,
    sha256: Option<String>,
    tarball_bytes: Option<u64>,
    /// The SHA-256 of a seekable tarball's index (`index-sha256`).
    #[serde(skip_serializing_if = "Option::is_none")]
    index_sha256: Option<String>,
    url: Option<String>,
    manifest: PathBuf,
    manifest_change: EditOutcome,
    /// Download URLs of the entry after the edit.
    downloads: Vec<String>,
    overrides_line: Option<String>,
    /// The recorded `recipe` key (with --recipe).
    recipe: Option<String>,
}

/// Writes the tarball of `dir` (to `--tarball-out`, else `NAME.tar.gz`; never inside `dir`)
/// with a progress bar, and checks that it holds the tree `hash` was computed from.
fn archive_dir(plan: &Plan, dir: &Path, hash: &GitTreeSha1) -> CliResult<tarball::Tarball> {
    let out = plan
        .tarball_out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.tar.gz", plan.name)));
    let out = std::path::absolute(&out).map_err(|e| crate::error::io_error("resolve", &out, &e))?;
    if out.starts_with(dir) {
        return Err(CliError::usage(format!(
            "the tarball `{}` would be written inside the folder it archives; pass \
             --tarball-out with a path outside `{}`",
            out.display(),
            dir.display()
        )));
    }
    let entries = tarball::collect_entries(dir)?;
    tarball::check_symlinks(dir, &entries)?;
    let total: u64 = entries
        .iter()
        .map(|e| match e.kind {
            tarball::EntryKind::File { size, .. } => size,
            _ => 0,
        })
        .sum();
    let bar = progress::bytes(total, "archiving");
    let made = if plan.classic {
        tarball::write_tarball(dir, &entries, &out, &|n| bar.inc(n))
    } else {
        let flavour = Flavour::for_file_name(out.as_os_str().as_bytes());
        let block = seekable::DEFAULT_BLOCK_SIZE;
        tarball::write_seekable(dir, &entries, &out, flavour, block, &|n| bar.inc(n))
    };
    bar.finish_and_clear();
    let made = made?;
    if made.tree_hash != *hash {
        let _ = std::fs::remove_file(&made.path);
        return Err(CliError::failure(format!(
            "the content of `{}` changed while `create` ran (tree hash {} before archiving, \
             {} in the archive); run `create` again once nothing writes to the folder",
            dir.display(),
            hash,
            made.tree_hash
        )));
    }
    Ok(made)
}

/// Does the work described by `plan`.
pub fn execute(plan: &Plan) -> CliResult {
    check_name(&plan.name)?;
    let dir = existing_dir(&plan.dir, "artifact folder")?;
    // An entry that carries a git-tree-sha256 gets the new one (from the same read of the files).
    let sha256 = manifest_edit::entry_has_sha256(&cmd::read_or_empty(&plan.manifest)?, &plan.name);
    let hashes = cmd::hash_dir_in(&dir, Formats::with_sha256(sha256))?;
    let hash = hashes.sha1;
    let hash_sha256 = hashes.sha256.map(|h| h.to_hex());

    let mut created = Created {
        name: plan.name.clone(),
        git_tree_sha1: hash.to_hex(),
        git_tree_sha256: hash_sha256.clone(),
        external: plan.external,
        tarball: None,
        sha256: None,
        tarball_bytes: None,
        index_sha256: None,
        url: plan.url.clone(),
        manifest: plan.manifest.clone(),
        manifest_change: EditOutcome::Added,
        downloads: Vec::new(),
        overrides_line: None,
        recipe: plan.recipe.clone(),
    };
    let mut download = None;
    if !plan.external {
        let made = archive_dir(plan, &dir, &hash)?;
        created.tarball = Some(made.path.clone());
        created.sha256 = Some(made.sha256.to_hex());
        created.tarball_bytes = Some(made.size);
        created.index_sha256 = made.index_sha256.map(|h| h.to_hex());
        let file_name = made
            .path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| format!("{}.tar.gz", plan.name));
        // A URL ending in `/` names the folder the tarball goes to (as in guided mode).
        let url = plan.url.as_ref().map(|u| {
            if u.ends_with('/') {
                format!("{u}{file_name}")
            } else {
                u.clone()
            }
        });
        created.url = url.clone();
        download = url.map(|url| NewDownload {
            url,
            sha256: made.sha256.to_hex(),
            size: made.size,
            index_sha256: created.index_sha256.clone(),
        });
    } else {
        created.overrides_line = Some(format!(
            "{} = {} # {}",
            hash,
            toml_edit::Value::from(dir.to_string_lossy().as_ref()),
            plan.name
        ));
    }

    let update = EntryUpdate {
        name: plan.name.clone(),
        tree_hash: hash.to_hex(),
        tree_hash_sha256: hash_sha256,
        lazy: plan.lazy,
        metadata: plan.metadata.clone(),
        download,
        remove_downloads: plan.external,
        replace_downloads: true,
        download_last: false,
    };
    (created.manifest_change, created.downloads) = write_manifest(&plan.manifest, &update)?;

    if plan.json {
        return cmd::print_json(&created);
    }
    print_summary(&created, &dir);
    Ok(())
}

fn write_manifest(path: &Path, update: &EntryUpdate) -> CliResult<(EditOutcome, Vec<String>)> {
    let original = cmd::read_or_empty(path)?;
    let (text, outcome) = upsert_entry(&original, path, update)?;
    let parsed = Manifest::parse(&text, path).map_err(|e| {
        CliError::usage(format!(
            "the manifest would not load after adding `{}`, so it was left unchanged: {e}",
            update.name
        ))
    })?;
    cmd::write_atomically(path, &text)?;
    let downloads = match parsed.get(&update.name) {
        Some(clima_artifact_manifest::ArtifactEntry::Single(v)) => {
            v.downloads.iter().map(|d| d.url.clone()).collect()
        }
        _ => Vec::new(),
    };
    Ok((outcome, downloads))
}

fn print_summary(c: &Created, dir: &Path) {
    let action = match &c.manifest_change {
        EditOutcome::Added => "entry added".to_string(),
        EditOutcome::Updated {
            previous_hash,
            removed_downloads,
        } => {
            let mut s = "entry updated".to_string();
            if previous_hash
                .as_deref()
                .is_some_and(|p| p != c.git_tree_sha1)
            {
                s.push_str("; content changed");
            }
            if *removed_downloads > 0 {
                s.push_str(&format!("; {removed_downloads} old download(s) removed"));
            }
            s
        }
    };
    println!("artifact `{}`", c.name);
    println!("  git-tree-sha1  {}", c.git_tree_sha1);
    if let Some(sha256) = &c.git_tree_sha256 {
        println!("  git-tree-sha256 {sha256}");
    }
    if let (Some(t), Some(sha), Some(size)) = (&c.tarball, &c.sha256, c.tarball_bytes) {
        println!(
            "  tarball        {} ({})",
            t.display(),
            depots::human_bytes(size)
        );
        println!("  sha256         {sha}");
        if let Some(index) = &c.index_sha256 {
            println!("  index-sha256   {index} (seekable)");
        }
    }
    println!("  manifest       {} ({action})", c.manifest.display());
    if let Some(r) = &c.recipe {
        println!("  recipe         {r} (README.md included)");
    }
    if let Some(line) = &c.overrides_line {
        let manifest = std::path::absolute(&c.manifest).unwrap_or_else(|_| c.manifest.clone());
        println!();
        println!(
            "External artifact: give this line to the cluster's admins for \
             <depot>/artifacts/Overrides.toml (or run `clima-artifacts override set {} {} \
             --manifest {}`):",
            shell_word(&c.name),
            shell_word(&dir.to_string_lossy()),
            shell_word(&manifest.to_string_lossy())
        );
        println!("{line}");
        if let EditOutcome::Updated {
            previous_hash: Some(old),
            ..
        } = &c.manifest_change
        {
            let was_placeholder = GitTreeSha1::from_hex(old)
                .is_ok_and(|h| clima_artifact_manifest::validate::is_name_placeholder(&c.name, &h));
            if was_placeholder && *old != c.git_tree_sha1 {
                println!(
                    "The placeholder hash {old} was replaced. Other manifests that name it \
                     lose their override unless Overrides.toml keeps a line for it too: the \
                     census of the collection lists them, and a mirror given an override of `{}` \
                     keeps both lines while a mirrored manifest names it (docs/census.md).",
                    c.name
                );
            }
        }
    } else if c.url.is_none() && c.downloads.is_empty() {
        if let Some(t) = &c.tarball {
            println!();
            println!(
                "next: upload `{}` and run `create` again with --url URL to record where it can be \
                 downloaded (the manifest entry has no download yet)",
                t.display()
            );
            println!(
                "  or publish it with a DOI to an InvenioRDM archive (CaltechDATA, Zenodo; a \
                 token in {}, see docs/archive.md), reviewing the draft first:\n  \
                 clima-artifacts publish {} --archive https://data.caltech.edu --draft -m {} \
                 --tarball {}",
                crate::archive::TOKEN_VAR,
                shell_word(&c.name),
                shell_word(&c.manifest.to_string_lossy()),
                shell_word(&t.to_string_lossy())
            );
        }
    } else if let (Some(t), Some(url)) = (&c.tarball, &c.url) {
        println!();
        if served_in_place(t, url) {
            println!("the tarball is already where {url} points: nothing to upload");
        } else {
            println!(
                "next: upload `{}` so that it is served at {url}",
                t.display()
            );
        }
    }
}

/// Whether `url` is a `file://` URL of the tarball `written` itself.
fn served_in_place(written: &Path, url: &str) -> bool {
    let Some(path) = url.strip_prefix("file://") else {
        return false;
    };
    match (std::fs::canonicalize(path), std::fs::canonicalize(written)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
