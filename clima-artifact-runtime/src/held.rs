//! Only what changed (issue 49, item 4): the files of a seekable artifact that the depots
//! already hold under any name (an installed artifact, such as the version before this one,
//! or files fetched one by one) are copied instead of fetched. Both ranged installs use it:
//! the whole install from ranges (`install::reuse`) and the fetch of some files (`partial`).
//!
//! ```text
//! Blobs::scan (bounded: SCAN_ENTRIES) -> per entry of the authenticated index:
//!   Blobs::find(blob SHA-1, size)  (reached again without links, hashed: verified now)
//!   -> copy_checked: copied while hashed again, SHA-1 and SHA-256 blob ids against the
//!      index's; a mismatch (the file changed meanwhile) leaves nothing and the entry is
//!      fetched by ranges with the rest
//! ```
//!
//! Copied, never hard-linked: a hard link would share the inode with the other artifact's
//! file, whose owner can make it writable and change it (in a shared depot, someone else),
//! changing this artifact too without any install seeing it; and a hard link cannot be checked
//! once and then trusted, since the check and the link would be two moments. A copy is checked
//! byte for byte as it is written: what the new artifact holds is exactly what was hashed.

use std::io::{Read, Write};

use clima_artifact_depot::{BlobLimits, Blobs, PartialFiles};
use clima_artifact_extract::seekable::{Authenticated, IndexEntry};
use clima_artifact_extract::tree_hash::{BlobHasher, EntryMode, Formats};

use crate::ranged_source::{Destination, Refusal};
use crate::{Config, Error};

/// Most entries (files, folders, symlinks of installed artifacts and partial folders, over
/// every depot) the scan visits: about a second of `readdir` on a local disk. Beyond it the
/// rest of the depots is not looked at: files there are fetched as if nobody held them (the
/// install stays correct, it only receives more). `Config::max_entries` lowers it.
pub(crate) const SCAN_ENTRIES: u64 = 1_000_000;

/// The content the depots of a config hold, for one install.
pub(crate) struct Held {
    blobs: Blobs,
}

impl Held {
    /// Notes the files of the installed artifacts and partial folders of `config`'s depots
    /// (nothing is read), within [`SCAN_ENTRIES`] (or `config.max_entries`, if fewer).
    pub(crate) fn scan(config: &Config) -> Held {
        let limits = BlobLimits {
            max_entries: config.max_entries.min(SCAN_ENTRIES),
        };
        Held {
            blobs: Blobs::scan(&config.search_depots(), limits),
        }
    }

    /// Whether the scan saw no file and no folder at all: nothing can be reused.
    pub(crate) fn is_empty(&self) -> bool {
        self.blobs.visited() == 0
    }

    /// Whether the files held, with `already` bytes of members held otherwise, cover at least
    /// `need` bytes of members of `entries` (those `skip` does not exclude), looked at largest
    /// first and each found verified; stops as soon as they do. A file found here is hashed
    /// again when it is copied.
    pub(crate) fn covers(
        &mut self,
        entries: &[IndexEntry],
        skip: impl Fn(usize) -> bool,
        already: u64,
        need: u64,
    ) -> bool {
        let mut order: Vec<usize> = (0..entries.len())
            .filter(|i| !skip(*i) && entries[*i].mode != EntryMode::Symlink)
            .collect();
        order.sort_by_key(|i| std::cmp::Reverse(entries[*i].length));
        let mut held = already;
        for i in order {
            if held >= need {
                break;
            }
            let e = &entries[i];
            if self.blobs.find(&e.blob.sha1, e.size).is_some() {
                held += e.length;
            }
        }
        held >= need
    }

    /// Copies into `dest` a file the depots hold with the content of entry `e` (a file, not a
    /// symlink), checked as it is copied ([`copy_checked`]): its `Done` when copied, `None`
    /// when nobody holds it or what was found is not that content (nothing is left in
    /// `dest`), an error when `dest` cannot be written.
    pub(crate) fn copy_into<'d, D: Destination>(
        &mut self,
        e: &IndexEntry,
        dest: &'d D,
    ) -> Result<Option<D::Done<'d>>, Error> {
        if e.mode == EntryMode::Symlink {
            return Ok(None);
        }
        match self.blobs.find(&e.blob.sha1, e.size) {
            Some(mut found) => copy_entry_from(dest, e, &mut found.file),
            None => Ok(None),
        }
    }
}

/// Copies `from` (a file the depots hold) into `dest` as entry `e`, checked as it is copied
/// ([`copy_checked`]): its `Done` when it is `e`'s content, else `None` (nothing left in
/// `dest`); an error when `dest` cannot be written.
pub(crate) fn copy_entry_from<'d, D: Destination>(
    dest: &'d D,
    e: &IndexEntry,
    from: &mut impl Read,
) -> Result<Option<D::Done<'d>>, Error> {
    dest.file(e, &mut |mut out| copy_checked(from, e, &mut out))?
        .map_err(|err| Error::io("write", dest.path_of(e), err))
}

/// The entries `todo` of `auth`'s index (files asked for that the partial folder `files` does
/// not have) whose content the depots of `config` hold under other names, copied, checked,
/// into `files` (made visible only once their blob ids are the index's): the entries copied,
/// and those still to fetch, in the order given.
pub(crate) fn copy_into_partial(
    auth: &Authenticated,
    todo: Vec<usize>,
    files: &PartialFiles<'_>,
    config: &Config,
) -> Result<(Vec<usize>, Vec<usize>), Refusal> {
    let entries = &auth.index().entries;
    if todo.iter().all(|i| entries[*i].mode == EntryMode::Symlink) {
        return Ok((Vec::new(), todo));
    }
    let mut held = Held::scan(config);
    if held.is_empty() {
        return Ok((Vec::new(), todo));
    }
    let (mut copied, mut rest) = (Vec::new(), Vec::new());
    for i in todo {
        let e = &entries[i];
        if std::str::from_utf8(&e.path).is_err() {
            rest.push(i);
            continue;
        }
        match held.copy_into(e, files) {
            Ok(Some(pending)) => {
                pending
                    .publish()
                    .map_err(|err| Refusal::Fatal(err.into()))?;
                copied.push(i);
            }
            Ok(None) => rest.push(i),
            Err(err) => return Err(Refusal::Fatal(err)),
        }
    }
    Ok((copied, rest))
}

/// Copies `from` into `out` while hashing it: `Ok(true)` when it held exactly `e.size` bytes
/// whose git blob ids (SHA-1, and SHA-256 when the index has them) are `e`'s; `Ok(false)`
/// when not, or when `from` cannot be read (then what was written is not that content and
/// must be thrown away); an error only when `out` cannot be written.
pub(crate) fn copy_checked(
    from: &mut impl Read,
    e: &IndexEntry,
    out: &mut impl Write,
) -> std::io::Result<bool> {
    let mut blob = BlobHasher::with_formats(e.size, Formats::with_sha256(e.blob.sha256.is_some()));
    let mut buf = vec![0; 1 << 20];
    let mut copied = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(_) => return Ok(false),
        };
        copied += n as u64;
        if copied > e.size {
            return Ok(false);
        }
        blob.update(&buf[..n]);
        out.write_all(&buf[..n])?;
    }
    out.flush()?;
    Ok(copied == e.size && blob.finish().is_ok_and(|id| id == e.blob))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clima_artifact_extract::tree_hash::blob_ids;

    fn entry(content: &[u8]) -> IndexEntry {
        IndexEntry {
            path: b"f".to_vec(),
            mode: EntryMode::File,
            size: content.len() as u64,
            blob: blob_ids(content, Formats::with_sha256(true)),
            tar_offset: 0,
            header_len: 512,
            offset: 0,
            length: 100,
            blocks: Vec::new(),
        }
    }

    fn copied(from: &[u8], e: &IndexEntry) -> (bool, Vec<u8>) {
        let mut out = Vec::new();
        let same = copy_checked(&mut &from[..], e, &mut out).unwrap();
        (same, out)
    }

    #[test]
    fn only_the_exact_content_is_a_copy_and_both_blob_ids_are_checked() {
        let e = entry(b"the content");
        assert_eq!(copied(b"the content", &e), (true, b"the content".to_vec()));
        assert!(!copied(b"the_content", &e).0, "other bytes");
        assert!(!copied(b"the conten", &e).0, "shorter");
        assert!(!copied(b"the content!", &e).0, "longer");
        // A file whose SHA-1 matches but whose SHA-256 does not (what a SHA-1 collision
        // would give) is not a copy.
        let mut forged = entry(b"the content");
        forged.blob.sha256 = Some([7; 32]);
        assert!(!copied(b"the content", &forged).0);
        // Without SHA-256 ids in the index, the SHA-1 alone decides.
        let mut sha1_only = entry(b"the content");
        sha1_only.blob.sha256 = None;
        assert!(copied(b"the content", &sha1_only).0);
    }
}
