//! The install of a seekable tarball (a download entry with `index-sha256`, see
//! `docs/seekable.md`) on every core:
//!
//! ```text
//!  reader thread: source -> SHA-256 -> buffers | calling thread: -> a private temp file
//!                (a large download kept in a partial file: read through, and left there:
//!                the tarball is then read again from that file, never copied)
//!  then: SHA-256 of the whole file against the entry's `sha256`
//!        -> the index read and authenticated (its SHA-256 against `index-sha256`, its
//!           structure, its tree against `git-tree-sha1` / `git-tree-sha256`)
//!        -> members decompressed, checked and written by CLIMA_ARTIFACTS_INSTALL_THREADS
//!           workers into the install's temp dir (`extract::seekable::extract_parallel`)
//!        -> the tree of the blob ids written against the manifest's -> rename
//! ```
//!
//! This is the install of such a download whose index could not be read first (a server
//! without byte ranges, bytes received over MPI, ...: see `streamed.rs`, which otherwise
//! unpacks the members while the file arrives). The hook is
//! [`InstallRequest::install_body`] handing such a download here; everything
//! around it (the lock, retries, partial files, the rename) is the one-pass install's. A file
//! with that key but without an index (a classic tarball) is unpacked from the temp file in
//! one pass, with the same checks.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;

use crate::extract::extract_buffered_at;
use crate::extract::seekable::{
    Expected, IndexLimits, Parallelism, authenticate, extract_parallel_at, read_index,
};

use super::*;

/// The name of the tarball in its private temp dir.
const SPOOLED: &str = "tarball";

impl InstallRequest<'_> {
    /// Installs the seekable tarball of `body` (whose entry gives `index_sha256`) into `tmp`:
    /// the whole file into a private temp dir first (hashed as it comes), or, for a large
    /// download kept in a partial file (`kept`), read through the SHA-256 and left there;
    /// then the index authenticated and the members unpacked in parallel; both tree hashes
    /// checked, `tmp` renamed into place.
    pub(super) fn install_seekable(
        &self,
        attempt: &Attempt,
        tmp: TempDir<'_>,
        body: Body,
        (index_sha256, kept): (Sha256, Option<&Kept>),
    ) -> Result<(PathBuf, u64), SourceFailure> {
        let url = attempt.download.url.clone();
        // A large download is whole in its partial file once read: read again from there,
        // not from a second copy (which would take the tarball's size once more on disk).
        let (spooled, spool) = match kept {
            Some(kept) => (self.in_partial(attempt, body, kept)?, None),
            None => {
                let spool = self.new_temp_dir(&url)?;
                let (file, bytes) = self.spool(attempt, body, &spool)?;
                let path = spool.path().join(SPOOLED);
                (
                    Spooled {
                        file,
                        path,
                        base: 0,
                        bytes,
                    },
                    Some(spool),
                )
            }
        };
        let extracted = self.unpack_spooled(attempt, &tmp, &spooled, index_sha256);
        drop(spooled.file);
        drop(spool);
        // The download was checked whole before: what the depot refuses is the depot's fault,
        // reported as the one-pass install reports it (`depot_trouble`).
        let extracted = extracted?.map_err(|e| match e {
            ExtractError::LowDiskSpace { .. }
            | ExtractError::LowInodes { .. }
            | ExtractError::Io { .. } => self.depot_refused(&url, tmp.path(), &e),
            e => SourceFailure::Archive {
                url: url.clone(),
                reason: e.to_string(),
            },
        })?;
        self.check_trees(&url, &extracted)?;
        self.commit(&url, tmp).map(|dest| (dest, spooled.bytes))
    }

    /// Reads the index of `spooled`, authenticates it and unpacks the members into `tmp` on
    /// every core (a file without an index in one pass). The outer error is the index's, the
    /// inner one the unpacking's.
    fn unpack_spooled(
        &self,
        attempt: &Attempt,
        tmp: &TempDir<'_>,
        spooled: &Spooled,
        index_sha256: Sha256,
    ) -> Result<Result<crate::extract::Extracted, ExtractError>, SourceFailure> {
        let url = &attempt.download.url;
        let archive = |reason: String| SourceFailure::Archive {
            url: url.clone(),
            reason,
        };
        let limits = self.limits(tmp.path(), attempt);
        let index_limits = IndexLimits {
            max_entries: self.config.max_entries,
            ..IndexLimits::default()
        };
        let mut at = At {
            file: &spooled.file,
            base: spooled.base,
            len: spooled.bytes,
            pos: 0,
        };
        Ok(match read_index(&mut at, spooled.bytes, &index_limits) {
            Err(e) => return Err(archive(format!("the seekable tarball's index: {e}"))),
            // The entry says seekable, the file is not: unpacked as any tarball.
            Ok(None) => {
                at.pos = 0;
                let reader = BufReader::with_capacity(1 << 20, at);
                extract_buffered_at(reader, tmp.dir(), &limits)
            }
            Ok(Some((locator, doc))) => {
                let expected = Expected {
                    tree_sha1: self.hash,
                    tree_sha256: self.hash_sha256,
                    index_sha256: Some(index_sha256),
                };
                let auth = authenticate(&doc, &locator, &expected, &index_limits)
                    .map_err(|e| archive(format!("the seekable tarball's index: {e}")))?;
                drop(doc);
                let how = Parallelism::with_threads(self.config.install_threads);
                let tarball = (&spooled.file, spooled.path.as_path(), spooled.base);
                extract_parallel_at(&auth, tarball, tmp.dir(), &limits, &how)
            }
        })
    }

    /// Reads `body`, a large download kept in the partial file `kept`, to its end through
    /// the SHA-256 without a copy, checks it, and returns the partial file to read it again.
    fn in_partial(
        &self,
        attempt: &Attempt,
        mut body: Body,
        kept: &Kept,
    ) -> Result<Spooled, SourceFailure> {
        let dl = &attempt.download;
        let url = dl.url.as_str();
        let read = io::copy(&mut body, &mut io::sink());
        if let Some(e) = self.source_failure(&body, dl) {
            return Err(e);
        }
        if let Err(e) = read {
            return Err(self.broken(url, download::describe_io(&e, &self.net), &e));
        }
        let (actual, bytes) = body.finish();
        super::attempt::check_sha256(url, dl, actual, bytes)?;
        let path = kept.path();
        let failed = |e: io::Error| SourceFailure::Install {
            url: url.to_owned(),
            error: Box::new(Error::io("read the downloaded tarball again in", &path, e)),
        };
        let missing = || io::Error::other("the partial download is not complete after its end");
        let (file, base) = kept
            .whole()
            .unwrap_or_else(|| Err(missing()))
            .map_err(failed)?;
        Ok(Spooled {
            file,
            path: path.clone(),
            base,
            bytes,
        })
    }

    /// Reads `body` to its end into a new file of `spool`, and checks its SHA-256 against the
    /// entry's: the file, open for reading, and its length.
    fn spool(
        &self,
        attempt: &Attempt,
        mut body: Body,
        spool: &TempDir<'_>,
    ) -> Result<(std::fs::File, u64), SourceFailure> {
        let dl = &attempt.download;
        let url = dl.url.as_str();
        let file = spool
            .dir()
            .create_new_rw(SPOOLED, 0o600)
            .map_err(|e| self.spool_error(url, spool, e))?;
        // The body's buffers are written as they are, without a copy.
        let mut out = &file;
        let (copied, read) = loop {
            let chunk = match body.fill_buf() {
                Ok([]) => break (Ok(()), Ok(())),
                Ok(chunk) => chunk,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => break (Ok(()), Err(e)),
            };
            let n = chunk.len();
            if let Err(e) = out.write_all(chunk) {
                break (Err(e), Ok(()));
            }
            body.consume(n);
        };
        if let Some(e) = self.source_failure(&body, dl) {
            return Err(e);
        }
        if let Err(e) = read {
            return Err(self.broken(url, download::describe_io(&e, &self.net), &e));
        }
        // The body had no failure: what failed is the write.
        copied.map_err(|e| self.spool_error(url, spool, e))?;
        let (actual, bytes) = body.finish();
        super::attempt::check_sha256(url, dl, actual, bytes)?;
        Ok((file, bytes))
    }

    /// A failure of the depot while it keeps the downloaded tarball.
    fn spool_error(&self, url: &str, spool: &TempDir<'_>, e: io::Error) -> SourceFailure {
        SourceFailure::Install {
            url: url.to_owned(),
            error: Box::new(Error::io(
                "keep the downloaded tarball in",
                spool.path().join(SPOOLED),
                e,
            )),
        }
    }
}

/// The whole downloaded tarball, checked against the entry's SHA-256: `bytes` bytes from
/// `base` in `file` (the spooled copy at 0, or a partial download behind its header), at
/// `path` for messages.
struct Spooled {
    file: std::fs::File,
    path: PathBuf,
    base: u64,
    bytes: u64,
}

/// A reader of `len` bytes from `base` in `file`, which seeks in them.
struct At<'a> {
    file: &'a std::fs::File,
    base: u64,
    len: u64,
    pos: u64,
}

impl Read for At<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.len.saturating_sub(self.pos);
        let n = (buf.len() as u64).min(left) as usize;
        if n == 0 {
            return Ok(0);
        }
        let got = self.file.read_at(&mut buf[..n], self.base + self.pos)?;
        self.pos += got as u64;
        Ok(got)
    }
}

impl Seek for At<'_> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let to = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => self.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = to.ok_or_else(|| io::Error::other("a seek before byte 0"))?;
        Ok(self.pos)
    }
}
