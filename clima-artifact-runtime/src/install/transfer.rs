//! How an install's progress reaches the user: through the reporter, into the lock's holder
//! line for processes waiting on it, and with the end line held until the install is
//! verified (a download is not "done" before its hashes are checked).

use std::time::{Duration, Instant};

use clima_artifact_fs::human_bytes;

use crate::progress::Transfer;
use clima_artifact_depot::HolderNote;

/// Progress of bytes received over MPI: not shown (the sender shows its download's).
pub(super) struct Unreported;

impl Transfer for Unreported {
    fn received(&mut self, _total: u64) {}
    fn done(self: Box<Self>, _bytes: u64, _elapsed: Duration) {}
    fn failed(self: Box<Self>, _reason: &str) {}
}

/// Forwards progress to the reporter and, every few seconds, to the lock's holder line.
pub(super) struct NotingTransfer {
    pub(super) inner: Box<dyn Transfer>,
    pub(super) note: HolderNote,
    pub(super) what: String,
    pub(super) size: Option<u64>,
    pub(super) last: Option<Instant>,
}

impl Transfer for NotingTransfer {
    fn received(&mut self, total: u64) {
        self.inner.received(total);
        if self
            .last
            .is_some_and(|t| t.elapsed() < Duration::from_secs(2))
        {
            return;
        }
        self.last = Some(Instant::now());
        let of = self
            .size
            .map(|s| format!(" of {}", human_bytes(s)))
            .unwrap_or_default();
        self.note.set(&format!(
            "downloading {}: {}{of}",
            self.what,
            human_bytes(total)
        ));
    }
    fn connections(&mut self, open: usize) {
        self.inner.connections(open);
    }
    fn done(self: Box<Self>, bytes: u64, elapsed: Duration) {
        self.note.set(&format!("verifying {}", self.what));
        self.inner.done(bytes, elapsed);
    }
    fn failed(self: Box<Self>, reason: &str) {
        self.inner.failed(reason);
    }
}

/// The end of a transfer whose bytes all arrived, held back until they are verified: the
/// reporter's "downloaded" line is for a download that turned out to be the artifact.
#[derive(Clone, Default)]
pub(super) struct EndLine(pub(super) std::sync::Arc<std::sync::Mutex<Option<Ended>>>);

/// A transfer that ended: it, its byte count and its time.
pub(super) type Ended = (Box<dyn Transfer>, u64, Duration);

impl EndLine {
    /// Tells the reporter the held end, if the transfer ended.
    pub(super) fn release(&self) {
        let held = self.0.lock().ok().and_then(|mut h| h.take());
        if let Some((transfer, bytes, elapsed)) = held {
            transfer.done(bytes, elapsed);
        }
    }
}

/// Forwards progress, and hands the end of the transfer to its [`EndLine`].
pub(super) struct HeldEnd {
    pub(super) inner: Option<Box<dyn Transfer>>,
    pub(super) end: EndLine,
}

impl Transfer for HeldEnd {
    fn received(&mut self, total: u64) {
        if let Some(t) = self.inner.as_mut() {
            t.received(total);
        }
    }
    fn connections(&mut self, open: usize) {
        if let Some(t) = self.inner.as_mut() {
            t.connections(open);
        }
    }
    fn done(mut self: Box<Self>, bytes: u64, elapsed: Duration) {
        if let (Some(t), Ok(mut held)) = (self.inner.take(), self.end.0.lock()) {
            *held = Some((t, bytes, elapsed));
        }
    }
    fn failed(mut self: Box<Self>, reason: &str) {
        if let Some(t) = self.inner.take() {
            t.failed(reason);
        }
    }
}
