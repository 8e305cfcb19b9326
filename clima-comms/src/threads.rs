//! [`on_thread_ranks`]: a real multi-rank [`Context`] without MPI, each rank a thread, for
//! testing collective code (a model's, or this workspace's) without `mpirun`.

use std::sync::{Arc, Barrier, Mutex};

use crate::{Context, Singleton};

/// What the ranks of one [`on_thread_ranks`] call share: a barrier and one slot per rank.
struct Shared {
    barrier: Barrier,
    slots: Mutex<Vec<Vec<u8>>>,
}

/// One rank of an [`on_thread_ranks`] world.
struct ThreadRank {
    rank: usize,
    size: usize,
    shared: Arc<Shared>,
}

impl ThreadRank {
    fn slots(&self) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
        self.shared.slots.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Context for ThreadRank {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn barrier(&self) {
        self.shared.barrier.wait();
    }
    fn broadcast_from_root(&self, data: Option<Vec<u8>>) -> Vec<u8> {
        self.barrier();
        if self.rank == 0 {
            self.slots()[0] = data.unwrap_or_default();
        }
        self.barrier();
        let out = self.slots()[0].clone();
        self.barrier();
        out
    }
    fn gather_to_root(&self, data: Vec<u8>) -> Option<Vec<Vec<u8>>> {
        self.barrier();
        self.slots()[self.rank] = data;
        self.barrier();
        let out = (self.rank == 0).then(|| self.slots().clone());
        self.barrier();
        out
    }
    fn split_by_node(&self) -> Box<dyn Context> {
        // Every thread rank is its own node.
        Box::new(Singleton)
    }
    fn describe(&self) -> String {
        format!("a world of {} thread ranks", self.size)
    }
}

/// Runs `f` on `size` threads at once, each with its rank of one shared context, and returns
/// the results in rank order. Every collective call of `f` must be made by every rank, as under
/// MPI; a panic on any rank is re-raised here after all threads ended.
pub fn on_thread_ranks<T: Send>(size: usize, f: impl Fn(&dyn Context) -> T + Sync) -> Vec<T> {
    let shared = Arc::new(Shared {
        barrier: Barrier::new(size),
        slots: Mutex::new(vec![Vec::new(); size]),
    });
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..size)
            .map(|rank| {
                let ctx = ThreadRank {
                    rank,
                    size,
                    shared: Arc::clone(&shared),
                };
                let f = &f;
                s.spawn(move || f(&ctx))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}
