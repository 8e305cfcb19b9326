//! What the byte primitives of this crate sent and received: messages and payload bytes, per
//! process (every context of the process, every thread) and per thread (with
//! [`on_thread_ranks`](crate::on_thread_ranks) each rank is a thread, so this is that rank's).
//!
//! Counted at the level of the [`Context`](crate::Context) primitives, payload bytes only (not
//! the length words of the wire protocol, not MPI's own forwarding inside a collective):
//!
//! - broadcast: the root sent one message of the payload's size, every other rank received one;
//! - gather: every other rank sent one message, the root received one per other rank;
//! - reduce ([`Context::reduce_to_root`](crate::Context::reduce_to_root)): each point-to-point
//!   message of the tree, on both ends.
//!
//! Counting is a few relaxed atomic additions per call; read it with [`process`] or
//! [`this_thread`] before and after a call and take [`Traffic::since`].

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Messages and bytes sent and received (see the module docs for what counts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Traffic {
    /// Messages sent.
    pub sent_messages: u64,
    /// Payload bytes sent.
    pub sent_bytes: u64,
    /// Messages received.
    pub received_messages: u64,
    /// Payload bytes received.
    pub received_bytes: u64,
}

impl Traffic {
    /// What was counted since `earlier` (a reading of the same counter).
    pub fn since(&self, earlier: &Traffic) -> Traffic {
        Traffic {
            sent_messages: self.sent_messages.saturating_sub(earlier.sent_messages),
            sent_bytes: self.sent_bytes.saturating_sub(earlier.sent_bytes),
            received_messages: self
                .received_messages
                .saturating_sub(earlier.received_messages),
            received_bytes: self.received_bytes.saturating_sub(earlier.received_bytes),
        }
    }
}

impl std::fmt::Display for Traffic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "sent_messages={} sent_bytes={} received_messages={} received_bytes={}",
            self.sent_messages, self.sent_bytes, self.received_messages, self.received_bytes
        )
    }
}

static SENT_MESSAGES: AtomicU64 = AtomicU64::new(0);
static SENT_BYTES: AtomicU64 = AtomicU64::new(0);
static RECEIVED_MESSAGES: AtomicU64 = AtomicU64::new(0);
static RECEIVED_BYTES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static THREAD: Cell<Traffic> = const { Cell::new(Traffic {
        sent_messages: 0,
        sent_bytes: 0,
        received_messages: 0,
        received_bytes: 0,
    }) };
}

/// The counts of this process so far.
pub fn process() -> Traffic {
    Traffic {
        sent_messages: SENT_MESSAGES.load(Ordering::Relaxed),
        sent_bytes: SENT_BYTES.load(Ordering::Relaxed),
        received_messages: RECEIVED_MESSAGES.load(Ordering::Relaxed),
        received_bytes: RECEIVED_BYTES.load(Ordering::Relaxed),
    }
}

/// The counts of the calling thread so far.
pub fn this_thread() -> Traffic {
    THREAD.with(Cell::get)
}

/// Counts `messages` messages of `bytes` payload bytes in all sent.
pub(crate) fn sent(messages: u64, bytes: usize) {
    SENT_MESSAGES.fetch_add(messages, Ordering::Relaxed);
    SENT_BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
    THREAD.with(|t| {
        let mut c = t.get();
        c.sent_messages += messages;
        c.sent_bytes += bytes as u64;
        t.set(c);
    });
}

/// Counts `messages` messages of `bytes` payload bytes in all received.
pub(crate) fn received(messages: u64, bytes: usize) {
    RECEIVED_MESSAGES.fetch_add(messages, Ordering::Relaxed);
    RECEIVED_BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
    THREAD.with(|t| {
        let mut c = t.get();
        c.received_messages += messages;
        c.received_bytes += bytes as u64;
        t.set(c);
    });
}

/// Counts a broadcast of `len` bytes on `rank` of `size`.
pub(crate) fn broadcast(rank: usize, size: usize, len: usize) {
    if size <= 1 {
        return;
    }
    if rank == 0 {
        sent(1, len);
    } else {
        received(1, len);
    }
}

/// Counts a gather on `rank`: this rank's `mine` bytes, or on the root all of `all`.
pub(crate) fn gather(rank: usize, mine: usize, all: Option<&[Vec<u8>]>) {
    match (rank, all) {
        (0, Some(all)) => {
            let others = all.get(1..).unwrap_or_default();
            received(others.len() as u64, others.iter().map(Vec::len).sum());
        }
        (0, None) => {}
        _ => sent(1, mine),
    }
}
