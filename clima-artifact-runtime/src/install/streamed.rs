//! The install of a seekable tarball (a download entry with `index-sha256`, see
//! `docs/seekable.md`) whose index is read first, so that its members are unpacked on every
//! core while the rest of the file arrives:
//!
//! ```text
//!  the file's last bytes (a range request; a local file read directly)
//!    -> footer -> index -> authenticated (its SHA-256 against `index-sha256`, its structure,
//!       its tree against `git-tree-sha1` / `git-tree-sha256`)
//!  then the download, as any other (one stream, or a large one over several connections
//!  kept in its partial file):
//!  reader thread: source -> SHA-256 -> buffers
//!    | CLIMA_ARTIFACTS_INSTALL_THREADS workers: each member taken from those buffers in file
//!    | order (within the unpacking's memory budget), decompressed, checked against the index,
//!    | written into the install's temp dir (`extract::seekable::extract_parallel_stream`)
//!  -> the rest (end-of-archive member, index, footer) read through the SHA-256
//!  -> the SHA-256 of the whole file against the entry's `sha256`, the tree of the blob ids
//!     written against the manifest's -> rename
//! ```
//!
//! So the SHA-256 of the tarball runs beside the decompression, the blob hashes and the
//! writes, instead of before them, and the tarball is never written to disk and read back
//! (a large download's partial file aside, which its connections write as before). Nothing
//! is visible before every check passed: the members are written into the private temp dir,
//! which is renamed only after the whole file's SHA-256 matched.
//!
//! Anything that keeps the index from being read first gives the install of `seekable.rs`
//! (the whole file first, then its index): a declared size under 8 MiB (a request more
//! would cost more than starting early gains), a server without byte ranges, a range that fails,
//! a file without an index, an index that fails its checks (which that install then reports,
//! after the file's SHA-256, exactly as before), bytes received over MPI and a download sent
//! over MPI to the node leaders (node-local mode), and a large download that continues a
//! partial file an earlier attempt kept (its kept bytes are read
//! from disk, and the tail is not asked for once more).

use std::sync::Arc;

use clima_artifact_extract::seekable::{
    Authenticated, Expected, Parallelism, extract_parallel_stream,
};

use super::attempt::check_sha256;
use super::*;
use clima_artifact_fs::human_bytes;

/// Most bytes read on after the unpacking of a stream failed, to tell a wrong download (its
/// SHA-256 named) from a file that is what the manifest says but lies inside.
const WRONG_DOWNLOAD_READ: u64 = 64 << 20;

/// Declared sizes below which the index is not read first: the unpacking of a small file gains
/// less from starting early than a request more costs (a round trip to the server).
const INDEX_FIRST_FROM: u64 = 8 << 20;

/// Most bytes read after the end of the file the index describes: a longer body is not the
/// tarball (its SHA-256 cannot match), and is not read on.
const TAIL_CAP: u64 = 1 << 20;

impl InstallRequest<'_> {
    /// The authenticated index of the seekable download of `attempt`, read before its body
    /// (see the module's documentation); `None` when it cannot be (the install then reads the
    /// whole file first, as before).
    pub(super) fn index_first(&self, attempt: &Attempt) -> Option<Arc<Authenticated>> {
        let dl = &attempt.download;
        let (index_sha256, sha256) = (dl.index_sha256?, dl.sha256?);
        if dl.size.is_some_and(|size| size < INDEX_FIRST_FROM) {
            return None;
        }
        // Bytes received over MPI open no URL. A download sent over MPI to the node leaders
        // (node-local mode) is not worth a request more: the job waits for the leaders, which
        // receive bytes without a URL to ask the last bytes of, and so unpack after the last
        // byte; the sender does the same and the server is asked once.
        if self.agent.is_none() || self.taps.is_some() {
            return None;
        }
        if self.continues_partial(&dl.url) {
            return None;
        }
        if self.index_first_failed.borrow().contains(&dl.url) {
            return None;
        }
        let download = Download {
            url: dl.url.clone(),
            sha256,
            size: dl.size,
            index_sha256: Some(index_sha256),
        };
        let expected = Expected {
            tree_sha1: self.hash,
            tree_sha256: self.hash_sha256,
            index_sha256: Some(index_sha256),
        };
        // One try: the ordinary download that follows is retried as the policy says, and a
        // failing server is not asked again for the tail on top of it.
        let mut once = self.net.clone();
        once.retry.attempts = 1;
        let via = crate::ranged_source::Via {
            net: &once,
            agent: self.agent.as_ref(),
        };
        let folder = (self.manifest.folder.as_path(), self.config);
        match crate::ranged_source::authenticated_index_via(&expected, &download, folder, via) {
            Ok((_, auth)) => Some(auth),
            Err(_) => {
                // Not asked again by the later attempts of this URL: each reads the whole
                // file first.
                self.index_first_failed.borrow_mut().push(dl.url.clone());
                None
            }
        }
    }

    /// Whether a large download of `url` kept by an earlier attempt is there to continue.
    fn continues_partial(&self, url: &str) -> bool {
        self.target
            .staging
            .partial(url)
            .is_some_and(|p| p.dir.entry(&p.name).is_ok_and(|e| e.is_some()))
    }

    /// Installs the seekable tarball of `body`, whose authenticated index is `auth`, into
    /// `tmp`: its members unpacked on every core as they arrive, the rest read through the
    /// SHA-256, both hashes checked, `tmp` renamed into place.
    pub(super) fn install_streamed(
        &self,
        attempt: &Attempt,
        tmp: TempDir<'_>,
        mut body: Body,
        auth: &Authenticated,
    ) -> Result<(PathBuf, u64), SourceFailure> {
        let dl = &attempt.download;
        let url = dl.url.as_str();
        let limits = self.limits(tmp.path(), attempt);
        let how = Parallelism::with_threads(self.config.install_threads);
        let extracted = match extract_parallel_stream(auth, &mut body, tmp.dir(), &limits, &how) {
            Ok(extracted) => extracted,
            Err(e) => return Err(self.stream_failed(attempt, body, tmp.path(), &e)),
        };
        let (actual, bytes) = self.read_tail(body, dl, auth)?;
        check_sha256(url, dl, actual, bytes)?;
        self.check_trees(url, &extracted)?;
        self.commit(url, tmp).map(|dest| (dest, bytes))
    }

    /// Reads the rest of `body` after the members (the end-of-archive member, the index, the
    /// footer) through the SHA-256: the file's SHA-256 and length.
    fn read_tail(
        &self,
        mut body: Body,
        dl: &Fetch,
        auth: &Authenticated,
    ) -> Result<(Sha256, u64), SourceFailure> {
        let url = dl.url.as_str();
        let locator = auth.locator();
        let end = locator
            .index_offset
            .saturating_add(locator.index_length)
            .saturating_add(locator.flavour.footer_len());
        let before = body.consumed();
        let rest = end.saturating_sub(before);
        let drained = io::copy(&mut (&mut body).take(rest + TAIL_CAP + 1), &mut io::sink());
        if let Some(e) = self.source_failure(&body, dl) {
            return Err(e);
        }
        if let Err(e) = drained {
            return Err(self.broken(url, download::describe_io(&e, &self.net), &e));
        }
        if body.consumed() - before > rest + TAIL_CAP {
            return Err(SourceFailure::Archive {
                url: url.to_owned(),
                reason: format!(
                    "the server kept sending after the end of the seekable tarball (byte {end}, \
                     where its index says it ends): stopped reading {} past it; this is not \
                     the tarball the manifest describes",
                    human_bytes(TAIL_CAP)
                ),
            });
        }
        Ok(body.finish())
    }

    /// The failure of an install whose unpacking of `body` into `tmp` stopped with `e`: the
    /// source's own failure first; the depot's trouble as the one-pass install reports it;
    /// else a wrong download when its SHA-256 says so within [`WRONG_DOWNLOAD_READ`] more
    /// bytes, or the member's refusal, naming the URL.
    fn stream_failed(
        &self,
        attempt: &Attempt,
        body: Body,
        tmp: &Path,
        e: &ExtractError,
    ) -> SourceFailure {
        let dl = &attempt.download;
        if let Some(failure) = self.source_failure(&body, dl) {
            return failure;
        }
        if matches!(
            e,
            ExtractError::LowDiskSpace { .. }
                | ExtractError::LowInodes { .. }
                | ExtractError::Io { .. }
        ) {
            return self.depot_trouble(attempt, body, tmp, e);
        }
        // Refused from the authenticated index, before any member was read: the rest of the
        // body cannot change that (its SHA-256 would only say again that this is the file
        // whose index said so), and is not read.
        if matches!(
            e,
            ExtractError::TooLarge { .. } | ExtractError::TooManyEntries { .. }
        ) {
            return SourceFailure::Archive {
                url: dl.url.clone(),
                reason: e.to_string(),
            };
        }
        if let Some(wrong) = self.wrong_download(body, dl, WRONG_DOWNLOAD_READ) {
            return wrong;
        }
        SourceFailure::Archive {
            url: dl.url.clone(),
            reason: e.to_string(),
        }
    }
}
