//! Authentication of an index: its hash against the download entry's `index-sha256`, its
//! structure against the file, and the git tree of its entries against the manifest's tree
//! hashes. Only an [`Authenticated`] index gives access to its entries.

use std::collections::HashSet;

use clima_artifact_manifest::{GitTreeSha1, GitTreeSha256, Sha256};
use sha2::Digest;

use super::format::{Index, IndexEntry, Locator, MemberSpan};
use super::{
    IndexError, IndexLimits, MAX_EOA_MEMBER, MAX_HEADER, MAX_NAME, max_compressed_len, shown,
};
use crate::tree_hash::{EntryMode, Formats, TreeBuilder};

/// What the manifest entry says, against which an index is authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected {
    /// The entry's `git-tree-sha1`.
    pub tree_sha1: GitTreeSha1,
    /// The entry's `git-tree-sha256`, if it has one.
    pub tree_sha256: Option<GitTreeSha256>,
    /// The download's `index-sha256`, if it has one.
    pub index_sha256: Option<Sha256>,
}

/// An index that passed [`authenticate`]: its paths, modes and blob ids make the manifest's
/// tree, and its layout fits the file. Block digests are trusted only when the download entry
/// gave the index's hash ([`Authenticated::blocks_trusted`]).
#[derive(Debug, Clone)]
pub struct Authenticated {
    pub(super) index: Index,
    pub(super) locator: Locator,
    pub(super) blocks_trusted: bool,
}

impl Authenticated {
    /// The index.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// Where the index is in the file (and the file's flavour).
    pub fn locator(&self) -> &Locator {
        &self.locator
    }

    /// Whether the index's hash matched the download entry's `index-sha256`, which covers the
    /// block digests (the tree covers whole files only).
    pub fn blocks_trusted(&self) -> bool {
        self.blocks_trusted
    }
}

/// Authenticates the index document `doc` read at `locator`: its SHA-256 against
/// `expected.index_sha256` (when given), its encoding, its paths, its layout in the file, and
/// the git tree of its entries against `expected`'s tree hashes. Every check is bounded by the
/// document's length and `limits`.
pub fn authenticate(
    doc: &[u8],
    locator: &Locator,
    expected: &Expected,
    limits: &IndexLimits,
) -> Result<Authenticated, IndexError> {
    if doc.len() as u64 != locator.index_size {
        return Err(IndexError::Locator(format!(
            "the index document has {} bytes, the locator says {}",
            doc.len(),
            locator.index_size
        )));
    }
    if let Some(want) = expected.index_sha256 {
        let actual: [u8; 32] = sha2::Sha256::digest(doc).into();
        if actual != want.0 {
            return Err(IndexError::Hash {
                expected: want.to_hex(),
                actual: Sha256(actual).to_hex(),
            });
        }
    }
    let index = Index::decode(doc, limits)?;
    check_paths(&index)?;
    check_layout(&index, locator)?;
    check_tree(&index, expected)?;
    Ok(Authenticated {
        index,
        locator: *locator,
        blocks_trusted: expected.index_sha256.is_some(),
    })
}

fn path_error(path: &[u8], reason: impl Into<String>) -> IndexError {
    IndexError::Path {
        path: shown(path),
        reason: reason.into(),
    }
}

fn layout_error(e: &IndexEntry, reason: impl Into<String>) -> IndexError {
    IndexError::Layout {
        path: shown(&e.path),
        reason: reason.into(),
    }
}

/// Paths: relative, clean components, strictly increasing, none both a file and a folder.
fn check_paths(index: &Index) -> Result<(), IndexError> {
    let mut previous: Option<&[u8]> = None;
    for e in &index.entries {
        let path = e.path.as_slice();
        if path.contains(&0) {
            return Err(path_error(path, "the path contains a NUL byte"));
        }
        for component in path.split(|b| *b == b'/') {
            let why = match component {
                b"" => "an empty component (a leading, trailing or doubled `/`)",
                b"." | b".." => "a `.` or `..` component",
                b".git" => "a `.git` component (the tree hash leaves `.git` out)",
                c if c.len() > MAX_NAME => "a component longer than 255 bytes",
                _ => continue,
            };
            return Err(path_error(path, format!("the path has {why}")));
        }
        if let Some(p) = previous
            && p >= path
        {
            return Err(path_error(
                path,
                format!(
                    "it comes after `{}`: paths must be sorted and unique",
                    shown(p)
                ),
            ));
        }
        previous = Some(path);
    }
    let all: HashSet<&[u8]> = index.entries.iter().map(|e| e.path.as_slice()).collect();
    for e in &index.entries {
        for (i, b) in e.path.iter().enumerate() {
            if *b == b'/' && all.contains(&e.path[..i]) {
                return Err(path_error(
                    &e.path,
                    format!(
                        "`{}` is a file or symlink of the index, so it cannot be a folder",
                        shown(&e.path[..i])
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Members tile the file from byte 0 to the end-of-archive member, entries tile the tar
/// stream, and every size fits the mode, the block size and the compression bound.
fn check_layout(index: &Index, locator: &Locator) -> Result<(), IndexError> {
    let mut offset = 0u64;
    let mut tar = 0u64;
    let mut previous: Option<&IndexEntry> = None;
    for e in &index.entries {
        // Which of the two lies cannot be told from the tiling: both are named.
        let before = match previous {
            Some(p) => format!("the previous entry, `{}`,", shown(&p.path)),
            None => "the file's start".to_owned(),
        };
        if e.offset != offset {
            return Err(layout_error(
                e,
                format!(
                    "its members start at byte {} of the file, but {before} ends at byte \
                     {offset} (a gap or an overlap)",
                    e.offset
                ),
            ));
        }
        if e.tar_offset != tar {
            return Err(layout_error(
                e,
                format!(
                    "it starts at byte {} of the tar stream, but {before} ends at byte {tar}",
                    e.tar_offset
                ),
            ));
        }
        previous = Some(e);
        check_entry(index, e)?;
        offset = e
            .offset
            .checked_add(e.length)
            .ok_or_else(|| layout_error(e, "its offset and length overflow"))?;
        tar = tar
            .checked_add(e.tar_len())
            .ok_or_else(|| layout_error(e, "its tar offset and length overflow"))?;
    }
    let end = |reason: String| IndexError::Layout {
        path: "(end of the entries)".into(),
        reason,
    };
    if offset != index.data_size || tar != index.tar_size {
        return Err(end(format!(
            "the entries end at byte {offset} of the file and {tar} of the tar stream, the index \
             says {} and {} (a missing or extra member)",
            index.data_size, index.tar_size
        )));
    }
    let eoa = locator.index_offset.checked_sub(index.data_size);
    if !eoa.is_some_and(|n| n > 0 && n <= MAX_EOA_MEMBER) {
        return Err(end(format!(
            "the end-of-archive member would be bytes {}..{} of the file: it must lie between \
             the entries and the index, and be at most {MAX_EOA_MEMBER} bytes",
            index.data_size, locator.index_offset
        )));
    }
    Ok(())
}

/// One entry's sizes: its header, its mode's rules, its blocks and members.
fn check_entry(index: &Index, e: &IndexEntry) -> Result<(), IndexError> {
    if e.header_len < 512 || e.header_len > MAX_HEADER || !e.header_len.is_multiple_of(512) {
        return Err(layout_error(
            e,
            format!(
                "headers of {} bytes (a multiple of 512, at most {MAX_HEADER})",
                e.header_len
            ),
        ));
    }
    if e.mode == EntryMode::Symlink && (e.size == 0 || e.size > super::MAX_PATH as u64) {
        return Err(layout_error(
            e,
            format!("a symlink target of {} bytes (1 to 4096)", e.size),
        ));
    }
    let blocks = if e.mode != EntryMode::Symlink && e.size > index.block_size {
        e.size.div_ceil(index.block_size)
    } else {
        0
    };
    if e.blocks.len() as u64 != blocks {
        return Err(layout_error(
            e,
            format!(
                "{} blocks, but {} bytes in blocks of {} make {blocks}",
                e.blocks.len(),
                e.size,
                index.block_size
            ),
        ));
    }
    let mut at = e.offset;
    for m in e.members(index.block_size) {
        check_member(e, &m, at)?;
        at = m.offset.saturating_add(m.length);
    }
    if at != e.offset.saturating_add(e.length) {
        return Err(layout_error(
            e,
            format!(
                "its blocks end at byte {at}, its members at byte {}",
                e.offset.saturating_add(e.length)
            ),
        ));
    }
    Ok(())
}

fn check_member(e: &IndexEntry, m: &MemberSpan, at: u64) -> Result<(), IndexError> {
    if m.offset != at {
        return Err(layout_error(
            e,
            format!(
                "a block's member starts at byte {}, where the previous one ends at {at}",
                m.offset
            ),
        ));
    }
    if m.length == 0 || m.length > max_compressed_len(m.plain_len) {
        return Err(layout_error(
            e,
            format!(
                "a member of {} bytes for {} bytes of tar stream (compression never grows data \
                 beyond {})",
                m.length,
                m.plain_len,
                max_compressed_len(m.plain_len)
            ),
        ));
    }
    Ok(())
}

/// The git tree of the entries must be the manifest's.
fn check_tree(index: &Index, expected: &Expected) -> Result<(), IndexError> {
    let sha256 = expected.tree_sha256.is_some();
    if sha256 && !index.has_sha256_ids() {
        return Err(IndexError::NoSha256Ids);
    }
    let mut tree = TreeBuilder::with_formats(Formats::with_sha256(sha256));
    for e in &index.entries {
        tree.insert_bytes(&e.path, e.mode, e.blob);
    }
    let got = tree.finish_hashes();
    if got.sha1 != expected.tree_sha1 {
        return Err(IndexError::Tree {
            key: "git-tree-sha1",
            expected: expected.tree_sha1.to_hex(),
            actual: got.sha1.to_hex(),
        });
    }
    if let (Some(want), Some(actual)) = (expected.tree_sha256, got.sha256)
        && want != actual
    {
        return Err(IndexError::Tree {
            key: "git-tree-sha256",
            expected: want.to_hex(),
            actual: actual.to_hex(),
        });
    }
    Ok(())
}
