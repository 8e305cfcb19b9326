//! [`on_thread_ranks`]: a real multi-rank [`Context`] without MPI, each rank a thread, for
//! testing collective code (a model's, or this workspace's) without `mpirun`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex};

use crate::{Context, Singleton};

/// Point-to-point messages sent and not yet received, by (from, to), in the order sent.
type Mailboxes = HashMap<(usize, usize), VecDeque<Vec<u8>>>;

/// What the ranks of one [`on_thread_ranks`] call (or of one part of a split) share: a
/// barrier, one slot per rank, point-to-point mailboxes, and the parts of the splits made of it
/// so far.
struct Shared {
    barrier: Barrier,
    slots: Mutex<Vec<Vec<u8>>>,
    /// Messages sent and not yet received.
    mail: Mutex<Mailboxes>,
    delivered: Condvar,
    /// By (number of the split, color): every rank makes the same splits in the same order.
    parts: Mutex<HashMap<(u64, u32), Arc<Shared>>>,
}

impl Shared {
    fn new(size: usize) -> Arc<Shared> {
        Arc::new(Shared {
            barrier: Barrier::new(size),
            slots: Mutex::new(vec![Vec::new(); size]),
            mail: Mutex::new(HashMap::new()),
            delivered: Condvar::new(),
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

    fn send(&self, to: usize, bytes: Vec<u8>) {
        crate::traffic::sent(1, bytes.len());
        let mut mail = self.shared.mail.lock().unwrap_or_else(|e| e.into_inner());
        mail.entry((self.rank, to)).or_default().push_back(bytes);
        self.shared.delivered.notify_all();
    }

    fn recv(&self, from: usize) -> Vec<u8> {
        let mut mail = self.shared.mail.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(bytes) = mail
                .get_mut(&(from, self.rank))
                .and_then(VecDeque::pop_front)
            {
                crate::traffic::received(1, bytes.len());
                return bytes;
            }
            mail = self
                .shared
                .delivered
                .wait(mail)
                .unwrap_or_else(|e| e.into_inner());
        }
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
        crate::traffic::broadcast(self.rank, self.size, out.len());
        out
    }
    fn gather_to_root(&self, data: Vec<u8>) -> Option<Vec<Vec<u8>>> {
        let len = data.len();
        self.barrier();
        self.slots()[self.rank] = data;
        self.barrier();
        let out = (self.rank == 0).then(|| self.slots().clone());
        self.barrier();
        crate::traffic::gather(self.rank, len, out.as_deref());
        out
    }
    fn reduce_to_root(
        &self,
        data: Vec<u8>,
        merge: &dyn Fn(Vec<u8>, Vec<u8>) -> Vec<u8>,
    ) -> Option<Vec<u8>> {
        crate::tree::binomial_reduce(
            self.rank,
            self.size,
            data,
            merge,
            &mut |to, bytes| self.send(to, bytes),
            &mut |from| self.recv(from),
        )
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
    fn the_reduce_merges_in_rank_order_and_the_root_gets_log_messages() {
        for size in [1, 2, 5, 8, 13] {
            let out = on_thread_ranks(size, |ctx| {
                let before = crate::traffic::this_thread();
                // Twice in a row: messages of two reduces never mix.
                let merge = |a: Vec<u8>, b: Vec<u8>| [a, b].concat();
                let first = ctx.reduce_to_root(vec![ctx.rank() as u8], &merge);
                let second = ctx.reduce_to_root(vec![100 + ctx.rank() as u8], &merge);
                (first, second, crate::traffic::this_thread().since(&before))
            });
            let (first, second, root) = &out[0];
            assert_eq!(
                first.as_deref(),
                Some(&(0..size as u8).collect::<Vec<_>>()[..])
            );
            assert_eq!(
                second.as_deref(),
                Some(&(100..100 + size as u8).collect::<Vec<_>>()[..])
            );
            let rounds = size.next_power_of_two().trailing_zeros() as u64;
            assert_eq!(root.received_messages, 2 * rounds, "size {size}");
            assert_eq!(root.sent_messages, 0);
            assert!(
                out[1..]
                    .iter()
                    .all(|(f, s, t)| f.is_none() && s.is_none() && t.sent_messages == 2)
            );
        }
    }

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
