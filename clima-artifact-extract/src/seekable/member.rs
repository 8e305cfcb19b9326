//! Members read against an authenticated index: each decompresses to exactly the length the
//! index says, starts with the header the format prescribes for its path, mode and size, and
//! holds content whose block digests and blob ids are the index's.

use std::borrow::Cow;
use std::io::{self, Read, Seek, SeekFrom, Write};

use sha2::Digest;

use super::format::{HeaderKind, IndexEntry, MemberSpan, decode_member, tar_header};
use super::{Authenticated, IndexError, shown};
use crate::tree_hash::{BlobHasher, EntryMode, Formats};

fn member_error(e: &IndexEntry, offset: u64, reason: impl Into<String>) -> IndexError {
    IndexError::Member {
        path: shown(&e.path),
        offset,
        reason: reason.into(),
    }
}

/// The target of the symlink whose headers are `header` (GNU long link records included).
fn symlink_target(header: &[u8]) -> Option<Vec<u8>> {
    let stream = header.iter().copied().chain([0; 1024]).collect::<Vec<u8>>();
    let mut archive = tar::Archive::new(stream.as_slice());
    let entry = archive.entries().ok()?.next()?.ok()?;
    if entry.header().entry_type() != tar::EntryType::Symlink {
        return None;
    }
    entry.link_name_bytes().map(|t| t.into_owned())
}

impl Authenticated {
    /// Reads entry `i`'s members from `members` (positioned at the entry's first member; it
    /// reads exactly the entry's `length` bytes), checks them, and writes the content to `out`
    /// (a symlink's target, for a symlink). Returns the content's length.
    pub fn copy_entry<R: Read, W: Write>(
        &self,
        i: usize,
        members: &mut R,
        out: &mut W,
    ) -> Result<u64, IndexError> {
        let Some(e) = self.index.entries.get(i) else {
            return Err(IndexError::Io(format!(
                "entry {i} asked of an index of {}",
                self.index.entries.len()
            )));
        };
        let formats = Formats::with_sha256(e.blob.sha256.is_some());
        let mut blob = BlobHasher::with_formats(e.size, formats);
        let spans = e.members(self.index.block_size);
        let last = spans.len() - 1;
        let mut buf = Vec::new();
        for (k, m) in spans.iter().enumerate() {
            buf.clear();
            members
                .take(m.length)
                .read_to_end(&mut buf)
                .map_err(|err| member_error(e, m.offset, format!("cannot read it: {err}")))?;
            if buf.len() as u64 != m.length {
                return Err(member_error(
                    e,
                    m.offset,
                    format!("the file ends {} bytes into it", buf.len()),
                ));
            }
            let plain = decode_member(self.locator.flavour, &buf, m.plain_len)
                .map_err(|err| member_error(e, m.offset, err.to_string()))?;
            let content = self.member_content(e, m, k == 0, k == last, &plain)?;
            if let Some(digest) = m.sha256 {
                let got: [u8; 32] = sha2::Sha256::digest(&content).into();
                if got != digest {
                    return Err(member_error(
                        e,
                        m.offset,
                        format!("block {k}'s content does not have the index's digest"),
                    ));
                }
            }
            blob.update(&content);
            out.write_all(&content)
                .map_err(|err| member_error(e, m.offset, format!("cannot write it: {err}")))?;
        }
        let id = blob
            .finish()
            .map_err(|err| member_error(e, e.offset, err.to_string()))?;
        if id != e.blob {
            return Err(member_error(
                e,
                e.offset,
                "its content does not have the index's blob id",
            ));
        }
        Ok(e.size)
    }

    /// The content bytes of one decompressed member: after the headers (checked to be the
    /// prescribed ones) in the first, before the padding (checked to be zeros) in the last.
    /// For a symlink, its target, taken from the header.
    pub(super) fn member_content<'a>(
        &self,
        e: &IndexEntry,
        m: &MemberSpan,
        first: bool,
        last: bool,
        plain: &'a [u8],
    ) -> Result<Cow<'a, [u8]>, IndexError> {
        let header_len = if first { e.header_len as usize } else { 0 };
        if first {
            let header = &plain[..header_len];
            let prescribed = |kind| header == tar_header(&e.path, kind).as_slice();
            let (ok, target) = match e.mode {
                EntryMode::Symlink => match symlink_target(header) {
                    Some(t) => (
                        t.len() as u64 == e.size && prescribed(HeaderKind::Symlink(&t)),
                        Some(t),
                    ),
                    None => (false, None),
                },
                mode => (
                    prescribed(HeaderKind::File {
                        size: e.size,
                        executable: mode == EntryMode::Executable,
                    }),
                    None,
                ),
            };
            if !ok {
                return Err(member_error(
                    e,
                    m.offset,
                    "its tar header is not the one the format prescribes for the index's path, \
                     mode and size",
                ));
            }
            if let Some(target) = target {
                return Ok(Cow::Owned(target));
            }
        }
        let content_len = (m.content.end - m.content.start) as usize;
        let content = &plain[header_len..header_len + content_len];
        if last && plain[header_len + content_len..].iter().any(|b| *b != 0) {
            return Err(member_error(e, m.offset, "its tar padding is not zeros"));
        }
        Ok(Cow::Borrowed(content))
    }

    /// Reads the whole file (from byte 0) and checks every entry's members and the
    /// end-of-archive member against the index, writing nothing: for `publish` and tests.
    pub fn verify_file<R: Read + Seek>(&self, file: &mut R) -> Result<(), IndexError> {
        file.seek(SeekFrom::Start(0))
            .map_err(|e| IndexError::Io(e.to_string()))?;
        let mut reader = io::BufReader::with_capacity(1 << 20, file);
        for i in 0..self.index.entries.len() {
            self.copy_entry(i, &mut reader, &mut io::sink())?;
        }
        let eoa_len = self.locator.index_offset - self.index.data_size;
        let mut eoa = Vec::new();
        (&mut reader)
            .take(eoa_len)
            .read_to_end(&mut eoa)
            .map_err(|e| IndexError::Io(e.to_string()))?;
        let eoa_error = |reason: String| IndexError::Layout {
            path: "(end of archive)".into(),
            reason,
        };
        match decode_member(self.locator.flavour, &eoa, 1024) {
            Ok(zeros) if zeros.iter().all(|b| *b == 0) => Ok(()),
            Ok(_) => Err(eoa_error("the end-of-archive member is not zeros".into())),
            Err(e) => Err(eoa_error(format!("the end-of-archive member: {e}"))),
        }
    }
}
