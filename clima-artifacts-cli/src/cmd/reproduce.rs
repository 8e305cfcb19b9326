//! `reproduce`: runs artifacts' recipes (`recipe = "artifacts/<name>"` in the manifest) into
//! temp folders, never into a depot, and compares the tree hash of what they made (README.md
//! included, as `create --recipe` packs it) with the manifest's `git-tree-sha1`. On a mismatch
//! the new tree is compared file by file with the pinned content, installed first as `fetch`
//! installs it; when that cannot be had, the new tree is listed instead.

use crate::progress::Ui;
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clima_artifact_fs::printable;
use clima_artifact_manifest::{ArtifactVariant, Manifest};
use clima_artifact_runtime::Origin;
use clima_artifact_runtime::tree_hash::BlobHasher;

use crate::args::ReproduceArgs;
use crate::cmd;
use crate::error::{CliError, CliResult, io_error};
use crate::recipe::{self, RECIPE_KEY};
use crate::tarball::{self, EntryKind};

/// One artifact's outcome, as printed with `--json`.
#[derive(Debug, serde::Serialize)]
struct Reproduced {
    name: String,
    /// `reproduced`, `mismatch`, `failed` (the recipe failed, timed out or was refused: see
    /// `error`) or `no_recipe` (with --all: the entry has no `recipe` key).
    status: &'static str,
    /// The `recipe` key.
    recipe: Option<String>,
    /// The manifest's git-tree-sha1.
    pinned: String,
    /// The tree hash of what the recipe made.
    made: Option<String>,
    /// The pinned content the new tree was compared with (installed copy or override).
    compared_with: Option<PathBuf>,
    /// Why the pinned content could not be had (`made_files` then lists the new tree).
    pinned_unavailable: Option<String>,
    /// How the new tree differs from the pinned content.
    differences: Vec<Difference>,
    /// The new tree, when it could not be compared.
    made_files: Vec<Listed>,
    error: Option<String>,
}

/// One way the new tree differs from the pinned one.
#[derive(Debug, serde::Serialize)]
struct Difference {
    /// Path inside the artifact.
    path: String,
    /// `missing`, `extra`, `content_differs`, `mode_differs`, `link_target_differs` or
    /// `kind_differs`.
    change: &'static str,
    /// What the pinned content has there, in words.
    pinned: Option<String>,
    /// What the recipe made there, in words.
    made: Option<String>,
    /// Sizes, for files.
    pinned_size: Option<u64>,
    made_size: Option<u64>,
}

/// One file or symlink of the new tree.
#[derive(Debug, serde::Serialize)]
struct Listed {
    path: String,
    /// `file`, `executable` or `symlink`.
    kind: &'static str,
    size: Option<u64>,
    target: Option<String>,
}

/// A file or symlink of a tree, as the git tree hash sees it (empty folders do not count).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Leaf {
    File {
        size: u64,
        executable: bool,
        blob: [u8; 20],
    },
    Link(Vec<u8>),
}

impl Leaf {
    fn describe(&self) -> String {
        match self {
            Leaf::File {
                size, executable, ..
            } => format!(
                "{} file of {size} bytes",
                if *executable { "an executable" } else { "a" }
            ),
            Leaf::Link(t) => format!("a symlink to `{}`", shown(t)),
        }
    }

    fn size(&self) -> Option<u64> {
        match self {
            Leaf::File { size, .. } => Some(*size),
            Leaf::Link(_) => None,
        }
    }
}

/// Bytes from a tree (paths, link targets) made printable.
fn shown(bytes: &[u8]) -> String {
    printable(&String::from_utf8_lossy(bytes)).into_owned()
}

/// Entry point of `reproduce`.
pub fn run(args: ReproduceArgs, ui: &Ui) -> CliResult {
    let manifest = cmd::load_manifest(args.manifest.manifest.as_deref())?;
    let jobs = jobs(&manifest, &args)?;
    let mut results = Vec::new();
    for (name, variant) in &jobs {
        results.push(reproduce_one(
            name,
            variant,
            &manifest,
            args.timeout,
            args.json,
            ui,
        ));
    }
    if args.json {
        cmd::print_json(&results)?;
    } else {
        print_results(&results, &manifest.path);
    }
    let bad: Vec<&Reproduced> = results
        .iter()
        .filter(|r| matches!(r.status, "mismatch" | "failed"))
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = bad.iter().map(|r| summary(r)).collect();
    Err(CliError::failure(format!(
        "{} of {} recipe(s) did not reproduce the pinned content:\n{}",
        bad.len(),
        results.iter().filter(|r| r.status != "no_recipe").count(),
        lines.join("\n")
    )))
}

/// The artifacts to reproduce: the names given (each must have a recipe), or with `--all`
/// every artifact of the manifest for this platform.
fn jobs(manifest: &Manifest, args: &ReproduceArgs) -> CliResult<Vec<(String, ArtifactVariant)>> {
    cmd::check_names(manifest, &args.names)?;
    if !args.all {
        let mut jobs = Vec::new();
        for name in &args.names {
            let variant = cmd::select(manifest, name)?;
            if !variant.metadata.contains_key(RECIPE_KEY) {
                return Err(CliError::usage(format!(
                    "artifact `{name}` of `{}` has no `{RECIPE_KEY}` key, so there is nothing to \
                     run: make a recipe with `clima-artifacts new {name}` and record it with \
                     `clima-artifacts create --recipe artifacts/{name}`",
                    manifest.path.display()
                )));
            }
            jobs.push((name.clone(), variant.clone()));
        }
        return Ok(jobs);
    }
    if let Some((name, errors)) = manifest.broken().first() {
        return Err(CliError::usage(format!(
            "artifact `{name}` cannot be read: {}",
            errors[0]
        )));
    }
    Ok(manifest
        .names()
        .filter_map(|name| {
            cmd::select(manifest, name)
                .ok()
                .map(|v| (name.to_owned(), v.clone()))
        })
        .collect())
}

/// Runs one recipe and compares what it made with the pinned content.
fn reproduce_one(
    name: &str,
    variant: &ArtifactVariant,
    manifest: &Manifest,
    timeout: Option<Duration>,
    json: bool,
    ui: &Ui,
) -> Reproduced {
    let mut r = Reproduced {
        name: name.to_owned(),
        status: "no_recipe",
        recipe: variant.metadata.get(RECIPE_KEY).cloned(),
        pinned: variant.git_tree_sha1.to_hex(),
        made: None,
        compared_with: None,
        pinned_unavailable: None,
        differences: Vec::new(),
        made_files: Vec::new(),
        error: None,
    };
    let Some(key) = r.recipe.clone() else {
        return r;
    };
    let made = recipe::from_entry(name, &key, &manifest.path)
        .and_then(|rec| recipe::run(&rec, timeout))
        .map_err(CliError::from)
        .and_then(|out| cmd::hash_dir(&out.dir).map(|hash| (out, hash)));
    let (output, hash) = match made {
        Ok(m) => m,
        Err(e) => {
            r.status = "failed";
            r.error = Some(e.message);
            return r;
        }
    };
    r.made = Some(hash.to_hex());
    if hash == variant.git_tree_sha1 {
        r.status = "reproduced";
        return r;
    }
    r.status = "mismatch";
    let compared = pinned_copy(name, variant, manifest, json, ui).and_then(|pinned| {
        let theirs = leaves(&pinned)?;
        let ours = leaves(&output.dir)?;
        Ok((pinned, compare(&theirs, &ours)))
    });
    match compared {
        Ok((pinned, differences)) => {
            r.compared_with = Some(pinned);
            r.differences = differences;
        }
        Err(e) => {
            r.pinned_unavailable = Some(e.message);
            match leaves(&output.dir) {
                Ok(ours) => r.made_files = listing(&ours),
                Err(e) => r.error = Some(e.message),
            }
        }
    }
    r
}

/// The pinned content, installed as `fetch` installs it (or the override, if it holds the
/// pinned tree).
fn pinned_copy(
    name: &str,
    variant: &ArtifactVariant,
    manifest: &Manifest,
    json: bool,
    ui: &Ui,
) -> CliResult<PathBuf> {
    let (config, _) = cmd::fetch::install_config(ui, json)?;
    let installed = clima_artifact_runtime::ensure_variant(name, variant, &manifest.path, &config)
        .map_err(|e| CliError::failure(e.to_string()))?;
    if let Origin::Override { overrides_file } = &installed.origin {
        let actual = cmd::hash_dir(&installed.path)?;
        if actual != variant.git_tree_sha1 {
            return Err(CliError::failure(format!(
                "its override `{}` (set in `{}`) does not hold the pinned content (git-tree-sha1 \
                 {actual})",
                installed.path.display(),
                overrides_file.display()
            )));
        }
    } else {
        // As `fetch`: lets `gc` know this manifest's artifacts are in use.
        crate::depots::record_usage(&config, &manifest.path);
    }
    Ok(installed.path)
}

/// Every file and symlink of `root` (never following links), with its blob id.
fn leaves(root: &Path) -> CliResult<BTreeMap<Vec<u8>, Leaf>> {
    let mut out = BTreeMap::new();
    for e in tarball::collect_entries(root)? {
        let leaf = match e.kind {
            EntryKind::Dir => continue,
            EntryKind::Symlink(target) => Leaf::Link(target.as_os_str().as_bytes().to_vec()),
            EntryKind::File { size, executable } => {
                let path = root.join(std::ffi::OsStr::from_bytes(&e.rel));
                Leaf::File {
                    size,
                    executable,
                    blob: hash_file(&path, size)?,
                }
            }
        };
        out.insert(e.rel, leaf);
    }
    Ok(out)
}

/// The git blob id of the file at `path` of `size` bytes, opened without following a symlink.
fn hash_file(path: &Path, size: u64) -> CliResult<[u8; 20]> {
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| io_error("open", path, &e))?;
    let mut hasher = BlobHasher::new(size);
    let mut buf = vec![0; 1 << 16];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| io_error("read", path, &e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    hasher
        .finish()
        .map(|id| id.sha1)
        .map_err(|e| CliError::failure(format!("`{}` changed while read: {e}", path.display())))
}

/// How `ours` (the recipe's tree) differs from `theirs` (the pinned one), in path order.
fn compare(theirs: &BTreeMap<Vec<u8>, Leaf>, ours: &BTreeMap<Vec<u8>, Leaf>) -> Vec<Difference> {
    let mut out = Vec::new();
    let mut paths: Vec<&Vec<u8>> = theirs.keys().chain(ours.keys()).collect();
    paths.sort();
    paths.dedup();
    for path in paths {
        let diff = |change, pinned: Option<String>, made: Option<String>| Difference {
            path: shown(path),
            change,
            pinned,
            made,
            pinned_size: theirs.get(path).and_then(Leaf::size),
            made_size: ours.get(path).and_then(Leaf::size),
        };
        match (theirs.get(path), ours.get(path)) {
            (Some(t), None) => out.push(diff("missing", Some(t.describe()), None)),
            (None, Some(o)) => out.push(diff("extra", None, Some(o.describe()))),
            (Some(t), Some(o)) if t == o => {}
            (
                Some(Leaf::File {
                    size: ts,
                    executable: tx,
                    blob: tb,
                }),
                Some(Leaf::File {
                    size: os,
                    executable: ox,
                    blob: ob,
                }),
            ) => {
                if tb != ob {
                    out.push(diff(
                        "content_differs",
                        Some(format!("{ts} bytes")),
                        Some(format!("{os} bytes")),
                    ));
                }
                if tx != ox {
                    let mode = |x: &bool| if *x { "executable" } else { "not executable" };
                    out.push(diff(
                        "mode_differs",
                        Some(mode(tx).to_owned()),
                        Some(mode(ox).to_owned()),
                    ));
                }
            }
            (Some(Leaf::Link(t)), Some(Leaf::Link(o))) => out.push(diff(
                "link_target_differs",
                Some(format!("-> `{}`", shown(t))),
                Some(format!("-> `{}`", shown(o))),
            )),
            (Some(t), Some(o)) => {
                out.push(diff("kind_differs", Some(t.describe()), Some(o.describe())))
            }
            (None, None) => {}
        }
    }
    out
}

/// The new tree, for when it cannot be compared.
fn listing(ours: &BTreeMap<Vec<u8>, Leaf>) -> Vec<Listed> {
    ours.iter()
        .map(|(path, leaf)| match leaf {
            Leaf::File {
                size, executable, ..
            } => Listed {
                path: shown(path),
                kind: if *executable { "executable" } else { "file" },
                size: Some(*size),
                target: None,
            },
            Leaf::Link(t) => Listed {
                path: shown(path),
                kind: "symlink",
                size: None,
                target: Some(shown(t)),
            },
        })
        .collect()
}

/// One difference, for people: `content differs  data/a.csv (12 bytes pinned, 30 bytes made)`.
fn difference_line(d: &Difference) -> String {
    let change = d.change.replace('_', " ");
    let detail = match (&d.pinned, &d.made) {
        (Some(p), Some(m)) => format!("{p} pinned, {m} made"),
        (Some(p), None) => format!("pinned: {p}; the recipe did not make it"),
        (None, Some(m)) => format!("made: {m}; not in the pinned content"),
        (None, None) => String::new(),
    };
    format!("{change:<20} {} ({detail})", d.path)
}

/// The outcome of each artifact, for people.
fn print_results(results: &[Reproduced], manifest: &Path) {
    if !results.iter().any(|r| r.status != "no_recipe") {
        println!(
            "no artifact of `{}` has a `{RECIPE_KEY}` key: nothing to reproduce",
            manifest.display()
        );
        return;
    }
    for r in results {
        let recipe = r.recipe.as_deref().unwrap_or("");
        match r.status {
            "no_recipe" => println!("artifact `{}`: no recipe, skipped", r.name),
            "reproduced" => println!(
                "artifact `{}`: reproduced: the recipe `{recipe}` made git-tree-sha1 {}, as pinned",
                r.name, r.pinned
            ),
            "failed" => println!(
                "artifact `{}`: FAILED: {}",
                r.name,
                r.error.as_deref().unwrap_or("")
            ),
            _ => {
                println!(
                    "artifact `{}`: MISMATCH: the recipe `{recipe}` made git-tree-sha1 {}, the \
                     manifest pins {}",
                    r.name,
                    r.made.as_deref().unwrap_or("?"),
                    r.pinned
                );
                if let Some(p) = &r.compared_with {
                    println!("  compared with the pinned content at {}:", p.display());
                    for d in &r.differences {
                        println!("    {}", difference_line(d));
                    }
                    if r.differences.is_empty() {
                        println!("    no file differs (the pinned copy itself may have changed)");
                    }
                } else {
                    println!(
                        "  the pinned content could not be had to compare with ({}); the recipe \
                         made:",
                        r.pinned_unavailable.as_deref().unwrap_or("")
                    );
                    for f in &r.made_files {
                        match (&f.size, &f.target) {
                            (_, Some(t)) => println!("    {:<10} {} -> {t}", f.kind, f.path),
                            (Some(n), _) => println!("    {:<10} {} ({n} bytes)", f.kind, f.path),
                            _ => println!("    {:<10} {}", f.kind, f.path),
                        }
                    }
                }
            }
        }
    }
}

/// One line of the final error for a failed or mismatching artifact.
fn summary(r: &Reproduced) -> String {
    if r.status == "failed" {
        return format!("  {}: {}", r.name, r.error.as_deref().unwrap_or(""));
    }
    let named: Vec<String> = r
        .differences
        .iter()
        .take(5)
        .map(|d| format!("{} `{}`", d.change.replace('_', " "), d.path))
        .collect();
    let more = r.differences.len().saturating_sub(named.len());
    format!(
        "  {}: git-tree-sha1 {} pinned, {} made{}{}",
        r.name,
        r.pinned,
        r.made.as_deref().unwrap_or("?"),
        if named.is_empty() {
            String::new()
        } else {
            format!("; {}", named.join(", "))
        },
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clima_artifact_runtime::tree_hash::blob_id;

    fn file(text: &str, executable: bool) -> Leaf {
        Leaf::File {
            size: text.len() as u64,
            executable,
            blob: blob_id(text.as_bytes()),
        }
    }

    #[test]
    fn every_kind_of_difference_is_named() {
        let theirs = BTreeMap::from([
            (b"a".to_vec(), file("1", false)),
            (b"b".to_vec(), file("2", false)),
            (b"c".to_vec(), file("3", false)),
            (b"d".to_vec(), Leaf::Link(b"a".to_vec())),
            (b"e".to_vec(), file("5", false)),
            (b"same".to_vec(), file("s", true)),
        ]);
        let ours = BTreeMap::from([
            (b"b".to_vec(), file("22", false)),
            (b"c".to_vec(), file("3", true)),
            (b"d".to_vec(), Leaf::Link(b"b".to_vec())),
            (b"e".to_vec(), Leaf::Link(b"a".to_vec())),
            (b"f".to_vec(), file("6", false)),
            (b"same".to_vec(), file("s", true)),
        ]);
        let changes: Vec<(String, &str)> = compare(&theirs, &ours)
            .into_iter()
            .map(|d| (d.path, d.change))
            .collect();
        let expected = [
            ("a", "missing"),
            ("b", "content_differs"),
            ("c", "mode_differs"),
            ("d", "link_target_differs"),
            ("e", "kind_differs"),
            ("f", "extra"),
        ]
        .map(|(p, c)| (p.to_owned(), c));
        assert_eq!(changes, expected);
    }
}
