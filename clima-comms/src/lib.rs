//! # clima-comms
//!
//! Communication contexts for clima-artifacts, named after CliMA's ClimaComms whose contexts
//! they mirror: who is the root, how bytes move between ranks, and one collective step that
//! every user of a context shares.
//!
//! - [`Context`]: the trait (rank, size, byte broadcast from the root, byte gather to the root,
//!   a byte reduce to the root in a binomial tree, a node split, a split by color). [`Singleton`] is the serial context; with the `mpi` feature, [`MpiContext`]
//!   wraps an rsmpi communicator, and rsmpi's own `SimpleCommunicator` (what
//!   `universe.world()` returns) can be passed where a context is expected ([`AsContext`]).
//! - [`root_decides`]: rank 0 runs an operation (panic-safe) and every rank returns the same
//!   `Ok` or the same `Err`. [`all_succeed`]: every rank runs its own part and all return an
//!   error if any rank failed. [`requests_agree`]: the root checks that every rank asked for the
//!   same thing. Artifact installs and run sync both use these, with one wire framing, and
//!   their errors travel in one JSON wire form ([`json_to_wire`], [`json_from_wire`]).
//! - [`broadcast_value`], [`gather_values`], [`reduce_values`]: typed values between ranks, a
//!   value that does not decode the same [`CollectiveError`] on every rank, never a default;
//!   [`reduce_outcomes`] hands such an error to the merge, which may leave that part out, told.
//! - [`stream`]: a broadcast stream of bytes from the root (a [`stream::BroadcastWriter`]) to
//!   every other rank (a [`stream::BroadcastReader`]), in typed frames with checkpoints at which
//!   any rank can stop it for all; node-local mode copies artifacts with it.
//! - [`on_thread_ranks`]: a multi-rank context of threads, to test collective code without MPI.
//! - [`traffic`]: what the byte primitives sent and received (messages and bytes), per process
//!   and per thread, for tests and benchmarks of how a step scales with the number of ranks.
//!
//! # Calls with a context are COLLECTIVE
//!
//! **Every rank of the context must make the same call, in the same order.** A rank that skips
//! a call leaves the others waiting in a broadcast (a hang), exactly like a mismatched
//! `MPI_Bcast`. What can be detected ([`requests_agree`], a failing or panicking root) becomes
//! the same error on every rank instead of a hang or wrong data.

use std::sync::Arc;

mod collective;
#[cfg(feature = "mpi")]
mod mpi_context;
pub mod stream;
mod threads;
pub mod traffic;
mod tree;
mod values;

/// The rsmpi crate this crate was built with (initialise MPI with `mpi::initialize()`).
#[cfg(feature = "mpi")]
pub use ::mpi;
pub use collective::{
    CollectiveError, WireError, all_succeed, json_from_wire, json_to_wire, panic_message,
    reduce_outcomes, requests_agree, root_decides,
};
#[cfg(feature = "mpi")]
pub use mpi_context::{MpiContext, REDUCE_TAG};
pub use threads::on_thread_ranks;
pub use traffic::Traffic;
pub use tree::{rank_ranges, ranks_of, union_ranges};
pub use values::{broadcast_value, gather_values, reduce_values};

/// A communicator over which operations are collective.
///
/// **Every method is collective**: all ranks of the communicator must call it, in the same
/// order, or the program hangs (as with any MPI collective). Rank 0 is the root.
///
/// Implemented by [`Singleton`] (serial runs) and, with the `mpi` feature, by [`MpiContext`]
/// (rsmpi's `SimpleCommunicator` is usable through [`AsContext`]). Implement it for your own
/// communication layer by providing a byte broadcast, a byte gather, a node split and a split
/// by color.
pub trait Context {
    /// This process's rank, `0..size()`.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// Waits until every rank reached this point.
    fn barrier(&self);
    /// Rank 0 passes `Some(bytes)`, the others `None`; every rank gets rank 0's bytes.
    ///
    /// Non-root ranks ignore what they pass (only the root's bytes count).
    fn broadcast_from_root(&self, data: Option<Vec<u8>>) -> Vec<u8>;
    /// Every rank passes its bytes; rank 0 gets all of them in rank order, the others `None`.
    ///
    /// Rank 0 receives the bytes of every rank: linear in the number of ranks. Collective steps
    /// whose values can be merged use [`Context::reduce_to_root`] instead.
    fn gather_to_root(&self, data: Vec<u8>) -> Option<Vec<Vec<u8>>>;
    /// Every rank passes its bytes; rank 0 gets them all merged, the others `None`.
    ///
    /// `merge(lower, higher)` combines the values of two adjacent ranges of ranks (the lower
    /// ranks first), so it must be associative; every rank must pass the same function. The
    /// contexts of this crate merge in a binomial tree over point-to-point messages: rank 0
    /// receives `ceil(log2 size)` messages, and when merged values do not grow (ranks that
    /// agree), neither do the bytes it receives. The default (for contexts that implement only
    /// the other primitives) gathers every value to rank 0 and merges there, in rank order.
    fn reduce_to_root(
        &self,
        data: Vec<u8>,
        merge: &dyn Fn(Vec<u8>, Vec<u8>) -> Vec<u8>,
    ) -> Option<Vec<u8>> {
        let mut all = self.gather_to_root(data)?.into_iter();
        let first = all.next().unwrap_or_default();
        Some(all.fold(first, merge))
    }
    /// A context over the ranks that share this node (shared-memory split).
    fn split_by_node(&self) -> Box<dyn Context>;
    /// Splits the context (`MPI_Comm_split`): ranks passing the same `Some(color)` form one new
    /// context, ordered by `key`, then by their rank here; ranks passing `None` get `None`.
    fn split(&self, color: Option<u32>, key: u32) -> Option<Box<dyn Context>>;
    /// A short description used in error messages, e.g. `MPI_COMM_WORLD (16 ranks)`.
    fn describe(&self) -> String {
        format!("a context of {} rank(s)", self.size())
    }
    /// An identity of the communicator, which lets a caller remember that a collective step
    /// already succeeded on it (`clima_artifact!` answers repeated calls from memory this way).
    ///
    /// Contract: within one process, two contexts return the same `Some(id)` **if and only if**
    /// they are the same communicator (same ranks, same MPI context), for as long as either is
    /// alive. `None` (the default) is always sound: callers then run the collective protocol on
    /// every call. [`MpiContext`] implements it (`MPI_COMM_WORLD` has a fixed id, every other
    /// communicator a fresh one); one-rank contexts such as [`Singleton`] need none.
    fn communicator_id(&self) -> Option<u64> {
        None
    }
}

/// Anything that can be used as a [`Context`]: every context, and, with the `mpi` feature,
/// rsmpi's `SimpleCommunicator` (so `clima_artifact!("era5", &world)` works with a plain
/// `universe.world()`).
pub trait AsContext {
    /// The context view of `self`.
    fn as_context(&self) -> &dyn Context;
}

impl<C: Context> AsContext for C {
    fn as_context(&self) -> &dyn Context {
        self
    }
}

impl AsContext for dyn Context + '_ {
    fn as_context(&self) -> &dyn Context {
        self
    }
}

/// The serial context: one rank, nothing to coordinate.
#[derive(Debug, Clone, Copy, Default)]
pub struct Singleton;

impl Context for Singleton {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn barrier(&self) {}
    fn broadcast_from_root(&self, data: Option<Vec<u8>>) -> Vec<u8> {
        data.unwrap_or_default()
    }
    fn gather_to_root(&self, data: Vec<u8>) -> Option<Vec<Vec<u8>>> {
        Some(vec![data])
    }
    fn reduce_to_root(
        &self,
        data: Vec<u8>,
        _merge: &dyn Fn(Vec<u8>, Vec<u8>) -> Vec<u8>,
    ) -> Option<Vec<u8>> {
        Some(data)
    }
    fn split_by_node(&self) -> Box<dyn Context> {
        Box::new(Singleton)
    }
    fn split(&self, color: Option<u32>, _key: u32) -> Option<Box<dyn Context>> {
        color.map(|_| Box::new(Singleton) as Box<dyn Context>)
    }
    fn describe(&self) -> String {
        "the serial context (1 rank)".to_owned()
    }
}

macro_rules! forward_context {
    ($($ty:ty),*) => {$(
        impl<T: Context + ?Sized> Context for $ty {
            fn rank(&self) -> usize {
                (**self).rank()
            }
            fn size(&self) -> usize {
                (**self).size()
            }
            fn barrier(&self) {
                (**self).barrier()
            }
            fn broadcast_from_root(&self, data: Option<Vec<u8>>) -> Vec<u8> {
                (**self).broadcast_from_root(data)
            }
            fn gather_to_root(&self, data: Vec<u8>) -> Option<Vec<Vec<u8>>> {
                (**self).gather_to_root(data)
            }
            fn reduce_to_root(
                &self,
                data: Vec<u8>,
                merge: &dyn Fn(Vec<u8>, Vec<u8>) -> Vec<u8>,
            ) -> Option<Vec<u8>> {
                (**self).reduce_to_root(data, merge)
            }
            fn split_by_node(&self) -> Box<dyn Context> {
                (**self).split_by_node()
            }
            fn split(&self, color: Option<u32>, key: u32) -> Option<Box<dyn Context>> {
                (**self).split(color, key)
            }
            fn describe(&self) -> String {
                (**self).describe()
            }
            fn communicator_id(&self) -> Option<u64> {
                (**self).communicator_id()
            }
        }
    )*};
}
forward_context!(&T, Box<T>, Arc<T>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn singleton_primitives() {
        let s = Singleton;
        assert_eq!(s.broadcast_from_root(Some(vec![1, 2])), vec![1, 2]);
        assert_eq!(s.gather_to_root(vec![3]), Some(vec![vec![3]]));
        assert_eq!(s.split_by_node().size(), 1);
        assert_eq!(s.split(Some(3), 0).map(|c| c.size()), Some(1));
        assert!(s.split(None, 0).is_none());
        let boxed: Box<dyn Context> = Box::new(Singleton);
        let by_ref: &dyn Context = &&boxed;
        assert_eq!(by_ref.size(), 1);
        assert_eq!(by_ref.communicator_id(), None);
    }
}

#[cfg(test)]
mod test_error;
