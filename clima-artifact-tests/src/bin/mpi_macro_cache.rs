//! MPI test program: `clima_artifact!(.., ctx)` and the in-memory cache, against
//! `tests/Artifacts.toml` (read at compile time) and the depot of `CLIMA_ARTIFACTS_DEPOT_PATH`.
//!
//! Each step makes some ranks resolve an artifact in a way that fills their memory but not the
//! others', then has every rank make the same collective call. Before the cache rule of the
//! macro docs ("Calls with a context and the in-memory cache"), the ranks with a filled cache
//! skipped the collective call and the others waited for them forever. Prints, per step:
//!
//! ```text
//! RESULT rank=<r> size=<n> name=<step> ok path=<path>
//! RESULT rank=<r> size=<n> name=<step> err=<message on one line>
//! FASTPATH rank=<r> collective_primitives=<k>
//! ```
//!
//! `FASTPATH` counts the broadcasts and gathers made by ten repeated collective calls after the
//! first: the rule must keep them answered from memory, so `k` is 0.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

use clima_artifact_runtime::{Context, Error, MpiContext, clima_artifact};
use clima_artifact_tests::print_result;

/// The world communicator, counting the collective primitives it runs.
struct Counting {
    inner: MpiContext,
    primitives: AtomicUsize,
}

impl Context for Counting {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn barrier(&self) {
        self.primitives.fetch_add(1, Ordering::Relaxed);
        self.inner.barrier()
    }
    fn broadcast_from_root(&self, data: Option<Vec<u8>>) -> Vec<u8> {
        self.primitives.fetch_add(1, Ordering::Relaxed);
        self.inner.broadcast_from_root(data)
    }
    fn gather_to_root(&self, data: Vec<u8>) -> Option<Vec<Vec<u8>>> {
        self.primitives.fetch_add(1, Ordering::Relaxed);
        self.inner.gather_to_root(data)
    }
    fn split_by_node(&self) -> Box<dyn Context> {
        self.inner.split_by_node()
    }
    fn split(&self, color: Option<u32>, key: u32) -> Option<Box<dyn Context>> {
        self.inner.split(color, key)
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn communicator_id(&self) -> Option<u64> {
        self.inner.communicator_id()
    }
}

/// One call site used with different communicators.
fn forcing_site(ctx: &dyn Context) -> Result<PathBuf, Error> {
    clima_artifact!("forcing-table", ctx)
}

fn main() -> ExitCode {
    let universe = clima_artifact_runtime::mpi::initialize().expect("MPI already initialised");
    let world = Counting {
        inner: MpiContext::world(),
        primitives: AtomicUsize::new(0),
    };
    let (rank, size) = (world.rank(), world.size());
    let mut failed = false;
    let mut report = |step: &str, result: Result<PathBuf, Error>| {
        failed |= !print_result(rank, size, step, result.as_deref());
    };

    // 1. Rank 0 alone resolves `profile` without a context, then every rank calls with the world.
    if rank == 0 {
        let serial = clima_artifact!("profile");
        report("rank0-serial", serial);
    }
    report("serial-then-world", clima_artifact!("profile", &world));

    // 2. The lower half resolves `forcing-table` at one call site on its own communicator, then
    //    every rank uses that same call site with the world.
    let lower = rank < size / 2;
    let half = world
        .inner
        .split_by_color(Some(u32::from(lower)))
        .expect("every rank has a color");
    if lower {
        report("half-split", forcing_site(&half));
    }
    report("split-then-world", forcing_site(&world));

    // 3. Odd ranks resolve `ozone` by a run-time name without a context, then every rank asks
    //    for it by a run-time name with the world.
    let name = String::from("ozone");
    if rank % 2 == 1 {
        report("odd-serial", clima_artifact!(name.as_str()));
    }
    report("dynamic-then-world", clima_artifact!(name.as_str(), &world));

    // 4. The common case keeps its fast path: repeated collective calls on the same communicator
    //    (literal, shared call site, run-time name) communicate no more.
    let before = world.primitives.load(Ordering::Relaxed);
    for _ in 0..10 {
        for result in [
            clima_artifact!("profile", &world),
            forcing_site(&world),
            clima_artifact!(name.as_str(), &world),
        ] {
            if let Err(e) = result {
                report("repeated", Err(e));
            }
        }
    }
    let after = world.primitives.load(Ordering::Relaxed);
    println!(
        "FASTPATH rank={rank} collective_primitives={}",
        after - before
    );

    // 5. rsmpi's own communicator is a context as it is: `&universe.world()` compiles, is
    //    collective, and shares MPI_COMM_WORLD's identity (answered from memory after step 1).
    let plain = universe.world();
    report("plain-world", clima_artifact!("profile", &plain));
    drop(plain);

    drop(half);
    drop(world);
    drop(universe);
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
