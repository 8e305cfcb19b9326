//! MPI test program: checks `MpiContext`'s byte broadcast, multi-round gather, node split and
//! thread guard on every rank. Run by `clima-artifact-tests/tests/it/mpi.rs` under `mpirun`; panics (non-zero exit)
//! on the first wrong byte.

fn main() {
    use clima_artifact_runtime::{Context, MpiContext};

    let universe = clima_artifact_runtime::mpi::initialize().expect("MPI already initialised");
    let world = MpiContext::world();
    let (rank, size) = (world.rank(), world.size());
    let pattern = |seed: usize, len: usize| -> Vec<u8> {
        (0..len).map(|i| (i * 31 + seed * 7 + 3) as u8).collect()
    };

    for cap in [usize::MAX, 7, 1] {
        let ctx = MpiContext::world().with_max_message_bytes(cap);
        // Broadcast: empty, tiny, and larger than the cap; non-roots pass junk that must be ignored.
        for len in [0, 1, 1000, 70_000] {
            let mine = (rank == 0).then(|| pattern(len, len)).or(Some(vec![9; 5]));
            let got = ctx.broadcast_from_root(mine);
            assert_eq!(
                got,
                pattern(len, len),
                "rank {rank}: broadcast of {len} bytes, cap {cap}"
            );
        }
        // Gather: different lengths per rank, including empty ones.
        let len = |r: usize| (r * 977) % 3001 + usize::from(!r.is_multiple_of(3));
        let len = |r: usize| if r == 1 { 0 } else { len(r) };
        let got = ctx.gather_to_root(pattern(rank, len(rank)));
        match got {
            Some(all) => {
                assert_eq!(rank, 0, "only the root gets the gathered bytes");
                assert_eq!(all.len(), size);
                for (r, bytes) in all.iter().enumerate() {
                    assert_eq!(
                        bytes,
                        &pattern(r, len(r)),
                        "root: gathered bytes of rank {r}"
                    );
                }
            }
            None => assert_ne!(rank, 0, "the root must get the gathered bytes"),
        }
        ctx.barrier();
    }

    // Node split: all ranks of this test run on one machine.
    let node = world.split_by_node();
    assert_eq!(node.size(), size, "one machine, one node");
    assert_eq!(node.rank(), rank);
    let got = node.broadcast_from_root((node.rank() == 0).then(|| b"node".to_vec()));
    assert_eq!(got, b"node");
    assert!(
        node.describe().contains("node-local"),
        "{}",
        node.describe()
    );
    drop(node);

    // Colour split: evens and odds, each with its own root.
    let half = world
        .split_by_color(Some((rank % 2) as u32))
        .expect("every rank has a colour");
    assert_eq!(half.rank(), rank / 2);
    let got = half.broadcast_from_root((half.rank() == 0).then(|| vec![(rank % 2) as u8]));
    assert_eq!(got, vec![(rank % 2) as u8]);
    drop(half);
    assert!(world.split_by_color(None).is_none());

    // Another thread must not reach MPI unless MPI allows it: a clear panic, not UB.
    if clima_artifact_runtime::mpi::environment::threading_support()
        < clima_artifact_runtime::mpi::Threading::Serialized
    {
        let loud = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let outcome = std::thread::scope(|s| s.spawn(|| world.barrier()).join());
        std::panic::set_hook(loud);
        let message = outcome.expect_err("a barrier from another thread must be refused");
        let text = message
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(text.contains("initialize_with_threading"), "{text}");
    }

    world.barrier();
    println!("rank {rank}/{size}: primitives ok");
    drop(world);
    drop(universe);
}
