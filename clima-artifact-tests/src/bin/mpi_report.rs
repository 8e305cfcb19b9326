//! MPI test program: every rank resolves artifacts of `tests/Artifacts.toml` with
//! `clima_artifact!(.., &world)`, some ranks more often than others, then the provenance records
//! of all ranks are gathered and rank 0 writes the report once.
//!
//! Usage: `mpirun -n N mpi_report <report dir>`; the depot (with an `Overrides.toml` entry for
//! `local-only`) comes from `CLIMA_ARTIFACTS_DEPOT_PATH`. Accesses per rank `r`:
//!
//! | artifact | call | accesses on rank `r` |
//! |---|---|---|
//! | `profile` | literal name | `r + 1` |
//! | `local-only` (override) | run-time name | `1 + r % 2` |
//! | `forcing-table` | literal `forcing-table/forcing.csv` | 1 |
//!
//! Only the first call per artifact is collective (one round for every rank); the others are
//! answered from memory (see the macro docs), which is why the counts may differ by rank. Prints
//! `RESULT` lines like `mpi_fetch`, then `REPORT rank=<r> wrote=<json path>` on the rank that
//! wrote the report and `REPORT rank=<r> wrote=none` on the others.

use std::path::PathBuf;
use std::process::ExitCode;

use clima_artifact_runtime::{Context, Error, MpiContext, clima_artifact, report};
use clima_artifact_tests::print_result;

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: mpi_report <report dir>");
        return ExitCode::from(2);
    };
    let universe = clima_artifact_runtime::mpi::initialize().expect("MPI already initialised");
    let world = MpiContext::world();
    let (rank, size) = (world.rank(), world.size());
    let mut failed = false;
    let mut show = |name: &str, result: Result<PathBuf, Error>| {
        failed |= !print_result(rank, size, name, result.as_deref());
    };

    for _ in 0..=rank {
        show("profile", clima_artifact!("profile", &world));
    }
    let local = String::from("local-only");
    for _ in 0..1 + rank % 2 {
        show("local-only", clima_artifact!(local.as_str(), &world));
    }
    show(
        "forcing-table",
        clima_artifact!("forcing-table/forcing.csv", &world),
    );

    match report::write_all_collective(
        &world,
        &dir,
        &clima_artifact_runtime::progress::Reporting::default(),
    ) {
        Ok(Some(paths)) => println!("REPORT rank={rank} wrote={}", paths.json.display()),
        Ok(None) => println!("REPORT rank={rank} wrote=none"),
        Err(e) => {
            failed = true;
            println!("REPORT rank={rank} err={e}");
        }
    }
    drop(world);
    drop(universe);
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
