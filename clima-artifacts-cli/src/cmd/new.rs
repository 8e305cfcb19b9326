//! `new NAME`: scaffolds `artifacts/NAME/` next to the manifest: a `recipe` template that fails
//! until it is edited, and a README.md template with the sections `create --recipe` requires.
//! Existing files are never overwritten.

use std::path::{Path, PathBuf};

use clima_artifact_manifest::Manifest;
use clima_artifact_provenance::readme::SECTIONS;

use crate::args::NewArgs;
use crate::cmd;
use crate::error::{CliError, CliResult, io_error};
use crate::recipe::{self, README_FILE, RECIPE_FILE};

/// The recipe template: a shell script that says what to do and fails.
fn recipe_template(name: &str) -> String {
    format!(
        r#"#!/bin/sh
# Recipe of the artifact `{name}`: writes the artifact's files into the folder given as the
# first argument (also in $OUT). It runs with this folder as working directory, with the
# environment of whoever runs `clima-artifacts` (and ARTIFACT_NAME={name}), and with their
# rights. Any language will do: replace this file by any executable named `recipe`.
#
# Make the output reproducible: no timestamps, no random numbers, fixed file modes, pinned
# versions of the tools and data it downloads (keep lock files in this folder).
# Then: clima-artifacts create --recipe artifacts/{name} --manifest Artifacts.toml --url URL
#   and check it later with: clima-artifacts reproduce {name}
set -eu
out="$1"

echo "artifacts/{name}/recipe is still the template: edit it to write the data into \$OUT" >&2
exit 1
"#
    )
}

/// The README template: one heading per required section, each with a comment to replace.
fn readme_template(name: &str) -> String {
    let hints = [
        "Which files the artifact holds, their format, variables and units.",
        "Links to the original data (and its version or access date).",
        "Who made the original data and this artifact, and what to cite (reference, DOI).",
        "What the recipe does to the original data (cleaning, regridding, unit changes).",
    ];
    let mut text = format!(
        "# {name}\n\n<!-- Copied into the artifact's archive by `clima-artifacts create --recipe`. \
         Replace each comment below with text: a section with only a comment counts as missing. -->\n"
    );
    for (section, hint) in SECTIONS.iter().zip(hints) {
        text.push_str(&format!("\n## {}\n\n<!-- {hint} -->\n", section.name));
    }
    text
}

/// Entry point of `new`.
pub fn run(args: NewArgs) -> CliResult {
    cmd::check_name(&args.name)?;
    let base = match &args.manifest.manifest {
        Some(m) if m.is_dir() => m.clone(),
        Some(m) => recipe::manifest_dir(m)?,
        None => {
            let cwd = std::env::current_dir()
                .map_err(|e| io_error("find", Path::new("the current folder"), &e))?;
            match Manifest::find_upwards(&cwd) {
                Ok(found) => recipe::manifest_dir(&found)?,
                Err(_) => cwd,
            }
        }
    };
    let dir = base
        .join(clima_artifact_runtime::manifest::layout::PROJECT_RECIPES)
        .join(&args.name);
    let files = [
        (dir.join(RECIPE_FILE), recipe_template(&args.name), 0o755),
        (dir.join(README_FILE), readme_template(&args.name), 0o644),
    ];
    let existing: Vec<String> = files
        .iter()
        .filter(|(p, _, _)| std::fs::symlink_metadata(p).is_ok())
        .map(|(p, _, _)| format!("`{}`", p.display()))
        .collect();
    if !existing.is_empty() {
        return Err(CliError::usage(format!(
            "{} already exist(s); `new` never overwrites files: edit them, or remove them to \
             start from the templates again",
            existing.join(", ")
        )));
    }
    std::fs::create_dir_all(&dir).map_err(|e| io_error("create folder", &dir, &e))?;
    for (path, text, mode) in &files {
        recipe::write_new(path, text, *mode)?;
    }
    let written: Vec<PathBuf> = files.into_iter().map(|(p, _, _)| p).collect();
    if args.json {
        return cmd::print_json(&serde_json::json!({
            "name": args.name,
            "folder": dir,
            "files": written,
        }));
    }
    println!("artifact `{}`: recipe folder {}", args.name, dir.display());
    for p in &written {
        println!("  wrote {}", p.display());
    }
    println!(
        "\nnext: make `{RECIPE_FILE}` write the data into its output folder, fill in every \
         section of {README_FILE}, then run `clima-artifacts create --recipe {} --manifest \
         <Artifacts.toml> --url URL`",
        dir.display()
    );
    Ok(())
}
