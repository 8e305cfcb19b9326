//! [`Context`] for MPI communicators of the `mpi` crate (rsmpi), behind the `mpi` feature.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use clima_comms::{Context, MpiContext};
//! let universe = clima_comms::mpi::initialize().expect("MPI initialised twice");
//! let ctx = MpiContext::world();
//! // ... collective calls with `&ctx` on every rank ...
//! drop(ctx);
//! // rsmpi's own communicator is a context too (on the thread that owns it):
//! let world = universe.world();
//! use clima_comms::AsContext;
//! println!("rank {} of {}", world.as_context().rank(), world.as_context().size());
//! drop(world);
//! drop(universe); // MPI_Finalize
//! # Ok(()) }
//! ```
//!
//! Only standard MPI-3 calls are used (`MPI_Bcast`, `MPI_Ibcast`, `MPI_Allgather`,
//! `MPI_Gatherv`, `MPI_Send`, `MPI_Irecv`, `MPI_Barrier`, `MPI_Comm_split` (with a key),
//! `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`), so OpenMPI and MPICH both work.
//!
//! # Wire protocol of the byte primitives
//!
//! - broadcast: the root's length as one `u64` (`MPI_Ibcast`, waited for with short sleeps so
//!   ranks waiting for the root's install do not spin on a core the root needs), then the payload in chunks of at most
//!   [`MpiContext::max_message_bytes`] bytes (MPI counts are `int`).
//! - gather: every length as `u64` to every rank (`MPI_Allgather`), so all ranks know how many
//!   rounds are needed; then rounds of `MPI_Gatherv` in which each rank sends the next piece of at
//!   most `max_message_bytes / size` bytes.
//! - reduce: the binomial tree of [`Context::reduce_to_root`], each message a `u64` length then
//!   the payload in chunks of at most `max_message_bytes`, point-to-point (`MPI_Send`, and
//!   `MPI_Irecv` waited for with short sleeps) with the tag [`REDUCE_TAG`] on the context's
//!   communicator; MPI keeps messages of one sender and tag in order, so reduces in a row never
//!   mix.
//!
//! # Threads
//!
//! rsmpi communicators are not `Send`/`Sync`, so a plain `SimpleCommunicator` used as a
//! [`Context`] stays on the thread that owns it. `MpiContext` is `Send + Sync` (it can be shared
//! with threads that make artifact calls) because it checks every call: unless MPI was initialised with
//! `Threading::Multiple`, calls are serialised by a process-wide lock, and unless it was
//! initialised with at least `Threading::Serialized`, a call from a thread other than the one
//! that created the context panics (with a message saying how to initialise MPI) instead of
//! invoking undefined behaviour in the MPI library.

use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::Duration;

use mpi::datatype::PartitionMut;
use mpi::environment::Threading;
use mpi::topology::{Color, CommunicatorRelation, SimpleCommunicator};
use mpi::traits::*;

use crate::{AsContext, Context};

/// Serialises MPI calls of all contexts when MPI is not `Threading::Multiple`.
static MPI_CALLS: Mutex<()> = Mutex::new(());

/// Longest sleep between two checks of a pending broadcast (bounds the added latency).
const MAX_NAP: Duration = Duration::from_millis(10);

/// The largest number of elements one MPI call may carry (`int` counts).
const MPI_MAX_COUNT: usize = i32::MAX as usize;

/// The tag of the reduce's point-to-point messages (below 32767, the least `MPI_TAG_UB` MPI
/// allows). A program that receives with `MPI_ANY_TAG` on a communicator it also passes to
/// this crate could take them: use a duplicate of the communicator for your own messages.
pub const REDUCE_TAG: i32 = 31_417;

/// [`Context::communicator_id`] of `MPI_COMM_WORLD`, however many contexts wrap it.
const WORLD_ID: u64 = 1;

/// The next [`Context::communicator_id`] for a communicator other than the world. Never reused:
/// an rsmpi communicator cannot be cloned, so each one is wrapped at most once, and a fresh id
/// per wrapper is "the same id if and only if the same communicator".
static NEXT_ID: AtomicU64 = AtomicU64::new(WORLD_ID + 1);

/// A [`Context`] over an rsmpi communicator (`MPI_COMM_WORLD` or any intra-communicator).
///
/// Every method is collective over the communicator, as the [`Context`] docs say.
pub struct MpiContext {
    comm: ManuallyDrop<SimpleCommunicator>,
    rank: usize,
    size: usize,
    owner: ThreadId,
    threading: Threading,
    max_message_bytes: usize,
    label: String,
    id: u64,
}

// SAFETY: the communicator handle is only used through `enter`, which (a) panics when called
// from a thread other than the creating one unless MPI provides at least `Serialized` thread
// support, and (b) serialises all calls through `MPI_CALLS` unless MPI provides `Multiple`.
// `Drop` leaks the handle instead of freeing it from a thread MPI does not allow.
unsafe impl Send for MpiContext {}
// SAFETY: see `Send`; shared references only reach MPI through `enter`.
unsafe impl Sync for MpiContext {}

impl std::fmt::Debug for MpiContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiContext")
            .field("label", &self.label)
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("threading", &self.threading)
            .finish()
    }
}

impl MpiContext {
    /// A context over `MPI_COMM_WORLD`.
    ///
    /// # Panics
    /// If MPI is not initialised (call `mpi::initialize()` first and keep the `Universe` alive).
    pub fn world() -> MpiContext {
        Self::labelled(SimpleCommunicator::world(), "MPI_COMM_WORLD".to_owned())
    }

    /// A context over `comm` (for example a duplicate or a split of the world).
    ///
    /// # Panics
    /// If MPI is not initialised.
    pub fn new(comm: SimpleCommunicator) -> MpiContext {
        Self::labelled(comm, "an MPI communicator".to_owned())
    }

    fn labelled(comm: SimpleCommunicator, name: String) -> MpiContext {
        assert!(
            mpi::environment::is_initialized() && !mpi::environment::is_finalized(),
            "MpiContext needs an initialised MPI: call `mpi::initialize()` first and keep the \
             returned `Universe` alive while the context is in use"
        );
        let (rank, size) = (comm.rank() as usize, comm.size() as usize);
        let id = match comm.compare(&SimpleCommunicator::world()) {
            CommunicatorRelation::Identical => WORLD_ID,
            _ => NEXT_ID.fetch_add(1, Ordering::Relaxed),
        };
        MpiContext {
            comm: ManuallyDrop::new(comm),
            rank,
            size,
            owner: std::thread::current().id(),
            threading: mpi::environment::threading_support(),
            max_message_bytes: MPI_MAX_COUNT,
            label: format!("{name} ({size} ranks)"),
            id,
        }
    }

    /// Caps the bytes moved by one MPI call (default and maximum: `i32::MAX`); larger payloads
    /// are sent in several calls. Mostly for tests of the chunking.
    pub fn with_max_message_bytes(mut self, bytes: usize) -> MpiContext {
        self.max_message_bytes = bytes.clamp(1, MPI_MAX_COUNT);
        self
    }

    /// The cap set by [`MpiContext::with_max_message_bytes`].
    pub fn max_message_bytes(&self) -> usize {
        self.max_message_bytes
    }

    /// Splits the communicator by `color` (`MPI_Comm_split`, ordered by current rank); ranks
    /// passing `None` get `None`. Collective. Useful to build custom node layouts.
    pub fn split_by_color(&self, color: Option<u32>) -> Option<MpiContext> {
        self.split_keyed(color, 0)
    }

    /// [`MpiContext::split_by_color`], ordered by `key` first.
    fn split_keyed(&self, color: Option<u32>, key: u32) -> Option<MpiContext> {
        let sub = {
            let _guard = self.enter();
            self.comm
                .split_by_color_with_key(mpi_color(color), mpi_key(key))
        };
        sub.map(|c| {
            let mut ctx = Self::labelled(c, format!("a split of {}", self.label));
            ctx.max_message_bytes = self.max_message_bytes;
            ctx
        })
    }

    /// The wrapped communicator, for the caller's own MPI calls (same thread rules apply).
    pub fn communicator(&self) -> &SimpleCommunicator {
        &self.comm
    }

    /// Checks the calling thread and takes the process-wide MPI lock if MPI needs it.
    fn enter(&self) -> Option<MutexGuard<'static, ()>> {
        if self.threading < Threading::Serialized && std::thread::current().id() != self.owner {
            panic!(
                "{} was used from a thread other than the one that created it, but MPI was \
                 initialised with {:?} thread support; initialise MPI with \
                 `mpi::initialize_with_threading(Threading::Serialized)` (or `Multiple`), or make \
                 artifact calls from the thread that created the context",
                self.label, self.threading
            );
        }
        (self.threading < Threading::Multiple)
            .then(|| MPI_CALLS.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl From<SimpleCommunicator> for MpiContext {
    fn from(comm: SimpleCommunicator) -> MpiContext {
        MpiContext::new(comm)
    }
}

impl Drop for MpiContext {
    fn drop(&mut self) {
        let allowed =
            self.threading >= Threading::Serialized || std::thread::current().id() == self.owner;
        if allowed && !mpi::environment::is_finalized() {
            let _guard = self.enter();
            // SAFETY: dropped exactly once, here; MPI is still initialised and this thread may
            // call it.
            unsafe { ManuallyDrop::drop(&mut self.comm) };
        }
        // Otherwise the handle is leaked: freeing it would be undefined behaviour.
    }
}

impl Context for MpiContext {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn barrier(&self) {
        let _guard = self.enter();
        self.comm.barrier();
    }

    fn broadcast_from_root(&self, data: Option<Vec<u8>>) -> Vec<u8> {
        let _guard = self.enter();
        broadcast(&self.comm, self.rank, self.max_message_bytes, data)
    }

    fn gather_to_root(&self, data: Vec<u8>) -> Option<Vec<Vec<u8>>> {
        let _guard = self.enter();
        gather(
            &self.comm,
            self.rank,
            self.size,
            self.max_message_bytes,
            data,
        )
    }

    fn reduce_to_root(
        &self,
        data: Vec<u8>,
        merge: &dyn Fn(Vec<u8>, Vec<u8>) -> Vec<u8>,
    ) -> Option<Vec<u8>> {
        let _guard = self.enter();
        reduce(
            &self.comm,
            self.rank,
            self.size,
            self.max_message_bytes,
            data,
            merge,
        )
    }

    fn split_by_node(&self) -> Box<dyn Context> {
        let node = {
            let _guard = self.enter();
            self.comm.split_shared(self.rank as i32)
        };
        let mut ctx = Self::labelled(node, format!("the node-local part of {}", self.label));
        ctx.max_message_bytes = self.max_message_bytes;
        Box::new(ctx)
    }

    fn split(&self, color: Option<u32>, key: u32) -> Option<Box<dyn Context>> {
        self.split_keyed(color, key)
            .map(|ctx| Box::new(ctx) as Box<dyn Context>)
    }

    fn describe(&self) -> String {
        self.label.clone()
    }

    fn communicator_id(&self) -> Option<u64> {
        Some(self.id)
    }
}

/// rsmpi's own communicator (what `universe.world()` returns) as a context, so
/// `clima_artifact!("era5", &world)` works without wrapping it ([`AsContext`]).
///
/// A `#[repr(transparent)]` view of the communicator: implementing [`Context`] on
/// `SimpleCommunicator` itself would make `world.rank()` ambiguous in every model that imports
/// both traits. It is not `Send`, so it is used from the thread that owns the communicator;
/// calls still take the process-wide MPI lock when MPI is not `Threading::Multiple`, in case an
/// [`MpiContext`] is in use on another thread.
///
/// `MPI_COMM_WORLD` has the same [`Context::communicator_id`] as `MpiContext::world()`; any
/// other communicator has none (always sound: each collective call then communicates).
#[repr(transparent)]
struct RsmpiComm(SimpleCommunicator);

impl AsContext for SimpleCommunicator {
    fn as_context(&self) -> &dyn Context {
        let view: *const RsmpiComm = (self as *const SimpleCommunicator).cast();
        // SAFETY: `RsmpiComm` is `repr(transparent)` over `SimpleCommunicator`, so both have the
        // same layout, and the view borrows `self` for the same lifetime.
        unsafe { &*view }
    }
}

impl RsmpiComm {
    /// `(rank, size)`, asked of MPI under the process-wide lock.
    fn rank_size(&self) -> (usize, usize) {
        let _guard = lock_unless_multiple();
        (self.0.rank() as usize, self.0.size() as usize)
    }

    /// Whether this is `MPI_COMM_WORLD` (asked of MPI under the process-wide lock).
    fn is_world(&self) -> bool {
        let _guard = lock_unless_multiple();
        self.0.compare(&SimpleCommunicator::world()) == CommunicatorRelation::Identical
    }
}

/// Every MPI call below holds the process-wide lock (unless MPI is `Threading::Multiple`), as
/// [`MpiContext`]'s calls do, so an `MpiContext` in use on another thread is never entered at
/// the same time. The lock is not re-entrant: inside a locked section only `self.0` is called.
impl Context for RsmpiComm {
    fn rank(&self) -> usize {
        self.rank_size().0
    }

    fn size(&self) -> usize {
        self.rank_size().1
    }

    fn barrier(&self) {
        let _guard = lock_unless_multiple();
        self.0.barrier();
    }

    fn broadcast_from_root(&self, data: Option<Vec<u8>>) -> Vec<u8> {
        let _guard = lock_unless_multiple();
        broadcast(&self.0, self.0.rank() as usize, MPI_MAX_COUNT, data)
    }

    fn gather_to_root(&self, data: Vec<u8>) -> Option<Vec<Vec<u8>>> {
        let _guard = lock_unless_multiple();
        let (rank, size) = (self.0.rank() as usize, self.0.size() as usize);
        gather(&self.0, rank, size, MPI_MAX_COUNT, data)
    }

    fn reduce_to_root(
        &self,
        data: Vec<u8>,
        merge: &dyn Fn(Vec<u8>, Vec<u8>) -> Vec<u8>,
    ) -> Option<Vec<u8>> {
        let _guard = lock_unless_multiple();
        let (rank, size) = (self.0.rank() as usize, self.0.size() as usize);
        reduce(&self.0, rank, size, MPI_MAX_COUNT, data, merge)
    }

    fn split_by_node(&self) -> Box<dyn Context> {
        let node = {
            let _guard = lock_unless_multiple();
            self.0.split_shared(self.0.rank())
        };
        Box::new(MpiContext::labelled(
            node,
            "the node-local part of an MPI communicator".to_owned(),
        ))
    }

    fn split(&self, color: Option<u32>, key: u32) -> Option<Box<dyn Context>> {
        let sub = {
            let _guard = lock_unless_multiple();
            self.0
                .split_by_color_with_key(mpi_color(color), mpi_key(key))
        };
        sub.map(|c| {
            Box::new(MpiContext::labelled(
                c,
                "a split of an MPI communicator".to_owned(),
            )) as Box<dyn Context>
        })
    }

    fn describe(&self) -> String {
        let size = self.size();
        if self.is_world() {
            format!("MPI_COMM_WORLD ({size} ranks)")
        } else {
            format!("an MPI communicator ({size} ranks)")
        }
    }

    fn communicator_id(&self) -> Option<u64> {
        self.is_world().then_some(WORLD_ID)
    }
}

/// An MPI color: `None` is `MPI_UNDEFINED`; colors above `i32::MAX` (not allowed by MPI) are
/// folded onto it.
fn mpi_color(color: Option<u32>) -> Color {
    match color {
        Some(c) => Color::with_value(i32::try_from(c).unwrap_or(i32::MAX)),
        None => Color::undefined(),
    }
}

/// An MPI key (an `int`): larger keys order last, as they would.
fn mpi_key(key: u32) -> i32 {
    i32::try_from(key).unwrap_or(i32::MAX)
}

fn lock_unless_multiple() -> Option<MutexGuard<'static, ()>> {
    (mpi::environment::threading_support() < Threading::Multiple)
        .then(|| MPI_CALLS.lock().unwrap_or_else(|p| p.into_inner()))
}

/// The byte broadcast of the module docs over `comm`.
fn broadcast(
    comm: &SimpleCommunicator,
    rank: usize,
    max_message_bytes: usize,
    data: Option<Vec<u8>>,
) -> Vec<u8> {
    let root = comm.process_at_rank(0);
    let mut buf = if rank == 0 {
        data.unwrap_or_default()
    } else {
        Vec::new()
    };
    let mut len = buf.len() as u64;
    // Non-root ranks may wait here for the whole install: wait without spinning, so that on
    // oversubscribed nodes they leave the CPU to the root (MPI_Ibcast + test + growing naps).
    mpi::request::scope(|scope| {
        let mut request = root.immediate_broadcast_into(scope, &mut len);
        let mut nap = Duration::from_micros(50);
        loop {
            match request.test() {
                Ok(_) => break,
                Err(pending) => {
                    request = pending;
                    std::thread::sleep(nap);
                    nap = (nap * 2).min(MAX_NAP);
                }
            }
        }
    });
    if rank != 0 {
        buf = vec![0; usize::try_from(len).expect("a broadcast larger than memory")];
    }
    for chunk in buf.chunks_mut(max_message_bytes) {
        root.broadcast_into(chunk);
    }
    crate::traffic::broadcast(rank, comm.size() as usize, buf.len());
    buf
}

/// Waits for `request` with growing naps instead of spinning (see [`broadcast`]).
fn wait_napping<'a, S: mpi::request::Scope<'a>>(mut request: mpi::request::Request<'a, u64, S>) {
    let mut nap = Duration::from_micros(50);
    loop {
        match request.test() {
            Ok(_) => return,
            Err(pending) => {
                request = pending;
                std::thread::sleep(nap);
                nap = (nap * 2).min(MAX_NAP);
            }
        }
    }
}

/// The byte reduce of the module docs over `comm`.
fn reduce(
    comm: &SimpleCommunicator,
    rank: usize,
    size: usize,
    max_message_bytes: usize,
    data: Vec<u8>,
    merge: &dyn Fn(Vec<u8>, Vec<u8>) -> Vec<u8>,
) -> Option<Vec<u8>> {
    let mut send = |to: usize, bytes: Vec<u8>| {
        let dest = comm.process_at_rank(to as i32);
        dest.send_with_tag(&(bytes.len() as u64), REDUCE_TAG);
        for chunk in bytes.chunks(max_message_bytes) {
            dest.send_with_tag(chunk, REDUCE_TAG);
        }
        crate::traffic::sent(1, bytes.len());
    };
    let mut recv = |from: usize| {
        let source = comm.process_at_rank(from as i32);
        let mut len = 0_u64;
        // The sender may still be busy (merging its own subtree): wait without spinning.
        mpi::request::scope(|scope| {
            wait_napping(source.immediate_receive_into_with_tag(scope, &mut len, REDUCE_TAG));
        });
        let mut bytes = vec![0_u8; usize::try_from(len).expect("a message larger than memory")];
        for chunk in bytes.chunks_mut(max_message_bytes) {
            source.receive_into_with_tag(chunk, REDUCE_TAG);
        }
        crate::traffic::received(1, bytes.len());
        bytes
    };
    crate::tree::binomial_reduce(rank, size, data, merge, &mut send, &mut recv)
}

/// The byte gather of the module docs over `comm`.
fn gather(
    comm: &SimpleCommunicator,
    rank: usize,
    size: usize,
    max_message_bytes: usize,
    data: Vec<u8>,
) -> Option<Vec<Vec<u8>>> {
    let root = comm.process_at_rank(0);
    let mut lens = vec![0_u64; size];
    comm.all_gather_into(&(data.len() as u64), &mut lens[..]);
    let lens: Vec<usize> = lens.into_iter().map(|l| l as usize).collect();

    // Per-rank piece per round, so that one round's total fits one MPI call.
    let piece = (max_message_bytes / size).max(1);
    let rounds = lens.iter().max().copied().unwrap_or(0).div_ceil(piece);
    let range = |round: usize, len: usize| (round * piece).min(len)..((round + 1) * piece).min(len);

    let mut out: Option<Vec<Vec<u8>>> =
        (rank == 0).then(|| lens.iter().map(|&l| Vec::with_capacity(l)).collect());
    let spare = [0_u8; 1];
    for round in 0..rounds {
        let mine = &data[range(round, data.len())];
        // An empty `Vec<u8>`'s dangling pointer is 0x1, which OpenMPI reads as
        // `MPI_IN_PLACE`: send empty pieces from a real address instead.
        let mine = if mine.is_empty() { &spare[..0] } else { mine };
        match out.as_mut() {
            Some(out) => {
                let counts: Vec<i32> = lens.iter().map(|&l| range(round, l).len() as i32).collect();
                let displs: Vec<i32> = counts
                    .iter()
                    .scan(0, |acc, &c| {
                        let d = *acc;
                        *acc += c;
                        Some(d)
                    })
                    .collect();
                let total = counts.iter().map(|&c| c as usize).sum();
                let mut recv = vec![0_u8; total];
                {
                    let mut partition = PartitionMut::new(&mut recv[..], &counts[..], &displs[..]);
                    root.gather_varcount_into_root(mine, &mut partition);
                }
                for (r, dest) in out.iter_mut().enumerate() {
                    let start = displs[r] as usize;
                    dest.extend_from_slice(&recv[start..start + counts[r] as usize]);
                }
            }
            None => root.gather_varcount_into(mine),
        }
    }
    crate::traffic::gather(rank, data.len(), out.as_deref());
    out
}
