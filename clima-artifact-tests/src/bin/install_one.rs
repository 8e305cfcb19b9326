//! Installs one artifact and prints its path on stdout (used by multi-process tests).
//!
//! ```text
//! install_one manifest <Artifacts.toml> <name[/sub/path]>
//! install_one variant <name> <git-tree-sha1> <sha256> <url>...
//! ```
//!
//! Configuration comes from the `CLIMA_ARTIFACTS_*` environment variables. With
//! `INSTALL_ONE_REPORT=<dir>`, the run's provenance report is written there after an install
//! through the manifest. On failure the error is printed on stderr and the exit code is 1 (2
//! for bad usage).

use std::process::ExitCode;

use clima_artifact_manifest::{GitTreeSha1, Sha256};
use clima_artifact_runtime::{Artifacts, Config, Error, ensure_variant};

type Failure = Box<dyn std::error::Error>;

fn run(args: &[String]) -> Result<String, Failure> {
    match args {
        [mode, manifest, spec] if mode == "manifest" => {
            let a = Artifacts::load(manifest)?;
            let path = a.ensure_installed(spec)?.display().to_string();
            if let Some(dir) = std::env::var_os("INSTALL_ONE_REPORT") {
                clima_artifact_runtime::report::write_all(dir)?;
            }
            Ok(path)
        }
        [mode, name, hash, sha, urls @ ..] if mode == "variant" && !urls.is_empty() => {
            let bad = |what: &str, e: String| -> Failure { format!("bad {what}: {e}").into() };
            let hash = GitTreeSha1::from_hex(hash).map_err(|e| bad("hash", e.to_string()))?;
            let sha = Sha256::from_hex(sha).map_err(|e| bad("sha256", e.to_string()))?;
            let variant = clima_artifact_tests::variant(hash, urls, sha);
            let config = Config::from_env()?;
            let cwd = std::env::current_dir().map_err(|e| Error::io("read", ".", e))?;
            let installed = ensure_variant(name, &variant, &cwd, &config)?;
            Ok(installed.path.display().to_string())
        }
        _ => Err("usage: install_one manifest <Artifacts.toml> <spec> | install_one variant <name> <hash> <sha256> <url>...".into()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(path) => {
            println!("{path}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
