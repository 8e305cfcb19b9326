//! What a [`Source`](crate::source::Source) carries of a large download kept in a partial
//! file: the handle its caller removes or keeps ([`Kept`]), and the counters progress reads
//! ([`Watch`]). The download itself ([`crate::ranged`]) answers through [`Partial`]; this
//! module imports neither it nor [`crate::source`], so that the ranged code may open sources
//! while a source carries a ranged download.

use std::path::PathBuf;
use std::sync::Arc;

/// A large download in progress, as its source's owner sees it.
pub(crate) trait Partial: Send + Sync {
    /// Bytes an earlier attempt had received, reused by this one.
    fn resumed_at(&self) -> u64;
    /// The partial file's path.
    fn path(&self) -> PathBuf;
    /// Stops the connections and removes the partial file, if its name still names it.
    fn remove(&self);
    /// Bytes received, kept ones included.
    fn received(&self) -> u64;
    /// Connections open.
    fn connections(&self) -> usize;
    /// The download's length.
    fn length(&self) -> u64;
    /// The partial file and the offset of the download's byte 0 in it, once every byte was
    /// received; `None` before.
    fn whole(&self) -> Option<std::io::Result<(std::fs::File, u64)>>;
}

/// The partial file of a large download, as the caller handles it after the attempt.
#[derive(Clone)]
pub struct Kept(pub(crate) Arc<dyn Partial>);

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kept").field("path", &self.path()).finish()
    }
}

impl Kept {
    /// Bytes an earlier attempt had received, reused by this one (`0`: a fresh download).
    pub fn resumed_at(&self) -> u64 {
        self.0.resumed_at()
    }

    /// The partial file's path (for messages).
    pub fn path(&self) -> PathBuf {
        self.0.path()
    }

    /// Stops the download's connections and removes the partial file, if its name still
    /// names it.
    pub fn remove(&self) {
        self.0.remove()
    }

    /// Once every byte was received: the partial file, open for reading (a new handle on the
    /// file the download wrote, never opened again by name), and the offset of the download's
    /// byte 0 in it, behind its header. What a caller that reads the download again after its
    /// verification pass (the seekable install) reads instead of a copy of its own; what it
    /// reads there is not trusted on this account (it checks it against what it verified).
    /// `None` while bytes are missing.
    pub fn whole(&self) -> Option<std::io::Result<(std::fs::File, u64)>> {
        self.0.whole()
    }
}

/// Bytes received (kept ones included) and connections open, for progress.
#[derive(Clone)]
pub(crate) struct Watch(pub(crate) Arc<dyn Partial>);

impl Watch {
    pub(crate) fn received(&self) -> u64 {
        self.0.received()
    }
    pub(crate) fn connections(&self) -> usize {
        self.0.connections()
    }
    /// Whether every byte of the file was received.
    pub(crate) fn complete(&self) -> bool {
        self.received() >= self.0.length()
    }
}
