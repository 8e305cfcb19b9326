//! Git tree SHA-1 of a directory: the name of an artifact (`artifacts/<git-tree-sha1>/`).
//!
//! The hash is byte for byte what `git add -A && git write-tree` prints for the directory (with
//! `core.fileMode=true` and `core.symlinks=true`), which is also what Julia's `Pkg` computes.
//!
//! # Objects
//!
//! A *blob* id is `sha1("blob " <decimal length> "\0" <content>)` ([`BlobHasher`]).
//! A *tree* id is `sha1("tree " <decimal length> "\0" <entries>)` where every entry is
//!
//! ```text
//! <mode> SP <name bytes> NUL <20 raw bytes of the entry's blob or tree id>
//! ```
//!
//! with `<mode>` in ASCII, no leading zeros ([`EntryMode`]):
//!
//! | on disk                                   | mode     | id of                        |
//! |-------------------------------------------|----------|------------------------------|
//! | regular file, owner exec bit (`0o100`) clear | `100644` | blob of the file content     |
//! | regular file, owner exec bit set           | `100755` | blob of the file content     |
//! | symbolic link (dangling ones too)          | `120000` | blob of the link target bytes (never followed) |
//! | directory                                  | `40000`  | tree of the directory        |
//!
//! Only the owner exec bit matters: group/other bits, owners, times and setuid bits are ignored.
//!
//! # Order
//!
//! Entries are sorted by the bytes of their name, where a directory's name is compared as if it
//! ended in `/`. So `a.b` (0x2e) < directory `a` (compared as `a/`, 0x2f) < `a0` (0x30), while a
//! *file* `a` sorts before `a-` and `a.b`:
//!
//! ```text
//! file a, a-, a.b, dir a/, a0        (files only would be: a, a-, a.b, a0)
//! ```
//!
//! # What is left out
//!
//! - Any entry named `.git` (file or directory, at any depth) is skipped, as git does.
//! - A directory that contains no file or symlink, directly or in any subdirectory, is skipped
//!   (git stores no empty trees). A directory holding only empty directories is empty too.
//!   The root is the exception: an artifact with no files at all hashes to the empty tree
//!   `4b825dc642cb6eb9a060e54bf8d69288fbee4904`.
//! - Other file types (fifos, sockets, devices) are an error naming the path: they cannot come
//!   from a verified download and git cannot store them.
//!
//! # Walking
//!
//! [`tree_hash`] lists directories without following symlinks (a symlink to a directory is a
//! `120000` entry), then hashes all files in parallel on the rayon pool, streaming each through
//! a 256 KiB buffer (constant memory, no mmap), then assembles the trees with a [`TreeBuilder`].
//! The extractor feeds the same [`TreeBuilder`] while writing, so an install never re-reads a file.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use sha1::{Digest, Sha1};

use clima_artifact_manifest::GitTreeSha1;

/// Size of the read buffer used per hashing thread.
const READ_BUFFER: usize = 256 * 1024;

/// Mode of a tree entry, as git records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntryMode {
    /// `100644`
    File,
    /// `100755` (owner exec bit set)
    Executable,
    /// `120000` (blob = link target bytes)
    Symlink,
    /// `40000`
    Directory,
}

impl EntryMode {
    /// The mode as git writes it in a tree object (`100644`, `100755`, `120000`, `40000`).
    pub fn as_git_str(self) -> &'static str {
        match self {
            EntryMode::File => "100644",
            EntryMode::Executable => "100755",
            EntryMode::Symlink => "120000",
            EntryMode::Directory => "40000",
        }
    }

    /// [`EntryMode::Executable`] if the owner exec bit (`0o100`) of `mode` is set, else
    /// [`EntryMode::File`].
    pub fn for_file_mode(mode: u32) -> EntryMode {
        if mode & 0o100 != 0 {
            EntryMode::Executable
        } else {
            EntryMode::File
        }
    }
}

/// Incremental git blob hash: `sha1("blob <len>\0" || bytes)`, fed while a file is written.
pub struct BlobHasher {
    sha: Sha1,
    expected: u64,
    seen: u64,
}

impl BlobHasher {
    /// Starts a blob of `len` bytes (the header needs the length up front, e.g. from a tar header).
    pub fn new(len: u64) -> BlobHasher {
        let mut sha = Sha1::new();
        sha.update(format!("blob {len}\0").as_bytes());
        BlobHasher {
            sha,
            expected: len,
            seen: 0,
        }
    }

    /// Feeds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.seen += bytes.len() as u64;
        self.sha.update(bytes);
    }

    /// The blob id; errors if the number of bytes fed differs from `len`.
    pub fn finish(self) -> io::Result<[u8; 20]> {
        if self.seen != self.expected {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "blob announced as {} bytes but {} bytes were hashed",
                    self.expected, self.seen
                ),
            ));
        }
        Ok(self.sha.finalize().into())
    }
}

/// The git blob id of `bytes` (used for symlink targets and small contents).
pub fn blob_id(bytes: &[u8]) -> [u8; 20] {
    let mut hasher = BlobHasher::new(bytes.len() as u64);
    hasher.update(bytes);
    hasher.sha.finalize().into()
}

/// A node of the tree being built: a leaf (blob or precomputed tree) or a directory.
enum Node {
    Leaf(EntryMode, [u8; 20]),
    Dir(DirNode),
}

#[derive(Default)]
struct DirNode {
    children: HashMap<Vec<u8>, Node>,
}

impl DirNode {
    /// The tree id of this directory, or `None` if it holds no file at any depth.
    fn hash(&self) -> Option<[u8; 20]> {
        let mut entries: Vec<(Vec<u8>, EntryMode, [u8; 20])> = Vec::new();
        for (name, node) in &self.children {
            match node {
                Node::Leaf(mode, id) => entries.push((name.clone(), *mode, *id)),
                Node::Dir(dir) => {
                    if let Some(id) = dir.hash() {
                        entries.push((name.clone(), EntryMode::Directory, id));
                    }
                }
            }
        }
        if entries.is_empty() {
            return None;
        }
        Some(tree_object_id(&mut entries))
    }
}

/// Sorts `entries` in git order and returns the id of the tree object they form.
fn tree_object_id(entries: &mut [(Vec<u8>, EntryMode, [u8; 20])]) -> [u8; 20] {
    fn key(e: &(Vec<u8>, EntryMode, [u8; 20])) -> impl Iterator<Item = &u8> {
        let slash: &[u8] = if e.1 == EntryMode::Directory {
            b"/"
        } else {
            b""
        };
        e.0.iter().chain(slash)
    }
    entries.sort_unstable_by(|a, b| key(a).cmp(key(b)));
    let len: usize = entries
        .iter()
        .map(|(name, mode, _)| mode.as_git_str().len() + 1 + name.len() + 1 + 20)
        .sum();
    let mut sha = Sha1::new();
    sha.update(format!("tree {len}\0").as_bytes());
    for (name, mode, id) in entries.iter() {
        sha.update(mode.as_git_str().as_bytes());
        sha.update(b" ");
        sha.update(name);
        sha.update(b"\0");
        sha.update(id);
    }
    sha.finalize().into()
}

/// Builds a tree hash from `(relative path, mode, blob id)` entries gathered in any order
/// (e.g. while extracting); empty directories are skipped as git does.
///
/// Inserting [`EntryMode::Directory`] records a precomputed subtree id at that path.
#[derive(Default)]
pub struct TreeBuilder {
    root: DirNode,
}

impl TreeBuilder {
    /// An empty builder.
    pub fn new() -> TreeBuilder {
        TreeBuilder::default()
    }

    /// Records a file or symlink at `path` (components separated by `/`). A later entry for the
    /// same path replaces the earlier one.
    pub fn insert(&mut self, path: &str, mode: EntryMode, blob: [u8; 20]) {
        self.insert_bytes(path.as_bytes(), mode, blob);
    }

    /// Like [`TreeBuilder::insert`] for a path given as raw bytes (names need not be UTF-8).
    /// Empty and `.` components are ignored.
    pub fn insert_bytes(&mut self, path: &[u8], mode: EntryMode, blob: [u8; 20]) {
        let components: Vec<&[u8]> = path
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
            .collect();
        self.insert_components(&components, mode, blob);
    }

    /// Like [`TreeBuilder::insert`] for a path already split into its components.
    /// A component that was a file becomes a directory (and the reverse): later entries win.
    pub fn insert_components(&mut self, components: &[&[u8]], mode: EntryMode, blob: [u8; 20]) {
        let Some((last, parents)) = components.split_last() else {
            return;
        };
        let mut dir = &mut self.root;
        for component in parents {
            let node = dir
                .children
                .entry(component.to_vec())
                .or_insert_with(|| Node::Dir(DirNode::default()));
            if let Node::Leaf(..) = node {
                *node = Node::Dir(DirNode::default());
            }
            dir = match node {
                Node::Dir(d) => d,
                Node::Leaf(..) => unreachable!("replaced by a directory above"),
            };
        }
        dir.children.insert(last.to_vec(), Node::Leaf(mode, blob));
    }

    /// The root tree hash (the empty tree if nothing but empty directories was recorded).
    pub fn finish(self) -> GitTreeSha1 {
        GitTreeSha1(self.root.hash().unwrap_or_else(|| tree_object_id(&mut [])))
    }
}

/// An error that names the path it is about.
fn path_error(path: &Path, what: &str, err: io::Error) -> io::Error {
    io::Error::new(err.kind(), format!("{what} `{}`: {err}", path.display()))
}

/// A file or symlink found while walking, to be hashed.
struct Found {
    /// Components relative to the root.
    rel: Vec<Vec<u8>>,
    /// Absolute path.
    path: PathBuf,
    symlink: bool,
}

/// The git tree hash of `dir` with every file added (`.git` skipped, empty dirs skipped),
/// hashing files in parallel.
pub fn tree_hash(dir: &Path) -> io::Result<GitTreeSha1> {
    let meta = fs::symlink_metadata(dir).map_err(|e| path_error(dir, "cannot read", e))?;
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cannot hash `{}`: not a directory", dir.display()),
        ));
    }

    // 1. List everything (sequentially, iteratively: no recursion depth limit).
    let mut found = Vec::new();
    let mut pending: Vec<(PathBuf, Vec<Vec<u8>>)> = vec![(dir.to_path_buf(), Vec::new())];
    while let Some((path, rel)) = pending.pop() {
        let listing = fs::read_dir(&path).map_err(|e| path_error(&path, "cannot list", e))?;
        for entry in listing {
            let entry = entry.map_err(|e| path_error(&path, "cannot list", e))?;
            let name: OsString = entry.file_name();
            if name.as_bytes() == b".git" {
                continue;
            }
            let child = entry.path();
            let file_type = entry
                .file_type()
                .map_err(|e| path_error(&child, "cannot stat", e))?;
            let mut child_rel = rel.clone();
            child_rel.push(name.into_vec());
            if file_type.is_dir() {
                pending.push((child, child_rel));
            } else if file_type.is_file() || file_type.is_symlink() {
                found.push(Found {
                    rel: child_rel,
                    path: child,
                    symlink: file_type.is_symlink(),
                });
            } else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "cannot hash `{}`: not a regular file, directory or symlink \
                         (fifos, sockets and devices cannot be part of an artifact)",
                        child.display()
                    ),
                ));
            }
        }
    }

    // 2. Hash every file and symlink in parallel.
    let hashed: Vec<(EntryMode, [u8; 20])> = found
        .par_iter()
        .map(|f| {
            if f.symlink {
                let target = fs::read_link(&f.path)
                    .map_err(|e| path_error(&f.path, "cannot read link", e))?;
                Ok((EntryMode::Symlink, blob_id(target.as_os_str().as_bytes())))
            } else {
                hash_file(&f.path)
            }
        })
        .collect::<io::Result<_>>()?;

    // 3. Assemble the trees.
    let mut builder = TreeBuilder::new();
    for (f, (mode, id)) in found.iter().zip(hashed) {
        let components: Vec<&[u8]> = f.rel.iter().map(Vec::as_slice).collect();
        builder.insert_components(&components, mode, id);
    }
    Ok(builder.finish())
}

thread_local! {
    static BUFFER: RefCell<Vec<u8>> = RefCell::new(vec![0; READ_BUFFER]);
}

/// Hashes one regular file (opened without following symlinks), returning its mode and blob id.
fn hash_file(path: &Path) -> io::Result<(EntryMode, [u8; 20])> {
    let mut file: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| path_error(path, "cannot open", e))?;
    let meta = file
        .metadata()
        .map_err(|e| path_error(path, "cannot stat", e))?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("cannot hash `{}`: no longer a regular file", path.display()),
        ));
    }
    let mode = EntryMode::for_file_mode(meta.mode());
    let mut hasher = BlobHasher::new(meta.len());
    BUFFER.with(|buffer| -> io::Result<()> {
        let mut buffer = buffer.borrow_mut();
        loop {
            let n = match file.read(&mut buffer) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(path_error(path, "cannot read", e)),
            };
            hasher.update(&buffer[..n]);
        }
    })?;
    let id = hasher.finish().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "`{}` changed while it was being hashed: {e}",
                path.display()
            ),
        )
    })?;
    Ok((mode, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(id: [u8; 20]) -> String {
        GitTreeSha1(id).to_hex()
    }

    #[test]
    fn blob_ids_match_git() {
        // `printf '' | git hash-object --stdin` and `echo hello | git hash-object --stdin`.
        assert_eq!(
            hex(blob_id(b"")),
            "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
        );
        assert_eq!(
            hex(blob_id(b"hello\n")),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
    }

    #[test]
    fn blob_hasher_checks_the_announced_length() {
        let mut h = BlobHasher::new(3);
        h.update(b"ab");
        let err = h.finish().unwrap_err();
        assert!(err.to_string().contains("announced as 3 bytes"), "{err}");
        let mut h = BlobHasher::new(2);
        h.update(b"a");
        h.update(b"b");
        assert_eq!(h.finish().unwrap(), blob_id(b"ab"));
    }

    #[test]
    fn empty_builder_is_the_empty_tree() {
        assert_eq!(
            TreeBuilder::new().finish().to_hex(),
            "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
        );
    }

    #[test]
    fn insertion_order_does_not_matter_and_later_wins() {
        let mut a = TreeBuilder::new();
        a.insert("x/y", EntryMode::File, blob_id(b"1"));
        a.insert("a", EntryMode::Executable, blob_id(b"2"));
        let mut b = TreeBuilder::new();
        b.insert("a", EntryMode::File, blob_id(b"old"));
        b.insert("a", EntryMode::Executable, blob_id(b"2"));
        b.insert("./x//y", EntryMode::File, blob_id(b"1"));
        assert_eq!(a.finish(), b.finish());
    }

    #[test]
    fn directories_sort_as_if_they_ended_in_a_slash() {
        let mut entries = vec![
            (b"a0".to_vec(), EntryMode::File, [0; 20]),
            (b"a".to_vec(), EntryMode::Directory, [0; 20]),
            (b"a.b".to_vec(), EntryMode::File, [0; 20]),
            (b"a-".to_vec(), EntryMode::File, [0; 20]),
        ];
        tree_object_id(&mut entries);
        let names: Vec<&[u8]> = entries.iter().map(|e| e.0.as_slice()).collect();
        assert_eq!(names, [&b"a-"[..], b"a.b", b"a", b"a0"]);
    }
}
