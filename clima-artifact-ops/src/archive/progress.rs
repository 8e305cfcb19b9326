//! Progress lines of an upload (at the start, every 10 % or 10 s, at the end), given to the
//! caller's reporting as [`ArchiveEvent`]s whose [`line`](ArchiveEvent::line) is
//! [`Line::Progress`](super::Line::Progress).

use std::io::{self, Read};
use std::time::{Duration, Instant};

use clima_artifact_fs::printable;
use clima_artifact_runtime::progress::Reporting;

use super::ArchiveEvent;

/// The body of an upload, counted for the progress lines. No hash here: the file's MD5 and
/// SHA-256 come from the one pass that checked its tree hash, and the archive's MD5 of what it
/// received is compared with that MD5, so a file that changed after the check (or bytes
/// changed on the way) fails the comparison; hashing again while sending would only take a
/// core from the transfer.
pub(super) struct Counted<'p, 'n> {
    pub(super) inner: Box<dyn Read>,
    pub(super) progress: &'p mut Progress<'n>,
}

impl Read for Counted<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.add(n as u64);
        Ok(n)
    }
}

/// Progress lines of one upload: at the start, every 10 % or 10 s, and at the end.
pub(super) struct Progress<'n> {
    key: String,
    size: u64,
    sent: u64,
    started: Instant,
    last: Instant,
    last_tenth: u64,
    reporting: &'n Reporting,
}

impl<'n> Progress<'n> {
    pub(super) fn new(key: &str, size: u64, reporting: &'n Reporting) -> Progress<'n> {
        reporting.emit(ArchiveEvent::Uploading {
            key: key.to_owned(),
            size,
        });
        let now = Instant::now();
        Progress {
            key: printable(key).into_owned(),
            size,
            sent: 0,
            started: now,
            last: now,
            last_tenth: 0,
            reporting,
        }
    }

    pub(super) fn add(&mut self, n: u64) {
        self.sent += n;
        let tenth = (self.sent * 10).checked_div(self.size).unwrap_or(10);
        if self.sent < self.size
            && (tenth > self.last_tenth || self.last.elapsed() >= Duration::from_secs(10))
        {
            self.last_tenth = tenth;
            self.last = Instant::now();
            self.reporting.emit(ArchiveEvent::UploadProgress {
                key: self.key.clone(),
                sent: self.sent,
                size: self.size,
            });
        }
    }

    pub(super) fn done(&self) {
        self.reporting.emit(ArchiveEvent::Uploaded {
            key: self.key.clone(),
            sent: self.sent,
            took: self.started.elapsed(),
        });
    }
}
