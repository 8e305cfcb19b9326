//! One module per subcommand, plus helpers they share (manifest lookup, name validation,
//! JSON printing).

use std::path::Path;

use clima_artifact_fs::printable;
use clima_artifact_manifest::{ArtifactVariant, GitTreeSha1, Manifest, Platform};
use clima_artifact_runtime::tree_hash::{Formats, TreeHashes};

use crate::args::{Command, OverrideCommand};
use crate::error::{CliError, CliResult, io_error};
use crate::progress::Ui;

pub mod annotate;
pub mod census;
pub mod create;
pub mod doctor;
pub mod fetch;
pub mod fetch_only;
pub mod gc;
pub mod guided;
pub mod hash;
pub mod list;
pub mod mirror;
pub mod new;
pub mod overrides;
pub mod plan;
pub mod publish;
pub mod report;
pub mod reproduce;
pub mod sync;
pub mod verify;

/// Runs one subcommand, reporting through `ui`.
pub fn run(command: Command, ui: &Ui) -> CliResult {
    match command {
        Command::Create(a) => create::run(*a),
        Command::New(a) => new::run(a),
        Command::Reproduce(a) => reproduce::run(a, ui),
        Command::Hash(a) => hash::run(a),
        Command::Fetch(a) => fetch::run(a, ui),
        Command::Verify(a) => verify::run(a, ui),
        Command::List(a) => list::run(a, ui),
        Command::Override(OverrideCommand::Set(a)) => overrides::set(a, ui),
        Command::Override(OverrideCommand::Unset(a)) => overrides::unset(a, ui),
        Command::Override(OverrideCommand::List(a)) => overrides::list(a, ui),
        Command::Gc(a) => gc::run(a, ui),
        Command::Report(a) => report::run(a),
        Command::Publish(a) => publish::run(a, ui),
        Command::Sync(c) => sync::run(c, ui),
        Command::Doctor(a) => doctor::run(a, ui),
        Command::Annotate(a) => annotate::run(a),
        Command::Census(a) => census::run(a),
        Command::Mirror(a) => mirror::run(a, ui),
        Command::Completions(a) => {
            use clap::CommandFactory;
            clap_complete::generate(
                a.shell,
                &mut crate::args::Cli::command(),
                "clima-artifacts",
                &mut std::io::stdout(),
            );
            Ok(())
        }
    }
}

/// The manifest at `path` (a file, or a folder to search), else the one found from the current
/// folder upwards ([`Manifest::find_upwards`]).
pub fn load_manifest(path: Option<&Path>) -> CliResult<Manifest> {
    let file = match path {
        Some(p) if p.is_dir() => Manifest::find_in_dir(p)?,
        Some(p) => {
            if !p.exists() {
                return Err(CliError::usage(format!(
                    "manifest `{}` does not exist; pass the path of an Artifacts.toml with --manifest",
                    p.display()
                )));
            }
            p.to_path_buf()
        }
        None => {
            let cwd = std::env::current_dir()
                .map_err(|e| io_error("find", Path::new("the current folder"), &e))?;
            // As Julia's find_artifacts_toml: this folder, then its parents up to the project
            // root.
            Manifest::find_upwards(&cwd).map_err(|e| {
                CliError::usage(format!("{e}; pass --manifest PATH to use another manifest"))
            })?
        }
    };
    // As Julia: a broken entry fails when it is used; the rest of the manifest stays usable.
    Ok(Manifest::load_lenient(&file)?)
}

/// The host's variant of `name`; errors list the defined names or offered platforms.
pub fn select<'m>(manifest: &'m Manifest, name: &str) -> CliResult<&'m ArtifactVariant> {
    Ok(manifest.select(name, host_platform())?)
}

/// This machine's platform ([`Platform::host`]), worked out once per process: it reads the
/// environment and allocates, and `list`, `fetch --all` and `verify --all` select a variant
/// per artifact.
fn host_platform() -> &'static Platform {
    static HOST: std::sync::OnceLock<Platform> = std::sync::OnceLock::new();
    HOST.get_or_init(Platform::host)
}

/// The variant of `name` for `platform` (`None`: this machine).
pub fn select_for<'m>(
    manifest: &'m Manifest,
    name: &str,
    platform: Option<&Platform>,
) -> CliResult<&'m ArtifactVariant> {
    match platform {
        Some(p) => Ok(manifest.select(name, p)?),
        None => select(manifest, name),
    }
}

/// Checks names given on the command line against the manifest, all at once, so one message lists
/// every unknown name.
pub fn check_names(manifest: &Manifest, names: &[String]) -> CliResult {
    let unknown: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| manifest.get(n).is_none() && manifest.broken_entry(n).is_none())
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let defined: Vec<&str> = manifest.names().collect();
    // The same suggestion as the compile-time check of `clima_artifact!`.
    let hint = |n: &str| match clima_artifact_manifest::suggest_name(n, defined.iter().copied()) {
        Some(s) => format!("`{n}` (did you mean `{s}`?)"),
        None => format!("`{n}`"),
    };
    Err(CliError::usage(format!(
        "{} not defined in `{}`; defined: {}",
        unknown
            .iter()
            .map(|n| hint(n))
            .collect::<Vec<_>>()
            .join(", "),
        manifest.path.display(),
        if defined.is_empty() {
            "none".to_string()
        } else {
            defined.join(", ")
        }
    )))
}

pub use clima_artifact_ops::manifest_edit::invalid_name;

/// Refuses a name that cannot be an artifact name ([`invalid_name`]), as bad usage.
pub fn check_name(name: &str) -> CliResult {
    match invalid_name(name) {
        Some(why) => Err(CliError::usage(format!(
            "invalid artifact name `{name}`: {why}"
        ))),
        None => Ok(()),
    }
}

pub use crate::error::existing_dir;

/// Hashes a folder with a spinner on a terminal.
pub fn hash_dir(dir: &Path) -> CliResult<GitTreeSha1> {
    hash_dir_in(dir, Formats::Sha1).map(|hashes| hashes.sha1)
}

/// [`hash_dir`] in `formats` (SHA-1, or SHA-1 and SHA-256 from one read of every file).
pub fn hash_dir_in(dir: &Path, formats: Formats) -> CliResult<TreeHashes> {
    let bar = crate::progress::spinner(&format!("hashing {}", dir.display()));
    let result = clima_artifact_runtime::tree_hash::tree_hashes(dir, formats);
    bar.finish_and_clear();
    result.map_err(|e| io_error("hash", dir, &e))
}

/// Names listed under a cause that several artifacts share, before `and N more`.
const NAMES_PER_CAUSE: usize = 8;

/// The failures of a batch (`(names, cause)` per artifact), one line per cause: `  NAME:
/// CAUSE` for a cause one artifact has, `  N failed: CAUSE: NAME, NAME, ... and M more` for one
/// that several share (68 downloads refused by one proxy are one line); in the order first
/// met, escaped.
pub fn grouped_failures(failures: &[(String, String)]) -> Vec<String> {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for (names, cause) in failures {
        match groups.iter_mut().find(|(c, _)| c == cause) {
            Some((_, all)) => all.push(names),
            None => groups.push((cause, vec![names])),
        }
    }
    groups
        .into_iter()
        .map(|(cause, names)| {
            let cause = printable(cause);
            if let [one] = names.as_slice() {
                return format!("  {}: {cause}", printable(one));
            }
            let shown = names.len().min(NAMES_PER_CAUSE);
            let more = match names.len() - shown {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            format!(
                "  {} failed: {cause}: {}{more}",
                names.len(),
                printable(&names[..shown].join(", "))
            )
        })
        .collect()
}

/// Prints a value as pretty JSON on stdout.
pub fn print_json<T: serde::Serialize>(value: &T) -> CliResult {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| CliError::failure(format!("cannot encode JSON output: {e}")))?;
    println!("{text}");
    Ok(())
}

/// Writes `text` to `path` atomically, creating its folder first (ops' `write_text`).
pub fn write_atomically(path: &Path, text: &str) -> CliResult {
    Ok(clima_artifact_ops::error::write_text(path, text)?)
}

/// Reads a text file; a missing file reads as empty (ops' `read_or_empty`).
pub fn read_or_empty(path: &Path) -> CliResult<String> {
    Ok(clima_artifact_ops::error::read_or_empty(path)?)
}
