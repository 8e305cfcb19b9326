//! Deterministic `.tar.gz` of a folder: the same content always gives the same bytes (and so the
//! same sha256), whoever owns the files and whenever they were touched.
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
use clima_artifact_runtime::tree_hash::{BlobHasher, EntryMode, ObjectId, TreeBuilder};
use flate2::{Compression, GzBuilder};
use sha2::Digest;

use crate::error::{CliError, CliResult, io_error};

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
pub fn collect_entries(root: &Path) -> CliResult<Vec<Entry>> {
    let mut out = Vec::new();
    walk(root, Vec::new(), &mut out)?;
    Ok(out)
}

fn walk(dir: &Path, prefix: Vec<u8>, out: &mut Vec<Entry>) -> CliResult {
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
            return Err(CliError::usage(format!(
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
pub fn check_symlinks(root: &Path, entries: &[Entry]) -> CliResult {
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
                return Err(CliError::usage(format!(
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
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
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
}

fn header_base(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
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

/// Appends the regular file `rel` of `root` (`size` bytes when listed) to `builder` and
/// returns its git blob hash, computed from the bytes as they are archived.
fn append_file<W: Write>(
    builder: &mut tar::Builder<W>,
    root: &Path,
    rel: &Path,
    size: u64,
    executable: bool,
    progress: &dyn Fn(u64),
) -> CliResult<ObjectId> {
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
        CliError::failure(format!(
            "cannot archive `{}` (did it change while `create` ran?): {e}",
            full.display()
        ))
    })?;
    hasher.finish().map_err(|e| {
        CliError::failure(format!(
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
) -> CliResult<Tarball> {
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
    };
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
                    .map_err(|e| CliError::failure(format!("hashing symlink `{rel_str}`: {e}")))?;
                tree.insert(&rel_str, EntryMode::Symlink, blob);
            }
        }
    }
    let gz = builder.into_inner().map_err(write_err)?;
    let mut writer = gz.finish().map_err(write_err)?;
    writer.flush().map_err(write_err)?;
    let HashingWriter { inner, hasher } = writer;
    drop(inner);
    let sha = hasher.finalize();
    let size = tmp
        .as_file()
        .metadata()
        .map_err(|e| io_error("inspect", tmp.path(), &e))?
        .len();
    tmp.as_file()
        .sync_all()
        .map_err(|e| io_error("sync", tmp.path(), &e))?;
    tmp.persist(out)
        .map_err(|e| io_error("move the tarball to", out, &e.error))?;
    // tempfile creates 0600 files; a tarball to upload should be readable by others.
    let _ = fs::set_permissions(out, fs::Permissions::from_mode(0o644));
    Ok(Tarball {
        path: out.to_path_buf(),
        sha256: Sha256(sha.into()),
        size,
        tree_hash: tree.finish(),
    })
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
