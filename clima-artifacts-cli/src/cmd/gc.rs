//! `gc`: removes installed artifacts that no live manifest references.
//!
//! Kept: every hash of every variant (all platforms) of every manifest recorded in any depot's
//! `logs/artifact_usage.toml` that still exists, plus those of `--manifest` files; hashes that
//! overrides point to; and anything at or around an override's target path. Manifests that no
//! longer exist stop counting. A folder is first renamed out of the way and then deleted, so no
//! process ever sees a half-removed artifact under its final name.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use clima_artifact_manifest::{ArtifactEntry, GitTreeSha1, Manifest, OverrideTarget};

use crate::args::GcArgs;
use crate::cmd;
use crate::depots;
use crate::error::{CliError, CliResult};

/// A manifest considered, as printed with `--json`.
#[derive(Debug, serde::Serialize)]
struct ManifestUse {
    path: PathBuf,
    /// `live`, `missing` (no longer counts) or `given` (from --manifest).
    status: &'static str,
}

/// An installed artifact that no live manifest references.
#[derive(Debug, serde::Serialize)]
struct Unreferenced {
    git_tree_sha1: String,
    path: PathBuf,
    bytes: u64,
    removed: bool,
    error: Option<String>,
}

#[derive(Debug, serde::Serialize)]
struct GcReport {
    dry_run: bool,
    manifests: Vec<ManifestUse>,
    kept: usize,
    /// Folders left by killed gc runs (their process is gone), removed now.
    reclaimed: usize,
    unreferenced: Vec<Unreferenced>,
}

fn hashes_of(manifest: &Manifest, into: &mut BTreeSet<GitTreeSha1>) {
    for (_, entry) in &manifest.artifacts {
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
const GC_MARK: &str = ".gc-";

/// Entry point of `gc`.
pub fn run(args: GcArgs) -> CliResult {
    let config = depots::config()?;
    let mut manifests = Vec::new();
    let mut referenced = BTreeSet::new();
    let mut recorded = BTreeSet::new();
    for depot in depots::search_depots(&config) {
        recorded.extend(depots::recorded_manifests(&depot)?);
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
            CliError::failure(format!(
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
    for path in &args.manifest {
        let m = cmd::load_manifest(Some(path))?;
        hashes_of(&m, &mut referenced);
        manifests.push(ManifestUse {
            path: m.path.clone(),
            status: "given",
        });
    }

    let mut protected_paths = Vec::new();
    for file in depots::overrides_files(&config)? {
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

    let mut installed = 0usize;
    let mut reclaimed = 0usize;
    let mut unreferenced = Vec::new();
    for depot in &config.depots {
        let dir = depots::artifacts_dir(depot);
        if !args.dry_run {
            for stale in clima_artifact_fs::stale_temps(&dir, GC_MARK) {
                if clima_artifact_fs::remove_tree(&stale).is_ok() {
                    reclaimed += 1;
                }
            }
        }
        let Ok(rd) = fs::read_dir(&dir) else { continue };
        let mut entries: Vec<_> = rd.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
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
            let touches_override = protected_paths
                .iter()
                .any(|p| p.starts_with(&real) || real.starts_with(p));
            if referenced.contains(&hash) || touches_override {
                continue;
            }
            unreferenced.push(Unreferenced {
                git_tree_sha1: hash.to_hex(),
                bytes: depots::size_on_disk(&path),
                path,
                removed: false,
                error: None,
            });
        }
    }
    let live = manifests.iter().filter(|m| m.status != "missing").count();
    if live == 0 && !unreferenced.is_empty() && !args.force {
        return Err(CliError::usage(format!(
            "no manifest that still exists is recorded in {} and none was given, so gc would \
             remove all {} installed artifact(s); pass --manifest PATH for the manifests you use, \
             or --force to remove them all",
            config
                .depots
                .iter()
                .map(|d| format!("`{}`", d.join("logs").join("artifact_usage.toml").display()))
                .collect::<Vec<_>>()
                .join(", "),
            unreferenced.len()
        )));
    }

    if !args.dry_run {
        for u in &mut unreferenced {
            let parent = u.path.parent().unwrap_or(Path::new("."));
            let doomed = parent.join(clima_artifact_fs::temp_name(&u.git_tree_sha1, GC_MARK));
            let result =
                fs::rename(&u.path, &doomed).and_then(|()| clima_artifact_fs::remove_tree(&doomed));
            match result {
                Ok(()) => u.removed = true,
                Err(e) => u.error = Some(e.to_string()),
            }
        }
    }

    let report = GcReport {
        dry_run: args.dry_run,
        kept: installed - unreferenced.len(),
        reclaimed,
        manifests,
        unreferenced,
    };
    if args.json {
        cmd::print_json(&report)?;
    } else {
        for m in &report.manifests {
            if m.status == "missing" {
                println!(
                    "manifest {} no longer exists; it stops counting",
                    m.path.display()
                );
            }
        }
        let verb = if args.dry_run {
            "would remove"
        } else {
            "removed"
        };
        let mut total = 0;
        for u in &report.unreferenced {
            if u.error.is_none() {
                total += u.bytes;
                println!(
                    "{verb} {} ({})",
                    u.path.display(),
                    depots::human_bytes(u.bytes)
                );
            }
        }
        println!(
            "{verb} {} artifact(s), {}; kept {}",
            report
                .unreferenced
                .iter()
                .filter(|u| u.error.is_none())
                .count(),
            depots::human_bytes(total),
            report.kept
        );
    }
    let failed: Vec<String> = report
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
        Err(CliError::failure(format!(
            "could not remove {} folder(s) (check permissions):\n{}",
            failed.len(),
            failed.join("\n")
        )))
    }
}
