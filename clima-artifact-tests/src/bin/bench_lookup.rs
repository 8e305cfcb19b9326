//! Lookup latency of an installed artifact, for `scripts/bench.sh`.
//!
//! ```text
//! bench_lookup [repeats]      # default 1000000
//! ```
//!
//! Resolves the `profile` artifact of this package's `Artifacts.toml` (the quickstart's
//! standard atmosphere, downloaded from a relative path) through `clima_artifact!`:
//!
//! - `first_ns`: the first call in this process (configuration from the environment, overrides,
//!   a `stat` of the depot entry, the provenance record), timed alone;
//! - `repeat_ns`: the mean of `repeats` further calls at the same call site (answered from the
//!   per-call-site cache, recorded in the provenance registry);
//! - `api_first_ns`, `api_repeat_ns`: the same through `Artifacts::ensure_installed` on an
//!   already loaded manifest (no per-call-site cache: every call looks in the depots again).
//!
//! Prints one `key=value` line. Run it once to install the artifact, then again with
//! `CLIMA_ARTIFACTS_OFFLINE=1` to measure (an offline run fails if nothing is installed).

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use clima_artifact_runtime::{Artifacts, Error, clima_artifact};

/// The call site measured: one literal `clima_artifact!` call, so the cache is per site.
fn lookup() -> Result<std::path::PathBuf, Error> {
    clima_artifact!("profile")
}

fn run(repeats: u32) -> Result<String, Box<dyn std::error::Error>> {
    let start = Instant::now();
    let first = lookup()?;
    let first_ns = start.elapsed().as_nanos();

    let start = Instant::now();
    for _ in 0..repeats {
        black_box(lookup()?);
    }
    let repeat_ns = start.elapsed().as_nanos() as f64 / f64::from(repeats.max(1));

    let artifacts = Artifacts::from_dir(env!("CARGO_MANIFEST_DIR"))?;
    let start = Instant::now();
    let api_first = artifacts.ensure_installed("profile")?;
    let api_first_ns = start.elapsed().as_nanos();
    let api_repeats = (repeats / 100).max(1);
    let start = Instant::now();
    for _ in 0..api_repeats {
        black_box(artifacts.ensure_installed("profile")?);
    }
    let api_repeat_ns = start.elapsed().as_nanos() as f64 / f64::from(api_repeats);
    if api_first != first {
        return Err(format!(
            "the macro and the API disagree: `{}` vs `{}`",
            first.display(),
            api_first.display()
        )
        .into());
    }
    Ok(format!(
        "first_ns={first_ns} repeat_ns={repeat_ns:.1} api_first_ns={api_first_ns} \
         api_repeat_ns={api_repeat_ns:.1} path={}",
        first.display()
    ))
}

fn main() -> ExitCode {
    let repeats = match std::env::args().nth(1).map(|s| s.parse::<u32>()) {
        None => 1_000_000,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("usage: bench_lookup [repeats]: {e}");
            return ExitCode::from(2);
        }
    };
    match run(repeats) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
