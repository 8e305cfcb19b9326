//! The install of a seekable tarball (a download entry with `index-sha256`, see
//! `docs/seekable.md`) on every core:
//!
//! ```text
//!  reader thread: source -> SHA-256 -> buffers | calling thread: -> a private temp file
//!  then: SHA-256 of the whole file against the entry's `sha256`
//!        -> the index read and authenticated (its SHA-256 against `index-sha256`, its
//!           structure, its tree against `git-tree-sha1` / `git-tree-sha256`)
//!        -> members decompressed, checked and written by CLIMA_ARTIFACTS_INSTALL_THREADS
//!           workers into the install's temp dir (`extract::seekable::extract_parallel`)
//!        -> the tree of the blob ids written against the manifest's -> rename
//! ```
//!
//! The hook is [`InstallRequest::install_body`] handing such a download here; everything
//! around it (the lock, retries, partial files, the rename) is the one-pass install's. A file
//! with that key but without an index (a classic tarball) is unpacked from the temp file in
//! one pass, with the same checks.

use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};

use crate::extract::extract_buffered_at;
use crate::extract::seekable::{
    Expected, IndexLimits, Parallelism, authenticate, extract_parallel, read_index,
};

use super::*;

/// The name of the tarball in its private temp dir.
const SPOOLED: &str = "tarball";

impl InstallRequest<'_> {
    /// Installs the seekable tarball of `body` (whose entry gives `index_sha256`) into `tmp`:
    /// the whole file into a private temp dir first (hashed as it comes), then the index
    /// authenticated and the members unpacked in parallel; both tree hashes checked, `tmp`
    /// renamed into place.
    pub(super) fn install_seekable(
        &self,
        attempt: &Attempt,
        tmp: TempDir<'_>,
        body: Body,
        index_sha256: Sha256,
    ) -> Result<(PathBuf, u64), SourceFailure> {
        let url = attempt.download.url.clone();
        let spool = self.new_temp_dir(&url)?;
        let (mut file, bytes) = self.spool(attempt, body, &spool)?;
        let limits = self.limits(tmp.path(), attempt);
        let archive = |reason: String| SourceFailure::Archive {
            url: url.clone(),
            reason,
        };
        let index_limits = IndexLimits {
            max_entries: self.config.max_entries,
            ..IndexLimits::default()
        };
        let extracted = match read_index(&mut file, bytes, &index_limits) {
            Err(e) => return Err(archive(format!("the seekable tarball's index: {e}"))),
            // The entry says seekable, the file is not: unpacked as any tarball.
            Ok(None) => {
                file.seek(SeekFrom::Start(0))
                    .map_err(|e| self.spool_error(&url, &spool, e))?;
                let reader = BufReader::with_capacity(1 << 20, &file);
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
                let at = spool.path().join(SPOOLED);
                extract_parallel(&auth, (&file, &at), tmp.dir(), &limits, &how)
            }
        };
        drop(file);
        drop(spool);
        // The download was checked whole before: what the depot refuses is the depot's fault,
        // reported as the one-pass install reports it (`depot_trouble`).
        let extracted = extracted.map_err(|e| match e {
            ExtractError::LowDiskSpace { .. }
            | ExtractError::LowInodes { .. }
            | ExtractError::Io { .. } => self.depot_refused(&url, tmp.path(), &e),
            e => archive(e.to_string()),
        })?;
        self.check_trees(&url, &extracted)?;
        self.commit(&url, tmp).map(|dest| (dest, bytes))
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
