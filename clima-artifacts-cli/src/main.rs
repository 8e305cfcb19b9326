//! The `clima-artifacts` command-line tool: create, fetch, verify, override, list, gc, mirror,
//! publish and report on Julia-compatible artifacts.
//!
//! ```text
//! clima-artifacts create DIR --name N [--manifest PATH] [--url URL] [--external] [--guided]
//! clima-artifacts create --recipe artifacts/NAME [--manifest PATH] [--guided] [--url URL] [--timeout 30m]
//! clima-artifacts new NAME [--manifest PATH]
//! clima-artifacts reproduce [NAMES...|--all] [--manifest PATH] [--timeout 30m]
//! clima-artifacts hash DIR
//! clima-artifacts fetch [NAMES...|--all [--include-lazy]] [--manifest PATH]
//! clima-artifacts verify [NAMES...|--all] [--manifest PATH]
//! clima-artifacts list|status [--manifest PATH]
//! clima-artifacts override set NAME PATH [--verify] | unset NAME | list
//! clima-artifacts gc [--dry-run]
//! clima-artifacts mirror MANIFEST... --depot DIR [--jobs 8] [--override NAME=PATH] [--overrides-from FILE] [--id ID]
//! clima-artifacts doctor [--json]
//! clima-artifacts census PATH... [--depot DIR] [--json]
//! clima-artifacts report FILE.json [--format md|bibtex|json]
//! clima-artifacts publish TARBALL --to STORAGE_URL [--public-url URL] --manifest PATH --name N
//! clima-artifacts publish NAME --archive URL [--draft] [--first] [--creator "Family, Given"]... [--tarball PATH]
//! clima-artifacts sync push|pull RUN_DIR STORAGE_URL [--checkpoint DIR] [--no-artifacts] [--exclude GLOB]
//! clima-artifacts completions SHELL
//! ```
//!
//! Without `--manifest`, every command (`create` too) uses the `JuliaArtifacts.toml` or
//! `Artifacts.toml` of the current folder or of the nearest parent folder that has one, up to
//! the project root; `create` makes `Artifacts.toml` in the current folder when there is none.
//!
//! Exit codes (also shown by `--help`):
//! - `0`: success;
//! - `1`: the command ran and found or hit a problem: `verify` found changed content, a download
//!   failed, `override set --verify` found a different hash, `gc` could not remove a folder;
//! - `2`: bad usage or bad input: unknown flags or artifact names, a missing or malformed manifest,
//!   a path that does not exist (clap's own usage errors use 2 as well).
//!
//! `reproduce` exits 1 when a recipe fails, times out, or makes content other than the pinned one.
//!
//! Module map: [`args`] (syntax), [`cmd`] (one module per subcommand), [`progress`] (bars on a
//! terminal), [`error`] (the exit codes, and how an operation's error kind becomes one); the
//! work is `clima-artifact-ops`'s, whose modules are imported here by name: [`tarball`]
//! (deterministic `.tar.gz`), [`recipe`] (checking and running `artifacts/<name>/recipe`),
//! [`manifest_edit`] and [`overrides_edit`] (format-preserving TOML edits), [`depots`] (depot
//! queries), [`storage`] (publishing to storage), [`archive`] (publishing to an InvenioRDM
//! archive), [`census_walk`] (the census's walk).

use std::process::ExitCode;

use clap::Parser;

mod args;
mod cmd;
mod error;
mod progress;

use clima_artifact_ops::{
    archive, census_walk, depots, manifest_edit, overrides_edit, recipe, storage, tarball,
};

fn main() -> ExitCode {
    // Output piped into `head` and similar: stop quietly when the reader goes away, as other
    // command-line tools do, instead of panicking on the failed write.
    // SAFETY: resetting SIGPIPE to its default action before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = args::Cli::parse();
    // What the user sees, for this command: passed down, never set process-wide.
    let ui = progress::Ui::new(cli.verbose);
    match cmd::run(cli.command, &ui) {
        Ok(()) => ExitCode::from(error::EXIT_OK),
        Err(e) => {
            eprintln!("error: {}", e.message);
            e.exit_code()
        }
    }
}
