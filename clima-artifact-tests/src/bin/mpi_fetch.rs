//! MPI test program: every rank resolves artifacts collectively and prints one line per artifact:
//!
//! ```text
//! RESULT rank=<r> size=<n> name=<name> ok path=<path>
//! RESULT rank=<r> size=<n> name=<name> err=<message on one line>
//! ```
//!
//! Usage: `mpirun -n N mpi_fetch <Artifacts.toml> <name>... [--other-on-rank R NAME]
//! [--report DIR] [--only PATH]` (`--report`: rank 0 writes the provenance report of all ranks
//! into DIR; `--only`: each artifact's file PATH alone, by `ensure_files_collective`, as
//! `clima_artifact!("<name>/PATH", &ctx)` does for a seekable artifact, and the path printed is
//! that file's).
//! Configuration comes from the `CLIMA_ARTIFACTS_*` environment (depots,
//! `CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT`, and `CLIMA_ARTIFACTS_NODE_ID` to group ranks into
//! "nodes" on one machine: `mpirun -n 2 env CLIMA_ARTIFACTS_NODE_ID=a mpi_fetch ... : -n 2 env
//! CLIMA_ARTIFACTS_NODE_ID=b mpi_fetch ...`). `--other-on-rank` makes rank R ask for NAME
//! instead of the first name (the misuse the collective check must catch). Before and after the
//! collective calls it looks up the paths `/MPI_FETCH_BEGIN_<rank>` and `/MPI_FETCH_END_<rank>`
//! (markers to find in an `strace -e trace=%file` log). Exits 1 if any artifact failed
//! on this rank.
//!
//! For the scale tests and `scripts/bench-scale.sh`, every rank also prints what its
//! collective steps cost (the `clima_comms::traffic` counts of the step, and its wall time), and
//! rank 0 its peak resident memory at the end:
//!
//! ```text
//! STEP rank=<r> step=install|report seconds=<s> sent_messages=.. sent_bytes=.. received_messages=.. received_bytes=..
//! PEAK rank=0 vmhwm_kb=<k>
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clima_artifact_runtime::manifest::{Manifest, Platform};
use clima_artifact_runtime::{Config, Context, MpiContext};
use clima_artifact_runtime::{ensure_collective, ensure_files_collective};
use clima_artifact_tests::print_result;

struct Args {
    manifest: PathBuf,
    names: Vec<String>,
    other_on_rank: Option<(usize, String)>,
    report: Option<PathBuf>,
    only: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let manifest = it
        .next()
        .ok_or("usage: mpi_fetch <Artifacts.toml> <name>...")?;
    let mut args = Args {
        manifest: manifest.into(),
        names: vec![],
        other_on_rank: None,
        report: None,
        only: None,
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--other-on-rank" => {
                let rank = it.next().and_then(|r| r.parse().ok()).ok_or("rank?")?;
                let name = it.next().ok_or("name?")?;
                args.other_on_rank = Some((rank, name));
            }
            "--report" => args.report = Some(it.next().ok_or("report dir?")?.into()),
            "--only" => args.only = Some(it.next().ok_or("path?")?),
            _ => args.names.push(a),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("mpi_fetch: {e}");
            return ExitCode::from(2);
        }
    };
    let universe = clima_artifact_runtime::mpi::initialize().expect("MPI already initialised");
    let ctx: Box<dyn Context> = Box::new(MpiContext::world());
    let (rank, size) = (ctx.rank(), ctx.size());

    let manifest = Manifest::load(&args.manifest);
    let config = Config::from_env();
    let mut failed = false;
    let step = Step::start();
    marker(&format!("MPI_FETCH_BEGIN_{rank}"));
    for (i, name) in args.names.iter().enumerate() {
        let name = match &args.other_on_rank {
            Some((r, other)) if *r == rank && i == 0 => other,
            _ => name,
        };
        let result = match (&manifest, &config) {
            (Ok(manifest), Ok(config)) => manifest
                .select(name, &Platform::host())
                .map_err(clima_artifact_runtime::Error::from)
                .and_then(|variant| match &args.only {
                    None => ensure_collective(ctx.as_ref(), name, variant, manifest.dir(), config)
                        .map(|installed| installed.path),
                    Some(sub) => ensure_files_collective(
                        ctx.as_ref(),
                        name,
                        variant,
                        manifest.dir(),
                        config,
                        &[sub.as_str()],
                    )
                    .map(|files| files.paths.into_iter().next().unwrap_or_default()),
                }),
            (Err(e), _) => Err(e.clone().into()),
            (_, Err(e)) => Err(e.clone()),
        };
        let path = result.as_ref().map(|path| path.as_path());
        failed |= !print_result(rank, size, name, path);
    }
    marker(&format!("MPI_FETCH_END_{rank}"));
    if !args.names.is_empty() {
        step.print(rank, "install");
    }
    if let Some(dir) = &args.report {
        let step = Step::start();
        let written = clima_artifact_runtime::report::write_all_collective(
            ctx.as_ref(),
            dir,
            &clima_artifact_runtime::progress::Reporting::default(),
        );
        step.print(rank, "report");
        match written {
            Ok(Some(paths)) => println!("REPORT rank={rank} wrote={}", paths.json.display()),
            Ok(None) => println!("REPORT rank={rank} wrote=none"),
            Err(e) => {
                failed = true;
                println!("REPORT rank={rank} err={e}");
            }
        }
    }
    if rank == 0 {
        println!("PEAK rank=0 vmhwm_kb={}", peak_kb().unwrap_or(0));
    }
    drop(ctx);
    drop(universe);
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// A system call on a path named `what`, to find in an `strace` log.
fn marker(what: &str) {
    let _ = std::path::Path::new(&format!("/{what}")).try_exists();
}

/// The traffic counts and the clock at the start of a collective step.
struct Step {
    traffic: clima_comms::Traffic,
    start: std::time::Instant,
}

impl Step {
    fn start() -> Step {
        Step {
            traffic: clima_comms::traffic::process(),
            start: std::time::Instant::now(),
        }
    }

    fn print(&self, rank: usize, step: &str) {
        let traffic = clima_comms::traffic::process().since(&self.traffic);
        println!(
            "STEP rank={rank} step={step} seconds={:.6} {traffic}",
            self.start.elapsed().as_secs_f64()
        );
    }
}

/// This process's peak resident set (`VmHWM` of `/proc/self/status`), in kB.
fn peak_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
