//! Git tree SHA-1 of a directory: the name of an artifact (`artifacts/<git-tree-sha1>/`), and on
//! request its git tree SHA-256 (the `git-tree-sha256` of a manifest entry) in the same pass.
//!
//! The hash is byte for byte what `git add -A && git write-tree` prints for the directory (with
//! `core.fileMode=true` and `core.symlinks=true`), which is also what Julia's `Pkg` computes.
//! The SHA-256 one is what the same commands print in a repository made with
//! `git init --object-format=sha256`, and what `Tar.tree_hash(...; algorithm = "git-sha256",
//! skip_empty = true)` computes.
//!
//! # Objects
//!
//! A *blob* id is `H("blob " <decimal length> "\0" <content>)` ([`BlobHasher`]).
//! A *tree* id is `H("tree " <decimal length> "\0" <entries>)` where every entry is
//!
//! ```text
//! <mode> SP <name bytes> NUL <raw bytes of the entry's blob or tree id>
//! ```
//!
//! with `H` SHA-1 (ids of 20 bytes) or SHA-256 (ids of 32 bytes, in the SHA-256 tree too):
//! the two formats differ only in the digest ([`Formats`]).
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
//!   `4b825dc642cb6eb9a060e54bf8d69288fbee4904` (SHA-256:
//!   `6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321`). The same rule holds
//!   for both formats.
//! - Other file types (fifos, sockets, devices) are an error naming the path: they cannot come
//!   from a verified download and git cannot store them.
//!
//! # Walking
//!
//! [`tree_hash`] lists directories without following symlinks (a symlink to a directory is a
//! `120000` entry), then hashes all files in parallel on the rayon pool, streaming each through
//! a 256 KiB buffer (constant memory, no mmap), then assembles the trees with a [`TreeBuilder`].
//! The extractor feeds the same [`TreeBuilder`] while writing, so an install never re-reads a file.
//! With [`Formats::Sha1AndSha256`] each buffer goes through both digests while it is in cache:
//! one read of the bytes gives both tree hashes ([`tree_hashes`]). SHA-1 alone is the default,
//! so the SHA-256 work is only done when an entry carries a `git-tree-sha256` or it is asked for.

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
use sha2::Sha256;

use clima_artifact_manifest::{GitTreeSha1, GitTreeSha256};

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
    /// The permission bits of an installed file of this mode: read-only, as Pkg leaves
    /// installed artifacts (`set_readonly`): `0o555` for an executable, `0o444` otherwise.
    /// Only the file's own write bit goes; folders keep `0o755`, so any gc (ours or Julia's)
    /// can remove the artifact.
    pub fn installed_permissions(self) -> u32 {
        if self == EntryMode::Executable {
            0o555
        } else {
            0o444
        }
    }

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

/// Which git object formats to hash in: SHA-1 always, SHA-256 as well on request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Formats {
    /// SHA-1 only (`git-tree-sha1`, what every manifest carries): the fast default.
    #[default]
    Sha1,
    /// SHA-1 and SHA-256 (`git-tree-sha256`) from the same bytes, in the same pass.
    Sha1AndSha256,
}

impl Formats {
    /// [`Formats::Sha1AndSha256`] if `sha256`, else [`Formats::Sha1`].
    pub fn with_sha256(sha256: bool) -> Formats {
        if sha256 {
            Formats::Sha1AndSha256
        } else {
            Formats::Sha1
        }
    }

    fn sha256(self) -> bool {
        self == Formats::Sha1AndSha256
    }
}

/// The id of a blob in each format hashed: SHA-1 always, SHA-256 when it was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectId {
    /// The SHA-1 object id.
    pub sha1: [u8; 20],
    /// The SHA-256 object id, if [`Formats::Sha1AndSha256`].
    pub sha256: Option<[u8; 32]>,
}

impl From<[u8; 20]> for ObjectId {
    /// A SHA-1 id alone.
    fn from(sha1: [u8; 20]) -> ObjectId {
        ObjectId { sha1, sha256: None }
    }
}

/// The tree hashes of a folder or of what an extraction wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeHashes {
    /// The git tree SHA-1 (`git-tree-sha1`).
    pub sha1: GitTreeSha1,
    /// The git tree SHA-256 (`git-tree-sha256`), if [`Formats::Sha1AndSha256`].
    pub sha256: Option<GitTreeSha256>,
}

/// Incremental git blob hash: `H("blob <len>\0" || bytes)`, fed while a file is written, in
/// SHA-1 and, if asked, SHA-256.
pub struct BlobHasher {
    sha: Sha1,
    sha256: Option<Sha256>,
    expected: u64,
    seen: u64,
}

impl BlobHasher {
    /// Starts a blob of `len` bytes (the header needs the length up front, e.g. from a tar
    /// header), hashed in SHA-1 only.
    pub fn new(len: u64) -> BlobHasher {
        BlobHasher::with_formats(len, Formats::Sha1)
    }

    /// Starts a blob of `len` bytes hashed in `formats`.
    pub fn with_formats(len: u64, formats: Formats) -> BlobHasher {
        let header = format!("blob {len}\0");
        let mut sha = Sha1::new();
        sha.update(header.as_bytes());
        let sha256 = formats.sha256().then(|| {
            let mut sha256 = Sha256::new();
            sha256.update(header.as_bytes());
            sha256
        });
        BlobHasher {
            sha,
            sha256,
            expected: len,
            seen: 0,
        }
    }

    /// Feeds bytes (to both digests, one after the other, while they are in cache).
    pub fn update(&mut self, bytes: &[u8]) {
        self.seen += bytes.len() as u64;
        self.sha.update(bytes);
        if let Some(sha256) = &mut self.sha256 {
            sha256.update(bytes);
        }
    }

    /// The blob id; errors if the number of bytes fed differs from `len`.
    pub fn finish(self) -> io::Result<ObjectId> {
        if self.seen != self.expected {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "blob announced as {} bytes but {} bytes were hashed",
                    self.expected, self.seen
                ),
            ));
        }
        Ok(self.ids())
    }

    fn ids(self) -> ObjectId {
        ObjectId {
            sha1: self.sha.finalize().into(),
            sha256: self.sha256.map(|sha| sha.finalize().into()),
        }
    }
}

/// The git blob id of `bytes` (used for symlink targets and small contents).
pub fn blob_id(bytes: &[u8]) -> [u8; 20] {
    blob_ids(bytes, Formats::Sha1).sha1
}

/// The git blob ids of `bytes` in `formats`.
pub fn blob_ids(bytes: &[u8], formats: Formats) -> ObjectId {
    let mut hasher = BlobHasher::with_formats(bytes.len() as u64, formats);
    hasher.update(bytes);
    hasher.ids()
}

/// A node of the tree being built: a leaf (blob or precomputed tree) or a directory.
enum Node {
    Leaf(EntryMode, ObjectId),
    Dir(DirNode),
}

#[derive(Default)]
struct DirNode {
    children: HashMap<Vec<u8>, Node>,
}

impl DirNode {
    /// The tree id of this directory, or `None` if it holds no file at any depth. Its SHA-256
    /// id is computed if `formats` asks for it and every blob below has one.
    fn hash(&self, formats: Formats) -> Option<ObjectId> {
        let mut entries: Vec<(&[u8], EntryMode, ObjectId)> = Vec::new();
        for (name, node) in &self.children {
            match node {
                Node::Leaf(mode, id) => entries.push((name, *mode, *id)),
                Node::Dir(dir) => {
                    if let Some(id) = dir.hash(formats) {
                        entries.push((name, EntryMode::Directory, id));
                    }
                }
            }
        }
        if entries.is_empty() {
            return None;
        }
        Some(tree_object_ids(&mut entries, formats))
    }
}

/// Sorts `entries` in git order and returns the ids of the tree object they form.
fn tree_object_ids(entries: &mut [(&[u8], EntryMode, ObjectId)], formats: Formats) -> ObjectId {
    fn key<'a>(e: &(&'a [u8], EntryMode, ObjectId)) -> impl Iterator<Item = &'a u8> {
        let slash: &[u8] = if e.1 == EntryMode::Directory {
            b"/"
        } else {
            b""
        };
        e.0.iter().chain(slash)
    }
    entries.sort_unstable_by(|a, b| key(a).cmp(key(b)));
    let sha1 = tree_object::<Sha1>(entries.iter().map(|(n, m, id)| (*n, *m, &id.sha1[..])));
    let sha256 = if formats.sha256() {
        entries
            .iter()
            .map(|(n, m, id)| id.sha256.as_ref().map(|h| (*n, *m, &h[..])))
            .collect::<Option<Vec<_>>>()
            .map(|entries| tree_object::<Sha256>(entries.into_iter()).into())
    } else {
        None
    };
    ObjectId {
        sha1: sha1.into(),
        sha256,
    }
}

/// The id, in the digest `D`, of the tree object of `entries` (already in git order).
fn tree_object<'a, D: Digest>(
    entries: impl Iterator<Item = (&'a [u8], EntryMode, &'a [u8])> + Clone,
) -> sha1::digest::Output<D> {
    let len: usize = entries
        .clone()
        .map(|(name, mode, id)| mode.as_git_str().len() + 1 + name.len() + 1 + id.len())
        .sum();
    let mut sha = D::new();
    sha.update(format!("tree {len}\0").as_bytes());
    for (name, mode, id) in entries {
        sha.update(mode.as_git_str().as_bytes());
        sha.update(b" ");
        sha.update(name);
        sha.update(b"\0");
        sha.update(id);
    }
    sha.finalize()
}

/// Builds a tree hash from `(relative path, mode, blob id)` entries gathered in any order
/// (e.g. while extracting); empty directories are skipped as git does.
///
/// Inserting [`EntryMode::Directory`] records a precomputed subtree id at that path.
///
/// A builder made [`TreeBuilder::with_formats`]`(`[`Formats::Sha1AndSha256`]`)` also gives the
/// SHA-256 tree hash, if every blob inserted carries its SHA-256 id.
#[derive(Default)]
pub struct TreeBuilder {
    root: DirNode,
    formats: Formats,
}

impl TreeBuilder {
    /// An empty builder of the SHA-1 tree hash.
    pub fn new() -> TreeBuilder {
        TreeBuilder::default()
    }

    /// An empty builder of the tree hashes in `formats`.
    pub fn with_formats(formats: Formats) -> TreeBuilder {
        TreeBuilder {
            root: DirNode::default(),
            formats,
        }
    }

    /// Records a file or symlink at `path` (components separated by `/`). A later entry for the
    /// same path replaces the earlier one.
    pub fn insert(&mut self, path: &str, mode: EntryMode, blob: impl Into<ObjectId>) {
        self.insert_bytes(path.as_bytes(), mode, blob);
    }

    /// Like [`TreeBuilder::insert`] for a path given as raw bytes (names need not be UTF-8).
    /// Empty and `.` components are ignored.
    pub fn insert_bytes(&mut self, path: &[u8], mode: EntryMode, blob: impl Into<ObjectId>) {
        let components: Vec<&[u8]> = path
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
            .collect();
        self.insert_components(&components, mode, blob);
    }

    /// Like [`TreeBuilder::insert`] for a path already split into its components.
    /// A component that was a file becomes a directory (and the reverse): later entries win.
    pub fn insert_components(
        &mut self,
        components: &[&[u8]],
        mode: EntryMode,
        blob: impl Into<ObjectId>,
    ) {
        let blob = blob.into();
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
        self.finish_hashes().sha1
    }

    /// The root tree hashes in the builder's formats (the SHA-256 one `None` if a blob was
    /// inserted without its SHA-256 id).
    pub fn finish_hashes(self) -> TreeHashes {
        let formats = self.formats;
        let root = self
            .root
            .hash(formats)
            .unwrap_or_else(|| tree_object_ids(&mut [], formats));
        TreeHashes {
            sha1: GitTreeSha1(root.sha1),
            sha256: root.sha256.map(GitTreeSha256),
        }
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
    tree_hashes(dir, Formats::Sha1).map(|hashes| hashes.sha1)
}

/// [`tree_hash`] in `formats`: with [`Formats::Sha1AndSha256`], the SHA-1 and SHA-256 tree
/// hashes from one read of every file.
pub fn tree_hashes(dir: &Path, formats: Formats) -> io::Result<TreeHashes> {
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
    let hashed: Vec<(EntryMode, ObjectId)> = found
        .par_iter()
        .map(|f| {
            if f.symlink {
                let target = fs::read_link(&f.path)
                    .map_err(|e| path_error(&f.path, "cannot read link", e))?;
                let target = target.as_os_str().as_bytes();
                Ok((EntryMode::Symlink, blob_ids(target, formats)))
            } else {
                hash_file(&f.path, formats)
            }
        })
        .collect::<io::Result<_>>()?;

    // 3. Assemble the trees.
    let mut builder = TreeBuilder::with_formats(formats);
    for (f, (mode, id)) in found.iter().zip(hashed) {
        let components: Vec<&[u8]> = f.rel.iter().map(Vec::as_slice).collect();
        builder.insert_components(&components, mode, id);
    }
    Ok(builder.finish_hashes())
}

thread_local! {
    static BUFFER: RefCell<Vec<u8>> = RefCell::new(vec![0; READ_BUFFER]);
}

/// Hashes one regular file (opened without following symlinks), returning its mode and blob ids.
fn hash_file(path: &Path, formats: Formats) -> io::Result<(EntryMode, ObjectId)> {
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
    let mut hasher = BlobHasher::with_formats(meta.len(), formats);
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
        assert_eq!(h.finish().unwrap().sha1, blob_id(b"ab"));
    }

    #[test]
    fn empty_builder_is_the_empty_tree() {
        assert_eq!(
            TreeBuilder::new().finish().to_hex(),
            "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
        );
        let both = TreeBuilder::with_formats(Formats::Sha1AndSha256).finish_hashes();
        assert_eq!(
            both.sha256.unwrap().to_hex(),
            "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"
        );
        assert_eq!(TreeBuilder::new().finish_hashes().sha256, None);
    }

    #[test]
    fn sha256_blob_ids_match_git() {
        // `git hash-object --object-format=sha256 --stdin` in a SHA-256 repository.
        let id = blob_ids(b"hello\n", Formats::Sha1AndSha256);
        assert_eq!(id.sha1, blob_id(b"hello\n"));
        assert_eq!(
            GitTreeSha256(id.sha256.unwrap()).to_hex(),
            "2cf8d83d9ee29543b34a87727421fdecb7e3f3a183d337639025de576db9ebb4"
        );
    }

    #[test]
    fn a_blob_without_its_sha256_leaves_the_sha256_tree_unknown() {
        let mut b = TreeBuilder::with_formats(Formats::Sha1AndSha256);
        b.insert("a", EntryMode::File, blob_ids(b"a", Formats::Sha1AndSha256));
        b.insert("b/c", EntryMode::File, blob_id(b"c"));
        assert_eq!(b.finish_hashes().sha256, None);
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
        let id = ObjectId::from([0; 20]);
        let mut entries = vec![
            (&b"a0"[..], EntryMode::File, id),
            (b"a", EntryMode::Directory, id),
            (b"a.b", EntryMode::File, id),
            (b"a-", EntryMode::File, id),
        ];
        tree_object_ids(&mut entries, Formats::Sha1);
        let names: Vec<&[u8]> = entries.iter().map(|e| e.0).collect();
        assert_eq!(names, [&b"a-"[..], b"a.b", b"a", b"a0"]);
    }
}
