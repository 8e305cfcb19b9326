//! `fetch NAME --only PATH...`: only some files of one artifact, from its seekable tarball by
//! byte ranges (`clima_artifact_runtime::ensure_files`), into the depot's partial folder; the
//! paths inside the artifact when it is installed whole.

use std::path::PathBuf;

use clima_artifact_manifest::Manifest;
use clima_artifact_runtime::ensure_files;

use crate::args::FetchArgs;
use crate::cmd;
use crate::depots;
use crate::error::{CliError, CliResult};

/// The outcome, as printed with `--json`.
#[derive(Debug, serde::Serialize)]
struct FetchedFiles {
    name: String,
    git_tree_sha1: String,
    /// `whole` when the paths are inside the installed (or overridden) artifact, `partial`
    /// when they are in the depot's partial folder.
    held_as: &'static str,
    /// The full path of each path asked for, in order.
    paths: Vec<PathBuf>,
    /// Files fetched by this call.
    fetched: usize,
    /// Files asked for that were there already.
    already_held: usize,
    /// Bytes received from the server.
    received_bytes: u64,
    url: Option<String>,
    seconds: f64,
}

/// Entry point of `fetch --only`, with `fetch`'s runtime configuration.
pub fn run(
    args: &FetchArgs,
    manifest: &Manifest,
    config: clima_artifact_runtime::Config,
) -> CliResult {
    let [name] = args.names.as_slice() else {
        return Err(CliError::usage(
            "--only takes the paths of one artifact: name exactly one artifact",
        ));
    };
    cmd::check_names(manifest, std::slice::from_ref(name))?;
    let variant = cmd::select_for(manifest, name, args.platform.platform.as_ref())?.clone();
    let paths: Vec<&str> = args.only.iter().map(String::as_str).collect();
    for p in &paths {
        clima_artifact_manifest::split_name_and_subpath(&format!("{name}/{p}"))
            .map_err(|e| CliError::usage(e.to_string()))?;
    }
    let files = ensure_files(name, &variant, &manifest.path, &config, &paths)
        .map_err(|e| CliError::failure(format!("{name}: {e}")))?;
    depots::record_usage(&config, &manifest.path);
    let out = FetchedFiles {
        name: name.clone(),
        git_tree_sha1: variant.git_tree_sha1.to_hex(),
        held_as: if files.whole.is_some() {
            "whole"
        } else {
            "partial"
        },
        paths: files.paths.clone(),
        fetched: files.fetched,
        already_held: files.held,
        received_bytes: files.received,
        url: files.url.clone(),
        seconds: files.seconds,
    };
    if args.json {
        return cmd::print_json(&out);
    }
    for (asked, path) in args.only.iter().zip(&out.paths) {
        println!(
            "{:<32} {}",
            clima_artifact_fs::printable(asked),
            path.display()
        );
    }
    if out.held_as == "whole" {
        println!("{name}: installed whole; the paths are inside it");
    } else {
        let from = match &out.url {
            Some(url) if out.fetched > 0 => format!(
                " ({} from {} in {:.1} s)",
                depots::human_bytes(out.received_bytes),
                clima_artifact_fs::printable(url),
                out.seconds
            ),
            _ => String::new(),
        };
        println!(
            "{name}: {} file(s) fetched{from}, {} already there; the rest of the artifact is \
             not installed (`clima-artifacts fetch {}` installs it whole)",
            out.fetched,
            out.already_held,
            clima_artifact_fs::shell_word(name)
        );
    }
    Ok(())
}
