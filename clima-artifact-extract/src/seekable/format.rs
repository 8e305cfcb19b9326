//! The bytes of a seekable tarball, version 1: members, tar headers, the index document, the
//! index's wrapping (gzip `FEXTRA` pieces, zstd skippable frame) and the locator footer. The
//! writer (`clima-artifact-ops`) and the readers use these functions, so the format is spelled
//! once.

use std::io::{self, Read, Seek, SeekFrom, Write};

use flate2::{Compress, Compression, Crc, FlushCompress, Status};

use super::{
    IndexError, IndexLimits, MAX_BLOCK_SIZE, MAX_PATH, MIN_BLOCK_SIZE, max_compressed_len, shown,
};
use crate::tree_hash::{EntryMode, ObjectId};

/// How the members are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// `.tar.gz`: gzip members.
    Gzip,
    /// `.tar.zst`: zstd frames.
    Zstd,
}

impl Flavour {
    /// [`Flavour::Zstd`] for a name ending in `.zst` or `.tzst`, else [`Flavour::Gzip`].
    pub fn for_file_name(name: &[u8]) -> Flavour {
        if name.ends_with(b".zst") || name.ends_with(b".tzst") {
            Flavour::Zstd
        } else {
            Flavour::Gzip
        }
    }

    fn code(self) -> u8 {
        match self {
            Flavour::Gzip => 1,
            Flavour::Zstd => 2,
        }
    }

    /// Bytes of the footer that ends a file of this flavour.
    pub fn footer_len(self) -> u64 {
        match self {
            Flavour::Gzip => GZIP_FOOTER_PREFIX.len() as u64 + 40 + GZIP_EMPTY_END.len() as u64,
            Flavour::Zstd => ZSTD_FOOTER_PREFIX.len() as u64 + 40,
        }
    }
}

/// The header of every gzip member of the entries and of the index: no name, mtime 0, extra
/// flags 0, OS 255.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
/// The header of an empty member with `FEXTRA`, up to XLEN.
const GZIP_EXTRA_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 0xff];
/// An empty deflate stream, CRC32 0 and size 0: the end of an empty member.
const GZIP_EMPTY_END: [u8; 10] = [3, 0, 0, 0, 0, 0, 0, 0, 0, 0];
/// The footer member up to the locator: header, XLEN 44, subfield `ca` of 40 bytes.
const GZIP_FOOTER_PREFIX: [u8; 16] = [
    0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 0xff, 44, 0, b'c', b'a', 40, 0,
];
/// Subfield id of an index piece.
const PIECE_ID: [u8; 2] = [b'c', b'i'];
/// Largest index piece: XLEN is 16 bits and includes the subfield's 4-byte header.
pub const MAX_PIECE: usize = 65_531;
/// Skippable frame magic of the zstd index frame (`0x184D2A5C`).
const ZSTD_INDEX_MAGIC: [u8; 4] = [0x5c, 0x2a, 0x4d, 0x18];
/// The zstd footer up to the locator: skippable frame `0x184D2A5D` of 40 bytes.
const ZSTD_FOOTER_PREFIX: [u8; 8] = [0x5d, 0x2a, 0x4d, 0x18, 40, 0, 0, 0];
/// Magic of the locator.
const LOCATOR_MAGIC: &[u8; 8] = b"clima-sk";
/// Magic of the index document.
const INDEX_MAGIC: &[u8; 8] = b"clima-ix";
/// The version of the locator and of the index document this build writes and reads.
pub const VERSION: u32 = 1;
/// zstd level of members.
const ZSTD_LEVEL: i32 = 3;
/// deflate level of members.
const GZIP_LEVEL: u32 = 6;
/// The document's fixed header: magic, version, flags, block size, entries, tar size, data size.
const INDEX_HEADER_LEN: usize = 8 + 4 + 4 + 8 + 8 + 8 + 8;
/// The smallest encoded entry (one-byte path, no SHA-256 id, no blocks).
const MIN_ENTRY_LEN: usize = 2 + 1 + 4 + 8 + 20 + 8 + 4 + 8 + 8 + 4;
/// Bytes of one block record.
const BLOCK_LEN: usize = 8 + 8 + 32;

// ---- tar headers ----

/// What a tar header describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderKind<'a> {
    /// A regular file.
    File {
        /// Its size in bytes.
        size: u64,
        /// Owner exec bit set (mode 0755, else 0644).
        executable: bool,
    },
    /// A symlink and its target bytes.
    Symlink(&'a [u8]),
}

/// The GNU header every tarball of this tool uses for `kind`, `mode` and `size`: mtime 0,
/// uid and gid 0, empty user and group names. The caller sets the name and the checksum.
pub fn gnu_header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_size(size);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    // Empty names cannot fail to fit.
    let _ = h.set_username("");
    let _ = h.set_groupname("");
    h
}

/// The headers of an entry at `path`, exactly as a seekable tarball has them: a GNU
/// `././@LongLink` record (`L`) first when the path is longer than 100 bytes, one (`K`) when a
/// symlink's target is, then the entry's header. Path and target bytes are written as given,
/// never normalised.
pub fn tar_header(path: &[u8], kind: HeaderKind<'_>) -> Vec<u8> {
    let (entry_type, mode, size, target) = match kind {
        HeaderKind::File { size, executable } => (
            tar::EntryType::Regular,
            if executable { 0o755 } else { 0o644 },
            size,
            None,
        ),
        HeaderKind::Symlink(target) => (tar::EntryType::Symlink, 0o755, 0, Some(target)),
    };
    let mut out = Vec::with_capacity(512);
    if path.len() > 100 {
        long_record(&mut out, b'L', path);
    }
    if let Some(target) = target.filter(|t| t.len() > 100) {
        long_record(&mut out, b'K', target);
    }
    let mut h = gnu_header(entry_type, mode, size);
    let n = path.len().min(100);
    h.as_old_mut().name[..n].copy_from_slice(&path[..n]);
    if let Some(target) = target {
        let n = target.len().min(100);
        h.as_old_mut().linkname[..n].copy_from_slice(&target[..n]);
    }
    h.set_cksum();
    out.extend_from_slice(h.as_bytes());
    out
}

/// A GNU long name (`L`) or long link (`K`) record holding `bytes` and a NUL.
fn long_record(out: &mut Vec<u8>, kind: u8, bytes: &[u8]) {
    let mut h = gnu_header(tar::EntryType::new(kind), 0o644, bytes.len() as u64 + 1);
    h.as_old_mut().name[..13].copy_from_slice(b"././@LongLink");
    h.set_cksum();
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(bytes);
    out.push(0);
    out.resize(out.len().next_multiple_of(512), 0);
}

/// Rounds a content size up to tar's 512-byte blocks.
pub fn padded(size: u64) -> u64 {
    size.div_ceil(512).saturating_mul(512)
}

// ---- members ----

/// Compresses members: each call to [`MemberEncoder::encode`] gives one complete gzip member
/// or zstd frame whose bytes depend on its input alone.
pub struct MemberEncoder {
    flavour: Flavour,
    deflate: Compress,
    zstd: Option<zstd::bulk::Compressor<'static>>,
}

impl MemberEncoder {
    /// An encoder of `flavour` members.
    pub fn new(flavour: Flavour) -> io::Result<MemberEncoder> {
        let zstd = match flavour {
            Flavour::Gzip => None,
            Flavour::Zstd => {
                use zstd::zstd_safe::CParameter;
                let mut c = zstd::bulk::Compressor::new(ZSTD_LEVEL)?;
                c.set_parameter(CParameter::ChecksumFlag(true))?;
                c.set_parameter(CParameter::ContentSizeFlag(true))?;
                c.set_parameter(CParameter::DictIdFlag(false))?;
                Some(c)
            }
        };
        Ok(MemberEncoder {
            flavour,
            deflate: Compress::new(Compression::new(GZIP_LEVEL), false),
            zstd,
        })
    }

    /// The flavour of the members.
    pub fn flavour(&self) -> Flavour {
        self.flavour
    }

    /// One member holding `data`.
    pub fn encode(&mut self, data: &[u8]) -> io::Result<Vec<u8>> {
        match &mut self.zstd {
            Some(c) => c.compress(data),
            None => self.gzip(data),
        }
    }

    fn gzip(&mut self, data: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(data.len() / 2 + 64);
        out.extend_from_slice(&GZIP_HEADER);
        self.deflate.reset();
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(out.capacity().max(4096));
            }
            let done = usize::try_from(self.deflate.total_in()).unwrap_or(usize::MAX);
            let input = data.get(done..).unwrap_or(&[]);
            let status = self
                .deflate
                .compress_vec(input, &mut out, FlushCompress::Finish)
                .map_err(io::Error::other)?;
            if status == Status::StreamEnd {
                break;
            }
        }
        let mut crc = Crc::new();
        crc.update(data);
        out.extend_from_slice(&crc.sum().to_le_bytes());
        // ISIZE is the length modulo 2^32, as gzip defines it.
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        Ok(out)
    }
}

/// Why a member was refused by [`decode_member`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberError {
    /// It would decompress to more than expected: stopped at one byte more.
    Bomb {
        /// The length the index gives.
        expected: u64,
    },
    /// It decompresses to fewer bytes than expected.
    Short {
        /// What it gave.
        got: u64,
        /// The length the index gives.
        expected: u64,
    },
    /// Bytes follow the member inside its range.
    Trailing(u64),
    /// Not a valid member (bad header, data or checksum).
    Corrupt(String),
}

impl std::fmt::Display for MemberError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemberError::Bomb { expected } => write!(
                f,
                "it decompresses to more than the {expected} bytes the index says (a \
                 decompression bomb or a lying index); stopped there"
            ),
            MemberError::Short { got, expected } => write!(
                f,
                "it decompresses to {got} bytes, the index says {expected}"
            ),
            MemberError::Trailing(n) => write!(
                f,
                "{n} bytes follow the member inside the range the index gives it"
            ),
            MemberError::Corrupt(why) => f.write_str(why),
        }
    }
}

/// Decompresses one member (`compressed` holds it and nothing else) that must give exactly
/// `expected` bytes: output is cut at `expected + 1` bytes, so a member that would give more
/// (a bomb, or an index that lies) is refused without decompressing the rest.
pub fn decode_member(
    flavour: Flavour,
    compressed: &[u8],
    expected: u64,
) -> Result<Vec<u8>, MemberError> {
    let mut out = Vec::new();
    decode_member_into(flavour, compressed, expected, &mut out)?;
    Ok(out)
}

/// [`decode_member`] into `out` (cleared first), so that a caller decoding many members
/// reuses one buffer instead of allocating (and the kernel mapping) one per member.
pub fn decode_member_into(
    flavour: Flavour,
    compressed: &[u8],
    expected: u64,
    out: &mut Vec<u8>,
) -> Result<(), MemberError> {
    out.clear();
    let cap = usize::try_from(expected.min(MAX_BLOCK_SIZE * 2)).unwrap_or(0);
    out.reserve(cap);
    let limit = expected.saturating_add(1);
    let rest = match flavour {
        Flavour::Gzip => {
            let mut decoder = flate2::bufread::GzDecoder::new(compressed);
            (&mut decoder)
                .take(limit)
                .read_to_end(out)
                .map_err(|e| MemberError::Corrupt(format!("not a valid gzip member: {e}")))?;
            decoder.into_inner().len()
        }
        Flavour::Zstd => {
            let mut decoder = zstd::stream::read::Decoder::with_buffer(compressed)
                .map_err(|e| MemberError::Corrupt(format!("cannot start zstd: {e}")))?
                .single_frame();
            (&mut decoder)
                .take(limit)
                .read_to_end(out)
                .map_err(|e| MemberError::Corrupt(format!("not a valid zstd frame: {e}")))?;
            decoder.finish().len()
        }
    };
    member_len(out.len() as u64, expected, rest)
}

/// [`decode_member`] into `out`, reusing its bytes: `out` is never cleared, only grown (with
/// zeros) when it holds fewer than `expected + 1` bytes, so that a caller decoding many
/// members into the same buffers neither allocates nor zeroes one per member. The member's
/// bytes are `out[..expected]` (what follows is left over from earlier members).
pub fn decode_member_reusing(
    flavour: Flavour,
    compressed: &[u8],
    expected: u64,
    out: &mut Vec<u8>,
) -> Result<(), MemberError> {
    // A member larger than any the format makes (a block and its headers) is decoded as
    // before, into a buffer of its exact length.
    let want = match usize::try_from(expected.saturating_add(1)) {
        Ok(want) if expected <= MAX_BLOCK_SIZE * 2 => want,
        _ => return decode_member_into(flavour, compressed, expected, out),
    };
    if out.len() < want {
        out.resize(want, 0);
    }
    let buf = &mut out[..want];
    let (got, rest) = match flavour {
        Flavour::Gzip => {
            let mut decoder = flate2::bufread::GzDecoder::new(compressed);
            let got = fill(&mut decoder, buf)
                .map_err(|e| MemberError::Corrupt(format!("not a valid gzip member: {e}")))?;
            (got, decoder.into_inner().len())
        }
        Flavour::Zstd => {
            let mut decoder = zstd::stream::read::Decoder::with_buffer(compressed)
                .map_err(|e| MemberError::Corrupt(format!("cannot start zstd: {e}")))?
                .single_frame();
            let got = fill(&mut decoder, buf)
                .map_err(|e| MemberError::Corrupt(format!("not a valid zstd frame: {e}")))?;
            (got, decoder.finish().len())
        }
    };
    member_len(got as u64, expected, rest)
}

/// A member that decoded to `got` bytes with `rest` compressed bytes after it, against the
/// `expected` length: more is a bomb, less is short, anything after it is trailing.
fn member_len(got: u64, expected: u64, rest: usize) -> Result<(), MemberError> {
    if got > expected {
        return Err(MemberError::Bomb { expected });
    }
    if got < expected {
        return Err(MemberError::Short { got, expected });
    }
    if rest != 0 {
        return Err(MemberError::Trailing(rest as u64));
    }
    Ok(())
}

/// Reads `reader` into `buf` until it is full or the reader ends: the bytes read.
fn fill(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

// ---- the index document ----

/// One block of a file of several blocks: its member and the digest of its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Offset of its member in the file.
    pub offset: u64,
    /// Bytes of its member.
    pub length: u64,
    /// SHA-256 of the block's content bytes (header and padding excluded).
    pub sha256: [u8; 32],
}

/// One file or symlink of the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// Path, `/`-separated, relative.
    pub path: Vec<u8>,
    /// Git mode: file, executable or symlink.
    pub mode: EntryMode,
    /// Bytes of the content (of the target, for a symlink).
    pub size: u64,
    /// Git blob ids of the content (SHA-256 too when the index carries them).
    pub blob: ObjectId,
    /// Offset in the tar stream of its first header.
    pub tar_offset: u64,
    /// Bytes of its headers.
    pub header_len: u32,
    /// Offset in the file of its first member.
    pub offset: u64,
    /// Bytes of all its members.
    pub length: u64,
    /// Its blocks, for a file larger than the block size; empty otherwise.
    pub blocks: Vec<Block>,
}

/// One member of an entry, as [`IndexEntry::members`] derives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSpan {
    /// Offset in the file.
    pub offset: u64,
    /// Compressed bytes.
    pub length: u64,
    /// Decompressed bytes (headers, content and padding it holds).
    pub plain_len: u64,
    /// Content bytes it holds (`start..end` of the file's content).
    pub content: std::ops::Range<u64>,
    /// Digest of that content, for a block.
    pub sha256: Option<[u8; 32]>,
}

impl IndexEntry {
    /// Bytes of this entry in the tar stream: headers, then content padded to 512 (none for a
    /// symlink, whose target is in the header).
    pub fn tar_len(&self) -> u64 {
        let content = if self.mode == EntryMode::Symlink {
            0
        } else {
            padded(self.size)
        };
        u64::from(self.header_len).saturating_add(content)
    }

    /// Its members in file order: one for the whole entry, or one per block.
    pub fn members(&self, block_size: u64) -> Vec<MemberSpan> {
        (0..self.blocks.len().max(1))
            .filter_map(|k| self.member(block_size, k))
            .collect()
    }

    /// Its member `k` in file order ([`IndexEntry::members`]); `None` past the last.
    pub fn member(&self, block_size: u64, k: usize) -> Option<MemberSpan> {
        let header = u64::from(self.header_len);
        if self.blocks.is_empty() {
            let content_end = if self.mode == EntryMode::Symlink {
                0
            } else {
                self.size
            };
            return (k == 0).then(|| MemberSpan {
                offset: self.offset,
                length: self.length,
                plain_len: self.tar_len(),
                content: 0..content_end,
                sha256: None,
            });
        }
        let b = self.blocks.get(k)?;
        let start = (k as u64).saturating_mul(block_size);
        let end = start.saturating_add(block_size).min(self.size);
        let mut plain_len = end.saturating_sub(start);
        if k == 0 {
            plain_len += header;
        }
        if k + 1 == self.blocks.len() {
            plain_len += padded(self.size) - self.size;
        }
        Some(MemberSpan {
            offset: b.offset,
            length: b.length,
            plain_len,
            content: start..end,
            sha256: Some(b.sha256),
        })
    }
}

/// An index document: where each file's members are, and what each file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    /// Bytes per block.
    pub block_size: u64,
    /// Offset in the tar stream of the end-of-archive blocks.
    pub tar_size: u64,
    /// Offset in the file of the end-of-archive member.
    pub data_size: u64,
    /// The entries, in path order.
    pub entries: Vec<IndexEntry>,
}

impl Index {
    /// Whether every entry carries its SHA-256 blob id (then the document's flag bit 0 is set).
    pub fn has_sha256_ids(&self) -> bool {
        self.entries.iter().all(|e| e.blob.sha256.is_some())
    }

    /// The document's bytes (version 1).
    pub fn encode(&self) -> Vec<u8> {
        let sha256 = self.has_sha256_ids();
        let mut out = Vec::with_capacity(INDEX_HEADER_LEN + self.entries.len() * 160);
        out.extend_from_slice(INDEX_MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&u32::from(sha256).to_le_bytes());
        for n in [
            self.block_size,
            self.entries.len() as u64,
            self.tar_size,
            self.data_size,
        ] {
            out.extend_from_slice(&n.to_le_bytes());
        }
        for e in &self.entries {
            // Paths are at most MAX_PATH bytes (checked by the writer).
            out.extend_from_slice(&(e.path.len() as u16).to_le_bytes());
            out.extend_from_slice(&e.path);
            out.extend_from_slice(&git_mode(e.mode).to_le_bytes());
            out.extend_from_slice(&e.size.to_le_bytes());
            out.extend_from_slice(&e.blob.sha1);
            if let (true, Some(id)) = (sha256, e.blob.sha256) {
                out.extend_from_slice(&id);
            }
            out.extend_from_slice(&e.tar_offset.to_le_bytes());
            out.extend_from_slice(&e.header_len.to_le_bytes());
            out.extend_from_slice(&e.offset.to_le_bytes());
            out.extend_from_slice(&e.length.to_le_bytes());
            out.extend_from_slice(&(e.blocks.len() as u32).to_le_bytes());
            for b in &e.blocks {
                out.extend_from_slice(&b.offset.to_le_bytes());
                out.extend_from_slice(&b.length.to_le_bytes());
                out.extend_from_slice(&b.sha256);
            }
        }
        out
    }

    /// Decodes a document, bounded by `limits` (nothing is allocated beyond what the document's
    /// own length allows). Checks the encoding only; [`super::authenticate`] checks the rest.
    pub fn decode(doc: &[u8], limits: &IndexLimits) -> Result<Index, IndexError> {
        let mut c = Cursor { doc, at: 0 };
        if c.take(8, "the magic")? != INDEX_MAGIC {
            return Err(c.malformed(0, "it does not start with `clima-ix`: not an index"));
        }
        let version = c.u32("the version")?;
        if version != VERSION {
            return Err(c.malformed(
                8,
                format!(
                    "version {version}; this build reads version {VERSION} (a newer \
                     clima-artifacts wrote it: update, or install without the index)"
                ),
            ));
        }
        let flags = c.u32("the flags")?;
        if flags & !1 != 0 {
            return Err(c.malformed(12, format!("unknown flags {flags:#x}")));
        }
        let block_size = c.u64("the block size")?;
        if !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&block_size) {
            return Err(c.malformed(
                16,
                format!(
                    "block size {block_size} is outside {MIN_BLOCK_SIZE}..={MAX_BLOCK_SIZE} bytes"
                ),
            ));
        }
        let count = c.u64("the number of entries")?;
        let fits = (doc.len() - c.at) / MIN_ENTRY_LEN;
        if count > limits.max_entries || count > fits as u64 {
            return Err(IndexError::TooLarge(format!(
                "it claims {count} entries; the limit is {} and its {} bytes hold at most {fits}",
                limits.max_entries,
                doc.len()
            )));
        }
        let tar_size = c.u64("the tar size")?;
        let data_size = c.u64("the data size")?;
        let mut entries = Vec::with_capacity(count as usize);
        for _ in 0..count {
            entries.push(c.entry(flags & 1 != 0, block_size)?);
        }
        if c.at != doc.len() {
            return Err(c.malformed(
                c.at as u64,
                format!("{} bytes follow the last entry", doc.len() - c.at),
            ));
        }
        Ok(Index {
            block_size,
            tar_size,
            data_size,
            entries,
        })
    }
}

/// Git's mode number of a tree entry.
fn git_mode(mode: EntryMode) -> u32 {
    match mode {
        EntryMode::File => 0o100_644,
        EntryMode::Executable => 0o100_755,
        EntryMode::Symlink => 0o120_000,
        EntryMode::Directory => 0o040_000,
    }
}

/// Reads the document field by field, every read bounded by what is left.
struct Cursor<'a> {
    doc: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn malformed(&self, at: u64, reason: impl Into<String>) -> IndexError {
        IndexError::Malformed {
            at,
            reason: reason.into(),
        }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], IndexError> {
        let doc: &'a [u8] = self.doc;
        match doc.get(self.at..self.at.saturating_add(n)) {
            Some(bytes) => {
                self.at += n;
                Ok(bytes)
            }
            None => Err(self.malformed(
                self.at as u64,
                format!(
                    "{what} runs past the end of the index ({} bytes)",
                    doc.len()
                ),
            )),
        }
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], IndexError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    fn u16(&mut self, what: &str) -> Result<u16, IndexError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    fn u32(&mut self, what: &str) -> Result<u32, IndexError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, IndexError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn entry(&mut self, sha256: bool, block_size: u64) -> Result<IndexEntry, IndexError> {
        let at = self.at as u64;
        let len = usize::from(self.u16("a path length")?);
        if len == 0 || len > MAX_PATH {
            return Err(self.malformed(
                at,
                format!("a path of {len} bytes (1 to {MAX_PATH} allowed)"),
            ));
        }
        let path = self.take(len, "a path")?.to_vec();
        let mode = match self.u32("a mode")? {
            0o100_644 => EntryMode::File,
            0o100_755 => EntryMode::Executable,
            0o120_000 => EntryMode::Symlink,
            other => {
                return Err(IndexError::Path {
                    path: shown(&path),
                    reason: format!(
                        "mode {other:o} is not a file's or a symlink's (100644, 100755, 120000)"
                    ),
                });
            }
        };
        let size = self.u64("a size")?;
        let sha1 = self.array("a blob id")?;
        let sha256 = if sha256 {
            Some(self.array("a SHA-256 blob id")?)
        } else {
            None
        };
        let tar_offset = self.u64("a tar offset")?;
        let header_len = self.u32("a header length")?;
        let offset = self.u64("an offset")?;
        let length = self.u64("a length")?;
        let count = self.u32("a block count")?;
        let most = size
            .div_ceil(block_size)
            .min(((self.doc.len() - self.at) / BLOCK_LEN) as u64);
        if u64::from(count) > most {
            return Err(IndexError::Layout {
                path: shown(&path),
                reason: format!(
                    "{count} blocks for {size} bytes in blocks of {block_size} (or more than the \
                     index holds)"
                ),
            });
        }
        let mut blocks = Vec::with_capacity(count as usize);
        for _ in 0..count {
            blocks.push(Block {
                offset: self.u64("a block offset")?,
                length: self.u64("a block length")?,
                sha256: self.array("a block digest")?,
            });
        }
        Ok(IndexEntry {
            path,
            mode,
            size,
            blob: ObjectId { sha1, sha256 },
            tar_offset,
            header_len,
            offset,
            length,
            blocks,
        })
    }
}

// ---- the locator and the tail ----

/// Where the index is: the 40 bytes at the end of the file (in the footer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Locator {
    /// The members' compression.
    pub flavour: Flavour,
    /// Offset in the file of the first index piece (gzip) or the index frame (zstd).
    pub index_offset: u64,
    /// Bytes of the index pieces or frame (up to the footer).
    pub index_length: u64,
    /// Bytes of the index document, decompressed.
    pub index_size: u64,
}

/// The most bytes an index document of `size` bytes may take in the file once compressed
/// and wrapped (pieces' own headers, or the skippable frame's).
fn max_stored_len(size: u64) -> u64 {
    let compressed = max_compressed_len(size);
    compressed.saturating_add((compressed / MAX_PIECE as u64 + 1).saturating_mul(32))
}

impl Locator {
    /// The locator's 40 bytes.
    pub fn to_bytes(&self) -> [u8; 40] {
        let mut out = [0; 40];
        out[..8].copy_from_slice(LOCATOR_MAGIC);
        out[8] = VERSION as u8;
        out[9] = self.flavour.code();
        out[16..24].copy_from_slice(&self.index_offset.to_le_bytes());
        out[24..32].copy_from_slice(&self.index_length.to_le_bytes());
        out[32..40].copy_from_slice(&self.index_size.to_le_bytes());
        out
    }

    /// The footer that ends the file.
    pub fn footer(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(66);
        match self.flavour {
            Flavour::Gzip => {
                out.extend_from_slice(&GZIP_FOOTER_PREFIX);
                out.extend_from_slice(&self.to_bytes());
                out.extend_from_slice(&GZIP_EMPTY_END);
            }
            Flavour::Zstd => {
                out.extend_from_slice(&ZSTD_FOOTER_PREFIX);
                out.extend_from_slice(&self.to_bytes());
            }
        }
        out
    }

    /// The locator of a file of `file_len` bytes whose last bytes are `tail` (the last 66, or
    /// all of a shorter file). `None` when the file has no footer of ours: a classic tarball.
    /// A footer of ours that says something impossible is an error.
    pub fn find(
        tail: &[u8],
        file_len: u64,
        limits: &IndexLimits,
    ) -> Result<Option<Locator>, IndexError> {
        let gz = Flavour::Gzip.footer_len() as usize;
        let zst = Flavour::Zstd.footer_len() as usize;
        let (flavour, bytes) = if tail.len() >= gz
            && tail[tail.len() - gz..].starts_with(&GZIP_FOOTER_PREFIX)
            && tail.ends_with(&GZIP_EMPTY_END)
        {
            let start = tail.len() - gz + GZIP_FOOTER_PREFIX.len();
            (Flavour::Gzip, &tail[start..start + 40])
        } else if tail.len() >= zst && tail[tail.len() - zst..].starts_with(&ZSTD_FOOTER_PREFIX) {
            (Flavour::Zstd, &tail[tail.len() - 40..])
        } else {
            return Ok(None);
        };
        if &bytes[..8] != LOCATOR_MAGIC {
            return Ok(None);
        }
        let locator = Locator {
            flavour,
            index_offset: u64::from_le_bytes(bytes[16..24].try_into().unwrap_or_default()),
            index_length: u64::from_le_bytes(bytes[24..32].try_into().unwrap_or_default()),
            index_size: u64::from_le_bytes(bytes[32..40].try_into().unwrap_or_default()),
        };
        if bytes[8] != VERSION as u8 {
            return Err(IndexError::Locator(format!(
                "version {}; this build reads version {VERSION} (update clima-artifacts)",
                bytes[8]
            )));
        }
        if bytes[9] != flavour.code() || bytes[10..16].iter().any(|b| *b != 0) {
            return Err(IndexError::Locator(format!(
                "flavour byte {} or its reserved bytes do not match its {flavour:?} footer",
                bytes[9]
            )));
        }
        locator.check(file_len, limits)?;
        Ok(Some(locator))
    }

    fn check(&self, file_len: u64, limits: &IndexLimits) -> Result<(), IndexError> {
        if self.index_length > file_len {
            return Err(IndexError::TooLarge(format!(
                "the locator says the index takes {} bytes, more than the whole file ({file_len})",
                self.index_length
            )));
        }
        if self.index_size > limits.max_index_bytes {
            return Err(IndexError::TooLarge(format!(
                "the locator says the index document has {} bytes; the limit is {}",
                self.index_size, limits.max_index_bytes
            )));
        }
        if self.index_size < INDEX_HEADER_LEN as u64 {
            return Err(IndexError::Locator(format!(
                "an index document of {} bytes is shorter than its own header",
                self.index_size
            )));
        }
        if self.index_length > max_stored_len(self.index_size) {
            return Err(IndexError::TooLarge(format!(
                "the index takes {} bytes of the file, more than a document of {} bytes can \
                 compress to",
                self.index_length, self.index_size
            )));
        }
        let end = self.index_offset.checked_add(self.index_length);
        let footer_at = file_len.checked_sub(self.flavour.footer_len());
        if self.index_length == 0 || end.is_none() || end != footer_at {
            return Err(IndexError::Locator(format!(
                "the index at bytes {}..+{} does not end where the footer starts (byte {} of a \
                 file of {file_len})",
                self.index_offset,
                self.index_length,
                footer_at.unwrap_or(0)
            )));
        }
        Ok(())
    }
}

/// Writes what follows the entries' members: the end-of-archive member, the index `doc`
/// (compressed, then in pieces or a skippable frame) and the footer. `data_size` is the offset
/// at which the tail starts. Returns the locator written.
pub fn write_tail<W: Write>(
    out: &mut W,
    encoder: &mut MemberEncoder,
    data_size: u64,
    doc: &[u8],
) -> io::Result<Locator> {
    let eoa = encoder.encode(&[0; 1024])?;
    out.write_all(&eoa)?;
    let compressed = encoder.encode(doc)?;
    let mut stored = Vec::with_capacity(compressed.len() + 64);
    match encoder.flavour() {
        Flavour::Gzip => {
            for piece in compressed.chunks(MAX_PIECE) {
                // A piece is at most MAX_PIECE bytes, so both lengths fit in 16 bits.
                let len = piece.len() as u16;
                stored.extend_from_slice(&GZIP_EXTRA_HEADER);
                stored.extend_from_slice(&(len + 4).to_le_bytes());
                stored.extend_from_slice(&PIECE_ID);
                stored.extend_from_slice(&len.to_le_bytes());
                stored.extend_from_slice(piece);
                stored.extend_from_slice(&GZIP_EMPTY_END);
            }
        }
        Flavour::Zstd => {
            let len = u32::try_from(compressed.len())
                .map_err(|_| io::Error::other("the index does not fit a skippable frame"))?;
            stored.extend_from_slice(&ZSTD_INDEX_MAGIC);
            stored.extend_from_slice(&len.to_le_bytes());
            stored.extend_from_slice(&compressed);
        }
    }
    out.write_all(&stored)?;
    let locator = Locator {
        flavour: encoder.flavour(),
        index_offset: data_size + eoa.len() as u64,
        index_length: stored.len() as u64,
        index_size: doc.len() as u64,
    };
    out.write_all(&locator.footer())?;
    Ok(locator)
}

/// The compressed index inside its pieces (gzip) or its skippable frame (zstd).
fn unwrap_index(flavour: Flavour, stored: &[u8], offset: u64) -> Result<Vec<u8>, IndexError> {
    let bad = |at: usize, what: &str| {
        IndexError::Locator(format!(
            "the stored index is malformed at byte {} of the file: {what}",
            offset + at as u64
        ))
    };
    match flavour {
        Flavour::Zstd => {
            if stored.len() < 8 || stored[..4] != ZSTD_INDEX_MAGIC {
                return Err(bad(0, "not the index's skippable frame"));
            }
            let len = u32::from_le_bytes([stored[4], stored[5], stored[6], stored[7]]);
            if len as usize != stored.len() - 8 {
                return Err(bad(4, "the frame's size is not the index's length"));
            }
            Ok(stored[8..].to_vec())
        }
        Flavour::Gzip => {
            let mut out = Vec::with_capacity(stored.len());
            let mut at = 0;
            while at < stored.len() {
                let rest = &stored[at..];
                if rest.len() < 16 + GZIP_EMPTY_END.len() || rest[..10] != GZIP_EXTRA_HEADER {
                    return Err(bad(
                        at,
                        "not an index piece (an empty gzip member with FEXTRA)",
                    ));
                }
                let xlen = usize::from(u16::from_le_bytes([rest[10], rest[11]]));
                let len = usize::from(u16::from_le_bytes([rest[14], rest[15]]));
                let end = 16 + len + GZIP_EMPTY_END.len();
                if rest[12..14] != PIECE_ID
                    || len == 0
                    || xlen != len + 4
                    || rest.len() < end
                    || rest[16 + len..end] != GZIP_EMPTY_END
                {
                    return Err(bad(at, "an index piece with a wrong id, length or ending"));
                }
                out.extend_from_slice(&rest[16..16 + len]);
                at += end;
            }
            Ok(out)
        }
    }
}

/// Reads the index of a seekable tarball of `file_len` bytes: the locator from the footer,
/// then the stored index, decompressed to exactly the length the locator gives. `None` for a
/// file without our footer (a classic tarball). The document is not authenticated yet: pass
/// it to [`super::authenticate`].
pub fn read_index<R: Read + Seek>(
    file: &mut R,
    file_len: u64,
    limits: &IndexLimits,
) -> Result<Option<(Locator, Vec<u8>)>, IndexError> {
    let io_err = |e: io::Error| IndexError::Io(e.to_string());
    let tail_len = file_len.min(Flavour::Gzip.footer_len());
    file.seek(SeekFrom::Start(file_len - tail_len))
        .map_err(io_err)?;
    let mut tail = vec![0; tail_len as usize];
    file.read_exact(&mut tail).map_err(io_err)?;
    let Some(locator) = Locator::find(&tail, file_len, limits)? else {
        return Ok(None);
    };
    file.seek(SeekFrom::Start(locator.index_offset))
        .map_err(io_err)?;
    let mut stored = Vec::new();
    file.take(locator.index_length)
        .read_to_end(&mut stored)
        .map_err(io_err)?;
    if stored.len() as u64 != locator.index_length {
        return Err(IndexError::Io(format!(
            "the file ended {} bytes into the index, which the locator says has {}",
            stored.len(),
            locator.index_length
        )));
    }
    stored_index(&locator, &stored).map(|doc| Some((locator, doc)))
}

/// The index document from `stored`, the `locator.index_length` bytes of the file at
/// `locator.index_offset` (the pieces, or the skippable frame), decompressed to exactly the
/// length the locator gives. Not authenticated yet: pass it to [`super::authenticate`].
pub fn stored_index(locator: &Locator, stored: &[u8]) -> Result<Vec<u8>, IndexError> {
    let compressed = unwrap_index(locator.flavour, stored, locator.index_offset)?;
    decode_member(locator.flavour, &compressed, locator.index_size).map_err(|e| {
        let what = format!("the compressed index: {e}");
        match e {
            MemberError::Bomb { .. } => IndexError::TooLarge(what),
            _ => IndexError::Locator(what),
        }
    })
}
