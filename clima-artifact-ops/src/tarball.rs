//! Deterministic `.tar.gz` of a folder: the same content always gives the same bytes (and so the
//! same sha256), whoever owns the files and whenever they were touched.
//!
//! Two layouts: [`write_seekable`] (what `create` writes by default, the format of
//! `docs/seekable.md`: files and symlinks only, in path order, each file its own gzip members or
//! zstd frames, one per block of a large file, then an index), and [`write_tarball`] (`create
//! --classic`: one gzip stream). The rules below are the classic one's; the seekable one uses
//! the same headers (`clima_artifact_extract::seekable::tar_header`).
//!
//! Rules:
//! - entries in byte-wise sorted order, each directory before its content; paths relative to the
//!   folder, no leading `./`, directories end in `/`; `.git` folders are skipped (as the tree hash
//!   skips them);
//! - GNU headers with mtime 0, uid/gid 0, empty user and group names;
//! - mode 0755 for directories and files whose owner exec bit is set, 0644 for other files;
//!   symlinks are stored as symlinks (their target bytes as written);
//! - gzip header without file name and with mtime 0, OS byte 255 ("unknown"), compression level
//!   [`GZIP_LEVEL`]. The compressed bytes depend on the deflate implementation, so a different
//!   build of this tool may produce a different (equally valid) tarball.
//!
//! While writing, every blob is hashed into a git tree ([`TreeBuilder`]), so the caller can check
//! that the archive holds exactly the tree it hashed beforehand.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use clima_artifact_manifest::{GitTreeSha1, Sha256};
use clima_artifact_runtime::extract::seekable::{
    self, Block, Flavour, HeaderKind, Index, IndexEntry, MemberEncoder,
};
use clima_artifact_runtime::tree_hash::{
    BlobHasher, EntryMode, Formats, ObjectId, TreeBuilder, blob_ids,
};
use flate2::{Compression, GzBuilder};
use sha2::Digest;

use crate::error::{Error, Result, io_error};

/// The gzip compression level used for every tarball.
pub const GZIP_LEVEL: u32 = 6;

/// What goes into the archive, collected before writing so progress can show a total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    /// A directory (written with a trailing `/`).
    Dir,
    /// A regular file of this many bytes, executable or not.
    File {
        /// Size in bytes.
        size: u64,
        /// Owner exec bit set.
        executable: bool,
    },
    /// A symlink and its target.
    Symlink(PathBuf),
}

/// One archive entry: its path relative to the folder (components joined with `/`) and kind.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Relative path, `/`-separated, as bytes.
    pub rel: Vec<u8>,
    /// What it is.
    pub kind: EntryKind,
}

/// Walks `root` in the archive's order. Errors name the offending path (sockets, fifos and devices
/// cannot be part of an artifact).
pub fn collect_entries(root: &Path) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    walk(root, Vec::new(), &mut out)?;
    Ok(out)
}

fn walk(dir: &Path, prefix: Vec<u8>, out: &mut Vec<Entry>) -> Result {
    let mut children: Vec<(Vec<u8>, PathBuf)> = Vec::new();
    for item in fs::read_dir(dir).map_err(|e| io_error("read folder", dir, &e))? {
        let item = item.map_err(|e| io_error("read folder", dir, &e))?;
        let name = item.file_name();
        if name.as_bytes() == b".git" {
            continue;
        }
        children.push((name.as_bytes().to_vec(), item.path()));
    }
    children.sort();
    for (name, path) in children {
        let mut rel = prefix.clone();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(&name);
        let meta = fs::symlink_metadata(&path).map_err(|e| io_error("inspect", &path, &e))?;
        let ft = meta.file_type();
        if ft.is_symlink() {
            let target = fs::read_link(&path).map_err(|e| io_error("read symlink", &path, &e))?;
            out.push(Entry {
                rel,
                kind: EntryKind::Symlink(target),
            });
        } else if ft.is_dir() {
            out.push(Entry {
                rel: rel.clone(),
                kind: EntryKind::Dir,
            });
            walk(&path, rel, out)?;
        } else if ft.is_file() {
            out.push(Entry {
                rel,
                kind: EntryKind::File {
                    size: meta.len(),
                    executable: meta.permissions().mode() & 0o100 != 0,
                },
            });
        } else {
            return Err(Error::input(format!(
                "`{}` is not a regular file, folder or symlink (a socket, fifo or device); \
                 remove it from the artifact folder",
                path.display()
            )));
        }
    }
    Ok(())
}

/// Refuses symlinks the installer would refuse: absolute targets, or targets that climb out of
/// the artifact through `..`.
pub fn check_symlinks(root: &Path, entries: &[Entry]) -> Result {
    for e in entries {
        if let EntryKind::Symlink(target) = &e.kind {
            let depth = e.rel.iter().filter(|b| **b == b'/').count() as i64;
            let mut level = depth;
            let mut escapes = target.is_absolute();
            for c in target.components() {
                match c {
                    Component::ParentDir => level -= 1,
                    Component::Normal(_) => level += 1,
                    _ => {}
                }
                if level < 0 {
                    escapes = true;
                }
            }
            if escapes {
                return Err(Error::input(format!(
                    "symlink `{}` points to `{}`, outside the artifact; installers refuse such \
                     archives: replace it with a copy of the data or a relative link inside the folder",
                    root.join(std::ffi::OsStr::from_bytes(&e.rel)).display(),
                    target.display()
                )));
            }
        }
    }
    Ok(())
}

/// Counts bytes written through it and feeds them to a SHA-256.
struct HashingWriter<W> {
    inner: W,
    hasher: sha2::Sha256,
    written: u64,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Reads a file, feeding every byte to a git blob hasher and reporting progress.
struct BlobReader<'a, R> {
    inner: R,
    hasher: &'a mut BlobHasher,
    progress: &'a dyn Fn(u64),
}

impl<R: Read> Read for BlobReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        (self.progress)(n as u64);
        Ok(n)
    }
}

/// What [`write_tarball`] produced.
#[derive(Debug, Clone)]
pub struct Tarball {
    /// Final location.
    pub path: PathBuf,
    /// SHA-256 of the compressed bytes.
    pub sha256: Sha256,
    /// Size of the compressed file.
    pub size: u64,
    /// Git tree hash of the content as archived.
    pub tree_hash: GitTreeSha1,
    /// SHA-256 of the index document, for a seekable tarball (the download entry's
    /// `index-sha256`).
    pub index_sha256: Option<Sha256>,
}

use seekable::format::gnu_header as header_base;

/// Appends the regular file `rel` of `root` (`size` bytes when listed) to `builder` and
/// returns its git blob hash, computed from the bytes as they are archived.
fn append_file<W: Write>(
    builder: &mut tar::Builder<W>,
    root: &Path,
    rel: &Path,
    size: u64,
    executable: bool,
    progress: &dyn Fn(u64),
) -> Result<ObjectId> {
    let full = root.join(rel);
    let file = fs::File::open(&full).map_err(|e| io_error("open", &full, &e))?;
    let mut hasher = BlobHasher::new(size);
    let mode = if executable { 0o755 } else { 0o644 };
    let mut h = header_base(tar::EntryType::Regular, mode, size);
    // `take` guards against a file that grew since it was listed; a file that
    // shrank makes tar fail with an error naming it.
    let reader = BlobReader {
        inner: file.take(size),
        hasher: &mut hasher,
        progress,
    };
    builder.append_data(&mut h, rel, reader).map_err(|e| {
        Error::failed(format!(
            "cannot archive `{}` (did it change while `create` ran?): {e}",
            full.display()
        ))
    })?;
    hasher.finish().map_err(|e| {
        Error::failed(format!(
            "`{}` changed size while being archived: {e}",
            full.display()
        ))
    })
}

/// Writes `entries` of `root` to `out` (through a temp file in the same folder, renamed at the
/// end) and returns its sha256 and the tree hash of what was archived. `progress` receives the
/// number of content bytes read, as they are read.
pub fn write_tarball(
    root: &Path,
    entries: &[Entry],
    out: &Path,
    progress: &dyn Fn(u64),
) -> Result<Tarball> {
    let (tmp, writer) = open_output(out)?;
    let gz = GzBuilder::new()
        .mtime(0)
        .operating_system(255)
        .write(writer, Compression::new(GZIP_LEVEL));
    let mut builder = tar::Builder::new(gz);
    let mut tree = TreeBuilder::new();
    let write_err = |e: io::Error| io_error("write", out, &e);

    for entry in entries {
        let rel = Path::new(std::ffi::OsStr::from_bytes(&entry.rel));
        let rel_str = String::from_utf8_lossy(&entry.rel).into_owned();
        match &entry.kind {
            EntryKind::Dir => {
                let mut h = header_base(tar::EntryType::Directory, 0o755, 0);
                let mut name = entry.rel.clone();
                name.push(b'/');
                builder
                    .append_data(
                        &mut h,
                        Path::new(std::ffi::OsStr::from_bytes(&name)),
                        io::empty(),
                    )
                    .map_err(write_err)?;
            }
            EntryKind::File { size, executable } => {
                let blob = append_file(&mut builder, root, rel, *size, *executable, progress)?;
                let mode = if *executable {
                    EntryMode::Executable
                } else {
                    EntryMode::File
                };
                tree.insert(&rel_str, mode, blob);
            }
            EntryKind::Symlink(target) => {
                // As Tar.create writes them: symlinks with mode 0o755 and size 0.
                let mut h = header_base(tar::EntryType::Symlink, 0o755, 0);
                builder
                    .append_link(&mut h, rel, target)
                    .map_err(write_err)?;
                let bytes = target.as_os_str().as_bytes();
                let mut hasher = BlobHasher::new(bytes.len() as u64);
                hasher.update(bytes);
                let blob = hasher
                    .finish()
                    .map_err(|e| Error::failed(format!("hashing symlink `{rel_str}`: {e}")))?;
                tree.insert(&rel_str, EntryMode::Symlink, blob);
            }
        }
    }
    let gz = builder.into_inner().map_err(write_err)?;
    let writer = gz.finish().map_err(write_err)?;
    let (sha256, size) = finish_output(tmp, writer, out)?;
    Ok(Tarball {
        path: out.to_path_buf(),
        sha256,
        size,
        tree_hash: tree.finish(),
        index_sha256: None,
    })
}

/// The output of a tarball: a temp file beside `out` and the hashing writer on it.
type Output = HashingWriter<io::BufWriter<fs::File>>;

/// Creates the temp file in `out`'s folder (created if missing) and a writer on it.
fn open_output(out: &Path) -> Result<(tempfile::NamedTempFile, Output)> {
    let out_dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&out_dir).map_err(|e| io_error("create folder", &out_dir, &e))?;
    let tmp = tempfile::Builder::new()
        .prefix(".clima-tarball-")
        .tempfile_in(&out_dir)
        .map_err(|e| io_error("create a temporary file in", &out_dir, &e))?;
    let file = tmp
        .as_file()
        .try_clone()
        .map_err(|e| io_error("open", tmp.path(), &e))?;
    let writer = HashingWriter {
        inner: io::BufWriter::with_capacity(1 << 20, file),
        hasher: sha2::Sha256::new(),
        written: 0,
    };
    Ok((tmp, writer))
}

/// Flushes and syncs the temp file, renames it to `out` and returns its sha256 and size.
fn finish_output(
    tmp: tempfile::NamedTempFile,
    mut writer: Output,
    out: &Path,
) -> Result<(Sha256, u64)> {
    writer.flush().map_err(|e| io_error("write", out, &e))?;
    let HashingWriter {
        inner,
        hasher,
        written,
    } = writer;
    drop(inner);
    tmp.as_file()
        .sync_all()
        .map_err(|e| io_error("sync", tmp.path(), &e))?;
    tmp.persist(out)
        .map_err(|e| io_error("move the tarball to", out, &e.error))?;
    // tempfile creates 0600 files; a tarball to upload should be readable by others.
    let _ = fs::set_permissions(out, fs::Permissions::from_mode(0o644));
    Ok((Sha256(hasher.finalize().into()), written))
}

/// Writes the seekable tarball (`docs/seekable.md`) of `entries` of `root` to `out` (through a
/// temp file renamed at the end): files and symlinks in path order, each its own members
/// (`flavour`), files larger than `block_size` cut into blocks, then the end-of-archive, the
/// index and the footer. Folders are not archived (readers create them as files need them), so
/// the tarball has no empty folder. `progress` receives the content bytes read.
pub fn write_seekable(
    root: &Path,
    entries: &[Entry],
    out: &Path,
    flavour: Flavour,
    block_size: u64,
    progress: &dyn Fn(u64),
) -> Result<Tarball> {
    let (tmp, mut writer) = open_output(out)?;
    let write_err = |e: io::Error| io_error("write", out, &e);
    let mut encoder = MemberEncoder::new(flavour).map_err(write_err)?;
    let mut items: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.kind != EntryKind::Dir)
        .collect();
    items.sort_by(|a, b| a.rel.cmp(&b.rel));
    let mut tree = TreeBuilder::with_formats(Formats::Sha1AndSha256);
    let mut index = Index {
        block_size,
        tar_size: 0,
        data_size: 0,
        entries: Vec::with_capacity(items.len()),
    };
    for entry in items {
        if entry.rel.len() > seekable::MAX_PATH {
            return Err(Error::input(format!(
                "`{}` has a path of {} bytes, longer than a seekable tarball allows ({}); pass \
                 --classic",
                root.join(std::ffi::OsStr::from_bytes(&entry.rel)).display(),
                entry.rel.len(),
                seekable::MAX_PATH
            )));
        }
        let member = Member {
            writer: &mut writer,
            encoder: &mut encoder,
            rel: &entry.rel,
            tar_offset: index.tar_size,
        };
        let e = match &entry.kind {
            EntryKind::File { size, executable } => {
                let file = FileToArchive {
                    full: root.join(std::ffi::OsStr::from_bytes(&entry.rel)),
                    size: *size,
                    executable: *executable,
                };
                member.file(&file, block_size, progress)?
            }
            EntryKind::Symlink(target) => member.symlink(target.as_os_str().as_bytes(), out)?,
            EntryKind::Dir => continue,
        };
        tree.insert_bytes(&e.path, e.mode, e.blob);
        index.tar_size += e.tar_len();
        index.entries.push(e);
    }
    index.data_size = writer.written;
    let doc = index.encode();
    if doc.len() as u64 > seekable::MAX_INDEX_BYTES {
        return Err(Error::input(format!(
            "`{}` has too many files for a seekable tarball: its index would take {} bytes, \
             more than {}; pass --classic",
            root.display(),
            doc.len(),
            seekable::MAX_INDEX_BYTES
        )));
    }
    seekable::write_tail(&mut writer, &mut encoder, index.data_size, &doc).map_err(write_err)?;
    let index_sha256 = Sha256(sha2::Sha256::digest(&doc).into());
    let (sha256, size) = finish_output(tmp, writer, out)?;
    Ok(Tarball {
        path: out.to_path_buf(),
        sha256,
        size,
        tree_hash: tree.finish(),
        index_sha256: Some(index_sha256),
    })
}

/// A regular file to archive: its path on disk, listed size and exec bit.
struct FileToArchive {
    full: PathBuf,
    size: u64,
    executable: bool,
}

/// The writing of one entry's members at the end of the output.
struct Member<'a> {
    writer: &'a mut Output,
    encoder: &'a mut MemberEncoder,
    rel: &'a [u8],
    tar_offset: u64,
}

impl Member<'_> {
    /// Compresses `plain` as one member and appends it; returns its offset and length.
    fn push(&mut self, plain: &[u8], what: &Path) -> Result<(u64, u64)> {
        let bytes = self
            .encoder
            .encode(plain)
            .map_err(|e| io_error("compress", what, &e))?;
        let at = self.writer.written;
        self.writer
            .write_all(&bytes)
            .map_err(|e| io_error("write the tarball for", what, &e))?;
        Ok((at, bytes.len() as u64))
    }

    /// A file's members: header and content (cut into blocks when larger than `block_size`),
    /// its blob ids computed from the bytes archived.
    fn file(
        mut self,
        file: &FileToArchive,
        block_size: u64,
        progress: &dyn Fn(u64),
    ) -> Result<IndexEntry> {
        let FileToArchive {
            full,
            size,
            executable,
        } = file;
        let (size, executable) = (*size, *executable);
        let opened = fs::File::open(full).map_err(|e| io_error("open", full, &e))?;
        // `take` guards against a file that grew since it was listed.
        let mut reader = opened.take(size);
        let header = seekable::tar_header(self.rel, HeaderKind::File { size, executable });
        let mut hasher = BlobHasher::with_formats(size, Formats::Sha1AndSha256);
        let split = size > block_size;
        let count = if split { size.div_ceil(block_size) } else { 1 };
        let offset = self.writer.written;
        let mut blocks = Vec::new();
        let mut plain = Vec::with_capacity(header.len() + size.min(block_size) as usize + 512);
        for k in 0..count {
            plain.clear();
            if k == 0 {
                plain.extend_from_slice(&header);
            }
            let n = if split {
                block_size.min(size - k * block_size)
            } else {
                size
            };
            let start = plain.len();
            let read = (&mut reader)
                .take(n)
                .read_to_end(&mut plain)
                .map_err(|e| io_error("read", full, &e))?;
            if read as u64 != n {
                return Err(Error::failed(format!(
                    "`{}` changed size while being archived (listed as {size} bytes); run \
                     `create` again once nothing writes to the folder",
                    full.display()
                )));
            }
            let content = &plain[start..];
            hasher.update(content);
            progress(n);
            let digest: [u8; 32] = sha2::Sha256::digest(content).into();
            if k + 1 == count {
                plain.resize(
                    plain.len() + (seekable::format::padded(size) - size) as usize,
                    0,
                );
            }
            let (at, length) = self.push(&plain, full)?;
            if split {
                blocks.push(Block {
                    offset: at,
                    length,
                    sha256: digest,
                });
            }
        }
        let blob = hasher.finish().map_err(|e| {
            Error::failed(format!(
                "`{}` changed while being archived: {e}",
                full.display()
            ))
        })?;
        Ok(IndexEntry {
            path: self.rel.to_vec(),
            mode: if executable {
                EntryMode::Executable
            } else {
                EntryMode::File
            },
            size,
            blob,
            tar_offset: self.tar_offset,
            header_len: header.len() as u32,
            offset,
            length: self.writer.written - offset,
            blocks,
        })
    }

    /// A symlink's member: its header alone, the target in it.
    fn symlink(mut self, target: &[u8], out: &Path) -> Result<IndexEntry> {
        let header = seekable::tar_header(self.rel, HeaderKind::Symlink(target));
        let (offset, length) = self.push(&header, out)?;
        Ok(IndexEntry {
            path: self.rel.to_vec(),
            mode: EntryMode::Symlink,
            size: target.len() as u64,
            blob: blob_ids(target, Formats::Sha1AndSha256),
            tar_offset: self.tar_offset,
            header_len: header.len() as u32,
            offset,
            length,
            blocks: Vec::new(),
        })
    }
}

/// The `index-sha256` of `tarball` if it is a seekable tarball whose index authenticates
/// against `tree` (and whose members hold what the index says); `None` for a classic tarball.
/// A seekable tarball whose index does not is an error: it should not be published.
pub fn index_sha256_of(tarball: &Path, tree: &GitTreeSha1) -> Result<Option<Sha256>> {
    let mut file = fs::File::open(tarball).map_err(|e| io_error("open", tarball, &e))?;
    let len = file
        .metadata()
        .map_err(|e| io_error("inspect", tarball, &e))?
        .len();
    let refused = |e: seekable::IndexError| {
        Error::input(format!(
            "`{}` is a seekable tarball whose index cannot be used: {e}; make it again with \
             `clima-artifacts create`",
            tarball.display()
        ))
    };
    let limits = seekable::IndexLimits::default();
    let Some((locator, doc)) = seekable::read_index(&mut file, len, &limits).map_err(refused)?
    else {
        return Ok(None);
    };
    let expected = seekable::Expected {
        tree_sha1: *tree,
        tree_sha256: None,
        index_sha256: None,
    };
    let index = seekable::authenticate(&doc, &locator, &expected, &limits).map_err(refused)?;
    index.verify_file(&mut file).map_err(refused)?;
    Ok(Some(Sha256(sha2::Sha256::digest(&doc).into())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(rel: &str, target: &str) -> Entry {
        Entry {
            rel: rel.as_bytes().to_vec(),
            kind: EntryKind::Symlink(PathBuf::from(target)),
        }
    }

    #[test]
    fn symlink_escape_rules() {
        let root = Path::new("/r");
        assert!(check_symlinks(root, &[entry("a", "b")]).is_ok());
        assert!(check_symlinks(root, &[entry("d/a", "../b")]).is_ok());
        assert!(check_symlinks(root, &[entry("a", "../b")]).is_err());
        assert!(check_symlinks(root, &[entry("d/a", "../../b")]).is_err());
        assert!(check_symlinks(root, &[entry("a", "/etc/passwd")]).is_err());
        assert!(check_symlinks(root, &[entry("d/a", "x/../../b")]).is_ok());
    }
}
