//! [`on_thread_ranks`]: a real multi-rank [`Context`] without MPI, each rank a thread, for
//! testing collective code (a model's, or this workspace's) without `mpirun`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use crate::{Context, Singleton};

/// What the ranks of one [`on_thread_ranks`] call (or of one part of a split) share: a
/// barrier, one slot per rank, and the parts of the splits made of it so far.
struct Shared {
    barrier: Barrier,
    slots: Mutex<Vec<Vec<u8>>>,
    /// By (number of the split, color): every rank makes the same splits in the same order.
    parts: Mutex<HashMap<(u64, u32), Arc<Shared>>>,
}

impl Shared {
    fn new(size: usize) -> Arc<Shared> {
        Arc::new(Shared {
            barrier: Barrier::new(size),
            slots: Mutex::new(vec![Vec::new(); size]),
            parts: Mutex::new(HashMap::new()),
        })
    }
}

/// One rank of an [`on_thread_ranks`] world.
struct ThreadRank {
    rank: usize,
    size: usize,
    shared: Arc<Shared>,
    /// Splits made of this context so far.
    splits: AtomicU64,
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
    fn split(&self, color: Option<u32>, key: u32) -> Option<Box<dyn Context>> {
        // Every rank's (color, key), to every rank.
        let mine = match color {
            Some(c) => [&[1][..], &c.to_le_bytes(), &key.to_le_bytes()].concat(),
            None => vec![0],
        };
        self.barrier();
        self.slots()[self.rank] = mine;
        self.barrier();
        let all: Vec<Option<(u32, u32)>> = self
            .slots()
            .iter()
            .map(|b| {
                let word = |at: usize| -> Option<u32> {
                    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
                };
                match b.first() {
                    Some(1) => Some((word(1)?, word(5)?)),
                    _ => None,
                }
            })
            .collect();
        self.barrier();
        let number = self.splits.fetch_add(1, Ordering::Relaxed);
        let color = color?;
        let mut members: Vec<(u32, usize)> = all
            .iter()
            .enumerate()
            .filter_map(|(rank, ck)| ck.filter(|(c, _)| *c == color).map(|(_, k)| (k, rank)))
            .collect();
        members.sort_unstable();
        let rank = members.iter().position(|&(_, r)| r == self.rank)?;
        let shared = Arc::clone(
            self.shared
                .parts
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry((number, color))
                .or_insert_with(|| Shared::new(members.len())),
        );
        Some(Box::new(ThreadRank {
            rank,
            size: members.len(),
            shared,
            splits: AtomicU64::new(0),
        }))
    }
    fn describe(&self) -> String {
        format!("a world of {} thread ranks", self.size)
    }
}

/// Runs `f` on `size` threads at once, each with its rank of one shared context, and returns
/// the results in rank order. Every collective call of `f` must be made by every rank, as under
/// MPI; a panic on any rank is re-raised here after all threads ended.
pub fn on_thread_ranks<T: Send>(size: usize, f: impl Fn(&dyn Context) -> T + Sync) -> Vec<T> {
    let shared = Shared::new(size);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..size)
            .map(|rank| {
                let ctx = ThreadRank {
                    rank,
                    size,
                    shared: Arc::clone(&shared),
                    splits: AtomicU64::new(0),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_group_by_color_and_order_by_key() {
        let out = on_thread_ranks(5, |ctx| {
            // Evens and odds; the odds ordered by descending rank; rank 4 stays out.
            let color = (ctx.rank() != 4).then_some((ctx.rank() % 2) as u32);
            let key = if ctx.rank() % 2 == 1 {
                10 - ctx.rank() as u32
            } else {
                0
            };
            let part = ctx.split(color, key)?;
            let sent = (part.rank() == 0).then(|| vec![ctx.rank() as u8]);
            let root = part.broadcast_from_root(sent);
            Some((part.rank(), part.size(), root[0]))
        });
        assert_eq!(
            out,
            vec![
                Some((0, 2, 0)),
                Some((1, 2, 3)),
                Some((1, 2, 0)),
                Some((0, 2, 3)),
                None
            ]
        );
    }
}
