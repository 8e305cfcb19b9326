//! MPI test program: every rank resolves artifacts collectively and prints one line per artifact:
//!
//! ```text
//! RESULT rank=<r> size=<n> name=<name> ok path=<path>
//! RESULT rank=<r> size=<n> name=<name> err=<message on one line>
//! ```
//!
//! Usage: `mpirun -n N mpi_fetch <Artifacts.toml> <name>... [--other-on-rank R NAME]
//! [--fake-node K]`. Configuration comes from the `CLIMA_ARTIFACTS_*` environment (depots,
//! `CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT`). `--other-on-rank` makes rank R ask for NAME instead of
//! the first name (the misuse the collective check must catch). `--fake-node K` declares this
//! process part of fake node K: the node split groups ranks by K instead of by machine (launch
//! with `mpirun -n 2 mpi_fetch ... --fake-node 0 : -n 2 mpi_fetch ... --fake-node 1`).
//! Exits 1 if any artifact failed on this rank.

use std::path::PathBuf;
use std::process::ExitCode;

use clima_artifact_runtime::ensure_collective;
use clima_artifact_runtime::manifest::{Manifest, Platform};
use clima_artifact_runtime::{Config, Context, MpiContext};
use clima_artifact_tests::print_result;

/// A context whose "nodes" are chosen by the launcher, to test node-local mode on one machine.
struct FakeNodes {
    world: MpiContext,
    node: u32,
}

impl Context for FakeNodes {
    fn rank(&self) -> usize {
        self.world.rank()
    }
    fn size(&self) -> usize {
        self.world.size()
    }
    fn barrier(&self) {
        self.world.barrier()
    }
    fn broadcast_from_root(&self, data: Option<Vec<u8>>) -> Vec<u8> {
        self.world.broadcast_from_root(data)
    }
    fn gather_to_root(&self, data: Vec<u8>) -> Option<Vec<Vec<u8>>> {
        self.world.gather_to_root(data)
    }
    fn split_by_node(&self) -> Box<dyn Context> {
        Box::new(
            self.world
                .split_by_color(Some(self.node))
                .expect("every rank has a fake node"),
        )
    }
    fn describe(&self) -> String {
        format!("{} with fake nodes", self.world.describe())
    }
}

struct Args {
    manifest: PathBuf,
    names: Vec<String>,
    other_on_rank: Option<(usize, String)>,
    fake_node: Option<u32>,
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
        fake_node: None,
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--other-on-rank" => {
                let rank = it.next().and_then(|r| r.parse().ok()).ok_or("rank?")?;
                let name = it.next().ok_or("name?")?;
                args.other_on_rank = Some((rank, name));
            }
            "--fake-node" => {
                args.fake_node = Some(it.next().and_then(|k| k.parse().ok()).ok_or("node?")?);
            }
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
    let world = MpiContext::world();
    let ctx: Box<dyn Context> = match args.fake_node {
        Some(node) => Box::new(FakeNodes { world, node }),
        None => Box::new(world),
    };
    let (rank, size) = (ctx.rank(), ctx.size());

    let manifest = Manifest::load(&args.manifest);
    let config = Config::from_env();
    let mut failed = false;
    for (i, name) in args.names.iter().enumerate() {
        let name = match &args.other_on_rank {
            Some((r, other)) if *r == rank && i == 0 => other,
            _ => name,
        };
        let result = match (&manifest, &config) {
            (Ok(manifest), Ok(config)) => manifest
                .select(name, &Platform::host())
                .map_err(clima_artifact_runtime::Error::from)
                .and_then(|variant| {
                    ensure_collective(ctx.as_ref(), name, variant, manifest.dir(), config)
                }),
            (Err(e), _) => Err(e.clone().into()),
            (_, Err(e)) => Err(e.clone()),
        };
        let path = result.as_ref().map(|installed| installed.path.as_path());
        failed |= !print_result(rank, size, name, path);
    }
    drop(ctx);
    drop(universe);
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
